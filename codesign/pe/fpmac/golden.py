"""Golden kernel of the FP-MAC PE, at the container level the hardware sees.

Operands live in a container of ``1 + exp_bits + max_fb`` bits; a code of the
active format ``(exp_bits, fb)`` sits in it shifted left by ``max_fb - fb``
(docs/numerics.md, "Run-time fraction width").
"""

from __future__ import annotations

import numpy as np

from codesign.numerics import FloatFormat, fp_mac


def clamp_fb(fb, max_fb: int) -> np.ndarray:
    """The hardware clamps the run-time fraction width into [1, max_fb]."""
    return np.clip(np.asarray(fb, dtype=np.int64), 1, max_fb)


def to_container(codes, fb: int, *, max_fb: int) -> np.ndarray:
    """Place ``(exp_bits, fb)`` codes in the ``max_fb`` container."""
    return np.asarray(codes, dtype=np.uint64) << np.uint64(max_fb - fb)


def from_container(words, fb: int, *, max_fb: int) -> np.ndarray:
    """Read ``(exp_bits, fb)`` codes from container words, dropping the bits below ``fb``."""
    return np.asarray(words, dtype=np.uint64) >> np.uint64(max_fb - fb)


def golden_container_mac(a, b, c, fb, *, exp_bits: int, max_fb: int, rounding: str = "nearest_even") -> np.ndarray:
    """``fp_mac`` on container words with a per-element run-time ``fb`` (uint64 out)."""
    a, b, c = (np.asarray(v, dtype=np.uint64) for v in (a, b, c))
    width = 1 + exp_bits + max_fb
    for name, words in (("a", a), ("b", b), ("c", c)):
        if np.any(words >> np.uint64(width)):
            raise ValueError(f"operand {name} has bits above the {width}-bit container")
    a, b, c, active = np.broadcast_arrays(a, b, c, clamp_fb(fb, max_fb))
    out = np.zeros(a.shape, dtype=np.uint64)
    for value in np.unique(active):
        fb_value = int(value)
        sel = active == fb_value
        fmt = FloatFormat(exp_bits=exp_bits, frac_bits=fb_value, rounding=rounding)
        codes = fp_mac(*(from_container(v[sel], fb_value, max_fb=max_fb) for v in (a, b, c)), fmt)
        out[sel] = to_container(codes, fb_value, max_fb=max_fb)
    return out
