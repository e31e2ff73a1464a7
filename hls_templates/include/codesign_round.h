// codesign_round.h -- the rounding output stage as synthesizable HLS C++, bit for bit.
//
// Between a PE's result stream and the shell's write mover: signed 32-bit accumulators in, the next PE call's
// operand codes out, and the statistics a scale rule reads summed on the way. The contract is docs/accelerator.md,
// "Rounding stage"; the golden model is codesign.numerics.round_stage and the RTL rtl/accel/accel_round.v (the
// same three are checked on one grid, tests/rtl/test_accel_round.py).
//
//   code = saturate_bits(round_half_to_even(acc * 2^shift)), shift in [-64, 63] (frac_to - frac_from; a shift
//   >= 0 is a saturating left shift), bits in 2..16, range [-2^(bits-1), 2^(bits-1) - 1].
//
// Packing: fields of slot bits (4, 8 or 16: the smallest that holds bits) hold the codes' two's complement;
// `lanes` fields make a group of `group_words` 32-bit words, field v at bits [v*slot, v*slot + slot) of the
// group's words read as one little-endian bit string; a row of `row_values` values ends its last group early
// (the missing fields 0), and so does the value `count` (a last, short row sends ceil(r / lanes) groups, as the
// RTL does; the host only asks for whole rows). With enable false every accumulator goes out as it came.
//
// round_stream is a DATAFLOW region of two processes joined by a stream of whole groups: pack_groups takes one
// accumulator per iteration (II=1), send_words sends one word per iteration (II=1), so the stage moves one
// accumulator a cycle while a group's words need no more cycles than its values, else one word a cycle (the
// RTL's rates). Only ap_int arithmetic, no floating point, no dynamic memory; C++11.
//
// round_held_stream is the same stage on the shell's held sums (docs/accelerator.md, "Accumulating calls"):
// signed HELD_BITS-bit values in, rounded exactly as 32-bit accumulators are (codesign.numerics.round_stage
// .round_held), or, passing through, each sum as one 64-bit field (two words, low first, sign-extended).
#ifndef CODESIGN_ROUND_H
#define CODESIGN_ROUND_H

#include <stdint.h>

#include <ap_int.h>
#include <hls_stream.h>

namespace codesign {
namespace round {

const int WORD_BITS = 32;
const int GROUP_BITS = 128;  // at most 4 words a group
const int MAX_GROUP_WORDS = GROUP_BITS / WORD_BITS;
const int LEFT_CAP = 17;   // a left shift past 16 saturates every non-zero accumulator: capping keeps it narrow
const int CODE_CLIP = 1 << 17;  // |value| clipped to 2^17 before a left shift: still saturates every code of <= 16 bits
const int HELD_BITS = 48;  // the shell's accumulation buffer: sums of up to 2^16 results of 32 bits
// A right shift is capped at W + 1 (33 for accumulators, 49 for held sums): |value| <= 2^(W-1) rounds to 0 for every
// larger shift, as it does there.

typedef ap_uint<WORD_BITS> word_t;
typedef ap_uint<GROUP_BITS> group_t;
typedef ap_int<HELD_BITS> held_t;
typedef ap_uint<64> field_t;  // one field before it joins its group: a code, a raw word or a raw held sum

// One run's descriptor fields (codesign.numerics.round_stage.RoundStageConfig): the host validates them.
struct config {
  bool enable;               // false: pass the words through
  ap_int<7> shift;           // frac_to - frac_from (fraction bits)
  ap_uint<5> bits;           // code width, 2..16
  ap_uint<5> lanes;          // fields a group, 1..16
  ap_uint<3> group_words;    // 32-bit words a group, 1..4, >= ceil(lanes * slot / 32)
  ap_uint<16> row_values;    // values a row, 1..65535
  ap_uint<5> field_bits;     // the reading PE's operand width (its slot holds the codes); 0: bits
};

// Over the accumulators taken: the sum of |acc| (|-2^31| = 2^31), and the codes clipped (0 passing through).
struct stats {
  ap_uint<64> sum_abs;
  ap_uint<32> saturated;
};

// Field width (bits) of a bits-wide code: the smallest of 4, 8, 16 that holds it (the TT PE's operand slot).
inline ap_uint<6> slot_of(ap_uint<5> bits) {
#pragma HLS INLINE
  return bits <= 4 ? ap_uint<6>(4) : (bits <= 8 ? ap_uint<6>(8) : ap_uint<6>(16));
}

// acc * 2^shift rounded to nearest, ties to even, saturated to `bits` bits; `saturated` says it was clipped.
// W is the value's width: 32 (an accumulator) or HELD_BITS (a held sum).
template <int W>
inline ap_int<16> round_value(ap_int<W> acc, ap_int<7> shift, ap_uint<5> bits, bool &saturated) {
#pragma HLS INLINE
  ap_int<W + 6> rounded;  // a right shift leaves |value| <= 2^(W-1) + 1, a left one <= 2^17 * 2^17 (W >= 32)
  if (shift >= 0) {
    const int s = shift > LEFT_CAP ? LEFT_CAP : int(shift);
    const ap_int<19> clipped = acc > CODE_CLIP ? ap_int<W>(CODE_CLIP) : acc < -CODE_CLIP ? ap_int<W>(-CODE_CLIP) : acc;
    rounded = ap_int<W + 6>(ap_int<36>(clipped) << s);
  } else {
    const int s = -int(shift) > W + 1 ? W + 1 : -int(shift);
    const ap_int<W + 2> wide = acc;
    const ap_int<W + 2> floor = wide >> s;  // arithmetic: toward minus infinity
    const ap_uint<W + 2> rest = ap_uint<W + 2>(wide - (floor << s));  // 0 <= rest < 2^s
    const ap_uint<W + 2> half = ap_uint<W + 2>(1) << (s - 1);
    const bool up = rest > half || (rest == half && floor[0] == 1);
    rounded = floor + (up ? 1 : 0);
  }
  const ap_int<W + 6> high = (ap_int<W + 6>(1) << (int(bits) - 1)) - 1;
  const ap_int<W + 6> low = -(ap_int<W + 6>(1) << (int(bits) - 1));
  saturated = rounded > high || rounded < low;
  if (rounded > high) return ap_int<16>(high);
  if (rounded < low) return ap_int<16>(low);
  return ap_int<16>(rounded);
}

// Groups the whole count sends: whole rows of ceil(row_values / lanes), then ceil(r / lanes) for a short row of r.
inline uint32_t groups_of(const config &cfg, uint32_t count) {
  if (!cfg.enable) return count;
  const uint32_t row = cfg.row_values, lanes = cfg.lanes;
  const uint32_t rest = count % row;
  return count / row * ((row + lanes - 1) / lanes) + (rest + lanes - 1) / lanes;
}

// Process 1: one value an iteration into its field; a full group (or row end, or the last value) leaves. W: the
// values' width (32: accumulators, passed through as 32-bit words; HELD_BITS: sums, passed through as 64-bit fields).
template <int W, typename in_t>
inline void pack_groups(hls::stream<in_t> &in, hls::stream<group_t> &groups, const config &cfg, uint32_t count,
                        stats &st) {
  const int RAW_SLOT = W > WORD_BITS ? 2 * WORD_BITS : WORD_BITS;
  const ap_uint<7> slot = cfg.enable ? ap_uint<7>(slot_of(cfg.field_bits != 0 ? cfg.field_bits : cfg.bits))
                                     : ap_uint<7>(RAW_SLOT);
  const ap_uint<5> lanes = cfg.enable ? cfg.lanes : ap_uint<5>(1);
  const field_t mask = slot == 64 ? field_t(~field_t(0)) : field_t((field_t(1) << slot) - 1);
  ap_uint<64> sum_abs = 0;
  ap_uint<32> saturated = 0;
  group_t group = 0;
  ap_uint<5> lane = 0;
  ap_uint<16> pos = 0;
take:
  for (uint32_t n = 0; n < count; ++n) {
#pragma HLS PIPELINE II = 1
    const ap_int<W> acc = ap_int<W>(in.read());
    const ap_uint<W> magnitude = acc < 0 ? ap_uint<W>(-acc) : ap_uint<W>(acc);  // |-2^(W-1)| fits W bits
    sum_abs += magnitude;
    field_t field = field_t(ap_int<64>(acc)) & mask;  // two's complement in slot bits
    if (cfg.enable) {
      bool clipped = false;
      const ap_int<16> code = round_value<W>(acc, cfg.shift, cfg.bits, clipped);
      saturated += clipped ? 1 : 0;
      field = field_t(ap_int<64>(code)) & mask;
    }
    group |= group_t(field) << (int(lane) * int(slot));
    const bool row_end = pos == cfg.row_values - 1;
    const bool last = !cfg.enable || n + 1 == count || lane == lanes - 1 || row_end;
    pos = row_end ? ap_uint<16>(0) : ap_uint<16>(pos + 1);
    lane = last ? ap_uint<5>(0) : ap_uint<5>(lane + 1);
    if (last) {
      groups.write(group);
      group = 0;
    }
  }
  st.sum_abs = sum_abs;
  st.saturated = saturated;
}

// Process 2: one word an iteration, the group's low word first; raw_words a group passing through (1, or 2 for a
// held sum).
inline void send_words(hls::stream<group_t> &groups, hls::stream<word_t> &out, const config &cfg, uint32_t count,
                       uint32_t raw_words) {
  const uint32_t words = cfg.enable ? uint32_t(cfg.group_words) : raw_words;
  const uint32_t total = groups_of(cfg, count) * words;
  group_t group = 0;
  uint32_t w = 0;
send:
  for (uint32_t k = 0; k < total; ++k) {
#pragma HLS PIPELINE II = 1
    if (w == 0) group = groups.read();
    out.write(word_t(group.range(WORD_BITS - 1, 0)));
    group >>= WORD_BITS;
    w = w + 1 == words ? 0u : w + 1;
  }
}

// The stage: `count` accumulators from `in`, the words (codes or the accumulators) to `out`, the statistics to st.
inline void round_stream(hls::stream<word_t> &in, hls::stream<word_t> &out, const config &cfg, uint32_t count,
                         stats &st) {
#pragma HLS DATAFLOW
  hls::stream<group_t> groups("round_groups");
#pragma HLS STREAM variable = groups depth = 2
  pack_groups<WORD_BITS>(in, groups, cfg, count, st);
  send_words(groups, out, cfg, count, 1);
}

// The stage on `count` held sums (HELD_BITS bits each): codes as round_stream sends them, or, passing through, two
// words a sum (its 64-bit two's complement, low word first); the statistics over the sums.
inline void round_held_stream(hls::stream<held_t> &in, hls::stream<word_t> &out, const config &cfg, uint32_t count,
                              stats &st) {
#pragma HLS DATAFLOW
  hls::stream<group_t> groups("held_groups");
#pragma HLS STREAM variable = groups depth = 2
  pack_groups<HELD_BITS>(in, groups, cfg, count, st);
  send_words(groups, out, cfg, count, 2);
}

}  // namespace round
}  // namespace codesign

#endif  // CODESIGN_ROUND_H
