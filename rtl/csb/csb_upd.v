// csb_upd: one weight-buffer update, new_buf = sat24(rne((buf * 2^s - grad) / 2^s)).
//
// docs/csb.md (UPD): the update -grad * 2^-s is added to the 24-bit buffer word
// exactly, the sum is rounded once to the buffer grid (ties to even) and
// saturated to 24 bits. The exact sum needs 24 + 31 + 1 bits; 64 are used.
// Purely combinational.
// Operands are sign-extended by assignment to wider signed wires.
/* verilator lint_off WIDTHEXPAND */
module csb_upd (
    input  wire [23:0] buf_in,         // signed 24-bit buffer word
    input  wire [31:0] grad,           // signed 32-bit gradient word
    input  wire [4:0]  shift,          // s, 0..31
    output wire [23:0] buf_out         // signed 24-bit updated buffer word
);
    wire signed [63:0] b_x     = $signed(buf_in);
    wire signed [63:0] g_x     = $signed(grad);
    wire signed [63:0] numer   = (b_x <<< shift) - g_x;        // exact, in units of 2^-s steps
    wire signed [63:0] quot    = numer >>> shift;              // floor
    wire        [63:0] one     = 64'd1;
    wire        [63:0] mask    = (one << shift) - one;
    wire        [63:0] rem     = numer & mask;                 // 0 .. 2^s - 1
    wire        [63:0] half    = (one << shift) >> 1;          // 2^(s-1), 0 when s = 0
    wire               up      = (shift != 5'd0) && ((rem > half) || ((rem == half) && quot[0]));
    wire signed [63:0] rounded = quot + $signed({63'd0, up});
    wire signed [63:0] max_v   = 64'sd8388607;
    wire signed [63:0] min_v   = -64'sd8388608;
    wire signed [63:0] clamped = (rounded > max_v) ? max_v : ((rounded < min_v) ? min_v : rounded);
    assign buf_out = clamped[23:0];
endmodule
/* verilator lint_on WIDTHEXPAND */
