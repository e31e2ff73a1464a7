// Signed 8-bit (w, lo, hi) triples through csb_group_packed's FP/EB path (two lanes a multiplier) against the
// plain products, from accumulators at 0: acc_out[2k] = lo * w, acc_out[2k+1] = hi * w. Every w with -DFULL
// (all 2^24 triples), else the weights a quick run takes (the ends, around 0, powers of two). Prints
// "checked wrong".
`timescale 1ns / 1ps
module csb_group_packed_check;
    reg  [31:0]  a;                    // the shared weight on all four lanes
    reg  [31:0]  b;                    // lanes 0, 1: (lo, hi); lanes 2, 3: (lo, hi + 1)
    wire [127:0] acc_out;
    wire [31:0]  part_out;
    wire [19:0]  lane_sum;
    csb_group_packed #(.BATCH(4), .ACC_BITS(32)) dut (
        .a(a), .b(b), .wg(1'b0), .half(1'b0), .held(20'd0), .acc_in(128'd0), .part_in(32'd0),
        .acc_out(acc_out), .part_out(part_out), .lane_sum(lane_sum)
    );
    integer i, w, lo, hi, checked, wrong;
    integer quick [0:9];
    task check_weight(input integer weight);
        for (lo = -128; lo < 128; lo = lo + 1)
            for (hi = -128; hi < 128; hi = hi + 2) begin
                a = {4{weight[7:0]}};
                b = {hi[7:0] + 8'd1, lo[7:0], hi[7:0], lo[7:0]};
                #1;
                checked = checked + 2;
                if ($signed(acc_out[31:0]) != lo * weight || $signed(acc_out[63:32]) != hi * weight ||
                    $signed(acc_out[95:64]) != lo * weight || $signed(acc_out[127:96]) != (hi + 1) * weight)
                    wrong = wrong + 1;
            end
    endtask
    initial begin
        checked = 0; wrong = 0;
        quick[0] = -128; quick[1] = -127; quick[2] = -64; quick[3] = -1; quick[4] = 0;
        quick[5] = 1; quick[6] = 2; quick[7] = 37; quick[8] = 64; quick[9] = 127;
`ifdef FULL
        for (w = -128; w < 128; w = w + 1) check_weight(w);
`else
        for (i = 0; i < 10; i = i + 1) check_weight(quick[i]);
`endif
        $display("%0d %0d", checked, wrong);
        $finish;
    end
endmodule
