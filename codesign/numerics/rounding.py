"""The one rounding routine every float code in codesign comes from.

A value is handed over exactly, as ``(-1)**sign * mant * 2**exp`` with an
integer ``mant`` below 2**62, plus a ``sticky`` flag that says the true value
is strictly above ``mant * 2**exp`` by less than one unit of ``2**exp``. The
routine rounds it to a :class:`FloatFormat` code following docs/numerics.md.
Quantisers, the FP arithmetic and the PE golden kernels all call it, so they
cannot disagree.
"""

from __future__ import annotations

import numpy as np

from codesign.numerics.formats import FloatFormat

MANT_LIMIT_BITS = 62


def random_bits32(rng: np.random.Generator | int | None, size: int) -> np.ndarray:
    """32 uniform random bits per element (uint64), drawn in one call so NumPy and torch paths agree."""
    if rng is None:
        raise ValueError("stochastic rounding needs rng= (a seed or numpy.random.Generator) to be reproducible")
    generator = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
    return generator.integers(0, 1 << 32, size=size, dtype=np.uint64)


def bit_length(mant: np.ndarray) -> np.ndarray:
    """Exact bit length of non-negative int64 values (0 for 0)."""
    mant = np.asarray(mant, dtype=np.int64)
    _, guess = np.frexp(mant.astype(np.float64))
    guess = guess.astype(np.int64)
    # float64 conversion can round 2**k - small up to 2**k: correct by one.
    too_long = (guess > 0) & ((mant >> np.maximum(guess - 1, 0)) == 0)
    return guess - too_long


def round_to_code(
    sign: np.ndarray,
    mant: np.ndarray,
    exp: np.ndarray,
    fmt: FloatFormat,
    *,
    sticky: np.ndarray | None = None,
    rounding: str | None = None,
    random32: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Round exact values to codes of ``fmt``.

    Returns ``(codes, overflow)``: uint64 codes (sign in bit ``width-1``) and a
    bool mask of results whose rounded magnitude exceeded the largest finite
    value. Overflowed codes hold ``±max``; callers with ``saturate=False``
    turn them into inf.
    """
    rounding = rounding or fmt.rounding
    sign = np.asarray(sign, dtype=bool)
    mant = np.asarray(mant, dtype=np.int64)
    exp = np.asarray(exp, dtype=np.int64)
    sticky = np.zeros(mant.shape, dtype=bool) if sticky is None else np.asarray(sticky, dtype=bool)
    if np.any(mant < 0) or np.any(mant >= (1 << MANT_LIMIT_BITS)):
        raise ValueError("significand out of the exact range [0, 2**62)")
    frac_bits, emin = fmt.frac_bits, fmt.emin

    lead = exp + bit_length(mant) - 1
    quantum = (np.maximum(lead, emin) if fmt.subnormals else lead) - frac_bits
    shift = quantum - exp
    if np.any(sticky & (shift < 1)):
        raise AssertionError("sticky bits must lie below the rounding position")

    right = np.clip(shift, 1, MANT_LIMIT_BITS)
    beyond = shift > MANT_LIMIT_BITS  # all bits, and the half point, lie below the quantum
    kept = np.where(beyond, 0, mant >> right)
    rem = np.where(beyond, mant, mant & ((np.int64(1) << right) - 1))
    half = np.where(beyond, np.int64(1) << MANT_LIMIT_BITS, np.int64(1) << (right - 1))
    above = (rem > half) | ((rem == half) & sticky)
    tie = (rem == half) & ~sticky
    if rounding == "nearest_even":
        up = above | (tie & ((kept & 1) == 1))
    elif rounding == "nearest_away":
        up = above | tie
    elif rounding == "toward_zero":
        up = np.zeros(mant.shape, dtype=bool)
    elif rounding == "stochastic":
        if random32 is None:
            raise ValueError("stochastic rounding needs random bits")
        # floor(rem * 2**32 / 2**shift): the remainder's first 32 bits below the quantum.
        below32 = shift - 32
        frac32 = np.where(
            below32 >= 0,
            np.where(below32 > MANT_LIMIT_BITS, 0, rem >> np.clip(below32, 0, MANT_LIMIT_BITS)),
            rem << np.clip(-below32, 0, 31),
        )
        up = random32.reshape(mant.shape).astype(np.int64) < frac32
    else:
        raise ValueError(f"unknown rounding mode {rounding!r}")

    exact_left = np.clip(-shift, 0, MANT_LIMIT_BITS)
    mant_r = np.where(shift >= 1, kept + up, mant << exact_left)
    offset = quantum - (emin - frac_bits)  # binade index, -1 only for FTZ round-up into emin
    with np.errstate(over="ignore"):
        magnitude = np.where(offset >= 0, np.left_shift(np.maximum(offset, 0), frac_bits), 0) + mant_r
    carried_into_emin = (offset == -1) & ((mant_r >> (frac_bits + 1)) > 0)
    magnitude = np.where(offset < 0, np.where(carried_into_emin, np.int64(1) << frac_bits, 0), magnitude)
    if not fmt.subnormals:
        magnitude = np.where(magnitude < (np.int64(1) << frac_bits), 0, magnitude)
    magnitude = np.where((mant == 0) & ~sticky, 0, magnitude)
    overflow = magnitude > fmt.max_code
    magnitude = np.where(overflow, fmt.max_code, magnitude)
    codes = magnitude.astype(np.uint64) | (sign.astype(np.uint64) << np.uint64(fmt.width - 1))
    return codes, overflow


def split_code(codes: np.ndarray, fmt: FloatFormat) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Codes to exact ``(sign, mant, exp)``: value = (-1)**sign * mant * 2**exp.

    With ``subnormals=False`` an exponent-0 code reads as a signed zero.
    """
    codes = np.asarray(codes, dtype=np.uint64)
    if np.any(codes >> np.uint64(fmt.width)):
        raise ValueError(f"code wider than {fmt.width} bits for {fmt}")
    frac_bits = fmt.frac_bits
    sign = (codes >> np.uint64(fmt.width - 1)).astype(bool)
    field = ((codes >> np.uint64(frac_bits)) & np.uint64((1 << fmt.exp_bits) - 1)).astype(np.int64)
    frac = (codes & np.uint64((1 << frac_bits) - 1)).astype(np.int64)
    normal = field > 0
    mant = np.where(normal, frac | (np.int64(1) << frac_bits), frac if fmt.subnormals else 0)
    exp = np.maximum(field, 1) - fmt.bias - frac_bits
    return sign, mant, exp
