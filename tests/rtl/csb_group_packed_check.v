// Signed 8-bit (w, lo, hi) triples through csb_group_packed's FP/EB path (two lanes a multiplier) against the
// plain products, from accumulators at 0: acc_out[2k] = lo * w, acc_out[2k+1] = hi * w. Every w with -DFULL
// (all 2^24 triples), else the weights a quick run takes (the ends, around 0, powers of two). Then WG's two
// halves on random codes, held sums and partials (a third of them next to the 32-bit ends): half 0's lane sum is
// lanes 0 and 1's products, half 1's lanes 2 and 3's, and part_out = sat32(part_in + held + half 1's sum).
// Prints "checked wrong wg_checked wg_wrong".
`timescale 1ns / 1ps
module csb_group_packed_check;
    reg  [31:0]  a;                    // FP/EB: the shared weight on all four lanes; WG: per lane
    reg  [31:0]  b;                    // lanes 0, 1: (lo, hi); lanes 2, 3: (lo, hi + 1)
    wire [127:0] acc_out;
    wire [31:0]  part_out;
    wire [19:0]  lane_sum;
    reg          wg, half;
    reg  [19:0]  held;
    reg  [31:0]  part_in;
    csb_group_packed #(.BATCH(4), .ACC_BITS(32)) dut (
        .a(a), .b(b), .wg(wg), .half(half), .held(held), .acc_in(128'd0), .part_in(part_in),
        .acc_out(acc_out), .part_out(part_out), .lane_sum(lane_sum)
    );
    integer i, w, lo, hi, checked, wrong, wg_checked, wg_wrong, seed;
    reg signed [63:0] want;
    integer quick [0:9];
    task check_weight(input integer weight);
        for (lo = -128; lo < 128; lo = lo + 1)
            for (hi = -128; hi < 128; hi = hi + 2) begin
                a = {4{weight[7:0]}};
                b = {hi[7:0] + 8'd1, lo[7:0], hi[7:0], lo[7:0]};
                #1;
                checked = checked + 2;
                if ($signed(acc_out[31:0]) !== lo * weight || $signed(acc_out[63:32]) !== hi * weight ||
                    $signed(acc_out[95:64]) !== lo * weight || $signed(acc_out[127:96]) !== (hi + 1) * weight)
                    wrong = wrong + 1;
            end
    endtask
    initial begin
        checked = 0; wrong = 0; wg = 1'b0; half = 1'b0; held = 20'd0; part_in = 32'd0;
        quick[0] = -128; quick[1] = -127; quick[2] = -64; quick[3] = -1; quick[4] = 0;
        quick[5] = 1; quick[6] = 2; quick[7] = 37; quick[8] = 64; quick[9] = 127;
`ifdef FULL
        for (w = -128; w < 128; w = w + 1) check_weight(w);
`else
        for (i = 0; i < 10; i = i + 1) check_weight(quick[i]);
`endif
        wg = 1'b1; wg_checked = 0; wg_wrong = 0; seed = 7;
        for (i = 0; i < 20000; i = i + 1) begin
            a = $random(seed); b = $random(seed);
            held = $random(seed) % 32769;      // a half's lane sum: two products, |sum| <= 2^15
            part_in = (i % 3 == 0) ? 32'h7FFF_FFFF - ($random(seed) & 32'hFFFF)
                    : (i % 3 == 1) ? 32'h8000_0000 + ($random(seed) & 32'hFFFF) : $random(seed);
            half = 1'b0; #1;
            want = $signed(a[7:0]) * $signed(b[7:0]) + $signed(a[15:8]) * $signed(b[15:8]);
            wg_wrong = wg_wrong + ($signed(lane_sum) !== want);
            half = 1'b1; #1;
            want = $signed(a[23:16]) * $signed(b[23:16]) + $signed(a[31:24]) * $signed(b[31:24]);
            wg_wrong = wg_wrong + ($signed(lane_sum) !== want);
            want = $signed(part_in) + $signed(held) + want;
            if (want > 64'sd2147483647) want = 64'sd2147483647;
            if (want < -64'sd2147483648) want = -64'sd2147483648;
            wg_wrong = wg_wrong + ($signed(part_out) !== want);
            wg_checked = wg_checked + 1;
        end
        $display("%0d %0d %0d %0d", checked, wrong, wg_checked, wg_wrong);
        $finish;
    end
endmodule
