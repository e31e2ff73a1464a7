// csb_window: a byte buffer written one stream beat (WPARTS 32-bit words) per
// cycle and read LANES consecutive bytes per cycle at any byte address that is
// a multiple of LANES (registered read, one cycle).
//
// Why banks: the bytes of one read may span NW consecutive words (NW > 1 when
// LANES does not divide into 4-byte words), and a beat writes WPARTS of them.
// Word w lives in bank w mod NB, row w / NB, with NB >= max(NW, WPARTS) a
// power of two, so the NW words of any read, and a beat's words (at a word
// address that is a multiple of WPARTS), each come from different banks, and
// each bank is a plain one-write, one-read RAM (csb_ram) that maps onto block
// or distributed RAM.
module csb_window #(
    parameter LANES = 1,               // bytes per read, 1..16
    parameter WORDS = 1,               // 32-bit words the buffer holds
    parameter AW    = 24,              // byte and word address width (bits)
    parameter WPARTS = 1               // words a write: 1, 2 or 4
) (
    input  wire               clk,
    input  wire               we,
    input  wire [AW-1:0]      waddr,   // word address, a multiple of WPARTS
    input  wire [32*WPARTS-1:0] wdata, // bytes 4*waddr .. 4*(waddr+WPARTS)-1, little-endian
    input  wire [AW-1:0]      raddr,   // byte address, a multiple of LANES
    output wire [8*LANES-1:0] rdata    // bytes raddr .. raddr+LANES-1, one cycle later
);
    // Largest byte offset inside a word a read can start at: 4 - gcd(LANES, 4).
    localparam MAX_OFF = (LANES % 4 == 0) ? 0 : ((LANES % 2 == 0) ? 2 : 3);
    localparam NW      = (MAX_OFF + LANES - 1) / 4 + 1;     // words one read spans, at most
    localparam NWB     = (NW > WPARTS) ? NW : WPARTS;           // words that must sit in different banks
    localparam LNB     = (NWB <= 1) ? 0 : ((NWB <= 2) ? 1 : ((NWB <= 4) ? 2 : 3));
    localparam NB      = 1 << LNB;                          // banks
    localparam ROWS    = (WORDS + NB - 1) / NB + 1;         // the last read may reach one row further
    localparam RAW     = (ROWS <= 2) ? 1 : $clog2(ROWS);

    localparam LWP     = (WPARTS == 4) ? 2 : ((WPARTS == 2) ? 1 : 0);   // log2(WPARTS)
    wire [AW-1:0] w0 = raddr >> 2;
    reg  [1:0]    off_q;                                    // byte offset of the read, registered
    reg  [2:0]    first_q;                                  // bank of the first word, registered
    always @(posedge clk) begin
        off_q   <= raddr[1:0];
        first_q <= (NB == 1) ? 3'd0 : w0[2:0] & (NB - 1);
    end

    wire [32*NB-1:0] bank_q;
    genvar k;
    generate
        for (k = 0; k < NB; k = k + 1) begin : g_bank
            localparam [AW-1:0] K_IDX = k;
            // the first word at or after w0 that lives in bank k
            wire [AW-1:0] ahead = (K_IDX - w0) & (NB - 1);
            wire [AW-1:0] row   = (w0 + ahead) >> LNB;
            // the beat's word this bank takes: its offset from the beat's first word (WPARTS consecutive banks)
            wire [AW-1:0] offset = (K_IDX - waddr) & (NB - 1);
            wire          mine  = ((offset >> LWP) == {AW{1'b0}});   // offset < WPARTS
            wire [AW-1:0] wrow  = waddr >> LNB;
            wire [32*WPARTS-1:0] word = wdata >> (32 * offset[1:0]);
            csb_ram #(.LANES(1), .LANE_BITS(32), .DEPTH(ROWS), .AW(RAW)) u_bank (
                .clk(clk), .we(we && mine), .waddr(wrow[RAW-1:0]), .wdata(word[31:0]), .raddr(row[RAW-1:0]),
                .rdata(bank_q[32*k +: 32])
            );
        end
    endgenerate

    // Words in address order from the first one, then bytes from the offset.
    wire [64*NB-1:0] twice   = {bank_q, bank_q};
    wire [64*NB-1:0] ordered = twice >> (32 * first_q);
    wire [32*NB-1:0] bytes   = ordered[32*NB-1:0] >> (8 * off_q);
    assign rdata = bytes[8*LANES-1:0];
endmodule
