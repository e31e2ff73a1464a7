// csb_upd: one weight-buffer update, new_buf = sat24(rne((buf * 2^s - grad) / 2^s)); with LEFT the gradient is
// first sat32(grad * 2^s) and the update is at shift 0.
//
// docs/csb.md (UPD): the update -grad * 2^-s is added to the 24-bit buffer word exactly, the sum is rounded once
// to the buffer grid (ties to even) and saturated to 24 bits. Why no 64-bit sum: (buf * 2^s - grad) / 2^s is
// buf + n / 2^s with n = -grad, so its floor is buf + (n >>> s) and its remainder n's low s bits; 33-bit shifts and
// a 35-bit sum give the same word (tests/rtl/test_csb_upd.py proves it against the plain 64-bit form). LEFT's
// grad * 2^s fits 32 bits where the bits it moves past bit 31 all equal its sign.
// Purely combinational. Operands are sign-extended by assignment to wider signed wires.
/* verilator lint_off WIDTHEXPAND */
module csb_upd (
    input  wire [23:0] buf_in,         // signed 24-bit buffer word
    input  wire [31:0] grad,           // signed 32-bit gradient word
    input  wire [4:0]  shift,          // s, 0..31
    input  wire        left,           // LEFT: the gradient times 2^s (saturated), the update at shift 0
    output wire [23:0] buf_out         // signed 24-bit updated buffer word
);
    wire signed [31:0] g_top   = $signed(grad) >>> (5'd31 - shift);
    wire               g_fits  = (g_top == 32'sd0) || (g_top == -32'sd1);
    wire        [31:0] g_left  = g_fits ? (grad << shift) : (grad[31] ? 32'h8000_0000 : 32'h7FFF_FFFF);
    wire        [31:0] g       = left ? g_left : grad;
    wire        [4:0]  s       = left ? 5'd0 : shift;

    wire signed [32:0] neg_g   = -$signed({g[31], g});                 // n = -grad, exact in 33 bits
    wire signed [32:0] steps   = neg_g >>> s;                          // floor(n / 2^s)
    wire        [31:0] mask    = (32'd1 << s) - 32'd1;
    wire        [31:0] rem     = neg_g[31:0] & mask;                   // n mod 2^s (s <= 31: n's low bits)
    wire        [31:0] half    = (32'd1 << s) >> 1;                    // 2^(s-1), 0 when s = 0
    wire               odd     = buf_in[0] ^ steps[0];                 // the floor's parity
    wire               up      = (s != 5'd0) && ((rem > half) || ((rem == half) && odd));
    wire signed [34:0] rounded = $signed(buf_in) + steps + $signed({34'd0, up});
    wire               over    = !rounded[34] && (rounded[33:23] != 11'd0);
    wire               under   = rounded[34] && (rounded[33:23] != 11'h7FF);
    assign buf_out = over ? 24'h7FFFFF : (under ? 24'h800000 : rounded[23:0]);
endmodule
/* verilator lint_on WIDTHEXPAND */
