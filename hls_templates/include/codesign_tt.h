// codesign_tt.h -- the TT processing elements (docs/tt_pe.md) as HLS C++, bit for bit.
//
// PE1: Z[i,l] = sum_j sum_k A[i,j,k] * B[l,j,k] (paper 003, Eq. (5)); PE2:
// Z[i,l,k] = sum_j A[i,j,k] * B[l,j] (Eq. (6)); PE3: Z[i,j] = A[i] * B[j]. The word
// stream, the chunk packing of operand rows, the status rule and the order of
// the saturating additions are those of docs/tt_pe.md; the golden model is
// codesign.pe.tt.golden. The PE parameters are template constants so that
// every buffer is a static array (no dynamic memory, no recursion).
//
// Copied verbatim into every generated TT project; tested on its own with g++
// against transaction files (tests/pe/test_tt_header.py).
#ifndef CODESIGN_TT_H
#define CODESIGN_TT_H

#include <ap_int.h>
#include <hls_stream.h>

namespace codesign {
namespace tt {

enum { STATUS_OK = 0, STATUS_BAD_HEADER = 1, STATUS_TOO_LARGE = 2 };

const int WORD_BITS = 32;
typedef ap_uint<WORD_BITS> word_t;

// Stream field width (bits) of a BITS-wide operand: the smallest of 4, 8, 16 that holds it.
template <int BITS>
struct slot_of {
  static const int value = BITS <= 4 ? 4 : (BITS <= 8 ? 8 : 16);
};

// Words one chunk of LANES operands takes in the stream.
template <int LANES, int BITS>
struct chunk_words_of {
  static const int value = (LANES * slot_of<BITS>::value + WORD_BITS - 1) / WORD_BITS;
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

// A result sign-extended into one stream word.
template <int BITS>
inline word_t to_word(ap_int<BITS> value) {
#pragma HLS INLINE
  const ap_int<WORD_BITS> wide = value;
  word_t word;
  word.range(WORD_BITS - 1, 0) = wide.range(WORD_BITS - 1, 0);
  return word;
}

// Reads one chunk (CW words) and unpacks LANES operands of BITS bits; lanes at k >= valid are 0.
template <int LANES, int BITS>
inline void read_chunk(hls::stream<word_t> &in, int valid, ap_int<BITS> lanes[LANES]) {
#pragma HLS INLINE
  const int SLOT = slot_of<BITS>::value;
  const int CW = chunk_words_of<LANES, BITS>::value;
  ap_uint<CW * WORD_BITS> bits = 0;
  for (int w = 0; w < CW; ++w) {
#pragma HLS PIPELINE II = 1
    bits.range(w * WORD_BITS + WORD_BITS - 1, w * WORD_BITS) = in.read();
  }
  for (int v = 0; v < LANES; ++v) {
#pragma HLS UNROLL
    ap_int<BITS> value;
    value.range(BITS - 1, 0) = bits.range(v * SLOT + BITS - 1, v * SLOT);
    lanes[v] = v < valid ? value : ap_int<BITS>(0);
  }
}

// The header's dimension n (bits 8n+7 .. 8n).
inline int header_dim(word_t header, int n) { return header.range(8 * n + 7, 8 * n).to_int(); }

// Status of a PE1/PE2 header: a zero dimension, then one over the buffers (docs/tt_pe.md).
inline int contraction_status(int dim_i, int dim_j, int dim_k, int dim_l, int max_j, int max_k, int max_l) {
  if (dim_i == 0 || dim_j == 0 || dim_k == 0 || dim_l == 0) return STATUS_BAD_HEADER;
  if (dim_j > max_j || dim_k > max_k || dim_l > max_l) return STATUS_TOO_LARGE;
  return STATUS_OK;
}

template <int LANES, int ROWS, int A_BITS, int B_BITS, int ACC_BITS, int MAX_J, int MAX_K, int MAX_L>
struct pe1 {
  static const int MAX_KC = ceil_div<MAX_K, LANES>::value;
  static const int MAX_G = ceil_div<MAX_L, ROWS>::value;

  // One transaction: header, status, B, then per i: A[i] in, Z[i, :] out.
  static void process(hls::stream<word_t> &in, hls::stream<word_t> &out) {
    static ap_int<B_BITS> b[MAX_G * ROWS][MAX_J][MAX_KC][LANES];
    static ap_int<A_BITS> a[MAX_J][MAX_KC][LANES];
#pragma HLS ARRAY_PARTITION variable = b complete dim = 4
#pragma HLS ARRAY_PARTITION variable = a complete dim = 3
    const word_t header = in.read();
    const int dim_i = header_dim(header, 0), dim_j = header_dim(header, 1);
    const int dim_k = header_dim(header, 2), dim_l = header_dim(header, 3);
    const int status = contraction_status(dim_i, dim_j, dim_k, dim_l, MAX_J, MAX_K, MAX_L);
    out.write(word_t(status));
    if (status != STATUS_OK) return;
    const int kc_n = (dim_k + LANES - 1) / LANES;
    for (int l = 0; l < dim_l; ++l)
      for (int j = 0; j < dim_j; ++j)
        for (int c = 0; c < kc_n; ++c) read_chunk<LANES, B_BITS>(in, dim_k - c * LANES, b[l][j][c]);
    for (int i = 0; i < dim_i; ++i) {
      for (int j = 0; j < dim_j; ++j)
        for (int c = 0; c < kc_n; ++c) read_chunk<LANES, A_BITS>(in, dim_k - c * LANES, a[j][c]);
      for (int g = 0; g * ROWS < dim_l; ++g) {
        ap_int<ACC_BITS> acc[ROWS];
#pragma HLS ARRAY_PARTITION variable = acc complete
        for (int r = 0; r < ROWS; ++r) acc[r] = 0;
        for (int j = 0; j < dim_j; ++j)
          for (int c = 0; c < kc_n; ++c) {
#pragma HLS PIPELINE II = 1
            for (int r = 0; r < ROWS; ++r) {
              ap_int<64> chunk = 0;  // exact: at most 16 products of 2^30
              for (int v = 0; v < LANES; ++v) chunk += ap_int<64>(a[j][c][v]) * ap_int<64>(b[g * ROWS + r][j][c][v]);
              acc[r] = sat_add<ACC_BITS>(acc[r], chunk);
            }
          }
        for (int r = 0; r < ROWS && g * ROWS + r < dim_l; ++r) out.write(to_word<ACC_BITS>(acc[r]));
      }
    }
  }
};

// PE2: Z[i,l,k] = sum_j A[i,j,k] * B[l,j], every product saturated in, j in order (paper 003, Eq. (6)).
template <int LANES, int ROWS, int A_BITS, int B_BITS, int ACC_BITS, int MAX_J, int MAX_K, int MAX_L>
struct pe2 {
  static const int MAX_KC = ceil_div<MAX_K, LANES>::value;
  static const int MAX_JC = ceil_div<MAX_J, LANES>::value;
  static const int MAX_G = ceil_div<MAX_L, ROWS>::value;

  // One transaction: header, status, B rows (l), then per i: A[i] in, Z[i, :, :] out.
  static void process(hls::stream<word_t> &in, hls::stream<word_t> &out) {
    static ap_int<B_BITS> b[MAX_G * ROWS][MAX_JC][LANES];
    static ap_int<A_BITS> a[MAX_J][MAX_KC][LANES];
    static ap_int<ACC_BITS> z[ROWS][MAX_KC][LANES];  // one row group's results
#pragma HLS ARRAY_PARTITION variable = b complete dim = 3
#pragma HLS ARRAY_PARTITION variable = a complete dim = 3
#pragma HLS ARRAY_PARTITION variable = z complete dim = 3
    const word_t header = in.read();
    const int dim_i = header_dim(header, 0), dim_j = header_dim(header, 1);
    const int dim_k = header_dim(header, 2), dim_l = header_dim(header, 3);
    const int status = contraction_status(dim_i, dim_j, dim_k, dim_l, MAX_J, MAX_K, MAX_L);
    out.write(word_t(status));
    if (status != STATUS_OK) return;
    const int kc_n = (dim_k + LANES - 1) / LANES, jc_n = (dim_j + LANES - 1) / LANES;
    for (int l = 0; l < dim_l; ++l)
      for (int c = 0; c < jc_n; ++c) read_chunk<LANES, B_BITS>(in, dim_j - c * LANES, b[l][c]);
    for (int i = 0; i < dim_i; ++i) {
      for (int j = 0; j < dim_j; ++j)
        for (int c = 0; c < kc_n; ++c) read_chunk<LANES, A_BITS>(in, dim_k - c * LANES, a[j][c]);
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
          for (int k = 0; k < dim_k; ++k) out.write(to_word<ACC_BITS>(z[r][k / LANES][k % LANES]));
      }
    }
  }
};

// PE3: Z[i,j] = A[i] * B[j], the outer product of the dense weight gradient (paper 003, App. A.2).
// B is cached, A streams through one chunk at a time; LANES products of one chunk of B at once.
template <int LANES, int A_BITS, int B_BITS, int MAX_J>
struct pe3 {
  static const int MAX_JC = ceil_div<MAX_J, LANES>::value;

  static void process(hls::stream<word_t> &in, hls::stream<word_t> &out) {
    static ap_int<B_BITS> b[MAX_JC][LANES];
#pragma HLS ARRAY_PARTITION variable = b complete dim = 2
    const word_t header = in.read();
    const int dim_i = header_dim(header, 0), dim_j = header_dim(header, 1);
    if (header.range(31, 16) != 0 || dim_i == 0 || dim_j == 0) {
      out.write(word_t(STATUS_BAD_HEADER));
      return;
    }
    if (dim_j > MAX_J) {
      out.write(word_t(STATUS_TOO_LARGE));
      return;
    }
    out.write(word_t(STATUS_OK));
    const int jc_n = (dim_j + LANES - 1) / LANES, ic_n = (dim_i + LANES - 1) / LANES;
    for (int c = 0; c < jc_n; ++c) read_chunk<LANES, B_BITS>(in, dim_j - c * LANES, b[c]);
    for (int c = 0; c < ic_n; ++c) {
      ap_int<A_BITS> a[LANES];
      read_chunk<LANES, A_BITS>(in, dim_i - c * LANES, a);
      for (int v = 0; v < LANES && c * LANES + v < dim_i; ++v)
        for (int jc = 0; jc < jc_n; ++jc) {
          ap_int<A_BITS + B_BITS> product[LANES];  // exact: at most 2^30 in magnitude
#pragma HLS ARRAY_PARTITION variable = product complete
          for (int u = 0; u < LANES; ++u) product[u] = ap_int<A_BITS + B_BITS>(a[v]) * b[jc][u];
          for (int u = 0; u < LANES && jc * LANES + u < dim_j; ++u) {
#pragma HLS PIPELINE II = 1
            out.write(to_word<A_BITS + B_BITS>(product[u]));
          }
        }
    }
  }
};

}  // namespace tt
}  // namespace codesign

#endif  // CODESIGN_TT_H
