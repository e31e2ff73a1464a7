// Unit check of hls_templates/include/codesign_fpmac_array.h on its own (no kernel, no Jinja).
//
// usage: fpmac_array_header_check TRANSACTION_FILE
// The PE is a template over its spec, so one executable is built per
// configuration: compile with -DFA_PE_TYPE=codesign::fpmac_array::pe<E, MAX_FB, ROUNDING, ROWS, COLS, MAX_M,
// MAX_N, MAX_K>. Every transaction's input words go into a fresh stream,
// process() runs once, and the output words (and their number) are compared
// with the expected ones; process() must read exactly the input words (a word
// left over or a read of the empty stream is a mismatch).
// Prints "vectors=N mismatches=M"; exit status 0 all equal, 1 mismatches, 2 bad arguments or file.
#include <cstdio>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "codesign_fpmac_array.h"
#include "codesign_vectors.h"

#ifndef FA_PE_TYPE
#error "define FA_PE_TYPE (a codesign::fpmac_array::pe<...> type)"
#endif

namespace cv = codesign::vectors;
typedef codesign::fpmac_array::word_t word_t;

namespace {

// One transaction through a fresh pair of streams; true when it behaves exactly as expected.
bool run_one(const cv::Transaction &transaction, std::size_t index, std::size_t shown) {
  hls::stream<word_t> in("in"), out("out");
  for (std::size_t k = 0; k < transaction.in.size(); ++k) in.write(word_t(transaction.in[k]));
  std::ostringstream warnings;  // the stream model reports a read of an empty stream on std::cout
  std::streambuf *saved = std::cout.rdbuf(warnings.rdbuf());
  FA_PE_TYPE::process(in, out);
  std::cout.rdbuf(saved);
  const bool over_read = warnings.str().find("read while empty") != std::string::npos;
  std::vector<unsigned long long> got;
  while (!out.empty()) got.push_back(out.read().to_uint64());
  const std::size_t left = in.size();
  bool same = !over_read && left == 0 && got.size() == transaction.expected.size();
  for (std::size_t k = 0; same && k < got.size(); ++k) same = got[k] == transaction.expected[k];
  if (!same && shown < 10)
    std::printf("mismatch transaction=%lu words_out=%lu expected_words=%lu input_left=%lu over_read=%d\n",
                (unsigned long)index, (unsigned long)got.size(), (unsigned long)transaction.expected.size(),
                (unsigned long)left, over_read ? 1 : 0);
  return same;
}

}  // namespace

int main(int argc, char **argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s TRANSACTION_FILE\n", argc > 0 ? argv[0] : "fpmac_array_header_check");
    return cv::EXIT_BAD_VECTORS;
  }
  cv::Fields meta;
  const std::vector<cv::Transaction> transactions =
      cv::read_transactions(argv[1], "# codesign-transactions v1", "fpmac_array", 32, meta);
  std::size_t mismatches = 0;
  for (std::size_t t = 0; t < transactions.size(); ++t)
    if (!run_one(transactions[t], t, mismatches)) ++mismatches;
  std::printf("vectors=%lu mismatches=%lu\n", (unsigned long)transactions.size(), (unsigned long)mismatches);
  return mismatches == 0 ? 0 : cv::EXIT_MISMATCH;
}
