// fpmac_align_add: exact-interval sum of two container codes, ready for fpmac_round.
//
// The operands are ordered by magnitude (operand 1 the larger). Operand 2's
// significand is extended by GUARD_BITS zero bits and shifted right by the
// exponent gap; the bits that fall off are folded into a sticky bit. With
// sticky set the true operand 2 is a little larger than the aligned one, so
// a difference borrows one unit and the sticky bit stands for the remainder:
// the true sum then lies strictly between sum and sum + 1 units. This is the
// structure of codesign.numerics.fparith.fp_add, at MAX_FB precision.
//
// Outputs: sum (GUARD_BITS + MAX_FB + 2 bits) whose MSB lies in the binade of
// biased field etop = field_eff(operand 1) + 1; sign of the result, with an
// exact zero getting sign1 AND sign2 (x + (-x) = +0, (-0) + (-0) = -0).
module fpmac_align_add #(
    parameter EXP_BITS   = 8,
    parameter MAX_FB     = 23,
    parameter GUARD_BITS = 3
) (
    input  wire [EXP_BITS+MAX_FB:0]        x,
    input  wire [EXP_BITS+MAX_FB:0]        y,
    output wire                            sign,
    output wire [MAX_FB+GUARD_BITS+1:0]    sum,
    output wire [EXP_BITS:0]               etop,
    output wire                            sticky
);
    localparam WW = MAX_FB + 1 + GUARD_BITS;   // aligned significand width (bits)

    // Codes are ordered like their magnitudes, so compare them as integers.
    wire swap = y[EXP_BITS+MAX_FB-1:0] > x[EXP_BITS+MAX_FB-1:0];
    wire [EXP_BITS+MAX_FB:0] op1 = swap ? y : x;
    wire [EXP_BITS+MAX_FB:0] op2 = swap ? x : y;

    wire                s1, s2;
    wire [EXP_BITS-1:0] f1, f2;
    wire [MAX_FB:0]     m1, m2;
    fpmac_unpack #(.EXP_BITS(EXP_BITS), .MAX_FB(MAX_FB)) u_op1 (.word(op1), .sign(s1), .field_eff(f1), .sig(m1));
    fpmac_unpack #(.EXP_BITS(EXP_BITS), .MAX_FB(MAX_FB)) u_op2 (.word(op2), .sign(s2), .field_eff(f2), .sig(m2));

    wire [EXP_BITS-1:0] gap      = f1 - f2;
    wire [WW-1:0]       wide1    = {m1, {GUARD_BITS{1'b0}}};
    wire [WW-1:0]       wide2    = {m2, {GUARD_BITS{1'b0}}};
    wire [WW-1:0]       aligned2 = wide2 >> gap;
    assign sticky = |(wide2 & ~({WW{1'b1}} << gap));

    wire subtract = s1 ^ s2;
    assign sum = subtract ? ({1'b0, wide1} - {1'b0, aligned2} - sticky)
                          : ({1'b0, wide1} + {1'b0, aligned2});

    wire exact_zero = ~(|sum) & ~sticky;
    assign sign = exact_zero ? (s1 & s2) : s1;
    assign etop = {1'b0, f1} + 1'b1;
endmodule
