// csb_sat_add: signed saturating addition sum = sat(a + b) to ACC_BITS bits.
//
// docs/csb.md ("Numbers"): every accumulator addition clamps to
// [-2^(ACC_BITS-1), 2^(ACC_BITS-1)-1]. The addition is done exactly in
// 34 bits (a is at most 32 bits, b at most 32 bits) and then clamped.
// Purely combinational.
// Operands are sign-extended by assignment to wider signed wires.
/* verilator lint_off WIDTHEXPAND */
module csb_sat_add #(
    parameter ACC_BITS = 32,           // accumulator width (bits), 16..32
    parameter B_BITS   = 20            // width of the signed addend b (bits), 1..32
) (
    input  wire [ACC_BITS-1:0] a,      // signed accumulator
    input  wire [B_BITS-1:0]   b,      // signed addend
    output wire [ACC_BITS-1:0] sum     // signed, saturated
);
    localparam SW = 34;
    localparam [SW-1:0] MAX_BITS = {{(SW - ACC_BITS + 1){1'b0}}, {(ACC_BITS - 1){1'b1}}};
    wire signed [SW-1:0] max_v = MAX_BITS;
    wire signed [SW-1:0] min_v = ~MAX_BITS;
    wire signed [SW-1:0] a_x   = $signed(a);
    wire signed [SW-1:0] b_x   = $signed(b);
    wire signed [SW-1:0] exact = a_x + b_x;
    wire signed [SW-1:0] clamped = (exact > max_v) ? max_v : ((exact < min_v) ? min_v : exact);
    assign sum = clamped[ACC_BITS-1:0];
endmodule
/* verilator lint_on WIDTHEXPAND */
