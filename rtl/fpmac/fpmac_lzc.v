// fpmac_lzc: count of leading zeros of a W-bit vector (W when the vector is zero).
//
// Purely combinational. Written as a priority scan so that it stays plain
// Verilog-2005 for any W; synthesis turns it into a priority encoder.
module fpmac_lzc #(
    parameter W  = 48,                 // vector width (bits)
    parameter CW = 6                   // count width (bits), at least $clog2(W+1)
) (
    input  wire [W-1:0]  v,
    output reg  [CW-1:0] count
);
    localparam integer  W_I      = W;
    localparam [CW-1:0] ALL_ZERO = W_I[CW-1:0];
    integer i;
    always @* begin
        count = ALL_ZERO;
        // Scan upwards: the highest set bit is the last one to assign.
        for (i = 0; i < W; i = i + 1)
            if (v[i])
                count = ALL_ZERO - 1'b1 - i[CW-1:0];
    end
endmodule
