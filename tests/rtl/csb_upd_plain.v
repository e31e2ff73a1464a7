// The UPD rule written plainly on 64-bit sums (LEFT: the gradient times 2^s clamped to 32 bits, then shift 0):
// the form tests/rtl/test_csb_upd.py proves rtl/csb/csb_upd.v equal to, for every input.
module csb_upd_plain (
    input  wire [23:0] buf_in,
    input  wire [31:0] grad,
    input  wire [4:0]  shift,
    input  wire        left,
    output wire [23:0] buf_out
);
    wire signed [63:0] g_x     = $signed(grad);
    wire signed [63:0] g_big   = g_x <<< shift;
    wire signed [63:0] g_sat   = (g_big > 64'sd2147483647) ? 64'sd2147483647
                                                           : ((g_big < -64'sd2147483648) ? -64'sd2147483648 : g_big);
    wire signed [63:0] g       = left ? g_sat : g_x;
    wire        [4:0]  s       = left ? 5'd0 : shift;
    wire signed [63:0] b_x     = $signed(buf_in);
    wire signed [63:0] numer   = (b_x <<< s) - g;
    wire signed [63:0] quot    = numer >>> s;
    wire        [63:0] rem     = numer & ((64'd1 << s) - 64'd1);
    wire        [63:0] half    = (64'd1 << s) >> 1;
    wire               up      = (s != 5'd0) && ((rem > half) || ((rem == half) && quot[0]));
    wire signed [63:0] rounded = quot + $signed({63'd0, up});
    wire signed [63:0] clamped = (rounded > 64'sd8388607) ? 64'sd8388607
                                                          : ((rounded < -64'sd8388608) ? -64'sd8388608 : rounded);
    assign buf_out = clamped[23:0];
endmodule
