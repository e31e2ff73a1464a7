// Unit check of codesign::round::round_held_stream (hls_templates/include/codesign_round.h) with g++: the C-sim
// level of the rounding stage on held sums (docs/accelerator.md, "Accumulating calls"), against
// codesign.numerics.round_stage.round_held (tests/rtl/test_accel_round.py writes the file).
//
// usage: accel_held_check CASE_FILE
// A case file of whitespace-separated decimal integers: the number of runs, then per run
//   enable shift bits lanes group_words row_values field_bits count, `count` signed sums (48-bit range),
//   the number of expected words, the words, then sum_abs and saturated.
// Prints "vectors=N mismatches=M" (N sums, M wrong or missing words and statistics, or 1 for a run whose sums
// were not all taken); exits 0 (all equal), 1 (mismatches) or 2 (a malformed file).
#include <cstdio>
#include <fstream>
#include <vector>

#include "codesign_round.h"

namespace cr = codesign::round;

int main(int argc, char **argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s CASE_FILE\n", argv[0]);
    return 2;
  }
  std::ifstream file(argv[1]);
  unsigned long runs = 0, values = 0, mismatches = 0, shown = 0;
  if (!(file >> runs)) return 2;
  for (unsigned long r = 0; r < runs; ++r) {
    long long enable, shift, bits, lanes, group_words, row_values, field_bits, count, n_words;
    if (!(file >> enable >> shift >> bits >> lanes >> group_words >> row_values >> field_bits >> count)) return 2;
    cr::config cfg;
    cfg.enable = enable != 0;
    cfg.shift = shift;
    cfg.bits = bits;
    cfg.lanes = lanes;
    cfg.group_words = group_words;
    cfg.row_values = row_values;
    cfg.field_bits = field_bits;
    hls::stream<cr::held_t> in("in");
    hls::stream<cr::word_t> out("out");
    for (long long k = 0; k < count; ++k) {
      long long value;
      if (!(file >> value)) return 2;
      in.write(cr::held_t(value));
    }
    std::vector<unsigned long long> want;
    if (!(file >> n_words)) return 2;
    for (long long k = 0; k < n_words + 2; ++k) {
      unsigned long long word;
      if (!(file >> word)) return 2;
      want.push_back(word);
    }
    cr::stats st;
    cr::round_held_stream(in, out, cfg, uint32_t(count), st);
    std::vector<unsigned long long> got;
    while (!out.empty()) got.push_back(out.read().to_uint64());
    got.push_back(st.sum_abs.to_uint64());
    got.push_back(st.saturated.to_uint64());
    values += count;
    unsigned long bad = got.size() == want.size() ? 0 : 1;
    for (std::size_t k = 0; bad == 0 && k < got.size(); ++k)
      if (got[k] != want[k]) {
        if (shown++ < 10)
          std::printf("mismatch run=%lu word=%lu expected=%llx got=%llx\n", r, (unsigned long)k, want[k], got[k]);
        ++mismatches;
      }
    mismatches += bad + (in.empty() ? 0 : 1);
  }
  std::printf("vectors=%lu mismatches=%lu\n", values, mismatches);
  return mismatches == 0 ? 0 : 1;
}
