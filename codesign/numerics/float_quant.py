"""Quantise, encode and decode for :class:`FloatFormat` on NumPy float64.

Each float64 is rounded exactly through :func:`round_to_code`. The torch path
(:mod:`codesign.train.quantize`) works on float32 bit patterns and routes the
values that need a variable rounding position through :func:`_quantize_subset`
here, so both give identical bits on identical inputs.
"""

from __future__ import annotations

import numpy as np

from codesign.numerics.formats import FloatFormat
from codesign.numerics.inputs import code_array, real_array
from codesign.numerics.rounding import random_bits32, round_to_code

_F32_FRAC = 23
_F32_BIAS = 127
_F32_EXP_MASK = 0x7F800000


def encode_float(x: np.ndarray, fmt: FloatFormat, *, rng=None) -> np.ndarray:
    """Round float64 values to codes (uint64). NaN raises; overflow raises unless saturating."""
    x = real_array(x)
    if np.any(np.isnan(x)):
        raise ValueError(f"NaN has no code in {fmt}")
    codes, overflow = _round_float64(x, fmt, rng)
    if not fmt.saturate and np.any(overflow):
        raise OverflowError(f"{int(overflow.sum())} value(s) exceed the largest finite value {fmt.max_value!r} of {fmt}")
    return codes


def decode_float(codes: np.ndarray, fmt: FloatFormat) -> np.ndarray:
    """Codes to float64 values, exactly. A normal code (or a zero) becomes a double by moving its fields into
    place (its fraction under the double's, its exponent rebiased): every :class:`FloatFormat` fits a double;
    a subnormal code scales its integer significand."""
    codes = code_array(codes)
    if np.any(codes >> np.uint64(fmt.width)):
        raise ValueError(f"code wider than {fmt.width} bits for {fmt}")
    size = (codes & np.uint64((1 << (fmt.width - 1)) - 1)).astype(np.int64)
    normal = size >> fmt.frac_bits > 0
    bits = np.where(normal, (size << (52 - fmt.frac_bits)) + (np.int64(1023 - fmt.bias) << 52), 0)
    bits |= (codes >> np.uint64(fmt.width - 1)).astype(np.int64) << 63
    values = bits.view(np.float64)
    subnormal = ~normal & (size != 0)
    if fmt.subnormals and subnormal.any():
        scaled = np.ldexp(size[subnormal].astype(np.float64), fmt.emin - fmt.frac_bits)
        values[subnormal] = np.copysign(scaled, values[subnormal])
    return values


def quantize_float_numpy(x: np.ndarray, fmt: FloatFormat, *, rng=None) -> np.ndarray:
    """Round to ``fmt`` and return float64 values; NaN passes through, overflow is ±inf unless saturating."""
    x = real_array(x)
    nan = np.isnan(x)
    codes, overflow = _round_float64(np.where(nan, 0.0, x), fmt, rng)
    values = decode_float(codes, fmt)
    if not fmt.saturate:
        values = np.where(overflow, np.copysign(np.inf, x), values)
    return np.where(nan, x, values)


_MASK52 = np.int64((1 << 52) - 1)


def _fast_path(fmt: FloatFormat, rng) -> bool:
    """Whether :func:`_round_binary64` rounds to ``fmt`` as :func:`round_to_code` does: a deterministic rounding
    (no random bits), a significand of at most 50 fraction bits (every double, a subnormal one too, then sits
    at least one bit above the rounding position) and at most 10 exponent bits (every subnormal double then lies
    far below ``emin``). Every :class:`FloatFormat` (2..8 exponent, 1..23 fraction bits) is within them."""
    return rng is None and fmt.rounding != "stochastic" and fmt.frac_bits <= 50 and fmt.exp_bits <= 10


def _round_binary64(flat: np.ndarray, fmt: FloatFormat) -> tuple[np.ndarray, np.ndarray]:
    """:func:`round_to_code` of float64 values (infinities give ``±max`` and overflow) read off their bit fields,
    for the host's per-step encodes; held to it bit for bit by the tests. A value in the format's normal binades
    (or a zero) keeps its bit pattern less the exponent's rebias, rounded at the format's last fraction bit in one
    integer addition (a carry moves it to the next binade, the largest one's to overflow); the rest (the
    format's subnormal range, beyond its binades) take :func:`_round_binary64_fields`."""
    bits = np.ascontiguousarray(flat, dtype=np.float64).view(np.int64)
    size = bits & ~(np.int64(1) << 63)
    shift = 52 - fmt.frac_bits
    low, high = np.int64(fmt.emin + 1023) << 52, np.int64(fmt.emax + 1024) << 52
    normal = (size >= low) & (size < high)
    field = size - (np.int64(1023 - fmt.bias) << 52)
    if fmt.rounding == "nearest_even":
        field += (np.int64(1) << (shift - 1)) - 1 + ((field >> shift) & 1)
    elif fmt.rounding == "nearest_away":
        field += np.int64(1) << (shift - 1)
    magnitude = field >> shift
    magnitude[size == 0] = 0
    overflow = magnitude > fmt.max_code
    np.minimum(magnitude, fmt.max_code, out=magnitude)
    codes = magnitude.astype(np.uint64) | ((bits < 0).astype(np.uint64) << np.uint64(fmt.width - 1))
    rest = ~normal & (size != 0)
    if rest.any():
        codes[rest], overflow[rest] = _round_binary64_fields(flat[rest], fmt)
    return codes, overflow


def _round_binary64_fields(flat: np.ndarray, fmt: FloatFormat) -> tuple[np.ndarray, np.ndarray]:
    """:func:`round_to_code` of float64 values (infinities give ``±max`` and overflow) from their bit fields, in
    a third of its NumPy passes: significand, exponent, rounding position, kept bits and the rounding increment."""
    bits = np.ascontiguousarray(flat, dtype=np.float64).view(np.int64)
    field = (bits >> 52) & 0x7FF
    mant = (bits & _MASK52) | ((field > 0).astype(np.int64) << 52)
    frac_bits, emin = fmt.frac_bits, fmt.emin
    lead = field - 1023  # a subnormal double's true lead is lower still, and any lead <= emin rounds alike
    quantum = (np.maximum(lead, emin) if fmt.subnormals else lead) - frac_bits
    right = np.minimum(quantum - np.maximum(field, 1) + 1075, 62)  # >= 1; past 62 every bit is below the half
    kept = mant >> right
    rem = mant & ((np.int64(1) << right) - 1)
    half = np.int64(1) << (right - 1)
    if fmt.rounding == "nearest_even":
        kept += (rem > half) | ((rem == half) & ((kept & 1) == 1))
    elif fmt.rounding == "nearest_away":
        kept += rem >= half
    offset = quantum - (emin - frac_bits)
    magnitude = (np.maximum(offset, 0) << frac_bits) + kept
    if not fmt.subnormals:  # below emin: zero, or emin itself where rounding carried into it
        carried = (offset == -1) & (kept >> (frac_bits + 1) > 0)
        magnitude = np.where(offset < 0, np.where(carried, np.int64(1) << frac_bits, 0), magnitude)
        magnitude[magnitude < (np.int64(1) << frac_bits)] = 0
    overflow = magnitude > fmt.max_code
    np.minimum(magnitude, fmt.max_code, out=magnitude)
    codes = magnitude.astype(np.uint64) | ((bits < 0).astype(np.uint64) << np.uint64(fmt.width - 1))
    return codes, overflow


def _round_float64(x: np.ndarray, fmt: FloatFormat, rng) -> tuple[np.ndarray, np.ndarray]:
    flat = x.reshape(-1)
    if _fast_path(fmt, rng):
        codes, overflow = _round_binary64(flat, fmt)
        return codes.reshape(x.shape), overflow.reshape(x.shape)
    finite = np.isfinite(flat)
    frac, exp2 = np.frexp(np.where(finite, np.abs(flat), 0.0))
    mant = np.ldexp(frac, 53).astype(np.int64)
    exp = exp2.astype(np.int64) - 53
    random32 = random_bits32(rng, flat.size) if fmt.rounding == "stochastic" else None
    codes, overflow = round_to_code(np.signbit(flat), mant, exp, fmt, random32=random32)
    infinite = ~finite
    codes = np.where(infinite, np.uint64(fmt.max_code) | (codes & np.uint64(1 << (fmt.width - 1))), codes)
    overflow = overflow | infinite
    return codes.reshape(x.shape), overflow.reshape(x.shape)


def _quantize_subset(values: np.ndarray, fmt: FloatFormat, random32) -> np.ndarray:
    x = values.astype(np.float64)
    frac, exp2 = np.frexp(np.abs(x))
    codes, _ = round_to_code(
        np.signbit(x), np.ldexp(frac, 53).astype(np.int64), exp2.astype(np.int64) - 53, fmt, random32=random32
    )
    return decode_float(codes, fmt).astype(np.float32)
