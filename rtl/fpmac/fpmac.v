// fpmac: FB-configurable floating-point multiply-accumulate, result = round(round(a*b) + c).
//
// Numerics: docs/numerics.md ("Run-time fraction width: the container").
// Operands and result travel in a container of W = 1 + EXP_BITS + MAX_FB
// bits; the active fraction width fb is a run-time input, clamped into
// [1, MAX_FB] (0 acts as 1, values above MAX_FB as MAX_FB). Container
// fraction bits below fb are ignored on input and zero on output. No inf or
// NaN codes: the all-ones exponent is an ordinary binade, overflow saturates
// to +-max, subnormals are kept, a zero product has sign sa^sb and an exact
// zero sum the sign sx & sy. ROUNDING: 0 nearest-even, 1 nearest-away,
// 2 toward zero. Bit-exact with codesign.pe.fpmac.golden_container_mac.
//
// Pipeline (LATENCY = 4 clock cycles, II = 1, no backpressure): an operation
// presented with in_valid = 1 before rising edge k appears on result with
// out_valid = 1 after rising edge k + 3.
//   stage 1: clamp fb, mask the inputs, unpack, exact (MAX_FB+1)^2 product
//   stage 2: normalise and round the product to (EXP_BITS, fb)
//   stage 3: order, align (3 guard bits + sticky) and add/subtract
//   stage 4: normalise, round and saturate the sum
// rst is synchronous and active high; it clears the valid pipeline (and the
// result), so operations in flight are dropped.
module fpmac #(
    parameter EXP_BITS = 8,            // exponent bits, 2..8
    parameter MAX_FB   = 23,           // largest run-time fraction width, 1..23
    parameter ROUNDING = 0             // 0 nearest_even, 1 nearest_away, 2 toward_zero
) (
    input  wire                             clk,
    input  wire                             rst,
    input  wire                             in_valid,
    input  wire [EXP_BITS+MAX_FB:0]         a,
    input  wire [EXP_BITS+MAX_FB:0]         b,
    input  wire [EXP_BITS+MAX_FB:0]         c,
    input  wire [$clog2(MAX_FB+1)-1:0]      fb,
    output reg                              out_valid,
    output reg  [EXP_BITS+MAX_FB:0]         result
);
    /* verilator lint_off UNUSEDPARAM */
    localparam LATENCY    = 4;                         // clock cycles from in_valid to out_valid
    /* verilator lint_on UNUSEDPARAM */
    localparam W          = 1 + EXP_BITS + MAX_FB;     // container width (bits)
    localparam FB_BITS    = $clog2(MAX_FB + 1);        // width of fb and of the shift s
    localparam BIAS       = (1 << (EXP_BITS - 1)) - 1;
    localparam PROD_W     = 2 * MAX_FB + 2;            // exact product significand (bits)
    localparam PET_W      = EXP_BITS + 2;              // product etop width (bits)
    localparam GUARD_BITS = 3;
    localparam SUM_W      = MAX_FB + GUARD_BITS + 2;   // adder significand (bits)
    localparam integer       MAX_FB_I = MAX_FB;
    localparam [FB_BITS-1:0] FB_MAX   = MAX_FB_I[FB_BITS-1:0];   // MAX_FB at the width of fb
    localparam [FB_BITS-1:0] FB_ONE   = {{(FB_BITS-1){1'b0}}, 1'b1};

    // Elaboration fails on parameters outside the supported ranges.
    generate
        if (EXP_BITS < 2 || EXP_BITS > 8 || MAX_FB < 1 || MAX_FB > 23 || ROUNDING < 0 || ROUNDING > 2) begin : g_bad
            fpmac_unsupported_parameters u_bad ();
        end
    endgenerate

    // ---- stage 1: clamp fb, mask, unpack, multiply --------------------------------
    // fb > FB_MAX is constant false when MAX_FB = 2^k - 1 (1, 3, 7).
    /* verilator lint_off CMPCONST */
    wire [FB_BITS-1:0] fb_c = (fb == 0) ? FB_ONE : ((fb > FB_MAX) ? FB_MAX : fb);
    /* verilator lint_on CMPCONST */
    wire [FB_BITS-1:0] s_in = FB_MAX - fb_c;                 // ignored low fraction bits
    wire [W-1:0]       keep = {{(1 + EXP_BITS){1'b1}}, ({MAX_FB{1'b1}} << s_in)};

    wire                sa, sb;
    wire [EXP_BITS-1:0] fa, fbe;
    wire [MAX_FB:0]     ma, mb;
    fpmac_unpack #(.EXP_BITS(EXP_BITS), .MAX_FB(MAX_FB)) u_a (.word(a & keep), .sign(sa), .field_eff(fa), .sig(ma));
    fpmac_unpack #(.EXP_BITS(EXP_BITS), .MAX_FB(MAX_FB)) u_b (.word(b & keep), .sign(sb), .field_eff(fbe), .sig(mb));

    reg                 s1_valid;
    reg                 s1_sign;
    reg [PROD_W-1:0]    s1_prod;
    reg [PET_W-1:0]     s1_etop;     // biased field of the product MSB, plus BIAS
    reg [W-1:0]         s1_c;
    reg [FB_BITS-1:0]   s1_s;

    always @(posedge clk) begin
        if (rst) s1_valid <= 1'b0;
        else     s1_valid <= in_valid;
        if (in_valid) begin
            s1_sign <= sa ^ sb;
            s1_prod <= ma * mb;
            // MSB of the product (bit PROD_W-1) has field fa + fbe - BIAS + 1.
            s1_etop <= {2'b00, fa} + {2'b00, fbe} + 1'b1;
            s1_c    <= c & keep;
            s1_s    <= s_in;
        end
    end

    // ---- stage 2: round the product ------------------------------------------------
    wire [W-1:0] p_code;
    fpmac_round #(
        .EXP_BITS(EXP_BITS), .MAX_FB(MAX_FB), .ROUNDING(ROUNDING),
        .SIG_W(PROD_W), .ET_W(PET_W), .EOFF(BIAS), .SH_W(FB_BITS)
    ) u_round_prod (
        .sign(s1_sign), .sig(s1_prod), .etop(s1_etop), .sticky_in(1'b0), .s(s1_s), .code(p_code)
    );

    reg               s2_valid;
    reg [W-1:0]       s2_p;
    reg [W-1:0]       s2_c;
    reg [FB_BITS-1:0] s2_s;

    always @(posedge clk) begin
        if (rst) s2_valid <= 1'b0;
        else     s2_valid <= s1_valid;
        if (s1_valid) begin
            s2_p <= p_code;
            s2_c <= s1_c;
            s2_s <= s1_s;
        end
    end

    // ---- stage 3: align and add ----------------------------------------------------
    wire                sum_sign, sum_sticky;
    wire [SUM_W-1:0]    sum;
    wire [EXP_BITS:0]   sum_etop;
    fpmac_align_add #(.EXP_BITS(EXP_BITS), .MAX_FB(MAX_FB), .GUARD_BITS(GUARD_BITS)) u_add (
        .x(s2_p), .y(s2_c), .sign(sum_sign), .sum(sum), .etop(sum_etop), .sticky(sum_sticky)
    );

    reg               s3_valid;
    reg               s3_sign;
    reg [SUM_W-1:0]   s3_sum;
    reg [EXP_BITS:0]  s3_etop;
    reg               s3_sticky;
    reg [FB_BITS-1:0] s3_s;

    always @(posedge clk) begin
        if (rst) s3_valid <= 1'b0;
        else     s3_valid <= s2_valid;
        if (s2_valid) begin
            s3_sign   <= sum_sign;
            s3_sum    <= sum;
            s3_etop   <= sum_etop;
            s3_sticky <= sum_sticky;
            s3_s      <= s2_s;
        end
    end

    // ---- stage 4: round the sum ----------------------------------------------------
    wire [W-1:0] r_code;
    fpmac_round #(
        .EXP_BITS(EXP_BITS), .MAX_FB(MAX_FB), .ROUNDING(ROUNDING),
        .SIG_W(SUM_W), .ET_W(EXP_BITS + 1), .EOFF(0), .SH_W(FB_BITS)
    ) u_round_sum (
        .sign(s3_sign), .sig(s3_sum), .etop(s3_etop), .sticky_in(s3_sticky), .s(s3_s), .code(r_code)
    );

    always @(posedge clk) begin
        if (rst) begin
            out_valid <= 1'b0;
            result    <= {W{1'b0}};
        end else begin
            out_valid <= s3_valid;
            if (s3_valid)
                result <= r_code;
        end
    end
endmodule
