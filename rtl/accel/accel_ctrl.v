// accel_ctrl: the accelerator shell's AXI4-Lite control slave and block-level (ap_ctrl_hs) control.
//
// Register map (byte offsets are parameters, set by the generated accel_top from
// codesign.hw.accel.register_map, the Vitis HLS s_axilite layout; docs/accelerator.md):
//   CTRL  bit 0 ap_start (read/write, cleared when the run completes unless auto_restart)
//         bit 1 ap_done  (read, cleared by the read that returns it)
//         bit 2 ap_idle  (read)   bit 3 ap_ready (read)   bit 7 auto_restart (read/write)
//   GIE   bit 0 global interrupt enable
//   IER   bit 0 ap_done, bit 1 ap_ready interrupt enables
//   ISR   bit 0 ap_done, bit 1 ap_ready status; a 1 written to a bit toggles it
//   IN, OUT, CALLS               64-bit byte addresses: low word at the offset, high word 4 bytes above
//   N_IN, N_OUT, N_TRANSACTIONS, N_CALLS  32-bit counts (N_CALLS > 0: a call list, accel_seq.v)
// interrupt = GIE && (ISR != 0).
//
// A run: ap_start (written 1) while idle latches nothing new -- the argument registers feed the
// sequencer and the data movers directly -- and pulses `run_start`; the run ends when the sequencer and
// both movers are idle again (`read_busy` and `write_busy` low, the writer having seen every B response). Then ap_done and
// ap_ready pulse for one cycle together (a non-pipelined top), ap_start clears (or restarts the
// block when auto_restart is set), and ap_idle rises again.
//
// AXI4-Lite: a write is taken when address and data are both valid (awready and wready rise
// together for one cycle), answered OKAY on B; a read answers on R the cycle after the address.
// Unmapped offsets read 0 and ignore writes. Byte strobes apply to every register.
module accel_ctrl #(
    parameter ADDR_BITS = 6,
    // byte offsets of the registers; the generated top always sets them (0 is never a valid set)
    parameter OFF_CTRL = 0,
    parameter OFF_GIE = 0,
    parameter OFF_IER = 0,
    parameter OFF_ISR = 0,
    parameter OFF_IN = 0,
    parameter OFF_OUT = 0,
    parameter OFF_N_IN = 0,
    parameter OFF_N_OUT = 0,
    parameter OFF_N_TRANSACTIONS = 0,
    parameter OFF_CALLS = 0,
    parameter OFF_N_CALLS = 0
) (
    input  wire                 ap_clk,
    input  wire                 ap_rst_n,
    // AXI4-Lite slave
    input  wire [ADDR_BITS-1:0] s_axi_control_awaddr,
    input  wire                 s_axi_control_awvalid,
    output wire                 s_axi_control_awready,
    input  wire [31:0]          s_axi_control_wdata,
    input  wire [3:0]           s_axi_control_wstrb,
    input  wire                 s_axi_control_wvalid,
    output wire                 s_axi_control_wready,
    output wire [1:0]           s_axi_control_bresp,
    output reg                  s_axi_control_bvalid,
    input  wire                 s_axi_control_bready,
    input  wire [ADDR_BITS-1:0] s_axi_control_araddr,
    input  wire                 s_axi_control_arvalid,
    output wire                 s_axi_control_arready,
    output reg  [31:0]          s_axi_control_rdata,
    output wire [1:0]           s_axi_control_rresp,
    output reg                  s_axi_control_rvalid,
    input  wire                 s_axi_control_rready,
    output wire                 interrupt,
    // arguments
    output reg  [63:0]          arg_in,
    output reg  [63:0]          arg_out,
    output reg  [31:0]          arg_n_in,
    output reg  [31:0]          arg_n_out,
    output reg  [31:0]          arg_n_transactions,
    output reg  [63:0]          arg_calls,
    output reg  [31:0]          arg_n_calls,
    // block-level control
    output reg                  run_start,   // one-cycle pulse: the movers start with the arguments above
    input  wire                 read_busy,
    input  wire                 write_busy,
    output wire                 ap_idle,
    output reg                  ap_done,     // one-cycle pulse at the end of a run
    output wire                 ap_ready
);
    // distinct, word-aligned offsets inside the address space, or elaboration fails
    localparam OFFSETS_OK =
        OFF_CTRL % 4 == 0 && OFF_GIE % 4 == 0 && OFF_IER % 4 == 0 && OFF_ISR % 4 == 0 && OFF_IN % 4 == 0 &&
        OFF_OUT % 4 == 0 && OFF_N_IN % 4 == 0 && OFF_N_OUT % 4 == 0 && OFF_N_TRANSACTIONS % 4 == 0 &&
        OFF_CALLS % 4 == 0 && OFF_N_CALLS % 4 == 0 && OFF_CALLS + 8 <= (1 << ADDR_BITS) &&
        OFF_N_CALLS + 4 <= (1 << ADDR_BITS) && OFF_CALLS != OFF_CTRL && OFF_N_CALLS != OFF_CALLS &&
        OFF_CALLS != OFF_IN && OFF_CALLS != OFF_OUT && OFF_N_CALLS != OFF_CALLS + 4 && OFF_N_CALLS != OFF_IN &&
        OFF_N_CALLS != OFF_OUT && OFF_N_CALLS != OFF_N_IN && OFF_N_CALLS != OFF_N_OUT &&
        OFF_N_CALLS != OFF_N_TRANSACTIONS && OFF_CALLS != OFF_N_TRANSACTIONS &&
        OFF_N_TRANSACTIONS + 4 <= (1 << ADDR_BITS) && OFF_N_OUT + 4 <= (1 << ADDR_BITS) &&
        OFF_N_IN + 4 <= (1 << ADDR_BITS) && OFF_OUT + 8 <= (1 << ADDR_BITS) && OFF_IN + 8 <= (1 << ADDR_BITS) &&
        OFF_GIE != OFF_CTRL && OFF_IER != OFF_CTRL && OFF_ISR != OFF_CTRL && OFF_IN != OFF_CTRL &&
        OFF_IN != OFF_OUT && OFF_N_IN != OFF_N_OUT && OFF_N_OUT != OFF_N_TRANSACTIONS && OFF_N_IN != OFF_IN;
    generate
        if (!OFFSETS_OK) begin : g_bad_offsets
            accel_ctrl_register_offsets_not_set u_bad ();
        end
    endgenerate

    wire rst = !ap_rst_n;

    // ---- block-level state -------------------------------------------------------------------
    reg running, start_bit, done_bit, auto_restart, gie;
    reg [1:0] ier, isr;
    wire finish = running && !run_start && !read_busy && !write_busy;
    assign ap_idle = !running;
    assign ap_ready = ap_done;
    assign interrupt = gie && (isr != 2'b00);

    // ---- AXI4-Lite write ---------------------------------------------------------------------
    wire wtake = s_axi_control_awvalid && s_axi_control_wvalid && !s_axi_control_bvalid;
    assign s_axi_control_awready = wtake;
    assign s_axi_control_wready = wtake;
    assign s_axi_control_bresp = 2'b00;
    wire [ADDR_BITS-1:0] waddr = {s_axi_control_awaddr[ADDR_BITS-1:2], 2'b00};
    wire [31:0] wbits = s_axi_control_wdata & {{8{s_axi_control_wstrb[3]}}, {8{s_axi_control_wstrb[2]}},
                                                {8{s_axi_control_wstrb[1]}}, {8{s_axi_control_wstrb[0]}}};
    integer b;  // byte lane of a strobed write

    wire write_ctrl = wtake && waddr == OFF_CTRL;
    wire write_isr = wtake && waddr == OFF_ISR;

    // ---- AXI4-Lite read ----------------------------------------------------------------------
    wire rtake = s_axi_control_arvalid && !s_axi_control_rvalid;
    assign s_axi_control_arready = rtake;
    assign s_axi_control_rresp = 2'b00;
    wire [ADDR_BITS-1:0] raddr = {s_axi_control_araddr[ADDR_BITS-1:2], 2'b00};
    wire read_ctrl = rtake && raddr == OFF_CTRL;

    reg [31:0] rword;
    always @(*) begin
        case (raddr)
            OFF_CTRL: rword = {24'd0, auto_restart, 3'd0, ap_ready, ap_idle, done_bit, start_bit};
            OFF_GIE: rword = {31'd0, gie};
            OFF_IER: rword = {30'd0, ier};
            OFF_ISR: rword = {30'd0, isr};
            OFF_IN: rword = arg_in[31:0];
            OFF_IN + 4: rword = arg_in[63:32];
            OFF_OUT: rword = arg_out[31:0];
            OFF_OUT + 4: rword = arg_out[63:32];
            OFF_N_IN: rword = arg_n_in;
            OFF_N_OUT: rword = arg_n_out;
            OFF_N_TRANSACTIONS: rword = arg_n_transactions;
            OFF_CALLS: rword = arg_calls[31:0];
            OFF_CALLS + 4: rword = arg_calls[63:32];
            OFF_N_CALLS: rword = arg_n_calls;
            default: rword = 32'd0;
        endcase
    end

    always @(posedge ap_clk) begin
        if (rst) begin
            s_axi_control_bvalid <= 1'b0;
            s_axi_control_rvalid <= 1'b0;
            s_axi_control_rdata <= 32'd0;
            arg_in <= 64'd0;
            arg_out <= 64'd0;
            arg_n_in <= 32'd0;
            arg_n_out <= 32'd0;
            arg_n_transactions <= 32'd0;
            arg_calls <= 64'd0;
            arg_n_calls <= 32'd0;
            gie <= 1'b0;
            ier <= 2'b00;
            isr <= 2'b00;
            auto_restart <= 1'b0;
            start_bit <= 1'b0;
            done_bit <= 1'b0;
            running <= 1'b0;
            run_start <= 1'b0;
            ap_done <= 1'b0;
        end else begin
            // write channel
            if (wtake) s_axi_control_bvalid <= 1'b1;
            else if (s_axi_control_bready) s_axi_control_bvalid <= 1'b0;
            if (wtake) begin
                if (waddr == OFF_GIE && s_axi_control_wstrb[0]) gie <= s_axi_control_wdata[0];
                if (waddr == OFF_IER && s_axi_control_wstrb[0]) ier <= s_axi_control_wdata[1:0];
                for (b = 0; b < 4; b = b + 1) begin
                    if (s_axi_control_wstrb[b]) begin
                        if (waddr == OFF_IN) arg_in[8*b +: 8] <= s_axi_control_wdata[8*b +: 8];
                        if (waddr == OFF_IN + 4) arg_in[32 + 8*b +: 8] <= s_axi_control_wdata[8*b +: 8];
                        if (waddr == OFF_OUT) arg_out[8*b +: 8] <= s_axi_control_wdata[8*b +: 8];
                        if (waddr == OFF_OUT + 4) arg_out[32 + 8*b +: 8] <= s_axi_control_wdata[8*b +: 8];
                        if (waddr == OFF_N_IN) arg_n_in[8*b +: 8] <= s_axi_control_wdata[8*b +: 8];
                        if (waddr == OFF_N_OUT) arg_n_out[8*b +: 8] <= s_axi_control_wdata[8*b +: 8];
                        if (waddr == OFF_N_TRANSACTIONS) arg_n_transactions[8*b +: 8] <= s_axi_control_wdata[8*b +: 8];
                        if (waddr == OFF_CALLS) arg_calls[8*b +: 8] <= s_axi_control_wdata[8*b +: 8];
                        if (waddr == OFF_CALLS + 4) arg_calls[32 + 8*b +: 8] <= s_axi_control_wdata[8*b +: 8];
                        if (waddr == OFF_N_CALLS) arg_n_calls[8*b +: 8] <= s_axi_control_wdata[8*b +: 8];
                    end
                end
                if (write_ctrl && s_axi_control_wstrb[0]) auto_restart <= s_axi_control_wdata[7];
            end
            // read channel
            if (rtake) begin
                s_axi_control_rvalid <= 1'b1;
                s_axi_control_rdata <= rword;
            end else if (s_axi_control_rready) begin
                s_axi_control_rvalid <= 1'b0;
            end

            // block-level control: ap_start set by a write of 1, cleared at the end of the run
            run_start <= 1'b0;
            ap_done <= finish;
            if (write_ctrl && s_axi_control_wstrb[0] && s_axi_control_wdata[0]) start_bit <= 1'b1;
            else if (finish && !auto_restart) start_bit <= 1'b0;
            if (!running && start_bit && !run_start) begin
                running <= 1'b1;
                run_start <= 1'b1;
            end else if (finish) begin
                running <= 1'b0;
            end
            // ap_done: set at the end of a run, cleared by the read that returns it (a set wins)
            if (finish) done_bit <= 1'b1;
            else if (read_ctrl) done_bit <= 1'b0;
            // ISR: set by enabled events, toggled by written ones (an event wins)
            isr[0] <= (finish && ier[0]) ? 1'b1 : (write_isr && s_axi_control_wstrb[0] ? isr[0] ^ wbits[0] : isr[0]);
            isr[1] <= (finish && ier[1]) ? 1'b1 : (write_isr && s_axi_control_wstrb[0] ? isr[1] ^ wbits[1] : isr[1]);
        end
    end
endmodule
