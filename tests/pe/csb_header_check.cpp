// Unit check of hls_templates/include/codesign_csb.h on its own (no kernel, no Jinja).
//
// usage: csb_header_check TRANSACTION_FILE
// The PE parameters are template constants, so one executable is built per
// configuration: compile with -DCSB_BLOCK_ROWS=.. -DCSB_BLOCK_COLS=.. -DCSB_KERNEL=..
// -DCSB_OUT_H=.. -DCSB_OUT_W=.. -DCSB_BATCH=.. -DCSB_PARALLEL=.. -DCSB_ACC_BITS=..
// For every transaction of the file (pe=csb, metadata checked against the
// build where present) the input words go into a fresh input stream, process()
// runs once, and every output word and their number are compared with the
// expected words. process() must also read exactly the input words: a word
// left over or a read of the empty stream counts as a mismatch.
// Prints "vectors=N mismatches=M" (N transactions) and exits 0 (all equal),
// 1 (mismatches) or 2 (bad arguments or a malformed file).
#include <cstdio>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "codesign_csb.h"
#include "codesign_vectors.h"

#if !defined(CSB_BLOCK_ROWS) || !defined(CSB_BLOCK_COLS) || !defined(CSB_KERNEL) || !defined(CSB_OUT_H) || \
    !defined(CSB_OUT_W) || !defined(CSB_BATCH) || !defined(CSB_PARALLEL) || !defined(CSB_ACC_BITS)
#error "define CSB_BLOCK_ROWS, CSB_BLOCK_COLS, CSB_KERNEL, CSB_OUT_H, CSB_OUT_W, CSB_BATCH, CSB_PARALLEL, CSB_ACC_BITS"
#endif

namespace cv = codesign::vectors;

namespace {

typedef codesign::csb::pe<CSB_BLOCK_ROWS, CSB_BLOCK_COLS, CSB_KERNEL, CSB_OUT_H, CSB_OUT_W, CSB_BATCH, CSB_PARALLEL,
                          CSB_ACC_BITS>
    Pe;
typedef ap_uint<32> word_t;

const std::size_t SHOW_MISMATCHES = 10;

std::vector<cv::Transaction> read_vectors(const std::string &path) {
  cv::Fields meta;
  const std::vector<cv::Transaction> transactions =
      cv::read_transactions(path, "# codesign-transactions v1", "csb", 32, meta);
  cv::check_meta(path, meta, "block_rows", cv::to_text(CSB_BLOCK_ROWS));
  cv::check_meta(path, meta, "block_cols", cv::to_text(CSB_BLOCK_COLS));
  cv::check_meta(path, meta, "kernel", cv::to_text(CSB_KERNEL));
  cv::check_meta(path, meta, "out_h", cv::to_text(CSB_OUT_H));
  cv::check_meta(path, meta, "out_w", cv::to_text(CSB_OUT_W));
  cv::check_meta(path, meta, "batch", cv::to_text(CSB_BATCH));
  cv::check_meta(path, meta, "parallel", cv::to_text(CSB_PARALLEL));
  cv::check_meta(path, meta, "acc_bits", cv::to_text(CSB_ACC_BITS));
  return transactions;
}

}  // namespace

int main(int argc, char **argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s TRANSACTION_FILE\n", argc > 0 ? argv[0] : "csb_header_check");
    return cv::EXIT_BAD_VECTORS;
  }
  const std::vector<cv::Transaction> transactions = read_vectors(argv[1]);
  std::size_t mismatches = 0, words = 0;
  for (std::size_t t = 0; t < transactions.size(); ++t) {
    const cv::Transaction &transaction = transactions[t];
    hls::stream<word_t> in("in"), out("out");
    for (std::size_t k = 0; k < transaction.in.size(); ++k) in.write(word_t(transaction.in[k]));
    // The stream model reports a read of an empty stream on std::cout; capture it.
    std::ostringstream warnings;
    std::streambuf *saved = std::cout.rdbuf(warnings.rdbuf());
    Pe::process(in, out);
    std::cout.rdbuf(saved);
    const bool over_read = warnings.str().find("read while empty") != std::string::npos;
    std::vector<unsigned long long> got;
    while (!out.empty()) got.push_back(out.read().to_uint64());
    const std::size_t left = in.size();
    const std::size_t common = got.size() < transaction.expected.size() ? got.size() : transaction.expected.size();
    std::size_t first_bad = common;
    for (std::size_t k = 0; k < common; ++k)
      if (got[k] != transaction.expected[k]) {
        first_bad = k;
        break;
      }
    words += transaction.expected.size();
    if (!over_read && left == 0 && got.size() == transaction.expected.size() && first_bad == common) continue;
    if (mismatches < SHOW_MISMATCHES) {
      std::printf("mismatch transaction=%lu words_out=%lu expected_words=%lu input_left=%lu over_read=%d",
                  (unsigned long)t, (unsigned long)got.size(), (unsigned long)transaction.expected.size(),
                  (unsigned long)left, over_read ? 1 : 0);
      if (first_bad < common)
        std::printf(" first_bad_word=%lu expected=%llx got=%llx", (unsigned long)first_bad,
                    transaction.expected[first_bad], got[first_bad]);
      std::printf("\n");
    }
    ++mismatches;
  }
  std::printf("words=%lu\n", (unsigned long)words);
  std::printf("vectors=%lu mismatches=%lu\n", (unsigned long)transactions.size(), (unsigned long)mismatches);
  return mismatches == 0 ? 0 : cv::EXIT_MISMATCH;
}
