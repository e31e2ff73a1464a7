// csb_ram: simple dual-port RAM, one write port with lane enables, one registered read port.
//
// Written in the shape synthesis tools map onto block RAM (Xilinx RAMB18/36 in
// simple dual-port mode) or, when small, distributed RAM: one write address,
// one read address, the read data registered and read-first (a read of the
// word being written returns the old word). LANES write-enable groups of
// LANE_BITS bits each make up one word.
//
// BYPASS = 1 adds a one-cycle forwarding path outside the array: when the word
// read in cycle n was written in cycle n, the lanes written in that cycle are
// taken from a copy of the write data. Users that read what they wrote in the
// cycle before (the PE's read-modify-write accumulators) set it; the array
// itself stays a plain read-first RAM.
module csb_ram #(
    parameter LANES     = 1,           // write-enable groups per word
    parameter LANE_BITS = 32,          // bits per group
    parameter DEPTH     = 16,          // words
    parameter AW        = 8,           // address width (bits), 2^AW >= DEPTH
    parameter BYPASS    = 0            // 1: forward the write of the read cycle
) (
    input  wire                       clk,
    input  wire [LANES-1:0]           we,
    input  wire [AW-1:0]              waddr,
    input  wire [LANES*LANE_BITS-1:0] wdata,
    input  wire [AW-1:0]              raddr,
    output wire [LANES*LANE_BITS-1:0] rdata
);
    localparam W = LANES * LANE_BITS;
    reg [W-1:0] mem [0:DEPTH-1];
    reg [W-1:0] q;
    integer i;
    always @(posedge clk) begin
        for (i = 0; i < LANES; i = i + 1)
            if (we[i]) mem[waddr][i*LANE_BITS +: LANE_BITS] <= wdata[i*LANE_BITS +: LANE_BITS];
        q <= mem[raddr];
    end

    generate
        if (BYPASS) begin : g_bypass
            reg             hit;
            reg [LANES-1:0] hit_lanes;
            reg [W-1:0]     written;
            always @(posedge clk) begin
                hit       <= (waddr == raddr);
                hit_lanes <= we;
                written   <= wdata;
            end
            genvar l;
            for (l = 0; l < LANES; l = l + 1) begin : g_lane
                assign rdata[l*LANE_BITS +: LANE_BITS] = (hit && hit_lanes[l]) ? written[l*LANE_BITS +: LANE_BITS]
                                                                               : q[l*LANE_BITS +: LANE_BITS];
            end
        end else begin : g_plain
            assign rdata = q;
        end
    endgenerate
endmodule
