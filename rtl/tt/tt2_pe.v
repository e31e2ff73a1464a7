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
// chunks of a row group follow each other without a gap, and so do the row
// groups: the sums of one (row group, chunk), its last product added, go to
// ROWS result RAMs in the cycle that product is added, and the accumulators
// clear for the next chunk. The result RAMs hold two banks: a group's sums go
// to one while an output engine beside the MAC loop sends the group before
// from the other, row by row, in beats of up to BEAT = min(STREAM_BITS / 32,
// LANES) results of one chunk a cycle (one RAM read before a group's first
// beat, the next chunk read while the last beat of one leaves). A group's MAC
// loop starts once its bank has been sent (docs/tt_pe.md, "Results beside the
// MAC loop").
//
// Built with ROW_PAIRS = 1, a transaction whose K fits half the lanes (K <= LANES/2) runs row groups of
// 2*ROWS rows: MAC row r takes row lbase + r on lanes 0 .. LANES/2 - 1 and row lbase + ROWS + r on the upper
// half, both halves fed the same A values, the upper half's B from a second copy of the row's bank read at the
// next row group's address (docs/tt_pe.md, "Row pairs"). Every result is the same sum in the same order; the
// group count halves.
//
// Cycles (no input gaps, no backpressure): codesign.pe.tt.cycles.pe2_cycles
// follows the MAC loop, the loader and the output engine group by group; 2
// for a refused header.
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
    parameter STREAM_BITS = 32, // stream word width (bits): 32, 64 or 128
    parameter ROW_PAIRS = 0     // 1: transactions with K <= LANES/2 run groups of 2*ROWS rows (row pairs)
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
    localparam ZAW = $clog2(2 * MAX_KC);  // both result banks' address (bank b's chunk c at b * MAX_KC + c)
    localparam AW_ = LANES * A_BITS;
    localparam BW_ = LANES * B_BITS;
    localparam ZW_ = LANES * ACC_BITS;
    localparam PW = A_BITS + B_BITS;  // exact product
    localparam WW = (ACC_BITS > PW ? ACC_BITS : PW) + 1;  // exact accumulator + product
    localparam RW = ROWS > 1 ? $clog2(ROWS) : 1;
    localparam P = STREAM_BITS / 32;  // results per output word
    localparam BEAT = P < LANES ? P : LANES;  // results a cycle: one chunk's lanes ov .. ov + BEAT - 1
    localparam VW = LANES > 1 ? LG : 1;
    localparam H = LANES / 2;  // a row pair's lanes per row
    localparam PAIRS = ROW_PAIRS != 0 && LANES > 1;

    localparam S_HDR = 3'd0, S_STATUS = 3'd1, S_LOADB = 3'd2, S_WAITA = 3'd3, S_COMP = 3'd4, S_GWAIT = 3'd5;
    localparam O_IDLE = 2'd0, O_RD = 2'd1, O_OUT = 2'd2;

    reg [2:0] state;  // the MAC loop's side: header, B, and the row groups' MAC loops
    reg [1:0] ostate; // the output engine's side: a finished group's results
    reg [7:0] dim_i, dim_j, dim_k, dim_l;
    reg [7:0] kc_n, jc_n;
    reg pair;  // this transaction runs row pairs: K <= H on a ROW_PAIRS build
    wire [8:0] grows = PAIRS && pair ? 2 * ROWS : ROWS;  // rows of a row group
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
    // the result banks: zown[b] from the MAC loop's start of a group in bank b until its last beat has left,
    // zdone[b] from its last sums stored until then
    reg [1:0] zown, zdone;
    wire out_busy = ostate != O_IDLE || zown != 2'b00;
    assign in_ready = (state == S_HDR && !pack_busy && !out_busy) || loading;
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
    reg cb;                       // the result bank of the row group being computed
    reg [7:0] glbase [0:1];       // per result bank: the first l of the group it holds
    reg [1:0] gfinal;             // per result bank: its group is the transaction's last
    reg ob;                       // the result bank being sent
    reg [RW-1:0] orow;            // result row being sent: its MAC row
    reg ohalf;                    // ... and its half (the upper lanes of a row pair)
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
    wire [BAW-1:0] b_raddr2 = gbase + jc_n + (jj >> LG);  // row pairs: the upper rows, a row group on
    reg [VW-1:0] jsel;  // lane of B[l, j] in the chunk read last cycle
    reg v1;               // the MAC loop's product of the last cycle is added this cycle
    reg last1;            // ... and it is its chunk's last: the sums go to the result RAMs, the accumulators clear
    reg glast1;           // ... and its chunk is its group's last: the group's sums are whole after this cycle
    reg [ZAW-1:0] last_za;  // where that chunk's sums go: its bank and chunk
    reg last_zb;            // that bank
    wire [ROWS*ZW_-1:0] zrows;  // every row's result chunk, read at zraddr
    wire [7:0] oaddr;           // the chunk read in bank ob
    wire [ZAW-1:0] zraddr = (ob ? MAX_KC : 0) + oaddr;
    genvar gr, gv;
    generate
        for (gr = 0; gr < ROWS; gr = gr + 1) begin : g_row
            wire [BW_-1:0] qb;
            tt_ram #(.WIDTH(BW_), .DEPTH(B_DEPTH), .AW(BAW)) u_b (
                .clk(clk), .we(chunk_done && state == S_LOADB && bank == gr), .waddr(bwptr), .wdata(b_chunk),
                .raddr(b_raddr), .rdata(qb));
            wire signed [B_BITS-1:0] weight = qb[jsel*B_BITS +: B_BITS];
            wire [BW_-1:0] qb2;  // row pairs: the bank's copy, read at the upper row
            if (PAIRS) begin : g_pair
                tt_ram #(.WIDTH(BW_), .DEPTH(B_DEPTH), .AW(BAW)) u_b2 (
                    .clk(clk), .we(chunk_done && state == S_LOADB && bank == gr), .waddr(bwptr), .wdata(b_chunk),
                    .raddr(b_raddr2), .rdata(qb2));
            end else begin : g_single
                assign qb2 = {BW_{1'b0}};
            end
            wire signed [B_BITS-1:0] weight2 = qb2[jsel*B_BITS +: B_BITS];
            // the LANES saturating accumulators of this row, one flat vector (lane v at bits v*ACC_BITS)
            wire [ZW_-1:0] sums;  // the accumulators with this cycle's product added, saturated
            for (gv = 0; gv < LANES; gv = gv + 1) begin : g_lane
                wire signed [A_BITS-1:0] a_v;  // the lane's A value and weight: the lower lane's A, the upper
                wire signed [B_BITS-1:0] w_v;  // row's weight, in an upper lane of a row pair
                if (PAIRS && gv >= H) begin : g_upper
                    assign a_v = pair ? qa[(gv-H)*A_BITS +: A_BITS] : qa[gv*A_BITS +: A_BITS];
                    assign w_v = pair ? weight2 : weight;
                end else begin : g_lower
                    assign a_v = qa[gv*A_BITS +: A_BITS];
                    assign w_v = weight;
                end
                reg signed [ACC_BITS-1:0] acc_v;
                wire signed [WW-1:0] wide = acc_v + a_v * w_v;
                wire [ACC_BITS-1:0] sat;
                tt_saturate #(.WW(WW), .ACC_BITS(ACC_BITS)) u_sat (.wide(wide), .sat(sat));
                always @(posedge clk) begin
                    if (rst || last1) acc_v <= 0;  // a synchronous reset: the next chunk's sums start from 0
                    else if (v1) acc_v <= sat;
                end
                assign sums[gv*ACC_BITS +: ACC_BITS] = sat;
            end
            wire [ZW_-1:0] zq;
            tt_ram #(.WIDTH(ZW_), .DEPTH(2 * MAX_KC), .AW(ZAW)) u_z (
                .clk(clk), .we(last1), .waddr(last_za), .wdata(sums), .raddr(zraddr), .rdata(zq));
            assign zrows[gr*ZW_ +: ZW_] = zq;
        end
    endgenerate

    // ---- the output engine: the results of bank ob's group -----------------------------------------
    wire [ZW_-1:0] zrow = zrows[orow*ZW_ +: ZW_];
    wire [7:0] olbase = glbase[ob];
    wire [9:0] kleft = {2'b0, dim_k} - (({2'b0, ochunk} << LG) + ov);  // results of the row from the beat on
    wire [2:0] beat_n = kleft < BEAT ? kleft[2:0] : BEAT;
    wire [BEAT*32-1:0] beat;  // the chunk's results from lane ov on, sign-extended to 32 bits, 0 past beat_n
    tt_beat #(.ACC_BITS(ACC_BITS), .N(LANES), .BEAT(BEAT)) u_beat (
        .accs(zrow), .first(PAIRS && ohalf ? ov + H : ov), .n(beat_n), .beat(beat));
    wire chunk_last = {1'b0, ov} + BEAT >= LANES || kleft <= BEAT;
    wire row_last = ochunk == kc_n - 1;
    wire group_last = PAIRS ? (orow == ROWS - 1 && (ohalf || !pair)) || olbase + (ohalf ? ROWS : 0) + orow == dim_l - 1
                            : orow == ROWS - 1 || olbase + orow == dim_l - 1;
    wire res_last = chunk_last && row_last && group_last && gfinal[ob];
    wire res_ready, res_word_valid;
    wire [STREAM_BITS-1:0] res_word;
    wire [STREAM_BITS-1:0] status_word = status;
    tt_pack_out #(.W(STREAM_BITS), .BEAT(BEAT)) u_out (
        .clk(clk), .rst(rst), .res_valid(ostate == O_OUT), .res_data(beat), .res_n(beat_n), .res_last(res_last),
        .res_ready(res_ready), .word_valid(res_word_valid), .word(res_word), .word_ready(out_ready),
        .busy(pack_busy));
    assign out_valid = state == S_STATUS || res_word_valid;
    assign out_data = state == S_STATUS ? status_word : res_word;
    wire status_given = state == S_STATUS && out_ready;
    wire beat_given = ostate == O_OUT && res_ready;
    wire sent = beat_given && chunk_last && row_last && group_last;  // the group's last beat leaves
    // the result RAMs' read address: the next chunk (row) while the last beat of this one leaves
    assign oaddr = beat_given && chunk_last ? (row_last ? 8'd0 : ochunk + 8'd1) : ochunk;
    // bank b's group is whole: its last sums stored, or being stored this cycle
    wire [1:0] whole = zdone | ({1'b0, glast1} << last_zb);
    wire next_whole = ob ? whole[0] : whole[1];  // the group after bank ob's

    // ---- the A loader: A[i + 1] into one bank while block ii is worked on from the other ---------------
    wire b_done = state == S_LOADB && chunk_done && cc == jc_n - 1 && ll == dim_l - 1;  // B's last chunk is taken
    tt_loader #(.AAW(AAW), .A_DEPTH(A_DEPTH)) u_load (
        .clk(clk), .rst(rst), .restart(status_given), .start(b_done), .chunk_done(a_chunk_done),
        .dim_i(dim_i), .dim_j(dim_j), .kc_n(kc_n), .ii(ii), .go(a_go), .lcc(lcc), .waddr(a_waddr),
        .next_ready(next_ready), .this_ready(this_ready));

    // ---- control: the MAC loop ---------------------------------------------------------------------
    wire group_end = jj == dim_j - 1 && cc == kc_n - 1;  // the group's last MAC-loop cycle
    wire more_groups = lbase + grows < dim_l;             // another row group of this block follows
    wire other_free = cb ? !zown[0] : !zown[1];           // the next group's bank has been sent
    wire this_free = cb ? !zown[1] : !zown[0];
    wire [7:0] next_lbase = more_groups ? lbase + grows : 8'd0;
    wire next_final = ii + (more_groups ? 8'd0 : 8'd1) == dim_i - 1 && next_lbase + grows >= dim_l;
    wire this_final = ii == dim_i - 1 && lbase + grows >= dim_l;  // the group at ii, lbase is the last
    always @(posedge clk) begin
        if (rst) begin
            state <= S_HDR;
            v1 <= 0;
            last1 <= 0;
            glast1 <= 0;
            zown <= 0;
            cb <= 0;
            pair <= 0;
        end else begin
            v1 <= state == S_COMP;
            last1 <= state == S_COMP && jj == dim_j - 1;
            glast1 <= state == S_COMP && group_end;
            last_za <= (cb ? MAX_KC : 0) + cc;
            last_zb <= cb;
            jsel <= LANES > 1 ? jj[VW-1:0] : {VW{1'b0}};
            if (sent) zown[ob] <= 1'b0;
            case (state)
                S_HDR: if (take) begin
                    dim_i <= in_data[7:0];
                    dim_j <= in_data[15:8];
                    dim_k <= in_data[23:16];
                    dim_l <= in_data[31:24];
                    kc_n <= hdr_chunks[23:16];
                    jc_n <= hdr_chunks[15:8];
                    pair <= PAIRS && in_data[23:16] <= H;
                    status <= hdr_status;
                    state <= S_STATUS;
                end
                S_STATUS: if (status_given) begin
                    state <= status == `CODESIGN_TT_STATUS_OK ? S_LOADB : S_HDR;
                    cc <= 0; jj <= 0; ll <= 0; bank <= 0; bwptr <= 0; bbase <= 0;
                    ii <= 0;
                    gbase <= 0;
                    lbase <= 0;
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
                S_WAITA: if (this_ready && this_free) begin  // A[ii] is whole, its first group's bank sent
                    state <= S_COMP;
                    cc <= 0;
                    jj <= 0;
                    aptr <= 0;
                    zown[cb] <= 1'b1;
                    glbase[cb] <= lbase;
                    gfinal[cb] <= this_final;
                end
                S_GWAIT: if (this_free) begin  // the group's bank has been sent
                    state <= S_COMP;
                    zown[cb] <= 1'b1;
                    glbase[cb] <= lbase;
                    gfinal[cb] <= this_final;
                end
                S_COMP: begin  // j = jj of chunk cc: A at j*KC + c, B at gbase + j/LANES; the next chunk follows
                    jj <= jj == dim_j - 1 ? 8'd0 : jj + 8'd1;
                    aptr <= jj != dim_j - 1 ? aptr + kc_n : cc + 8'd1;
                    if (jj == dim_j - 1) cc <= cc + 8'd1;
                    if (group_end) begin  // the next group goes to the other bank, once that has been sent
                        cc <= 0;
                        aptr <= 0;
                        cb <= !cb;
                        lbase <= next_lbase;
                        if ((more_groups || (ii != dim_i - 1 && next_ready)) && other_free) begin  // the next group starts now
                            zown[!cb] <= 1'b1;
                            glbase[!cb] <= next_lbase;
                            gfinal[!cb] <= next_final;
                        end
                        if (more_groups) begin
                            gbase <= gbase + (PAIRS && pair ? {jc_n, 1'b0} : jc_n);
                            state <= other_free ? S_COMP : S_GWAIT;
                        end else if (ii == dim_i - 1) begin
                            state <= S_HDR;  // the output engine sends the rest; the next header waits for it
                        end else begin
                            ii <= ii + 8'd1;
                            gbase <= 0;
                            state <= next_ready && other_free ? S_COMP : S_WAITA;
                        end
                    end
                end
                default: state <= S_HDR;
            endcase
        end
    end

    // ---- control: the output engine ------------------------------------------------------------------
    always @(posedge clk) begin
        if (rst) begin
            ostate <= O_IDLE;
            ob <= 0;
            zdone <= 0;
            orow <= 0;
            ohalf <= 0;
            ochunk <= 0;
            ov <= 0;
        end else begin
            if (glast1) zdone[last_zb] <= 1'b1;
            case (ostate)
                O_IDLE: if (ob ? whole[1] : whole[0]) ostate <= O_RD;
                O_RD: begin
                    ostate <= O_OUT;
                end
                O_OUT: if (beat_given) begin
                    ov <= chunk_last ? 8'd0 : ov + BEAT;
                    if (chunk_last) begin
                        ochunk <= row_last ? 8'd0 : ochunk + 8'd1;
                        if (row_last && (group_last || orow == ROWS - 1)) begin  // the group's end, or its upper half
                            orow <= {RW{1'b0}};
                            ohalf <= PAIRS && !group_last;
                        end else if (row_last)
                            orow <= orow + 1'b1;
                    end
                    if (sent) begin  // bank ob is free; the next group's results follow once it is whole
                        zdone[ob] <= 1'b0;
                        ob <= !ob;
                        ostate <= next_whole ? O_RD : O_IDLE;
                    end
                end
                default: ostate <= O_IDLE;
            endcase
        end
    end
endmodule
