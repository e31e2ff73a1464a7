// Reads a vector file with codesign_vectors.h and prints what it read, so the Python test can
// compare it with what codesign.hw.vectors wrote. usage: vectors_header_check columns|transactions FILE
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "codesign_vectors.h"

namespace cv = codesign::vectors;

int main(int argc, char **argv) {
  if (argc != 3) return 64;
  cv::Fields meta;
  if (std::strcmp(argv[1], "columns") == 0) {
    const std::vector<std::vector<unsigned long long> > rows =
        cv::read_columns(argv[2], "# codesign-vectors v1", "demo", "a,b,c", meta);
    cv::check_meta(argv[2], meta, "width", "12");
    for (std::size_t r = 0; r < rows.size(); ++r)
      std::printf("%llx %llx %llx\n", rows[r][0], rows[r][1], rows[r][2]);
  } else {
    const std::vector<cv::Transaction> all = cv::read_transactions(argv[2], "# codesign-transactions v1", "demo", 32, meta);
    for (std::size_t t = 0; t < all.size(); ++t) {
      for (std::size_t k = 0; k < all[t].in.size(); ++k) std::printf("%llx ", all[t].in[k]);
      std::printf("|");
      for (std::size_t k = 0; k < all[t].expected.size(); ++k) std::printf(" %llx", all[t].expected[k]);
      std::printf("\n");
    }
  }
  return 0;
}
