// fpmac_array_pe: the FP-MAC array PE (docs/fpmac_array.md): C = A . B (+ C_in) on ROWS x COLS FP-MACs.
//
// A 32-bit valid/ready word stream in and out. One transaction: the header
// (M 6..0, ReLU 7, N 15..8, K 23..16, fb 28..24, A^T 29, B^T 30, accumulate 31), then A
// (M x K row-major, or with A^T K x M), B (K x N, or with B^T N x K), and with
// accumulate C_in (M x N), one container of 1 + EXP_BITS + MAX_FB bits in the
// low bits of each word (the bits above are ignored). Out: a status word (0
// accepted, 1 a zero dimension or fb = 0, 2 a dimension above its buffer or fb
// above MAX_FB; a refused header is the whole transaction), then C row-major.
//
// Every output is acc <- fpmac(A[i][k], B[k][j], acc) for k = 0 .. K-1 from C_in
// or +0 in format (EXP_BITS, fb): bit-exact with codesign.pe.fpmac_array.golden.gemm. With ReLU
// (header bit 7) a result whose sign bit is set is sent as +0.
//
// Buffers are RAMs with one write and one registered read port: A in ROWS
// banks (row i in bank i % ROWS at (i / ROWS) * MAX_K + k), B in COLS banks
// (column j in bank j % COLS at (j / COLS) * MAX_K + k), C in ROWS x COLS banks
// (output (i, j) in bank (i % ROWS, j % COLS) at (i / ROWS) * TN + j / COLS), one
// per MAC (fpmac_array_cell). C is cut into ROWS x COLS tiles, t = ti * tiles_n + tj;
// tiles are worked in groups of four, k outer and tile inner, one tile step
// (all ROWS x COLS MACs) issued per cycle: a MAC's result comes back exactly
// when the same tile's next step is issued (fpmac LATENCY = 4), so the
// accumulator is the MAC's own output register. A group short of four tiles
// keeps its empty slots.
//
// Cycles (no input gaps, no backpressure), from the header to the last word
// of C: 2 + M*K + K*N (+ M*N with accumulate) + 4*G*(K-1) + T + 7 + M*N, with
// T = ceil(M/ROWS) * ceil(N/COLS) tiles and G = ceil(T/4) groups (the drain
// after the last tile step overlaps the last group's empty slots); 2 for a
// refused header (codesign.pe.fpmac_array.cycles).
//
// A header with K = 0 (its M in bits 7..0) selects an element-wise operation by bits 31..29 (1 ReLU, 2 mask, 3 momentum SGD;
// BAD_HEADER for another op, M, N or fb 0; TOO_LARGE for M, N or fb above its limit): after its status word
// fpmac_array_vector takes both streams until its last output word.
`include "codesign_constants.vh"  // stream word width and status codes (codesign/hw/constants.py)

module fpmac_array_pe #(
    parameter EXP_BITS = 8,   // exponent bits, 2..8
    parameter MAX_FB   = 23,  // largest fraction width, 1..23
    parameter ROUNDING = 0,   // 0 nearest_even, 1 nearest_away, 2 toward_zero
    parameter ROWS     = 4,   // MACs along M
    parameter COLS     = 4,   // MACs along N
    parameter MAX_M    = 32,  // buffer limits, 1..127 (M), 1..255 (N, K)
    parameter MAX_N    = 32,
    parameter MAX_K    = 32
) (
    input  wire        clk,
    input  wire        rst,
    input  wire [`CODESIGN_WORD_BITS-1:0] in_data,
    input  wire        in_valid,
    output wire        in_ready,
    output wire [`CODESIGN_WORD_BITS-1:0] out_data,
    output wire        out_valid,
    input  wire        out_ready
);
    localparam W      = 1 + EXP_BITS + MAX_FB;
    localparam FBW    = $clog2(MAX_FB + 1);
    localparam SLOTS  = 4;  // tiles in flight: the latency of rtl/fpmac/fpmac.v (cycles)
    localparam TM     = (MAX_M + ROWS - 1) / ROWS;
    localparam TN     = (MAX_N + COLS - 1) / COLS;
    localparam ADEPTH = TM * MAX_K;
    localparam BDEPTH = TN * MAX_K;
    localparam CDEPTH = TM * TN;
    localparam AAW    = ADEPTH > 1 ? $clog2(ADEPTH) : 1;
    localparam BAW    = BDEPTH > 1 ? $clog2(BDEPTH) : 1;
    localparam CAW    = CDEPTH > 1 ? $clog2(CDEPTH) : 1;
    localparam SELW   = ROWS * COLS > 1 ? $clog2(ROWS * COLS) : 1;  // index of a C bank
    localparam XW     = 17;  // exact width of the address arithmetic: (tile <= 259) * (MAX_K or TN <= 255) + 255
    // sized constants, so that every operator sees operands of one width
    localparam integer MAX_M_I = MAX_M, MAX_N_I = MAX_N, MAX_K_I = MAX_K, MAX_FB_I = MAX_FB, TN_I = TN;
    localparam integer ROWS_I = ROWS, COLS_I = COLS, ROWS_L = ROWS - 1, COLS_L = COLS - 1;
    localparam [7:0]      MAX_M8 = MAX_M_I[7:0], MAX_N8 = MAX_N_I[7:0], MAX_K8 = MAX_K_I[7:0];
    localparam [4:0]      MAX_FB5 = MAX_FB_I[4:0];
    localparam [7:0]      ROWS_L8 = ROWS_L[7:0], COLS_L8 = COLS_L[7:0];
    localparam [8:0]      ROWS9 = ROWS_I[8:0], COLS9 = COLS_I[8:0];
    localparam [XW-1:0]   MAX_KX = MAX_K_I[XW-1:0], TNX = TN_I[XW-1:0];
    localparam [SELW-1:0] COLS_S = COLS_I[SELW-1:0];  // modulo 2^SELW: i_r * COLS + j_c < 2^SELW all the same

    generate
        if (W > 32 || ROWS < 1 || COLS < 1 || MAX_M < 1 || MAX_M > 127 || MAX_N < 1 || MAX_N > 255 || MAX_K < 1
            || MAX_K > 255) begin : g_bad
            fpmac_array_unsupported_parameters u_bad ();
        end
    endgenerate

    localparam S_HDR = 4'd0, S_STATUS = 4'd1, S_LOADA = 4'd2, S_LOADB = 4'd3, S_LOADC = 4'd4, S_COMP = 4'd5,
               S_OPRE = 4'd6, S_OUT = 4'd7, S_VEC = 4'd8;
    localparam EDEPTH = MAX_M * MAX_N;  // elements of the largest element-wise tile
    localparam EAW    = EDEPTH > 1 ? $clog2(EDEPTH) : 1;
    reg [3:0] state;
    reg       vec;       // the header selects an element-wise operation (K = 0)
    reg [2:0] vec_op;
    reg [7:0] dim_m, dim_n, dim_k;
    reg [4:0] fb_r;
    reg       trans_a, trans_b, accum, relu;
    reg [`CODESIGN_STATUS_BITS-1:0] status;

    // ---- header ---------------------------------------------------------------------------------
    wire [7:0] h_n = in_data[15:8], h_k = in_data[23:16];
    wire h_vec = h_k == 0;
    wire [7:0] h_m = h_vec ? in_data[7:0] : {1'b0, in_data[6:0]};  // a GEMM's bit 7 asks for ReLU
    wire [4:0] h_fb = in_data[28:24];
    wire h_zero = h_m == 0 || h_n == 0 || h_k == 0 || h_fb == 0;
    // a comparison is constant false when its limit is the field's largest value (255, or 31 for fb)
    /* verilator lint_off CMPCONST */
    wire h_big = h_m > MAX_M8 || h_n > MAX_N8 || h_k > MAX_K8 || h_fb > MAX_FB5;
    wire v_big = h_m > MAX_M8 || h_n > MAX_N8 || h_fb > MAX_FB5;
    /* verilator lint_on CMPCONST */
    wire [2:0] h_op = in_data[31:29];
    wire v_bad = h_op == 3'd0 || h_op > 3'd3 || h_m == 0 || h_n == 0 || h_fb == 0;
    wire [`CODESIGN_STATUS_BITS-1:0] h_status =
        (h_vec ? v_bad : h_zero) ? `CODESIGN_FPMAC_ARRAY_STATUS_BAD_HEADER
        : ((h_vec ? v_big : h_big) ? `CODESIGN_FPMAC_ARRAY_STATUS_TOO_LARGE : `CODESIGN_FPMAC_ARRAY_STATUS_OK);

    // ---- index counters: i = it * ROWS + ir, j = jt * COLS + jc, k -------------------------------------
    reg [7:0] i_lin, i_t, i_r, j_lin, j_t, j_c, k_i;
    wire i_last = i_lin == dim_m - 1, j_last = j_lin == dim_n - 1, k_last = k_i == dim_k - 1;
    wire [7:0] i_r_nx = i_r == ROWS_L8 ? 8'd0 : i_r + 8'd1;
    wire [7:0] i_t_nx = i_r == ROWS_L8 ? i_t + 8'd1 : i_t;
    wire [7:0] j_c_nx = j_c == COLS_L8 ? 8'd0 : j_c + 8'd1;
    wire [7:0] j_t_nx = j_c == COLS_L8 ? j_t + 8'd1 : j_t;

    // ---- input stream ----------------------------------------------------------------------------
    wire v_in_ready, v_out_valid, v_done;
    wire [W-1:0] v_out_word;
    assign in_ready = state == S_HDR || state == S_LOADA || state == S_LOADB || state == S_LOADC
                   || (state == S_VEC && v_in_ready);
    wire take = in_valid && in_ready;
    wire [W-1:0] word = in_data[W-1:0];
    wire load_a = take && state == S_LOADA, load_b = take && state == S_LOADB, load_c = take && state == S_LOADC;
    wire [XW-1:0] a_wfull = {9'd0, i_t} * MAX_KX + {9'd0, k_i};
    wire [XW-1:0] b_wfull = {9'd0, j_t} * MAX_KX + {9'd0, k_i};
    wire [XW-1:0] c_wfull = {9'd0, i_t} * TNX + {9'd0, j_t};
    wire [AAW-1:0] a_waddr = a_wfull[AAW-1:0];
    wire [BAW-1:0] b_waddr = b_wfull[BAW-1:0];
    wire [CAW-1:0] c_waddr = c_wfull[CAW-1:0];
    wire a_done = i_last && k_last, b_done = j_last && k_last, c_done = i_last && j_last;

    // ---- compute schedule: tile pointer (ti, tj), its group's first tile, slot, step k ------------------
    reg [7:0] ti, tj, gti, gtj, kk;
    reg [8:0] ti_base, tj_base, gti_base, gtj_base;  // ti * ROWS, tj * COLS (past M by up to 4 tiles)
    reg [1:0] slot;
    reg       issuing;
    wire       slot_valid = ti_base < {1'b0, dim_m};
    wire       tj_wrap = tj_base + COLS9 >= {1'b0, dim_n};
    wire [7:0] nti = tj_wrap ? ti + 8'd1 : ti;
    wire [7:0] ntj = tj_wrap ? 8'd0 : tj + 8'd1;
    wire [8:0] nti_base = tj_wrap ? ti_base + ROWS9 : ti_base;
    wire [8:0] ntj_base = tj_wrap ? 9'd0 : tj_base + COLS9;
    wire       kk_last = kk == dim_k - 1;
    wire [XW-1:0] a_rfull = {9'd0, ti} * MAX_KX + {9'd0, kk};
    wire [XW-1:0] b_rfull = {9'd0, tj} * MAX_KX + {9'd0, kk};
    wire [XW-1:0] t_cfull = {9'd0, ti} * TNX + {9'd0, tj};
    wire [AAW-1:0] a_raddr = a_rfull[AAW-1:0];
    wire [BAW-1:0] b_raddr = b_rfull[BAW-1:0];
    wire [CAW-1:0] t_caddr = t_cfull[CAW-1:0];

    // stage I (the cycle after the reads) and the MAC pipeline's shadow, for the store of finished outputs
    reg           v1, first1, last1;
    reg [CAW-1:0] caddr1;
    reg [SLOTS-1:0] dl_last;
    reg [CAW-1:0] dl_addr [0:SLOTS-1];
    integer d;
    wire busy = issuing || v1 || dl_last != 0;

    // ---- output: status, then C row-major from the C banks ---------------------------------------------
    assign out_valid = state == S_STATUS || state == S_OUT || (state == S_VEC && v_out_valid);
    wire give = out_valid && out_ready;
    wire out_step = state == S_OUT && give;
    wire [7:0] o_i_t = out_step && j_last ? i_t_nx : i_t;
    wire [7:0] o_j_t = out_step ? (j_last ? 8'd0 : j_t_nx) : j_t;
    wire [XW-1:0]  o_rfull = {9'd0, o_i_t} * TNX + {9'd0, o_j_t};
    wire [CAW-1:0] o_raddr = state == S_OUT ? o_rfull[CAW-1:0] : {CAW{1'b0}};
    wire [CAW-1:0] c_raddr = state == S_COMP ? t_caddr : o_raddr;

    // ---- buffers and the array ---------------------------------------------------------------------
    wire [ROWS*W-1:0] a_q;
    wire [COLS*W-1:0] b_q;
    wire [ROWS*COLS*W-1:0] c_q;
    genvar gr, gc;
    generate
        for (gr = 0; gr < ROWS; gr = gr + 1) begin : g_a
            fpmac_array_ram #(.WIDTH(W), .DEPTH(ADEPTH), .AW(AAW)) u_a (
                .clk(clk), .we(load_a && i_r == gr), .waddr(a_waddr), .wdata(word), .raddr(a_raddr),
                .rdata(a_q[gr*W +: W]));
        end
        for (gc = 0; gc < COLS; gc = gc + 1) begin : g_b
            fpmac_array_ram #(.WIDTH(W), .DEPTH(BDEPTH), .AW(BAW)) u_b (
                .clk(clk), .we(load_b && j_c == gc), .waddr(b_waddr), .wdata(word), .raddr(b_raddr),
                .rdata(b_q[gc*W +: W]));
        end
        for (gr = 0; gr < ROWS; gr = gr + 1) begin : g_row
            for (gc = 0; gc < COLS; gc = gc + 1) begin : g_col
                fpmac_array_cell #(.EXP_BITS(EXP_BITS), .MAX_FB(MAX_FB), .ROUNDING(ROUNDING), .CDEPTH(CDEPTH),
                                   .CAW(CAW)) u_cell (
                    .clk(clk), .rst(rst), .issue(v1), .first(first1), .use_cin(accum),
                    .a(a_q[gr*W +: W]), .b(b_q[gc*W +: W]), .fb(fb_r[FBW-1:0]),
                    .store(dl_last[SLOTS-1]), .store_addr(dl_addr[SLOTS-1]),
                    .load_we(load_c && i_r == gr && j_c == gc), .load_addr(c_waddr), .load_data(word),
                    .raddr(c_raddr), .rdata(c_q[(gr*COLS+gc)*W +: W]));
            end
        end
    endgenerate

    wire [SELW-1:0] c_bank = i_r[SELW-1:0] * COLS_S + j_c[SELW-1:0];
    wire [W-1:0]    c_words [0:ROWS*COLS-1];
    wire [`CODESIGN_WORD_BITS-1:0] c_word;  // the container, zero-extended
    genvar gs;
    generate
        for (gs = 0; gs < ROWS * COLS; gs = gs + 1) begin : g_sel
            assign c_words[gs] = c_q[gs*W +: W];
        end
        assign c_word[W-1:0] = relu && c_words[c_bank][W-1] ? {W{1'b0}} : c_words[c_bank];
        if (W < `CODESIGN_WORD_BITS) begin : g_ext
            assign c_word[`CODESIGN_WORD_BITS-1:W] = {(`CODESIGN_WORD_BITS-W){1'b0}};
        end
    endgenerate
    // the element-wise operations (K = 0), after the status word
    fpmac_array_vector #(.EXP_BITS(EXP_BITS), .MAX_FB(MAX_FB), .ROUNDING(ROUNDING), .DEPTH(EDEPTH), .AW(EAW)) u_vec (
        .clk(clk), .rst(rst), .start(state == S_STATUS && give && vec && status == `CODESIGN_FPMAC_ARRAY_STATUS_OK),
        .op(vec_op), .dim_m(dim_m), .dim_n(dim_n), .fb(fb_r[FBW-1:0]), .in_word(word),
        .in_valid(in_valid && state == S_VEC), .in_ready(v_in_ready), .out_word(v_out_word),
        .out_valid(v_out_valid), .out_ready(out_ready && state == S_VEC), .done(v_done));
    wire [`CODESIGN_WORD_BITS-1:0] v_word;  // the container, zero-extended
    generate
        assign v_word[W-1:0] = v_out_word;
        if (W < `CODESIGN_WORD_BITS) begin : g_vext
            assign v_word[`CODESIGN_WORD_BITS-1:W] = {(`CODESIGN_WORD_BITS-W){1'b0}};
        end
    endgenerate
    assign out_data = state == S_STATUS ? {{(`CODESIGN_WORD_BITS - `CODESIGN_STATUS_BITS){1'b0}}, status}
                    : (state == S_VEC ? v_word : c_word);

    // ---- control ----------------------------------------------------------------------------------
    always @(posedge clk) begin
        // stage I and the store shadow run in every state; they are empty outside S_COMP
        v1     <= state == S_COMP && issuing && slot_valid;
        first1 <= kk == 0;
        last1  <= kk_last;
        caddr1 <= t_caddr;
        dl_last <= {dl_last[SLOTS-2:0], v1 && last1};
        dl_addr[0] <= caddr1;
        for (d = 1; d < SLOTS; d = d + 1) dl_addr[d] <= dl_addr[d-1];
        if (rst) begin
            state <= S_HDR;
            issuing <= 1'b0;
            v1 <= 1'b0;
            dl_last <= {SLOTS{1'b0}};
        end else begin
            case (state)
                S_HDR: if (take) begin
                    dim_m <= h_m;
                    dim_n <= h_n;
                    dim_k <= h_k;
                    fb_r <= h_fb;
                    trans_a <= in_data[29];
                    trans_b <= in_data[30];
                    accum <= in_data[31];
                    relu <= !h_vec && in_data[7];
                    vec <= h_vec;
                    vec_op <= h_op;
                    status <= h_status;
                    state <= S_STATUS;
                end
                S_STATUS: if (give) begin
                    state <= status != `CODESIGN_FPMAC_ARRAY_STATUS_OK ? S_HDR : (vec ? S_VEC : S_LOADA);
                    i_lin <= 0; i_t <= 0; i_r <= 0; j_lin <= 0; j_t <= 0; j_c <= 0; k_i <= 0;
                end
                S_LOADA: if (take) begin
                    if (trans_a ? i_last : k_last) begin  // inner index wraps, outer steps
                        if (trans_a) begin i_lin <= 0; i_t <= 0; i_r <= 0; k_i <= k_i + 8'd1; end
                        else begin k_i <= 0; i_lin <= i_lin + 8'd1; i_t <= i_t_nx; i_r <= i_r_nx; end
                    end else begin
                        if (trans_a) begin i_lin <= i_lin + 8'd1; i_t <= i_t_nx; i_r <= i_r_nx; end
                        else k_i <= k_i + 8'd1;
                    end
                    if (a_done) begin
                        state <= S_LOADB;
                        i_lin <= 0; i_t <= 0; i_r <= 0; k_i <= 0;
                    end
                end
                S_LOADB: if (take) begin
                    if (trans_b ? k_last : j_last) begin
                        if (trans_b) begin k_i <= 0; j_lin <= j_lin + 8'd1; j_t <= j_t_nx; j_c <= j_c_nx; end
                        else begin j_lin <= 0; j_t <= 0; j_c <= 0; k_i <= k_i + 8'd1; end
                    end else begin
                        if (trans_b) k_i <= k_i + 8'd1;
                        else begin j_lin <= j_lin + 8'd1; j_t <= j_t_nx; j_c <= j_c_nx; end
                    end
                    if (b_done) begin
                        state <= accum ? S_LOADC : S_COMP;
                        issuing <= !accum;
                        j_lin <= 0; j_t <= 0; j_c <= 0; k_i <= 0;
                    end
                end
                S_LOADC: if (take) begin
                    if (j_last) begin
                        j_lin <= 0; j_t <= 0; j_c <= 0;
                        i_lin <= i_lin + 8'd1; i_t <= i_t_nx; i_r <= i_r_nx;
                    end else begin
                        j_lin <= j_lin + 8'd1; j_t <= j_t_nx; j_c <= j_c_nx;
                    end
                    if (c_done) begin
                        state <= S_COMP;
                        issuing <= 1'b1;
                        i_lin <= 0; i_t <= 0; i_r <= 0; j_lin <= 0; j_t <= 0; j_c <= 0;
                    end
                end
                S_COMP: begin
                    if (issuing) begin
                        if (slot == 2'd3) begin  // SLOTS - 1
                            slot <= 0;
                            if (kk_last) begin  // the group is done: the next one starts after its last tile
                                kk <= 0;
                                ti <= nti; tj <= ntj; ti_base <= nti_base; tj_base <= ntj_base;
                                gti <= nti; gtj <= ntj; gti_base <= nti_base; gtj_base <= ntj_base;
                                if (nti_base >= {1'b0, dim_m}) issuing <= 1'b0;
                            end else begin
                                kk <= kk + 8'd1;
                                ti <= gti; tj <= gtj; ti_base <= gti_base; tj_base <= gtj_base;
                            end
                        end else begin
                            slot <= slot + 2'd1;
                            ti <= nti; tj <= ntj; ti_base <= nti_base; tj_base <= ntj_base;
                        end
                    end else if (!busy) begin
                        state <= S_OPRE;
                    end
                end
                S_OPRE: state <= S_OUT;
                S_VEC: if (v_done) state <= S_HDR;
                S_OUT: if (give) begin
                    if (j_last) begin
                        j_lin <= 0; j_t <= 0; j_c <= 0;
                        i_lin <= i_lin + 8'd1; i_t <= i_t_nx; i_r <= i_r_nx;
                        if (i_last) state <= S_HDR;
                    end else begin
                        j_lin <= j_lin + 8'd1; j_t <= j_t_nx; j_c <= j_c_nx;
                    end
                end
                default: state <= S_HDR;
            endcase
            if (state == S_STATUS) begin  // the compute pointer starts at tile 0 of group 0
                ti <= 0; tj <= 0; ti_base <= 0; tj_base <= 0; gti <= 0; gtj <= 0; gti_base <= 0; gtj_base <= 0;
                kk <= 0; slot <= 0;
            end
        end
    end
endmodule
