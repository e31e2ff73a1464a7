// accel_s2mm: AXI4 write master that stores the first n 32-bit words of a PE's output stream to memory.
//
// The data bus is DATA_BITS wide (32, 64 or 128: the PE's stream word); each PE word is one beat
// of DATA_BITS / 32 consecutive 32-bit words, the lowest address in the low bits. n counts 32-bit
// words: the PE gives ceil(n / (DATA_BITS / 32)) words, and a last beat holding fewer words writes
// only theirs (WSTRB). On `start` it latches the byte address `addr` (beat aligned; its low bits
// are ignored) and n. The PE's words enter a FIFO of 2 * MAX_BURST beats (out_ready = room in the
// FIFO and fewer than that many words taken, so a word beyond them is never consumed). A burst is
// issued only once all its beats are in the FIFO, so the W channel, once opened, never waits for
// the PE: AW with AWLEN = beats - 1 (INCR, full-width beats), then the beats on W with WLAST on
// the final one. Each burst is as long as the beats left, at most MAX_BURST, and never crosses a
// 4 KiB boundary. At most MAX_OPEN bursts are open (AW taken, B not yet back): the port's write
// acceptance, and no more than the memory's B queue holds. BREADY is always high; `busy` is high from
// the cycle after `start` until every beat is written *and* every burst's B response has arrived (low
// at once when n = 0). BRESP is not checked.
// Runs overlap: `requesting` is high while a run still has beats to take, or a run waits for the one
// before to send its beats; a new `start` is taken while it is low. A run started while the one before
// still issues or sends bursts waits in a second register (its beats already enter the FIFO behind that
// run's) and takes over once they are all sent; open bursts stay counted, so `busy` falls only once every
// run's beats are written and their responses are back.
module accel_s2mm #(
    parameter ADDR_BITS = 32,  // m_axi address width (bits)
    parameter MAX_BURST = 16,  // beats per burst, power of two in 1..256
    parameter DATA_BITS = 32,  // data bus and PE stream word (bits): 32, 64 or 128
    parameter MAX_OPEN = 2     // bursts whose B response may be outstanding at once (>= 1)
) (
    input  wire                 clk,
    input  wire                 rst,
    input  wire                 start,      // while requesting is low
    input  wire [63:0]          addr,
    input  wire [31:0]          n,
    output reg                  busy,
    output wire                 requesting, // a run still takes beats, or one waits for the run before
    // PE output stream
    input  wire [DATA_BITS-1:0] out_data,
    input  wire                 out_valid,
    output wire                 out_ready,
    // AXI4 write address / data / response channels
    output wire [0:0]           m_axi_awid,
    output wire [ADDR_BITS-1:0] m_axi_awaddr,
    output wire [7:0]           m_axi_awlen,
    output wire [2:0]           m_axi_awsize,
    output wire [1:0]           m_axi_awburst,
    output wire [3:0]           m_axi_awcache,
    output wire [2:0]           m_axi_awprot,
    output reg                  m_axi_awvalid,
    input  wire                 m_axi_awready,
    output wire [DATA_BITS-1:0] m_axi_wdata,
    output wire [DATA_BITS/8-1:0] m_axi_wstrb,
    output wire                 m_axi_wlast,
    output wire                 m_axi_wvalid,
    input  wire                 m_axi_wready,
    input  wire [0:0]           m_axi_bid,
    input  wire [1:0]           m_axi_bresp,
    input  wire                 m_axi_bvalid,
    output wire                 m_axi_bready
);
    localparam DEPTH = 2 * MAX_BURST;
    localparam PW = $clog2(DEPTH);  // FIFO pointer bits
    localparam LGB = $clog2(DATA_BITS / 8);    // log2 of a beat's bytes
    localparam LGP = $clog2(DATA_BITS / 32);   // log2 of a beat's 32-bit words
    localparam BOUNDARY_BEATS = 4096 / (DATA_BITS / 8);

    generate
        if (MAX_BURST < 1 || MAX_BURST > 256 || (MAX_BURST & (MAX_BURST - 1)) != 0) begin : g_bad_burst
            accel_s2mm_max_burst_must_be_a_power_of_two_up_to_256 u_bad ();
        end
        if (DATA_BITS != 32 && DATA_BITS != 64 && DATA_BITS != 128) begin : g_bad_width
            accel_s2mm_data_bits_must_be_32_64_or_128 u_bad ();
        end
    endgenerate

    // ---- FIFO of PE words ---------------------------------------------------------------------
    reg [DATA_BITS-1:0] fifo [0:DEPTH-1];
    reg [PW-1:0] wr_ptr, rd_ptr;
    reg [PW:0] count;               // words in the FIFO
    reg [31:0] to_take;             // beats still to take from the PE
    assign out_ready = busy && to_take != 32'd0 && count != DEPTH;
    wire push = out_valid && out_ready;

    // ---- bursts -----------------------------------------------------------------------------------
    reg [ADDR_BITS-1:0] next_addr;  // byte address of the next burst
    reg [31:0] to_write;            // beats not yet put into a burst
    reg [31:0] to_send;             // beats not yet sent on W
    reg [31:0] open_bursts;         // bursts whose B response is still to come
    reg [8:0] beats;                // length of the burst being written
    reg [8:0] beat;                 // beats of it already sent
    reg in_burst;                   // W channel active

    wire [12:0] to_boundary = BOUNDARY_BEATS - {1'b0, next_addr[11:LGB]};
    wire [31:0] cap = to_boundary < MAX_BURST ? {19'd0, to_boundary} : MAX_BURST;
    wire [31:0] n_beats = (n >> LGP) + ((n & ((1 << LGP) - 1)) != 0);  // ceil(n / words per beat)
    reg [DATA_BITS/8-1:0] last_strb;  // the bytes of the last beat that n covers
    wire [8:0] next_beats = to_write < cap ? to_write[8:0] : cap[8:0];
    wire ready_to_issue = busy && !in_burst && !m_axi_awvalid && to_write != 32'd0 && count >= next_beats
                          && open_bursts < MAX_OPEN;
    wire sending = to_write != 32'd0 || in_burst || m_axi_awvalid;  // the run's bursts still to issue or send
    wire [DATA_BITS/8-1:0] n_strb = (n & ((1 << LGP) - 1)) == 0 ? {(DATA_BITS / 8){1'b1}}
                                    : ~({(DATA_BITS / 8){1'b1}} << (4 * (n & ((1 << LGP) - 1))));
    reg pending;                        // a run waits for the one before to send its beats
    reg [ADDR_BITS-1:0] pending_addr;   // its byte address, beats and last beat's bytes
    reg [31:0] pending_beats;
    reg [DATA_BITS/8-1:0] pending_strb;
    assign requesting = busy && (to_take != 32'd0 || pending);

    assign m_axi_awid = 1'b0;
    assign m_axi_awaddr = next_addr;
    assign m_axi_awlen = beats[7:0] - 8'd1;  // 256 beats wrap to 255
    assign m_axi_awsize = LGB;
    assign m_axi_awburst = 2'b01;   // INCR
    assign m_axi_awcache = 4'b0011;
    assign m_axi_awprot = 3'b000;
    assign m_axi_wdata = fifo[rd_ptr];
    assign m_axi_wstrb = to_send == 32'd1 ? last_strb : {(DATA_BITS / 8){1'b1}};
    assign m_axi_wvalid = in_burst;  // every beat of an open burst is already in the FIFO
    assign m_axi_wlast = beat == beats - 9'd1;
    assign m_axi_bready = 1'b1;
    wire pop = m_axi_wvalid && m_axi_wready;
    wire aw_done = m_axi_awvalid && m_axi_awready;
    wire b_done = m_axi_bvalid;

    always @(posedge clk) begin
        if (push) fifo[wr_ptr] <= out_data;
    end

    always @(posedge clk) begin
        if (rst) begin
            busy <= 1'b0;
            wr_ptr <= {PW{1'b0}};
            rd_ptr <= {PW{1'b0}};
            count <= {(PW + 1){1'b0}};
            to_take <= 32'd0;
            next_addr <= {ADDR_BITS{1'b0}};
            to_write <= 32'd0;
            to_send <= 32'd0;
            last_strb <= {(DATA_BITS / 8){1'b1}};
            open_bursts <= 32'd0;
            beats <= 9'd0;
            beat <= 9'd0;
            in_burst <= 1'b0;
            m_axi_awvalid <= 1'b0;
            pending <= 1'b0;
        end else begin
            if (push) begin
                wr_ptr <= wr_ptr + 1'b1;
                to_take <= to_take - 32'd1;
            end
            if (pop) rd_ptr <= rd_ptr + 1'b1;
            count <= count + push - pop;
            if (ready_to_issue) begin
                m_axi_awvalid <= 1'b1;
                beats <= next_beats;
            end else if (aw_done) begin
                m_axi_awvalid <= 1'b0;
                in_burst <= 1'b1;
                beat <= 9'd0;
                next_addr <= next_addr + ({{(ADDR_BITS - 9){1'b0}}, beats} << LGB);
                to_write <= to_write - {23'd0, beats};
            end
            if (pop) begin
                beat <= beat + 9'd1;
                to_send <= to_send - 32'd1;
                if (m_axi_wlast) in_burst <= 1'b0;
            end
            open_bursts <= open_bursts + aw_done - b_done;
            if (start) begin  // only while not requesting: the run before has taken all its beats
                to_take <= n_beats;
                busy <= n != 32'd0 || sending || open_bursts != {31'd0, b_done};
                if (sending) begin  // it waits until the run before has sent its beats
                    pending <= 1'b1;
                    pending_addr <= (addr[ADDR_BITS-1:0] >> LGB) << LGB;
                    pending_beats <= n_beats;
                    pending_strb <= n_strb;
                end else begin
                    to_write <= n_beats;
                    to_send <= n_beats;
                    last_strb <= n_strb;
                    next_addr <= (addr[ADDR_BITS-1:0] >> LGB) << LGB;
                end
            end else if (pending && !sending) begin
                pending <= 1'b0;
                to_write <= pending_beats;
                to_send <= pending_beats;
                last_strb <= pending_strb;
                next_addr <= pending_addr;
            end else if (busy && !sending && open_bursts == {31'd0, b_done})
                busy <= 1'b0;
        end
    end
endmodule
