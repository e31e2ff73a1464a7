// codesign_fpmac_array.h -- the FP-MAC array PE (docs/fpmac_array.md) as HLS C++, bit for bit.
//
// One transaction: C[MxN] = A[MxK] . B[KxN] (+ C_in), every output accumulated
// by the FP-MAC of codesign_fpmac.h in k order, acc <- fpmac(A[i][k], B[k][j], acc)
// for k = 0 .. K-1, from C_in[i][j] or +0, in the format (E, fb) with fb taken
// from the header. The word stream (header layout, section order, status rule)
// is that of docs/fpmac_array.md; the golden model is codesign.pe.fpmac_array.golden.
//
// The buffers mirror rtl/fpmac_array: A in ROWS banks (row i in bank i % ROWS),
// B in COLS banks (column j in bank j % COLS), C in ROWS x COLS banks, so one
// step of the ROWS x COLS MACs reads one word of every bank. The MAC loop
// interleaves SLOTS output tiles, k outer and tile inner, so that a MAC's
// accumulator is needed again only SLOTS iterations after it was produced
// (the FP-MAC pipeline depth): the loop can issue every cycle.
//
// A header with K = 0 selects an element-wise operation by bits 31..29 (docs/fpmac_array.md,
// "Element-wise operations"; golden codesign.pe.fpmac_array.vector): 1 ReLU, 2 the mask of X by Z's
// sign, 3 momentum SGD, three FP-MACs an element; M x N elements, placed as C's.
//
// Copied verbatim into every generated fpmac_array project; tested on its own
// with g++ against transaction files (tests/pe/test_stream_headers.py, tests/pe/fpmac_array/).
#ifndef CODESIGN_FPMAC_ARRAY_H
#define CODESIGN_FPMAC_ARRAY_H

#include <ap_int.h>
#include <hls_stream.h>

#include "codesign_constants.h"  // WORD_BITS and the status codes
#include "codesign_fpmac.h"

namespace codesign {
namespace fpmac_array {

typedef ap_uint<WORD_BITS> word_t;
const int SLOTS = 4;  // output tiles interleaved in the MAC loop: the FP-MAC's latency (cycles)

const int OP_RELU = 1, OP_MASK = 2, OP_SGD = 3;  // element-wise operations (K = 0), bits 31..29

// Header fields (docs/fpmac_array.md): M 6..0, ReLU on the results 7, N 15..8, K 23..16, fb 28..24, A^T 29,
// B^T 30, accumulate 31; with K = 0 (an element-wise op), M is 7..0 and bits 31..29 are the op.
struct header_t {
  int m, n, k, fb, op;
  bool trans_a, trans_b, accumulate, relu;
};

inline header_t parse_header(word_t word) {
  header_t h;
  h.k = word.range(23, 16).to_int();
  h.m = h.k == 0 ? word.range(7, 0).to_int() : word.range(6, 0).to_int();
  h.relu = h.k != 0 && word[7];
  h.n = word.range(15, 8).to_int();
  h.fb = word.range(28, 24).to_int();
  h.trans_a = word[29];
  h.trans_b = word[30];
  h.accumulate = word[31];
  h.op = word.range(31, 29).to_int();
  return h;
}

// 0 accepted; 1 a zero dimension or fb = 0 (with K = 0: an op other than 1..3); 2 a dimension above its buffer
// or fb above MAX_FB.
inline int header_status(const header_t &h, int max_m, int max_n, int max_k, int max_fb) {
  if (h.k == 0 && h.op >= OP_RELU && h.op <= OP_SGD && h.m != 0 && h.n != 0 && h.fb != 0)
    return h.m > max_m || h.n > max_n || h.fb > max_fb ? STATUS_TOO_LARGE : STATUS_OK;
  if (h.m == 0 || h.n == 0 || h.k == 0 || h.fb == 0) return STATUS_BAD_HEADER;
  if (h.m > max_m || h.n > max_n || h.k > max_k || h.fb > max_fb) return STATUS_TOO_LARGE;
  return STATUS_OK;
}

template <int E, int MAX_FB, int ROUNDING, int ROWS, int COLS, int MAX_M, int MAX_N, int MAX_K>
struct pe {
  typedef fp_format<E, MAX_FB> F;
  typedef typename F::container_t container_t;
  typedef typename F::fb_t fb_t;
  static const int TM = (MAX_M + ROWS - 1) / ROWS;  // row tiles of the largest C
  static const int TN = (MAX_N + COLS - 1) / COLS;  // column tiles of the largest C

  // The container of a stream word: bits above it are ignored.
  static container_t container(word_t word) { return container_t(word.range(F::WIDTH - 1, 0)); }

  // x at fb, its bits below fb cleared, where keep; else +0.
  static container_t kept(container_t x, bool keep, fb_t fb) {
    return keep ? mask_below_fb<E, MAX_FB>(x, clamp_fb<E, MAX_FB>(fb)) : container_t(0);
  }

  // Whether x's value at fb is above zero: sign bit 0 and a code that is not +0.
  static bool positive(container_t x, fb_t fb) {
    const container_t v = kept(x, true, fb);
    return !v[F::WIDTH - 1] && v != 0;
  }

  // One section of n words into an element buffer.
  static void load(hls::stream<word_t> &in, container_t buf[MAX_M * MAX_N], int n) {
    for (int e = 0; e < n; ++e) {
#pragma HLS PIPELINE II = 1
      buf[e] = container(in.read());
    }
  }

  // As rtl/fpmac_array/fpmac_array_vector.v: two element buffers, element (i, j) at i * N + j. g holds G (SGD),
  // Z (mask) or X (ReLU), later V'; p holds P (SGD) or X (mask), later P'. ReLU: y = x where x is positive,
  // else +0; mask: y = x where z is positive; SGD with scalars wd, mu, step (minus the learning rate): each v,
  // as it arrives, gives g' = fpmac(wd, p, g), v' = fpmac(mu, v, g'), p' = fpmac(step, v', p); P' is sent,
  // then V'.
  static void element_wise(const header_t &h, hls::stream<word_t> &in, hls::stream<word_t> &out) {
    static container_t g[MAX_M * MAX_N];
    static container_t p[MAX_M * MAX_N];
    const fb_t fb = fb_t(h.fb);
    const int n = h.m * h.n;
    container_t wd = 0, mu = 0, step = 0;
    if (h.op == OP_SGD) {
      wd = container(in.read());
      mu = container(in.read());
      step = container(in.read());
      load(in, g, n);
      load(in, p, n);
      for (int e = 0; e < n; ++e) {
        // each element's words are read and written by its own iteration only
#pragma HLS PIPELINE II = 1
#pragma HLS DEPENDENCE variable = g inter false
#pragma HLS DEPENDENCE variable = p inter false
        const container_t velocity = fpmac<E, MAX_FB, ROUNDING>(mu, container(in.read()),
                                                                fpmac<E, MAX_FB, ROUNDING>(wd, p[e], g[e], fb), fb);
        p[e] = fpmac<E, MAX_FB, ROUNDING>(step, velocity, p[e], fb);
        g[e] = velocity;
      }
      for (int e = 0; e < 2 * n; ++e) {
#pragma HLS PIPELINE II = 1
        out.write(word_t(e < n ? p[e] : g[e - n]));
      }
      return;
    }
    if (h.op == OP_MASK) load(in, p, n);
    load(in, g, n);
    for (int e = 0; e < n; ++e) {
#pragma HLS PIPELINE II = 1
      out.write(word_t(kept(h.op == OP_MASK ? p[e] : g[e], positive(g[e], fb), fb)));
    }
  }

  static void process(hls::stream<word_t> &in, hls::stream<word_t> &out) {
    static container_t a[ROWS][TM][MAX_K];
    static container_t b[COLS][TN][MAX_K];
    static container_t c[ROWS][COLS][TM][TN];
#pragma HLS ARRAY_PARTITION variable = a complete dim = 1
#pragma HLS ARRAY_PARTITION variable = b complete dim = 1
#pragma HLS ARRAY_PARTITION variable = c complete dim = 1
#pragma HLS ARRAY_PARTITION variable = c complete dim = 2
    const header_t h = parse_header(in.read());
    const int status = header_status(h, MAX_M, MAX_N, MAX_K, MAX_FB);
    out.write(word_t(status));
    if (status != STATUS_OK) return;
    if (h.k == 0) {
      element_wise(h, in, out);
      return;
    }
    const fb_t fb = fb_t(h.fb);

    // A: row-major M x K, or with A^T row-major K x M.
    for (int outer = 0; outer < (h.trans_a ? h.k : h.m); ++outer)
      for (int inner = 0; inner < (h.trans_a ? h.m : h.k); ++inner) {
#pragma HLS PIPELINE II = 1
        const int i = h.trans_a ? inner : outer, k = h.trans_a ? outer : inner;
        a[i % ROWS][i / ROWS][k] = container(in.read());
      }
    // B: row-major K x N, or with B^T row-major N x K.
    for (int outer = 0; outer < (h.trans_b ? h.n : h.k); ++outer)
      for (int inner = 0; inner < (h.trans_b ? h.k : h.n); ++inner) {
#pragma HLS PIPELINE II = 1
        const int k = h.trans_b ? inner : outer, j = h.trans_b ? outer : inner;
        b[j % COLS][j / COLS][k] = container(in.read());
      }
    if (h.accumulate)
      for (int i = 0; i < h.m; ++i)
        for (int j = 0; j < h.n; ++j) {
#pragma HLS PIPELINE II = 1
          c[i % ROWS][j % COLS][i / ROWS][j / COLS] = container(in.read());
        }

    // Tiles t = ti * tn + tj in groups of SLOTS; per group k outer, tile inner.
    const int tm = (h.m + ROWS - 1) / ROWS, tn = (h.n + COLS - 1) / COLS, tiles = tm * tn;
    container_t acc[SLOTS][ROWS][COLS];
#pragma HLS ARRAY_PARTITION variable = acc complete dim = 0
    for (int group = 0; group * SLOTS < tiles; ++group)
      for (int k = 0; k < h.k; ++k)
        for (int s = 0; s < SLOTS; ++s) {
          // acc[s] is read SLOTS iterations after it is written (distance 4 = SLOTS); c is read at a tile's
          // first step and written at its last step, and no later iteration reads that tile's address
#pragma HLS PIPELINE II = 1
#pragma HLS DEPENDENCE variable = acc inter true distance = 4
#pragma HLS DEPENDENCE variable = c inter false
          const int t = group * SLOTS + s;
          if (t >= tiles) continue;
          const int ti = t / tn, tj = t % tn;
          for (int r = 0; r < ROWS; ++r)
            for (int q = 0; q < COLS; ++q) {
              const container_t start = h.accumulate ? c[r][q][ti][tj] : container_t(0);
              const container_t sum = fpmac<E, MAX_FB, ROUNDING>(a[r][ti][k], b[q][tj][k], k == 0 ? start : acc[s][r][q],
                                                                 fb);
              acc[s][r][q] = sum;
              if (k == h.k - 1) c[r][q][ti][tj] = sum;
            }
        }

    for (int i = 0; i < h.m; ++i)
      for (int j = 0; j < h.n; ++j) {
#pragma HLS PIPELINE II = 1
        const container_t sum = c[i % ROWS][j % COLS][i / ROWS][j / COLS];
        out.write(word_t(h.relu && sum[F::WIDTH - 1] ? container_t(0) : sum));  // ReLU: +0 for a set sign bit
      }
  }
};

}  // namespace fpmac_array
}  // namespace codesign

#endif  // CODESIGN_FPMAC_ARRAY_H
