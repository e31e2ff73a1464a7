// codesign_fpmac.h -- bit-level FP-MAC with a run-time fraction width (codesign, Apache-2.0).
//
// The arithmetic of the FB-configurable FP-MAC PE, written once as templates
// over EXP_BITS (E), MAX_FB and ROUNDING and shared by every generated HLS
// kernel. It implements docs/numerics.md ("Run-time fraction width"):
//
//   out = round(round(a * b) + c)   in the format (E, fb), not fused,
//
// on containers of 1 + E + MAX_FB bits, where a value of format (E, fb) is its
// code shifted left by MAX_FB - fb. Rules followed bit for bit:
//   * fb is clamped into [1, MAX_FB] (0 acts as 1, above MAX_FB as MAX_FB);
//   * container fraction bits below fb are ignored on input, zero on output;
//   * subnormals are kept (gradual underflow);
//   * there are no inf/NaN codes: the all-ones exponent is an ordinary binade,
//     and overflow saturates to +-max with the sign kept;
//   * a zero product has the sign a XOR b; an exact zero sum the sign x AND y;
//   * ROUNDING: 0 nearest_even, 1 nearest_away, 2 toward_zero.
//
// Why the container domain works: the container read as format (E, MAX_FB)
// has exactly the value of the (E, fb) code it carries (same bias, same
// exponent field), so the datapath decodes all operands at MAX_FB width and
// only the rounding position depends on fb. Every operation forms the exact
// result (the adder keeps 3 guard bits plus a sticky bit, as the golden model
// does) and rounds it once, so the result equals the golden model's.
//
// Synthesis notes (Vitis HLS): only ap_uint/ap_int arithmetic, no floating
// point types, no dynamic memory, no recursion, and loops with constant trip
// counts that are fully unrolled. Functions are inlined into the caller's
// pipeline. Written in C++11 so that the HLS front end and any testbench
// compiler accept it.
#ifndef CODESIGN_FPMAC_H
#define CODESIGN_FPMAC_H

#include <ap_int.h>

namespace codesign {

// Rounding modes, numbered as FpmacSpec.rounding_code numbers them.
enum { ROUND_NEAREST_EVEN = 0, ROUND_NEAREST_AWAY = 1, ROUND_TOWARD_ZERO = 2 };

// Bit length of a positive constant below 2^8 (enough for MAX_FB <= 23 and
// the significand widths used below).
template <int N>
struct bit_width {
  static const int value = (N >= 128) ? 8 : (N >= 64) ? 7 : (N >= 32) ? 6 : (N >= 16) ? 5
                         : (N >= 8) ? 4 : (N >= 4) ? 3 : (N >= 2) ? 2 : 1;
};

// Types and constants of one container format. All widths are in bits.
template <int E, int MAX_FB>
struct fp_format {
  static const int WIDTH = 1 + E + MAX_FB;          // container bits
  static const int FB_BITS = bit_width<MAX_FB>::value;  // run-time fb port bits
  static const int SIG_BITS = MAX_FB + 1;           // significand incl. hidden bit
  static const int BIAS = (1 << (E - 1)) - 1;
  static const int EMIN = 1 - BIAS;                 // exponent of the smallest normal binade
  static const int GUARD_BITS = 3;                  // adder alignment guard bits (as fparith.py)
  // Signed exponents (of a significand's LSB, in powers of two) stay within
  // +-(2^(E+1) + 3*MAX_FB + 64) < 2^(E+7): E + 8 bits hold them with room.
  typedef ap_int<E + 8> exp_t;
  typedef ap_uint<WIDTH> container_t;
  typedef ap_uint<FB_BITS> fb_t;
  typedef ap_uint<bit_width<MAX_FB>::value> active_fb_t;  // 1..MAX_FB
  typedef ap_uint<SIG_BITS> sig_t;
};

// Number of significant bits of x (0 for x == 0): a priority encoder.
template <int M>
inline int significant_bits(ap_uint<M> x) {
#pragma HLS INLINE
  int length = 0;
significant_bits_scan:
  for (int i = 0; i < M; ++i) {
#pragma HLS UNROLL
    if (x[i]) length = i + 1;
  }
  return length;
}

// The run-time fraction width clamped into [1, MAX_FB].
template <int E, int MAX_FB>
inline typename fp_format<E, MAX_FB>::active_fb_t clamp_fb(typename fp_format<E, MAX_FB>::fb_t fb) {
#pragma HLS INLINE
  typedef typename fp_format<E, MAX_FB>::active_fb_t active_fb_t;
  if (fb == 0) return active_fb_t(1);
  if (fb > MAX_FB) return active_fb_t(MAX_FB);
  return active_fb_t(fb);
}

// Container fraction bits below the active fb cleared (they carry no value).
template <int E, int MAX_FB>
inline typename fp_format<E, MAX_FB>::container_t mask_below_fb(typename fp_format<E, MAX_FB>::container_t x,
                                                                typename fp_format<E, MAX_FB>::active_fb_t f) {
#pragma HLS INLINE
  typedef typename fp_format<E, MAX_FB>::container_t container_t;
  const unsigned drop = MAX_FB - f.to_uint();  // 0 .. MAX_FB - 1
  const container_t ones = ~container_t(0);
  return x & container_t(ones << drop);
}

// A container decoded to sign, significand and the exponent of its LSB:
// value = (-1)^sign * sig * 2^exp. Exponent field 0 holds zero and subnormals.
template <int E, int MAX_FB>
struct unpacked {
  bool sign;
  typename fp_format<E, MAX_FB>::sig_t sig;
  typename fp_format<E, MAX_FB>::exp_t exp;
};

template <int E, int MAX_FB>
inline unpacked<E, MAX_FB> unpack(typename fp_format<E, MAX_FB>::container_t x) {
#pragma HLS INLINE
  typedef fp_format<E, MAX_FB> F;
  unpacked<E, MAX_FB> u;
  const ap_uint<E> field = x(E + MAX_FB - 1, MAX_FB);
  const ap_uint<MAX_FB> frac = x(MAX_FB - 1, 0);
  u.sign = x[F::WIDTH - 1];
  u.sig = (typename F::sig_t(field != 0 ? 1 : 0) << MAX_FB) | typename F::sig_t(frac);
  const typename F::exp_t biased = (field == 0) ? typename F::exp_t(1) : typename F::exp_t(field);
  u.exp = biased - F::BIAS - MAX_FB;
  return u;
}

// Round (-1)^sign * (mant + t) * 2^exp, 0 <= t < 1 with t > 0 exactly when
// sticky is set, once to the format (E, f), and place the code in the
// container. Mirrors round_to_code() of the golden model (subnormals on,
// saturation on). M is the width of mant in bits.
template <int E, int MAX_FB, int ROUNDING, int M>
inline typename fp_format<E, MAX_FB>::container_t round_pack(bool sign, ap_uint<M> mant,
                                                             typename fp_format<E, MAX_FB>::exp_t exp, bool sticky,
                                                             typename fp_format<E, MAX_FB>::active_fb_t f) {
#pragma HLS INLINE
  typedef fp_format<E, MAX_FB> F;
  typedef typename F::exp_t exp_t;
  typedef ap_uint<MAX_FB + 2> kept_t;     // rounded significand, at most 2^(f+1)
  typedef ap_uint<E + MAX_FB + 2> mag_t;  // code magnitude before saturation
  const int fb = f.to_int();

  const exp_t lead = exp + exp_t(significant_bits<M>(mant)) - 1;  // exponent of the leading one
  const exp_t binade = (lead > exp_t(F::EMIN)) ? lead : exp_t(F::EMIN);  // subnormals share EMIN
  const exp_t shift = binade - fb - exp;  // bits of mant below the quantum 2^(binade - f)

  kept_t kept;
  bool round_bit = false;  // the bit just below the quantum (worth half a quantum)
  bool below = sticky;     // anything nonzero below the round bit
  if (shift <= 0) {
    // Exact: the value needs no more than f + 1 bits (-shift <= f <= MAX_FB).
    kept = kept_t(mant) << unsigned(-shift.to_int());
  } else if (shift > M) {
    // Every bit, and the half point, lie below the quantum.
    kept = 0;
    below = sticky || (mant != 0);
  } else {
    const unsigned s = unsigned(shift.to_int());  // 1 .. M
    const ap_uint<M + 1> wide = mant;
    kept = kept_t(wide >> s);
    round_bit = ((wide >> (s - 1)) & 1) != 0;
    const ap_uint<M + 1> low_mask = (ap_uint<M + 1>(1) << (s - 1)) - 1;
    below = sticky || ((wide & low_mask) != 0);
  }

  bool up = false;
  if (ROUNDING == ROUND_NEAREST_EVEN) {
    up = round_bit && (below || kept[0]);
  } else if (ROUNDING == ROUND_NEAREST_AWAY) {
    up = round_bit;
  }
  const kept_t rounded = kept + kept_t(up ? 1 : 0);  // a carry moves into the next binade

  // Code magnitude = binade index * 2^f + rounded significand (hidden bit included).
  const mag_t index = mag_t((binade - exp_t(F::EMIN)).to_uint());
  mag_t magnitude = (index << unsigned(fb)) + mag_t(rounded);
  if (mant == 0 && !sticky) magnitude = 0;
  const mag_t max_code = (mag_t(1) << unsigned(E + fb)) - 1;  // all-ones exponent and fraction
  if (magnitude > max_code) magnitude = max_code;              // saturate, sign kept

  typename F::container_t out = typename F::container_t(magnitude) << unsigned(MAX_FB - fb);
  out[F::WIDTH - 1] = sign;
  return out;
}

// round(a * b) on masked containers. The product of two significands is exact
// in 2 * (MAX_FB + 1) bits; a zero product has the sign a XOR b.
template <int E, int MAX_FB, int ROUNDING>
inline typename fp_format<E, MAX_FB>::container_t fp_mul(typename fp_format<E, MAX_FB>::container_t a,
                                                         typename fp_format<E, MAX_FB>::container_t b,
                                                         typename fp_format<E, MAX_FB>::active_fb_t f) {
#pragma HLS INLINE
  typedef fp_format<E, MAX_FB> F;
  const unpacked<E, MAX_FB> x = unpack<E, MAX_FB>(a);
  const unpacked<E, MAX_FB> y = unpack<E, MAX_FB>(b);
  const ap_uint<2 * F::SIG_BITS> product = ap_uint<2 * F::SIG_BITS>(x.sig) * ap_uint<2 * F::SIG_BITS>(y.sig);
  return round_pack<E, MAX_FB, ROUNDING, 2 * F::SIG_BITS>(x.sign != y.sign, product, x.exp + y.exp, false, f);
}

// round(x + y) on masked containers, the golden adder's algorithm: order the
// operands by magnitude, align the smaller one with GUARD_BITS extra bits and
// fold the bits shifted out into a sticky bit (borrowing one unit in a
// difference). An exact zero sum has the sign x AND y.
template <int E, int MAX_FB, int ROUNDING>
inline typename fp_format<E, MAX_FB>::container_t fp_add(typename fp_format<E, MAX_FB>::container_t x,
                                                         typename fp_format<E, MAX_FB>::container_t y,
                                                         typename fp_format<E, MAX_FB>::active_fb_t f) {
#pragma HLS INLINE
  typedef fp_format<E, MAX_FB> F;
  typedef typename F::exp_t exp_t;
  const int WIDE = F::SIG_BITS + F::GUARD_BITS;  // aligned significand bits
  typedef ap_uint<WIDE> wide_t;
  typedef ap_uint<WIDE + 1> sum_t;               // one carry bit

  const unpacked<E, MAX_FB> ux = unpack<E, MAX_FB>(x);
  const unpacked<E, MAX_FB> uy = unpack<E, MAX_FB>(y);
  const bool swap = (uy.exp > ux.exp) || (uy.exp == ux.exp && uy.sig > ux.sig);
  const unpacked<E, MAX_FB> big = swap ? uy : ux;
  const unpacked<E, MAX_FB> small = swap ? ux : uy;

  const exp_t gap = big.exp - small.exp;  // >= 0
  const wide_t wide_big = wide_t(big.sig) << F::GUARD_BITS;
  const wide_t wide_small = wide_t(small.sig) << F::GUARD_BITS;
  wide_t aligned;
  bool sticky;
  if (gap >= WIDE) {
    aligned = 0;
    sticky = wide_small != 0;
  } else {
    const unsigned g = unsigned(gap.to_int());  // 0 .. WIDE - 1
    aligned = wide_small >> g;
    const wide_t lost_mask = (wide_t(1) << g) - 1;
    sticky = (wide_small & lost_mask) != 0;
  }

  const bool subtract = big.sign != small.sign;
  sum_t mant;
  if (subtract) {
    mant = sum_t(wide_big) - sum_t(aligned) - sum_t(sticky ? 1 : 0);
  } else {
    mant = sum_t(wide_big) + sum_t(aligned);
  }
  const bool exact_zero = (mant == 0) && !sticky;
  const bool sign = exact_zero ? (big.sign && small.sign) : big.sign;
  return round_pack<E, MAX_FB, ROUNDING, WIDE + 1>(sign, mant, big.exp - F::GUARD_BITS, sticky, f);
}

// The PE: round(round(a * b) + c) in the format (E, clamp(fb)), on containers.
template <int E, int MAX_FB, int ROUNDING>
inline typename fp_format<E, MAX_FB>::container_t fpmac(typename fp_format<E, MAX_FB>::container_t a,
                                                        typename fp_format<E, MAX_FB>::container_t b,
                                                        typename fp_format<E, MAX_FB>::container_t c,
                                                        typename fp_format<E, MAX_FB>::fb_t fb) {
#pragma HLS INLINE
  const typename fp_format<E, MAX_FB>::active_fb_t f = clamp_fb<E, MAX_FB>(fb);
  const typename fp_format<E, MAX_FB>::container_t product =
      fp_mul<E, MAX_FB, ROUNDING>(mask_below_fb<E, MAX_FB>(a, f), mask_below_fb<E, MAX_FB>(b, f), f);
  return fp_add<E, MAX_FB, ROUNDING>(product, mask_below_fb<E, MAX_FB>(c, f), f);
}

}  // namespace codesign

#endif  // CODESIGN_FPMAC_H
