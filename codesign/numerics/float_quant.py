"""Quantise, encode and decode for :class:`FloatFormat` (NumPy float64 and torch float32).

The NumPy path rounds each float64 exactly through :func:`round_to_code`. The
torch path works on the float32 bit pattern with integer masks (fast, and
what the benchmark measures); values that need a variable rounding position
(below the target's smallest normal) are routed through the NumPy path, so
both give identical bits on identical inputs.
"""

from __future__ import annotations

import numpy as np

from codesign.numerics.formats import FloatFormat
from codesign.numerics.rounding import random_bits32, round_to_code, split_code

_F32_FRAC = 23
_F32_BIAS = 127
_F32_EXP_MASK = 0x7F800000
_F32_MAG_MASK = 0x7FFFFFFF


def encode_float(x: np.ndarray, fmt: FloatFormat, *, rng=None) -> np.ndarray:
    """Round float64 values to codes (uint64). NaN raises; overflow raises unless saturating."""
    x = np.asarray(x, dtype=np.float64)
    if np.any(np.isnan(x)):
        raise ValueError(f"NaN has no code in {fmt}")
    codes, overflow = _round_float64(x, fmt, rng)
    if not fmt.saturate and np.any(overflow):
        raise OverflowError(f"{int(overflow.sum())} value(s) exceed the largest finite value {fmt.max_value!r} of {fmt}")
    return codes


def decode_float(codes: np.ndarray, fmt: FloatFormat) -> np.ndarray:
    """Codes to float64 values, exactly."""
    sign, mant, exp = split_code(codes, fmt)
    return np.where(sign, -1.0, 1.0) * np.ldexp(mant.astype(np.float64), exp.astype(np.int32))


def quantize_float_numpy(x: np.ndarray, fmt: FloatFormat, *, rng=None) -> np.ndarray:
    """Round to ``fmt`` and return float64 values; NaN passes through, overflow is ±inf unless saturating."""
    x = np.asarray(x, dtype=np.float64)
    nan = np.isnan(x)
    codes, overflow = _round_float64(np.where(nan, 0.0, x), fmt, rng)
    values = decode_float(codes, fmt)
    if not fmt.saturate:
        values = np.where(overflow, np.copysign(np.inf, x), values)
    return np.where(nan, x, values)


def _round_float64(x: np.ndarray, fmt: FloatFormat, rng) -> tuple[np.ndarray, np.ndarray]:
    flat = x.reshape(-1)
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


def quantize_float_torch(x, fmt: FloatFormat, *, rng=None):
    """torch version of :func:`quantize_float_numpy`; float32 in, float32 out, same bits."""
    import torch

    if x.dtype != torch.float32:
        values = quantize_float_numpy(x.detach().cpu().numpy(), fmt, rng=rng)
        return torch.from_numpy(values).to(dtype=x.dtype, device=x.device)
    flat = x.detach().contiguous().reshape(-1)
    bits = flat.view(torch.int32)
    mag = bits & _F32_MAG_MASK
    drop = _F32_FRAC - fmt.frac_bits
    if drop == 0 and fmt.rounding != "stochastic":
        rounded = mag.clone()
    elif fmt.rounding == "nearest_even":
        rounded = mag + (((1 << (drop - 1)) - 1) + ((mag >> drop) & 1))
        rounded &= ~((1 << drop) - 1)
    elif fmt.rounding == "nearest_away":
        rounded = mag + (1 << (drop - 1))
        rounded &= ~((1 << drop) - 1)
    elif fmt.rounding == "toward_zero":
        rounded = mag & ~((1 << drop) - 1)
    else:
        random32 = torch.from_numpy(random_bits32(rng, flat.numel()).astype(np.int64))
        rem = (mag & ((1 << drop) - 1)).to(torch.int64) << (32 - drop)
        rounded = (mag & ~((1 << drop) - 1)) + (random32 < rem).to(torch.int32) * (1 << drop)

    special = mag >= _F32_EXP_MASK  # inf or NaN in the float32 container
    if fmt.exp_bits < 8:
        max_bits = int(np.array(fmt.max_value, dtype=np.float32).view(np.int32))
        over = (rounded > max_bits) & ~(mag > _F32_EXP_MASK)
        rounded = torch.where(over, max_bits if fmt.saturate else _F32_EXP_MASK, rounded)
        special = mag > _F32_EXP_MASK  # only NaN keeps its pattern; inf saturated above
    rounded = torch.where(special, mag, rounded)

    small_limit = (_F32_BIAS + fmt.emin) << _F32_FRAC  # magnitude bits of 2**emin
    needs_exact = (mag < small_limit) & (mag != 0)
    if fmt.exp_bits == 8 and fmt.subnormals:
        needs_exact = None  # float32 subnormals share the target's quantum: the mask path is exact
    result = (rounded | (bits & ~_F32_MAG_MASK)).view(torch.float32)
    if needs_exact is not None and bool(needs_exact.any()):
        index = needs_exact.nonzero().reshape(-1)
        sub_rng = None
        if fmt.rounding == "stochastic":
            # Reuse the draws already made for these positions so both paths consume one stream.
            sub_rng = random32.index_select(0, index).numpy().astype(np.uint64)
        exact = _quantize_subset(flat.index_select(0, index).numpy(), fmt, sub_rng)
        result = result.clone()
        result.index_copy_(0, index, torch.from_numpy(exact))
    return result.reshape(x.shape)


def _quantize_subset(values: np.ndarray, fmt: FloatFormat, random32) -> np.ndarray:
    x = values.astype(np.float64)
    frac, exp2 = np.frexp(np.abs(x))
    codes, _ = round_to_code(
        np.signbit(x), np.ldexp(frac, 53).astype(np.int64), exp2.astype(np.int64) - 53, fmt, random32=random32
    )
    return decode_float(codes, fmt).astype(np.float32)
