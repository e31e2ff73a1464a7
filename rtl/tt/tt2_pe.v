// tt2_pe: TT processing element 2 (docs/tt_pe.md): Z[i,l,k] = sum_j A[i,j,k] * B[l,j].
//
// A STREAM_BITS-wide (32, 64 or 128) valid/ready word stream in and out. One transaction: the header
// (I, J, K, L), the cached operand B (L rows of J values, chunked), then for
// every i one block A[i] (J rows of K values); after each A[i] the PE sends
// Z[i, l, k] for l, then k. B is held in ROWS block-RAM banks (row l in bank
// l % ROWS), A in two banks of one RAM: a loader beside the MAC loop takes
// A[i+1] into one while A[i] is computed and its results sent from the other,
// and A[i+1]'s MAC loop starts once both are done (docs/tt_pe.md, "Overlap").
// A cycle of the MAC loop does LANES x ROWS MACs:
// one chunk of A[i, j, :] (LANES values of k) times B[l, j] for ROWS rows l,
// every A value shared by ROWS multipliers (paper 003, Sec. 4). Every product
// is added into its accumulator with saturation to ACC_BITS, j in order. The
// chunks of a row group follow each other without a gap: the sums of one
// (row group, chunk), its last product added, go to ROWS result RAMs in the
// cycle that product is added, and the accumulators clear for the next chunk.
// The RAMs are read out row by row once the group is complete, in beats of up
// to BEAT = min(STREAM_BITS / 32, LANES) results of one chunk a cycle (the
// next chunk read while the last beat of one leaves).
//
// Cycles (no input gaps, no backpressure), from the header to the last
// result: 2 + L*JC*CWB + LA + (I - 1) * max(LA, Y) + Y + S, LA = J*KC*CWA
// (one A[i]), Y = G*(KC*J + 2) + L*ceil(K/BEAT) (one A[i]'s MAC loops
// and results), KC = ceil(K/LANES), JC = ceil(J/LANES), G = ceil(L/ROWS),
// S = 1 when the last beat overfills its output word (its rest leaves a
// cycle later), else 0; 2 for a refused header (codesign.pe.tt.cycles).
`include "codesign_constants.vh"  // status codes (codesign/hw/constants.py)
module tt2_pe #(
    parameter LANES    = 16,  // MACs along k (power of two)
    parameter ROWS     = 8,   // MACs along l
    parameter A_BITS   = 8,   // streamed operand width (bits)
    parameter B_BITS   = 4,   // cached operand width (bits)
    parameter ACC_BITS = 32,  // accumulator and result width (bits)
    parameter MAX_J    = 16,
    parameter MAX_K    = 64,
    parameter MAX_L    = 32,
    parameter STREAM_BITS = 32  // stream word width (bits): 32, 64 or 128
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
    localparam CWA = (LANES * SLOT_A + STREAM_BITS - 1) / STREAM_BITS;
    localparam CWB = (LANES * SLOT_B + STREAM_BITS - 1) / STREAM_BITS;
    localparam CWM = CWA > CWB ? CWA : CWB;
    localparam LG = $clog2(LANES);
    localparam MAX_KC = (MAX_K + LANES - 1) / LANES;
    localparam MAX_JC = (MAX_J + LANES - 1) / LANES;
    localparam A_DEPTH = MAX_J * MAX_KC;
    localparam B_DEPTH = ((MAX_L + ROWS - 1) / ROWS) * MAX_JC;
    localparam AAW = A_DEPTH > 1 ? $clog2(A_DEPTH) : 1;  // one A bank's address
    localparam A2W = AAW + 1;  // both banks' address
    localparam BAW = B_DEPTH > 1 ? $clog2(B_DEPTH) : 1;
    localparam ZAW = MAX_KC > 1 ? $clog2(MAX_KC) : 1;
    localparam AW_ = LANES * A_BITS;
    localparam BW_ = LANES * B_BITS;
    localparam ZW_ = LANES * ACC_BITS;
    localparam PW = A_BITS + B_BITS;  // exact product
    localparam WW = (ACC_BITS > PW ? ACC_BITS : PW) + 1;  // exact accumulator + product
    localparam RW = ROWS > 1 ? $clog2(ROWS) : 1;
    localparam P = STREAM_BITS / 32;  // results per output word
    localparam BEAT = P < LANES ? P : LANES;  // results a cycle: one chunk's lanes ov .. ov + BEAT - 1
    localparam VW = LANES > 1 ? LG : 1;

    localparam S_HDR = 4'd0, S_STATUS = 4'd1, S_LOADB = 4'd2, S_WAITA = 4'd3, S_COMP = 4'd4, S_FLUSH = 4'd5,
               S_RD = 4'd7, S_OUT = 4'd8;

    reg [3:0] state;
    reg [7:0] dim_i, dim_j, dim_k, dim_l;
    reg [7:0] kc_n, jc_n;
    reg [`CODESIGN_STATUS_BITS-1:0] status;

    // ---- header and input chunks ----------------------------------------------------------------
    wire [`CODESIGN_STATUS_BITS-1:0] hdr_status;
    wire [31:0] hdr_chunks;  // ceil(dim / LANES) of every header field
    tt_header #(.DIMS(4), .LANES(LANES), .MAX_J(MAX_J), .MAX_K(MAX_K), .MAX_L(MAX_L), .W(STREAM_BITS)) u_hdr (
        .word(in_data), .status(hdr_status), .chunks(hdr_chunks));
    reg [7:0] ii;                  // the block the MAC loop works on
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
    reg [7:0] cc, jj, ll;         // chunk, j, l (B load)
    reg [RW-1:0] bank;
    reg [BAW-1:0] bwptr, bbase;   // B write address, first address of the current bank row group
    reg [BAW-1:0] gbase;          // first B address of the row group being computed
    reg [AAW-1:0] aptr;           // A read address in bank ii % 2 (j*KC + c)
    reg [7:0] lbase;              // first l of the row group
    reg [RW-1:0] orow;            // result row being sent
    reg [7:0] ochunk, ov;         // its chunk and the beat's first lane (a multiple of BEAT)
    wire [7:0] row_len = loading_b ? dim_j : dim_k;
    wire [8:0] kbase = {1'b0, loading_b ? cc : lcc} << LG;

    wire [AW_-1:0] a_chunk;
    wire [BW_-1:0] b_chunk;
    tt_unpack #(.LANES(LANES), .BITS(A_BITS), .SLOT(SLOT_A), .INW(CWM*STREAM_BITS)) u_ua (
        .bits_in(full), .kbase(kbase), .len(row_len), .lanes(a_chunk));
    tt_unpack #(.LANES(LANES), .BITS(B_BITS), .SLOT(SLOT_B), .INW(CWM*STREAM_BITS)) u_ub (
        .bits_in(full), .kbase(kbase), .len(row_len), .lanes(b_chunk));

    // ---- buffers and MAC array ---------------------------------------------------------------------
    wire [AW_-1:0] qa;
    // bank b of A at b * A_DEPTH (the RAM holds 2 * A_DEPTH chunks, whatever A_DEPTH is)
    wire [A2W-1:0] a_raddr = ii[0] ? A_DEPTH + aptr : {1'b0, aptr};
    tt_ram #(.WIDTH(AW_), .DEPTH(2 * A_DEPTH), .AW(A2W)) u_a (
        .clk(clk), .we(a_chunk_done), .waddr(a_waddr), .wdata(a_chunk), .raddr(a_raddr), .rdata(qa));
    wire [BAW-1:0] b_raddr = gbase + (jj >> LG);
    reg [VW-1:0] jsel;  // lane of B[l, j] in the chunk read last cycle
    reg v1;               // the MAC loop's product of the last cycle is added this cycle
    reg last1;            // ... and it is its chunk's last: the sums go to the result RAMs, the accumulators clear
    reg [ZAW-1:0] last_cc;  // that chunk
    wire [ROWS*ZW_-1:0] zrows;  // every row's result chunk, read at oaddr
    wire [7:0] oaddr;
    genvar gr, gv;
    generate
        for (gr = 0; gr < ROWS; gr = gr + 1) begin : g_row
            wire [BW_-1:0] qb;
            tt_ram #(.WIDTH(BW_), .DEPTH(B_DEPTH), .AW(BAW)) u_b (
                .clk(clk), .we(chunk_done && state == S_LOADB && bank == gr), .waddr(bwptr), .wdata(b_chunk),
                .raddr(b_raddr), .rdata(qb));
            wire signed [B_BITS-1:0] weight = qb[jsel*B_BITS +: B_BITS];
            // the LANES saturating accumulators of this row, one flat vector (lane v at bits v*ACC_BITS)
            wire [ZW_-1:0] sums;  // the accumulators with this cycle's product added, saturated
            for (gv = 0; gv < LANES; gv = gv + 1) begin : g_lane
                reg signed [ACC_BITS-1:0] acc_v;
                wire signed [WW-1:0] wide = acc_v + $signed(qa[gv*A_BITS +: A_BITS]) * weight;
                wire [ACC_BITS-1:0] sat;
                tt_saturate #(.WW(WW), .ACC_BITS(ACC_BITS)) u_sat (.wide(wide), .sat(sat));
                always @(posedge clk) begin
                    if (rst || last1) acc_v <= 0;  // a synchronous reset: the next chunk's sums start from 0
                    else if (v1) acc_v <= sat;
                end
                assign sums[gv*ACC_BITS +: ACC_BITS] = sat;
            end
            wire [ZW_-1:0] zq;
            tt_ram #(.WIDTH(ZW_), .DEPTH(MAX_KC), .AW(ZAW)) u_z (
                .clk(clk), .we(last1), .waddr(last_cc), .wdata(sums),
                .raddr(oaddr[ZAW-1:0]), .rdata(zq));
            assign zrows[gr*ZW_ +: ZW_] = zq;
        end
    endgenerate

    // ---- output ----------------------------------------------------------------------------------
    wire [ZW_-1:0] zrow = zrows[orow*ZW_ +: ZW_];
    wire [9:0] kleft = {2'b0, dim_k} - (({2'b0, ochunk} << LG) + ov);  // results of the row from the beat on
    wire [2:0] beat_n = kleft < BEAT ? kleft[2:0] : BEAT;
    wire [BEAT*32-1:0] beat;  // the chunk's results from lane ov on, sign-extended to 32 bits, 0 past beat_n
    tt_beat #(.ACC_BITS(ACC_BITS), .N(LANES), .BEAT(BEAT)) u_beat (
        .accs(zrow), .first(ov), .n(beat_n), .beat(beat));
    wire chunk_last = {1'b0, ov} + BEAT >= LANES || kleft <= BEAT;
    wire row_last = ochunk == kc_n - 1;
    wire group_last = orow == ROWS - 1 || lbase + orow == dim_l - 1;
    wire res_last = chunk_last && row_last && group_last && !(lbase + ROWS < dim_l) && ii == dim_i - 1;
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
    // the result RAMs' read address: the next chunk (row) while the last beat of this one leaves
    assign oaddr = state == S_OUT && give && chunk_last ? (row_last ? 8'd0 : ochunk + 8'd1) : ochunk;

    // ---- the A loader: A[i + 1] into one bank while block ii is worked on from the other ---------------
    wire b_done = state == S_LOADB && chunk_done && cc == jc_n - 1 && ll == dim_l - 1;  // B's last chunk is taken
    tt_loader #(.AAW(AAW), .A_DEPTH(A_DEPTH)) u_load (
        .clk(clk), .rst(rst), .restart(state == S_STATUS && give), .start(b_done), .chunk_done(a_chunk_done),
        .dim_i(dim_i), .dim_j(dim_j), .kc_n(kc_n), .ii(ii), .go(a_go), .lcc(lcc), .waddr(a_waddr),
        .next_ready(next_ready), .this_ready(this_ready));

    // ---- control ---------------------------------------------------------------------------------
    always @(posedge clk) begin
        if (rst) begin
            state <= S_HDR;
            v1 <= 0;
            last1 <= 0;
        end else begin
            v1 <= state == S_COMP;
            last1 <= state == S_COMP && jj == dim_j - 1;
            last_cc <= cc[ZAW-1:0];
            jsel <= LANES > 1 ? jj[VW-1:0] : {VW{1'b0}};
            case (state)
                S_HDR: if (take) begin
                    dim_i <= in_data[7:0];
                    dim_j <= in_data[15:8];
                    dim_k <= in_data[23:16];
                    dim_l <= in_data[31:24];
                    kc_n <= hdr_chunks[23:16];
                    jc_n <= hdr_chunks[15:8];
                    status <= hdr_status;
                    state <= S_STATUS;
                end
                S_STATUS: if (give) begin
                    state <= status == `CODESIGN_TT_STATUS_OK ? S_LOADB : S_HDR;
                    cc <= 0; jj <= 0; ll <= 0; bank <= 0; bwptr <= 0; bbase <= 0;
                    ii <= 0;
                end
                S_LOADB: if (chunk_done) begin  // rows l of J values
                    cc <= cc == jc_n - 1 ? 8'd0 : cc + 8'd1;
                    if (cc == jc_n - 1) begin
                        ll <= ll + 8'd1;
                        if (bank == ROWS - 1) begin
                            bank <= 0;
                            bwptr <= bwptr + 1'b1;
                            bbase <= bwptr + 1'b1;
                        end else begin
                            bank <= bank + 1'b1;
                            bwptr <= bbase;
                        end
                        if (ll == dim_l - 1) state <= S_WAITA;
                    end else
                        bwptr <= bwptr + 1'b1;
                end
                S_WAITA: if (this_ready) begin  // A[ii] is whole: its first row group's MAC loop
                    state <= S_COMP;
                    cc <= 0;
                    jj <= 0;
                    aptr <= 0;
                    gbase <= 0;
                    lbase <= 0;
                end
                S_COMP: begin  // j = jj of chunk cc: A at j*KC + c, B at gbase + j/LANES; the next chunk follows
                    jj <= jj == dim_j - 1 ? 8'd0 : jj + 8'd1;
                    aptr <= jj != dim_j - 1 ? aptr + kc_n : cc + 8'd1;
                    if (jj == dim_j - 1) begin
                        if (cc == kc_n - 1) state <= S_FLUSH;
                        else cc <= cc + 8'd1;
                    end
                end
                S_FLUSH: begin  // the group's last product is added and its last chunk's sums saved
                    state <= S_RD;
                    orow <= 0;
                    ochunk <= 0;
                    ov <= 0;
                end
                S_RD: state <= S_OUT;
                S_OUT: if (give) begin
                    ov <= chunk_last ? 8'd0 : ov + BEAT;
                    if (chunk_last) begin
                        ochunk <= row_last ? 8'd0 : ochunk + 8'd1;
                        if (row_last) begin
                            orow <= orow + 1'b1;
                            if (group_last) begin
                                cc <= 0;
                                aptr <= 0;
                                if (lbase + ROWS < dim_l) begin
                                    lbase <= lbase + ROWS;
                                    gbase <= gbase + jc_n;
                                    state <= S_COMP;
                                end else if (ii == dim_i - 1) begin
                                    state <= S_HDR;
                                end else begin
                                    ii <= ii + 8'd1;
                                    gbase <= 0;
                                    lbase <= 0;
                                    state <= next_ready ? S_COMP : S_WAITA;
                                end
                            end
                        end
                    end
                end
                default: state <= S_HDR;
            endcase
        end
    end
endmodule
