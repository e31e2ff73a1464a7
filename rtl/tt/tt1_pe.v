// tt1_pe: TT processing element 1 (docs/tt_pe.md): Z[i,l] = sum_j sum_k A[i,j,k] * B[l,j,k].
//
// A STREAM_BITS-wide (32, 64 or 128) valid/ready word stream in and out. One transaction: the header
// (I, J, K, L), the cached operand B (L x J rows of K values, chunked; l outer when B_ORDER = 0, j outer
// when B_ORDER = 1: each row lands at the same bank address either way), then
// for every i one row block A[i] (J rows of K values); after each A[i] the PE
// sends Z[i, 0..L-1], BEAT results of a row group a cycle (BEAT = min(STREAM_BITS / 32, ROWS) rounded down
// to a power of two; the last beat of a group short). B is held in ROWS block-RAM banks (row l in bank
// l % ROWS), A in two banks of one RAM: a loader beside the compute loop takes A[i+1] into one while A[i] is
// computed and its results sent from the other, and A[i+1]'s loop starts once both are done (docs/tt_pe.md,
// "Overlap"); every chunk is LANES operands wide, so a cycle
// of the compute loop does LANES x ROWS MACs: one A chunk shared by ROWS rows
// of B (paper 003, Sec. 4). Lane products of a chunk are summed exactly and
// the chunk sum is added into each accumulator with saturation to ACC_BITS,
// j outer, chunk inner.
//
// Built with J_PAIRS = 1, a transaction whose K fits half the lanes (K <= LANES/2, one chunk a row) keeps rows
// j = 2p and 2p + 1 of A and of B side by side in one chunk, row 2p on lanes 0 .. LANES/2 - 1 and row 2p + 1 on
// the upper half: A and each B bank are two RAMs of half a chunk, the upper one written alone for an odd row.
// A cycle of the compute loop then sums both rows' products, exactly, and adds that sum into the accumulator
// with saturation: ceil(J/2) cycles a row group instead of J (docs/tt_pe.md, "Row pairs along j").
//
// Cycles (no input gaps, no backpressure), from the header to the last
// result: 2 + L*J*KC*CWB + LA + (I - 1)*max(LA, Y) + Y + S, LA = J*KC*CWA (one A[i]), Y = G*(J*KC + 1) +
// (G-1)*ceil(ROWS/BEAT) + ceil(L'/BEAT) (its loops and results), KC = ceil(K/LANES), G = ceil(L/ROWS),
// L' = L - (G-1)*ROWS the last group's rows, CWA/CWB the words per chunk, S = 1 when the last beat overfills
// its output word (its rest leaves a cycle later), else 0; 2 for a refused header (codesign.pe.tt.cycles).
`include "codesign_constants.vh"  // status codes (codesign/hw/constants.py)
module tt1_pe #(
    parameter LANES    = 16,  // MACs along k (power of two)
    parameter ROWS     = 8,   // MACs along l
    parameter A_BITS   = 8,   // streamed operand width (bits)
    parameter B_BITS   = 4,   // cached operand width (bits)
    parameter ACC_BITS = 32,  // accumulator and result width (bits)
    parameter MAX_J    = 16,
    parameter MAX_K    = 64,
    parameter MAX_L    = 32,
    parameter STREAM_BITS = 32, // stream word width (bits): 32, 64 or 128
    parameter B_ORDER  = 0,   // B's rows: 0 l outer (the original stream), 1 j outer (docs/tt_pe.md)
    parameter J_PAIRS  = 0    // 1: transactions with K <= LANES/2 sum rows j = 2p, 2p + 1 in one chunk
) (
    input  wire        clk,
    input  wire        rst,
    input  wire [STREAM_BITS-1:0] in_data,
    input  wire        in_valid,
    output wire        in_ready,
    output wire [STREAM_BITS-1:0] out_data,
    output wire        out_valid,
    input  wire        out_ready
);
    localparam SLOT_A = A_BITS <= 4 ? 4 : (A_BITS <= 8 ? 8 : 16);
    localparam SLOT_B = B_BITS <= 4 ? 4 : (B_BITS <= 8 ? 8 : 16);
    localparam CWA = (LANES * SLOT_A + STREAM_BITS - 1) / STREAM_BITS;  // words per A chunk
    localparam CWB = (LANES * SLOT_B + STREAM_BITS - 1) / STREAM_BITS;
    localparam CWM = CWA > CWB ? CWA : CWB;
    localparam LG = $clog2(LANES);
    localparam MAX_KC = (MAX_K + LANES - 1) / LANES;
    localparam A_DEPTH = MAX_J * MAX_KC;
    localparam B_DEPTH = ((MAX_L + ROWS - 1) / ROWS) * MAX_J * MAX_KC;
    localparam AAW = A_DEPTH > 1 ? $clog2(A_DEPTH) : 1;  // one A bank's address
    localparam A2W = AAW + 1;  // both banks' address
    localparam BAW = B_DEPTH > 1 ? $clog2(B_DEPTH) : 1;
    localparam AW_ = LANES * A_BITS;  // bits of one stored A chunk
    localparam BW_ = LANES * B_BITS;
    localparam SW = A_BITS + B_BITS + LG + 1;  // exact chunk sum
    localparam WW = (ACC_BITS > SW ? ACC_BITS : SW) + 1;
    localparam RW = ROWS > 1 ? $clog2(ROWS) : 1;
    localparam P = STREAM_BITS / 32;  // results per output word
    localparam BEAT_MAX = P < ROWS ? P : ROWS;
    localparam BEAT = BEAT_MAX >= 4 ? 4 : (BEAT_MAX >= 2 ? 2 : 1);  // results a cycle: a power of two (tt_pack_out)
    localparam H = LANES / 2;  // lanes of one row of a j pair
    localparam PAIRS = J_PAIRS != 0 && LANES > 1;

    localparam S_HDR = 3'd0, S_STATUS = 3'd1, S_LOADB = 3'd2, S_WAITA = 3'd3, S_COMP = 3'd4, S_FLUSH = 3'd5,
               S_OUT = 3'd6;

    reg [2:0] state;
    reg [7:0] dim_i, dim_j, dim_k, dim_l;
    reg [7:0] kc_n;  // chunks per row
    reg pair;        // this transaction sums rows j in pairs: K <= H on a J_PAIRS build
    reg [`CODESIGN_STATUS_BITS-1:0] status;

    // ---- header and input chunks ----------------------------------------------------------------
    wire [`CODESIGN_STATUS_BITS-1:0] hdr_status;
    wire [31:0] hdr_chunks;  // ceil(dim / LANES) of every header field
    tt_header #(.DIMS(4), .LANES(LANES), .MAX_J(MAX_J), .MAX_K(MAX_K), .MAX_L(MAX_L), .W(STREAM_BITS)) u_hdr (
        .word(in_data), .status(hdr_status), .chunks(hdr_chunks));
    reg [7:0] ii;                  // the block the compute loop works on
    wire a_go, next_ready, this_ready;
    wire [7:0] lcc;                // the loader's chunk in its row
    wire [A2W-1:0] a_waddr;
    wire loading_b = state == S_LOADB;
    wire loading = loading_b || a_go;
    wire pack_busy;  // the last transaction's last word has still to leave
    assign in_ready = (state == S_HDR && !pack_busy) || loading;
    wire take = in_valid && in_ready;
    wire chunk_done;
    wire [CWM*STREAM_BITS-1:0] full;  // the chunk's words, the one being taken included
    tt_chunk_in #(.CWM(CWM), .W(STREAM_BITS)) u_in (
        .clk(clk), .rst(rst), .clear(state == S_STATUS), .take(take && loading),
        .words(loading_b ? CWB[3:0] : CWA[3:0]), .in_data(in_data), .chunk(full), .done(chunk_done));
    wire a_chunk_done = chunk_done && !loading_b;

    // ---- counters ------------------------------------------------------------------------------
    reg [7:0] cc, jj, ll;            // chunk in row, j, l (load)
    reg [RW-1:0] bank;               // bank of row l while loading B
    reg [BAW-1:0] bwptr, bbase;      // B write address, first address of the current bank row group
    reg [BAW-1:0] jbase, jkc;        // B_ORDER 1: address of row j in group 0 (j*KC), a group's chunks (J*KC)
    reg [AAW-1:0] aptr;              // A read address in bank ii % 2 (j*KC + c)
    reg [BAW-1:0] brptr;             // B read address
    reg [7:0] lbase;                 // first l of the group being computed
    reg [RW-1:0] ocnt;               // the group's row whose result leads the beat being sent (S_FLUSH clears it)
    wire [8:0] jnext = {1'b0, jj} + (pair ? 9'd2 : 9'd1);  // the compute loop's next j (a pair's first)
    wire j_end = PAIRS ? jnext >= {1'b0, dim_j} : jj == dim_j - 1;  // the loop's last j (or pair) of a row group
    wire row_end = cc == kc_n - 1 && j_end;

    // padding lanes (k >= K) are stored as 0
    wire [8:0] kbase = {1'b0, loading_b ? cc : lcc} << LG;
    wire [AW_-1:0] a_chunk;
    wire [BW_-1:0] b_chunk;
    tt_unpack #(.LANES(LANES), .BITS(A_BITS), .SLOT(SLOT_A), .INW(CWM*STREAM_BITS)) u_ua (
        .bits_in(full), .kbase(kbase), .len(dim_k), .lanes(a_chunk));
    tt_unpack #(.LANES(LANES), .BITS(B_BITS), .SLOT(SLOT_B), .INW(CWM*STREAM_BITS)) u_ub (
        .bits_in(full), .kbase(kbase), .len(dim_k), .lanes(b_chunk));

    // ---- buffers -------------------------------------------------------------------------------
    wire [AW_-1:0] qa;
    wire [ROWS*BW_-1:0] qb;
    // bank b of A at b * A_DEPTH (the RAM holds 2 * A_DEPTH chunks, whatever A_DEPTH is)
    wire [A2W-1:0] a_raddr = ii[0] ? A_DEPTH + aptr : {1'b0, aptr};
    wire b_odd = PAIRS && pair && jj[0];  // the B row being taken is the second of a j pair: its pair's upper half alone
    generate
        if (PAIRS) begin : g_apair  // A in two RAMs of half a chunk; a j pair's rows at one address
            wire hb = a_waddr >= A_DEPTH;  // the loader writes bank 1
            wire [A2W-1:0] row = a_waddr - (hb ? A_DEPTH : 0);  // the row j it writes (one chunk a row)
            wire odd = pair && row[0];  // its pair's upper half alone, from its lower lanes
            wire [A2W-1:0] waddr = pair ? (hb ? A_DEPTH : 0) + (row >> 1) : a_waddr;
            tt_ram #(.WIDTH(AW_ / 2), .DEPTH(2 * A_DEPTH), .AW(A2W)) u_alo (
                .clk(clk), .we(a_chunk_done && !odd), .waddr(waddr), .wdata(a_chunk[0 +: AW_ / 2]), .raddr(a_raddr),
                .rdata(qa[0 +: AW_ / 2]));
            tt_ram #(.WIDTH(AW_ / 2), .DEPTH(2 * A_DEPTH), .AW(A2W)) u_ahi (
                .clk(clk), .we(a_chunk_done), .waddr(waddr),
                .wdata(odd ? a_chunk[0 +: AW_ / 2] : a_chunk[AW_ / 2 +: AW_ / 2]), .raddr(a_raddr),
                .rdata(qa[AW_ / 2 +: AW_ / 2]));
        end else begin : g_aone
            tt_ram #(.WIDTH(AW_), .DEPTH(2 * A_DEPTH), .AW(A2W)) u_a (
                .clk(clk), .we(a_chunk_done), .waddr(a_waddr), .wdata(a_chunk), .raddr(a_raddr), .rdata(qa));
        end
    endgenerate

    reg v1;    // the RAM outputs hold an issued (j, chunk) this cycle
    reg clr;   // clear the accumulators
    wire [ROWS*ACC_BITS-1:0] acc_flat;
    genvar gr;
    generate
        for (gr = 0; gr < ROWS; gr = gr + 1) begin : g_row
            wire b_we = chunk_done && state == S_LOADB && bank == gr;
            if (PAIRS) begin : g_bpair  // the bank in two RAMs of half a chunk, as A
                tt_ram #(.WIDTH(BW_ / 2), .DEPTH(B_DEPTH), .AW(BAW)) u_blo (
                    .clk(clk), .we(b_we && !b_odd), .waddr(bwptr), .wdata(b_chunk[0 +: BW_ / 2]), .raddr(brptr),
                    .rdata(qb[gr*BW_ +: BW_ / 2]));
                tt_ram #(.WIDTH(BW_ / 2), .DEPTH(B_DEPTH), .AW(BAW)) u_bhi (
                    .clk(clk), .we(b_we), .waddr(bwptr),
                    .wdata(b_odd ? b_chunk[0 +: BW_ / 2] : b_chunk[BW_ / 2 +: BW_ / 2]), .raddr(brptr),
                    .rdata(qb[gr*BW_ + BW_ / 2 +: BW_ / 2]));
            end else begin : g_bone
                tt_ram #(.WIDTH(BW_), .DEPTH(B_DEPTH), .AW(BAW)) u_b (
                    .clk(clk), .we(b_we), .waddr(bwptr), .wdata(b_chunk), .raddr(brptr), .rdata(qb[gr*BW_ +: BW_]));
            end
            reg signed [SW-1:0] sum;
            integer v;
            always @* begin
                sum = 0;
                for (v = 0; v < LANES; v = v + 1)
                    sum = sum + $signed(qa[v*A_BITS +: A_BITS]) * $signed(qb[gr*BW_ + v*B_BITS +: B_BITS]);
            end
            reg signed [ACC_BITS-1:0] acc;
            wire signed [WW-1:0] wide = acc + sum;
            wire [ACC_BITS-1:0] sat;
            tt_saturate #(.WW(WW), .ACC_BITS(ACC_BITS)) u_sat (.wide(wide), .sat(sat));
            always @(posedge clk) begin
                if (clr) acc <= 0;
                else if (v1) acc <= sat;
            end
            assign acc_flat[gr*ACC_BITS +: ACC_BITS] = acc;
        end
    endgenerate

    // ---- output ----------------------------------------------------------------------------------
    wire [7:0] g_left = (dim_l - lbase < ROWS ? dim_l - lbase : ROWS) - {{(8-RW){1'b0}}, ocnt};  // results left
    wire [2:0] beat_n = g_left < BEAT ? g_left[2:0] : BEAT;
    wire [BEAT*32-1:0] beat;  // the group's results from row ocnt on, sign-extended, 0 past beat_n
    tt_beat #(.ACC_BITS(ACC_BITS), .N(ROWS), .BEAT(BEAT)) u_beat (
        .accs(acc_flat), .first({{(8-RW){1'b0}}, ocnt}), .n(beat_n), .beat(beat));
    wire group_end = g_left <= BEAT;
    wire res_last = group_end && !(lbase + ROWS < dim_l) && ii == dim_i - 1;  // Z[I-1, L-1]
    wire res_ready, res_word_valid;
    wire [STREAM_BITS-1:0] res_word;
    wire [STREAM_BITS-1:0] status_word = status;
    tt_pack_out #(.W(STREAM_BITS), .BEAT(BEAT)) u_out (
        .clk(clk), .rst(rst), .res_valid(state == S_OUT), .res_data(beat), .res_n(beat_n), .res_last(res_last),
        .res_ready(res_ready), .word_valid(res_word_valid), .word(res_word), .word_ready(out_ready),
        .busy(pack_busy));
    assign out_valid = state == S_STATUS || res_word_valid;
    assign out_data = state == S_STATUS ? status_word : res_word;
    wire give = state == S_STATUS ? out_ready : res_ready;  // the status word left, or the beat was taken

    // ---- B write address -------------------------------------------------------------------------
    // Row (l, j) goes to bank l % ROWS at (l / ROWS)*J*KC + j*KC + c whichever order the rows come in, each
    // address counted from an earlier one: only the j-outer build (B_ORDER 1) keeps the first address of row
    // j (jbase) and a row group's chunks J*KC (jkc, a constant 0 and no multiplier in the l-outer build).
    wire b_row_done = cc == kc_n - 1;  // the chunk taken ends a row of B
    wire b_inner_end = B_ORDER ? ll == dim_l - 1 : jj == dim_j - 1;  // the row is the last of the inner index
    always @(posedge clk) begin
        if (state == S_STATUS) begin
            ll <= 0;
            bank <= 0;
            bwptr <= 0;
            bbase <= 0;
            jbase <= 0;
            jkc <= B_ORDER ? (PAIRS && pair ? ({1'b0, dim_j} + 9'd1) >> 1 : dim_j * kc_n) : 0;
        end else if (state == S_LOADB && chunk_done) begin
            if (!b_row_done || (!B_ORDER && !b_inner_end))
                bwptr <= bwptr + (!PAIRS || !b_row_done || !pair || jj[0]);  // the next chunk, or (l outer) row j + 1
            else if (B_ORDER && b_inner_end) begin  // j outer, row j's last l: row j + 1 from group 0, bank 0
                ll <= 0;
                bank <= 0;
                bwptr <= jbase + (PAIRS && pair ? jj[0] : kc_n);  // a pair's second row: the next address
                bbase <= jbase + (PAIRS && pair ? jj[0] : kc_n);
                jbase <= jbase + (PAIRS && pair ? jj[0] : kc_n);
            end else begin  // the next l: the same addresses in the next bank, or the next row group
                ll <= ll + 8'd1;
                if (bank == ROWS - 1) begin
                    bank <= 0;
                    bwptr <= B_ORDER ? bbase + jkc : bwptr + 1'b1;
                    bbase <= B_ORDER ? bbase + jkc : bwptr + 1'b1;
                end else begin
                    bank <= bank + 1'b1;
                    bwptr <= bbase;
                end
            end
        end
    end

    // ---- the A loader: A[i + 1] into one bank while block ii is worked on from the other ---------------
    // B's last chunk is taken at this edge
    wire b_done = state == S_LOADB && chunk_done && b_row_done && jj == dim_j - 1 && ll == dim_l - 1;
    tt_loader #(.AAW(AAW), .A_DEPTH(A_DEPTH)) u_load (
        .clk(clk), .rst(rst), .restart(state == S_STATUS && give), .start(b_done), .chunk_done(a_chunk_done),
        .dim_i(dim_i), .dim_j(dim_j), .kc_n(kc_n), .ii(ii), .go(a_go), .lcc(lcc), .waddr(a_waddr),
        .next_ready(next_ready), .this_ready(this_ready));

    // ---- control ---------------------------------------------------------------------------------
    always @(posedge clk) begin
        if (rst) begin
            state <= S_HDR;
            v1 <= 0;
            clr <= 0;
            pair <= 0;
        end else begin
            v1 <= state == S_COMP;
            clr <= 0;
            case (state)
                S_HDR: if (take) begin
                    dim_i <= in_data[7:0];
                    dim_j <= in_data[15:8];
                    dim_k <= in_data[23:16];
                    dim_l <= in_data[31:24];
                    kc_n <= hdr_chunks[23:16];
                    pair <= PAIRS && in_data[23:16] <= H;
                    status <= hdr_status;
                    state <= S_STATUS;
                end
                S_STATUS: if (give) begin
                    state <= status == `CODESIGN_TT_STATUS_OK ? S_LOADB : S_HDR;
                    cc <= 0;
                    jj <= 0;
                    ii <= 0;
                end
                S_LOADB: if (chunk_done) begin  // B's rows (their addresses: the block above)
                    cc <= b_row_done ? 8'd0 : cc + 8'd1;
                    if (b_row_done && (!B_ORDER || ll == dim_l - 1)) jj <= jj == dim_j - 1 ? 8'd0 : jj + 8'd1;
                    if (b_row_done && jj == dim_j - 1 && ll == dim_l - 1) begin
                        state <= S_WAITA;
                        aptr <= 0;
                    end
                end
                S_WAITA: if (this_ready) begin  // A[ii] is whole: its first row group's loop
                    state <= S_COMP;
                    clr <= 1;
                    lbase <= 0;
                    brptr <= 0;
                end
                S_COMP: begin
                    cc <= cc == kc_n - 1 ? 8'd0 : cc + 8'd1;
                    if (cc == kc_n - 1) jj <= j_end ? 8'd0 : (PAIRS ? jnext[7:0] : jj + 8'd1);
                    aptr <= row_end ? {AAW{1'b0}} : aptr + 1'b1;
                    brptr <= brptr + 1'b1;
                    if (row_end) state <= S_FLUSH;
                end
                S_FLUSH: begin
                    state <= S_OUT;
                    ocnt <= 0;
                end
                S_OUT: if (give) begin
                    ocnt <= ocnt + BEAT;
                    if (group_end) begin
                        if (lbase + ROWS < dim_l) begin
                            lbase <= lbase + ROWS;
                            state <= S_COMP;
                            clr <= 1;
                        end else if (ii == dim_i - 1) begin
                            state <= S_HDR;
                        end else begin
                            ii <= ii + 8'd1;
                            lbase <= 0;
                            brptr <= 0;
                            state <= next_ready ? S_COMP : S_WAITA;
                            clr <= next_ready;
                        end
                    end
                end
                default: state <= S_HDR;
            endcase
        end
    end
endmodule
