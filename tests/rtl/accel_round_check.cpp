// Unit check of hls_templates/include/codesign_round.h with g++ (no kernel, no Jinja): the C-sim level of the
// rounding stage's grid (tests/rtl/test_accel_round.py).
//
// usage: accel_round_check TRANSACTION_FILE
// A transaction file of pe=accel_round (codesign/hw/vectors.py). Each transaction is one run of the stage with
// its own configuration: input words = desc0, desc1, then the accumulators (count = n_in - 2); desc0 holds
// enable in bit 0, shift (7-bit two's complement) in [7:1], bits in [12:8], lanes in [17:13], group_words in
// [20:18], field_bits in [25:21]; desc1 holds row_values. Expected words = the words the stage sends, then sum_abs (low, high word)
// and saturated.
// round_stream runs once per transaction on a fresh pair of streams; every expected word, their number, and the
// input words read (exactly count) are compared. Prints "vectors=N mismatches=M": N accumulators, M wrong or
// missing words (statistics included, a word count off by d counts d) or 1 for input not read exactly. Exits 0
// (all equal), 1 (mismatches) or 2 (a malformed file).
#include <cstdio>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "codesign_round.h"
#include "codesign_vectors.h"

namespace cv = codesign::vectors;
namespace cr = codesign::round;

namespace {

const std::size_t SHOW_MISMATCHES = 10;
const std::size_t DESCRIPTOR_WORDS = 2;
const std::size_t STATS_WORDS = 3;

cr::config decode(unsigned long long desc0, unsigned long long desc1) {
  cr::config cfg;
  cfg.enable = (desc0 & 1) != 0;
  cfg.shift = ap_int<7>(ap_uint<7>((desc0 >> 1) & 0x7f));
  cfg.bits = (desc0 >> 8) & 0x1f;
  cfg.lanes = (desc0 >> 13) & 0x1f;
  cfg.group_words = (desc0 >> 18) & 0x7;
  cfg.row_values = desc1 & 0xffff;
  cfg.field_bits = (desc0 >> 21) & 0x1f;
  return cfg;
}

// Wrong or missing words of one transaction (0: all equal), the first few shown.
std::size_t run_one(const cv::Transaction &transaction, std::size_t index, std::size_t &shown) {
  const cr::config cfg = decode(transaction.in[0], transaction.in[1]);
  const uint32_t count = uint32_t(transaction.in.size() - DESCRIPTOR_WORDS);
  hls::stream<cr::word_t> in("in"), out("out");
  for (std::size_t k = DESCRIPTOR_WORDS; k < transaction.in.size(); ++k) in.write(cr::word_t(transaction.in[k]));
  cr::stats st;
  std::ostringstream warnings;  // the stream model reports a read of an empty stream on std::cout
  std::streambuf *saved = std::cout.rdbuf(warnings.rdbuf());
  cr::round_stream(in, out, cfg, count, st);
  std::cout.rdbuf(saved);
  std::vector<unsigned long long> got;
  while (!out.empty()) got.push_back(out.read().to_uint64());
  got.push_back(st.sum_abs.range(31, 0).to_uint64());
  got.push_back(st.sum_abs.range(63, 32).to_uint64());
  got.push_back(st.saturated.to_uint64());
  const std::vector<unsigned long long> &want = transaction.expected;
  std::size_t bad = got.size() > want.size() ? got.size() - want.size() : want.size() - got.size();
  if (got.size() == want.size())
    for (std::size_t k = 0; k < got.size(); ++k) {
      if (got[k] == want[k]) continue;
      if (shown++ < SHOW_MISMATCHES)
        std::printf("mismatch transaction=%lu word=%lu of=%lu expected=%llx got=%llx\n", (unsigned long)index,
                    (unsigned long)k, (unsigned long)got.size(), want[k], got[k]);
      ++bad;
    }
  else if (shown++ < SHOW_MISMATCHES)
    std::printf("mismatch transaction=%lu words=%lu expected_words=%lu\n", (unsigned long)index,
                (unsigned long)got.size(), (unsigned long)want.size());
  if (!in.empty() || warnings.str().find("read while empty") != std::string::npos) {
    if (shown++ < SHOW_MISMATCHES)
      std::printf("mismatch transaction=%lu input_left=%lu\n", (unsigned long)index, (unsigned long)in.size());
    ++bad;
  }
  return bad;
}

}  // namespace

int main(int argc, char **argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s TRANSACTION_FILE\n", argv[0]);
    return cv::EXIT_BAD_VECTORS;
  }
  cv::Fields meta;
  const std::vector<cv::Transaction> transactions =
      cv::read_transactions(argv[1], "# codesign-transactions v1", "accel_round", 32, meta);
  std::size_t values = 0, mismatches = 0, shown = 0;
  for (std::size_t t = 0; t < transactions.size(); ++t) {
    if (transactions[t].in.size() < DESCRIPTOR_WORDS || transactions[t].expected.size() < STATS_WORDS)
      cv::fail(argv[1], "a transaction lacks its descriptor or statistics words");
    values += transactions[t].in.size() - DESCRIPTOR_WORDS;
    mismatches += run_one(transactions[t], t, shown);
  }
  std::printf("vectors=%lu mismatches=%lu\n", (unsigned long)values, (unsigned long)mismatches);
  return mismatches == 0 ? 0 : cv::EXIT_MISMATCH;
}
