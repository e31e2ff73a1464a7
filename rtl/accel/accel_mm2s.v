// accel_mm2s: AXI4 read master that streams n 32-bit words from memory into a PE's input stream.
//
// On `start` it latches the byte address `addr` (word aligned; bits 1:0 are ignored) and the word
// count `n`, then issues INCR bursts of 32-bit beats (ARSIZE 2) on the AR channel, one after the
// other as the slave takes them: each burst is as long as the words left to request, at most
// MAX_BURST beats, and never crosses a 4 KiB boundary (AXI4 forbids it). Read data goes straight
// to the PE: in_data = RDATA, in_valid = RVALID, RREADY = in_ready, so the PE's input handshake is
// the R handshake and nothing is buffered here. `busy` is high from the cycle after `start` until
// the n-th word has moved (low at once when n = 0). RRESP is not checked: an error response still
// delivers its beats, and the words read are what the PE gets.
module accel_mm2s #(
    parameter ADDR_BITS = 32,  // m_axi address width (bits)
    parameter MAX_BURST = 16   // beats per burst, power of two in 1..256 (16: AXI3 slaves such as Zynq-7000 HP)
) (
    input  wire                 clk,
    input  wire                 rst,
    input  wire                 start,
    input  wire [63:0]          addr,
    input  wire [31:0]          n,
    output reg                  busy,
    // AXI4 read address / data channels
    output wire [0:0]           m_axi_arid,
    output wire [ADDR_BITS-1:0] m_axi_araddr,
    output wire [7:0]           m_axi_arlen,
    output wire [2:0]           m_axi_arsize,
    output wire [1:0]           m_axi_arburst,
    output wire [3:0]           m_axi_arcache,
    output wire [2:0]           m_axi_arprot,
    output reg                  m_axi_arvalid,
    input  wire                 m_axi_arready,
    input  wire [0:0]           m_axi_rid,
    input  wire [31:0]          m_axi_rdata,
    input  wire [1:0]           m_axi_rresp,
    input  wire                 m_axi_rlast,
    input  wire                 m_axi_rvalid,
    output wire                 m_axi_rready,
    // PE input stream
    output wire [31:0]          in_data,
    output wire                 in_valid,
    input  wire                 in_ready
);
    generate
        if (MAX_BURST < 1 || MAX_BURST > 256 || (MAX_BURST & (MAX_BURST - 1)) != 0) begin : g_bad_burst
            accel_mm2s_max_burst_must_be_a_power_of_two_up_to_256 u_bad ();
        end
    endgenerate

    reg [ADDR_BITS-1:0] next_addr;  // byte address of the next burst
    reg [31:0] to_request;          // words not yet requested
    reg [31:0] to_receive;          // words not yet moved to the PE
    reg [8:0] beats;                // length of the burst on AR (1..MAX_BURST)

    // words up to the next 4 KiB boundary: 1..1024
    wire [10:0] to_boundary = 11'd1024 - {1'b0, next_addr[11:2]};
    wire [31:0] cap = to_boundary < MAX_BURST ? {21'd0, to_boundary} : MAX_BURST;
    wire [8:0] next_beats = to_request < cap ? to_request[8:0] : cap[8:0];

    assign m_axi_arid = 1'b0;
    assign m_axi_araddr = next_addr;
    assign m_axi_arlen = beats[7:0] - 8'd1;  // 256 beats wrap to 255
    assign m_axi_arsize = 3'd2;
    assign m_axi_arburst = 2'b01;   // INCR
    assign m_axi_arcache = 4'b0011; // normal, non-cacheable, bufferable (what Vitis HLS m_axi drives)
    assign m_axi_arprot = 3'b000;

    assign in_data = m_axi_rdata;
    assign in_valid = m_axi_rvalid && busy;
    assign m_axi_rready = in_ready && busy;
    wire moved = m_axi_rvalid && m_axi_rready;

    always @(posedge clk) begin
        if (rst) begin
            busy <= 1'b0;
            m_axi_arvalid <= 1'b0;
            next_addr <= {ADDR_BITS{1'b0}};
            to_request <= 32'd0;
            to_receive <= 32'd0;
            beats <= 9'd0;
        end else if (start) begin
            busy <= n != 32'd0;
            m_axi_arvalid <= 1'b0;
            next_addr <= {addr[ADDR_BITS-1:2], 2'b00};
            to_request <= n;
            to_receive <= n;
        end else begin
            if (m_axi_arvalid && m_axi_arready) begin
                m_axi_arvalid <= 1'b0;
                next_addr <= next_addr + {{(ADDR_BITS - 11){1'b0}}, beats, 2'b00};
                to_request <= to_request - {23'd0, beats};
            end else if (!m_axi_arvalid && to_request != 32'd0) begin
                m_axi_arvalid <= 1'b1;
                beats <= next_beats;
            end
            if (moved) begin
                to_receive <= to_receive - 32'd1;
                if (to_receive == 32'd1) busy <= 1'b0;
            end
        end
    end
endmodule
