// csb_pe: sparse-CSB training PE (FP, EB, WG, UPD on one compressed sparse block).
//
// Contract: docs/csb.md, bit for bit (header, sections, status words 0..3, saturation order). Architecture after
// paper 002, Sec. 5.2/5.3:
//
//   load    every input word moves in one clock cycle (in_ready stays high) into on-chip buffers, each a RAM with one
//           write and one read port so that synthesis maps it onto block RAM: index buffer (four index bytes a word,
//           distributed RAM read in the same cycle), weight buffer W8 (four 8-bit weights a word, FP/EB), wide weight
//           buffer WA (one G word for WG, one 24-bit buffer word for UPD, per entry and tap), data buffers X and DY
//           (bytes; one copy per MAC group, so each group reads its own position), result buffer R (PARALLEL banks of
//           BATCH accumulators, one bank per MAC group; see R_DEPTH for the layout). UPD computes its result while
//           the gradient words stream in.
//   compute one cycle per (entry e, tap t, chunk of PARALLEL output positions; two for WG on a PACKED build), in
//           the contract order e, t,
//           positions, as a two-stage pipeline: stage A takes the entry's x/y from the index buffer as the high
//           (channel) address bits and the tap/position counters as the low bits and presents the read addresses;
//           stage B, one cycle later, multiplies, accumulates and writes back. FP gathers X at the position shifted
//           by the tap; EB reads the same storage with x and y exchanged and scatters into the position shifted by
//           the tap, so it spends no step on the input halo. R forwards a word written in the cycle it is read
//           (csb_ram BYPASS), so consecutive steps on the same accumulators see each other's sums. In WG each group
//           keeps one partial; the partials are added to G (group 0 first) in stage B of the last chunk of a tap.
//   drain   the status word, then (status 0) the result words; stage B of the last compute step runs in the cycle the
//           status word is loaded.
//
// Header flags (docs/csb.md, "Flags and element-wise operations"): ZERO runs the initial ACC (FP, EB) or G (WG)
// section as a virtual one with in_ready low, the PE writing zeros: a word of R (every bank, every lane) a cycle
// for FP and EB, a G word a cycle for WG; G_FIRST moves WG's G section after the index; LEFT feeds UPD
// sat32(G << s) at shift 0. EW streams: after the header (SELECT: and v into WA) the status goes into the output
// register (S_EWST), then each word of the last section (v; SELECT's z) is taken while that register is free or
// given and its result (csb_ew: SELECT v or 0, SHR v >>> s, RELU v or 0) loaded into it (S_EWS); S_EWD gives
// the last.
// HOLD (FP, EB, WG) drains the status alone and leaves the sums in R or WA; CARRY skips the initial section and
// starts from them. It is accepted after an accepted HOLD of the same op, stride and kernel (WG: the same nnz)
// only, else status 1: held_* record what the transaction before left. SELECT with CARRY takes no V: it reads the
// held FP or EB sums from R through the walker, in stream order, as its Z words arrive (as many elements as sums,
// else status 1).
//
// S2 (MAX_STRIDE 2): FP, EB and WG step over the input at stride 2 (docs/csb.md, "Stride 2"): X and EB's sums
// cover the stride-2 tile, and a stride-2 EB grid keeps a step's targets in different R banks.
// K1 (K > 1): FP, EB, WG and UPD run as on this PE built with K = 1 (docs/csb.md, "Kernel 1"): one tap, the
// kernel-1 tile's dimensions and section lengths, a CARRY only onto sums held under K1 (held_k1).
// Cycles of one transaction from its first input handshake to its last output handshake, without stalls
// (codesign.pe.csb.cycles): n_in + zero + compute + n_out + 1, an element-wise op with elements n_in + 2;
// compute = nnz*k*k*ceil(OUT_H*OUT_W/PARALLEL) for FP, EB and WG (either stride; k = 1 under K1; twice that for WG
// on a PACKED build), 0 for UPD, the element-wise ops and refused transactions; zero the cycles of a ZERO
// transaction's virtual section.
// STREAM_BITS 64 or 128 (docs/csb.md, "Wide streams"): a beat of PARTS 32-bit parts moves a cycle. The header is a
// beat (parts above the first 0, else status 1); every section starts a new beat (bytes 4 * PARTS, words PARTS a
// beat; the rest of a section's last beat is ignored); R takes and gives PARTS lanes of one position a cycle
// (BATCH a multiple of PARTS), WA is PARTS banks by address (UPD, SELECT and the G and buffer sections PARTS words
// a cycle); the status is a beat and the results PARTS to a beat, the last one's rest 0. n_in and n_out count beats.
// LOSS (element-wise op 3, on a build with LOSS = 1): after its header csb_loss takes the stream and loads the output
// register (S_LOSS) until its last code is given (docs/csb.md, "The loss on the PE").
// rst is synchronous and active high; it drops a transaction in flight. Address and counter arithmetic is
// written at AW bits (or integer width) and relies on Verilog's sizing rules to extend and truncate; Verilator's
// width warnings are switched off for that reason.
`include "codesign_constants.vh"  // stream word width and status codes (codesign/hw/constants.py)

/* verilator lint_off WIDTHEXPAND */
/* verilator lint_off WIDTHTRUNC */
module csb_pe #(
    parameter BLOCK_ROWS = 16,         // entries per block row, 1..16
    parameter BLOCK_COLS = 16,         // entries per block column, 1..16
    parameter K          = 1,          // kernel size, 1..7
    parameter OUT_H      = 1,          // output tile height (positions)
    parameter OUT_W      = 1,          // output tile width (positions)
    parameter BATCH      = 1,          // MAC lanes b, 1..16
    parameter PARALLEL   = 1,          // MAC groups P, 1..8
    parameter ACC_BITS   = 32,         // accumulator width (bits), 16..32
    parameter MAX_STRIDE = 1,          // 2: FP, EB and WG also run at stride 2 (header S2)
    parameter PACKED     = 0,          // 1: two lanes' products a multiplier (csb_group_packed), WG two cycles a step
    parameter STREAM_BITS = 32,        // stream beat: 32, 64 or 128 bits (PARTS 32-bit parts)
    parameter LOSS       = 0           // 1: the LOSS unit (csb_loss; element-wise op 3), else LOSS is status 1
) (
    input  wire        clk,
    input  wire        rst,
    input  wire [STREAM_BITS-1:0] in_data,
    input  wire        in_valid,
    output wire        in_ready,
    output reg  [STREAM_BITS-1:0] out_data,
    output reg         out_valid,
    input  wire        out_ready
);
    localparam IN_H     = OUT_H + K - 1;                 // the input tile at stride 1
    localparam IN_W     = OUT_W + K - 1;
    localparam IN_H2    = 2 * (OUT_H - 1) + K;           // ... and at stride 2
    localparam IN_W2    = 2 * (OUT_W - 1) + K;
    localparam KK       = K * K;
    localparam OUT_POS  = OUT_H * OUT_W;
    localparam IN_POS   = IN_H * IN_W;
    localparam IN_POS2  = IN_H2 * IN_W2;
    localparam MAX_NNZ  = BLOCK_ROWS * BLOCK_COLS;
    localparam WB_DEPTH = MAX_NNZ * KK;
    localparam XB_BYTES = BLOCK_COLS * IN_POS * BATCH;   // X: (channel, position, lane)
    localparam XB_BYTES2 = BLOCK_COLS * IN_POS2 * BATCH;
    localparam XB_MAX   = (MAX_STRIDE == 2) ? XB_BYTES2 : XB_BYTES;
    localparam DB_BYTES = BLOCK_ROWS * OUT_POS * BATCH;  // DY: (channel, position, lane)
    localparam FP_WORDS = BLOCK_ROWS * OUT_POS * BATCH;  // FP accumulators
    localparam EB_WORDS = BLOCK_COLS * IN_POS * BATCH;   // EB accumulators
    localparam EB_WORDS2 = BLOCK_COLS * IN_POS2 * BATCH;
    localparam WB_W     = (ACC_BITS > 24) ? ACC_BITS : 24;
    localparam OUT_CH   = (OUT_POS + PARALLEL - 1) / PARALLEL;   // position chunks (FP, EB, WG)
    localparam AW       = 24;                                    // counter and address width (bits)
    localparam PW       = 12;                                    // tile row/column width (bits)
    // R: PARALLEL banks of BATCH accumulators. Position (r, c) of channel ch of the result grid
    // (FP: OUT_H x OUT_W, EB: IN_H x IN_W) lives in bank (r*OUT_W + c) mod PARALLEL, word
    // (ch*H + r)*ceil(W/PARALLEL) + c/PARALLEL: the targets of one step are PARALLEL consecutive
    // output positions shifted by one tap, so they always fall into different banks. At stride 2
    // the EB grid (IN_H2 x IN_W2) halves r and c first: bank ((r/2)*OUT_W + c/2) mod PARALLEL,
    // word (ch*IN_H2 + r)*CW_IN2 + 2*((c/2)/PARALLEL) + c%2, since a step's targets are then
    // (2*oy + ky, 2*ox + kx): consecutive output positions shifted by (ky/2, kx/2) at one parity.
    localparam CW_OUT   = (OUT_W + PARALLEL - 1) / PARALLEL;
    localparam CW_IN    = (IN_W + PARALLEL - 1) / PARALLEL;
    localparam CW_IN2   = 2 * (((IN_W2 + 1) / 2 + PARALLEL - 1) / PARALLEL);
    localparam R_FP     = BLOCK_ROWS * OUT_H * CW_OUT;
    localparam R_EB     = BLOCK_COLS * IN_H * CW_IN;
    localparam R_EB2    = BLOCK_COLS * IN_H2 * CW_IN2;
    localparam R_EB_MAX = (MAX_STRIDE == 2 && R_EB2 > R_EB) ? R_EB2 : R_EB;
    localparam R_DEPTH  = (R_FP > R_EB_MAX) ? R_FP : R_EB_MAX;
    localparam PARTS    = STREAM_BITS / 32;                       // 32-bit parts a beat
    localparam LP       = (PARTS == 4) ? 2 : ((PARTS == 2) ? 1 : 0);
    localparam BEAT_BYTES = 4 * PARTS;
    localparam IDX_WORDS = (MAX_NNZ + BEAT_BYTES - 1) / BEAT_BYTES;   // index and W8 rows: a beat each
    localparam W8_WORDS = (WB_DEPTH + BEAT_BYTES - 1) / BEAT_BYTES;
    localparam WA_ROWS  = (WB_DEPTH + PARTS - 1) / PARTS;            // rows of each of WA's PARTS banks
    localparam X_WORDS  = (XB_MAX + 3) / 4;
    localparam D_WORDS  = (DB_BYTES + 3) / 4;
    localparam R_AW     = (R_DEPTH <= 2) ? 1 : $clog2(R_DEPTH);
    localparam W8_AW    = (W8_WORDS <= 2) ? 1 : $clog2(W8_WORDS);
    localparam WA_AW    = (WA_ROWS <= 2) ? 1 : $clog2(WA_ROWS);

    localparam [AW-1:0] L_KK       = KK;
    localparam [AW-1:0] L_DB_BYTES = DB_BYTES;
    localparam [AW-1:0] L_FP_WORDS = FP_WORDS;
    localparam [AW-1:0] L_EB_WORDS = EB_WORDS, L_EB_WORDS2 = EB_WORDS2;
    localparam [AW-1:0] L_OUT_CH   = OUT_CH;
    localparam [PW-1:0] L_OUT_H    = OUT_H, L_OUT_W = OUT_W, L_IN_H = IN_H, L_IN_W = IN_W;
    localparam [PW-1:0] L_IN_H2    = IN_H2, L_IN_W2 = IN_W2;
    localparam [PW-1:0] L_P        = PARALLEL;
    localparam [AW-1:0] L_CW_OUT   = CW_OUT, L_CW_IN = CW_IN, L_CW_IN2 = CW_IN2;
    localparam [AW-1:0] L_R_FP     = R_FP, L_R_EB = R_EB, L_R_EB2 = R_EB2;   // R words a ZERO clears (all banks, lanes)
    // K1 (K > 1): the tile of a 1 x 1 kernel on this build, at stride 1 (the output tile) and 2
    localparam IN_H2_1 = 2 * (OUT_H - 1) + 1, IN_W2_1 = 2 * (OUT_W - 1) + 1;
    localparam CW_IN2_1 = 2 * (((IN_W2_1 + 1) / 2 + PARALLEL - 1) / PARALLEL);
    localparam [PW-1:0] L_IN_H2_1  = IN_H2_1, L_IN_W2_1 = IN_W2_1;
    localparam [AW-1:0] L_XB_1     = BLOCK_COLS * OUT_POS * BATCH, L_XB2_1 = BLOCK_COLS * IN_H2_1 * IN_W2_1 * BATCH;
    localparam [AW-1:0] L_CW_IN2_1 = CW_IN2_1;
    localparam [AW-1:0] L_R_EB_1   = BLOCK_COLS * OUT_H * CW_OUT, L_R_EB2_1 = BLOCK_COLS * IN_H2_1 * CW_IN2_1;
    localparam [2:0]    ROW_RES = OUT_W % PARALLEL;   // (r*OUT_W) mod P steps by this per row
    localparam [AW-1:0] L_MAX_NNZ  = MAX_NNZ;
    localparam [3:0]    L_ROWS     = BLOCK_ROWS - 1;   // largest valid y
    localparam [3:0]    L_COLS     = BLOCK_COLS - 1;   // largest valid x

    generate
        if (BLOCK_ROWS < 1 || BLOCK_ROWS > 16 || BLOCK_COLS < 1 || BLOCK_COLS > 16 || K < 1 || K > 7 ||
            OUT_H < 1 || OUT_W < 1 || BATCH < 1 || BATCH > 16 || PARALLEL < 1 || PARALLEL > 8 ||
            ACC_BITS < 16 || ACC_BITS > 32 || MAX_STRIDE < 1 || MAX_STRIDE > 2 || PACKED < 0 || PACKED > 1 ||
            LOSS < 0 || LOSS > 1 ||
            (PACKED && BATCH % 2 != 0) || (STREAM_BITS != 32 && STREAM_BITS != 64 && STREAM_BITS != 128) ||
            BATCH % (STREAM_BITS / 32) != 0) begin : g_bad
            csb_pe_unsupported_parameters u_bad ();
        end
    endgenerate

    localparam [1:0] OP_FP = 2'd0, OP_EB = 2'd1, OP_WG = 2'd2, OP_UPD = 2'd3;
    localparam [1:0] EW_SELECT = 2'd0, EW_SHR = 2'd1, EW_RELU = 2'd2, EW_LOSS = 2'd3;
    localparam EW_CAP = (WB_DEPTH < 511) ? WB_DEPTH : 511;   // elements of one element-wise transaction
    localparam [AW-1:0] L_EW_CAP = EW_CAP;
    localparam LOSS_CLASSES = (EW_CAP / BATCH < 32) ? EW_CAP / BATCH : 32;   // classes of one LOSS
    localparam [AW-1:0] L_LOSS_CLASSES = LOSS_CLASSES;

    // States: the header, one per input section, compute, drain; an element-wise op's status load, stream
    // and last result. in_ready is high in the header and the section states, and in S_EWS while the output
    // register is free or given.
    localparam [3:0] S_HEAD = 4'd0, S_IDX = 4'd1, S_W8 = 4'd2, S_XB = 4'd3, S_DB = 4'd4, S_RB = 4'd5,
                     S_GW = 4'd6, S_BW = 4'd7, S_UG = 4'd8, S_RUN = 4'd9, S_SEND = 4'd10, S_EWST = 4'd11,
                     S_EWS = 4'd12, S_EWD = 4'd13, S_LOSS = 4'd14;

    reg [3:0]  state;
    reg [1:0]  op;
    reg [4:0]  shift;
    reg [8:0]  nnz;
    reg        zero, g_first, left, ew, hold, carry;  // header flags
    reg        s2;                     // stride 2 (a SELECT with CARRY: the held sums' stride)
    reg        k1;                     // K1 on a K > 1 build: one tap (a SELECT with CARRY: the held sums' kernel)
    reg        held_valid;             // the transaction before was an accepted HOLD: its sums are in R or WA
    reg [1:0]  held_op;
    reg [8:0]  held_nnz;
    reg        held_s2;
    reg        held_k1;
    reg        bad_index;
    reg [`CODESIGN_STATUS_BITS-1:0] status;
    reg [AW-1:0] cnt;                  // section: bytes or words loaded; drain: result words sent
    reg        sent_status;

    // a ZERO transaction's initial section is virtual: zeros (an R or a G word a cycle), nothing taken from the stream
    wire virt = zero && (state == S_RB || state == S_GW);
    wire out_free = !out_valid || out_ready;   // the output register may be loaded this cycle
    wire loss_in_ready, loss_load, loss_done;
    wire [STREAM_BITS-1:0] loss_beat;
    assign in_ready = ((state < S_RUN) && !virt) || (state == S_EWS && out_free) || (state == S_LOSS && loss_in_ready);
    wire is_fp = (op == OP_FP) && !ew;
    wire is_eb = (op == OP_EB) && !ew;
    wire is_wg = (op == OP_WG) && !ew;
    wire wg_two = PACKED && is_wg;     // a packed WG step takes two cycles, half the lanes each
    wire is_sel = ew && (op == EW_SELECT);
    // the transaction's input tile and EB grid: stride 1, or 2 with S2; of the K x K kernel, or 1 x 1 with K1
    wire [PW-1:0] in_h_t  = k1 ? (s2 ? L_IN_H2_1 : L_OUT_H) : (s2 ? L_IN_H2 : L_IN_H);
    wire [PW-1:0] in_w_t  = k1 ? (s2 ? L_IN_W2_1 : L_OUT_W) : (s2 ? L_IN_W2 : L_IN_W);
    wire [AW-1:0] cw_in_t = k1 ? (s2 ? L_CW_IN2_1 : L_CW_OUT) : (s2 ? L_CW_IN2 : L_CW_IN);
    wire [AW-1:0] eb_words_t = k1 ? (s2 ? L_XB2_1 : L_XB_1) : (s2 ? L_EB_WORDS2 : L_EB_WORDS);  // = X's bytes
    wire [AW-1:0] r_eb_t  = k1 ? (s2 ? L_R_EB2_1 : L_R_EB_1) : (s2 ? L_R_EB2 : L_R_EB);  // R words EB's ZERO clears

    // ---- header decode ---------------------------------------------------------------
    wire [31:0] h_word = in_data[31:0];
    wire       h_upper = |(in_data >> 32);   // a header beat's other parts must be 0
    wire [1:0] h_op    = h_word[1:0];
    wire [4:0] h_shift = h_word[12:8];
    wire [8:0] h_nnz   = h_word[24:16];
    wire       h_zero  = h_word[2], h_gf = h_word[3], h_left = h_word[4], h_ew = h_word[5];
    wire       h_hold  = h_word[6], h_carry = h_word[7], h_s2 = h_word[13], h_k1 = h_word[14];
    wire       h_k1e   = h_k1 && (K > 1);   // on a kernel-1 build K1 changes nothing
    wire       h_carry_bad = h_zero || h_gf || !held_valid || held_op != h_op || (h_op == OP_WG && held_nnz != h_nnz) ||
                             held_s2 != h_s2 || held_k1 != h_k1e;
    wire [AW-1:0] held_sums = (held_op != OP_EB) ? L_FP_WORDS
                            : (held_k1 ? (held_s2 ? L_XB2_1 : L_XB_1) : (held_s2 ? L_EB_WORDS2 : L_EB_WORDS));
    wire       h_sel_bad = h_op != EW_SELECT || !held_valid || held_op[1] || {{(AW-9){1'b0}}, h_nnz} != held_sums;
    wire       h_s2_bad = h_s2 && (MAX_STRIDE < 2 || h_ew || h_op == OP_UPD);
    wire       h_bad   = ((h_word & 32'hFE008000) != 32'd0) || h_upper || h_s2_bad ||
                         (h_ew ? (h_zero || h_gf || h_left || h_hold || h_k1 ||
                                  (h_op == EW_LOSS ? (!LOSS || h_carry || h_nnz == 9'd0)
                                                   : ((h_carry && h_sel_bad) || (h_shift != 5'd0 && h_op != EW_SHR))))
                               : ((h_shift != 5'd0 && h_op != OP_UPD) || (h_zero && h_op == OP_UPD) ||
                                  (h_gf && h_op != OP_WG) || (h_left && h_op != OP_UPD) ||
                                  ((h_hold || h_carry) && h_op == OP_UPD) || (h_carry && h_carry_bad)));
    wire       h_big   = ({{(AW-9){1'b0}}, h_nnz} > (h_ew ? ((h_op == EW_LOSS) ? L_LOSS_CLASSES : L_EW_CAP)
                                                           : L_MAX_NNZ));
    wire       h_loss  = h_ew && h_op == EW_LOSS && !h_bad && !h_big;   // an accepted LOSS: csb_loss takes over

    // a * b over AW bits by shifts and adds: the address products have small operands, most of them constant
    // (b's zero bits drop out), and a DSP slice each (synth_xilinx maps every product of two operands of 2 bits
    // or more onto one) would be spent on bookkeeping rather than on a MAC
    function [AW-1:0] times(input [AW-1:0] a, input [AW-1:0] b);
        integer i;
        begin
            times = {AW{1'b0}};
            for (i = 0; i < AW; i = i + 1)
                if (b[i]) times = times + (a << i);
        end
    endfunction

    wire [AW-1:0] nnz_w   = {{(AW-9){1'b0}}, nnz};
    wire [AW-1:0] nnz_kk  = k1 ? nnz_w : times(nnz_w, L_KK);   // taps of the transaction's entries
    reg  [AW-1:0] sec_len;             // units (bytes or words) of the current section
    always @* begin
        case (state)
            S_IDX:   sec_len = nnz_w;
            S_W8:    sec_len = nnz_kk;
            S_XB:    sec_len = eb_words_t;
            S_DB:    sec_len = L_DB_BYTES;
            S_RB:    sec_len = zero ? ((op == OP_FP) ? L_R_FP : r_eb_t)
                                    : ((op == OP_FP) ? L_FP_WORDS : eb_words_t);
            default: sec_len = ew ? nnz_w : nnz_kk;
        endcase
    end
    wire byte_sec = (state == S_IDX) || (state == S_W8) || (state == S_XB) || (state == S_DB);
    // units a take moves: a beat's bytes or words; a ZERO's virtual R section one R word (all banks and lanes)
    wire [AW-1:0] sec_step = byte_sec ? BEAT_BYTES : ((state == S_RB && virt) ? 24'd1 : PARTS);
    wire sec_last = cnt + sec_step >= sec_len;

    // Index bytes of this beat outside the block (status 3).
    reg idx_bad;
    integer j;
    // The comparisons are constant false for a 16-wide block dimension.
    /* verilator lint_off CMPCONST */
    always @* begin
        idx_bad = 1'b0;
        for (j = 0; j < BEAT_BYTES; j = j + 1)
            if (cnt + j < sec_len && (in_data[8*j+4 +: 4] > L_ROWS || in_data[8*j +: 4] > L_COLS))
                idx_bad = 1'b1;
    end
    /* verilator lint_on CMPCONST */

    // ---- section order (csb_sections): after the header, and after the current section
    wire [3:0] head_next, sec_next;
    csb_sections u_head (.o(h_op), .cur(S_HEAD), .empty(h_nnz == 9'd0), .refused(1'b0), .e_w(h_ew), .gf(h_gf),
                         .cy(h_carry), .next(head_next));
    csb_sections u_sec (.o(op), .cur(state), .empty(nnz == 9'd0), .refused(bad_index || (state == S_IDX && idx_bad)),
                        .e_w(ew), .gf(g_first), .cy(carry), .next(sec_next));

    // a section word moves this cycle (a virtual word of zeros, or one from the stream)
    wire take = ((state != S_HEAD) && (state < S_RUN) && (virt || in_valid)) ||
                (state == S_EWS && out_free && in_valid);
    wire [STREAM_BITS-1:0] sec_data = virt ? {STREAM_BITS{1'b0}} : in_data;

    // ---- drain bookkeeping -------------------------------------------------------------
    wire [AW-1:0] n_result = (status != `CODESIGN_CSB_STATUS_OK || hold) ? {AW{1'b0}}
                           : is_fp ? L_FP_WORDS : (is_eb ? eb_words_t : (ew ? nnz_w : nnz_kk));
    wire send_slot = (state == S_SEND) && out_free;  // out_data may be loaded
    wire send_word = send_slot && sent_status && (cnt < n_result);     // a result word is loaded

    // cnt after this clock edge; RAMs whose next read follows cnt are addressed with it, so
    // their registered output always holds the word at cnt.
    reg [AW-1:0] cnt_next;
    always @* begin
        cnt_next = cnt;
        if (state == S_HEAD)
            cnt_next = {AW{1'b0}};
        else if (take)
            cnt_next = sec_last ? {AW{1'b0}} : cnt + sec_step;
        else if (send_slot && sent_status)
            cnt_next = send_word ? cnt + PARTS : {AW{1'b0}};
    end

    // ---- R walker (csb_walker): the R word loaded (S_RB) or sent (drain), in stream order of the result grid
    wire          sel_sums = is_sel && carry;   // SELECT's V: the held sums, read from R in stream order
    wire          wk_eb = is_eb || (sel_sums && held_op == OP_EB);   // the grid: EB's input tile, else FP's output
    wire          wk_clear = (state == S_HEAD) || (state == S_RB && take && sec_last);
    wire          wk_adv   = ((state == S_RB || (state == S_EWS && sel_sums)) && take) ||
                             (send_word && (is_fp || is_eb));
    wire [4:0]    wk_lane;
    wire [2:0]    wk_bank;
    wire [AW-1:0] wk_addr, wk_addr_next;
    csb_walker #(.PARALLEL(PARALLEL), .BATCH(BATCH), .OUT_W(OUT_W), .AW(AW), .PW(PW), .STEP(PARTS)) u_walk (
        .clk(clk), .clear(wk_clear), .adv(wk_adv), .half(s2 && wk_eb), .h(wk_eb ? in_h_t : L_OUT_H),
        .w(wk_eb ? in_w_t : L_OUT_W), .cw(wk_eb ? cw_in_t : L_CW_OUT), .lane(wk_lane), .bank(wk_bank),
        .addr(wk_addr), .addr_next(wk_addr_next)
    );

    // ---- compute counters and stage A address generation ------------------------------
    reg [8:0]    e;                    // entry
    reg [AW-1:0] t;                    // tap = ky * K + kx
    reg [2:0]    ky, kx;
    reg [AW-1:0] chunk;                // position chunk
    wire [AW-1:0] n_chunks = L_OUT_CH;
    // First output position of the chunk as (row, column), stepped by PARALLEL positions
    // without a divider: (c_row, c_col) += (PARALLEL / OUT_W, PARALLEL % OUT_W), one wrap at most.
    localparam [PW-1:0] STEP_ROW = PARALLEL / OUT_W, STEP_COL = PARALLEL % OUT_W;
    reg  [PW-1:0] c_row, c_col;
    wire [PW-1:0] c_col_sum = c_col + STEP_COL;
    wire          c_wrap    = (c_col_sum >= L_OUT_W);
    // EB: the bank of a target is its source group's shifted by the tap: ((ky/h)*OUT_W + kx/h) mod P, h the stride
    reg  [2:0]    tap_rres;            // ((ky/h)*OUT_W) mod P
    reg  [2:0]    tap_shift;           // ((ky/h)*OUT_W + kx/h) mod P
    wire [3:0]    tap_rres_sum = tap_rres + ROW_RES;
    wire [2:0]    tap_rres_n   = (!s2 || ky[0]) ? ((tap_rres_sum >= PARALLEL) ? tap_rres_sum - PARALLEL : tap_rres_sum)
                                                : tap_rres;
    wire last_chunk = (chunk + 24'd1 == n_chunks);
    wire last_tap   = k1 || (t + 24'd1 == L_KK);
    wire last_entry = ({1'b0, e} + 10'd1 == {1'b0, nnz});

    reg  [STREAM_BITS-1:0] idx_mem [0:IDX_WORDS-1];   // distributed RAM, read in the same cycle: a beat a row
    always @(posedge clk)
        if (state == S_IDX && take) idx_mem[cnt >> (2 + LP)] <= in_data;
    wire [STREAM_BITS-1:0] idx_word = idx_mem[e >> (2 + LP)];
    wire [8:0]      e_byte   = e & (BEAT_BYTES - 1);
    wire [7:0]      idx_e    = idx_word >> (8 * e_byte);
    wire [3:0]      y_e      = idx_e[7:4];
    wire [3:0]      x_e      = idx_e[3:0];
    wire [AW-1:0]   wt_at    = (k1 ? {{(AW-9){1'b0}}, e} : times({{(AW-9){1'b0}}, e}, L_KK)) + t;

    // ---- stage B registers ----------------------------------------------------------------
    reg                b_run;          // stage B works on the step stage A presented last cycle
    reg [PARALLEL-1:0] b_valid;        // MAC groups whose position lies in the tile
    reg [AW-1:0]       b_wt_at;
    reg                b_last_chunk;
    reg                run_half;       // a packed WG step's second cycle (stage A)
    reg                b_half;         // ... in stage B
    wire               b_wg_done = b_run && is_wg && (!PACKED || b_half);   // a WG step's sums are whole

    // ---- RAMs -------------------------------------------------------------------------------
    wire [STREAM_BITS-1:0] w8_q;
    wire [AW-1:0] beat_word = (cnt >> (2 + LP)) << LP;   // a byte section's beat: its first word (a multiple of PARTS)
    wire [AW-1:0] w8_waddr = cnt >> (2 + LP);
    wire [AW-1:0] w8_raddr = wt_at >> (2 + LP);
    csb_ram #(.LANES(1), .LANE_BITS(STREAM_BITS), .DEPTH(W8_WORDS), .AW(W8_AW)) u_w8 (
        .clk(clk), .we(state == S_W8 && take), .waddr(w8_waddr[W8_AW-1:0]), .wdata(in_data),
        .raddr(w8_raddr[W8_AW-1:0]), .rdata(w8_q)
    );
    wire [AW-1:0] w8_byte = b_wt_at & (BEAT_BYTES - 1);
    wire [7:0] weight = w8_q >> (8 * w8_byte);

    wire [ACC_BITS*BATCH*PARALLEL-1:0] r_q;       // bank k at [ACC_BITS*BATCH*k +: ...]
    // the PARTS R words at the walker, lanes wk_lane.. of one bank word (the drain's results, a SELECT's held sums)
    // (shifted in beats: BATCH is a multiple of PARTS and so is the walker's lane)
    wire [ACC_BITS*PARTS-1:0] r_words = r_q >> (ACC_BITS * PARTS * (BATCH / PARTS * wk_bank + (wk_lane >> LP)));

    // WA: G (WG) and the 24-bit buffer (UPD), PARTS banks by address (word a in bank a mod PARTS, row a / PARTS);
    // written by the loads (a beat's words a cycle, each into its bank) or by stage B of WG (one G word). Each
    // bank has its own UPD and element-wise unit: part q of a beat meets bank q's word.
    wire [WB_W*PARTS-1:0]  wa_qs;              // bank q's word at [WB_W*q +: WB_W]
    wire [32*PARTS-1:0]    ew_words;           // the streamed elements' results
    wire [32*PARTS-1:0]    wa_sent;            // WA's words as the drain sends them (sign-extended)
    wire signed [WB_W-1:0] g_final;
    wire wg_write = b_wg_done && b_last_chunk;
    wire [AW-1:0] wa_row_w = (wg_write ? b_wt_at : cnt) >> LP;
    wire [AW-1:0] wa_raddr = ((state == S_RUN) ? wt_at : cnt_next) >> LP;
    wire [AW-1:0] g_bank   = b_wt_at & (PARTS - 1);          // the bank of stage B's G word
    reg  [WB_W-1:0] wa_q;                                    // ... and the word (a multiplexer, no product)
    integer gb;
    always @* begin
        wa_q = wa_qs[WB_W-1:0];
        for (gb = 1; gb < PARTS; gb = gb + 1)
            if (g_bank == gb) wa_q = wa_qs[WB_W*gb +: WB_W];
    end
    wire          wa_load  = take && (state == S_GW || state == S_BW || state == S_UG);
    genvar q;
    generate
        for (q = 0; q < PARTS; q = q + 1) begin : g_wa
            wire [31:0]     word   = in_data[32*q +: 32];
            wire [WB_W-1:0] bank_q = wa_qs[WB_W*q +: WB_W];
            wire [23:0]        upd_new;   // UPD (with LEFT: sat32(G * 2^s), then the update at shift 0)
            csb_upd u_upd (.buf_in(bank_q[23:0]), .grad(word), .shift(shift), .left(left), .buf_out(upd_new));
            wire signed [WB_W-1:0] upd_new_x  = $signed(upd_new);
            wire signed [WB_W-1:0] acc_word_x = $signed(sec_data[32*q +: ACC_BITS]);
            wire signed [WB_W-1:0] buf_word_x = $signed(word[23:0]);
            wire signed [WB_W-1:0] sel_v      = sel_sums ? $signed(r_words[ACC_BITS*q +: ACC_BITS]) : $signed(bank_q);
            csb_ew #(.ACC_BITS(ACC_BITS), .WB_W(WB_W)) u_ew (.op(op), .shift(shift), .word(word), .v(sel_v),
                                                            .result(ew_words[32*q +: 32]));
            wire signed [31:0] sent_x = $signed(bank_q);
            assign wa_sent[32*q +: 32] = sent_x;
            wire [WB_W-1:0] wdata = wg_write ? g_final
                                  : ((state == S_GW || (state == S_BW && ew)) ? acc_word_x   // G; SELECT's v
                                  : ((state == S_BW) ? buf_word_x : upd_new_x));
            // a section's last beat writes its unused parts too, past the section's words: nothing reads them
            wire we = wg_write ? (g_bank == q) : wa_load;
            csb_ram #(.LANES(1), .LANE_BITS(WB_W), .DEPTH(WA_ROWS), .AW(WA_AW), .BYPASS(1)) u_wa (
                .clk(clk), .we(we), .waddr(wa_row_w[WA_AW-1:0]), .wdata(wdata), .raddr(wa_raddr[WA_AW-1:0]),
                .rdata(wa_qs[WB_W*q +: WB_W])
            );
        end
    endgenerate

    wire [ACC_BITS*BATCH*PARALLEL-1:0] g_acc_out;
    wire [BATCH-1:0] r_lane_we = ((1 << PARTS) - 1) << wk_lane;   // a beat's PARTS lanes of one position
    wire [ACC_BITS*PARTS-1:0] sec_accs;                             // ... their sums
    generate
        for (q = 0; q < PARTS; q = q + 1) begin : g_sec_acc
            assign sec_accs[ACC_BITS*q +: ACC_BITS] = sec_data[32*q +: ACC_BITS];
        end
    endgenerate
    wire r_load = (state == S_RB);

    // ---- MAC groups ------------------------------------------------------------------------
    // Position group g holds output position chunk*PARALLEL + g. MAC group k works on R bank k:
    // FP and WG take position group k; EB takes group (k - tap_shift) mod P, whose target
    // (position shifted by the tap) lies in bank k.
    reg  [ACC_BITS*PARALLEL-1:0] part;         // WG partial per group
    reg  [20*PARALLEL-1:0]       held_sum;     // a packed WG step's first lane sum per group
    wire [20*PARALLEL-1:0]       g_lane_sum;
    wire [PARALLEL-1:0]          a_valid;      // stage A: the MAC group's position lies in the tile
    wire [ACC_BITS*PARALLEL-1:0] g_part_next;  // partial after this step
    wire [PW*PARALLEL-1:0]       pg_row, pg_col;
    wire [PARALLEL-1:0]          pg_valid;
    wire [AW-1:0] r_ch   = is_eb ? x_e : y_e;
    wire [PW-1:0] r_h    = is_eb ? in_h_t : L_OUT_H;
    wire [AW-1:0] r_cw   = is_eb ? cw_in_t : L_CW_OUT;
    wire          r_s2   = s2 && is_eb;            // targets on the stride-2 EB grid
    wire [PW-1:0] tap_dy = is_eb ? ky : 3'd0;
    wire [PW-1:0] tap_dx = is_eb ? kx : 3'd0;
    genvar g, l;
    generate
        for (g = 0; g < PARALLEL; g = g + 1) begin : g_pos
            // the chunk's first position plus the group's constant offset, one wrap at most
            localparam [PW-1:0] G_ROW = g / OUT_W, G_COL = g % OUT_W;
            wire [PW-1:0] col  = c_col + G_COL;
            wire          wrap = (col >= L_OUT_W);
            assign pg_col[PW*g +: PW] = wrap ? col - L_OUT_W : col;
            assign pg_row[PW*g +: PW] = c_row + G_ROW + wrap;
            assign pg_valid[g]        = (c_row + G_ROW + wrap < L_OUT_H);
        end
        for (g = 0; g < PARALLEL; g = g + 1) begin : g_grp
            // stage A
            localparam [2:0] G_IDX = g;
            wire [2:0]    src  = !is_eb ? G_IDX : ((G_IDX >= tap_shift) ? G_IDX - tap_shift : G_IDX + L_P - tap_shift);
            wire [PW-1:0] oy   = pg_row[PW*src +: PW];
            wire [PW-1:0] ox   = pg_col[PW*src +: PW];
            wire          in_tile = pg_valid[src];
            assign a_valid[g] = in_tile;
            wire [PW-1:0] sy   = s2 ? {oy[PW-2:0], 1'b0} : oy;   // the output position times the stride
            wire [PW-1:0] sx   = s2 ? {ox[PW-2:0], 1'b0} : ox;
            // one address per stride and kernel, each with constant factors (a stride-1 build has no second,
            // a kernel-1 build no K1 one)
            wire [AW-1:0] x_at1 = k1 ? times(times(times(x_e, OUT_H) + oy, OUT_W) + ox, BATCH)
                                     : times(times(times(x_e, IN_H) + oy + ky, IN_W) + ox + kx, BATCH);
            wire [AW-1:0] x_at2 = k1 ? times(times(times(x_e, IN_H2_1) + sy, IN_W2_1) + sx, BATCH)
                                     : times(times(times(x_e, IN_H2) + sy + ky, IN_W2) + sx + kx, BATCH);
            wire [AW-1:0] x_at = !in_tile ? {AW{1'b0}} : (s2 ? x_at2 : x_at1);
            wire [AW-1:0] d_at = in_tile ? times(times(times(y_e, OUT_H) + oy, OUT_W) + ox, BATCH) : {AW{1'b0}};
            // R word of the target: FP (oy, ox) of y_e, EB (s*oy + ky, s*ox + kx) of x_e
            wire [PW-1:0] tr   = (is_eb ? sy : oy) + tap_dy;
            wire [PW-1:0] tc   = (is_eb ? sx : ox) + tap_dx;
            wire [PW-1:0] tc_div = (r_s2 ? tc >> 1 : tc) / L_P;
            wire [AW-1:0] tc_word = r_s2 ? {tc_div, tc[0]} : tc_div;
            wire [AW-1:0] r_at = times(times(r_ch, r_h) + tr, r_cw) + tc_word;
            reg  [AW-1:0] b_at;                // stage B: the word to write back
            always @(posedge clk) b_at <= r_at;
            wire [AW-1:0] r_waddr = r_load ? (virt ? cnt : wk_addr) : b_at;
            wire [AW-1:0] r_raddr = (state == S_RUN) ? r_at : wk_addr_next;
            wire [BATCH-1:0] r_we = r_load ? (virt ? {BATCH{1'b1}}
                                                   : ((take && wk_bank == G_IDX) ? r_lane_we : {BATCH{1'b0}}))
                                           : ((b_run && !is_wg && b_valid[g]) ? {BATCH{1'b1}} : {BATCH{1'b0}});
            csb_ram #(.LANES(BATCH), .LANE_BITS(ACC_BITS), .DEPTH(R_DEPTH), .AW(R_AW), .BYPASS(1)) u_r (
                .clk(clk), .we(r_we), .waddr(r_waddr[R_AW-1:0]),
                .wdata(r_load ? {(BATCH/PARTS){sec_accs}} : g_acc_out[ACC_BITS*BATCH*g +: ACC_BITS*BATCH]),
                .raddr(r_raddr[R_AW-1:0]), .rdata(r_q[ACC_BITS*BATCH*g +: ACC_BITS*BATCH])
            );

            wire [8*BATCH-1:0] xv, dv;
            csb_window #(.LANES(BATCH), .WORDS(X_WORDS), .AW(AW), .WPARTS(PARTS)) u_x (
                .clk(clk), .we(state == S_XB && take), .waddr(beat_word), .wdata(in_data), .raddr(x_at), .rdata(xv)
            );
            csb_window #(.LANES(BATCH), .WORDS(D_WORDS), .AW(AW), .WPARTS(PARTS)) u_d (
                .clk(clk), .we(state == S_DB && take), .waddr(beat_word), .wdata(in_data), .raddr(d_at), .rdata(dv)
            );

            // stage B
            wire [8*BATCH-1:0] opa, opb;
            for (l = 0; l < BATCH; l = l + 1) begin : g_ln
                assign opa[8*l +: 8] = is_wg ? xv[8*l +: 8] : weight;
                assign opb[8*l +: 8] = is_fp ? xv[8*l +: 8] : dv[8*l +: 8];
            end

            wire [ACC_BITS-1:0] part_out;
            if (PACKED) begin : g_pk
                csb_group_packed #(.BATCH(BATCH), .ACC_BITS(ACC_BITS)) u_grp (
                    .a(opa), .b(opb), .wg(is_wg), .half(b_half), .held(held_sum[20*g +: 20]),
                    .acc_in(r_q[ACC_BITS*BATCH*g +: ACC_BITS*BATCH]), .part_in(part[ACC_BITS*g +: ACC_BITS]),
                    .acc_out(g_acc_out[ACC_BITS*BATCH*g +: ACC_BITS*BATCH]), .part_out(part_out),
                    .lane_sum(g_lane_sum[20*g +: 20])
                );
            end else begin : g_pl
                assign g_lane_sum[20*g +: 20] = 20'd0;
                csb_group #(.BATCH(BATCH), .ACC_BITS(ACC_BITS)) u_grp (
                    .a(opa), .b(opb), .acc_in(r_q[ACC_BITS*BATCH*g +: ACC_BITS*BATCH]),
                    .part_in(part[ACC_BITS*g +: ACC_BITS]),
                    .acc_out(g_acc_out[ACC_BITS*BATCH*g +: ACC_BITS*BATCH]), .part_out(part_out)
                );
            end
            assign g_part_next[ACC_BITS*g +: ACC_BITS] = b_valid[g] ? part_out : part[ACC_BITS*g +: ACC_BITS];
            // G + part[0] + ... + part[g], each addition saturating (docs/csb.md, WG).
            wire [ACC_BITS-1:0] merged_in;
            wire [ACC_BITS-1:0] merged;
            if (g == 0) begin : g_first
                assign merged_in = wa_q[ACC_BITS-1:0];
            end else begin : g_next
                assign merged_in = g_grp[g-1].merged;
            end
            csb_sat_add #(.ACC_BITS(ACC_BITS), .B_BITS(ACC_BITS)) u_merge (
                .a(merged_in), .b(g_part_next[ACC_BITS*g +: ACC_BITS]), .sum(merged)
            );
        end
    endgenerate
    assign g_final = $signed(g_grp[PARALLEL-1].merged);

    // ---- LOSS (EW op 3): the loss gradient's codes of a tile of logits, in a unit of its own
    generate
        if (LOSS) begin : g_loss
            csb_loss #(.BATCH(BATCH), .ACC_BITS(ACC_BITS), .STREAM_BITS(STREAM_BITS), .CAP(LOSS_CLASSES * BATCH)) u_loss (
                .clk(clk), .rst(rst), .start(state == S_HEAD && in_valid && h_loss), .classes_in(h_nnz[5:0]),
                .exp_shift_in(h_shift), .in_data(in_data), .in_valid(in_valid), .in_ready(loss_in_ready),
                .out_free(out_free), .out_given(out_valid && out_ready), .load(loss_load), .beat(loss_beat),
                .done(loss_done)
            );
        end else begin : g_no_loss   // LOSS headers are refused (status 1): S_LOSS is never entered
            assign loss_in_ready = 1'b0;
            assign loss_load = 1'b0;
            assign loss_done = 1'b0;
            assign loss_beat = {STREAM_BITS{1'b0}};
        end
    endgenerate

    // ---- drain beats: PARTS result words, sign-extended; on a wide stream the parts past the last result and the
    // last element 0 (a 32-bit beat is sent only while there is one)
    wire [STREAM_BITS-1:0] result_beat, ew_beat;
    generate
        for (q = 0; q < PARTS; q = q + 1) begin : g_out
            wire signed [31:0] r_x  = $signed(r_words[ACC_BITS*q +: ACC_BITS]);
            wire [31:0]        word = (is_fp || is_eb) ? r_x : wa_sent[32*q +: 32];
            if (PARTS > 1) begin : g_wide
                assign result_beat[32*q +: 32] = (cnt + q >= n_result) ? 32'd0 : word;
                assign ew_beat[32*q +: 32]     = (cnt + q >= sec_len) ? 32'd0 : ew_words[32*q +: 32];
            end else begin : g_narrow
                assign result_beat[32*q +: 32] = word;
                assign ew_beat[32*q +: 32]     = ew_words[32*q +: 32];
            end
        end
    endgenerate

    always @(posedge clk) begin
        cnt <= cnt_next;
        if (rst) begin
            state     <= S_HEAD;
            out_valid <= 1'b0;
            b_run     <= 1'b0;
            run_half  <= 1'b0;
            held_valid <= 1'b0;
            held_s2    <= 1'b0;
            held_k1    <= 1'b0;
        end else begin
            b_run        <= (state == S_RUN);
            b_valid      <= a_valid;
            b_wt_at      <= wt_at;
            b_last_chunk <= last_chunk;
            b_half       <= run_half;
            run_half     <= (state == S_RUN) && wg_two && !run_half;
            if (b_run && is_wg && !b_wg_done)
                held_sum <= g_lane_sum;
            if (b_wg_done)
                part <= b_last_chunk ? {(ACC_BITS*PARALLEL){1'b0}} : g_part_next;
            case (state)
                S_HEAD: if (in_valid) begin
                    op          <= h_op;
                    shift       <= h_shift;
                    nnz         <= h_nnz;
                    zero        <= h_zero;
                    g_first     <= h_gf;
                    left        <= h_left;
                    ew          <= h_ew;
                    hold        <= h_hold;
                    carry       <= h_carry;
                    s2          <= (MAX_STRIDE == 2) && (h_ew ? h_carry && held_s2 : h_s2);
                    k1          <= h_ew ? h_carry && held_k1 : h_k1e;
                    bad_index   <= 1'b0;
                    sent_status <= 1'b0;
                    e <= 9'd0; t <= {AW{1'b0}}; ky <= 3'd0; kx <= 3'd0; chunk <= {AW{1'b0}};
                    c_row <= {PW{1'b0}}; c_col <= {PW{1'b0}}; tap_rres <= 3'd0; tap_shift <= 3'd0;
                    part <= {(ACC_BITS*PARALLEL){1'b0}};
                    if (h_bad || h_big) begin
                        status <= h_bad ? `CODESIGN_CSB_STATUS_BAD_HEADER : `CODESIGN_CSB_STATUS_NNZ;
                        state  <= S_SEND;
                    end else begin
                        status <= `CODESIGN_CSB_STATUS_OK;
                        state  <= h_loss ? S_LOSS : head_next;
                    end
                end
                S_IDX, S_W8, S_XB, S_DB, S_RB, S_GW, S_BW, S_UG: if (take) begin
                    if (state == S_IDX && idx_bad) begin
                        bad_index <= 1'b1;
                        status    <= `CODESIGN_CSB_STATUS_INDEX;
                    end
                    if (sec_last)
                        state <= sec_next;
                end
                S_RUN: if (!wg_two || run_half) begin
                    if (!last_chunk) begin
                        chunk <= chunk + 24'd1;
                        c_col <= c_wrap ? c_col_sum - L_OUT_W : c_col_sum;
                        c_row <= c_row + STEP_ROW + c_wrap;
                    end else begin
                        chunk <= {AW{1'b0}};
                        c_row <= {PW{1'b0}}; c_col <= {PW{1'b0}};
                        if (!last_tap) begin
                            t <= t + 24'd1;
                            if (kx == K - 1) begin
                                kx <= 3'd0;
                                ky <= ky + 3'd1;
                                tap_rres  <= tap_rres_n;
                                tap_shift <= tap_rres_n;
                            end else begin
                                kx <= kx + 3'd1;
                                if (!s2 || kx[0])   // kx/h moves on
                                    tap_shift <= (tap_shift == PARALLEL - 1) ? 3'd0 : tap_shift + 3'd1;
                            end
                        end else begin
                            t <= {AW{1'b0}}; ky <= 3'd0; kx <= 3'd0; tap_rres <= 3'd0; tap_shift <= 3'd0;
                            if (last_entry) state <= S_SEND;
                            else            e <= e + 9'd1;
                        end
                    end
                end
                S_EWST: if (out_free) begin         // the status first
                    out_data    <= {{(`CODESIGN_WORD_BITS - `CODESIGN_STATUS_BITS){1'b0}}, status};
                    out_valid   <= 1'b1;
                    sent_status <= 1'b1;
                    state       <= S_EWS;
                end
                S_EWS: begin
                    if (take) begin
                        out_data  <= ew_beat;
                        out_valid <= 1'b1;
                        if (sec_last) state <= S_EWD;
                    end else if (out_ready) begin
                        out_valid <= 1'b0;
                    end
                end
                S_LOSS: begin                       // csb_loss loads the output register
                    if (loss_load) begin
                        out_data  <= loss_beat;
                        out_valid <= 1'b1;
                    end else if (out_ready) begin
                        out_valid <= 1'b0;
                    end
                    if (loss_done) begin
                        state      <= S_HEAD;
                        held_valid <= 1'b0;
                    end
                end
                S_EWD: if (out_free) begin          // the last result given: nothing held
                    out_valid  <= 1'b0;
                    state      <= S_HEAD;
                    held_valid <= 1'b0;
                end
                S_SEND: if (send_slot) begin
                    if (!sent_status) begin
                        out_data    <= {{(`CODESIGN_WORD_BITS - `CODESIGN_STATUS_BITS){1'b0}}, status};
                        out_valid   <= 1'b1;
                        sent_status <= 1'b1;
                    end else if (send_word) begin
                        out_data  <= result_beat;
                        out_valid <= 1'b1;
                    end else begin
                        out_valid  <= 1'b0;
                        state      <= S_HEAD;
                        held_valid <= (status == `CODESIGN_CSB_STATUS_OK) && hold;
                        held_op    <= op;
                        held_nnz   <= nnz;
                        held_s2    <= s2;
                        held_k1    <= k1;
                    end
                end
                default: state <= S_HEAD;
            endcase
        end
    end
endmodule
/* verilator lint_on WIDTHTRUNC */
/* verilator lint_on WIDTHEXPAND */
