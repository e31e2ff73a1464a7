"""Floating-point arithmetic on codes: each operation is exact, then rounded once.

This is the golden model the FP-MAC hardware is proven against. The adder
aligns the smaller operand with ``GUARD_BITS`` extra bits and folds what falls
off into a sticky bit, which is enough for a correctly rounded sum in the
three deterministic modes (the exponent gap then exceeds the guard bits, the
larger operand is normal, and the result loses at most one bit of
normalisation). Tests check it against ``fractions.Fraction``.
"""

from __future__ import annotations

import numpy as np

from codesign.numerics.formats import DETERMINISTIC_ROUNDING, FloatFormat
from codesign.numerics.rounding import MANT_LIMIT_BITS, round_to_code, split_code

GUARD_BITS = 3


def _check_arith_format(fmt: FloatFormat) -> None:
    if not isinstance(fmt, FloatFormat):
        raise TypeError("FP arithmetic needs a FloatFormat")
    if not fmt.saturate:
        raise ValueError("FP arithmetic implements saturating formats only (saturate=True)")
    if fmt.rounding not in DETERMINISTIC_ROUNDING:
        raise ValueError(f"FP arithmetic rounds with {', '.join(DETERMINISTIC_ROUNDING)}, not {fmt.rounding!r}")


def fp_mul(a, b, fmt: FloatFormat) -> np.ndarray:
    """round(a * b) on codes. A zero product has the sign a XOR b."""
    _check_arith_format(fmt)
    sa, ma, ea = split_code(a, fmt)
    sb, mb, eb = split_code(b, fmt)
    codes, _ = round_to_code(sa ^ sb, ma * mb, ea + eb, fmt)
    return codes


def fp_add(x, y, fmt: FloatFormat) -> np.ndarray:
    """round(x + y) on codes. An exact zero sum has the sign x AND y."""
    _check_arith_format(fmt)
    sx, mx, ex = split_code(x, fmt)
    sy, my, ey = split_code(y, fmt)
    sx, mx, ex, sy, my, ey = np.broadcast_arrays(sx, mx, ex, sy, my, ey)
    # Order the operands so that operand 1 has the larger (exponent, significand).
    swap = (ey > ex) | ((ey == ex) & (my > mx))
    s1, m1, e1 = np.where(swap, sy, sx), np.where(swap, my, mx), np.where(swap, ey, ex)
    s2, m2, e2 = np.where(swap, sx, sy), np.where(swap, mx, my), np.where(swap, ex, ey)

    gap = np.minimum(e1 - e2, MANT_LIMIT_BITS)
    wide1 = m1 << GUARD_BITS
    wide2 = m2 << GUARD_BITS
    aligned2 = wide2 >> gap
    sticky = (aligned2 << gap) != wide2
    subtract = s1 != s2
    # With sticky set the true operand 2 is a little larger than aligned2: in a
    # difference, borrow one unit and keep the sticky bit as the remainder.
    mant = np.where(subtract, wide1 - aligned2 - sticky, wide1 + aligned2)
    exact_zero = (mant == 0) & ~sticky
    sign = np.where(exact_zero, s1 & s2, s1)
    codes, _ = round_to_code(sign, mant, e1 - GUARD_BITS, fmt, sticky=sticky)
    return codes


def fp_mac(a, b, acc, fmt: FloatFormat) -> np.ndarray:
    """round(round(a * b) + acc): a multiplier followed by an adder, not fused."""
    return fp_add(fp_mul(a, b, fmt), acc, fmt)


def fp_dot(a, b, acc0, fmt: FloatFormat) -> np.ndarray:
    """Ordered dot product over the last axis: ``acc_k = fp_mac(a[..., k], b[..., k], acc_{k-1})``."""
    a = np.asarray(a, dtype=np.uint64)
    b = np.asarray(b, dtype=np.uint64)
    if a.shape != b.shape:
        raise ValueError(f"operand shapes differ: {a.shape} vs {b.shape}")
    acc = np.broadcast_to(np.asarray(acc0, dtype=np.uint64), a.shape[:-1]).copy()
    for k in range(a.shape[-1]):
        acc = fp_mac(a[..., k], b[..., k], acc, fmt)
    return acc
