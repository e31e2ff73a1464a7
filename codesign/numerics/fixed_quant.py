"""Quantise, encode, decode and MSB-slice for :class:`FixedFormat`.

Both NumPy and torch inputs are computed in float64, where scaling by a power
of two and every code of up to 32 bits are exact, so the two agree bit for bit.
"""

from __future__ import annotations

import math

import numpy as np

from codesign.numerics.formats import FixedFormat
from codesign.numerics.inputs import code_array, real_array


def _round_to_integer(y: np.ndarray, rounding: str, rng) -> np.ndarray:
    if rounding == "nearest_even":
        return np.rint(y)
    if rounding == "toward_zero":
        return np.trunc(y)
    floor = np.floor(y)
    remainder = y - floor  # exact: both lie in the same binade or below
    if rounding == "nearest_away":
        # ties go away from zero: up for positive ties, down (stay) for negative ones
        return floor + ((remainder > 0.5) | ((remainder == 0.5) & (y > 0)))
    if rng is None:
        raise ValueError("stochastic rounding needs rng= (a seed or numpy.random.Generator) to be reproducible")
    generator = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
    uniform = generator.random(size=y.shape)
    return floor + (uniform < remainder)


def fixed_codes(x: np.ndarray, fmt: FixedFormat, *, rng=None) -> np.ndarray:
    """Signed integer codes (int64) of float64 values; NaN must be masked out by the caller."""
    x = real_array(x)
    if np.any(np.isinf(x)) and not fmt.saturate:
        raise ValueError(f"±inf cannot wrap in {fmt}; use saturate=True")
    scaled = np.ldexp(x, fmt.frac_bits)
    integer = _round_to_integer(np.nan_to_num(scaled, posinf=2.0**64, neginf=-(2.0**64)), fmt.rounding, rng)
    if fmt.saturate:
        integer = np.clip(integer, fmt.min_code, fmt.max_code)
    else:
        modulus = 2.0**fmt.bits
        integer = np.mod(integer, modulus)
        if fmt.signed:
            integer = np.where(integer > fmt.max_code, integer - modulus, integer)
    return integer.astype(np.int64)


def quantize_fixed_numpy(x: np.ndarray, fmt: FixedFormat, *, rng=None) -> np.ndarray:
    x = real_array(x)
    nan = np.isnan(x)
    codes = fixed_codes(np.where(nan, 0.0, x), fmt, rng=rng)
    return np.where(nan, x, np.ldexp(codes.astype(np.float64), -fmt.frac_bits))


def encode_fixed(x: np.ndarray, fmt: FixedFormat, *, rng=None) -> np.ndarray:
    """Codes as unsigned ``bits``-wide patterns (two's complement for signed formats), uint64."""
    x = real_array(x)
    if np.any(np.isnan(x)):
        raise ValueError(f"NaN has no code in {fmt}")
    codes = fixed_codes(x, fmt, rng=rng)
    return (codes & ((1 << fmt.bits) - 1)).astype(np.uint64)


def decode_fixed(patterns: np.ndarray, fmt: FixedFormat) -> np.ndarray:
    patterns = code_array(patterns)
    if np.any(patterns >> np.uint64(fmt.bits)):
        raise ValueError(f"pattern wider than {fmt.bits} bits for {fmt}")
    codes = patterns.astype(np.int64)
    if fmt.signed:
        codes = np.where(codes > fmt.max_code, codes - (1 << fmt.bits), codes)
    return np.ldexp(codes.astype(np.float64), -fmt.frac_bits)


def msb_slice_format(fmt: FixedFormat, k: int) -> FixedFormat:
    """The format of the top ``k`` bits of ``fmt``: same scale step times ``2**(bits-k)``."""
    low = 2 if fmt.signed else 1
    if isinstance(k, bool) or not isinstance(k, int) or not low <= k <= fmt.bits:
        raise ValueError(f"MSB slice width k={k!r} must be an int in [{low}, {fmt.bits}] for {fmt}")
    return FixedFormat(
        bits=k, frac_bits=fmt.frac_bits - (fmt.bits - k), signed=fmt.signed, rounding="toward_zero", saturate=True
    )


def msb_slice_numpy(x: np.ndarray, fmt: FixedFormat, k: int) -> tuple[np.ndarray, FixedFormat]:
    """Quantise ``x`` to ``fmt``, keep the top ``k`` bits of each code (floor), return values and their format."""
    slice_fmt = msb_slice_format(fmt, k)
    x = real_array(x)
    if np.any(np.isnan(x)):
        raise ValueError("NaN has no fixed-point code to slice")
    codes = fixed_codes(x, fmt) >> (fmt.bits - k)
    return np.ldexp(codes.astype(np.float64), -slice_fmt.frac_bits), slice_fmt


def to_values(codes: np.ndarray, frac_bits: int) -> np.ndarray:
    """Exact float64 values of integer codes (|codes| < 2^53), of any integer type, in one pass: times the power of
    two 2^-frac_bits, which is exact (as ldexp) wherever that power and every product are normal, as they are for
    |frac_bits| <= 960, and SIMD (ldexp takes about 8 times as long on a batch's codes); ldexp beyond."""
    codes = np.asarray(codes)
    if codes.dtype.kind not in "iu":
        codes = codes.astype(np.int64)
    if abs(int(frac_bits)) <= 960:
        return np.multiply(codes, math.ldexp(1.0, -int(frac_bits)), dtype=np.float64)
    return np.ldexp(codes, -frac_bits, dtype=np.float64)
