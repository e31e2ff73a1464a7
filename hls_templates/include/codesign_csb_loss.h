// codesign_csb_loss.h -- the CSB PE's LOSS transaction (element-wise op 3) as HLS C++ (codesign, Apache-2.0).
//
// After an accepted LOSS header: P (recip_shift in bits 5..0, at most 48; the batch n in 27..16), a label a lane
// (0xFFFFFFFF: no sample) and `classes` rows of BATCH accumulators in; the status, then the loss gradient's
// 8-bit codes row by row out, bit for bit as codesign.numerics.loss_grad.loss_grad_codes (docs/csb.md, "The
// loss on the PE"). Status 3 for reserved bits of P, recip_shift > 48, n = 0 or a label outside the classes,
// after the load.

#ifndef CODESIGN_CSB_LOSS_H
#define CODESIGN_CSB_LOSS_H

#include <ap_int.h>
#include <hls_stream.h>

#include "codesign_constants.h"
#include "codesign_loss_table.h"

namespace codesign {
namespace csb {

template <int BATCH, int ACC_BITS, int STREAM_BITS, int CAPACITY>
struct loss_unit {
  static const int PARTS = STREAM_BITS / WORD_BITS;
  static const int MAX_CLASSES = CAPACITY / BATCH < 32 ? CAPACITY / BATCH : 32;  // classes of one transaction
  static const unsigned P_FIELDS = 0x0FFF003Fu;                                    // recip_shift [5:0], n [27:16]
  static const unsigned NO_SAMPLE = 0xFFFFFFFFu;
  typedef ap_uint<STREAM_BITS> beat_t;
  typedef ap_uint<WORD_BITS> word_t;

  static word_t part(const beat_t &beat, int q) { return beat.range(WORD_BITS * q + WORD_BITS - 1, WORD_BITS * q); }

  // e = 2^16 * 2^(-u / 256) of a logit d below its lane's largest: u = floor(d * log2(e) * 2^8 / 2^logit_frac)
  static ap_uint<17> exp_code(ap_uint<33> d, int exp_shift) {
    const ap_uint<49> u = (ap_uint<49>(d) * ap_uint<17>(loss::LOG2E_Q16)) >> exp_shift;
    const ap_uint<41> whole = u >> loss::EXP_FRAC_BITS;
    if (whole >= loss::EXP_LIMIT) return 0;
    return ap_uint<17>(loss::EXP_TABLE[u.range(loss::EXP_FRAC_BITS - 1, 0).to_uint()]) >> whole.to_uint();
  }

  // round_half_to_even(w / 2^CODE_SHIFT), saturated to a signed 8-bit code
  static ap_int<8> code_of(ap_int<52> w) {
    const ap_int<52> floor = w >> loss::CODE_SHIFT;
    const ap_uint<32> rest = w.range(loss::CODE_SHIFT - 1, 0);
    const ap_uint<32> half = ap_uint<32>(1) << (loss::CODE_SHIFT - 1);
    const ap_int<52> rounded = floor + ((rest > half || (rest == half && floor[0] == 1)) ? 1 : 0);
    if (rounded > 127) return 127;
    if (rounded < -128) return -128;
    return rounded;
  }

  // Reads P, Y and V after the header; writes the status and (status 0) the codes. Returns the status.
  static int run(hls::stream<beat_t> &in, hls::stream<beat_t> &out, int classes, int exp_shift) {
    static ap_int<ACC_BITS> values[CAPACITY];
    static ap_uint<17> exps[CAPACITY];
    ap_int<ACC_BITS> top[BATCH];
    ap_uint<22> sums[BATCH];
    ap_uint<33> recips[BATCH];
    ap_uint<5> labels[BATCH];
    bool no_sample[BATCH];
    const word_t param = part(in.read(), 0);
    const int recip_shift = param.range(5, 0).to_int();
    const int n = param.range(27, 16).to_int();
    bool bad = (param & word_t(~P_FIELDS)) != 0 || recip_shift > loss::RECIP_SHIFT_MAX || n == 0;
  loss_labels:
    for (int w = 0; w < BATCH / PARTS; ++w) {
      const beat_t beat = in.read();
      for (int q = 0; q < PARTS; ++q) {
        const unsigned label = part(beat, q).to_uint();
        labels[PARTS * w + q] = label;
        no_sample[PARTS * w + q] = label == NO_SAMPLE;
        if (label >= unsigned(classes) && label != NO_SAMPLE) bad = true;
      }
    }
  loss_values:
    for (int w = 0; w < classes * BATCH / PARTS; ++w) {
#pragma HLS PIPELINE II = 1
      const beat_t beat = in.read();
      for (int q = 0; q < PARTS; ++q) {
        const int i = PARTS * w + q, lane = i % BATCH;
        const ap_int<ACC_BITS> v = part(beat, q).range(ACC_BITS - 1, 0);
        values[i] = v;
        if (i < BATCH || v > top[lane]) top[lane] = v;
      }
    }
    if (bad) {
      out.write(beat_t(STATUS_INDEX));
      return STATUS_INDEX;
    }
    out.write(beat_t(STATUS_OK));
  loss_exps:
    for (int i = 0; i < classes * BATCH; ++i) {
#pragma HLS PIPELINE II = 1
      const int lane = i % BATCH;
      const ap_uint<33> d = ap_int<ACC_BITS + 1>(top[lane]) - ap_int<ACC_BITS + 1>(values[i]);
      exps[i] = exp_code(d, exp_shift);
      sums[lane] = (i < BATCH ? ap_uint<22>(0) : sums[lane]) + exps[i];
    }
    const ap_uint<49> quotient = (ap_uint<49>(1) << recip_shift) / ap_uint<12>(n);  // floor(2^recip_shift / n)
  loss_recips:
    for (int lane = 0; lane < BATCH; ++lane) recips[lane] = quotient / sums[lane];  // floor(2^recip_shift / (S n))
  loss_codes:
    for (int w = 0; w < classes * BATCH / PARTS; ++w) {
#pragma HLS PIPELINE II = 1
      beat_t beat = 0;
      for (int q = 0; q < PARTS; ++q) {
        const int i = PARTS * w + q, lane = i % BATCH, row = i / BATCH;
        const bool chosen = !no_sample[lane] && labels[lane] == row;
        const ap_int<23> diff = ap_int<23>(exps[i]) - (chosen ? ap_int<23>(sums[lane]) : ap_int<23>(0));
        const ap_int<52> w52 = ap_int<57>(diff) * ap_int<34>(recips[lane]);
        const ap_int<8> code = no_sample[lane] ? ap_int<8>(0) : code_of(w52);
        beat.range(WORD_BITS * q + WORD_BITS - 1, WORD_BITS * q) = ap_uint<WORD_BITS>(ap_int<WORD_BITS>(code));
      }
      out.write(beat);
    }
    return STATUS_OK;
  }
};

}  // namespace csb
}  // namespace codesign

#endif  // CODESIGN_CSB_LOSS_H
