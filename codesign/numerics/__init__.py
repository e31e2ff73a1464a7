"""Bit-accurate number formats: the numerics contract of docs/numerics.md in code, on NumPy arrays.

``quantize`` takes array-likes and returns float64; :mod:`codesign.train.quantize`
is the same on torch tensors (same dtype out), with identical bits on identical
inputs. This package needs NumPy alone, so a board imports it.
"""

from __future__ import annotations

from typing import Union

import numpy as np

from codesign.numerics.fixed_quant import (
    decode_fixed,
    encode_fixed,
    msb_slice_format,
    msb_slice_numpy,
    quantize_fixed_numpy,
)
from codesign.numerics.float_quant import (
    decode_float,
    encode_float,
    quantize_float_numpy,
)
from codesign.numerics.formats import ROUNDING_MODES, FixedFormat, FloatFormat
from codesign.numerics.fparith import fp_add, fp_dot, fp_mac, fp_mul

Format = Union[FloatFormat, FixedFormat]

__all__ = [
    "ROUNDING_MODES",
    "FixedFormat",
    "FloatFormat",
    "decode",
    "encode",
    "fp_add",
    "fp_dot",
    "fp_mac",
    "fp_mul",
    "msb_slice",
    "quantize",
]


def _is_torch(x) -> bool:
    return type(x).__module__.startswith("torch")


def _check_format(fmt) -> None:
    if not isinstance(fmt, (FloatFormat, FixedFormat)):
        raise TypeError(f"fmt must be a FloatFormat or FixedFormat, got {type(fmt).__name__}")


def quantize(x, fmt: Format, *, rng=None):
    """Round ``x`` to the values of ``fmt``. ``rng`` (seed or Generator) is required for stochastic rounding."""
    _check_format(fmt)
    if _is_torch(x):
        raise TypeError("codesign.numerics.quantize takes NumPy arrays; quantize torch tensors with "
                        "codesign.train.quantize.quantize")
    if isinstance(fmt, FloatFormat):
        return quantize_float_numpy(x, fmt, rng=rng)
    return quantize_fixed_numpy(x, fmt, rng=rng)


def _as_numpy(x) -> np.ndarray:
    return x.detach().cpu().numpy() if _is_torch(x) else np.asarray(x)


def encode(x, fmt: Format, *, rng=None) -> np.ndarray:
    """Round ``x`` and return its codes as uint64 bit patterns (``fmt.width``/``fmt.bits`` wide)."""
    _check_format(fmt)
    if isinstance(fmt, FloatFormat):
        return encode_float(_as_numpy(x), fmt, rng=rng)
    return encode_fixed(_as_numpy(x), fmt, rng=rng)


def decode(bits, fmt: Format) -> np.ndarray:
    """Bit patterns back to exact float64 values."""
    _check_format(fmt)
    if isinstance(fmt, FloatFormat):
        return decode_float(_as_numpy(bits), fmt)
    return decode_fixed(_as_numpy(bits), fmt)


def msb_slice(x, fmt: FixedFormat, k: int):
    """Top ``k`` bits of each fixed-point code of ``x`` (E²-Train PSG predictors): ``(values, slice_format)``,
    values as NumPy float64 (:func:`codesign.train.quantize.msb_slice` keeps a tensor a tensor)."""
    if not isinstance(fmt, FixedFormat):
        raise TypeError("msb_slice needs a FixedFormat")
    return msb_slice_numpy(_as_numpy(x), fmt, k)


__all__ += ["msb_slice_format"]
