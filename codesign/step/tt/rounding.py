"""The host's integer arithmetic between a TT step's PE calls: power-of-two scales chosen from a tensor's mean
|code| (paper 003, Sec. 3.3), and accumulator words rounded to the next 8- or 16-bit codes (to nearest, ties to
even, saturating). Exact in int64 and float64 below :data:`EXACT_FLOAT`, so the golden layer and the step on PEs
reach the same codes."""

from __future__ import annotations

import functools

import numpy as np

from codesign.numerics.formats import FIXED_FRAC_BITS
from codesign.numerics.fixed_quant import to_values
from codesign.numerics.scales import UNSET, mean_abs, mean_abs_frac_bits


EXACT_FLOAT = 1 << 53  # integers below this magnitude are exact in float64
BLOCK = 1 << 15  # values a host pass over a large tensor takes at a time: its temporaries stay in the cache


def floor_log2_ratio(numerator: int, denominator: int) -> int:
    """``floor(log2(numerator / denominator))`` for positive ints, exactly."""
    e = numerator.bit_length() - denominator.bit_length()
    low, high = (numerator, denominator << e) if e >= 0 else (numerator << -e, denominator)
    return e - 1 if low < high else e


def choose_frac(codes: np.ndarray, frac_bits: int, *, bits: int, headroom_bits: int, current: int) -> int:
    """The fraction bits that put the mean |value| of ``codes · 2^-frac_bits`` in the tracked range.

    The rule of :func:`codesign.numerics.scales.mean_abs_frac_bits`, in
    integers: ``(bits - 2 - headroom) - floor(log2(mean))``, clipped to the
    fixed-point range; an all-zero tensor keeps ``current`` (``bits - 1`` when
    the tracker was never set).
    """
    codes = np.asarray(codes, dtype=np.int64)
    return frac_of_total(int(np.abs(codes).sum()), codes.size, frac_bits, bits=bits, headroom_bits=headroom_bits,
                         current=current)


def frac_of_total(total: int, count: int, frac_bits: int, *, bits: int, headroom_bits: int, current: int) -> int:
    """:func:`choose_frac` of a tensor of ``count`` codes whose |codes| add up to ``total``."""
    if total == 0:
        return bits - 1 if current == UNSET else current
    exponent = floor_log2_ratio(total, count) - frac_bits
    return max(FIXED_FRAC_BITS[0], min(FIXED_FRAC_BITS[1], (bits - 2 - headroom_bits) - exponent))


def scale_and_round(z: np.ndarray, z_frac: int, *, bits: int, headroom_bits: int, current: int, choose: bool = True
                    ) -> tuple[int, np.ndarray]:
    """The scale (:func:`choose_frac`, or ``current`` when not ``choose``) and the ``bits``-wide codes
    (:func:`rescale`) of one PE result ``z`` at ``z_frac``: one pass over |z| gives both the sum that picks the
    scale and the largest magnitude that :func:`rescale` would otherwise scan for (exactness, saturation)."""
    z = np.ascontiguousarray(z, dtype=np.int64)
    total, peak = abs_sum_and_peak(z)
    frac = frac_of_total(total, z.size, z_frac, bits=bits, headroom_bits=headroom_bits,
                         current=current) if choose else current
    return frac, rescale(z, z_frac, frac, bits, peak=peak)


def abs_sum_and_peak(z: np.ndarray) -> tuple[int, int]:
    """Sum and maximum of |z| over contiguous int64 words, exactly, in cache-sized blocks."""
    flat, total, peak = z.reshape(-1), 0, 0
    scratch = np.empty(min(BLOCK, flat.size), dtype=np.int64)
    for start in range(0, flat.size, BLOCK):
        magnitude = np.abs(flat[start:start + BLOCK], out=scratch[:min(BLOCK, flat.size - start)])
        total += int(magnitude.sum())
        peak = max(peak, int(magnitude.max()))
    return total, peak


def rescale(codes: np.ndarray, frac_from: int, frac_to: int, bits: int, *, peak: int | None = None) -> np.ndarray:
    """``codes · 2^-frac_from`` as ``bits``-wide codes at ``frac_to``: rounded to nearest, ties to even, saturated.

    Sums below 2^53 take float64 (``ldexp`` by a power of two and ``rint``'s ties to even are exact there, and
    faster); larger ones the integer shift, which gives the same codes. The codes come in the narrowest signed
    type that holds them (int8 for 8-bit codes): the host packs and copies them for the next PE call, and a
    narrow array is fewer bytes to move. ``peak`` is max |codes| when the caller has it already (it decides
    the float64 path and whether anything can saturate); else it is scanned for."""
    z = np.asarray(codes, dtype=np.int64)
    low, high = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    narrow = code_dtype(bits)
    shift = frac_to - frac_from
    if shift >= 0:
        if shift > bits:
            return np.where(z > 0, high, np.where(z < 0, low, 0)).astype(narrow)
        return np.clip(np.clip(z, -(1 << bits), 1 << bits) << shift, low, high).astype(narrow)
    s = -shift
    if s > 62:  # |z| < 2^62 after a 64-bit sum: every value rounds to 0
        return np.zeros(z.shape, dtype=narrow)
    if peak is None:
        peak = max(int(z.max()), -int(z.min())) if z.size else 0
    if peak < EXACT_FLOAT:  # exact in float64: 2^-s and rint are exact
        z = np.ascontiguousarray(z)
        out = np.empty(z.shape, dtype=narrow)
        flat, codes = z.reshape(-1), out.reshape(-1)
        clip = (peak >> s) + 1 > high  # something may round beyond the range (else nothing can)
        scratch = np.empty(min(BLOCK, flat.size))
        for start in range(0, flat.size, BLOCK):  # in blocks, so that the passes stay in the cache
            scaled = scratch[:min(BLOCK, flat.size - start)]
            np.multiply(flat[start:start + scaled.size], 2.0 ** -s, out=scaled)  # exact: a normal power of two
            np.rint(scaled, out=scaled)
            if clip:
                np.clip(scaled, low, high, out=scaled)  # integers: clipping in float64 is exact
            codes[start:start + scaled.size] = scaled
        return out
    floor = z >> s
    rest = z - (floor << s)
    half = 1 << (s - 1)
    up = (rest > half) | ((rest == half) & (floor & 1 == 1))
    return np.clip(floor + up, low, high).astype(narrow)


@functools.lru_cache(maxsize=64)
def code_dtype(bits: int) -> np.dtype:
    """The narrowest signed integer type of ``bits``-wide codes (kept per width: a list step asks a dozen times)."""
    return np.dtype(next(kind for width, kind in ((8, np.int8), (16, np.int16), (32, np.int32)) if bits <= width)
                    if bits <= 32 else np.int64)


def quantize_values(values: np.ndarray, frac_bits, bits: int, dtype=np.int64) -> np.ndarray:
    """Codes of real values at ``frac_bits`` (to nearest, ties to even, saturated): the host's input conversion.
    ``frac_bits``: an int, or ints broadcast against ``values`` (several tensors at their own scales at once).
    ``dtype``: the codes' integer type; a host that only packs them takes :func:`code_dtype` (``bits`` wide), a
    result an eighth or a quarter of int64's, with no fresh pages to fault in on a batch-sized tensor."""
    return _codes_of_scaled(scaled_for_codes(values, frac_bits, bits), bits, dtype)


def relu_codes_and_range(x: np.ndarray, frac_bits: int, bits: int, dtype=np.int64) -> tuple[np.ndarray, np.ndarray]:
    """:func:`quantize_values` of a hidden layer's input ``x`` (the ReLU of the layer below's output: no value
    below 0), and where ``x · 2^frac_bits`` lies within the codes' bounds (before rounding: where a
    straight-through gradient passes), from one scaling pass. No value below 0 needs the lower clip or the lower
    bound's test: one comparison and one clip fewer, the same codes and range (±0, subnormals and +inf included;
    NaN lies out of range, its code undefined)."""
    scaled = scaled_for_codes(x, frac_bits, bits)
    high = (1 << (bits - 1)) - 1
    inside = scaled <= high
    np.rint(scaled, out=scaled)
    np.minimum(scaled, scaled.dtype.type(high), out=scaled)
    return scaled.astype(dtype), inside


def in_code_range(scaled: np.ndarray, bits: int) -> np.ndarray:
    """Where scaled values (:func:`scaled_for_codes`, not yet rounded) lie within ``bits``-wide codes' bounds."""
    inside = scaled >= -(1 << (bits - 1))
    inside &= scaled <= (1 << (bits - 1)) - 1
    return inside


def _codes_of_scaled(scaled: np.ndarray, bits: int, dtype, low: int | None = None) -> np.ndarray:
    """Codes of scaled values (rounded and clipped in place; as they are for ``dtype`` None), from ``low`` (None:
    the codes' own bottom; 0 for a ReLU's)."""
    np.rint(scaled, out=scaled)
    # clipped to integer bounds (exact either way) as np.clip does, NaN included: minimum and maximum take 70 % of
    # its time on float32 (NumPy 1.26)
    np.minimum(scaled, scaled.dtype.type((1 << (bits - 1)) - 1), out=scaled)
    np.maximum(scaled, scaled.dtype.type(-(1 << (bits - 1)) if low is None else low), out=scaled)
    return scaled if dtype is None else scaled.astype(dtype)


_POWERS_F32 = np.ldexp(1.0, np.arange(-126, 127)).astype(np.float32)  # 2^k, |k| <= 126: normal, exact


def scaled_for_codes(values: np.ndarray, frac_bits, bits: int) -> np.ndarray:
    """``values · 2^frac_bits`` (a new array) as exactly as rounding to ``bits``-wide codes, or comparing with
    their bounds, needs: times a normal power of two, as ldexp, and SIMD. float32 values stay float32 where the
    codes fit its 24 bits (their bounds are exact there): a product is exact unless below 2^-126, which rounds
    to 0 and lies within the bounds either way, or past 2^128, inf, which saturates and lies outside them either
    way; half the bytes of float64, and no float64 temporary of a batch's size. Else float64. Several scales at
    once (``frac_bits`` an array: a layer's cores) take their powers from a table, not ``ldexp``."""
    values = np.asarray(values)
    scale = None
    if values.dtype == np.float32 and bits <= 24:
        if isinstance(frac_bits, (int, np.integer)):
            scale = np.float32(2.0 ** frac_bits) if abs(frac_bits) <= 126 else None
        else:
            fracs = np.asarray(frac_bits)
            if fracs.size and -126 <= fracs.min() and fracs.max() <= 126:
                scale = _POWERS_F32[fracs + 126]
    narrow = scale is not None
    scale = np.ldexp(1.0, frac_bits) if scale is None else scale
    with np.errstate(over="ignore"):  # past float32's range: inf, which saturates as the product would
        return np.multiply(values, scale, dtype=np.float32 if narrow else np.float64)


def masked_float32(acc: np.ndarray, frac_bits: int, mask: np.ndarray) -> np.ndarray:
    """``acc · 2^-frac_bits`` rounded once to float32 where ``mask``, ±0 elsewhere (a PE's accumulators as the
    values a float32 host passes on, a straight-through mask applied): ``(acc · 2^-frac_bits · mask)`` in float64,
    then float32. int32 accumulators at ``-32 <= frac_bits <= 126`` convert straight to float32 (to nearest, ties
    to even, one rounding), then take the power of two, which is exact there: no product overflows (|acc| <=
    2^31) or falls below float32's normal range (|acc| >= 1); under half the time on a batch's input gradient."""
    acc = np.asarray(acc)
    if acc.dtype == np.int32 and -32 <= frac_bits <= 126:
        values = np.multiply(acc, np.float32(2.0 ** -frac_bits), dtype=np.float32)
        values *= mask
        return values
    return (np.multiply(acc, np.ldexp(1.0, -frac_bits), dtype=np.float64) * mask).astype(np.float32)


def biased_float32(acc: np.ndarray, frac_bits: int, bias: np.ndarray | None, bias_frac: int, acc_bits: int
                   ) -> np.ndarray | None:
    """``acc · 2^-frac_bits + bias`` rounded once to float32 (a PE's accumulators, 32-bit or sums chained across
    calls in 64, plus the bias codes' values at ``bias_frac``, as a float32 host passes a layer's output on:
    float64, then float32), from half the bytes; None where that is not provably the float64 expression's bits.
    ``acc_bits``: a bound on the accumulators, |acc| <= 2^acc_bits (the products' widths and the terms a value
    sums); ``bias``: codes of at most 24 bits times 2^-bias_frac (the host's bias values), each checked against
    that bound. Where |acc| <= 2^24 and the powers are normal, ``acc · 2^-frac_bits`` and the bias are exact in
    float32, so float32's add rounds their exact sum once; the float64 sum is exact too (their bits span at most
    53 where the fractions lie within 29 of each other), so its one rounding to float32 is the same."""
    if not _biased_exact(acc, frac_bits, bias, bias_frac, acc_bits):
        return None
    if acc.dtype == np.int64:  # narrowed first (exact within the bound): int32 converts in half the time
        acc = acc.astype(np.int32)
    values = np.multiply(acc, np.float32(2.0 ** -frac_bits), dtype=np.float32)
    if bias is not None:
        values += bias.astype(np.float32)
    return values


def _biased_exact(acc: np.ndarray, frac_bits: int, bias: np.ndarray | None, bias_frac: int, acc_bits: int) -> bool:
    """Whether :func:`biased_float32` has the float64 expression's bits (its docstring says why)."""
    return acc.dtype in (np.int32, np.int64) and acc_bits <= 24 and -100 <= frac_bits <= 126 and \
        (bias is None or (-100 <= bias_frac <= 118 and abs(bias_frac - frac_bits) <= 29
                          and np.abs(bias).max(initial=0.0) <= 2.0 ** (24 - bias_frac)))


def biased_relu_codes(acc: np.ndarray, frac_bits: int, bias: np.ndarray | None, bias_frac: int, acc_bits: int,
                      next_frac: int, bits: int) -> tuple[np.ndarray, np.ndarray] | None:
    """:func:`relu_codes_and_range` of ``max(biased_float32(acc, ...), 0)`` at ``next_frac``, the codes as float32
    whole numbers (0 to the codes' top): a layer's accumulators straight to the next layer's input codes and where
    its input lay within their bounds, in one scaling instead of three, and no float32 output or ReLU between;
    None where that is not provably the same. The bias's and the accumulators' terms, scaled by 2^next_frac
    instead of after their sum, stay exact and normal where their powers keep clear of float32's range (below:
    2^-126 at the finest unit; above: 2^126 at 24 bits), so float32's add rounds the same sum, times a power of
    two, once: the output's bits, times 2^next_frac, which :func:`scaled_for_codes` takes exactly where
    ``bits <= 24`` and ``|next_frac| <= 126``. That output is finite, so it needs no check."""
    shift = next_frac - frac_bits
    if bits > 24 or not -126 <= next_frac <= 126 or not -126 <= shift <= 102 or \
            not _biased_exact(acc, frac_bits, bias, bias_frac, acc_bits) or \
            (bias is not None and not -126 <= next_frac - bias_frac <= 102):
        return None
    if acc.dtype == np.int64:
        acc = acc.astype(np.int32)
    scaled = np.multiply(acc, np.float32(2.0 ** shift), dtype=np.float32)
    if bias is not None:
        scaled += (bias * 2.0 ** next_frac).astype(np.float32)  # exact: codes of at most 24 bits times a power
    inside = scaled <= np.float32((1 << (bits - 1)) - 1)  # a negative value's ReLU, 0, lies inside as well
    return _codes_of_scaled(scaled, bits, None, low=0), inside


def masked_codes(acc: np.ndarray, frac_bits: int, mask: np.ndarray, next_frac: int, bits: int) -> np.ndarray | None:
    """:func:`quantize_values` of ``masked_float32(acc, frac_bits, mask)`` at ``next_frac``, as float32 whole
    numbers: a layer's input-gradient accumulators straight to the layer below's output-gradient codes, in one
    scaling; None where that is not provably the same. On :func:`masked_float32`'s path ``acc`` converts to
    float32 once and then takes powers of two, which are exact in float32's normal range; taken as one power,
    ``2^(next_frac - frac_bits)``, the product is the same (no nonzero one falls below 2^-126, as |acc| >= 1),
    and none reaches inf (|acc| <= 2^31) where the mask's 0 would make NaN of it."""
    shift = next_frac - frac_bits
    if acc.dtype != np.int32 or not -32 <= frac_bits <= 126 or bits > 24 or not -126 <= next_frac <= 126 or \
            not -126 <= shift <= 96:
        return None
    scaled = np.multiply(acc, np.float32(2.0 ** shift), dtype=np.float32)
    scaled *= mask
    return _codes_of_scaled(scaled, bits, None)


def frac_of_values(values: np.ndarray, *, bits: int, headroom_bits: int, current: int, update: bool) -> int:
    """The tracked scale of a real-valued host input (the batch, the output gradient, bias, shadow cores).

    These are floats before any PE sees them, so the host takes the trainer's
    own rule on their float mean |x| (the same functions,
    :func:`codesign.numerics.scales.mean_abs` and
    :func:`~codesign.numerics.scales.mean_abs_frac_bits`); every tensor a PE
    produced is scaled in integers by :func:`choose_frac`.
    """
    if not update and current != UNSET:
        return current
    fallback = bits - 1 if current == UNSET else current
    return mean_abs_frac_bits(mean_abs(values), bits=bits, headroom_bits=headroom_bits, fallback=fallback)


__all__ = ["BLOCK", "EXACT_FLOAT", "abs_sum_and_peak", "biased_float32", "biased_relu_codes", "choose_frac",
           "code_dtype", "floor_log2_ratio", "frac_of_total", "frac_of_values", "in_code_range", "masked_codes",
           "quantize_values", "relu_codes_and_range", "rescale", "scale_and_round", "scaled_for_codes", "to_values"]
