// tt_beat: a beat for tt_pack_out from a PE's flat accumulators (docs/tt_pe.md, "Stream width").
//
// Results FIRST .. FIRST + n - 1 of the N accumulators in `accs` (accumulator a at bits
// [a*ACC_BITS, (a+1)*ACC_BITS)), each sign-extended to 32 bits, as result p of the beat at bits [32p, 32p + 32);
// the parts from n up are 0, as tt_pack_out ORs a beat into its word. An index past the accumulators reads 0
// (BEAT zero accumulators pad `accs`), so no out-of-range select reaches synthesis.
module tt_beat #(
    parameter ACC_BITS = 32,  // accumulator width (bits), at most 32
    parameter N        = 8,   // accumulators the beat's results are chosen from
    parameter BEAT     = 1    // results a beat holds at most
) (
    input  wire [N*ACC_BITS-1:0] accs,
    input  wire [7:0]            first,  // the beat's first accumulator
    input  wire [2:0]            n,      // results in this beat, 1 .. BEAT
    output reg  [BEAT*32-1:0]    beat
);
    wire [(N+BEAT)*ACC_BITS-1:0] padded = {{(BEAT*ACC_BITS){1'b0}}, accs};
    reg signed [ACC_BITS-1:0] lane;
    reg signed [31:0] lane_ext;
    integer p;
    always @* begin
        for (p = 0; p < BEAT; p = p + 1) begin
            lane = padded[(first + p)*ACC_BITS +: ACC_BITS];
            lane_ext = lane;
            beat[p*32 +: 32] = p < n ? lane_ext : 32'd0;
        end
    end
endmodule
