// csb_group: one MAC group of the CSB PE, BATCH lanes of 8-bit x 8-bit products.
//
// Purely combinational; the PE registers the results. Per lane l:
//   acc_out[l] = sat(acc_in[l] + a[l] * b[l])          (FP, EB: one accumulator per lane)
// and over all lanes (WG, result-sparse):
//   part_out   = sat(part_in + sum_l a[l] * b[l])      (lane products summed exactly)
// The exact lane sum is at most 16 * 2^14 = 2^18 in magnitude: 20 bits signed.
module csb_group #(
    parameter BATCH    = 1,            // MAC lanes, 1..16
    parameter ACC_BITS = 32            // accumulator width (bits), 16..32
) (
    input  wire [8*BATCH-1:0]        a,        // signed 8-bit operand per lane
    input  wire [8*BATCH-1:0]        b,        // signed 8-bit operand per lane
    input  wire [ACC_BITS*BATCH-1:0] acc_in,   // signed accumulator per lane
    input  wire [ACC_BITS-1:0]       part_in,  // signed WG partial of this group
    output wire [ACC_BITS*BATCH-1:0] acc_out,
    output wire [ACC_BITS-1:0]       part_out
);
    localparam SUM_BITS = 20;
    genvar l;
    generate
        for (l = 0; l < BATCH; l = l + 1) begin : g_lane
            wire signed [7:0]          a_l = a[8*l +: 8];
            wire signed [7:0]          b_l = b[8*l +: 8];
            wire signed [15:0]         prod = a_l * b_l;
            wire signed [SUM_BITS-1:0] prod_x = {{(SUM_BITS-16){prod[15]}}, prod};
            wire signed [SUM_BITS-1:0] total;     // exact sum of the products of lanes 0..l
            if (l == 0) begin : g_first
                assign total = prod_x;
            end else begin : g_next
                assign total = g_lane[l-1].total + prod_x;
            end
            csb_sat_add #(.ACC_BITS(ACC_BITS), .B_BITS(16)) u_acc (
                .a(acc_in[ACC_BITS*l +: ACC_BITS]), .b(prod), .sum(acc_out[ACC_BITS*l +: ACC_BITS])
            );
        end
    endgenerate

    csb_sat_add #(.ACC_BITS(ACC_BITS), .B_BITS(SUM_BITS)) u_part (
        .a(part_in), .b(g_lane[BATCH-1].total), .sum(part_out)
    );
endmodule
