// tt_header: the status of a TT PE's header word and the chunk counts of its fields (docs/tt_pe.md).
//
// PE1 and PE2 (DIMS = 4): I, J, K, L in the four low bytes; status BAD_HEADER when
// one of them is 0 or a bit above bit 31 is set (a word wider than 32 bits),
// TOO_LARGE when J > MAX_J, K > MAX_K or L > MAX_L. PE3 (DIMS = 2): I, J in the low
// two bytes; status BAD_HEADER when a bit from bit 16 up is set or I or J is 0, TOO_LARGE when
// J > MAX_J. Field n of `chunks` is ceil(dim n / LANES), the chunks of a row
// of that length. Combinational.
`include "codesign_constants.vh"  // status codes (codesign/hw/constants.py)
module tt_header #(
    parameter DIMS  = 4,   // 4 (PE1, PE2) or 2 (PE3)
    parameter LANES = 16,  // values per chunk (power of two)
    parameter MAX_J = 16,
    parameter MAX_K = 64,  // unused when DIMS = 2
    parameter MAX_L = 32,  // unused when DIMS = 2
    parameter W     = 32   // header word width (bits): 32, 64 or 128
) (
    input  wire [W-1:0] word,
    output wire [`CODESIGN_STATUS_BITS-1:0] status,
    output wire [31:0]  chunks
);
    localparam LG = $clog2(LANES);
    wire [7:0] dim_i = word[7:0];
    wire [7:0] dim_j = word[15:8];
    wire [7:0] dim_k = word[23:16];
    wire [7:0] dim_l = word[31:24];
    wire high_clear = (word >> (DIMS == 2 ? 16 : 32)) == 0;  // every bit above the fields is 0
    wire bad = !high_clear || (DIMS == 2 ? (dim_i == 0 || dim_j == 0)
                                         : (dim_i == 0 || dim_j == 0 || dim_k == 0 || dim_l == 0));
    wire big = DIMS == 2 ? dim_j > MAX_J : (dim_j > MAX_J || dim_k > MAX_K || dim_l > MAX_L);
    assign status = bad ? `CODESIGN_TT_STATUS_BAD_HEADER : (big ? `CODESIGN_TT_STATUS_TOO_LARGE : `CODESIGN_TT_STATUS_OK);
    genvar n;
    generate
        for (n = 0; n < 4; n = n + 1) begin : g_chunks
            wire [8:0] rounded = {1'b0, word[8*n +: 8]} + (LANES - 1);
            assign chunks[8*n +: 8] = rounded >> LG;
        end
    endgenerate
endmodule
