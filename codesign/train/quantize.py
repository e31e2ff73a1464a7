"""Quantisation of torch tensors, bit-identical to :mod:`codesign.numerics` on NumPy arrays.

The float path works on float32 bit patterns with integer masks (fast, and what
``benchmarks/bench_float_quantize.py`` measures); values below the target's
smallest normal need a variable rounding position and go through the NumPy
path. Kept out of :mod:`codesign.numerics` so that the numerics a board
imports need NumPy alone.
"""

from __future__ import annotations

import numpy as np
import torch

from codesign.numerics import Format, FixedFormat, FloatFormat, _check_format, _is_torch
from codesign.numerics import msb_slice as msb_slice_values
from codesign.numerics import quantize as quantize_values
from codesign.numerics.fixed_quant import quantize_fixed_numpy
from codesign.numerics.float_quant import (_F32_BIAS, _F32_EXP_MASK, _F32_FRAC, _quantize_subset,
                                           quantize_float_numpy)
from codesign.numerics.rounding import random_bits32

MODE_CODES = {"nearest_even": 0, "nearest_away": 1, "toward_zero": 2, "stochastic": 3}  # the kernel's rounding switch


def quantize(x, fmt: Format, *, rng=None):
    """Round ``x`` (a torch tensor, same dtype out; or an array, float64 out) to the values of ``fmt``."""
    _check_format(fmt)
    if not _is_torch(x):
        return quantize_values(x, fmt, rng=rng)
    if isinstance(fmt, FloatFormat):
        return quantize_float_torch(x, fmt, rng=rng)
    return quantize_fixed_torch(x, fmt, rng=rng)


def msb_slice(x, fmt: FixedFormat, k: int):
    """:func:`codesign.numerics.msb_slice`, returning a tensor of ``x``'s dtype and device for torch input."""
    values, slice_fmt = msb_slice_values(x, fmt, k)
    if _is_torch(x):
        return torch.from_numpy(values).to(dtype=x.dtype, device=x.device), slice_fmt
    return values, slice_fmt


def quantize_fixed_torch(x, fmt: FixedFormat, *, rng=None):
    if x.dtype == torch.float32 and fmt.bits > 24:
        raise ValueError(
            f"a {fmt.bits}-bit fixed-point code does not fit a float32 tensor exactly; use float64 tensors or encode()"
        )
    values = quantize_fixed_numpy(x.detach().cpu().numpy(), fmt, rng=rng)  # checked real there
    return torch.from_numpy(values).to(dtype=x.dtype, device=x.device)


COMPILE_MIN_NUMEL = 1 << 20  # below this, torch.compile's start-up cost outweighs its gain


def _round_f32_bits(bits, random32, drop: int, mode: int, max_bits: int, over_bits: int):
    """Round float32 bit patterns (int32) to ``23 - drop`` fraction bits; elementwise, torch.compile-friendly.

    ``max_bits``/``over_bits``: magnitude limit of the format and what replaces
    larger magnitudes (``max_bits`` when saturating, the float32 inf pattern
    otherwise); ``max_bits < 0`` disables the check (E = 8, where the format's
    range covers float32's).
    """
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
            _compiled_kernel = torch.compile(_round_f32_bits, dynamic=False)
    return _compiled_kernel


def quantize_float_torch(x, fmt: FloatFormat, *, rng=None):
    """torch version of :func:`quantize_float_numpy`; float32 in, float32 out, same bits."""
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
