// tt_pack_out: 32-bit results into W-bit output words (docs/tt_pe.md, "Results").
//
// The PE offers a *beat* of 1 to BEAT results a cycle (`res_valid`,
// `res_n`, result p of the beat in bits [32p, 32p + 32) of `res_data`, the
// parts from `res_n` up 0); result p of a word is bits [32p, 32p + 32), and
// the results of a transaction fill the words one after another. A word
// leaves in the cycle of the beat that fills its last part, or with the
// transaction's last beat (`res_last`), its unused parts 0; results before
// it are held here and a beat that closes no word is taken at once
// (`res_ready` high). A beat that overfills its word keeps the rest for the
// next word; when that beat is the last one, the rest leaves on the next
// cycle as a word of its own (`busy` high until it has left, so the PE waits
// for it before the next transaction's status). At W = 32 every result is
// its own word, passed straight through.
// `word_valid`/`word` go to the output stream (the PE muxes in its status).
module tt_pack_out #(
    parameter W = 32,   // output word width (bits): 32, 64 or 128
    parameter BEAT = 1  // most results a beat brings: a power of two, at most W / 32
) (
    input  wire                 clk,
    input  wire                 rst,
    input  wire                 res_valid,
    input  wire [BEAT*32-1:0]   res_data,
    input  wire [2:0]           res_n,     // results in this beat, 1 .. BEAT
    input  wire                 res_last,
    output wire                 res_ready,
    output wire                 word_valid,
    output wire [W-1:0]         word,
    input  wire                 word_ready,
    output wire                 busy
);
    localparam P = W / 32;  // results per word
    generate
        if (P == 1) begin : g_through
            // no state: a register here, though never loaded, is not one synthesis can prove constant
            assign word = res_data[31:0];
            assign word_valid = res_valid;
            assign res_ready = word_ready;
            assign busy = 1'b0;
        end else begin : g_pack
            reg [W-1:0] held;  // the results of the word so far, in place, 0 above them
            reg [1:0] fill;    // results held (0..P-1)
            reg tail;          // `held` is the transaction's last word, still to leave
            wire [2*W-1:0] joined = {{W{1'b0}}, held} | ({{(2*W-BEAT*32){1'b0}}, res_data} << (32 * fill));
            wire [3:0] total = {2'b0, fill} + (BEAT == 1 ? 4'd1 : {1'b0, res_n});
            wire [3:0] rest = total - P;  // results past the word, when the beat spills
            wire spills = BEAT > 1 && total > P;  // the beat ends past its word
            wire closes = total >= P || res_last;  // the beat ends the word
            assign word = tail ? held : joined[W-1:0];
            assign word_valid = tail || (res_valid && closes);
            assign res_ready = !tail && (closes ? word_ready : 1'b1);
            assign busy = tail;
            always @(posedge clk) begin
                if (rst) begin
                    held <= 0;
                    fill <= 0;
                    tail <= 0;
                end else if (tail) begin
                    if (word_ready) begin
                        held <= 0;
                        tail <= 0;
                    end
                end else if (res_valid && res_ready) begin
                    held <= closes ? joined[2*W-1:W] : joined[W-1:0];
                    fill <= closes ? (spills && !res_last ? rest[1:0] : 2'd0) : total[1:0];
                    tail <= spills && res_last;
                end
            end
        end
    endgenerate
endmodule
