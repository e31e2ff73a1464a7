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
const int RIGHT_CAP = 33;  // |acc| <= 2^31 rounds to 0 for every right shift >= 33, as it does at 33

typedef ap_uint<WORD_BITS> word_t;
typedef ap_uint<GROUP_BITS> group_t;

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

// Over the accumulators taken: sum and max of |acc| (|-2^31| = 2^31), and the codes clipped (0 passing through).
struct stats {
  ap_uint<64> sum_abs;
  ap_uint<32> max_abs;
  ap_uint<32> saturated;
};

// Field width (bits) of a bits-wide code: the smallest of 4, 8, 16 that holds it (the TT PE's operand slot).
inline ap_uint<6> slot_of(ap_uint<5> bits) {
#pragma HLS INLINE
  return bits <= 4 ? ap_uint<6>(4) : (bits <= 8 ? ap_uint<6>(8) : ap_uint<6>(16));
}

// acc * 2^shift rounded to nearest, ties to even, saturated to `bits` bits; `saturated` says it was clipped.
inline ap_int<16> round_value(ap_int<32> acc, ap_int<7> shift, ap_uint<5> bits, bool &saturated) {
#pragma HLS INLINE
  ap_int<50> rounded;
  if (shift >= 0) {
    const int s = shift > LEFT_CAP ? LEFT_CAP : int(shift);
    rounded = ap_int<50>(acc) << s;
  } else {
    const int s = -int(shift) > RIGHT_CAP ? RIGHT_CAP : -int(shift);
    const ap_int<34> wide = acc;
    const ap_int<34> floor = wide >> s;  // arithmetic: toward minus infinity
    const ap_uint<34> rest = ap_uint<34>(wide - (floor << s));  // 0 <= rest < 2^s
    const ap_uint<34> half = ap_uint<34>(1) << (s - 1);
    const bool up = rest > half || (rest == half && floor[0] == 1);
    rounded = ap_int<50>(floor) + (up ? 1 : 0);
  }
  const ap_int<50> high = (ap_int<50>(1) << (int(bits) - 1)) - 1;
  const ap_int<50> low = -(ap_int<50>(1) << (int(bits) - 1));
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

// Process 1: one accumulator an iteration into its field; a full group (or row end, or the last value) leaves.
inline void pack_groups(hls::stream<word_t> &in, hls::stream<group_t> &groups, const config &cfg, uint32_t count,
                        stats &st) {
  const ap_uint<6> slot = cfg.enable ? slot_of(cfg.field_bits != 0 ? cfg.field_bits : cfg.bits) : ap_uint<6>(WORD_BITS);
  const ap_uint<5> lanes = cfg.enable ? cfg.lanes : ap_uint<5>(1);
  const word_t mask = slot == WORD_BITS ? word_t(~word_t(0)) : word_t((word_t(1) << slot) - 1);
  ap_uint<64> sum_abs = 0;
  ap_uint<32> max_abs = 0, saturated = 0;
  group_t group = 0;
  ap_uint<5> lane = 0;
  ap_uint<16> pos = 0;
take:
  for (uint32_t n = 0; n < count; ++n) {
#pragma HLS PIPELINE II = 1
    const word_t raw = in.read();
    const ap_int<32> acc = ap_int<32>(raw);
    const ap_uint<32> magnitude = acc < 0 ? ap_uint<32>(ap_uint<32>(0) - raw) : ap_uint<32>(raw);
    sum_abs += magnitude;
    if (magnitude > max_abs) max_abs = magnitude;
    word_t field = raw;
    if (cfg.enable) {
      bool clipped = false;
      const ap_int<16> code = round_value(acc, cfg.shift, cfg.bits, clipped);
      saturated += clipped ? 1 : 0;
      field = word_t(ap_int<32>(code)) & mask;  // two's complement in slot bits
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
  st.max_abs = max_abs;
  st.saturated = saturated;
}

// Process 2: one word an iteration, the group's low word first.
inline void send_words(hls::stream<group_t> &groups, hls::stream<word_t> &out, const config &cfg, uint32_t count) {
  const uint32_t words = cfg.enable ? uint32_t(cfg.group_words) : 1u;
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
  pack_groups(in, groups, cfg, count, st);
  send_words(groups, out, cfg, count);
}

}  // namespace round
}  // namespace codesign

#endif  // CODESIGN_ROUND_H
