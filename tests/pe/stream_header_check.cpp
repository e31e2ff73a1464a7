// Unit check of a stream PE's library header (hls_templates/include) on its own: no kernel, no Jinja.
//
// usage: <pe>_header_check TRANSACTION_FILE
// The PE is a class template over its spec, so one executable is built per configuration: a one-file
// translation unit (written by tests/pe/conftest.py) includes the PE's header, names the instantiated type
// `checked_pe`, the PE (`PE_NAME`), the width of its stream words (`CHECKED_STREAM_BITS`: 32, or 64 or 128
// for a TT PE built so) and the file metadata the build stands for (`META`, `META_COUNT`), then includes this
// file. Vector files hold 32-bit words: a stream word is CHECKED_STREAM_BITS / 32 consecutive file words,
// least significant first, on the way in and on the way out (codesign.pe.tt.contract.word_parts).
// For every transaction of the file (pe=PE_NAME, metadata checked against the build) the input words go into a
// fresh stream, process() runs once, and every output word and their number are compared with the expected
// words. process() must also read exactly the input words: a word left over or a read of the empty stream counts
// as a mismatch.
// Prints "vectors=N mismatches=M" (N transactions) and exits 0 (all equal), 1 (mismatches) or 2 (bad
// arguments, a malformed file or one written for another configuration).
#include <cstdio>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "codesign_constants.h"
#include "codesign_vectors.h"

namespace cv = codesign::vectors;

namespace {

#if CHECKED_STREAM_BITS % 32 != 0
#error "CHECKED_STREAM_BITS must be a multiple of the 32-bit file word"
#endif

typedef ap_uint<CHECKED_STREAM_BITS> word_t;
const std::size_t PARTS = CHECKED_STREAM_BITS / codesign::WORD_BITS;  // file words per stream word
const std::size_t SHOW_MISMATCHES = 10;

// One transaction through a fresh pair of streams; true when it behaves exactly as expected.
bool run_one(const cv::Transaction &transaction, std::size_t index, std::size_t shown) {
  hls::stream<word_t> in("in"), out("out");
  // a last stream word with fewer file words than PARTS keeps its missing upper parts 0
  for (std::size_t k = 0; k < transaction.in.size(); k += PARTS) {
    word_t word = 0;
    for (std::size_t p = 0; p < PARTS && k + p < transaction.in.size(); ++p)
      word |= word_t(transaction.in[k + p]) << (codesign::WORD_BITS * p);
    in.write(word);
  }
  std::ostringstream warnings;  // the stream model reports a read of an empty stream on std::cout
  std::streambuf *saved = std::cout.rdbuf(warnings.rdbuf());
  checked_pe::process(in, out);
  std::cout.rdbuf(saved);
  const bool over_read = warnings.str().find("read while empty") != std::string::npos;
  std::vector<unsigned long long> got;
  while (!out.empty()) {
    const word_t word = out.read();
    for (std::size_t p = 0; p < PARTS; ++p)
      got.push_back(ap_uint<codesign::WORD_BITS>(word >> (codesign::WORD_BITS * p)).to_uint64());
  }
  const std::size_t left = in.size() * PARTS;  // in file words
  const std::size_t common = got.size() < transaction.expected.size() ? got.size() : transaction.expected.size();
  std::size_t first_bad = common;
  for (std::size_t k = 0; k < common; ++k)
    if (got[k] != transaction.expected[k]) {
      first_bad = k;
      break;
    }
  if (!over_read && left == 0 && got.size() == transaction.expected.size() && first_bad == common) return true;
  if (shown < SHOW_MISMATCHES) {
    std::printf("mismatch transaction=%lu words_out=%lu expected_words=%lu input_left=%lu over_read=%d",
                (unsigned long)index, (unsigned long)got.size(), (unsigned long)transaction.expected.size(),
                (unsigned long)left, over_read ? 1 : 0);
    if (first_bad < common)
      std::printf(" first_bad_word=%lu expected=%llx got=%llx", (unsigned long)first_bad,
                  transaction.expected[first_bad], got[first_bad]);
    std::printf("\n");
  }
  return false;
}

}  // namespace

int main(int argc, char **argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s TRANSACTION_FILE\n", argc > 0 ? argv[0] : "stream_header_check");
    return cv::EXIT_BAD_VECTORS;
  }
  cv::Fields meta;
  const std::vector<cv::Transaction> transactions =
      cv::read_transactions(argv[1], "# codesign-transactions v1", PE_NAME, codesign::WORD_BITS, meta);
  for (int k = 0; k < META_COUNT; ++k) cv::check_meta(argv[1], meta, META[k][0], META[k][1]);
  std::size_t mismatches = 0;
  for (std::size_t t = 0; t < transactions.size(); ++t)
    if (!run_one(transactions[t], t, mismatches)) ++mismatches;
  std::printf("vectors=%lu mismatches=%lu\n", (unsigned long)transactions.size(), (unsigned long)mismatches);
  return mismatches == 0 ? 0 : cv::EXIT_MISMATCH;
}
