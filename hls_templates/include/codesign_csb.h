// codesign_csb.h -- the sparse-CSB training PE as synthesizable HLS C++ (codesign, Apache-2.0).
//
// One stream processor for the three training operations of a kernel-wise
// pruned layer stored as compressed sparse blocks, plus the weight update:
// FP (operator-sparse forward), EB (the same datapath on the transposed
// storage), WG (result-sparse weight gradient) and UPD (24-bit buffer update).
// It implements docs/csb.md bit for bit, as a template over the PE parameters
// (codesign::csb::pe<BLOCK_ROWS, BLOCK_COLS, K, OUT_H, OUT_W, BATCH, PARALLEL,
// ACC_BITS, MAX_STRIDE, PACKED, STREAM_BITS, LOSS>). A generated top is a thin wrapper:
//
//   void csb_kernel(hls::stream<ap_uint<STREAM_BITS> > &in, hls::stream<ap_uint<STREAM_BITS> > &out) {
//     codesign::csb::pe<...>::process(in, out);   // one transaction per call
//   }
//
// Structure (paper Sec. 5.2): the index byte {y, x} of the current entry
// selects the channel, i.e. the high address bits of the source and
// destination buffers; counters (entry e, tap (ky, kx), position group g)
// generate the low address bits. EB is FP with x and y exchanged by a
// multiplexer: both step over the output positions, FP gathering from and EB
// scattering to the input position (s*oy + ky, s*ox + kx) at stride s (1, or 2
// with header flag S2 on a MAX_STRIDE 2 build, whose buffers hold that tile),
// over the K x K taps or, with header flag K1, the one tap of a 1 x 1 kernel.
//
// Intended cycle behaviour (what the pragmas ask of Vitis HLS; not measured
// here, Vitis HLS is not part of the test environment):
//   * loading: one stream beat per cycle (II=1): STREAM_BITS / 8 codes, or
//     STREAM_BITS / 32 accumulator, gradient or buffer words (every section
//     from a new beat, docs/csb.md "Wide streams");
//   * FP/EB: one (entry, tap, position group) step per cycle, II=1, in one
//     flattened loop of nnz * K*K * ceil(OUT_POS / PARALLEL) steps of PARALLEL *
//     BATCH MACs: every buffer's lane dimension is fully partitioned and the
//     accumulators' position dimension cyclically by PARALLEL, so FP's P
//     destinations g*P + p sit in distinct banks. An accumulator is updated
//     once per ceil(OUT_POS / PARALLEL) steps; where that is shorter than the
//     read-add-write latency (a 1x1 FC tile) HLS stretches the interval. The
//     P groups' input-tile accesses (FP/WG reads, EB writes) are not bank
//     aligned in general (P > 1 with K > 1, or stride 2); HLS adds cycles.
//   * WG: one (entry, tap, position group) step per cycle, II=1: P groups each
//     add a BATCH-lane dot product (exact, < 2^19) into a register partial;
//     the P partials are merged into G[e][t] at the last group step of the
//     tap (a chain of P saturating adders, latency only).
//   * PACKED: FP and EB take two lanes' products from one 25 x 8 multiplication
//     (pair_products: one DSP slice); WG a step in II=2, the RTL's schedule,
//     which leaves Vitis room to share its BATCH products a group over BATCH/2
//     multipliers (not measured here). mac_block and wg_block are separate
//     loops: their multipliers are shared only where Vitis shares them.
//   * UPD: one beat of gradient words per cycle, updated as they arrive (II=1).
//   * output: one beat per cycle, the status a beat of its own first.
//
// Numbers: operands are signed 8-bit codes; products are exact; every addition into an accumulator saturates to
// ACC_BITS bits, in the contract's order (FP/EB: for e, for t, per accumulator; WG: per group in increasing
// position order, then groups 0..P-1 at write-back). UPD rounds the exact sum B - G * 2^-s once to the buffer
// grid, ties to even, then saturates to 24 bits. Words narrower than 32 bits are read from their low bits and
// written sign-extended.
//
// Synthesis notes: only ap_uint/ap_int arithmetic, no floating point, no dynamic memory, no recursion; buffers are
// static arrays sized by the template parameters; constant divisors only. C++11, for HLS and any testbench compiler.
#ifndef CODESIGN_CSB_H
#define CODESIGN_CSB_H

#include <ap_int.h>
#include <hls_stream.h>

#include "codesign_constants.h"  // WORD_BITS and the status codes
#include "codesign_csb_loss.h"   // LOSS (element-wise op 3)

namespace codesign {
namespace csb {

// Header opcodes, numbered as docs/csb.md numbers them (the status words: codesign_constants.h).
enum { OP_FP = 0, OP_EB = 1, OP_WG = 2, OP_UPD = 3 };
// Element-wise opcodes (flag EW): SELECT keeps v where z > 0, SHR shifts right (floor), RELU keeps v where v > 0,
// LOSS turns a tile of logits into the loss gradient's codes (codesign_csb_loss.h).
enum { EW_SELECT = 0, EW_SHR = 1, EW_RELU = 2, EW_LOSS = 3 };
// Header flags (docs/csb.md, "Flags and element-wise operations", "Stride 2", "Kernel 1"). S2: FP, EB, WG at
// stride 2; K1: FP, EB, WG, UPD as on this PE built with kernel 1. HOLD keeps an FP, EB or WG result in the PE
// (the status goes out alone); CARRY starts the next one's sums from it.
enum { FLAG_ZERO = 1 << 2, FLAG_G_FIRST = 1 << 3, FLAG_LEFT = 1 << 4, FLAG_EW = 1 << 5, FLAG_HOLD = 1 << 6,
       FLAG_CARRY = 1 << 7, FLAG_S2 = 1 << 13, FLAG_K1 = 1 << 14 };

// Header fields: op [1:0], flags [7:2], shift [12:8], S2 [13], K1 [14], nnz [24:16]; every other bit is reserved.
const unsigned FLAG_BITS = 0xFCu | FLAG_S2 | FLAG_K1;
const unsigned HEADER_FIELDS_MASK = 0x3u | FLAG_BITS | (0x1Fu << 8) | (0x1FFu << 16);
const int COUNT_FIELD_MAX = 0x1FF;  // the 9-bit nnz / element count field

const int CODE_BITS = 8;      // operand codes
const int PRODUCT_BITS = 16;  // |code * code| <= 2^14
const int LANE_SUM_BITS = 21; // 16 lanes * 2^14 = 2^18, signed, with a spare bit
const int BUFFER_BITS = 24;   // weight buffer words (8-bit compute part on top)

template <int A, int B>
struct max_of {
  static const int value = A > B ? A : B;
};

// v clamped to the signed range of OUT bits; v's type must be wider than OUT.
template <int OUT, int W>
inline ap_int<OUT> saturate(ap_int<W> v) {
#pragma HLS INLINE
  const ap_int<W> high = (ap_int<W>(1) << (OUT - 1)) - 1;
  const ap_int<W> low = -(ap_int<W>(1) << (OUT - 1));
  if (v > high) return ap_int<OUT>(high);
  if (v < low) return ap_int<OUT>(low);
  return ap_int<OUT>(v);
}

// acc + term saturated to ACC_BITS: one accumulator addition of the contract.
template <int ACC_BITS, int TERM_BITS>
inline ap_int<ACC_BITS> sat_add(ap_int<ACC_BITS> acc, ap_int<TERM_BITS> term) {
#pragma HLS INLINE
  typedef ap_int<max_of<ACC_BITS, TERM_BITS>::value + 1> sum_t;  // the exact sum
  return saturate<ACC_BITS>(sum_t(sum_t(acc) + sum_t(term)));
}

// A signed value from the low BITS bits of a stream word (higher bits ignored).
template <int BITS>
inline ap_int<BITS> low_signed(ap_uint<WORD_BITS> word) {
#pragma HLS INLINE
  ap_int<BITS> value;
  value.range(BITS - 1, 0) = word.range(BITS - 1, 0);
  return value;
}

// A signed value written sign-extended to a 32-bit stream word.
template <int BITS>
inline ap_uint<WORD_BITS> sign_extend(ap_int<BITS> value) {
#pragma HLS INLINE
  const ap_int<WORD_BITS> wide = value;
  ap_uint<WORD_BITS> word;
  word.range(WORD_BITS - 1, 0) = wide.range(WORD_BITS - 1, 0);
  return word;
}

// Two codes' products with one shared code w from one 25 x 8 multiplication (a DSP slice; docs/csb.md, "Two
// products a DSP slice"): p = (hi * 2^16 + lo) * w. lo * w is p's low 16 bits (|lo * w| <= 2^14), hi * w its
// high part plus the borrow a negative low product took from it.
inline void pair_products(ap_int<CODE_BITS> w, ap_int<CODE_BITS> lo, ap_int<CODE_BITS> hi,
                          ap_int<PRODUCT_BITS> &lo_w, ap_int<PRODUCT_BITS> &hi_w) {
#pragma HLS INLINE
  const ap_int<25> pair = (ap_int<25>(hi) << 16) + ap_int<25>(lo);
  const ap_int<33> p = pair * w;
  lo_w.range(PRODUCT_BITS - 1, 0) = p.range(15, 0);
  hi_w = ap_int<PRODUCT_BITS>(p.range(31, 16)) + ap_int<PRODUCT_BITS>(p[15]);
}

// UPD on one buffer word: sat24(rne((b * 2^s - g) / 2^s)), computed exactly.
// |b * 2^s| < 2^54 and |g| <= 2^31, so the numerator fits 57 bits.
inline ap_int<BUFFER_BITS> update_word(ap_int<BUFFER_BITS> b, ap_int<WORD_BITS> g, ap_uint<5> shift) {
#pragma HLS INLINE
  typedef ap_int<58> wide_t;
  const unsigned s = shift.to_uint();
  const wide_t numerator = (wide_t(b) << s) - wide_t(g);
  wide_t quotient = numerator >> s;  // floor (arithmetic shift)
  const wide_t remainder = numerator - (quotient << s);  // 0 .. 2^s - 1
  if (s != 0) {
    const wide_t half = wide_t(1) << (s - 1);
    if (remainder > half || (remainder == half && quotient[0] == 1)) quotient += 1;
  }
  return saturate<BUFFER_BITS>(quotient);
}

// LEFT: the gradient times 2^s, saturated to 32 bits (exact: |g * 2^s| < 2^63).
inline ap_int<WORD_BITS> shift_left_saturate(ap_int<WORD_BITS> g, ap_uint<5> shift) {
#pragma HLS INLINE
  const ap_int<64> wide = ap_int<64>(g) << shift.to_uint();
  return saturate<WORD_BITS>(wide);
}

template <int BLOCK_ROWS, int BLOCK_COLS, int K, int OUT_H, int OUT_W, int BATCH, int PARALLEL, int ACC_BITS,
          int MAX_STRIDE = 1, int PACKED = 0, int STREAM_BITS = 32, int LOSS = 0>
struct pe {
  static_assert(BLOCK_ROWS >= 1 && BLOCK_ROWS <= 16, "block_rows must be 1..16 (4-bit index field)");
  static_assert(BLOCK_COLS >= 1 && BLOCK_COLS <= 16, "block_cols must be 1..16 (4-bit index field)");
  static_assert(K >= 1 && K <= 7, "kernel must be 1..7");
  static_assert(OUT_H >= 1 && OUT_W >= 1, "the output tile must be at least 1 x 1");
  static_assert(BATCH >= 1 && BATCH <= 16, "batch lanes must be 1..16 (exact lane sums below 2^19)");
  static_assert(PARALLEL >= 1 && PARALLEL <= 8, "parallel groups must be 1..8");
  static_assert(ACC_BITS >= 16 && ACC_BITS <= 32, "acc_bits must be 16..32");
  static_assert(MAX_STRIDE == 1 || MAX_STRIDE == 2, "max_stride must be 1 or 2");
  static_assert(PACKED == 0 || (PACKED == 1 && BATCH % 2 == 0), "packed needs an even number of lanes");
  static_assert(STREAM_BITS == 32 || STREAM_BITS == 64 || STREAM_BITS == 128, "stream_bits must be 32, 64 or 128");
  static const int PARTS = STREAM_BITS / WORD_BITS;  // 32-bit words a beat
  static const int BEAT_BYTES = STREAM_BITS / 8;     // codes a beat
  static_assert(BATCH % PARTS == 0, "a wide stream needs lanes in multiples of its parts (a beat of sums: a position)");
  static const int LANE_STEP = PACKED ? 2 : 1;  // lanes one multiplier serves in FP and EB
  static const int WG_II = PACKED ? 2 : 1;      // cycles a WG step takes on BATCH / LANE_STEP multipliers

  static const int KK = K * K;
  static const int OUT_POS = OUT_H * OUT_W;
  // the input tile a buffer holds: the kernel's at the largest stride
  static const int IN_POS_MAX = (MAX_STRIDE * (OUT_H - 1) + K) * (MAX_STRIDE * (OUT_W - 1) + K);
  static const int MAX_NNZ = BLOCK_ROWS * BLOCK_COLS;
  static const int ACC_CH = max_of<BLOCK_ROWS, BLOCK_COLS>::value;  // FP: rows, EB: columns
  static const int POS_GROUPS = (OUT_POS + PARALLEL - 1) / PARALLEL;  // position-group steps per tap (FP, EB, WG)
  // elements of one element-wise transaction: the wide buffer's words, at most the count field's
  static const int EW_CAPACITY = MAX_NNZ * KK < COUNT_FIELD_MAX ? MAX_NNZ * KK : COUNT_FIELD_MAX;

  typedef ap_uint<WORD_BITS> word_t;
  typedef ap_uint<STREAM_BITS> beat_t;
  typedef ap_int<CODE_BITS> code_t;
  typedef ap_int<ACC_BITS> acc_t;
  typedef ap_int<BUFFER_BITS> buffer_t;
  typedef ap_uint<8> index_t;

  // Part q (0 = least significant) of a beat.
  static word_t part(const beat_t &beat, int q) {
#pragma HLS INLINE
    return beat.range(WORD_BITS * q + WORD_BITS - 1, WORD_BITS * q);
  }

  // ---------------------------------------------------------------- counters
  // (c, p, l) on to the next element of a section ordered (channel, position, lane), `pos` positions a channel.
  static void next_element(int &c, int &p, int &l, int pos) {
#pragma HLS INLINE
    if (++l < BATCH) return;
    l = 0;
    if (++p == pos) {
      p = 0;
      ++c;
    }
  }

  // The address counters of FP, EB and WG: position group g, then tap t = (ky, kx) of a k x k kernel, then entry e.
  static void next_step(int k, int &e, int &t, int &ky, int &kx, int &g) {
#pragma HLS INLINE
    if (++g < POS_GROUPS) return;
    g = 0;
    if (++kx == k) {
      kx = 0;
      ++ky;
    }
    if (++t == k * k) {
      t = 0;
      ky = 0;
      ++e;
    }
  }

  // The input position (s*oy + ky, s*ox + kx), row-major in the tile of a k x k kernel at stride s (2 with s2),
  // that output position opos reads (FP, WG) or writes (EB) through tap (ky, kx).
  static int in_position(bool s2, int k, int opos, int ky, int kx) {
#pragma HLS INLINE
    const int oy = opos / OUT_W, ox = opos % OUT_W, s = s2 ? 2 : 1;
    return (s * oy + ky) * (s * (OUT_W - 1) + k) + s * ox + kx;
  }

  // ---------------------------------------------------------------- loaders
  // Index bytes: stored, and checked against the block (status 3 when outside).
  static bool load_index(hls::stream<beat_t> &in, int nnz, index_t index[MAX_NNZ]) {
    bool outside = false;
    const int beats = (nnz + BEAT_BYTES - 1) / BEAT_BYTES;
  load_index_beats:
    for (int w = 0; w < beats; ++w) {
#pragma HLS PIPELINE II = 1
#pragma HLS LOOP_TRIPCOUNT min = 0 max = (MAX_NNZ + BEAT_BYTES - 1) / BEAT_BYTES
      const beat_t beat = in.read();
      for (int j = 0; j < BEAT_BYTES; ++j) {
#pragma HLS UNROLL
        const int e = BEAT_BYTES * w + j;
        if (e < nnz) {
          const index_t byte = beat.range(8 * j + 7, 8 * j);
          index[e] = byte;
          const int y = byte.range(7, 4).to_uint(), x = byte.range(3, 0).to_uint();
          if (y >= BLOCK_ROWS || x >= BLOCK_COLS) outside = true;
        }
      }
    }
    return outside;
  }

  // CH * pos * BATCH codes ordered (channel, position, lane), BEAT_BYTES to a beat, into a buffer of POS >= pos
  // positions.
  template <int CH, int POS>
  static void load_codes(hls::stream<beat_t> &in, int pos, code_t buf[CH][POS][BATCH]) {
    const int count = CH * pos * BATCH;
    int c = 0, p = 0, l = 0;
  load_codes_beats:
    for (int w = 0; w < (count + BEAT_BYTES - 1) / BEAT_BYTES; ++w) {
#pragma HLS PIPELINE II = 1
#pragma HLS LOOP_TRIPCOUNT min = 0 max = (CH * POS * BATCH + BEAT_BYTES - 1) / BEAT_BYTES
      const beat_t beat = in.read();
      for (int j = 0; j < BEAT_BYTES; ++j) {
#pragma HLS UNROLL
        if (BEAT_BYTES * w + j < count) {
          buf[c][p][l] = code_t(beat.range(8 * j + 7, 8 * j));
          next_element(c, p, l, pos);
        }
      }
    }
  }

  // CH * pos * BATCH accumulator words ordered (channel, position, lane), PARTS to a beat (whole beats: BATCH is a
  // multiple of PARTS).
  template <int CH>
  static void load_accs(hls::stream<beat_t> &in, int pos, acc_t buf[ACC_CH][IN_POS_MAX][BATCH]) {
    int c = 0, p = 0, l = 0;
  load_accs_beats:
    for (int w = 0; w < CH * pos * BATCH / PARTS; ++w) {
#pragma HLS PIPELINE II = 1
#pragma HLS LOOP_TRIPCOUNT min = 0 max = CH * IN_POS_MAX * BATCH / PARTS
      const beat_t beat = in.read();
      for (int q = 0; q < PARTS; ++q) {
#pragma HLS UNROLL
        buf[c][p][l] = low_signed<ACC_BITS>(part(beat, q));
        next_element(c, p, l, pos);
      }
    }
  }

  // ZERO: the initial accumulators, which the transaction leaves out, start at 0.
  template <int CH>
  static void clear_accs(int pos, acc_t buf[ACC_CH][IN_POS_MAX][BATCH]) {
  clear_accs_loop:
    for (int c = 0; c < CH; ++c)
      for (int p = 0; p < pos; ++p)
        for (int l = 0; l < BATCH; ++l) buf[c][p][l] = 0;
  }

  // FP/EB kernels: nnz * KK codes placed in the top 8 bits of the 24-bit buffer.
  static void load_weights(hls::stream<beat_t> &in, int count, buffer_t weights[MAX_NNZ * KK]) {
  load_weights_beats:
    for (int w = 0; w < (count + BEAT_BYTES - 1) / BEAT_BYTES; ++w) {
#pragma HLS PIPELINE II = 1
#pragma HLS LOOP_TRIPCOUNT min = 0 max = (MAX_NNZ * KK + BEAT_BYTES - 1) / BEAT_BYTES
      const beat_t beat = in.read();
      for (int j = 0; j < BEAT_BYTES; ++j) {
#pragma HLS UNROLL
        if (BEAT_BYTES * w + j < count) {
          buffer_t value = 0;
          value.range(BUFFER_BITS - 1, BUFFER_BITS - CODE_BITS) = beat.range(8 * j + 7, 8 * j);
          weights[BEAT_BYTES * w + j] = value;
        }
      }
    }
  }

  // `count` words of BITS bits (read from their low bits), PARTS to a beat, the last beat's unused parts ignored:
  // WG's initial gradients G[e][t] (ACC_BITS), UPD's buffer words (BUFFER_BITS), an element-wise op's values.
  template <int BITS>
  static void load_words(hls::stream<beat_t> &in, int count, ap_int<BITS> words[MAX_NNZ * KK]) {
  load_words_beats:
    for (int w = 0; w < (count + PARTS - 1) / PARTS; ++w) {
#pragma HLS PIPELINE II = 1
#pragma HLS LOOP_TRIPCOUNT min = 0 max = (MAX_NNZ * KK + PARTS - 1) / PARTS
      const beat_t beat = in.read();
      for (int q = 0; q < PARTS; ++q) {
#pragma HLS UNROLL
        if (PARTS * w + q < count) words[PARTS * w + q] = low_signed<BITS>(part(beat, q));
      }
    }
  }

  // WG with ZERO: the initial gradients start at 0.
  static void clear_grads(int count, acc_t grads[MAX_NNZ * KK]) {
  clear_grads_loop:
    for (int i = 0; i < count; ++i) {
#pragma HLS PIPELINE II = 1
#pragma HLS LOOP_TRIPCOUNT min = 0 max = MAX_NNZ * KK
      grads[i] = 0;
    }
  }

  // UPD: the 24-bit buffer words, then the 32-bit gradients, each applied as it arrives.
  // With LEFT the gradient is shifted left by `shift` (32-bit saturation) and the update runs at shift 0.
  static void load_and_update(hls::stream<beat_t> &in, int count, ap_uint<5> shift, bool left,
                              buffer_t buffer[MAX_NNZ * KK]) {
    load_words<BUFFER_BITS>(in, count, buffer);
  update_beats:
    for (int w = 0; w < (count + PARTS - 1) / PARTS; ++w) {
#pragma HLS PIPELINE II = 1
#pragma HLS LOOP_TRIPCOUNT min = 0 max = (MAX_NNZ * KK + PARTS - 1) / PARTS
      const beat_t beat = in.read();
      for (int q = 0; q < PARTS; ++q) {
#pragma HLS UNROLL
        const int i = PARTS * w + q;
        if (i < count) {
          const ap_int<WORD_BITS> g = low_signed<WORD_BITS>(part(beat, q));
          buffer[i] = left ? update_word(buffer[i], shift_left_saturate(g, shift), 0)
                           : update_word(buffer[i], g, shift);
        }
      }
    }
  }

  // ---------------------------------------------------------------- datapaths
  // FP (transposed = false) and EB (transposed = true): operator-sparse MACs.
  // Both step over the output positions opos = g * PARALLEL + p of the tile,
  // so EB spends no step on the halo: FP gathers ACC[y][opos] += w * X[x][ipos],
  // EB scatters ACC[x][ipos] += w * DY[y][opos], ipos = in_position(s2, opos,
  // tap). Within one (entry, tap) the P targets are distinct, so every
  // accumulator still sees its additions in the contract's (entry, tap) order.
  static void mac_block(bool transposed, bool s2, int k, int nnz, const index_t index[MAX_NNZ],
                        const buffer_t weights[MAX_NNZ * KK], const code_t xbuf[BLOCK_COLS][IN_POS_MAX][BATCH],
                        const code_t dybuf[BLOCK_ROWS][OUT_POS][BATCH], acc_t accbuf[ACC_CH][IN_POS_MAX][BATCH]) {
    const int steps = nnz * k * k * POS_GROUPS;
    int e = 0, t = 0, ky = 0, kx = 0, g = 0;  // the address-generation counters
  mac_steps:
    for (int step = 0; step < steps; ++step) {
#pragma HLS PIPELINE II = 1
#pragma HLS LOOP_TRIPCOUNT min = 0 max = MAX_NNZ * KK * POS_GROUPS
      const index_t entry = index[e];
      const int y = entry.range(7, 4).to_int();
      const int x = entry.range(3, 0).to_int();
      const int dch = transposed ? x : y;  // the x/y exchange multiplexer
      const int sch = transposed ? y : x;
      const code_t w = code_t(weights[e * k * k + t].range(BUFFER_BITS - 1, BUFFER_BITS - CODE_BITS));
      for (int p = 0; p < PARALLEL; ++p) {
#pragma HLS UNROLL
        const int opos = g * PARALLEL + p;
        if (opos < OUT_POS) {
          const int ipos = in_position(s2, k, opos, ky, kx);  // opos shifted by the tap
          const int spos = transposed ? opos : ipos;
          const int dpos = transposed ? ipos : opos;
          for (int l = 0; l < BATCH; l += LANE_STEP) {
#pragma HLS UNROLL
            const int l1 = PACKED ? l + 1 : l;  // the pair's second lane
            const code_t src = transposed ? dybuf[sch][spos][l] : xbuf[sch][spos][l];
            ap_int<PRODUCT_BITS> product, next;
            if (PACKED) pair_products(w, src, transposed ? dybuf[sch][spos][l1] : xbuf[sch][spos][l1], product, next);
            else product = w * src;
            accbuf[dch][dpos][l] = sat_add<ACC_BITS, PRODUCT_BITS>(accbuf[dch][dpos][l], product);
            if (PACKED) accbuf[dch][dpos][l1] = sat_add<ACC_BITS, PRODUCT_BITS>(accbuf[dch][dpos][l1], next);
          }
        }
      }
      next_step(k, e, t, ky, kx, g);
    }
  }

  // WG: result-sparse. Per (entry, tap): P group partials over the output
  // positions (opos % P == p, increasing), then merged into G in group order.
  static void wg_block(bool s2, int k, int nnz, const index_t index[MAX_NNZ],
                       const code_t xbuf[BLOCK_COLS][IN_POS_MAX][BATCH], const code_t dybuf[BLOCK_ROWS][OUT_POS][BATCH],
                       acc_t grads[MAX_NNZ * KK]) {
    acc_t partial[PARALLEL];
#pragma HLS ARRAY_PARTITION variable = partial complete
    const int steps = nnz * k * k * POS_GROUPS;
    int e = 0, t = 0, ky = 0, kx = 0, g = 0;
  wg_steps:
    for (int step = 0; step < steps; ++step) {
#pragma HLS PIPELINE II = WG_II
#pragma HLS LOOP_TRIPCOUNT min = 0 max = MAX_NNZ * KK * POS_GROUPS
      const index_t entry = index[e];
      const int y = entry.range(7, 4).to_int();
      const int x = entry.range(3, 0).to_int();
      for (int p = 0; p < PARALLEL; ++p) {
#pragma HLS UNROLL
        const int opos = g * PARALLEL + p;
        ap_int<LANE_SUM_BITS> lanes = 0;  // exact: at most 16 * 2^14
        if (opos < OUT_POS) {
          const int ipos = in_position(s2, k, opos, ky, kx);
          for (int l = 0; l < BATCH; ++l) {
#pragma HLS UNROLL
            const ap_int<PRODUCT_BITS> product = xbuf[x][ipos][l] * dybuf[y][opos][l];
            lanes += product;
          }
        }
        partial[p] = sat_add<ACC_BITS, LANE_SUM_BITS>(g == 0 ? acc_t(0) : partial[p], lanes);
      }
      if (g == POS_GROUPS - 1) {  // write-back: G = sat(...sat(G + part[0])... + part[P-1])
        acc_t value = grads[e * k * k + t];
        for (int p = 0; p < PARALLEL; ++p) {
#pragma HLS UNROLL
          value = sat_add<ACC_BITS, ACC_BITS>(value, partial[p]);
        }
        grads[e * k * k + t] = value;
      }
      next_step(k, e, t, ky, kx, g);
    }
  }

  // ---------------------------------------------------------------- writers
  // The sums ordered (channel, position, lane), PARTS to a beat (whole beats: BATCH is a multiple of PARTS).
  template <int CH>
  static void write_accs(hls::stream<beat_t> &out, int pos, const acc_t buf[ACC_CH][IN_POS_MAX][BATCH]) {
    int c = 0, p = 0, l = 0;
  write_accs_beats:
    for (int w = 0; w < CH * pos * BATCH / PARTS; ++w) {
#pragma HLS PIPELINE II = 1
#pragma HLS LOOP_TRIPCOUNT min = 0 max = CH * IN_POS_MAX * BATCH / PARTS
      beat_t beat = 0;
      for (int q = 0; q < PARTS; ++q) {
#pragma HLS UNROLL
        beat.range(WORD_BITS * q + WORD_BITS - 1, WORD_BITS * q) = sign_extend<ACC_BITS>(buf[c][p][l]);
        next_element(c, p, l, pos);
      }
      out.write(beat);
    }
  }

  // `count` words, sign-extended, PARTS to a beat, the last beat's unused parts 0.
  template <int BITS>
  static void write_words(hls::stream<beat_t> &out, int count, const ap_int<BITS> buf[MAX_NNZ * KK]) {
  write_words_beats:
    for (int w = 0; w < (count + PARTS - 1) / PARTS; ++w) {
#pragma HLS PIPELINE II = 1
#pragma HLS LOOP_TRIPCOUNT min = 0 max = (MAX_NNZ * KK + PARTS - 1) / PARTS
      beat_t beat = 0;
      for (int q = 0; q < PARTS; ++q) {
#pragma HLS UNROLL
        if (PARTS * w + q < count)
          beat.range(WORD_BITS * q + WORD_BITS - 1, WORD_BITS * q) = sign_extend<BITS>(buf[PARTS * w + q]);
      }
      out.write(beat);
    }
  }

  // Element-wise ops (flag EW), n elements: SELECT reads v then z (ACC_BITS values) and sends v where z > 0,
  // else 0; RELU is SELECT with z = v, read once; SHR reads 24-bit words and sends each shifted right by `shift`
  // (arithmetic: floor).
  // SELECT with CARRY (`held`): v is already in `values` (held_sums), only z is read.
  static void elementwise(hls::stream<beat_t> &in, hls::stream<beat_t> &out, int op, ap_uint<5> shift, int n,
                          bool held, acc_t values[MAX_NNZ * KK], buffer_t words[MAX_NNZ * KK]) {
    if (op != EW_SHR) {
      if (!held) load_words<ACC_BITS>(in, n, values);
    select_beats:
      for (int w = 0; w < (n + PARTS - 1) / PARTS; ++w) {
#pragma HLS PIPELINE II = 1
#pragma HLS LOOP_TRIPCOUNT min = 0 max = (MAX_NNZ * KK + PARTS - 1) / PARTS
        const beat_t beat = op == EW_RELU ? beat_t(0) : in.read();
        for (int q = 0; q < PARTS; ++q) {
#pragma HLS UNROLL
          const int i = PARTS * w + q;
          if (i < n) {
            const acc_t z = op == EW_RELU ? values[i] : low_signed<ACC_BITS>(part(beat, q));
            if (!(z > 0)) values[i] = 0;
          }
        }
      }
      out.write(beat_t(STATUS_OK));
      write_words<ACC_BITS>(out, n, values);
      return;
    }
  shr_beats:
    for (int w = 0; w < (n + PARTS - 1) / PARTS; ++w) {
#pragma HLS PIPELINE II = 1
#pragma HLS LOOP_TRIPCOUNT min = 0 max = (MAX_NNZ * KK + PARTS - 1) / PARTS
      const beat_t beat = in.read();
      for (int q = 0; q < PARTS; ++q) {
#pragma HLS UNROLL
        if (PARTS * w + q < n) words[PARTS * w + q] = low_signed<BUFFER_BITS>(part(beat, q)) >> shift.to_uint();
      }
    }
    out.write(beat_t(STATUS_OK));
    write_words<BUFFER_BITS>(out, n, words);
  }

  // The n FP or EB sums the PE holds (`pos` positions a channel) in stream order (channel, position, lane), as a
  // SELECT's v; n is their count, checked to fit `values` (n <= EW_CAPACITY) first.
  static void held_sums(const acc_t buf[ACC_CH][IN_POS_MAX][BATCH], int n, int pos, acc_t values[MAX_NNZ * KK]) {
    int c = 0, p = 0, l = 0;
  held_sums_words:
    for (int w = 0; w < n; ++w) {
#pragma HLS PIPELINE II = 1
#pragma HLS LOOP_TRIPCOUNT min = 0 max = EW_CAPACITY
      values[w] = buf[c][p][l];
      next_element(c, p, l, pos);
    }
  }

  // ---------------------------------------------------------------- one transaction
  // Reads one transaction from `in` and writes the status word, then (status 0,
  // no HOLD) the result words. Status 1 and 2 are decided from the header (and
  // what the transaction before held) and nothing more is read; status 3 is
  // sent after the whole transaction is read. Only an accepted HOLD leaves
  // anything held: its sums stay in accbuf (FP, EB) or grads (WG).
  static void process(hls::stream<beat_t> &in, hls::stream<beat_t> &out) {
    static index_t index[MAX_NNZ];
    static buffer_t weights[MAX_NNZ * KK];  // FP/EB kernels (top 8 bits) or UPD buffer words
    static acc_t grads[MAX_NNZ * KK];       // WG gradients
    static code_t xbuf[BLOCK_COLS][IN_POS_MAX][BATCH];
    static code_t dybuf[BLOCK_ROWS][OUT_POS][BATCH];
    static acc_t accbuf[ACC_CH][IN_POS_MAX][BATCH];
    static bool held = false, held_s2 = false, held_k1 = false;  // what the transaction before left: an op's sums,
    static int held_op = 0, held_nnz = 0;                         // their stride, kernel and (WG) nnz
#pragma HLS ARRAY_PARTITION variable = xbuf complete dim = 3
#pragma HLS ARRAY_PARTITION variable = dybuf complete dim = 3
#pragma HLS ARRAY_PARTITION variable = accbuf complete dim = 3
#pragma HLS ARRAY_PARTITION variable = accbuf cyclic factor = PARALLEL dim = 2

    const beat_t head = in.read();  // the header beat: its parts above the first must be 0
    beat_t upper = head;
    upper.range(WORD_BITS - 1, 0) = 0;
    const word_t header = head.range(WORD_BITS - 1, 0);
    const int op = header.range(1, 0).to_int();
    const int nnz = header.range(24, 16).to_int();
    const bool s2 = (header.to_uint() & FLAG_S2) != 0, k1 = K > 1 && (header.to_uint() & FLAG_K1) != 0;
    const bool carry_ok = held && held_op == op && held_s2 == s2 && held_k1 == k1 && (op != OP_WG || held_nnz == nnz);
    // SELECT with CARRY masks held FP or EB sums, one element per sum (EB's: the input tile they were held at)
    const int held_pos = held_op == OP_FP ? OUT_POS : in_tile(held_s2, held_k1 ? 1 : K);  // positions of a channel
    const bool select_ok = held && ((held_op == OP_FP && nnz == BLOCK_ROWS * OUT_POS * BATCH) ||
                                    (held_op == OP_EB && nnz == BLOCK_COLS * held_pos * BATCH));
    const int status = upper != 0 ? refuse(out, STATUS_BAD_HEADER)
                                  : transaction(in, out, header, carry_ok, select_ok, held_pos, index, weights,
                                                grads, xbuf, dybuf, accbuf);
    held = status == STATUS_OK && (header.to_uint() & FLAG_HOLD) != 0;  // anything else drops the sums
    held_op = op;
    held_nnz = nnz;
    held_s2 = s2;
    held_k1 = k1;
  }

  // Positions of the input tile of a k x k kernel at stride 2 (s2) or 1.
  static int in_tile(bool s2, int k) { return ((s2 ? 2 : 1) * (OUT_H - 1) + k) * ((s2 ? 2 : 1) * (OUT_W - 1) + k); }

  // One transaction on the PE's buffers: returns its status (the words are written).
  static int transaction(hls::stream<beat_t> &in, hls::stream<beat_t> &out, word_t header, bool carry_ok,
                         bool select_ok, int held_pos, index_t index[MAX_NNZ], buffer_t weights[MAX_NNZ * KK],
                         acc_t grads[MAX_NNZ * KK], code_t xbuf[BLOCK_COLS][IN_POS_MAX][BATCH],
                         code_t dybuf[BLOCK_ROWS][OUT_POS][BATCH], acc_t accbuf[ACC_CH][IN_POS_MAX][BATCH]) {
    const int op = header.range(1, 0).to_int();
    const ap_uint<5> shift = header.range(12, 8);
    const int nnz = header.range(24, 16).to_int();
    const unsigned flags = header.to_uint() & FLAG_BITS;
    const bool zero = (flags & FLAG_ZERO) != 0, g_first = (flags & FLAG_G_FIRST) != 0;
    const bool left = (flags & FLAG_LEFT) != 0, hold = (flags & FLAG_HOLD) != 0, carry = (flags & FLAG_CARRY) != 0;
    if ((header & word_t(~HEADER_FIELDS_MASK)) != 0) return refuse(out, STATUS_BAD_HEADER);
    if (flags & FLAG_EW) {  // S2 and K1 are flags an element-wise op does not take
      typedef loss_unit<BATCH, ACC_BITS, STREAM_BITS, EW_CAPACITY> loss_t;
      if (op == EW_LOSS && (!LOSS || flags != FLAG_EW || nnz == 0)) return refuse(out, STATUS_BAD_HEADER);
      if (op == EW_LOSS) return nnz > loss_t::MAX_CLASSES ? refuse(out, STATUS_NNZ) : loss_t::run(in, out, nnz, shift);
      const bool sums = flags == (FLAG_EW | FLAG_CARRY) && op == EW_SELECT;
      if (op > EW_RELU || (flags != FLAG_EW && !sums) || (shift != 0 && op != EW_SHR) || (sums && !select_ok))
        return refuse(out, STATUS_BAD_HEADER);
      if (nnz > EW_CAPACITY) return refuse(out, STATUS_NNZ);
      if (sums) held_sums(accbuf, nnz, held_pos, grads);
      elementwise(in, out, op, shift, nnz, sums, grads, weights);
      return STATUS_OK;
    }
    if ((shift != 0 && op != OP_UPD) || (zero && op == OP_UPD) || (g_first && op != OP_WG) ||
        (left && op != OP_UPD) || ((hold || carry) && op == OP_UPD) || (carry && (zero || g_first || !carry_ok)) ||
        ((flags & FLAG_S2) && (op == OP_UPD || MAX_STRIDE < 2)))
      return refuse(out, STATUS_BAD_HEADER);
    if (nnz > MAX_NNZ) return refuse(out, STATUS_NNZ);
    const bool outside = load_index(in, nnz, index);
    const bool s2 = MAX_STRIDE == 2 && (flags & FLAG_S2) != 0;  // a constant false on a stride-1 build
    const int k = (flags & FLAG_K1) ? 1 : K, count = nnz * k * k;
    const int in_pos = in_tile(s2, k);  // X's positions, and EB's sums'
    if (op == OP_FP) {
      load_weights(in, count, weights);
      load_codes<BLOCK_COLS, IN_POS_MAX>(in, in_pos, xbuf);
      if (zero) clear_accs<BLOCK_ROWS>(OUT_POS, accbuf);
      else if (!carry) load_accs<BLOCK_ROWS>(in, OUT_POS, accbuf);
    } else if (op == OP_EB) {
      load_weights(in, count, weights);
      load_codes<BLOCK_ROWS, OUT_POS>(in, OUT_POS, dybuf);
      if (zero) clear_accs<BLOCK_COLS>(in_pos, accbuf);
      else if (!carry) load_accs<BLOCK_COLS>(in, in_pos, accbuf);
    } else if (op == OP_WG) {
      if (zero) clear_grads(count, grads);
      else if (g_first) load_words<ACC_BITS>(in, count, grads);
      load_codes<BLOCK_COLS, IN_POS_MAX>(in, in_pos, xbuf);
      load_codes<BLOCK_ROWS, OUT_POS>(in, OUT_POS, dybuf);
      if (!zero && !g_first && !carry) load_words<ACC_BITS>(in, count, grads);
    } else {
      load_and_update(in, count, shift, left, weights);
    }
    if (outside) return refuse(out, STATUS_INDEX);
    if (op == OP_FP || op == OP_EB) mac_block(op == OP_EB, s2, k, nnz, index, weights, xbuf, dybuf, accbuf);
    if (op == OP_WG) wg_block(s2, k, nnz, index, xbuf, dybuf, grads);
    out.write(beat_t(STATUS_OK));
    if (hold) return STATUS_OK;
    if (op == OP_FP) {
      write_accs<BLOCK_ROWS>(out, OUT_POS, accbuf);
    } else if (op == OP_EB) {
      write_accs<BLOCK_COLS>(out, in_pos, accbuf);
    } else if (op == OP_WG) {
      write_words<ACC_BITS>(out, count, grads);
    } else {
      write_words<BUFFER_BITS>(out, count, weights);
    }
    return STATUS_OK;
  }

  static int refuse(hls::stream<beat_t> &out, int status) {
    out.write(beat_t(status));
    return status;
  }
};

}  // namespace csb
}  // namespace codesign

#endif  // CODESIGN_CSB_H
