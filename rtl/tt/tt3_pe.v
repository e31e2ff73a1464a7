// tt3_pe: TT processing element 3 (docs/tt_pe.md): the outer product Z[i,j] = A[i] * B[j].
//
// A STREAM_BITS-wide (32, 64 or 128) valid/ready word stream in and out. One transaction: the header
// (I in bits 7:0, J in 15:8, bits 31:16 zero), the cached operand B (one row
// of J values, chunked), then A (one row of I values, chunked); after each
// chunk of A the PE sends Z[i, 0..J-1] for every i of the chunk. B is held in
// a block RAM of chunks; LANES multipliers form the products of one A value
// with one chunk of B at once, and the products leave one word a cycle
// without being accumulated (paper 003, Sec. 4: PE3 is bound by the bandwidth
// of storing its results).
//
// Cycles (no input gaps, no backpressure), from the header to the last
// product: 2 + JC*CWB + IC*CWA + I*(2*JC + J), JC = ceil(J/LANES),
// IC = ceil(I/LANES); 2 for a refused header (codesign.pe.tt.cycles).
`include "codesign_constants.vh"  // status codes (codesign/hw/constants.py)
module tt3_pe #(
    parameter LANES  = 16,  // multipliers (power of two)
    parameter A_BITS = 8,   // streamed operand width (bits)
    parameter B_BITS = 16,  // cached operand width (bits)
    parameter MAX_J  = 64,
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
    localparam MAX_JC = (MAX_J + LANES - 1) / LANES;
    localparam BAW = MAX_JC > 1 ? $clog2(MAX_JC) : 1;
    localparam AW_ = LANES * A_BITS;
    localparam BW_ = LANES * B_BITS;
    localparam PW = A_BITS + B_BITS;  // exact product (bits)

    localparam S_HDR = 3'd0, S_STATUS = 3'd1, S_LOADB = 3'd2, S_LOADA = 3'd3, S_RD = 3'd4, S_MUL = 3'd5,
               S_OUT = 3'd6;

    reg [2:0] state;
    reg [7:0] dim_i, dim_j, jc_n, ic_n;
    reg [`CODESIGN_STATUS_BITS-1:0] status;

    // ---- header and input chunks ----------------------------------------------------------------
    wire [`CODESIGN_STATUS_BITS-1:0] hdr_status;
    wire [31:0] hdr_chunks;  // ceil(dim / LANES) of every header field
    tt_header #(.DIMS(2), .LANES(LANES), .MAX_J(MAX_J), .W(STREAM_BITS)) u_hdr (
        .word(in_data), .status(hdr_status), .chunks(hdr_chunks));
    wire loading = state == S_LOADB || state == S_LOADA;
    assign in_ready = state == S_HDR || loading;
    wire take = in_valid && in_ready;
    wire chunk_done;
    wire [CWM*STREAM_BITS-1:0] full;  // the chunk's words, the one being taken included
    tt_chunk_in #(.CWM(CWM), .W(STREAM_BITS)) u_in (
        .clk(clk), .rst(rst), .clear(state == S_STATUS), .take(take && loading),
        .words(state == S_LOADB ? CWB[3:0] : CWA[3:0]), .in_data(in_data), .chunk(full), .done(chunk_done));

    reg [7:0] bc, ic, jcc;  // chunk of B being loaded, chunk of A, chunk of B being multiplied
    reg [7:0] iv, ov;       // lane of A (the row i), lane of the product being sent
    wire [8:0] bbase = {1'b0, bc} << LG;
    wire [8:0] ibase = {1'b0, ic} << LG;
    wire [AW_-1:0] a_lanes;
    wire [BW_-1:0] b_lanes;
    tt_unpack #(.LANES(LANES), .BITS(A_BITS), .SLOT(SLOT_A), .INW(CWM*STREAM_BITS)) u_ua (
        .bits_in(full), .kbase(ibase), .len(dim_i), .lanes(a_lanes));
    tt_unpack #(.LANES(LANES), .BITS(B_BITS), .SLOT(SLOT_B), .INW(CWM*STREAM_BITS)) u_ub (
        .bits_in(full), .kbase(bbase), .len(dim_j), .lanes(b_lanes));

    // ---- B buffer, the A chunk, the multipliers ----------------------------------------------------
    wire [BW_-1:0] qb;
    tt_ram #(.WIDTH(BW_), .DEPTH(MAX_JC), .AW(BAW)) u_b (
        .clk(clk), .we(chunk_done && state == S_LOADB), .waddr(bc[BAW-1:0]), .wdata(b_lanes),
        .raddr(jcc[BAW-1:0]), .rdata(qb));
    reg [AW_-1:0] achunk;
    wire signed [A_BITS-1:0] a_now = achunk[iv*A_BITS +: A_BITS];
    reg [LANES*PW-1:0] prod;
    integer u;
    always @(posedge clk)
        if (state == S_MUL)
            for (u = 0; u < LANES; u = u + 1)
                prod[u*PW +: PW] <= a_now * $signed(qb[u*B_BITS +: B_BITS]);

    // ---- output ----------------------------------------------------------------------------------
    wire signed [PW-1:0] p_sel = prod[ov*PW +: PW];
    wire signed [31:0] p_ext = p_sel;
    wire chunk_last = ov == LANES - 1 || ({1'b0, jcc} << LG) + ov == dim_j - 1;
    wire row_last = jcc == jc_n - 1;
    wire a_chunk_last = iv == LANES - 1 || ibase + iv == dim_i - 1;
    wire res_last = chunk_last && row_last && a_chunk_last && ic == ic_n - 1;  // Z[I-1, J-1]
    wire res_ready, res_word_valid;
    wire [STREAM_BITS-1:0] res_word;
    wire [STREAM_BITS-1:0] status_word = status;
    tt_pack_out #(.W(STREAM_BITS)) u_out (
        .clk(clk), .rst(rst), .res_valid(state == S_OUT), .res_data(p_ext), .res_n(3'd1), .res_last(res_last),
        .res_ready(res_ready), .word_valid(res_word_valid), .word(res_word), .word_ready(out_ready),
        .busy());
    assign out_valid = state == S_STATUS || res_word_valid;
    assign out_data = state == S_STATUS ? status_word : res_word;
    wire give = state == S_STATUS ? out_ready : res_ready;  // the status word left, or the result was taken

    // ---- control ---------------------------------------------------------------------------------
    always @(posedge clk) begin
        if (rst) begin
            state <= S_HDR;
        end else begin
            case (state)
                S_HDR: if (take) begin
                    dim_i <= in_data[7:0];
                    dim_j <= in_data[15:8];
                    jc_n <= hdr_chunks[15:8];
                    ic_n <= hdr_chunks[7:0];
                    status <= hdr_status;
                    state <= S_STATUS;
                end
                S_STATUS: if (give) begin
                    state <= status == `CODESIGN_TT_STATUS_OK ? S_LOADB : S_HDR;
                    bc <= 0; ic <= 0;
                end
                S_LOADB: if (chunk_done) begin
                    bc <= bc + 8'd1;
                    if (bc == jc_n - 1) state <= S_LOADA;
                end
                S_LOADA: if (chunk_done) begin
                    achunk <= a_lanes;
                    iv <= 0;
                    jcc <= 0;
                    state <= S_RD;
                end
                S_RD: state <= S_MUL;
                S_MUL: begin
                    state <= S_OUT;
                    ov <= 0;
                end
                S_OUT: if (give) begin
                    ov <= ov + 8'd1;
                    if (chunk_last) begin
                        state <= S_RD;
                        jcc <= row_last ? 8'd0 : jcc + 8'd1;
                        if (row_last) begin
                            iv <= iv + 8'd1;
                            if (a_chunk_last) begin
                                ic <= ic + 8'd1;
                                state <= ic == ic_n - 1 ? S_HDR : S_LOADA;
                            end
                        end
                    end
                end
                default: state <= S_HDR;
            endcase
        end
    end
endmodule
