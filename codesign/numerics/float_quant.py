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


MODE_CODES = {"nearest_even": 0, "nearest_away": 1, "toward_zero": 2, "stochastic": 3}
COMPILE_MIN_NUMEL = 1 << 20  # below this, torch.compile's start-up cost outweighs its gain


def _round_f32_bits(bits, random32, drop: int, mode: int, max_bits: int, over_bits: int):
    """Round float32 bit patterns (int32) to ``23 - drop`` fraction bits; elementwise, torch.compile-friendly.

    ``max_bits``/``over_bits``: magnitude limit of the format and what replaces
    larger magnitudes (``max_bits`` when saturating, the float32 inf pattern
    otherwise); ``max_bits < 0`` disables the check (E = 8, where the format's
    range covers float32's).
    """
    import torch

    mag = bits & 0x7FFFFFFF
    low = (1 << drop) - 1
    if drop == 0:
        rounded = mag
    elif mode == 0:
        rounded = mag + (((mag >> drop) & 1) + (low >> 1))
    elif mode == 1:
        rounded = mag + (1 << (drop - 1))
    elif mode == 2:
        rounded = mag
    else:
        remainder = (mag & low).to(torch.int64) << (32 - drop)
        rounded = mag + (random32 < remainder).to(torch.int32) * (1 << drop)
    rounded = rounded & ~low
    if max_bits >= 0:
        rounded = torch.where(rounded > max_bits, over_bits, rounded)
    rounded = torch.where(mag > _F32_EXP_MASK, mag, rounded)  # NaN keeps its pattern
    return rounded | (bits & -0x80000000)


_compiled_kernel = None


def _kernel_for(numel: int):
    """The eager kernel, or its torch.compile'd form for large tensors (CODESIGN_TORCH_COMPILE=0/1/auto)."""
    global _compiled_kernel
    import os

    choice = os.environ.get("CODESIGN_TORCH_COMPILE", "auto")
    if choice not in ("0", "1", "auto"):
        raise ValueError(f"CODESIGN_TORCH_COMPILE={choice!r}: expected 0, 1 or auto")
    if choice == "0" or (choice == "auto" and numel < COMPILE_MIN_NUMEL):
        return _round_f32_bits
    if _compiled_kernel is None:
        import torch

        _compiled_kernel = torch.compile(_round_f32_bits, dynamic=False)
    return _compiled_kernel


def quantize_float_torch(x, fmt: FloatFormat, *, rng=None):
    """torch version of :func:`quantize_float_numpy`; float32 in, float32 out, same bits."""
    import torch

    if x.dtype != torch.float32:
        values = quantize_float_numpy(x.detach().cpu().numpy(), fmt, rng=rng)
        return torch.from_numpy(values).to(dtype=x.dtype, device=x.device)
    flat = x.detach().contiguous().reshape(-1)
    bits = flat.view(torch.int32)
    random32 = None
    if fmt.rounding == "stochastic":
        random32 = torch.from_numpy(random_bits32(rng, flat.numel()).astype(np.int64))
    max_bits = over_bits = -1
    if fmt.exp_bits < 8:
        max_bits = int(np.array(fmt.max_value, dtype=np.float32).view(np.int32))
        over_bits = max_bits if fmt.saturate else _F32_EXP_MASK
    kernel = _kernel_for(flat.numel())
    result = kernel(bits, random32, _F32_FRAC - fmt.frac_bits, MODE_CODES[fmt.rounding], max_bits, over_bits)
    result = result.view(torch.float32)

    # Below the target's smallest normal the rounding position moves with the
    # exponent; those (rare) values take the exact NumPy path. For E = 8 with
    # subnormals the float32 subnormals share the target quantum already.
    if not (fmt.exp_bits == 8 and fmt.subnormals):
        mag = bits & 0x7FFFFFFF
        needs_exact = (mag < ((_F32_BIAS + fmt.emin) << _F32_FRAC)) & (mag != 0)
        if bool(needs_exact.any()):
            index = needs_exact.nonzero().reshape(-1)
            subset_random = None if random32 is None else random32.index_select(0, index).numpy().astype(np.uint64)
            exact = _quantize_subset(flat.index_select(0, index).numpy(), fmt, subset_random)
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
