// fpmac_array_ram: simple dual-port RAM for the FP-MAC array's buffers: one write port, one registered read port.
//
// One write address and one read address, read data registered and
// read-first, no reset of the array: the shape synthesis maps onto block RAM
// (Xilinx RAMB18/36 in simple dual-port mode) or, when small, distributed
// RAM. The PE never reads a word in the cycle it is written.
module fpmac_array_ram #(
    parameter WIDTH = 32,  // bits per word (one container)
    parameter DEPTH = 16,  // words
    parameter AW    = 4    // address width (bits), 2^AW >= DEPTH
) (
    input  wire             clk,
    input  wire             we,
    input  wire [AW-1:0]    waddr,
    input  wire [WIDTH-1:0] wdata,
    input  wire [AW-1:0]    raddr,
    output reg  [WIDTH-1:0] rdata
);
    reg [WIDTH-1:0] mem [0:DEPTH-1];
    always @(posedge clk) begin
        if (we) mem[waddr] <= wdata;
        rdata <= mem[raddr];
    end
endmodule
