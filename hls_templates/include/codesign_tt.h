// codesign_tt.h -- the TT processing elements (docs/tt_pe.md) as HLS C++, bit for bit.
//
// PE1: Z[i,l] = sum_j sum_k A[i,j,k] * B[l,j,k] (paper 003, Eq. (5)); PE2:
// Z[i,l,k] = sum_j A[i,j,k] * B[l,j] (Eq. (6)); PE3: Z[i,j] = A[i] * B[j]. The word
// stream, the chunk packing of operand rows, the status rule and the order of
// the saturating additions are those of docs/tt_pe.md; the golden model is
// codesign.pe.tt.golden. The PE parameters are template constants so that
// every buffer is a static array (no dynamic memory, no recursion).
//
// STREAM_BITS (32, 64 or 128) is the width of both stream words: a chunk
// takes ceil(LANES * slot / STREAM_BITS) words, the header's bits above its
// fields must be 0, and results leave STREAM_BITS / 32 to a word, row-major,
// the last word of a transaction zero-padded (result_packer).
//
// Copied verbatim into every generated TT project; tested on its own with g++
// against transaction files (tests/pe/test_stream_headers.py, tests/pe/tt/test_tt_header_cases.py).
#ifndef CODESIGN_TT_H
#define CODESIGN_TT_H

#include <ap_int.h>
#include <hls_stream.h>

#include "codesign_constants.h"  // codesign::tt::STATUS_* (generated from codesign/hw/constants.py)

namespace codesign {
namespace tt {

const int RESULT_BITS = 32;  // one result (and the status) in the low bits of its 32-bit part

// The stream word of a STREAM_BITS-wide build; only 32, 64 and 128 compile.
template <int STREAM_BITS>
struct stream_word {
  static_assert(STREAM_BITS == 32 || STREAM_BITS == 64 || STREAM_BITS == 128, "STREAM_BITS must be 32, 64 or 128");
  typedef ap_uint<STREAM_BITS> type;
};

// Stream field width (bits) of a BITS-wide operand: the smallest of 4, 8, 16 that holds it.
template <int BITS>
struct slot_of {
  static const int value = BITS <= 4 ? 4 : (BITS <= 8 ? 8 : 16);
};

// STREAM_BITS-wide words one chunk of LANES operands takes in the stream.
template <int LANES, int BITS, int STREAM_BITS>
struct chunk_words_of {
  static const int value = (LANES * slot_of<BITS>::value + STREAM_BITS - 1) / STREAM_BITS;
};

template <int N, int D>
struct ceil_div {
  static const int value = (N + D - 1) / D;
};

// acc + term clamped to the signed ACC_BITS range (term and acc fit 63 bits).
template <int ACC_BITS>
inline ap_int<ACC_BITS> sat_add(ap_int<ACC_BITS> acc, ap_int<64> term) {
#pragma HLS INLINE
  const ap_int<64> high = (ap_int<64>(1) << (ACC_BITS - 1)) - 1;
  const ap_int<64> low = -(ap_int<64>(1) << (ACC_BITS - 1));
  ap_int<64> sum = ap_int<64>(acc) + term;
  if (sum > high) sum = high;
  if (sum < low) sum = low;
  return ap_int<ACC_BITS>(sum);
}

// A result sign-extended into one 32-bit part.
template <int BITS>
inline ap_uint<RESULT_BITS> to_part(ap_int<BITS> value) {
#pragma HLS INLINE
  const ap_int<RESULT_BITS> wide = value;
  return ap_uint<RESULT_BITS>(wide.range(RESULT_BITS - 1, 0));
}

// Results into STREAM_BITS-wide words, STREAM_BITS / 32 to a word in order: a word leaves when its last part is
// filled, and finish() sends a partly filled one with its unused parts 0 (the end of a transaction).
template <int STREAM_BITS>
struct result_packer {
  typedef typename stream_word<STREAM_BITS>::type word_t;
  static const int PARTS = STREAM_BITS / RESULT_BITS;
  word_t word;
  int filled;

  result_packer() : word(0), filled(0) {}

  template <int BITS>
  void put(hls::stream<word_t> &out, ap_int<BITS> value) {
#pragma HLS INLINE
    word.range(filled * RESULT_BITS + RESULT_BITS - 1, filled * RESULT_BITS) = to_part<BITS>(value);
    if (++filled == PARTS) {
      out.write(word);
      word = 0;
      filled = 0;
    }
  }

  void finish(hls::stream<word_t> &out) {
#pragma HLS INLINE
    if (filled != 0) out.write(word);
    word = 0;
    filled = 0;
  }
};

// Reads one chunk (CW words) and unpacks LANES operands of BITS bits; lanes at k >= valid are 0.
template <int LANES, int BITS, int STREAM_BITS>
inline void read_chunk(hls::stream<typename stream_word<STREAM_BITS>::type> &in, int valid, ap_int<BITS> lanes[LANES]) {
#pragma HLS INLINE
  const int SLOT = slot_of<BITS>::value;
  const int CW = chunk_words_of<LANES, BITS, STREAM_BITS>::value;
  ap_uint<CW * STREAM_BITS> bits = 0;
  for (int w = 0; w < CW; ++w) {
#pragma HLS PIPELINE II = 1
    bits.range(w * STREAM_BITS + STREAM_BITS - 1, w * STREAM_BITS) = in.read();
  }
  for (int v = 0; v < LANES; ++v) {
#pragma HLS UNROLL
    ap_int<BITS> value;
    value.range(BITS - 1, 0) = bits.range(v * SLOT + BITS - 1, v * SLOT);
    lanes[v] = v < valid ? value : ap_int<BITS>(0);
  }
}

// The header's dimension n (bits 8n+7 .. 8n).
template <int STREAM_BITS>
inline int header_dim(ap_uint<STREAM_BITS> header, int n) { return header.range(8 * n + 7, 8 * n).to_int(); }

// Whether every bit of the header from bit FROM up is 0 (the fields a PE does not use, and bits 32 up).
template <int STREAM_BITS>
inline bool header_clean(ap_uint<STREAM_BITS> header, int from) {
  return from >= STREAM_BITS || header.range(STREAM_BITS - 1, from) == 0;
}

// Status of a PE1/PE2 header: a zero dimension, then one over the buffers (docs/tt_pe.md).
inline int contraction_status(int dim_i, int dim_j, int dim_k, int dim_l, int max_j, int max_k, int max_l) {
  if (dim_i == 0 || dim_j == 0 || dim_k == 0 || dim_l == 0) return STATUS_BAD_HEADER;
  if (dim_j > max_j || dim_k > max_k || dim_l > max_l) return STATUS_TOO_LARGE;
  return STATUS_OK;
}

// B_ORDER: the order of B's rows in the stream, 0 for l outer (the original stream), 1 for j outer
// (codesign.pe.tt.spec.Tt1Spec.b_order "jl"); each row lands in b[l][j] either way. J_PAIRS (Tt1Spec.j_pairs):
// where K fits half the lanes, the chunk sums of rows j = 2p and 2p + 1 are added into an accumulator as one.
template <int LANES, int ROWS, int A_BITS, int B_BITS, int ACC_BITS, int MAX_J, int MAX_K, int MAX_L,
          int STREAM_BITS = 32, int B_ORDER = 0, int J_PAIRS = 0>
struct pe1 {
  static_assert(B_ORDER == 0 || B_ORDER == 1, "B_ORDER must be 0 (l outer) or 1 (j outer)");
  static_assert(J_PAIRS == 0 || J_PAIRS == 1, "J_PAIRS must be 0 or 1");
  static const int MAX_KC = ceil_div<MAX_K, LANES>::value;
  static const int MAX_G = ceil_div<MAX_L, ROWS>::value;
  typedef typename stream_word<STREAM_BITS>::type word_t;

  // One transaction: header, status, B, then per i: A[i] in, Z[i, :] out.
  static void process(hls::stream<word_t> &in, hls::stream<word_t> &out) {
    static ap_int<B_BITS> b[MAX_G * ROWS][MAX_J][MAX_KC][LANES];
    static ap_int<A_BITS> a[MAX_J][MAX_KC][LANES];
#pragma HLS ARRAY_PARTITION variable = b complete dim = 4
#pragma HLS ARRAY_PARTITION variable = a complete dim = 3
    const word_t header = in.read();
    const int dim_i = header_dim<STREAM_BITS>(header, 0), dim_j = header_dim<STREAM_BITS>(header, 1);
    const int dim_k = header_dim<STREAM_BITS>(header, 2), dim_l = header_dim<STREAM_BITS>(header, 3);
    const int status = header_clean<STREAM_BITS>(header, 32)
                           ? contraction_status(dim_i, dim_j, dim_k, dim_l, MAX_J, MAX_K, MAX_L)
                           : int(STATUS_BAD_HEADER);
    out.write(word_t(status));
    if (status != STATUS_OK) return;
    result_packer<STREAM_BITS> results;
    const int kc_n = (dim_k + LANES - 1) / LANES;
    const int outer_n = B_ORDER ? dim_j : dim_l, inner_n = B_ORDER ? dim_l : dim_j;
    for (int o = 0; o < outer_n; ++o)
      for (int n = 0; n < inner_n; ++n) {
        const int l = B_ORDER ? n : o, j = B_ORDER ? o : n;
        for (int c = 0; c < kc_n; ++c) read_chunk<LANES, B_BITS, STREAM_BITS>(in, dim_k - c * LANES, b[l][j][c]);
      }
    for (int i = 0; i < dim_i; ++i) {
      for (int j = 0; j < dim_j; ++j)
        for (int c = 0; c < kc_n; ++c) read_chunk<LANES, A_BITS, STREAM_BITS>(in, dim_k - c * LANES, a[j][c]);
      for (int g = 0; g * ROWS < dim_l; ++g) {
        ap_int<ACC_BITS> acc[ROWS];
#pragma HLS ARRAY_PARTITION variable = acc complete
        for (int r = 0; r < ROWS; ++r) acc[r] = 0;
        const int j_step = J_PAIRS && LANES > 1 && 2 * dim_k <= LANES ? 2 : 1;  // rows j summed together
        for (int j = 0; j < dim_j; j += j_step)
          for (int c = 0; c < kc_n; ++c) {
#pragma HLS PIPELINE II = 1
            for (int r = 0; r < ROWS; ++r) {
              ap_int<64> chunk = 0;  // exact: at most 16 products of 2^30
              for (int t = 0; t < 2; ++t)  // a fixed trip count: the pair's second row where there is one
                if (t < j_step && j + t < dim_j)
                  for (int v = 0; v < LANES; ++v)
                    chunk += ap_int<64>(a[j + t][c][v]) * ap_int<64>(b[g * ROWS + r][j + t][c][v]);
              acc[r] = sat_add<ACC_BITS>(acc[r], chunk);
            }
          }
        for (int r = 0; r < ROWS && g * ROWS + r < dim_l; ++r) results.template put<ACC_BITS>(out, acc[r]);
      }
    }
    results.finish(out);
  }
};

// PE2: Z[i,l,k] = sum_j A[i,j,k] * B[l,j], every product saturated in, j in order (paper 003, Eq. (6)).
// ROW_PAIRS (codesign.pe.tt.spec.Tt2Spec.row_pairs) is the RTL's: there a transaction with K <= LANES / 2 runs
// row groups of 2 * ROWS rows. It moves cycles, not numbers, so this model computes the same words either way.
template <int LANES, int ROWS, int A_BITS, int B_BITS, int ACC_BITS, int MAX_J, int MAX_K, int MAX_L,
          int STREAM_BITS = 32, int ROW_PAIRS = 0>
struct pe2 {
  static_assert(ROW_PAIRS == 0 || ROW_PAIRS == 1, "ROW_PAIRS must be 0 or 1");
  static const int MAX_KC = ceil_div<MAX_K, LANES>::value;
  static const int MAX_JC = ceil_div<MAX_J, LANES>::value;
  static const int MAX_G = ceil_div<MAX_L, ROWS>::value;
  typedef typename stream_word<STREAM_BITS>::type word_t;

  // One transaction: header, status, B rows (l), then per i: A[i] in, Z[i, :, :] out.
  static void process(hls::stream<word_t> &in, hls::stream<word_t> &out) {
    static ap_int<B_BITS> b[MAX_G * ROWS][MAX_JC][LANES];
    static ap_int<A_BITS> a[MAX_J][MAX_KC][LANES];
    static ap_int<ACC_BITS> z[ROWS][MAX_KC][LANES];  // one row group's results
#pragma HLS ARRAY_PARTITION variable = b complete dim = 3
#pragma HLS ARRAY_PARTITION variable = a complete dim = 3
#pragma HLS ARRAY_PARTITION variable = z complete dim = 3
    const word_t header = in.read();
    const int dim_i = header_dim<STREAM_BITS>(header, 0), dim_j = header_dim<STREAM_BITS>(header, 1);
    const int dim_k = header_dim<STREAM_BITS>(header, 2), dim_l = header_dim<STREAM_BITS>(header, 3);
    const int status = header_clean<STREAM_BITS>(header, 32)
                           ? contraction_status(dim_i, dim_j, dim_k, dim_l, MAX_J, MAX_K, MAX_L)
                           : int(STATUS_BAD_HEADER);
    out.write(word_t(status));
    if (status != STATUS_OK) return;
    result_packer<STREAM_BITS> results;
    const int kc_n = (dim_k + LANES - 1) / LANES, jc_n = (dim_j + LANES - 1) / LANES;
    for (int l = 0; l < dim_l; ++l)
      for (int c = 0; c < jc_n; ++c) read_chunk<LANES, B_BITS, STREAM_BITS>(in, dim_j - c * LANES, b[l][c]);
    for (int i = 0; i < dim_i; ++i) {
      for (int j = 0; j < dim_j; ++j)
        for (int c = 0; c < kc_n; ++c) read_chunk<LANES, A_BITS, STREAM_BITS>(in, dim_k - c * LANES, a[j][c]);
      for (int g = 0; g * ROWS < dim_l; ++g) {
        for (int c = 0; c < kc_n; ++c) {
          ap_int<ACC_BITS> acc[ROWS][LANES];
#pragma HLS ARRAY_PARTITION variable = acc complete dim = 0
          for (int r = 0; r < ROWS; ++r)
            for (int v = 0; v < LANES; ++v) acc[r][v] = 0;
          for (int j = 0; j < dim_j; ++j) {
#pragma HLS PIPELINE II = 1
            for (int r = 0; r < ROWS; ++r) {
              const ap_int<64> weight = b[g * ROWS + r][j / LANES][j % LANES];
              for (int v = 0; v < LANES; ++v) acc[r][v] = sat_add<ACC_BITS>(acc[r][v], ap_int<64>(a[j][c][v]) * weight);
            }
          }
          for (int r = 0; r < ROWS; ++r)
            for (int v = 0; v < LANES; ++v) z[r][c][v] = acc[r][v];
        }
        for (int r = 0; r < ROWS && g * ROWS + r < dim_l; ++r)
          for (int k = 0; k < dim_k; ++k) results.template put<ACC_BITS>(out, z[r][k / LANES][k % LANES]);
      }
    }
    results.finish(out);
  }
};

// PE3: Z[i,j] = A[i] * B[j], the outer product of the dense weight gradient (paper 003, App. A.2).
// B is cached, A streams through one chunk at a time; LANES products of one chunk of B at once.
template <int LANES, int A_BITS, int B_BITS, int MAX_J, int STREAM_BITS = 32>
struct pe3 {
  static const int MAX_JC = ceil_div<MAX_J, LANES>::value;
  typedef typename stream_word<STREAM_BITS>::type word_t;

  static void process(hls::stream<word_t> &in, hls::stream<word_t> &out) {
    static ap_int<B_BITS> b[MAX_JC][LANES];
#pragma HLS ARRAY_PARTITION variable = b complete dim = 2
    const word_t header = in.read();
    const int dim_i = header_dim<STREAM_BITS>(header, 0), dim_j = header_dim<STREAM_BITS>(header, 1);
    if (!header_clean<STREAM_BITS>(header, 16) || dim_i == 0 || dim_j == 0) {
      out.write(word_t(STATUS_BAD_HEADER));
      return;
    }
    if (dim_j > MAX_J) {
      out.write(word_t(STATUS_TOO_LARGE));
      return;
    }
    out.write(word_t(STATUS_OK));
    result_packer<STREAM_BITS> results;
    const int jc_n = (dim_j + LANES - 1) / LANES, ic_n = (dim_i + LANES - 1) / LANES;
    for (int c = 0; c < jc_n; ++c) read_chunk<LANES, B_BITS, STREAM_BITS>(in, dim_j - c * LANES, b[c]);
    for (int c = 0; c < ic_n; ++c) {
      ap_int<A_BITS> a[LANES];
      read_chunk<LANES, A_BITS, STREAM_BITS>(in, dim_i - c * LANES, a);
      for (int v = 0; v < LANES && c * LANES + v < dim_i; ++v)
        for (int jc = 0; jc < jc_n; ++jc) {
          ap_int<A_BITS + B_BITS> product[LANES];  // exact: at most 2^30 in magnitude
#pragma HLS ARRAY_PARTITION variable = product complete
          for (int u = 0; u < LANES; ++u) product[u] = ap_int<A_BITS + B_BITS>(a[v]) * b[jc][u];
          for (int u = 0; u < LANES && jc * LANES + u < dim_j; ++u) {
#pragma HLS PIPELINE II = 1
            results.template put<A_BITS + B_BITS>(out, product[u]);
          }
        }
    }
    results.finish(out);
  }
};

}  // namespace tt
}  // namespace codesign

#endif  // CODESIGN_TT_H
