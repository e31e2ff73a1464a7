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
// Pass-through mode (enable = 0): each accumulator goes out unchanged as one word (count words).
//
// Statistics, over the accumulators taken in both modes, cleared by `start` and final when busy falls:
// sum_abs = sum |acc| (64 bits; |-2^31| = 2^31), max_abs = max |acc|, saturated = codes clipped to the range
// (0 when passing through).
//
// Pipeline (valid/ready on both sides: a word moves on a rising edge where valid && ready; nothing is dropped
// or duplicated under any pattern of input gaps and output stalls; each stage is free when empty or moving on):
//   A  input register (and the group-end flag from the lane, row and count counters)
//   B  shift: a capped left shift, or floor(acc / 2^s) with the half and sticky bits giving "round up"; the
//      |acc| statistics add here
//   C  round and saturate to a 32-bit word (the code sign-extended, or the accumulator when passing through);
//      the saturation count adds here
//   G  the group being filled; full once its last field is in, until the output register takes it
//   O  the output register: group_words words, the low word on out_data, shifted down as words move
// in_ready depends combinationally on out_ready through the chain (no skid buffer). Throughput: one
// accumulator a cycle while a group's words need no more cycles than its values; else one output word a cycle.
//
// Latency, no stalls (in_valid and out_ready held high), start sampled at edge 0: busy is high in cycles
// 1 .. L. The first value enters G at edge 4. Group k (n_k values) enters G from edge f_k = max(l_{k-1} + 1,
// z_k, x_{k-1}) (after the previous value; not before it arrives, z_k = 4 + its first value's index; once G
// has handed the previous group to O), one value an edge, so its last value enters at l_k = f_k + n_k - 1;
// O takes it at x_k = max(l_k + 1, x_{k-1} + group_words) and its words move at edges x_k + 1 .. x_k +
// group_words. L = x_last + group_words (codesign.numerics.round_stage.latency_cycles evaluates this
// recurrence exactly as max-plus matrix powers). Closed forms: pass-through L = count + 5; when no group has
// fewer values than group_words (lanes and a row's last group), L = count + group_words + 4; when
// group_words >= lanes, L = 4 + min(lanes, row_values) + words out. count = 0: busy stays low.
//
// Width (parameter W, default 32): W = 48 takes the shell's held sums (docs/accelerator.md, "Accumulating calls";
// golden codesign.numerics.round_stage.round_held): rounded exactly as 32-bit accumulators are (a right shift capped
// at W + 1, a left shift of the value clipped to +-2^17 first), sum_abs over the W-bit magnitudes, max_abs
// saturating at 2^32 - 1; passing through with `raw64` high, each value leaves as one 64-bit field (two words, low
// first, sign-extended), else as one 32-bit word (a sign-extended 32-bit accumulator: the W = 32 words). At W = 32
// `raw64` is ignored and the stage is the one above, bit for bit and cycle for cycle.
//
// `start` must come while busy is low (a start during a run abandons it and its words in flight). The
// configuration must be one RoundStageConfig accepts; others give unspecified words.
module accel_round #(
    parameter W = 32            // accumulator width: 32, or 48 for held sums
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
    input  wire [W-1:0]       in_data,
    input  wire               in_valid,
    output wire               in_ready,
    output wire [31:0]        out_data,
    output wire               out_valid,
    input  wire               out_ready,
    output wire               busy,         // high from the cycle after start until the last output word has moved
    output reg  [63:0]        sum_abs,
    output reg  [31:0]        max_abs,
    output reg  [31:0]        saturated
);
    localparam LEFT_CAP = 17;   // a left shift past 16 saturates every non-zero acc: capping keeps B narrow
    localparam RIGHT_CAP = W + 1;  // |acc| <= 2^(W-1) rounds to 0 for every right shift >= W + 1, as at W + 1
    localparam PW = W + 18;     // the shifted value (B): W + 17 bits and a sign
    localparam CW = W > 32 ? 64 : 32;  // C's word: a code, or the value passed through
    localparam [W-1:0] CLIP = 1 << 17;  // W > 32: |value| clipped to 2^17 before a left shift (still saturates)
    wire wide_raw = (W > 32) && raw64;

    // configuration, latched at start (with what follows from it)
    reg               cfg_enable;
    reg               cfg_left;      // shift >= 0
    reg [4:0]         cfg_lshift;    // min(shift, LEFT_CAP)
    reg [5:0]         cfg_rshift;    // min(-shift, RIGHT_CAP)
    reg [W+1:0]       cfg_half;      // the bit of weight 2^(s-1) of a right shift by s
    reg [W+1:0]       cfg_below;     // the bits under it (the sticky bits)
    reg signed [PW-1:0] cfg_high;    // 2^(bits-1) - 1
    reg signed [PW-1:0] cfg_low;     // -2^(bits-1)
    reg [4:0]         cfg_lanes;     // 1 when passing through
    reg [6:0]         cfg_slot;      // 4, 8, 16; 32 (64 with raw64) when passing through
    reg [CW-1:0]      cfg_mask;      // the low cfg_slot bits
    reg [2:0]         cfg_words;     // group_words; 1 when passing through
    reg [15:0]        cfg_row;

    reg        r_busy;
    reg [31:0] in_left;   // accumulators still to take
    reg [4:0]  in_lane;   // lane of the next value in its group
    reg [15:0] in_pos;    // position of the next value in its row

    reg               a_v, a_end;  // A: accumulator, and "closes its group"
    reg signed [W-1:0] a_acc;
    reg               b_v, b_end, b_up;
    reg signed [PW-1:0] b_pre;     // shifted left, or floor of the right shift
    reg               c_v, c_end;
    reg [CW-1:0]      c_word;      // the code sign-extended, or the accumulator
    reg               g_full;
    reg [7:0]         g_off;       // bit offset of the next field in the group
    reg [127:0]       g_data;
    reg [2:0]         o_left;      // words of O still to send
    reg [127:0]       o_data;

    // handshakes: a stage takes when it is empty or its content moves on in the same cycle
    wire out_move = (o_left != 3'd0) && out_ready;
    wire o_free   = (o_left == 3'd0) || (o_left == 3'd1 && out_ready);
    wire transfer = g_full && o_free;
    wire g_take   = c_v && (!g_full || transfer);
    wire c_ready  = !c_v || g_take;
    wire b_ready  = !b_v || c_ready;
    wire a_ready  = !a_v || b_ready;
    assign in_ready  = r_busy && (in_left != 32'd0) && a_ready;
    assign out_valid = o_left != 3'd0;
    assign out_data  = o_data[31:0];
    assign busy      = r_busy;
    wire in_take = in_valid && in_ready;
    wire row_last = in_pos == cfg_row - 16'd1;
    wire in_end = !cfg_enable || in_left == 32'd1 || in_lane == cfg_lanes - 5'd1 || row_last;

    // B: the shift of A's accumulator
    wire signed [PW-1:0] acc_wide = {{18{a_acc[W-1]}}, a_acc};
    wire signed [W-1:0] acc_clip = W == 32 ? a_acc
                                   : a_acc > $signed(CLIP) ? $signed(CLIP)
                                   : a_acc < -$signed(CLIP) ? -$signed(CLIP) : a_acc;
    wire signed [PW-1:0] clip_wide = {{18{acc_clip[W-1]}}, acc_clip};
    wire signed [W+1:0] acc34 = {{2{a_acc[W-1]}}, a_acc};
    wire signed [W+1:0] floor34 = acc34 >>> cfg_rshift;  // toward minus infinity
    wire               half_bit = |(acc34 & cfg_half);
    wire               sticky = |(acc34 & cfg_below);
    wire               round_up = half_bit && (sticky || floor34[0]);  // above the half, or a tie to even
    wire signed [PW-1:0] pre = !cfg_enable ? acc_wide
                               : cfg_left ? (clip_wide <<< cfg_lshift) : {{16{floor34[W+1]}}, floor34};
    wire [W-1:0]       magnitude = a_acc[W-1] ? {W{1'b0}} - a_acc : a_acc;  // |-2^(W-1)| = 2^(W-1) unsigned
    wire [63:0]        mag64 = {{(64-W){1'b0}}, magnitude};
    wire [31:0]        peak = mag64[63:32] != 32'd0 ? 32'hFFFF_FFFF : mag64[31:0];  // the record's word saturates

    // C: round and saturate
    wire signed [PW-1:0] rounded = b_pre + $signed({{(PW-1){1'b0}}, b_up});
    wire               too_high = rounded > cfg_high;
    wire               too_low = rounded < cfg_low;
    wire [31:0]        code = too_high ? cfg_high[31:0] : (too_low ? cfg_low[31:0] : rounded[31:0]);
    wire signed [CW-1:0] code_word = $signed(code);  // sign-extended

    // G: C's word into its field
    wire [127:0] field = {{(128-CW){1'b0}}, c_word & cfg_mask} << g_off;

    wire [6:0] neg_shift = 7'd0 - shift;  // 1..64 for a negative shift
    wire [5:0] rshift = neg_shift > RIGHT_CAP ? RIGHT_CAP : neg_shift[5:0];
    wire [4:0] slot_of = field_bits != 5'd0 ? field_bits : bits;  // the width the slot must hold
    wire [6:0] slot = slot_of <= 5'd4 ? 7'd4 : (slot_of <= 5'd8 ? 7'd8 : 7'd16);

    always @(posedge clk) begin
        if (start) begin
            cfg_enable <= enable;
            cfg_left <= !shift[6];
            cfg_lshift <= shift > LEFT_CAP ? LEFT_CAP : shift[4:0];
            cfg_rshift <= rshift;
            cfg_half <= {{(W+1){1'b0}}, 1'b1} << (rshift - 6'd1);
            cfg_below <= ({{(W+1){1'b0}}, 1'b1} << (rshift - 6'd1)) - {{(W+1){1'b0}}, 1'b1};
            cfg_high <= ({{(PW-1){1'b0}}, 1'b1} <<< (bits - 5'd1)) - {{(PW-1){1'b0}}, 1'b1};
            cfg_low <= -({{(PW-1){1'b0}}, 1'b1} <<< (bits - 5'd1));
            cfg_lanes <= enable ? lanes : 5'd1;
            cfg_slot <= enable ? slot : (wide_raw ? 7'd64 : 7'd32);
            cfg_mask <= enable ? ~({CW{1'b1}} << slot) : (wide_raw ? {CW{1'b1}} : 32'hFFFF_FFFF);
            cfg_words <= enable ? group_words : (wide_raw ? 3'd2 : 3'd1);
            cfg_row <= row_values;
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
            max_abs <= 32'd0;
            saturated <= 32'd0;
        end else begin
            if (in_take) begin
                in_left <= in_left - 32'd1;
                in_lane <= in_end ? 5'd0 : in_lane + 5'd1;
                in_pos <= row_last ? 16'd0 : in_pos + 16'd1;
            end
            if (a_ready) a_v <= in_take;
            if (b_ready) b_v <= a_v;
            if (c_ready) c_v <= b_v;
            if (a_v && b_ready) begin  // A -> B
                sum_abs <= sum_abs + mag64;
                if (peak > max_abs) max_abs <= peak;
            end
            if (b_v && c_ready && cfg_enable && (too_high || too_low)) saturated <= saturated + 32'd1;
            if (g_take) begin
                g_full <= c_end;
                g_off <= c_end ? 8'd0 : g_off + {1'b0, cfg_slot};
            end else if (transfer) begin
                g_full <= 1'b0;
            end
            if (transfer) o_left <= cfg_words;
            else if (out_move) o_left <= o_left - 3'd1;
            if (out_move && o_left == 3'd1 && !transfer && !g_full && !c_v && !b_v && !a_v && in_left == 32'd0)
                r_busy <= 1'b0;
        end
    end

    // data registers: no reset needed (their valid bits above say when they hold anything)
    always @(posedge clk) begin
        if (in_take) begin
            a_acc <= in_data;
            a_end <= in_end;
        end
        if (a_v && b_ready) begin
            b_pre <= pre;
            b_up <= cfg_enable && !cfg_left && round_up;
            b_end <= a_end;
        end
        if (b_v && c_ready) begin
            c_word <= cfg_enable ? code_word : b_pre[CW-1:0];
            c_end <= b_end;
        end
        if (g_take) g_data <= (g_off == 8'd0 ? 128'd0 : g_data) | field;
        if (transfer) o_data <= g_data;
        else if (out_move) o_data <= o_data >> 32;
    end
endmodule
