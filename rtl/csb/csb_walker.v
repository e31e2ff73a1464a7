// csb_walker: the result buffer R of csb_pe walked in stream order (channel, row, column, lane) of its result
// grid, H x W positions, the bank and word address of each position kept incrementally (no divider).
//
// Position (r, c) lives in bank ((r/h)*OUT_W + c/h) mod PARALLEL, word (ch*H + r)*CW + h*((c/h)/PARALLEL) + c%h,
// with h = 2 on a stride-2 EB grid (`half`), else 1 (docs/csb.md, "Stride 2"). The load of an initial section
// and the drain step it STEP lanes at a time (`adv`: one stream beat of words, STEP dividing BATCH); `clear`
// restarts it at the grid's first word. `addr` is the
// current word, `addr_next` the word after this clock edge (the drain reads ahead with it).
/* verilator lint_off WIDTHEXPAND */
/* verilator lint_off WIDTHTRUNC */
module csb_walker #(
    parameter PARALLEL = 1,            // MAC groups, R banks, 1..8
    parameter BATCH    = 1,            // lanes a word
    parameter OUT_W    = 1,            // output tile width: a row moves the bank by OUT_W mod P
    parameter AW       = 24,           // address width (bits)
    parameter PW       = 12,           // row and column width (bits)
    parameter STEP     = 1             // lanes an advance moves by (a beat's parts), a divisor of BATCH
) (
    input  wire          clk,
    input  wire          clear,
    input  wire          adv,
    input  wire          half,         // the grid halves rows and columns (a stride-2 EB grid)
    input  wire [PW-1:0] h,            // grid rows
    input  wire [PW-1:0] w,            // grid columns
    input  wire [AW-1:0] cw,           // words a grid row takes in a bank
    output reg  [4:0]    lane,
    output wire [2:0]    bank,
    output wire [AW-1:0] addr,
    output wire [AW-1:0] addr_next
);
    localparam [2:0] ROW_RES = OUT_W % PARALLEL;
    reg [PW-1:0] c, r;                 // column and row in the grid
    reg [2:0]    cres, rres;           // (c/h) mod P and ((r/h)*OUT_W) mod P
    reg [AW-1:0] cdiv;                 // (c/h) / P
    reg [AW-1:0] base;                 // (ch*H + r) * CW
    wire          lane_end = (lane == BATCH - STEP);
    wire          col_end  = (c + 12'd1 == w);
    wire          last_row = (r + 12'd1 == h);
    wire          step_col = adv && lane_end;
    wire          step_row = step_col && col_end;
    // c/h (r/h) moves on with c (r) at h = 1, from an odd c (r) at h = 2
    wire          c_half   = !half || c[0];
    wire          r_half   = !half || r[0];
    wire [PW-1:0] c_n      = col_end ? {PW{1'b0}} : c + 12'd1;
    wire [2:0]    cres_n   = (col_end || (c_half && cres == PARALLEL - 1)) ? 3'd0 : (c_half ? cres + 3'd1 : cres);
    wire [AW-1:0] cdiv_n   = col_end ? {AW{1'b0}} : ((c_half && cres == PARALLEL - 1) ? cdiv + 24'd1 : cdiv);
    wire [3:0]    rres_sum = rres + ROW_RES;
    wire [2:0]    rres_n   = last_row ? 3'd0
                           : (!r_half ? rres : ((rres_sum >= PARALLEL) ? rres_sum - PARALLEL : rres_sum));
    wire [AW-1:0] base_n   = base + cw;
    // a column's word in its row: (c/h)/P, or at h = 2 twice that plus c's parity
    wire [AW-1:0] col_word   = half ? {cdiv[AW-2:0], c[0]} : cdiv;
    wire [AW-1:0] col_word_n = half ? {cdiv_n[AW-2:0], c_n[0]} : cdiv_n;
    wire [3:0]    bank_sum   = rres + cres;
    assign bank      = (bank_sum >= PARALLEL) ? bank_sum - PARALLEL : bank_sum;
    assign addr      = base + col_word;
    assign addr_next = clear ? {AW{1'b0}} : (step_row ? base_n : (step_col ? base + col_word_n : addr));
    always @(posedge clk) begin
        if (clear) begin
            lane <= 5'd0; c <= {PW{1'b0}}; r <= {PW{1'b0}}; cres <= 3'd0; rres <= 3'd0;
            cdiv <= {AW{1'b0}}; base <= {AW{1'b0}};
        end else if (adv) begin
            lane <= lane_end ? 5'd0 : lane + STEP;
            if (step_col) begin
                c <= c_n; cres <= cres_n; cdiv <= cdiv_n;
            end
            if (step_row) begin
                r <= last_row ? {PW{1'b0}} : r + 12'd1; rres <= rres_n; base <= base_n;
            end
        end
    end
endmodule
/* verilator lint_on WIDTHTRUNC */
/* verilator lint_on WIDTHEXPAND */
