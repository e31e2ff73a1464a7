// stream_harness: drives a stream PE from memory, cycle by cycle, in the simulator itself.
//
// The cocotb stream bench writes the input stream words
// and the index of each transaction's first word as $readmemh files into the
// simulator's working directory, sets the ports below and raises start. From
// then on no Python runs per cycle: on each falling edge the harness offers
// the next input word (or, with a gap, in_valid low and garbage data) and sets
// out_ready (low under backpressure), both drawn from an xorshift64 generator
// seeded by the bench; on each rising edge it takes the handshakes as the PE
// sees them (the values before the edge) and logs, to stream_out.txt,
//   S <cycle>         the first input word of a transaction moved,
//   O <cycle> <hex>   an output word moved (x or z digits if unresolved),
//   E <cycle> <sent> <gaps> <input stalls> <output stalls> <idle>
// the last when every input word moved and n_out output words came, after
// DRAIN_CYCLES cycles counted from the last word's (watching for extra
// words), or when idle cycles (no handshake) reach idle_limit. Then done rises and the bench checks
// the log. A word moves on a rising edge where valid && ready.
//
// The PE is `STREAM_DUT with parameters `STREAM_DUT_PARAMETERS (build
// defines); WIDTH is its stream word, DEPTH_LOG2 and STARTS_LOG2 size the two
// memories. Probabilities are thresholds out of 2^32: a gap when the draw is
// below gap_threshold, backpressure when below bp_threshold.
`timescale 1ns / 1ps
module stream_harness #(
    parameter WIDTH = 32,
    parameter DEPTH_LOG2 = 10,
    parameter STARTS_LOG2 = 10,
    parameter DRAIN_CYCLES = 8
) (
    input  wire        clk,
    input  wire        start,
    input  wire [63:0] seed,
    input  wire [31:0] gap_threshold,
    input  wire [31:0] bp_threshold,
    input  wire [31:0] idle_limit,
    input  wire [31:0] n_in,
    input  wire [31:0] n_out,
    input  wire [31:0] n_starts,
    output reg         done
);
    reg             rst = 1'b1;
    reg [WIDTH-1:0] in_data = {WIDTH{1'b0}};
    reg             in_valid = 1'b0;
    wire            in_ready;
    wire [WIDTH-1:0] out_data;
    wire            out_valid;
    reg             out_ready = 1'b0;

    `STREAM_DUT #(`STREAM_DUT_PARAMETERS) dut (
        .clk(clk), .rst(rst),
        .in_data(in_data), .in_valid(in_valid), .in_ready(in_ready),
        .out_data(out_data), .out_valid(out_valid), .out_ready(out_ready)
    );

    reg [WIDTH-1:0] words [0:(1 << DEPTH_LOG2) - 1];
    reg [31:0]      starts [0:(1 << STARTS_LOG2) - 1];

    // the drive block's
    reg [63:0] state = 64'd0;
    reg [3:0]  reset_left = 4'd0;
    // the take block's
    reg        begun = 1'b0, finished = 1'b0;
    reg [31:0] cycle, sent, received, next_start, gaps, input_stalls, output_stalls, idle;
    reg [7:0]  drain;
    integer    log;
    initial done = 1'b0;

    function [63:0] xorshift(input [63:0] x);
        reg [63:0] y;
        begin
            y = x ^ (x << 13);
            y = y ^ (y >> 7);
            xorshift = y ^ (y << 17);
        end
    endfunction

    // WIDTH bits of garbage from the generator's state
    function [WIDTH-1:0] garbage(input [63:0] x);
        reg [255:0] wide;
        begin
            wide = {x, ~x, {x[31:0], x[63:32]}, x ^ 64'hA5A5_5A5A_F00F_0FF0};
            garbage = wide[WIDTH-1:0];
        end
    endfunction

    // drive: on the falling edge, as a clocked source would between two rising edges; the PE is held in reset
    // for three cycles after start
    always @(negedge clk) begin
        if (!begun || finished) begin
            rst <= !finished;
            in_valid <= 1'b0;
            out_ready <= 1'b0;
            state = (seed == 64'd0) ? 64'h9E3779B97F4A7C15 : seed;
            reset_left = 4'd3;
        end else if (reset_left != 0) begin
            rst <= 1'b1;
            reset_left = reset_left - 1;
        end else begin
            rst <= 1'b0;
            state = xorshift(state);
            if (sent < n_in && state[63:32] >= gap_threshold) begin
                in_valid <= 1'b1;
                in_data <= words[sent];
            end else begin
                in_valid <= 1'b0;
                in_data <= garbage(xorshift(state));
            end
            out_ready <= state[31:0] >= bp_threshold;
        end
    end

    // take: on the rising edge, the handshakes as the PE sees them
    always @(posedge clk) begin
        if (start && !begun) begin
            if (n_in > (32'd1 << DEPTH_LOG2) || n_starts > (32'd1 << STARTS_LOG2))
                $fatal(1, "stream_harness: %0d words or %0d starts overflow its memories", n_in, n_starts);
            if (n_in != 0)
                $readmemh("stream_in.hex", words, 0, n_in - 1);
            if (n_starts != 0)
                $readmemh("stream_starts.hex", starts, 0, n_starts - 1);
            log = $fopen("stream_out.txt", "w");
            cycle = 0; sent = 0; received = 0; next_start = 0;
            gaps = 0; input_stalls = 0; output_stalls = 0; idle = 0;
            drain = DRAIN_CYCLES;
            begun <= 1'b1;
        end else if (begun && !finished && !rst) begin : take
            reg moved;
            moved = 1'b0;
            if (in_valid && in_ready) begin
                if (next_start < n_starts && sent == starts[next_start]) begin
                    $fwrite(log, "S %0d\n", cycle);
                    next_start = next_start + 1;
                end
                sent = sent + 1;
                moved = 1'b1;
            end else if (in_valid) begin
                input_stalls = input_stalls + 1;
            end else if (sent < n_in) begin
                gaps = gaps + 1;
            end
            if (out_valid && out_ready) begin
                $fwrite(log, "O %0d %h\n", cycle, out_data);
                received = received + 1;
                moved = 1'b1;
            end else if (out_valid) begin
                output_stalls = output_stalls + 1;
            end
            idle = moved ? 0 : idle + 1;
            cycle = cycle + 1;
            if (received >= n_out && sent == n_in)
                drain = drain - 1;
            if (drain == 0 || idle >= idle_limit) begin
                $fwrite(log, "E %0d %0d %0d %0d %0d %0d\n", cycle, sent, gaps, input_stalls, output_stalls, idle);
                $fclose(log);
                finished <= 1'b1;
                done <= 1'b1;
            end
        end
    end
endmodule
