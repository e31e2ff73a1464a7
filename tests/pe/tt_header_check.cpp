// Unit check of hls_templates/include/codesign_tt.h on its own (no kernel, no Jinja).
//
// usage: tt_header_check TRANSACTION_FILE
// The PE is a template over its parameters, so one executable is built per
// configuration: compile with -DTT_PE_NAME='"tt1"', -DTT_PE_TYPE=codesign::tt::pe1<...> and
// -DTT_STREAM_BITS=32 (or 64, 128: the file's 32-bit words then go STREAM_BITS / 32 to a stream word,
// least significant first, and every output word is split the same way).
// For every transaction of the file the input words go into a fresh input
// stream, process() runs once, and every output word and their number are
// compared with the expected words; process() must read exactly the input
// words (a word left over or a read of the empty stream is a mismatch).
// Prints "vectors=N mismatches=M" and exits 0 (all equal), 1 (mismatches) or
// 2 (bad arguments or a malformed file).
#include <cstdio>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "codesign_tt.h"
#include "codesign_vectors.h"

#if !defined(TT_PE_NAME) || !defined(TT_PE_TYPE) || !defined(TT_STREAM_BITS)
#error "define TT_PE_NAME (a string), TT_PE_TYPE (a codesign::tt PE type) and TT_STREAM_BITS"
#endif

namespace cv = codesign::vectors;
typedef TT_PE_TYPE Pe;
typedef codesign::tt::stream_word<TT_STREAM_BITS>::type word_t;
const std::size_t PARTS = TT_STREAM_BITS / 32;

int main(int argc, char **argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s TRANSACTION_FILE\n", argc > 0 ? argv[0] : "tt_header_check");
    return cv::EXIT_BAD_VECTORS;
  }
  cv::Fields meta;
  const std::vector<cv::Transaction> transactions =
      cv::read_transactions(argv[1], "# codesign-transactions v1", TT_PE_NAME, 32, meta);
  std::size_t mismatches = 0;
  for (std::size_t t = 0; t < transactions.size(); ++t) {
    const cv::Transaction &transaction = transactions[t];
    hls::stream<word_t> in("in"), out("out");
    for (std::size_t k = 0; k < transaction.in.size(); k += PARTS) {
      word_t word = 0;
      for (std::size_t p = 0; p < PARTS && k + p < transaction.in.size(); ++p)
        word |= word_t(transaction.in[k + p]) << (32 * p);
      in.write(word);
    }
    std::ostringstream warnings;  // the stream model reports a read of an empty stream on std::cout
    std::streambuf *saved = std::cout.rdbuf(warnings.rdbuf());
    Pe::process(in, out);
    std::cout.rdbuf(saved);
    const bool over_read = warnings.str().find("read while empty") != std::string::npos;
    std::vector<unsigned long long> got;
    while (!out.empty()) {
      const word_t word = out.read();
      for (std::size_t p = 0; p < PARTS; ++p) got.push_back(ap_uint<32>(word >> (32 * p)).to_uint64());
    }
    const std::size_t left = in.size();
    bool same = !over_read && left == 0 && got.size() == transaction.expected.size();
    for (std::size_t k = 0; same && k < got.size(); ++k) same = got[k] == transaction.expected[k];
    if (same) continue;
    if (mismatches < 10)
      std::printf("mismatch transaction=%lu words_out=%lu expected_words=%lu input_left=%lu over_read=%d\n",
                  (unsigned long)t, (unsigned long)got.size(), (unsigned long)transaction.expected.size(),
                  (unsigned long)left, over_read ? 1 : 0);
    ++mismatches;
  }
  std::printf("vectors=%lu mismatches=%lu\n", (unsigned long)transactions.size(), (unsigned long)mismatches);
  return mismatches == 0 ? 0 : cv::EXIT_MISMATCH;
}
