// Unit check of hls_templates/include/codesign_fpmac.h on its own (no kernel, no Jinja).
//
// usage: fpmac_header_check EXP_BITS MAX_FB ROUNDING_CODE ROWS_FILE
// ROWS_FILE holds little-endian uint64 rows (a, b, c, fb, expected) written by
// tests/pe/fpmac/test_fpmac_header.py from the golden model. Several configurations
// are compiled in; the arguments pick one. Prints "vectors=N mismatches=M" and
// exits 0 (all equal), 1 (mismatches) or 2 (bad arguments or file).
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "codesign_fpmac.h"

namespace {

typedef unsigned long long u64;

template <int E, int MAX_FB, int ROUNDING>
u64 mac(u64 a, u64 b, u64 c, u64 fb) {
  typedef codesign::fp_format<E, MAX_FB> F;
  return codesign::fpmac<E, MAX_FB, ROUNDING>(typename F::container_t(a), typename F::container_t(b),
                                              typename F::container_t(c), typename F::fb_t(fb))
      .to_uint64();
}

typedef u64 (*mac_fn)(u64, u64, u64, u64);

struct Config {
  int exp_bits, max_fb, rounding;
  mac_fn fn;
};

#define CODESIGN_CONFIG(E, M) {E, M, 0, &mac<E, M, 0>}, {E, M, 1, &mac<E, M, 1>}, {E, M, 2, &mac<E, M, 2>}
const Config CONFIGS[] = {
    CODESIGN_CONFIG(2, 1), CODESIGN_CONFIG(2, 2), CODESIGN_CONFIG(3, 2), CODESIGN_CONFIG(4, 3),
    CODESIGN_CONFIG(3, 5), CODESIGN_CONFIG(6, 4), CODESIGN_CONFIG(5, 10), CODESIGN_CONFIG(7, 16),
    CODESIGN_CONFIG(8, 23),
};
#undef CODESIGN_CONFIG

}  // namespace

int main(int argc, char **argv) {
  if (argc != 5) {
    std::fprintf(stderr, "usage: %s EXP_BITS MAX_FB ROUNDING_CODE ROWS_FILE\n", argv[0]);
    return 2;
  }
  const int e = std::atoi(argv[1]), m = std::atoi(argv[2]), r = std::atoi(argv[3]);
  mac_fn fn = 0;
  for (std::size_t i = 0; i < sizeof(CONFIGS) / sizeof(CONFIGS[0]); ++i)
    if (CONFIGS[i].exp_bits == e && CONFIGS[i].max_fb == m && CONFIGS[i].rounding == r) fn = CONFIGS[i].fn;
  if (!fn) {
    std::fprintf(stderr, "configuration E=%d MAX_FB=%d ROUNDING=%d is not compiled in\n", e, m, r);
    return 2;
  }
  std::FILE *file = std::fopen(argv[4], "rb");
  if (!file) {
    std::fprintf(stderr, "cannot open %s\n", argv[4]);
    return 2;
  }
  std::vector<u64> data;
  u64 buffer[4096];
  std::size_t got;
  while ((got = std::fread(buffer, sizeof(u64), 4096, file)) > 0) data.insert(data.end(), buffer, buffer + got);
  std::fclose(file);
  if (data.empty() || data.size() % 5 != 0) {
    std::fprintf(stderr, "%s does not hold whole rows of 5 uint64 words\n", argv[4]);
    return 2;
  }
  const std::size_t rows = data.size() / 5;
  std::size_t mismatches = 0;
  for (std::size_t i = 0; i < rows; ++i) {
    const u64 *row = &data[5 * i];
    const u64 out = fn(row[0], row[1], row[2], row[3]);
    if (out != row[4]) {
      if (mismatches < 10)
        std::printf("mismatch row=%lu fb=%llu a=%llx b=%llx c=%llx expected=%llx got=%llx\n", (unsigned long)i, row[3],
                    row[0], row[1], row[2], row[4], out);
      ++mismatches;
    }
  }
  std::printf("vectors=%lu mismatches=%lu\n", (unsigned long)rows, (unsigned long)mismatches);
  return mismatches == 0 ? 0 : 1;
}
