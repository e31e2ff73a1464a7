// accel_round: the rounding output stage between a PE's result stream and the shell's write mover.
//
// It takes `count` signed 32-bit accumulators and sends the next PE call's operand codes, summing on the way the
// statistics a scale rule reads. The golden model is codesign.numerics.round_stage (docs/accelerator.md,
// "Rounding stage"); this module equals it bit for bit (tests/rtl/test_accel_round.py).
//
// Rounding mode (enable = 1): code = saturate_bits(round_half_to_even(acc * 2^shift)), shift signed in
// [-64, 63] (frac_to - frac_from; shift >= 0 is a saturating left shift), bits in 2..16, range
// [-2^(bits-1), 2^(bits-1) - 1]. Codes go into fields of `slot` bits (of w = field_bits, or bits when it is 0:
// 4 if w <= 4, 8 if w <= 8, else
// 16) holding their two's complement; `lanes` fields (1..16) make a group of `group_words` 32-bit words
// (1..4, at least ceil(lanes * slot / 32)); field v of a group is bits [v*slot, v*slot + slot) of its words read
// as one little-endian bit string (word 0 holds bits 0..31, and leaves first). Values come in rows of
// `row_values`; a row ends its last group early, the missing fields 0. Out words for whole rows:
// rows * ceil(row_values / lanes) * group_words. A count that is not whole rows is defined too: the last,
// short row of r values ends with the value `count` and sends ceil(r / lanes) groups (no zero groups for the
// missing values); the host refuses such counts (RoundStageConfig), the RTL does not need to.
//
// Pass-through mode (enable = 0): each accumulator goes out unchanged as one word (count words), up to PARTS
// a cycle.
//
// Statistics, over the accumulators taken in both modes, cleared by `start` and final when busy falls:
// sum_abs = sum |acc| (64 bits; |-2^31| = 2^31), saturated = codes clipped to the range (0 when passing through).
//
// Pipeline (a handshake on each side: words move on a rising edge; nothing is dropped or duplicated under any
// pattern of input gaps and output stalls; each stage is free when empty or moving on):
//   A  input register: up to PARTS accumulators (a chunk), and the group-end flag from the lane, row and count
//      counters
//   B  shift, per part: a capped left shift (of acc clipped to +-2^17, a test of its bits from 17 up), or
//      floor(acc / 2^s) with the half and sticky bits giving "round up" (passing through: a shift by 0, the
//      accumulator); the |acc| statistics add here
//   C  round and saturate each part (out of range where its bits from bits - 1 up are not all its sign: a mask
//      test, no comparator) into a word whose low 16 bits are the code (the accumulator's when passing
//      through) and whose bits above are B's value's (passing through, the accumulator's; rounding, bits no
//      slot keeps: a slot holds at most 16); the saturation count adds here
//   G  the group being filled, a chunk's fields at a time; full once its last field is in, until the output
//      register takes it
//   O  the output register: group_words words, the low word on out_data, shifted down as words move
// Input side: the source offers `in_avail` parts (0..PARTS; part 0 is the next accumulator, part i at in_data
// bits [i*W, i*W + W)); the stage takes `in_taken` = min(in_avail, room) of them, where room is 0 when A cannot
// take, else min(PARTS, accumulators left, values left in the current group and row): a chunk never crosses a
// group's end, so a group of n values takes ceil(n / PARTS) chunks when the source offers PARTS. Passing through,
// every chunk is its own group of as many words as it has values (up to PARTS; raw64: one value, two words, a
// chunk). Parts past the first hold 32-bit accumulators (bits 31..0 of
// their W, sign-extended): W = 48 sums come one a chunk. Output side, alike: the stage offers `out_avail` =
// min(words of O left, PARTS) words (word j at out_data bits [32j, 32j + 32)), the sink takes `out_taken` of
// them (0..out_avail, word 0 first; more is read as out_avail). in_room (what the stage would take) depends
// on no input but out_taken, through the chain (no skid buffer); in_taken = min(in_avail, in_room).
// Throughput: one chunk a cycle while a group's words need no more cycles (ceil(group_words / PARTS)) than its
// chunks; else one group's words a ceil(group_words / PARTS) cycles.
//
// Latency, no stalls (the source offers min(PARTS, left) every cycle, the sink takes every word offered),
// start sampled at edge 0: busy is high in cycles 1 .. L. With u = ceil(group_words / PARTS), the cycles a
// group's words take to leave: the first chunk enters G at edge 4. Group k (c_k chunks) enters G from edge
// f_k = max(l_{k-1} + 1, z_k, x_{k-1}) (after the previous chunk; not before it arrives, z_k = 4 + its first
// chunk's index; once G has handed the previous group to O), one chunk an edge, so its last chunk enters at
// l_k = f_k + c_k - 1; O takes it at x_k = max(l_k + 1, x_{k-1} + u) and its words move at edges
// x_k + 1 .. x_k + u. L = x_last + u (codesign.numerics.round_stage.latency_cycles evaluates this recurrence
// exactly as max-plus matrix powers). Closed forms: pass-through (W = 32) L = ceil(count / PARTS) + 5; when no
// group has fewer chunks than u, L = chunks + u + 4; when u >= ceil(lanes / PARTS),
// L = 4 + ceil(min(lanes, row_values) / PARTS) + u * groups. count = 0: busy stays low. At PARTS = 1 a
// chunk is one value and a take one word (in_avail and out_avail 0/1 are valid bits, the takes
// ready-and-valid).
//
// Width (parameter W, default 32): W = 48 takes the shell's held sums (docs/accelerator.md, "Accumulating calls";
// golden codesign.numerics.round_stage.round_held): rounded exactly as 32-bit accumulators are (a right shift capped
// at W + 1, a left shift of the value clipped to +-2^17 first, as at every W), sum_abs over the W-bit magnitudes;
// passing through with `raw64` high, each value leaves as one 64-bit field (two words, low
// first, sign-extended), else as one 32-bit word (a sign-extended 32-bit accumulator: the W = 32 words). At W = 32
// `raw64` is ignored and the stage is the one above, bit for bit and cycle for cycle.
//
// `start` must come while busy is low (a start during a run abandons it and its words in flight). The
// configuration must be one RoundStageConfig accepts; others give unspecified words.
module accel_round #(
    parameter W = 32,           // accumulator width: 32, or 48 for held sums
    parameter PARTS = 1         // accumulators a cycle at most (1..4): the parts of the shell's stream word
) (
    input  wire               clk,
    input  wire               rst,
    input  wire               start,        // one-cycle pulse: latch the configuration below and clear the statistics
    input  wire               enable,
    input  wire signed [6:0]  shift,
    input  wire [4:0]         bits,
    input  wire [4:0]         lanes,
    input  wire [2:0]         group_words,
    input  wire [15:0]        row_values,
    input  wire [4:0]         field_bits,   // the reading PE's operand width (its slot); 0: bits
    input  wire [31:0]        count,        // accumulators to take after start
    input  wire               raw64,        // W > 32, passing through: 64-bit fields (ignored at W = 32)
    input  wire [PARTS*W-1:0] in_data,      // part i: bits [i*W, i*W + W)
    input  wire [2:0]         in_avail,     // parts offered (0..PARTS), part 0 first
    output wire [2:0]         in_room,      // parts the stage would take this cycle (depends on no input's valid)
    output wire [2:0]         in_taken,     // parts taken on this cycle's edge: min(in_avail, in_room)
    output wire [PARTS*32-1:0] out_data,    // the output register's next words, word j at bits [32j, 32j + 32)
    output wire [2:0]         out_avail,    // words offered: min(words of the group left, PARTS)
    input  wire [2:0]         out_taken,    // words the sink takes on this cycle's edge (0..out_avail), word 0 first
    output wire               busy,         // high from the cycle after start until the last output word has moved
    output reg  [63:0]        sum_abs,
    output reg  [31:0]        saturated
);
    localparam LEFT_CAP = 17;   // a left shift past 16 saturates every non-zero acc: capping keeps B narrow
    localparam RIGHT_CAP = W + 1;  // |acc| <= 2^(W-1) rounds to 0 for every right shift >= W + 1, as at W + 1
    localparam PW = W + 2 > 36 ? W + 2 : 36;  // the shifted value (B): a floor of W + 2 bits, or 36 bits shifted left
    localparam CW = W > 32 ? 64 : 32;  // C's word: a code, or the value passed through
    localparam [2:0] MAX_CHUNK = PARTS;
    wire wide_raw = (W > 32) && raw64;

    // configuration, latched at start (with what follows from it)
    reg               cfg_enable;
    reg               cfg_left;      // rounding with shift >= 0
    reg [4:0]         cfg_lshift;    // min(shift, LEFT_CAP)
    reg [5:0]         cfg_rshift;    // min(-shift, RIGHT_CAP); 0 passing through
    reg [W+1:0]       cfg_half;      // the bit of weight 2^(s-1) of a right shift by s
    reg [W+1:0]       cfg_below;     // the bits under it (the sticky bits)
    reg [5:0]         cfg_rshift32;  // the same for the 32-bit parts past the first: min(-shift, 33); 0 passing through
    reg [33:0]        cfg_half32;
    reg [33:0]        cfg_below32;
    reg [PW-1:0]      cfg_upper;     // the bits from bits - 1 up: a code's sign bit and those that must equal it
                                     // (its low 16 bits are the lowest code, -2^(bits-1), and their NOT the highest)
    reg [4:0]         cfg_lanes;     // 1 when passing through
    reg [6:0]         cfg_slot;      // 4, 8, 16; 32 (64 with raw64) when passing through
    reg [CW-1:0]      cfg_mask;      // the low cfg_slot bits
    reg [2:0]         cfg_words;     // group_words; 2 passing through with raw64 (else the chunk's values)
    reg [15:0]        cfg_row;
    reg               cfg_wide;      // passing through 64-bit fields (raw64): one value a chunk

    reg        r_busy;
    reg [31:0] in_left;   // accumulators still to take
    reg [4:0]  in_lane;   // lane of the next value in its group
    reg [15:0] in_pos;    // position of the next value in its row

    reg                 a_v, a_end;  // A: a chunk, and "closes its group"
    reg [2:0]           a_n;         // its parts (1..PARTS)
    reg [PARTS*W-1:0]   a_acc;
    reg                 b_v, b_end;
    reg [2:0]           b_n;
    reg [PARTS-1:0]     b_up;
    reg [PARTS*PW-1:0]  b_pre;       // per part: shifted left, or floor of the right shift
    reg                 c_v, c_end;
    reg [2:0]           c_n;
    reg [PARTS*CW-1:0]  c_word;      // per part: the code in the low 16 bits, or the accumulator
    reg               g_full;
    reg [2:0]         g_n;         // values of the group's last chunk (passing through: its words)
    reg [7:0]         g_off;       // bit offset of the next field in the group
    reg [127:0]       g_data;
    reg [2:0]         o_left;      // words of O still to send
    reg [127:0]       o_data;

    // handshakes: a stage takes when it is empty or its content moves on in the same cycle
    wire [2:0] out_take = out_taken < out_avail ? out_taken : out_avail;  // a sink taking more takes what is there
    wire out_move = out_take != 3'd0;
    wire o_free   = o_left == out_take;  // empty, or its last words leave now
    wire transfer = g_full && o_free;
    wire g_take   = c_v && (!g_full || transfer);
    wire c_ready  = !c_v || g_take;
    wire b_ready  = !b_v || c_ready;
    wire a_ready  = !a_v || b_ready;
    assign out_avail = o_left < PARTS ? o_left : MAX_CHUNK;
    assign out_data  = o_data[PARTS*32-1:0];
    assign busy      = r_busy;

    // the chunk: as many parts as are offered, fit the group, the row and the count
    // lanes and row_values of 0 (which the host never sends) count as 32 and 65536: no configuration hangs
    wire [5:0]  lanes_left = {cfg_lanes == 5'd0, cfg_lanes} - {1'b0, in_lane};  // 1..lanes
    wire [16:0] row_left = {cfg_row == 16'd0, cfg_row} - {1'b0, in_pos};         // 1..row_values
    wire [2:0]  left_cap = in_left < PARTS ? in_left[2:0] : MAX_CHUNK;
    wire [2:0]  lane_cap = lanes_left < PARTS ? lanes_left[2:0] : MAX_CHUNK;
    wire [2:0]  row_cap = row_left < PARTS ? row_left[2:0] : MAX_CHUNK;
    wire [2:0]  fit = left_cap < lane_cap ? left_cap : lane_cap;
    // passing through: as many as are left (a 64-bit field: one)
    wire [2:0]  room_now = !cfg_enable ? (cfg_wide ? 3'd1 : left_cap) : fit < row_cap ? fit : row_cap;
    wire [2:0]  room = (r_busy && in_left != 32'd0 && a_ready) ? room_now : 3'd0;
    assign in_room = room;
    assign in_taken = in_avail < room ? in_avail : room;
    wire in_take = in_taken != 3'd0;
    wire row_last = row_left == {14'd0, in_taken};
    wire in_end = !cfg_enable || in_left == {29'd0, in_taken} || lanes_left == {3'd0, in_taken} || row_last;

    // per part: B's shift of A's accumulator, C's rounding of B's value, G's field of C's word
    wire [PARTS*PW-1:0]  pre_all;
    wire [PARTS-1:0]     up_all;
    wire [PARTS*48-1:0]  ones_all;    // per part: |acc| - 1 when negative, else |acc| (acc ^ its sign)
    wire [PARTS-1:0]     sign_all;
    wire [PARTS*CW-1:0]  word_all;
    wire [PARTS-1:0]     sat_all;
    wire [PARTS*CW-1:0]  field_all;   // C's words masked to their slots
    genvar i;
    generate
        for (i = 0; i < PARTS; i = i + 1) begin : g_part
            // part 0 is W bits wide; the others hold 32-bit accumulators (held sums come one a chunk), and their
            // datapath is 32 bits wide: a right shift capped at 33, as the W = 32 stage
            localparam WI = i == 0 ? W : 32;
            localparam PWI = WI + 2 > 36 ? WI + 2 : 36;
            wire signed [WI-1:0] acc = a_acc[i*W +: WI];
            // acc clipped to +-2^17 before a left shift (a clipped value saturates as the unclipped one would, and
            // shifts <= 17 of |acc| <= 2^17 are exact): the shifter works on 19 bits and gives 36. acc is within
            // +-2^17 where its bits from 17 up are all its sign (2^17 itself is then clipped, to itself)
            wire               acc_small = acc[WI-1:17] == {(WI-17){acc[WI-1]}};
            wire signed [18:0] acc_clip = acc_small ? acc[18:0] : acc[WI-1] ? -19'sd131072 : 19'sd131072;
            wire signed [35:0] clip_shifted = $signed({{17{acc_clip[18]}}, acc_clip}) <<< cfg_lshift;
            wire signed [PWI-1:0] clip_wide = clip_shifted;  // sign-extended
            wire signed [WI+1:0] acc34 = {{2{acc[WI-1]}}, acc};
            wire [5:0]          rsh;
            wire [WI+1:0]       half, below;
            if (i == 0) begin : g_first
                assign rsh = cfg_rshift;
                assign half = cfg_half;
                assign below = cfg_below;
            end else begin : g_rest
                assign rsh = cfg_rshift32;
                assign half = cfg_half32;
                assign below = cfg_below32;
            end
            wire signed [WI+1:0] floor34 = acc34 >>> rsh;  // toward minus infinity
            wire               half_bit = |(acc34 & half);
            wire               sticky = |(acc34 & below);
            wire               round_up = half_bit && (sticky || floor34[0]);  // above the half, or a tie to even
            // passing through, the right shift is by 0 (the configuration's), so floor34 is the accumulator
            wire signed [PWI-1:0] pre = cfg_left ? clip_wide : floor34;  // signed: sign-extended to PWI
            wire signed [PW-1:0] pre_part = pre;  // sign-extended
            assign pre_all[i*PW +: PW] = pre_part;
            assign up_all[i] = cfg_enable && !cfg_left && round_up;
            wire [WI-2:0]      ones = acc[WI-2:0] ^ {(WI-1){acc[WI-1]}};
            assign ones_all[i*48 +: 48] = {{(49-WI){1'b0}}, ones};
            assign sign_all[i] = acc[WI-1];

            wire signed [PWI-1:0] pre_b = b_pre[i*PW +: PWI];
            wire signed [PWI-1:0] rounded = pre_b + $signed({{(PWI-1){1'b0}}, b_up[i]});
            // within the codes' range where the bits from bits - 1 up are all the sign (cfg_upper marks them)
            wire [PWI-1:0]     upper = rounded & cfg_upper[PWI-1:0];
            wire               too_high = !rounded[PWI-1] && upper != {PWI{1'b0}};
            wire               too_low = rounded[PWI-1] && upper != cfg_upper[PWI-1:0];
            // a code is at most 16 bits and its slot keeps no more: the bits above are left as B's value's
            wire [15:0]        code = too_high ? ~cfg_upper[15:0] : (too_low ? cfg_upper[15:0] : rounded[15:0]);
            wire [CW-1:0] raw_word;  // passing through
            if (PWI >= CW) begin : g_raw_low
                assign raw_word = pre_b[CW-1:0];
            end else begin : g_raw_extended
                assign raw_word = {{(CW-PWI){pre_b[PWI-1]}}, pre_b};
            end
            assign word_all[i*CW +: CW] = {raw_word[CW-1:16], cfg_enable ? code : raw_word[15:0]};
            assign sat_all[i] = too_high || too_low;

            assign field_all[i*CW +: CW] = c_word[i*CW +: CW] & cfg_mask;
        end
    endgenerate

    // the sums over a chunk's parts (parts past its count hold stale values and are left out), as trees
    reg [47:0]  part_ones [0:3];
    reg         part_sign [0:3];
    reg [2:0]   chunk_sat;
    integer k;  // a part
    always @(*) begin
        chunk_sat = 3'd0;
        for (k = 0; k < 4; k = k + 1) begin
            part_ones[k] = k < PARTS && k < a_n ? ones_all[(k % PARTS)*48 +: 48] : 48'd0;
            part_sign[k] = k < PARTS && k < a_n && sign_all[k % PARTS];
        end
        for (k = 0; k < PARTS; k = k + 1) begin
            if (k < b_n && sat_all[k]) chunk_sat = chunk_sat + 3'd1;
        end
    end
    // |part 0| < 2^48 (W = 48) and the others' <= 2^31: the chunk's sum fits 50 bits
    // sum |acc| = sum ones + sum signs: each sign the carry into one adder (a low bit 1 + sign carries the sign)
    wire [49:0]  ones01 = {2'b0, part_ones[0][46:0], 1'b1} + {17'd0, part_ones[1][31:0], part_sign[0]};
    wire [33:0]  ones23 = {1'b0, part_ones[2][31:0], 1'b1} + {1'b0, part_ones[3][31:0], part_sign[2]};
    wire [50:0]  ones03 = {ones01[49:1], 1'b1} + {17'd0, ones23[33:1], part_sign[1]};
    wire [64:0]  sum_next = {sum_abs, 1'b1} + {14'd0, ones03[50:1], part_sign[3]};  // and part 3's sign
    // bits a chunk of C's fills in G: c_n slots (c_n <= 4; no multiplier)
    wire [7:0] slot8 = {1'b0, cfg_slot};
    wire [7:0] chunk_bits = (c_n[0] ? slot8 : 8'd0) + (c_n[1] ? slot8 << 1 : 8'd0) + (c_n[2] ? slot8 << 2 : 8'd0);
    wire [5:0] nib_lo = g_off[7:2];
    wire [5:0] nib_hi = g_off[7:2] + chunk_bits[7:2];
    // G takes C's c_n fields as the group's fields g_off / slot onwards. No shifter moves them there: the parts are
    // rotated by that first field's index mod 4, so that field f of the group takes rotated part f mod 4 (a fixed
    // wire per slot width), and only the chunk's nibbles are written (g_off and the chunk's bits are multiples of
    // 4 within 128). Passing through, a chunk is a group of its own: part j is word j, or part 0 the 64-bit field.
    wire [1:0] rot = cfg_slot == 7'd4 ? g_off[3:2] : cfg_slot == 7'd8 ? g_off[4:3] : cfg_slot == 7'd16 ? g_off[5:4]
                     : 2'd0;
    wire [63:0]  parts16;       // each part's code field (16 bits), part j at bits 16j (0 past PARTS)
    wire [127:0] new32;         // passing through: part j is word j
    wire [127:0] g_bits;        // the chunk's bits: its nibbles, each four times
    genvar j;
    for (j = 0; j < 4; j = j + 1) begin : g_slot_part
        if (j < PARTS) begin : g_has
            assign parts16[16 * j +: 16] = field_all[j * CW +: 16];
            assign new32[32 * j +: 32] = field_all[j * CW +: 32];
        end else begin : g_none
            assign parts16[16 * j +: 16] = 16'd0;
            assign new32[32 * j +: 32] = 32'd0;
        end
    end
    wire [127:0] twice = {parts16, parts16};
    wire [63:0]  turned = twice[64 - 16 * rot +: 64];  // field j is part (j - rot) mod 4's
    wire [15:0]  t0 = turned[15:0], t1 = turned[31:16], t2 = turned[47:32], t3 = turned[63:48];
    wire [127:0] g_new = cfg_slot == 7'd4 ? {64'd0, {4{t3[3:0], t2[3:0], t1[3:0], t0[3:0]}}}  // 16 fields at most
                         : cfg_slot == 7'd8 ? {4{t3[7:0], t2[7:0], t1[7:0], t0[7:0]}}
                         : cfg_slot == 7'd16 ? {2{t3, t2, t1, t0}}
                         : cfg_slot == 7'd32 ? new32 : {{(128 - CW){1'b0}}, field_all[CW-1:0]};
    wire [32:0]  under_hi = (33'd1 << nib_hi) - 33'd1;  // the nibbles below nib_hi, and below nib_lo
    wire [32:0]  under_lo = (33'd1 << nib_lo) - 33'd1;
    wire [31:0]  g_write = under_hi[31:0] & ~under_lo[31:0];
    for (j = 0; j < 32; j = j + 1) begin : g_nibble
        assign g_bits[4 * j +: 4] = {4{g_write[j]}};
    end
    // a group's first chunk clears the rest
    wire [127:0] g_next = (g_new & g_bits) | (g_off != 8'd0 ? g_data & ~g_bits : 128'd0);

    wire [6:0] neg_shift = 7'd0 - shift;  // 1..64 for a negative shift
    wire [5:0] rshift = neg_shift > RIGHT_CAP ? RIGHT_CAP : neg_shift[5:0];
    wire [5:0] rshift32 = neg_shift > 7'd33 ? 6'd33 : neg_shift[5:0];
    wire [W+1:0] half_w = {{(W+1){1'b0}}, 1'b1} << (rshift - 6'd1);  // the 32-bit parts' from the same decoder
    wire [W+1:0] below_w = half_w - {{(W+1){1'b0}}, 1'b1};
    wire [4:0] slot_of = field_bits != 5'd0 ? field_bits : bits;  // the width the slot must hold
    wire [6:0] slot = slot_of <= 5'd4 ? 7'd4 : (slot_of <= 5'd8 ? 7'd8 : 7'd16);

    always @(posedge clk) begin
        if (start) begin
            cfg_enable <= enable;
            cfg_left <= enable && !shift[6];
            cfg_lshift <= shift > LEFT_CAP ? LEFT_CAP : shift[4:0];
            cfg_rshift <= enable ? rshift : 6'd0;  // passing through: the accumulator as it is
            cfg_half <= half_w;
            cfg_below <= below_w;
            cfg_rshift32 <= enable ? rshift32 : 6'd0;
            cfg_half32 <= rshift32 == rshift ? half_w[33:0] : 34'h1_0000_0000;  // a right shift by 33
            cfg_below32 <= rshift32 == rshift ? below_w[33:0] : 34'h0_FFFF_FFFF;
            cfg_upper <= {PW{1'b1}} << (bits - 5'd1);
            cfg_lanes <= enable ? lanes : 5'd1;
            cfg_slot <= enable ? slot : (wide_raw ? 7'd64 : 7'd32);
            cfg_mask <= enable ? ~({CW{1'b1}} << slot) : (wide_raw ? {CW{1'b1}} : 32'hFFFF_FFFF);
            cfg_words <= enable ? group_words : (wide_raw ? 3'd2 : 3'd1);
            cfg_row <= row_values;
            cfg_wide <= !enable && wide_raw;
        end
    end

    always @(posedge clk) begin
        if (rst || start) begin
            r_busy <= !rst && count != 32'd0;
            in_left <= rst ? 32'd0 : count;
            in_lane <= 5'd0;
            in_pos <= 16'd0;
            a_v <= 1'b0;
            b_v <= 1'b0;
            c_v <= 1'b0;
            g_full <= 1'b0;
            g_off <= 8'd0;
            o_left <= 3'd0;
            sum_abs <= 64'd0;
            saturated <= 32'd0;
        end else begin
            if (in_take) begin
                in_left <= in_left - {29'd0, in_taken};
                in_lane <= in_end ? 5'd0 : in_lane + {2'd0, in_taken};
                in_pos <= row_last ? 16'd0 : in_pos + {13'd0, in_taken};
            end
            if (a_ready) a_v <= in_take;
            if (b_ready) b_v <= a_v;
            if (c_ready) c_v <= b_v;
            if (a_v && b_ready) begin  // A -> B
                sum_abs <= sum_next[64:1];
            end
            if (b_v && c_ready && cfg_enable) saturated <= saturated + {29'd0, chunk_sat};
            if (g_take) begin
                g_full <= c_end;
                g_n <= c_n;
                g_off <= c_end ? 8'd0 : g_off + chunk_bits;
            end else if (transfer) begin
                g_full <= 1'b0;
            end
            if (transfer) o_left <= cfg_enable || cfg_wide ? cfg_words : g_n;
            else if (out_move) o_left <= o_left - out_take;
            if (out_move && o_left == out_take && !transfer && !g_full && !c_v && !b_v && !a_v && in_left == 32'd0)
                r_busy <= 1'b0;
        end
    end

    // data registers: no reset needed (their valid bits above say when they hold anything)
    always @(posedge clk) begin
        if (in_take) begin
            a_acc <= in_data;
            a_end <= in_end;
            a_n <= in_taken;
        end
        if (a_v && b_ready) begin
            b_pre <= pre_all;
            b_up <= up_all;
            b_end <= a_end;
            b_n <= a_n;
        end
        if (b_v && c_ready) begin
            c_word <= word_all;
            c_end <= b_end;
            c_n <= b_n;
        end
        if (g_take) g_data <= g_next;
        if (transfer) o_data <= g_data;
        else if (out_move) o_data <= o_data >> {out_take, 5'd0};
    end
endmodule
