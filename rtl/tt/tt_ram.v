// tt_ram: simple dual-port RAM for the TT PEs' operand buffers: one write port, one registered read port.
//
// One write address and one read address, the read data registered and
// read-first, no reset of the array: the shape that synthesis maps onto block
// RAM (Xilinx RAMB18/36 in simple dual-port mode) or, when small, onto
// distributed RAM. A read of the word written in the same cycle gives its old
// value (read-first); the PEs may issue such a read but never use its data.
module tt_ram #(
    parameter WIDTH = 32,  // bits per word (one chunk of LANES operands)
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
