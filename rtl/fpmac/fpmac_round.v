// fpmac_round: normalise an exact significand and round it once to format (EXP_BITS, fb).
//
// Input value: (-1)^sign * (sig + d) * 2^k, where the MSB of sig would sit
// in the binade of biased exponent field etop - EOFF (EOFF lets callers keep
// etop unsigned when that field can be negative), and d is 0 when
// sticky_in = 0 and lies strictly between 0 and 1 when sticky_in = 1.
//
// The value set of (EXP_BITS, fb) placed in the container is the container
// format (EXP_BITS, MAX_FB) with a quantum 2^s times larger, s = MAX_FB - fb.
// So the significand is normalised at MAX_FB precision (hidden bit on the
// MSB, or denormalised to the field-1 scale for subnormals) and the rounding
// position is moved up by s bits. Rounding: 0 nearest-even, 1 nearest-away,
// 2 toward zero. A carry out of the fraction ripples into the exponent field;
// a magnitude above the largest code saturates to it (no inf code). The
// output container has its low s fraction bits zero.
//
// Requirements: SIG_W >= MAX_FB + 2 (X = SIG_W - 1 - MAX_FB >= 1 bits below
// the container LSB). With sticky_in = 1 the normalising left shift must be
// below X bits, so that the zeros it shifts in stay under the round bit: the
// adder (X = GUARD_BITS + 1 = 4) shifts left by at most 2 when it sets sticky.
module fpmac_round #(
    parameter EXP_BITS = 8,
    parameter MAX_FB   = 23,
    parameter ROUNDING = 0,
    parameter SIG_W    = 48,           // significand width (bits)
    parameter ET_W     = 10,           // width of etop (bits)
    parameter EOFF     = 0,            // offset added to the MSB's biased field in etop
    parameter SH_W     = 5             // width of s (bits)
) (
    input  wire                     sign,
    input  wire [SIG_W-1:0]         sig,
    input  wire [ET_W-1:0]          etop,
    input  wire                     sticky_in,
    input  wire [SH_W-1:0]          s,
    output wire [EXP_BITS+MAX_FB:0] code
);
    localparam LZ_W  = $clog2(SIG_W + 1);
    localparam AW    = ((ET_W > LZ_W) ? ET_W : LZ_W) + 2;   // exponent arithmetic width
    localparam X     = SIG_W - 1 - MAX_FB;                  // bits below the container LSB
    localparam MAG_W = EXP_BITS + MAX_FB;                   // magnitude bits of a code
    localparam CW    = AW + MAX_FB + 1;                     // code arithmetic width
    localparam integer  ONE_OFF_I = EOFF + 1;
    localparam [AW-1:0] ONE_OFF   = ONE_OFF_I[AW-1:0];
    localparam [AW-1:0] AW_ONE    = {{(AW-1){1'b0}}, 1'b1};
    localparam [CW-1:0] CW_ONE    = {{(CW-1){1'b0}}, 1'b1};
    localparam [SIG_W-1:0] SIG_ONE = {{(SIG_W-1){1'b0}}, 1'b1};
    localparam [SIG_W-1:0] LSB0 = {{MAX_FB{1'b0}}, 1'b1, {X{1'b0}}};   // container LSB when s = 0

    wire [LZ_W-1:0] lz;
    fpmac_lzc #(.W(SIG_W), .CW(LZ_W)) u_lzc (.v(sig), .count(lz));

    // e_top = etop - EOFF is the biased field of sig's MSB position.
    wire [AW-1:0] et     = {{(AW-ET_W){1'b0}}, etop};
    wire [AW-1:0] lzx    = {{(AW-LZ_W){1'b0}}, lz};
    wire          above  = (et >= ONE_OFF);               // e_top >= 1
    wire [AW-1:0] room   = et - ONE_OFF;                  // e_top - 1: left shift that reaches field 1
    wire          normal = above && (room >= lzx) && (|sig);
    wire [AW-1:0] lsh    = normal ? lzx : room;           // left shift (above)
    wire [AW-1:0] rsh    = ONE_OFF - et;                  // right shift (not above)

    // After the shift, bit SIG_W-1 is the hidden-bit position of the result.
    wire [SIG_W-1:0] n        = above ? (sig << lsh) : (sig >> rsh);
    wire             sticky_r = (!above) && (|(sig & ~({SIG_W{1'b1}} << rsh)));
    wire [AW-1:0]    field    = normal ? (room + AW_ONE - lzx) : AW_ONE;

    // Rounding position: container bit s, i.e. bit s + X of n.
    wire [SIG_W-1:0] lsb_bit   = LSB0 << s;
    wire [SIG_W-1:0] round_bit = lsb_bit >> 1;
    wire [SIG_W-1:0] low_mask  = round_bit - SIG_ONE;
    wire             r   = |(n & round_bit);
    wire             st  = (|(n & low_mask)) | sticky_in | sticky_r;
    wire             l   = |(n & lsb_bit);
    wire             up  = (ROUNDING == 0) ? (r & (st | l)) :
                           (ROUNDING == 1) ? r : 1'b0;

    wire [MAX_FB:0] kept_mask = {(MAX_FB+1){1'b1}} << s;
    wire [MAX_FB:0] kept      = n[SIG_W-1:X] & kept_mask;

    // The hidden bit adds one to (field - 1), and a rounding carry ripples on.
    wire [CW-1:0] field_w   = {{(CW-AW){1'b0}}, field};
    wire [CW-1:0] kept_w    = {{(CW-MAX_FB-1){1'b0}}, kept};
    wire [CW-1:0] up_w      = {{(CW-1){1'b0}}, up} << s;
    wire [CW-1:0] code_wide = ((field_w - CW_ONE) << MAX_FB) + kept_w + up_w;
    wire          overflow  = |code_wide[CW-1:MAG_W];
    wire [MAG_W-1:0] max_mag = {{EXP_BITS{1'b1}}, ({MAX_FB{1'b1}} << s)};

    assign code = {sign, overflow ? max_mag : code_wide[MAG_W-1:0]};
endmodule
