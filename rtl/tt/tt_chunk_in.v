// tt_chunk_in: the words of one operand chunk, gathered from the input stream (docs/tt_pe.md, "Chunks").
//
// A chunk of LANES operands takes `words` W-bit words (1..CWM). Word w of
// the chunk is bits [W*w, W*w + W) of `chunk`; while the last word is being
// taken, `chunk` already holds it in place (from `in_data`) and `done` is
// high, so the chunk can be unpacked and stored in the same cycle. `clear`
// makes the next word taken word 0.
module tt_chunk_in #(
    parameter CWM = 4,  // words of the widest chunk (1..15)
    parameter W   = 32  // stream word width (bits): 32, 64 or 128
) (
    input  wire             clk,
    input  wire             rst,
    input  wire             clear,
    input  wire             take,     // in_data is taken as the next word of the chunk
    input  wire [3:0]       words,    // words of the chunk being gathered
    input  wire [W-1:0]     in_data,
    output wire [CWM*W-1:0] chunk,
    output wire             done
);
    reg [CWM*W-1:0] held;
    reg [3:0] count;  // word of the chunk taken next
    assign done = take && count == words - 1;
    genvar w;
    generate
        for (w = 0; w < CWM; w = w + 1) begin : g_word
            assign chunk[w*W +: W] = count == w ? in_data : held[w*W +: W];
        end
    endgenerate
    always @(posedge clk) begin
        if (rst) count <= 0;
        else if (clear) count <= 0;
        else if (take) begin
            held[count*W +: W] <= in_data;
            count <= done ? 4'd0 : count + 4'd1;
        end
    end
endmodule
