// fpmac_unpack: split a container word into sign, effective exponent field and significand.
//
// The container is {sign, EXP_BITS exponent field, MAX_FB fraction bits}.
// Field 0 (zero and subnormals) shares the scale of field 1, so the
// effective field is max(field, 1) and the hidden bit is (field != 0);
// the value is (-1)^sign * sig * 2^(field_eff - bias - MAX_FB).
module fpmac_unpack #(
    parameter EXP_BITS = 8,
    parameter MAX_FB   = 23
) (
    input  wire [EXP_BITS+MAX_FB:0] word,
    output wire                     sign,
    output wire [EXP_BITS-1:0]      field_eff,
    output wire [MAX_FB:0]          sig
);
    wire [EXP_BITS-1:0] field  = word[EXP_BITS+MAX_FB-1:MAX_FB];
    wire                normal = |field;

    assign sign      = word[EXP_BITS+MAX_FB];
    assign field_eff = normal ? field : {{(EXP_BITS-1){1'b0}}, 1'b1};
    assign sig       = {normal, word[MAX_FB-1:0]};
endmodule
