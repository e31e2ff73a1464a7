// csb_upd on vectors from a file: each word {left, shift[4:0], grad[31:0], buf[23:0]} (62 bits, hex a line, the
// count given by +n=...), the updated buffer word printed a line in hex.
`timescale 1ns / 1ps
module csb_upd_check;
    reg  [61:0] vectors [0:(1 << 18) - 1];
    reg  [23:0] buf_in;
    reg  [31:0] grad;
    reg  [4:0]  shift;
    reg         left;
    wire [23:0] buf_out;
    csb_upd dut (.buf_in(buf_in), .grad(grad), .shift(shift), .left(left), .buf_out(buf_out));
    integer i, n;
    reg [1023:0] path;
    initial begin
        if (!$value$plusargs("vectors=%s", path) || !$value$plusargs("n=%d", n)) $fatal(1, "+vectors= and +n= needed");
        $readmemh(path, vectors, 0, n - 1);
        for (i = 0; i < n; i = i + 1) begin
            {left, shift, grad, buf_in} = vectors[i];
            #1 $display("%06h", buf_out);
        end
        $finish;
    end
endmodule
