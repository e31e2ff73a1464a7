// tt_unpack: one chunk of LANES operands from its stream bits (docs/tt_pe.md, "Chunks").
//
// Lane v is the low BITS bits of field v (SLOT bits wide) of the chunk's
// words read as one little-endian bit string; lanes at positions
// kbase + v >= len (the padding of the last chunk of a row) are 0.
module tt_unpack #(
    parameter LANES = 16,
    parameter BITS  = 8,   // operand width (bits)
    parameter SLOT  = 8,   // field width (bits): 4, 8 or 16
    parameter INW   = 128  // bits of the chunk words (>= LANES * SLOT)
) (
    input  wire [INW-1:0]        bits_in,
    input  wire [8:0]            kbase,   // position of lane 0 in the row
    input  wire [7:0]            len,     // row length
    output wire [LANES*BITS-1:0] lanes
);
    genvar v;
    generate
        for (v = 0; v < LANES; v = v + 1) begin : g_lane
            assign lanes[v*BITS +: BITS] = (kbase + v < len) ? bits_in[v*SLOT +: BITS] : {BITS{1'b0}};
        end
    endgenerate
endmodule
