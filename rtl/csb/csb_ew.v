// csb_ew: the result word of one element of the CSB PE's element-wise ops (docs/csb.md, "Flags and
// element-wise operations"), for the word streamed in this cycle.
//
//   SELECT  v where z > 0, else 0     (word: z, ACC_BITS wide; v: SELECT's V word or the held sum)
//   SHR     v >>> s, flooring         (word: v, a 24-bit buffer word)
//   RELU    v where v > 0, else 0     (word: v, ACC_BITS wide)
//
// Purely combinational; the PE registers the result in its output register. Every result is the
// WB_W-bit value sign-extended to the 32-bit stream word.
/* verilator lint_off WIDTHEXPAND */
module csb_ew #(
    parameter ACC_BITS = 32,           // accumulator width (bits), 16..32
    parameter WB_W     = 32            // the PE's wide words: max(ACC_BITS, 24)
) (
    input  wire [1:0]      op,         // 0 SELECT, 1 SHR, 2 RELU
    input  wire [4:0]      shift,      // SHR's s
    input  wire [31:0]     word,       // the streamed word
    input  wire [WB_W-1:0] v,          // SELECT's v
    output wire [31:0]     result
);
    wire signed [WB_W-1:0] acc_x  = $signed(word[ACC_BITS-1:0]);
    wire signed [WB_W-1:0] buf_x  = $signed(word[23:0]);
    wire signed [WB_W-1:0] shr_x  = buf_x >>> shift;
    wire signed [WB_W-1:0] relu_x = acc_x[WB_W-1] ? {WB_W{1'b0}} : acc_x;
    wire                   z_pos  = !word[ACC_BITS-1] && (word[ACC_BITS-1:0] != {ACC_BITS{1'b0}});
    wire signed [WB_W-1:0] sel_x  = z_pos ? $signed(v) : {WB_W{1'b0}};
    wire signed [WB_W-1:0] out_x  = (op == 2'd0) ? sel_x : ((op == 2'd1) ? shr_x : relu_x);
    wire signed [31:0]     out_32 = out_x;
    assign result = out_32;
endmodule
/* verilator lint_on WIDTHEXPAND */
