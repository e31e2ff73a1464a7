// accel_seq: the accelerator shell's call sequencer, between the control slave, the two data movers, the
// rounding stage and the PE.
//
// Direct mode (n_calls = 0): one run is the shell's classic call. run_start starts the read mover on
// (in, n_in) and the write mover on (out, n_out) in the same cycle, and the movers' streams are wired
// straight to the PE: the sequencer adds no cycle.
//
// List mode (n_calls > 0; codesign/contracts/calls.py is the contract, docs/accelerator.md the text):
// for each call c in turn --
//   FETCH   the read mover brings the 32-word descriptor at calls + 128 c into registers (the first call's;
//           a later call's was read while the call before computed, and FETCH takes a cycle);
//   input   the header word (flag bit 0), then every row of segments 0, 1 and 2 (a read-mover run per
//           row at in + offset + p * plane_stride + r * stride, words long; planes p outer, rows r inner:
//           descriptor words 18..23 and 28, 29 give each block's planes, 0 meaning one; segment 2 lies in
//           words 24..27, and an empty one costs no cycle) streams into the PE;
//   output  (alongside) the PE's first word is its status; on status 0 the rounding stage takes `count`
//           result words (flag bit 1: rounded and packed; else raw) and the write mover stores its words
//           as the out block, one run per row at out + offset + p * plane_stride + r * stride;
//           Accumulating calls (flag bit 2 ADD, bit 3 HOLD; docs/accelerator.md, "Accumulating calls") take
//           their results through the accumulation buffer, ACC_DEPTH sums of 48 bits (an inferred block RAM):
//           each result sign-extended, added to the sum held (ADD) or alone; kept (HOLD: nothing goes to the
//           stage, nothing is written, the record's statistics are 0) or sent on to the stage as 48-bit sums
//           (ADD alone: the chain's drain; rounded, or raw as two words a sum, low first, sign-extended).
//           Plain calls between a chain's calls leave the buffer alone;
//   PREFETCH once the call's rows are all in (the read mover idle) and another call follows, the read mover
//           brings that call's descriptor: its input side's words straight into the descriptor's registers,
//           which this call no longer reads, its output side's into out_desc, which every fetch fills and the
//           descriptor takes as FETCH ends; the call ends once the last of its beats is in;
//   RECORD  once both sides are done, the write mover stores the 8-word record at out + record: status,
//           saturated codes, sum |x| (low, high), 0 (reserved), words sent to the PE, words written, RECORD_DONE.
// The arena's bases and n_calls are latched at the list's start (a register written during a list changes
// nothing until the next). A call with a non-zero status ends the list after its record. Every run of a
// mover is started with a one-cycle pulse. A row's run starts in the first cycle its mover takes a start:
// once the run before has asked for all its bursts, the last possibly in that same cycle (reads), or taken
// all its beats (writes: the mover holds it while the run before sends, and B responses may still be due),
// so rows keep bursts in flight and a plane's rows follow each other with no cycle between them (one
// between planes and between segments); the record's run waits until every write's B response is back
// (busy low), so a call's results are in memory before its record, and before the next call reads them.
// `busy` is high from the cycle after run_start until the last record is written.
//
// Stream words of DATA_BITS = 64 or 128 bits (P = DATA_BITS / 32 parts): the movers move whole beats, so every
// block is beat aligned and a whole number of beats (the host checks it); the header is one stream word
// (zero above bit 31); the status is one word; the results come P to a word, the last word's unused parts 0,
// and an unpacker offers the rounding stage the parts of the word it holds, which takes as many as fit its
// current group (up to P a cycle: accel_round's chunks), `count` in all; accumulating calls (a holding call's
// results into the buffer, a drain's sums out of it) move one part a cycle. A new word is loaded as the last
// part of the one before moves on. A packer puts the stage's words (as many a cycle as it offers and the beat
// being filled has room for) and the record's (one a cycle) P to a beat. At 32 bits both are plain wires.
module accel_seq #(
    parameter DATA_BITS = 32,
    parameter ADDR_BITS = 32, // the movers' address width: the arena's and the descriptors' addresses keep as many bits
    parameter HELD = 1        // 1: the accumulation buffer; 0: none, for lists without accumulating calls (the host
                              // refuses them; here their flags are ignored): a 32-bit rounding stage, no block RAM
) (
    input  wire                 clk,
    input  wire                 rst,
    input  wire                 run_start,
    input  wire [63:0]          arg_in,
    input  wire [63:0]          arg_out,
    input  wire [31:0]          arg_n_in,
    input  wire [31:0]          arg_n_out,
    input  wire [63:0]          arg_calls,
    input  wire [31:0]          arg_n_calls,
    output reg                  busy,
    // read mover
    output wire                 rd_start,
    output wire [63:0]          rd_addr,
    output wire [31:0]          rd_n,
    input  wire                 rd_busy,
    input  wire                 rd_requesting,
    input  wire [DATA_BITS-1:0] rd_data,
    input  wire                 rd_valid,
    output wire                 rd_ready,
    // write mover
    output wire                 wr_start,
    output wire [63:0]          wr_addr,
    output wire [31:0]          wr_n,
    input  wire                 wr_busy,
    input  wire                 wr_requesting,
    output wire [DATA_BITS-1:0] wr_data,
    output wire                 wr_valid,
    input  wire                 wr_ready,
    // PE streams
    output wire [DATA_BITS-1:0] pe_in_data,
    output wire                 pe_in_valid,
    input  wire                 pe_in_ready,
    input  wire [DATA_BITS-1:0] pe_out_data,
    input  wire                 pe_out_valid,
    output wire                 pe_out_ready
);
    localparam P = DATA_BITS / 32;  // 32-bit parts of a stream word
    localparam [31:0] RECORD_DONE = 32'h0D0E_CA11;
    // input side
    localparam I_IDLE = 3'd0, I_FETCH_GO = 3'd1, I_FETCH = 3'd2, I_HEADER = 3'd3, I_ROWS = 3'd4, I_DONE = 3'd6;
    // output side
    localparam O_IDLE = 4'd0, O_STATUS = 4'd1, O_ROWS = 4'd2, O_DRAIN = 4'd4, O_REC_GO = 4'd5, O_REC = 4'd6,
               O_DONE = 4'd7, O_HOLD = 4'd8;
    localparam ACC_DEPTH = 4096;    // sums the accumulation buffer holds
    localparam HELD_BITS = HELD ? 48 : 32;  // bits of a held sum: the rounding stage's part 0

    wire list_run = run_start && arg_n_calls != 32'd0;
    reg list_mode;                  // the current run is a list
    reg [2:0] ist;
    reg [3:0] ost;
    reg [31:0] call;                // index of the current call
    reg [ADDR_BITS-1:0] desc_addr;  // byte address of the current call's descriptor
    reg [ADDR_BITS-1:0] base_in, base_out;  // the arena's base for reads and for writes, latched at the list's start
    reg [31:0] list_calls;          // n_calls, latched at the list's start
    reg [31:0] desc [0:29];         // descriptor words 0..29 (30 and 31 are reserved and not kept)
    reg [5:0] fetched;              // descriptor words taken so far
    // the next call's descriptor, fetched while this call computes (the read mover is idle from I_DONE on). Its
    // input side's words (header, segments: 1..9, 18..21, 24..29) go straight into desc, which no one reads once
    // the call's rows are in; the output side's (flags, out block, count, rounding, record: 0, 10..17, 22, 23)
    // into out_desc, which the output side uses until the call ends. Every fetch does so, and desc takes its
    // output words from out_desc as I_FETCH ends: one source, no multiplexer (out_desc's other words are never
    // written, so no register holds them)
    localparam PRE_NONE = 2'd0, PRE_GO = 2'd1, PRE_FETCH = 2'd2, PRE_READY = 2'd3;
    reg [31:0] out_desc [0:29];
    reg [1:0] pre;
    localparam [29:0] OUT_WORD = 30'b00_0000_1100_0011_1111_1100_0000_0001;  // bit k: word k is the output side's
    wire has_next = call + 32'd1 < list_calls;
    reg [1:0] seg;                  // segment being sent
    reg [31:0] in_row, out_row;     // rows sent of the segment, rows written of the out block
    reg [ADDR_BITS-1:0] in_addr, out_addr;  // byte address of the next row to read, to write
    reg [31:0] in_plane, out_plane; // planes done of the segment, of the out block
    reg [ADDR_BITS-1:0] in_plane_addr, out_plane_addr;  // byte address of the current plane's first row
    reg [31:0] status, words_in, words_out;
    reg [3:0] rec_word;             // record words handed to the write side
    reg rd_go, wr_go;               // one-cycle start pulses of the movers for a descriptor and a record
    reg round_go;                   // one-cycle start pulse of the rounding stage
    reg hold_go;                    // one-cycle start pulse of a holding call's results (into the buffer alone)
    wire res_go = round_go || hold_go;
    integer k;                      // a descriptor word
    reg took;                       // the call's results went through the stage (else its record holds 0 stats)

    function [ADDR_BITS-1:0] at;  // a 32-bit offset or address at the movers' address width
        input [31:0] value;
        at = value;
    endfunction

    wire [31:0] flags = desc[0];
    wire [31:0] next_flags = out_desc[0];  // in I_FETCH: the call about to start
    wire [31:0] seg_words = seg[1] ? desc[25] : seg[0] ? desc[7] : desc[3];
    wire [31:0] seg_rows = seg[1] ? desc[26] : seg[0] ? desc[8] : desc[4];
    wire [31:0] seg_stride = seg[1] ? desc[27] : seg[0] ? desc[9] : desc[5];
    wire [31:0] seg_planes = seg[1] ? desc[28] : seg[0] ? desc[20] : desc[18];  // 0 or 1: one plane
    wire [31:0] seg_plane_stride = seg[1] ? desc[29] : seg[0] ? desc[21] : desc[19];
    wire seg2_empty = desc[25] == 32'd0 || desc[26] == 32'd0;  // segment 2 sends nothing: segment 1 is the last
    wire [31:0] count = desc[14];
    wire acc_add = HELD && flags[2], acc_hold = HELD && flags[3];

    // ---- the rounding stage ------------------------------------------------------------------------
    wire [DATA_BITS-1:0] round_out_data;
    wire [2:0] round_out_avail;
    wire round_busy;
    wire [63:0] sum_abs;
    wire [31:0] saturated;
    // results flow from the PE through the stage from the cycle after its start pulse
    // (or into the buffer, for a holding call)
    wire results = list_mode && !res_go && (ost == O_ROWS || ost == O_DRAIN || ost == O_HOLD);
    wire [DATA_BITS-1:0] acc_data;  // the PE's results as the unpacker holds them, the next one in bits 31..0
    wire [2:0] acc_have;            // results held (0..P)
    wire results_ready;             // the PE's word may be taken
    wire [2:0] src_taken;           // words the write side takes this cycle (of the stage's, or the record's one)
    wire [2:0] round_room, round_taken;  // parts the stage would take, and takes, this cycle
    // parts offered: an accumulating call's move one a cycle (the buffer has one port each way)
    wire [2:0] acc_offer = !results ? 3'd0 : ((acc_add || acc_hold) && acc_have != 3'd0) ? 3'd1 : acc_have;
    wire [2:0] acc_moved = acc_hold ? acc_offer : round_taken;  // parts that move on (into the buffer, the stage)
    wire acc_take = acc_moved != 3'd0;

    // ---- the accumulation buffer: sums[n] for the call's n-th result, read a cycle ahead ---------------------
    reg [12:0] acc_n;               // results of the call taken so far, modulo 2^13 (0 outside its results)
    always @(posedge clk) begin
        if (rst || !results) acc_n <= 13'd0;
        else if (acc_take) acc_n <= acc_n + {10'd0, acc_moved};
    end
    // the stage's parts: the first the sum (an accumulating call's), the others sign-extended results
    wire [P*HELD_BITS-1:0] stage_data;
    genvar q;
    generate
        if (HELD) begin : g_held
            reg [HELD_BITS-1:0] held [0:ACC_DEPTH-1];
            reg [HELD_BITS-1:0] held_q;     // held[acc_n]: the sum the next result adds to
            wire [12:0] acc_next = acc_n + 13'd1;
            wire [11:0] held_read = acc_take ? acc_next[11:0] : acc_n[11:0];
            wire [HELD_BITS-1:0] value = {{(HELD_BITS - 32){acc_data[31]}}, acc_data[31:0]};
            wire [HELD_BITS-1:0] sum = acc_add ? held_q + value : value;  // plain calls: the result sign-extended
            always @(posedge clk) begin
                held_q <= held[held_read];
                if (acc_take && acc_hold) held[acc_n[11:0]] <= sum;
            end
            assign stage_data[HELD_BITS-1:0] = sum;
            for (q = 1; q < P; q = q + 1) begin : g_stage_part
                assign stage_data[q*HELD_BITS +: HELD_BITS] = {{(HELD_BITS - 32){acc_data[32*q+31]}}, acc_data[32*q +: 32]};
            end
        end else begin : g_plain
            assign stage_data = acc_data;
        end
    endgenerate

    accel_round #(.W(HELD_BITS), .PARTS(P)) u_round (
        .clk(clk), .rst(rst), .start(round_go),
        .enable(flags[1]), .shift(desc[15][6:0]), .bits(desc[15][12:8]), .lanes(desc[15][20:16]),
        .group_words(desc[15][26:24]), .row_values(desc[16][15:0]), .field_bits(desc[15][31:27]), .count(count),
        .raw64(acc_add), .in_data(stage_data), .in_avail(acc_hold ? 3'd0 : acc_offer), .in_room(round_room), .in_taken(round_taken),
        .out_data(round_out_data), .out_avail(round_out_avail), .out_taken(results && ost == O_ROWS ? src_taken : 3'd0),
        .busy(round_busy), .sum_abs(sum_abs), .saturated(saturated)
    );

    // ---- mover and stream routing (a mover latches address and count in the cycle its start is high) ------
    wire direct_start = run_start && !list_run;
    // a row's run starts in any cycle of I_ROWS / O_ROWS in which its plane has rows left and the mover takes a
    // start (rd_requesting / wr_requesting low): the seq adds no cycle between the rows of a plane
    wire plane_done = seg_words == 32'd0 || in_row >= seg_rows;  // nothing (more) to send from this plane
    wire out_plane_done = out_row >= desc[12] || desc[11] == 32'd0;
    wire rd_row = list_mode && ist == I_ROWS && !plane_done && !rd_requesting;
    wire wr_row = list_mode && ost == O_ROWS && !out_plane_done && !wr_requesting;
    wire next_plane = seg_words != 32'd0 && in_plane + 32'd1 < seg_planes;  // a plane done, the segment's next
    wire out_next_plane = desc[11] != 32'd0 && out_plane + 32'd1 < desc[22];
    // one address adder a side: the next row's, the next plane's, or a block's first address (a base and an offset)
    wire in_rows = ist == I_ROWS;
    wire [ADDR_BITS-1:0] in_next = (in_rows && rd_row ? in_addr : in_rows && next_plane ? in_plane_addr : base_in)
                                   + at(ist == I_FETCH ? desc[2] : rd_row ? seg_stride : next_plane ? seg_plane_stride
                                        : seg[0] ? desc[24] : desc[6]);
    wire [ADDR_BITS-1:0] out_next = (ist == I_FETCH || ost == O_REC ? base_out : wr_row ? out_addr : out_plane_addr)
                                    + at(ist == I_FETCH ? out_desc[10] : ost == O_REC ? desc[17] : wr_row ? desc[13]
                                         : desc[23]);
    wire pre_go = pre == PRE_GO;  // the next call's descriptor: its run's start pulse
    assign rd_start = list_mode ? rd_go || rd_row || pre_go : direct_start;
    assign rd_addr = !list_mode ? arg_in : ist == I_FETCH_GO ? desc_addr : pre_go ? desc_addr + at(32'd128) : in_addr;
    assign rd_n = !list_mode ? arg_n_in : ist == I_FETCH_GO || pre_go ? 32'd32 : seg_words;
    assign wr_start = list_mode ? wr_go || wr_row : direct_start;
    assign wr_addr = !list_mode ? arg_out : ost == O_REC ? out_next : out_addr;
    assign wr_n = !list_mode ? arg_n_out : ost == O_REC ? 32'd8 : desc[11];

    reg [31:0] record_word;
    always @(*) begin
        case (rec_word)
            4'd0: record_word = status;
            4'd1: record_word = took ? saturated : 32'd0;
            4'd2: record_word = took ? sum_abs[31:0] : 32'd0;
            4'd3: record_word = took ? sum_abs[63:32] : 32'd0;
            4'd4: record_word = 32'd0;  // reserved
            4'd5: record_word = words_in;
            4'd6: record_word = words_out;
            default: record_word = RECORD_DONE;
        endcase
    end

    // a row's beats reach the PE while later rows are asked for, and after the last one is (I_DONE)
    wire sending_rows = list_mode && (ist == I_ROWS || ist == I_DONE) && pre != PRE_FETCH;
    wire sending_header = list_mode && ist == I_HEADER;
    // a refused call: whatever else the PE sends is dropped until the input side is done
    wire dropping = list_mode && ost == O_REC_GO && status != 32'd0;
    assign pe_in_data = sending_header ? {{(DATA_BITS - 32){1'b0}}, desc[1]} : rd_data;
    assign pe_in_valid = !list_mode ? rd_valid : sending_header || (sending_rows && rd_valid);
    assign rd_ready = !list_mode ? pe_in_ready : ist == I_FETCH || pre == PRE_FETCH || (sending_rows && pe_in_ready);
    wire writing_record = list_mode && ost == O_REC;
    // the write side's source: the stage's words, or the record's eight one a cycle
    wire [DATA_BITS-1:0] src_data = writing_record ? {{(DATA_BITS - 32){1'b0}}, record_word} : round_out_data;
    wire [2:0] src_avail = writing_record ? {2'd0, rec_word != 4'd8} : (results && ost == O_ROWS) ? round_out_avail : 3'd0;
    wire [DATA_BITS-1:0] packed_data;
    wire packed_valid;
    assign wr_data = !list_mode ? pe_out_data : packed_data;
    assign wr_valid = !list_mode ? pe_out_valid : packed_valid;
    assign pe_out_ready = !list_mode ? wr_ready : ost == O_STATUS || dropping || (results && results_ready);

    generate
        if (P == 1) begin : g_word
            assign acc_data = pe_out_data;
            assign acc_have = {2'd0, pe_out_valid};
            assign results_ready = acc_hold || round_room != 3'd0;  // not waiting for the PE's valid
            assign packed_data = src_data;
            assign packed_valid = src_avail != 3'd0;
            assign src_taken = wr_ready ? src_avail : 3'd0;
        end else begin : g_parts
            // unpacker: a PE word is taken once the last parts of the one before leave (or none is held)
            reg [DATA_BITS-1:0] unpack_word;
            reg [2:0] unpack_left;  // parts of unpack_word still to hand on
            reg [31:0] to_load;     // results not yet taken from the PE
            wire load = results && pe_out_valid && results_ready;
            assign acc_data = unpack_word;
            assign acc_have = unpack_left;
            assign results_ready = to_load != 32'd0 && (unpack_left == 3'd0 || unpack_left == acc_moved);
            always @(posedge clk) begin
                if (rst || res_go) begin
                    unpack_left <= 3'd0;
                    to_load <= count;
                end else if (load) begin
                    unpack_word <= pe_out_data;
                    unpack_left <= to_load < P ? to_load[2:0] : P[2:0];
                    to_load <= to_load < P ? 32'd0 : to_load - P;
                end else if (acc_take) begin
                    unpack_word <= unpack_word >> {acc_moved, 5'd0};
                    unpack_left <= unpack_left - acc_moved;
                end
            end
            // packer: P words make a beat; a full beat leaves as the next words come in
            reg [DATA_BITS-1:0] pack_word;
            reg [2:0] pack_have;
            wire beat_out = pack_have == P && wr_ready;
            wire [2:0] pack_room = pack_have != P ? P[2:0] - pack_have : beat_out ? P[2:0] : 3'd0;
            wire [2:0] pack_base = beat_out ? 3'd0 : pack_have;  // where the words taken go
            integer w;
            assign packed_data = pack_word;
            assign packed_valid = pack_have == P;
            assign src_taken = src_avail < pack_room ? src_avail : pack_room;
            always @(posedge clk) begin
                if (rst) pack_have <= 3'd0;
                else pack_have <= pack_base + src_taken;
                for (w = 0; w < P; w = w + 1)
                    if (w >= pack_base && w < pack_base + src_taken)
                        pack_word[32 * w +: 32] <= src_data[32 * (w - pack_base) +: 32];
            end
        end
    endgenerate

    // ---- the two sides ----------------------------------------------------------------------------
    always @(posedge clk) begin
        if (rst) begin
            busy <= 1'b0;
            list_mode <= 1'b0;
            ist <= I_IDLE;
            ost <= O_IDLE;
            call <= 32'd0;
            desc_addr <= {ADDR_BITS{1'b0}};
            base_in <= {ADDR_BITS{1'b0}};
            base_out <= {ADDR_BITS{1'b0}};
            list_calls <= 32'd0;
            fetched <= 6'd0;
            pre <= PRE_NONE;
            seg <= 2'd0;
            in_row <= 32'd0;
            out_row <= 32'd0;
            in_addr <= {ADDR_BITS{1'b0}};
            out_addr <= {ADDR_BITS{1'b0}};
            in_plane <= 32'd0;
            out_plane <= 32'd0;
            in_plane_addr <= {ADDR_BITS{1'b0}};
            out_plane_addr <= {ADDR_BITS{1'b0}};
            status <= 32'd0;
            words_in <= 32'd0;
            words_out <= 32'd0;
            rec_word <= 4'd0;
            rd_go <= 1'b0;
            wr_go <= 1'b0;
            round_go <= 1'b0;
            hold_go <= 1'b0;
            took <= 1'b0;
        end else begin
            rd_go <= 1'b0;
            wr_go <= 1'b0;
            round_go <= 1'b0;
            hold_go <= 1'b0;
            if (list_run) begin
                busy <= 1'b1;
                list_mode <= 1'b1;
                call <= 32'd0;
                desc_addr <= arg_calls;
                base_in <= arg_in;
                base_out <= arg_out;
                list_calls <= arg_n_calls;
                fetched <= 6'd0;
                pre <= PRE_NONE;
                ist <= I_FETCH_GO;
                ost <= O_IDLE;
                rd_go <= 1'b1;
            end else if (list_mode) begin
                if (rd_valid && rd_ready && (ist == I_FETCH || pre == PRE_FETCH)) begin
                    // fetched is a multiple of P: word k is part k % P of the beat that starts at word k - k % P
                    for (k = 0; k < 30; k = k + 1)
                        if (fetched == k - k % P) begin
                            if (OUT_WORD[k]) out_desc[k] <= rd_data[32 * (k % P) +: 32];
                            else desc[k] <= rd_data[32 * (k % P) +: 32];
                        end
                    fetched <= fetched + P;
                end
                // the next call's descriptor: asked for once this call's rows are all in (the mover idle)
                case (pre)
                    PRE_NONE: if (ist == I_DONE && !rd_busy && has_next) begin
                        pre <= PRE_GO;
                        fetched <= 6'd0;
                    end
                    PRE_GO: pre <= PRE_FETCH;
                    PRE_FETCH: if (!rd_busy) pre <= PRE_READY;
                    default: ;
                endcase
                if (pe_in_valid && pe_in_ready) words_in <= words_in + P;
                if (wr_valid && wr_ready && ost == O_ROWS) words_out <= words_out + P;
                // input side: the descriptor, the header, the rows of the segments
                case (ist)
                    I_FETCH_GO: ist <= I_FETCH;
                    I_FETCH: if (!rd_busy) begin
                        ist <= next_flags[0] ? I_HEADER : I_ROWS;
                        for (k = 0; k < 30; k = k + 1) if (OUT_WORD[k]) desc[k] <= out_desc[k];
                        ost <= O_STATUS;
                        seg <= 2'd0;
                        in_row <= 32'd0;
                        in_plane <= 32'd0;
                        in_addr <= in_next;
                        in_plane_addr <= in_next;
                        out_row <= 32'd0;
                        out_plane <= 32'd0;
                        out_addr <= out_next;
                        out_plane_addr <= out_next;
                        words_in <= 32'd0;
                        words_out <= 32'd0;
                        status <= 32'd0;
                        took <= 1'b0;
                    end
                    I_HEADER: if (pe_in_ready) ist <= I_ROWS;
                    I_ROWS: begin
                        if (rd_row) begin
                            in_row <= in_row + 32'd1;
                            in_addr <= in_next;
                        end else if (!plane_done) ;  // the mover still asks for the row before
                        else if (next_plane) begin  // a cycle between planes
                            in_plane <= in_plane + 32'd1;
                            in_row <= 32'd0;
                            in_addr <= in_next;
                            in_plane_addr <= in_next;
                        end else begin
                            if (seg[1] || (seg[0] && seg2_empty)) ist <= I_DONE;
                            seg <= seg + 2'd1;
                            in_row <= 32'd0;
                            in_plane <= 32'd0;
                            in_addr <= in_next;
                            in_plane_addr <= in_next;
                        end
                    end
                    default: ;
                endcase
                // output side: the status, the rows of the out block, the record
                case (ost)
                    O_STATUS: if (pe_out_valid) begin
                        status <= pe_out_data[31:0];
                        if (pe_out_data[31:0] != 32'd0 || count == 32'd0) ost <= O_REC_GO;
                        else if (acc_hold) begin  // into the buffer: no words, the record's statistics 0
                            hold_go <= 1'b1;
                            ost <= O_HOLD;
                        end else begin
                            round_go <= 1'b1;
                            took <= 1'b1;
                            ost <= O_ROWS;
                        end
                    end
                    O_ROWS: begin
                        if (wr_row) begin
                            out_row <= out_row + 32'd1;
                            out_addr <= out_next;
                        end else if (!out_plane_done) ;  // the mover still takes the row before's beats
                        else if (out_next_plane) begin  // a cycle between planes
                            out_plane <= out_plane + 32'd1;
                            out_row <= 32'd0;
                            out_addr <= out_next;
                            out_plane_addr <= out_next;
                        end else if (!wr_requesting) ost <= O_DRAIN;  // the last row's beats are all taken
                    end
                    O_DRAIN: if (!round_busy && !round_go) ost <= O_REC_GO;
                    O_HOLD: if (!hold_go && {19'd0, acc_n} == count) ost <= O_REC_GO;
                    // the results are in memory (the read mover may be fetching the next call's descriptor)
                    O_REC_GO: if (ist == I_DONE && (!rd_busy || pre == PRE_FETCH) && !wr_busy) begin
                        wr_go <= 1'b1;
                        rec_word <= 4'd0;
                        ost <= O_REC;
                    end
                    O_REC: begin
                        if (src_taken != 3'd0) rec_word <= rec_word + 4'd1;
                        if (!wr_go && !wr_busy) ost <= O_DONE;
                    end
                    O_DONE: begin
                        if (pre == PRE_GO || pre == PRE_FETCH) ;  // the next descriptor's reads end first
                        else if (status != 32'd0 || !has_next) begin
                            busy <= 1'b0;
                            list_mode <= 1'b0;
                            ist <= I_IDLE;
                            ost <= O_IDLE;
                            pre <= PRE_NONE;
                        end else begin  // PRE_READY (asked for by the record's start): I_FETCH a cycle
                            call <= call + 32'd1;
                            desc_addr <= desc_addr + at(32'd128);
                            ist <= I_FETCH;
                            ost <= O_IDLE;
                            pre <= PRE_NONE;
                        end
                    end
                    default: ;
                endcase
            end
        end
    end
endmodule
