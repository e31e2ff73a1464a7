// tt_pack_out: 32-bit results into W-bit output words (docs/tt_pe.md, "Results").
//
// The PE offers one result a cycle (`res_valid`, `res_data`); result p of a
// word is bits [32p, 32p + 32). A word leaves together with the result that
// fills its last part, or with the transaction's last result (`res_last`),
// its unused parts 0; the results before it are held here and taken at once
// (`res_ready` high). So the PE still spends one cycle per result, and at
// W = 32 every result is its own word, passed straight through.
// `word_valid`/`word` go to the output stream (the PE muxes in its status).
module tt_pack_out #(
    parameter W = 32  // output word width (bits): 32, 64 or 128
) (
    input  wire         clk,
    input  wire         rst,
    input  wire         res_valid,
    input  wire [31:0]  res_data,
    input  wire         res_last,
    output wire         res_ready,
    output wire         word_valid,
    output wire [W-1:0] word,
    input  wire         word_ready
);
    localparam P = W / 32;  // results per word
    generate
        if (P == 1) begin : g_through
            // no state: a register here, though never loaded, is not one synthesis can prove constant
            assign word = res_data;
            assign word_valid = res_valid;
            assign res_ready = word_ready;
        end else begin : g_pack
            reg [W-1:0] held;  // the results of the word so far, in place, 0 above them
            reg [1:0] fill;    // results held (0..P-1)
            wire [W-1:0] res_wide = res_data;
            wire closes = fill == P - 1 || res_last;  // this result ends the word
            assign word = held | (res_wide << (32 * fill));
            assign word_valid = res_valid && closes;
            assign res_ready = closes ? word_ready : 1'b1;
            always @(posedge clk) begin
                if (rst) begin
                    held <= 0;
                    fill <= 0;
                end else if (res_valid && res_ready) begin
                    held <= closes ? {W{1'b0}} : word;
                    fill <= closes ? 2'd0 : fill + 2'd1;
                end
            end
        end
    endgenerate
endmodule
