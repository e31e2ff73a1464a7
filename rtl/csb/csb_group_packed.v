// csb_group_packed: one MAC group of a packed CSB PE (PACKED = 1), BATCH lanes on BATCH/2 multipliers of
// 25 x 8 bits, each one DSP slice (docs/csb.md, "Two products a DSP slice"). The same results as csb_group.
//
// Purely combinational; the PE registers the results. FP and EB share their weight a[.] across the lanes, so
// multiplier k takes lanes 2k and 2k+1 at once, every step:
//   p = (b[2k+1] * 2^16 + b[2k]) * w,   b[2k] * w = p[15:0] (signed),   b[2k+1] * w = p[31:16] + p[15]
//   acc_out[l] = sat(acc_in[l] + b[l] * w)
// (the low product is at most 2^14 in magnitude, so it fits its 16 bits; a negative one borrowed one from the
// high part). WG's lanes share no operand: the PE gives each WG step two cycles, and multiplier k takes lane k
// at `half` 0 and lane BATCH/2 + k at `half` 1. `lane_sum` is the cycle's exact sum; the PE keeps half 0's and
// hands it back as `held` at half 1, where
//   part_out = sat(part_in + (held + lane_sum))
// the one saturating addition of an unpacked group's step (its exact lane sum is at most 2^18: 20 bits).
module csb_group_packed #(
    parameter BATCH    = 2,            // MAC lanes, 2..16, even
    parameter ACC_BITS = 32            // accumulator width (bits), 16..32
) (
    input  wire [8*BATCH-1:0]        a,        // signed 8-bit operand per lane (FP, EB: the weight on every lane)
    input  wire [8*BATCH-1:0]        b,        // signed 8-bit operand per lane
    input  wire                      wg,       // a WG step (per-lane a and b), else FP or EB
    input  wire                      half,     // WG: the step's second cycle (lanes BATCH/2..BATCH-1)
    input  wire [19:0]               held,     // WG: the first cycle's lane sum
    input  wire [ACC_BITS*BATCH-1:0] acc_in,   // signed accumulator per lane
    input  wire [ACC_BITS-1:0]       part_in,  // signed WG partial of this group
    output wire [ACC_BITS*BATCH-1:0] acc_out,
    output wire [ACC_BITS-1:0]       part_out,
    output wire [19:0]               lane_sum  // WG: exact sum of this cycle's lane products
);
    localparam SUM_BITS = 20;
    localparam SLICES = BATCH / 2;
    genvar k;
    generate
        for (k = 0; k < SLICES; k = k + 1) begin : g_slice
            wire signed [7:0]  lo_b = b[8*(2*k) +: 8];
            wire signed [7:0]  hi_b = b[8*(2*k+1) +: 8];
            wire signed [7:0]  wg_a = half ? a[8*(SLICES+k) +: 8] : a[8*k +: 8];
            wire signed [7:0]  wg_b = half ? b[8*(SLICES+k) +: 8] : b[8*k +: 8];
            wire signed [24:0] pair = $signed({hi_b, 16'd0}) + lo_b;
            wire signed [24:0] op_a = wg ? {{17{wg_a[7]}}, wg_a} : pair;
            wire signed [7:0]  op_b = wg ? wg_b : $signed(a[8*(2*k) +: 8]);
            wire signed [32:0] p    = op_a * op_b;          // one DSP slice
            wire signed [15:0] lo   = p[15:0];
            wire signed [15:0] hi   = p[31:16] + {15'd0, p[15]};
            wire signed [SUM_BITS-1:0] sum;                 // exact sum of the WG products of slices 0..k
            if (k == 0) begin : g_first
                assign sum = lo;
            end else begin : g_next
                assign sum = g_slice[k-1].sum + lo;
            end
            csb_sat_add #(.ACC_BITS(ACC_BITS), .B_BITS(16)) u_lo (
                .a(acc_in[ACC_BITS*(2*k) +: ACC_BITS]), .b(lo), .sum(acc_out[ACC_BITS*(2*k) +: ACC_BITS])
            );
            csb_sat_add #(.ACC_BITS(ACC_BITS), .B_BITS(16)) u_hi (
                .a(acc_in[ACC_BITS*(2*k+1) +: ACC_BITS]), .b(hi), .sum(acc_out[ACC_BITS*(2*k+1) +: ACC_BITS])
            );
        end
    endgenerate

    assign lane_sum = g_slice[SLICES-1].sum;
    wire signed [SUM_BITS-1:0] step_sum = $signed(held) + $signed(lane_sum);
    csb_sat_add #(.ACC_BITS(ACC_BITS), .B_BITS(SUM_BITS)) u_part (
        .a(part_in), .b(step_sum), .sum(part_out)
    );
endmodule
