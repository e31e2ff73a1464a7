// csb_pe: sparse-CSB training PE (FP, EB, WG, UPD on one compressed sparse block).
//
// Contract: docs/csb.md, bit for bit (header, sections, status words 0..3,
// saturation order). Architecture after paper 002, Sec. 5.2/5.3:
//
//   load    every input word moves in one clock cycle (in_ready stays high)
//           into on-chip buffers: index buffer (one byte per entry), weight
//           buffer (one WB_W-bit word per entry and tap: 8-bit weights for
//           FP/EB, G for WG, the 24-bit buffer for UPD), data buffers X and DY
//           (bytes), result buffer (ACC_BITS per word). UPD computes its
//           result while the gradient words stream in.
//   compute one cycle per (entry e, tap t, chunk of PARALLEL positions), in
//           the contract order e, t, positions. Group p works on position
//           chunk*PARALLEL + p with BATCH lanes; the address generator takes
//           the entry's x/y from the index buffer as the high (channel)
//           address bits and the tap/position counters as the low bits. EB
//           reads the same storage with x and y exchanged. In WG each group
//           keeps one partial; the partials are added to G (group 0 first)
//           in the cycle of the last chunk of a tap.
//   drain   the status word, then (status 0) the result words.
//
// Cycles of one transaction from its first input handshake to its last
// output handshake, without stalls: n_in + compute + n_out + 1, with compute
// = nnz*K*K*ceil(POS/PARALLEL) for FP/WG (POS = OUT_H*OUT_W), EB (POS =
// IN_H*IN_W), 0 for UPD and refused transactions (codesign.pe.csb.cycles).
// rst is synchronous and active high; it drops a transaction in flight.
// Address and counter arithmetic is written at AW bits (or integer width) and
// relies on Verilog's sizing rules to extend and truncate; Verilator's width
// warnings are switched off for that reason.
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
    parameter ACC_BITS   = 32          // accumulator width (bits), 16..32
) (
    input  wire        clk,
    input  wire        rst,
    input  wire [31:0] in_data,
    input  wire        in_valid,
    output wire        in_ready,
    output reg  [31:0] out_data,
    output reg         out_valid,
    input  wire        out_ready
);
    localparam IN_H     = OUT_H + K - 1;
    localparam IN_W     = OUT_W + K - 1;
    localparam KK       = K * K;
    localparam OUT_POS  = OUT_H * OUT_W;
    localparam IN_POS   = IN_H * IN_W;
    localparam MAX_NNZ  = BLOCK_ROWS * BLOCK_COLS;
    localparam WB_DEPTH = MAX_NNZ * KK;
    localparam XB_BYTES = BLOCK_COLS * IN_POS * BATCH;   // X: (channel, position, lane)
    localparam DB_BYTES = BLOCK_ROWS * OUT_POS * BATCH;  // DY: (channel, position, lane)
    localparam FP_WORDS = BLOCK_ROWS * OUT_POS * BATCH;  // FP accumulators
    localparam EB_WORDS = BLOCK_COLS * IN_POS * BATCH;   // EB accumulators
    localparam RB_DEPTH = (FP_WORDS > EB_WORDS) ? FP_WORDS : EB_WORDS;
    localparam WB_W     = (ACC_BITS > 24) ? ACC_BITS : 24;
    localparam OUT_CH   = (OUT_POS + PARALLEL - 1) / PARALLEL;   // position chunks, FP and WG
    localparam IN_CH    = (IN_POS + PARALLEL - 1) / PARALLEL;    // position chunks, EB
    localparam AW       = 24;                                    // counter and address width (bits)

    localparam [AW-1:0] L_KK       = KK;
    localparam [AW-1:0] L_XB_BYTES = XB_BYTES;
    localparam [AW-1:0] L_DB_BYTES = DB_BYTES;
    localparam [AW-1:0] L_FP_WORDS = FP_WORDS;
    localparam [AW-1:0] L_EB_WORDS = EB_WORDS;
    localparam [AW-1:0] L_OUT_CH   = OUT_CH;
    localparam [AW-1:0] L_IN_CH    = IN_CH;
    localparam [AW-1:0] L_MAX_NNZ  = MAX_NNZ;
    localparam [3:0]    L_ROWS     = BLOCK_ROWS - 1;   // largest valid y
    localparam [3:0]    L_COLS     = BLOCK_COLS - 1;   // largest valid x

    generate
        if (BLOCK_ROWS < 1 || BLOCK_ROWS > 16 || BLOCK_COLS < 1 || BLOCK_COLS > 16 || K < 1 || K > 7 ||
            OUT_H < 1 || OUT_W < 1 || BATCH < 1 || BATCH > 16 || PARALLEL < 1 || PARALLEL > 8 ||
            ACC_BITS < 16 || ACC_BITS > 32) begin : g_bad
            csb_pe_unsupported_parameters u_bad ();
        end
    endgenerate

    localparam [1:0] OP_FP = 2'd0, OP_EB = 2'd1, OP_WG = 2'd2, OP_UPD = 2'd3;

    // States: the header, one per input section, compute, drain. in_ready is
    // high in the header and the section states.
    localparam [3:0] S_HEAD = 4'd0, S_IDX = 4'd1, S_W8 = 4'd2, S_XB = 4'd3, S_DB = 4'd4, S_RB = 4'd5,
                     S_GW = 4'd6, S_BW = 4'd7, S_UG = 4'd8, S_RUN = 4'd9, S_SEND = 4'd10;

    reg [3:0]  state;
    reg [1:0]  op;
    reg [4:0]  shift;
    reg [8:0]  nnz;
    reg        bad_index;
    reg [1:0]  status;
    reg [AW-1:0] cnt;                  // section: bytes or words loaded; drain: result words sent
    reg        sent_status;

    // Buffers.
    reg [7:0]          idx_buf [0:MAX_NNZ-1];   // {y, x} per entry
    reg [WB_W-1:0]     w_buf   [0:WB_DEPTH-1];  // signed, per (entry, tap)
    reg [7:0]          x_buf   [0:XB_BYTES-1];
    reg [7:0]          d_buf   [0:DB_BYTES-1];
    reg [ACC_BITS-1:0] r_buf   [0:RB_DEPTH-1];

    assign in_ready = (state < S_RUN);

    // ---- header decode ---------------------------------------------------------------
    wire [1:0] h_op    = in_data[1:0];
    wire [4:0] h_shift = in_data[12:8];
    wire [8:0] h_nnz   = in_data[24:16];
    wire       h_bad   = ((in_data & 32'hFE00E0FC) != 32'd0) || (h_shift != 5'd0 && h_op != OP_UPD);
    wire       h_big   = ({{(AW-9){1'b0}}, h_nnz} > L_MAX_NNZ);

    // ---- section order (docs/csb.md, input words) -----------------------------------
    // The state after `cur` for `o`; sections that hold no byte (nnz = 0) are
    // skipped; after the last section: compute, or drain when nothing is computed.
    function [3:0] next_section;
        input [1:0] o;
        input [3:0] cur;
        input       empty;             // nnz == 0
        input       refused;           // an index outside the block
        reg   [3:0] finish;
        begin
            finish = (o != OP_UPD && !refused && !empty) ? S_RUN : S_SEND;
            case (cur)
                S_HEAD:  next_section = !empty ? S_IDX : ((o == OP_EB) ? S_DB : ((o == OP_UPD) ? S_SEND : S_XB));
                S_IDX:   next_section = (o == OP_WG) ? S_XB : ((o == OP_UPD) ? S_BW : S_W8);
                S_W8:    next_section = (o == OP_FP) ? S_XB : S_DB;
                S_XB:    next_section = (o == OP_FP) ? S_RB : S_DB;
                S_DB:    next_section = (o == OP_EB) ? S_RB : (empty ? finish : S_GW);
                S_BW:    next_section = S_UG;
                default: next_section = finish;
            endcase
        end
    endfunction

    wire [AW-1:0] nnz_w   = {{(AW-9){1'b0}}, nnz};
    wire [AW-1:0] nnz_kk  = nnz_w * L_KK;
    reg  [AW-1:0] sec_len;             // units (bytes or words) of the current section
    always @* begin
        case (state)
            S_IDX:   sec_len = nnz_w;
            S_W8:    sec_len = nnz_kk;
            S_XB:    sec_len = L_XB_BYTES;
            S_DB:    sec_len = L_DB_BYTES;
            S_RB:    sec_len = (op == OP_FP) ? L_FP_WORDS : L_EB_WORDS;
            default: sec_len = nnz_kk;
        endcase
    end
    wire byte_sec = (state == S_IDX) || (state == S_W8) || (state == S_XB) || (state == S_DB);
    wire sec_last = byte_sec ? (cnt + 24'd4 >= sec_len) : (cnt + 24'd1 >= sec_len);

    // Index bytes of this word outside the block (status 3).
    reg idx_bad;
    integer j;
    // The comparisons are constant false for a 16-wide block dimension.
    /* verilator lint_off CMPCONST */
    always @* begin
        idx_bad = 1'b0;
        for (j = 0; j < 4; j = j + 1)
            if (cnt + j < sec_len && (in_data[8*j+4 +: 4] > L_ROWS || in_data[8*j +: 4] > L_COLS))
                idx_bad = 1'b1;
    end
    /* verilator lint_on CMPCONST */

    // UPD: the new buffer word for the gradient word in flight.
    wire [WB_W-1:0] upd_old = w_buf[cnt];
    wire [23:0]     upd_new;
    csb_upd u_upd (.buf_in(upd_old[23:0]), .grad(in_data), .shift(shift), .buf_out(upd_new));
    wire signed [WB_W-1:0] upd_new_x = $signed(upd_new);
    wire signed [WB_W-1:0] acc_word_x = $signed(in_data[ACC_BITS-1:0]);
    wire signed [WB_W-1:0] buf_word_x = $signed(in_data[23:0]);

    // ---- compute counters and address generation --------------------------------------
    reg [8:0]    e;                    // entry
    reg [AW-1:0] t;                    // tap = ky * K + kx
    reg [2:0]    ky, kx;
    reg [AW-1:0] chunk;                // position chunk
    wire [AW-1:0] n_chunks = (op == OP_EB) ? L_IN_CH : L_OUT_CH;
    wire last_chunk = (chunk + 24'd1 == n_chunks);
    wire last_tap   = (t + 24'd1 == L_KK);
    wire last_entry = ({1'b0, e} + 10'd1 == {1'b0, nnz});

    wire [7:0]      idx_e  = idx_buf[e];
    wire [3:0]      y_e    = idx_e[7:4];
    wire [3:0]      x_e    = idx_e[3:0];
    wire [AW-1:0]   wt_at  = {{(AW-9){1'b0}}, e} * L_KK + t;
    wire [WB_W-1:0] wt_word = w_buf[wt_at];
    wire [7:0]      weight = wt_word[7:0];
    wire is_fp = (op == OP_FP);
    wire is_eb = (op == OP_EB);
    wire is_wg = (op == OP_WG);

    reg  [ACC_BITS*PARALLEL-1:0] part;         // WG partial per group
    wire [PARALLEL-1:0]          g_valid;
    wire [AW*PARALLEL-1:0]       g_raddr;      // result buffer word of lane 0
    wire [ACC_BITS*BATCH*PARALLEL-1:0] g_acc_out;
    wire [ACC_BITS*PARALLEL-1:0] g_part_next;  // partial after this cycle
    genvar g, l;
    generate
        for (g = 0; g < PARALLEL; g = g + 1) begin : g_grp
            localparam [AW-1:0] G_OFF = g;
            wire [AW-1:0] pos = chunk * PARALLEL + G_OFF;
            // FP/WG: pos is an output position; EB: an input position.
            wire [AW-1:0] p_row = is_eb ? pos / IN_W : pos / OUT_W;   // constant divisors
            wire [AW-1:0] p_col = is_eb ? pos % IN_W : pos % OUT_W;
            wire [AW-1:0] oy = is_eb ? p_row - ky : p_row;
            wire [AW-1:0] ox = is_eb ? p_col - kx : p_col;
            wire in_tile = is_eb ? (pos < IN_POS && p_row >= ky && p_col >= kx && oy < OUT_H && ox < OUT_W)
                                 : (pos < OUT_POS);
            assign g_valid[g] = in_tile;
            wire [AW-1:0] x_at = in_tile ? ((x_e * IN_H + oy + ky) * IN_W + ox + kx) * BATCH : {AW{1'b0}};
            wire [AW-1:0] d_at = in_tile ? ((y_e * OUT_H + oy) * OUT_W + ox) * BATCH : {AW{1'b0}};
            wire [AW-1:0] r_at = !in_tile ? {AW{1'b0}}
                               : (is_eb ? (x_e * IN_POS + pos) * BATCH : (y_e * OUT_POS + pos) * BATCH);
            assign g_raddr[AW*g +: AW] = r_at;

            wire [8*BATCH-1:0]        opa, opb;
            wire [ACC_BITS*BATCH-1:0] acc_in;
            for (l = 0; l < BATCH; l = l + 1) begin : g_ln
                wire [7:0] xv = x_buf[x_at + l];
                wire [7:0] dv = d_buf[d_at + l];
                assign opa[8*l +: 8] = is_wg ? xv : weight;
                assign opb[8*l +: 8] = is_fp ? xv : dv;
                assign acc_in[ACC_BITS*l +: ACC_BITS] = r_buf[r_at + l];
            end

            wire [ACC_BITS-1:0] part_out;
            csb_group #(.BATCH(BATCH), .ACC_BITS(ACC_BITS)) u_grp (
                .a(opa), .b(opb), .acc_in(acc_in), .part_in(part[ACC_BITS*g +: ACC_BITS]),
                .acc_out(g_acc_out[ACC_BITS*BATCH*g +: ACC_BITS*BATCH]), .part_out(part_out)
            );
            assign g_part_next[ACC_BITS*g +: ACC_BITS] = in_tile ? part_out : part[ACC_BITS*g +: ACC_BITS];
            // G + part[0] + ... + part[g], each addition saturating (docs/csb.md, WG).
            wire [ACC_BITS-1:0] merged_in;
            wire [ACC_BITS-1:0] merged;
            if (g == 0) begin : g_first
                assign merged_in = wt_word[ACC_BITS-1:0];
            end else begin : g_next
                assign merged_in = g_grp[g-1].merged;
            end
            csb_sat_add #(.ACC_BITS(ACC_BITS), .B_BITS(ACC_BITS)) u_merge (
                .a(merged_in), .b(g_part_next[ACC_BITS*g +: ACC_BITS]), .sum(merged)
            );
        end
    endgenerate
    wire signed [WB_W-1:0] g_final = $signed(g_grp[PARALLEL-1].merged);

    // ---- drain ---------------------------------------------------------------------------
    wire [AW-1:0] n_result = (status != 2'd0) ? {AW{1'b0}}
                           : (op == OP_FP) ? L_FP_WORDS : ((op == OP_EB) ? L_EB_WORDS : nnz_kk);
    wire [ACC_BITS-1:0] r_word = r_buf[cnt];
    wire [WB_W-1:0]     w_word = w_buf[cnt];
    wire signed [31:0]  r_word_x = $signed(r_word);
    wire signed [31:0]  w_word_x = $signed(w_word);
    wire [31:0] result_word = (op == OP_FP || op == OP_EB) ? r_word_x : w_word_x;

    integer gi, li;
    always @(posedge clk) begin
        if (rst) begin
            state     <= S_HEAD;
            out_valid <= 1'b0;
            cnt       <= {AW{1'b0}};
        end else begin
            case (state)
                S_HEAD: if (in_valid) begin
                    op          <= h_op;
                    shift       <= h_shift;
                    nnz         <= h_nnz;
                    bad_index   <= 1'b0;
                    cnt         <= {AW{1'b0}};
                    sent_status <= 1'b0;
                    e <= 9'd0; t <= {AW{1'b0}}; ky <= 3'd0; kx <= 3'd0; chunk <= {AW{1'b0}};
                    part <= {(ACC_BITS*PARALLEL){1'b0}};
                    if (h_bad || h_big) begin
                        status <= h_bad ? 2'd1 : 2'd2;
                        state  <= S_SEND;
                    end else begin
                        status <= 2'd0;
                        state  <= next_section(h_op, S_HEAD, h_nnz == 9'd0, 1'b0);
                    end
                end
                S_IDX, S_W8, S_XB, S_DB, S_RB, S_GW, S_BW, S_UG: if (in_valid) begin
                    for (j = 0; j < 4; j = j + 1)
                        if (byte_sec && cnt + j < sec_len) begin
                            if (state == S_IDX) idx_buf[cnt + j] <= in_data[8*j +: 8];
                            if (state == S_W8)  w_buf[cnt + j]   <= $signed(in_data[8*j +: 8]);
                            if (state == S_XB)  x_buf[cnt + j]   <= in_data[8*j +: 8];
                            if (state == S_DB)  d_buf[cnt + j]   <= in_data[8*j +: 8];
                        end
                    if (state == S_RB) r_buf[cnt] <= in_data[ACC_BITS-1:0];
                    if (state == S_GW) w_buf[cnt] <= acc_word_x;
                    if (state == S_BW) w_buf[cnt] <= buf_word_x;
                    if (state == S_UG) w_buf[cnt] <= upd_new_x;
                    if (state == S_IDX && idx_bad) begin
                        bad_index <= 1'b1;
                        status    <= 2'd3;
                    end
                    if (sec_last) begin
                        cnt   <= {AW{1'b0}};
                        state <= next_section(op, state, nnz == 9'd0, bad_index || (state == S_IDX && idx_bad));
                    end else begin
                        cnt <= cnt + (byte_sec ? 24'd4 : 24'd1);
                    end
                end
                S_RUN: begin
                    for (gi = 0; gi < PARALLEL; gi = gi + 1)
                        if (g_valid[gi] && !is_wg)
                            for (li = 0; li < BATCH; li = li + 1)
                                r_buf[g_raddr[AW*gi +: AW] + li] <= g_acc_out[ACC_BITS*(BATCH*gi+li) +: ACC_BITS];
                    if (is_wg) begin
                        if (last_chunk) begin
                            w_buf[wt_at] <= g_final;
                            part <= {(ACC_BITS*PARALLEL){1'b0}};
                        end else begin
                            part <= g_part_next;
                        end
                    end
                    if (!last_chunk) begin
                        chunk <= chunk + 24'd1;
                    end else begin
                        chunk <= {AW{1'b0}};
                        if (!last_tap) begin
                            t <= t + 24'd1;
                            if (kx == K - 1) begin
                                kx <= 3'd0;
                                ky <= ky + 3'd1;
                            end else begin
                                kx <= kx + 3'd1;
                            end
                        end else begin
                            t <= {AW{1'b0}}; ky <= 3'd0; kx <= 3'd0;
                            if (last_entry) state <= S_SEND;
                            else            e <= e + 9'd1;
                        end
                    end
                end
                S_SEND: if (!out_valid || out_ready) begin
                    if (!sent_status) begin
                        out_data    <= {30'd0, status};
                        out_valid   <= 1'b1;
                        sent_status <= 1'b1;
                    end else if (cnt < n_result) begin
                        out_data  <= result_word;
                        out_valid <= 1'b1;
                        cnt       <= cnt + 24'd1;
                    end else begin
                        out_valid <= 1'b0;
                        cnt       <= {AW{1'b0}};
                        state     <= S_HEAD;
                    end
                end
                default: state <= S_HEAD;
            endcase
        end
    end
endmodule
/* verilator lint_on WIDTHTRUNC */
/* verilator lint_on WIDTHEXPAND */
