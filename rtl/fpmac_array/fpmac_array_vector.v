// fpmac_array_vector: the element-wise operations of the FP-MAC array PE (docs/fpmac_array.md, "Element-wise
// operations"; golden codesign.pe.fpmac_array.vector), run by fpmac_array_pe after the status word of an accepted
// header with K = 0.
//
// op 1 ReLU: X in, y = x where x is positive, else +0, out. op 2 mask: X, then Z in; y = x where z is positive.
// op 3 momentum SGD: the scalars wd, mu, step, then G, P, V in; per element g' = fpmac(wd, p, g),
// v' = fpmac(mu, v, g'), p' = fpmac(step, v', p); P' out, then V'. "Positive": sign bit 0 and a value that is
// not +0 at fb; outputs have their bits below fb cleared.
//
// Two element RAMs of MAX_M * MAX_N words, element (i, j) at i * N + j: G holds G (SGD), Z (mask) or X (ReLU),
// later V'; P holds P (SGD) or X (mask), later P'. SGD's V is not stored: each v word, as it is taken, reads its
// g and p, and three FP-MACs in a row (rtl/fpmac/fpmac.v, LATENCY 4 each) turn them into v' (written to G eight
// cycles later) and p' (written to P twelve cycles later). Each address is read once, by its own v, before its
// results are written, so the RAMs' one read and one write port never collide.
//
// Cycles after the status word (no input gaps, no backpressure): the input words, then for SGD 1 + 12 + 1 for
// the last element to leave the pipeline and the pipeline to be seen empty, then 1 to read the first output,
// then the output words (codesign.pe.fpmac_array.cycles).
module fpmac_array_vector #(
    parameter EXP_BITS = 8,
    parameter MAX_FB   = 23,
    parameter ROUNDING = 0,
    parameter DEPTH    = 16,  // elements of the largest tile, MAX_M * MAX_N
    parameter AW       = 4    // element address bits, 2^AW >= DEPTH
) (
    input  wire                        clk,
    input  wire                        rst,
    input  wire                        start,     // the status word of an accepted element-wise header leaves
    input  wire [2:0]                  op,
    input  wire [7:0]                  dim_m,
    input  wire [7:0]                  dim_n,
    input  wire [$clog2(MAX_FB+1)-1:0] fb,
    input  wire [EXP_BITS+MAX_FB:0]    in_word,
    input  wire                        in_valid,
    output wire                        in_ready,
    output wire [EXP_BITS+MAX_FB:0]    out_word,
    output wire                        out_valid,
    input  wire                        out_ready,
    output wire                        done       // the last output word leaves in this cycle
);
    localparam W = 1 + EXP_BITS + MAX_FB;
    localparam FBW = $clog2(MAX_FB + 1);
    localparam integer MAX_FB_I = MAX_FB;
    localparam [FBW-1:0] MAX_FB_F = MAX_FB_I[FBW-1:0];
    localparam OP_RELU = 3'd1, OP_MASK = 3'd2, OP_SGD = 3'd3;
    localparam U_IDLE = 3'd0, U_SCAL = 3'd1, U_SEC = 3'd2, U_DRAIN = 3'd3, U_PRE = 3'd4, U_OUT = 3'd5;

    reg [2:0] state;
    reg [1:0] sec, sc;             // input section, scalar index
    reg [7:0] ii, jj;              // element (i, j) of the section being taken or sent
    reg [AW-1:0] e;                // its address, i * N + j
    reg [W-1:0] wd, mu, step;
    wire is_sgd = op == OP_SGD;
    wire [1:0] last_sec = is_sgd ? 2'd2 : (op == OP_MASK ? 2'd1 : 2'd0);
    wire elem_last = ii == dim_m - 8'd1 && jj == dim_n - 8'd1;
    wire j_wrap = jj == dim_n - 8'd1;

    assign in_ready = state == U_SCAL || state == U_SEC;
    wire take = in_valid && in_ready;
    wire take_elem = take && state == U_SEC;

    // ---- where a taken element goes ---------------------------------------------------------------------
    wire pipe_in = take_elem && is_sgd && sec == 2'd2;            // SGD's V: into the FP-MAC chain
    wire to_p = take_elem && (is_sgd ? sec == 2'd1 : (op == OP_MASK && sec == 2'd0));
    wire to_g = take_elem && !pipe_in && !to_p;

    // ---- output side ------------------------------------------------------------------------------------
    reg  o_sec;                    // SGD's second output section (V')
    assign out_valid = state == U_OUT;
    wire give = out_valid && out_ready;
    wire out_last = elem_last && (!is_sgd || o_sec);
    assign done = give && out_last;
    wire [AW-1:0] e_next = elem_last ? {AW{1'b0}} : e + {{(AW-1){1'b0}}, 1'b1};
    wire [AW-1:0] o_raddr = state == U_OUT && give ? e_next : (state == U_OUT ? e : {AW{1'b0}});

    // ---- the two element RAMs ---------------------------------------------------------------------------
    wire [W-1:0] g_q, p_q;
    wire          v_we, p_we;       // pipeline results: v' into G, p' into P
    wire [W-1:0]  v_res, p_res;
    reg  [AW-1:0] v_addr [0:7];     // element address beside the chain: 8 stages to v', 12 to p'
    reg  [AW-1:0] p_addr [0:3];
    wire [AW-1:0] raddr = state == U_SEC ? e : o_raddr;
    fpmac_array_ram #(.WIDTH(W), .DEPTH(DEPTH), .AW(AW)) u_g (
        .clk(clk), .we(to_g || v_we), .waddr(v_we ? v_addr[7] : e), .wdata(v_we ? v_res : in_word),
        .raddr(raddr), .rdata(g_q));
    fpmac_array_ram #(.WIDTH(W), .DEPTH(DEPTH), .AW(AW)) u_p (
        .clk(clk), .we(to_p || p_we), .waddr(p_we ? p_addr[3] : e), .wdata(p_we ? p_res : in_word),
        .raddr(raddr), .rdata(p_q));

    // ---- the SGD chain: stage S (g and p read), then three FP-MACs -----------------------------------------
    reg          s_valid;
    reg [W-1:0]  s_v;
    reg [AW-1:0] s_addr;
    reg [W-1:0]  v_d [0:3];          // v beside the first FP-MAC
    reg [W-1:0]  p_d [0:7];          // p beside the first two
    reg [11:0]   live;               // an element in each of the twelve FP-MAC stages
    wire m1_valid, m2_valid;
    wire [W-1:0] m1_res;
    fpmac #(.EXP_BITS(EXP_BITS), .MAX_FB(MAX_FB), .ROUNDING(ROUNDING)) u_m1 (
        .clk(clk), .rst(rst), .in_valid(s_valid), .a(wd), .b(p_q), .c(g_q), .fb(fb),
        .out_valid(m1_valid), .result(m1_res));
    fpmac #(.EXP_BITS(EXP_BITS), .MAX_FB(MAX_FB), .ROUNDING(ROUNDING)) u_m2 (
        .clk(clk), .rst(rst), .in_valid(m1_valid), .a(mu), .b(v_d[3]), .c(m1_res), .fb(fb),
        .out_valid(m2_valid), .result(v_res));
    fpmac #(.EXP_BITS(EXP_BITS), .MAX_FB(MAX_FB), .ROUNDING(ROUNDING)) u_m3 (
        .clk(clk), .rst(rst), .in_valid(m2_valid), .a(step), .b(v_res), .c(p_d[7]), .fb(fb),
        .out_valid(p_we), .result(p_res));
    assign v_we = m2_valid;
    wire busy = s_valid || live != 12'd0;

    // ---- ReLU and mask on the way out -----------------------------------------------------------------
    wire [FBW-1:0] drop = MAX_FB_F - fb;
    wire [W-1:0] keep_mask = {W{1'b1}} << drop;
    wire [W-1:0] g_kept = g_q & keep_mask;
    wire g_positive = g_kept != {W{1'b0}} && !g_q[W-1];
    wire [W-1:0] p_kept = p_q & keep_mask;
    assign out_word = is_sgd ? (o_sec ? g_q : p_q)
                    : (!g_positive ? {W{1'b0}} : (op == OP_RELU ? g_kept : p_kept));

    integer d;
    always @(posedge clk) begin
        s_valid <= pipe_in;
        s_v <= in_word;
        s_addr <= e;
        v_d[0] <= s_v;
        p_d[0] <= p_q;
        v_addr[0] <= s_addr;
        for (d = 1; d < 4; d = d + 1) v_d[d] <= v_d[d-1];
        for (d = 1; d < 8; d = d + 1) begin p_d[d] <= p_d[d-1]; v_addr[d] <= v_addr[d-1]; end
        p_addr[0] <= v_addr[7];
        for (d = 1; d < 4; d = d + 1) p_addr[d] <= p_addr[d-1];
        live <= {live[10:0], s_valid};
        if (rst) begin
            state <= U_IDLE;
            s_valid <= 1'b0;
            live <= 12'd0;
        end else begin
            case (state)
                U_IDLE: if (start) begin
                    state <= op == OP_SGD ? U_SCAL : U_SEC;
                    sec <= 2'd0; sc <= 2'd0; ii <= 8'd0; jj <= 8'd0; e <= {AW{1'b0}}; o_sec <= 1'b0;
                end
                U_SCAL: if (take) begin
                    if (sc == 2'd0) wd <= in_word;
                    if (sc == 2'd1) mu <= in_word;
                    if (sc == 2'd2) begin step <= in_word; state <= U_SEC; end
                    sc <= sc + 2'd1;
                end
                U_SEC: if (take) begin
                    e <= e_next;
                    jj <= j_wrap ? 8'd0 : jj + 8'd1;
                    ii <= elem_last ? 8'd0 : (j_wrap ? ii + 8'd1 : ii);
                    if (elem_last) begin
                        sec <= sec + 2'd1;
                        if (sec == last_sec) state <= is_sgd ? U_DRAIN : U_PRE;
                    end
                end
                U_DRAIN: if (!busy) state <= U_PRE;
                U_PRE: state <= U_OUT;
                U_OUT: if (give) begin
                    e <= e_next;
                    jj <= j_wrap ? 8'd0 : jj + 8'd1;
                    ii <= elem_last ? 8'd0 : (j_wrap ? ii + 8'd1 : ii);
                    if (elem_last) o_sec <= 1'b1;
                    if (out_last) state <= U_IDLE;
                end
                default: state <= U_IDLE;
            endcase
        end
    end
endmodule
