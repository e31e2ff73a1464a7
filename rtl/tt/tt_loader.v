// tt_loader: the A loader of PE1 and PE2 (docs/tt_pe.md, "Overlap").
//
// Once B is in (`start` at the edge B's last chunk is taken) it takes block A[loaded], J rows of KC chunks,
// into bank loaded % 2 of the PE's A RAM, a chunk whenever `chunk_done` says one completed, while the
// compute loop works on block `ii` from the other bank: it never runs more than one block ahead of that loop
// (loaded <= ii + 1), and it stops after the transaction's last block. `restart` (a new transaction's status
// given) rewinds it. The PE passes `go` into its input ready: the loader takes words only while it may.
module tt_loader #(
    parameter AAW = 4,          // one A bank's address width (bits)
    parameter A_DEPTH = 16      // chunks in one bank (bank 1 starts there)
) (
    input  wire           clk,
    input  wire           rst,
    input  wire           restart,     // a transaction starts: no block taken yet
    input  wire           start,       // B is in: take A from the next cycle
    input  wire           chunk_done,  // a chunk of A completes at this edge
    input  wire [7:0]     dim_i,       // blocks of A in the transaction
    input  wire [7:0]     dim_j,       // rows in a block
    input  wire [7:0]     kc_n,        // chunks in a row
    input  wire [7:0]     ii,          // the block the compute loop works on
    output wire           go,          // the loader takes stream words this cycle
    output reg  [7:0]     lcc,         // the chunk of the row being taken
    output wire [AAW:0]   waddr,       // where that chunk goes in the A RAM (both banks)
    output wire           next_ready,  // block ii + 1 is whole by the next cycle
    output wire           this_ready   // block ii is whole by the next cycle
);
    reg on;
    reg [7:0] loaded;      // blocks taken whole this transaction
    reg [7:0] ljj;         // the row j being taken
    reg [AAW-1:0] lptr;    // its chunk's address in the bank (j*KC + c)
    assign go = on && loaded < dim_i && {1'b0, loaded} <= {1'b0, ii} + 9'd1;
    wire row_end = lcc == kc_n - 1;
    wire block_done = chunk_done && row_end && ljj == dim_j - 1;  // A[loaded] is whole at this edge
    assign next_ready = loaded > ii + 8'd1 || (block_done && loaded == ii + 8'd1);
    assign this_ready = loaded > ii || (block_done && loaded == ii);
    assign waddr = loaded[0] ? A_DEPTH + lptr : {1'b0, lptr};

    always @(posedge clk) begin
        if (rst) begin
            on <= 0;
        end else if (restart) begin
            on <= 0;
            loaded <= 0; lcc <= 0; ljj <= 0; lptr <= 0;
        end else begin
            if (start) on <= 1;
            if (chunk_done) begin
                lcc <= row_end ? 8'd0 : lcc + 8'd1;
                if (row_end) ljj <= ljj == dim_j - 1 ? 8'd0 : ljj + 8'd1;
                lptr <= block_done ? {AAW{1'b0}} : lptr + 1'b1;
                if (block_done) begin
                    loaded <= loaded + 8'd1;
                    if (loaded == dim_i - 1) on <= 0;  // the transaction's last block: nothing more to take
                end
            end
        end
    end
endmodule
