// fpmac_array_cell: one FP-MAC of the array with its bank of C (outputs i % ROWS = r, j % COLS = c).
//
// The MAC (rtl/fpmac/fpmac.v, LATENCY = 4, II = 1) accumulates by feeding its
// own result back as the addend: the PE interleaves four output tiles, so the
// result of a tile's step k - 1 leaves the MAC in exactly the cycle its step
// k is issued. On a tile's first step the addend is C_in (read from the bank
// the cycle before) or +0; after its last step the result is written into the
// bank at the tile's address. The bank also takes C_in words while the PE
// loads them and is read out, one word a cycle, while the PE sends C.
module fpmac_array_cell #(
    parameter EXP_BITS = 8,
    parameter MAX_FB   = 23,
    parameter ROUNDING = 0,
    parameter CDEPTH   = 16,  // words of the C bank (tiles of the largest C)
    parameter CAW      = 4    // C bank address width (bits)
) (
    input  wire                          clk,
    input  wire                          rst,
    input  wire                          issue,      // a step of a valid tile enters the MAC
    input  wire                          first,      // ... its step k = 0
    input  wire                          use_cin,    // ... whose sum starts from C_in (else +0)
    input  wire [EXP_BITS+MAX_FB:0]      a,
    input  wire [EXP_BITS+MAX_FB:0]      b,
    input  wire [$clog2(MAX_FB+1)-1:0]   fb,
    input  wire                          store,      // the MAC's result this cycle is a finished output
    input  wire [CAW-1:0]                store_addr,
    input  wire                          load_we,    // a C_in word for this bank
    input  wire [CAW-1:0]                load_addr,
    input  wire [EXP_BITS+MAX_FB:0]      load_data,
    input  wire [CAW-1:0]                raddr,
    output wire [EXP_BITS+MAX_FB:0]      rdata
);
    localparam W = 1 + EXP_BITS + MAX_FB;

    wire           mac_valid;
    wire [W-1:0]   result;
    wire [W-1:0]   start = use_cin ? rdata : {W{1'b0}};
    fpmac #(.EXP_BITS(EXP_BITS), .MAX_FB(MAX_FB), .ROUNDING(ROUNDING)) u_mac (
        .clk(clk), .rst(rst), .in_valid(issue), .a(a), .b(b), .c(first ? start : result), .fb(fb),
        .out_valid(mac_valid), .result(result));

    wire we = load_we || (store && mac_valid);
    fpmac_array_ram #(.WIDTH(W), .DEPTH(CDEPTH), .AW(CAW)) u_c (
        .clk(clk), .we(we), .waddr(load_we ? load_addr : store_addr), .wdata(load_we ? load_data : result),
        .raddr(raddr), .rdata(rdata));
endmodule
