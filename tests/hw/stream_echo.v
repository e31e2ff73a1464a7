// stream_echo: a one-word stream buffer, the smallest PE the stream harness can drive (tests/hw/test_bench_build.py).
// It takes a word when empty and offers it until taken: in_ready = !full, out_valid = full, out_data = the word.
module stream_echo #(
    parameter WIDTH = 32
) (
    input  wire             clk,
    input  wire             rst,
    input  wire [WIDTH-1:0] in_data,
    input  wire             in_valid,
    output wire             in_ready,
    output wire [WIDTH-1:0] out_data,
    output wire             out_valid,
    input  wire             out_ready
);
    reg             full;
    reg [WIDTH-1:0] word;

    assign in_ready = !full;
    assign out_valid = full;
    assign out_data = word;

    always @(posedge clk) begin
        if (rst) begin
            full <= 1'b0;
            word <= {WIDTH{1'b0}};
        end else if (full && out_ready) begin
            full <= 1'b0;
        end else if (!full && in_valid) begin
            full <= 1'b1;
            word <= in_data;
        end
    end
endmodule
