// accel_mm2s: AXI4 read master that streams n 32-bit words from memory into a PE's input stream.
//
// The data bus is DATA_BITS wide (32, 64 or 128: the PE's stream word), and each beat carries
// DATA_BITS / 32 consecutive 32-bit words, the lowest address in the low bits (the little-endian
// layout of a stream word in memory, as the HLS shell reads it). n still counts 32-bit words; a
// last beat that holds fewer than DATA_BITS / 32 of them reaches the PE with the parts past n
// zeroed. On `start` it latches the byte address `addr` (beat aligned; its low bits are ignored)
// and n, and from the next cycle issues INCR bursts of full-width beats (ARSIZE = log2 of the
// beat's bytes) on the AR channel, one after the other as the slave takes them: each burst is as
// long as the beats left to request, at most MAX_BURST, and never crosses a 4 KiB boundary (AXI4
// forbids it). Read
// data goes straight to the PE: in_data = RDATA, in_valid = RVALID, RREADY = in_ready, so the
// PE's input handshake is the R handshake and nothing is buffered here. `busy` is high from the
// cycle after `start` until the last beat has moved (low at once when n = 0). RRESP is not
// checked: an error response still delivers its beats, and the words read are what the PE gets.
//
// Runs overlap: `requesting` is high while a run still has bursts to ask for, other than its last
// if the AR channel takes that one this cycle, and a new `start` is allowed as soon as it is low
// (so one-burst runs can be asked for one a cycle), while earlier runs' beats are still on their
// way. Their beats
// arrive in order (one ID) and are counted together, so `busy` falls after the last beat of the
// last run. A list's rows thus keep several bursts in flight and hide the memory's latency. Only
// the last beat of all runs is masked, so a run that overlaps a later one must be whole beats
// (the sequencer's list mode checks every block; the direct mode has a single run).
module accel_mm2s #(
    parameter ADDR_BITS = 32,  // m_axi address width (bits)
    parameter MAX_BURST = 16,  // beats per burst, power of two in 1..256 (16: AXI3 slaves such as Zynq-7000 HP)
    parameter DATA_BITS = 32   // data bus and PE stream word (bits): 32, 64 or 128
) (
    input  wire                 clk,
    input  wire                 rst,
    input  wire                 start,
    input  wire [63:0]          addr,
    input  wire [31:0]          n,
    output wire                 busy,
    output wire                 requesting,
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
    input  wire [DATA_BITS-1:0] m_axi_rdata,
    input  wire [1:0]           m_axi_rresp,
    input  wire                 m_axi_rlast,
    input  wire                 m_axi_rvalid,
    output wire                 m_axi_rready,
    // PE input stream
    output wire [DATA_BITS-1:0] in_data,
    output wire                 in_valid,
    input  wire                 in_ready
);
    localparam LGB = $clog2(DATA_BITS / 8);    // log2 of a beat's bytes
    localparam LGP = $clog2(DATA_BITS / 32);   // log2 of a beat's 32-bit words
    localparam BOUNDARY_BEATS = 4096 / (DATA_BITS / 8);

    generate
        if (MAX_BURST < 1 || MAX_BURST > 256 || (MAX_BURST & (MAX_BURST - 1)) != 0) begin : g_bad_burst
            accel_mm2s_max_burst_must_be_a_power_of_two_up_to_256 u_bad ();
        end
        if (DATA_BITS != 32 && DATA_BITS != 64 && DATA_BITS != 128) begin : g_bad_width
            accel_mm2s_data_bits_must_be_32_64_or_128 u_bad ();
        end
    endgenerate

    reg [ADDR_BITS-1:0] next_addr;  // byte address of the next burst
    reg [31:0] to_request;          // beats not yet requested
    reg [31:0] to_receive;          // beats not yet moved to the PE
    reg [8:0] beats;                // length of the burst on AR (1..MAX_BURST)

    // beats up to the next 4 KiB boundary: 1..BOUNDARY_BEATS
    wire [12:0] to_boundary = BOUNDARY_BEATS - {1'b0, next_addr[11:LGB]};
    wire [31:0] cap = to_boundary < MAX_BURST ? {19'd0, to_boundary} : MAX_BURST;
    wire [8:0] next_beats = to_request < cap ? to_request[8:0] : cap[8:0];
    wire [31:0] n_beats = (n >> LGP) + ((n & ((1 << LGP) - 1)) != 0);  // ceil(n / words per beat)
    // the first burst of a run, from its start address
    wire [12:0] start_boundary = BOUNDARY_BEATS - {1'b0, addr[11:LGB]};
    wire [31:0] start_cap = start_boundary < MAX_BURST ? {19'd0, start_boundary} : MAX_BURST;
    wire [8:0] start_beats = n_beats < start_cap ? n_beats[8:0] : start_cap[8:0];

    assign m_axi_arid = 1'b0;
    assign m_axi_araddr = next_addr;
    assign m_axi_arlen = beats[7:0] - 8'd1;  // 256 beats wrap to 255
    assign m_axi_arsize = LGB;
    assign m_axi_arburst = 2'b01;   // INCR
    assign m_axi_arcache = 4'b0011; // normal, non-cacheable, bufferable (what Vitis HLS m_axi drives)
    assign m_axi_arprot = 3'b000;

    generate
        if (DATA_BITS == 32) begin : g_word
            assign in_data = m_axi_rdata;
        end else begin : g_parts
            reg [DATA_BITS-1:0] last_mask;  // the words of the last beat that n covers
            always @(posedge clk) begin
                if (start) last_mask <= (n & ((1 << LGP) - 1)) == 0 ? {DATA_BITS{1'b1}}
                                        : ~({DATA_BITS{1'b1}} << (32 * (n & ((1 << LGP) - 1))));
            end
            assign in_data = to_receive == 32'd1 ? m_axi_rdata & last_mask : m_axi_rdata;
        end
    endgenerate
    // the last burst on AR is taken this cycle: a new run may start in the same cycle
    wire last_taken = m_axi_arvalid && m_axi_arready && to_request == {23'd0, beats};
    assign requesting = m_axi_arvalid ? !last_taken : to_request != 32'd0;
    assign busy = to_receive != 32'd0;
    assign in_valid = m_axi_rvalid && busy;
    assign m_axi_rready = in_ready && busy;
    wire moved = m_axi_rvalid && m_axi_rready;
    always @(posedge clk) begin
        if (rst) begin
            m_axi_arvalid <= 1'b0;
            next_addr <= {ADDR_BITS{1'b0}};
            to_request <= 32'd0;
            to_receive <= 32'd0;
            beats <= 9'd0;
        end else begin
            if (start) begin  // only while not requesting: the AR channel is idle or takes the last burst
                m_axi_arvalid <= n_beats != 32'd0;
                beats <= start_beats;
                next_addr <= (addr[ADDR_BITS-1:0] >> LGB) << LGB;
                to_request <= n_beats;
            end else if (m_axi_arvalid && m_axi_arready) begin
                m_axi_arvalid <= 1'b0;
                next_addr <= next_addr + ({{(ADDR_BITS - 9){1'b0}}, beats} << LGB);
                to_request <= to_request - {23'd0, beats};
            end else if (!m_axi_arvalid && to_request != 32'd0) begin
                m_axi_arvalid <= 1'b1;
                beats <= next_beats;
            end
            // beats still to move: a start adds its run, a moved beat leaves
            to_receive <= to_receive + (start ? n_beats : 32'd0) - (moved ? 32'd1 : 32'd0);
        end
    end
endmodule
