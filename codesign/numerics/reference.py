"""Exact rational reference for the numerics contract, written independently of the vectorised code.

Slow (pure Python ``fractions.Fraction``) and simple on purpose: it follows
docs/numerics.md literally, so the fast golden model and every hardware level
can be checked against it.
"""

from __future__ import annotations

from fractions import Fraction

from codesign.numerics.formats import FixedFormat, FloatFormat


def float_value(code: int, fmt: FloatFormat) -> Fraction:
    """Exact value of a code; -0 comes back as 0 (read the sign from the code)."""
    sign = code >> (fmt.width - 1)
    field = (code >> fmt.frac_bits) & ((1 << fmt.exp_bits) - 1)
    frac = code & ((1 << fmt.frac_bits) - 1)
    if field == 0:
        magnitude = Fraction(frac if fmt.subnormals else 0, 1 << fmt.frac_bits) * Fraction(2) ** fmt.emin
    else:
        magnitude = (1 + Fraction(frac, 1 << fmt.frac_bits)) * Fraction(2) ** (field - fmt.bias)
    return -magnitude if sign else magnitude


def _binade(magnitude: Fraction) -> int:
    exponent = magnitude.numerator.bit_length() - magnitude.denominator.bit_length()
    while Fraction(2) ** exponent > magnitude:
        exponent -= 1
    while Fraction(2) ** (exponent + 1) <= magnitude:
        exponent += 1
    return exponent


def _round_integer(n: Fraction, rounding: str) -> int:
    floor = n.numerator // n.denominator
    rest = n - floor
    if rounding == "toward_zero" or rest == 0:
        return floor
    if rounding == "nearest_even":
        return floor + (rest > Fraction(1, 2) or (rest == Fraction(1, 2) and floor % 2 == 1))
    if rounding == "nearest_away":
        return floor + (rest >= Fraction(1, 2))
    raise ValueError(f"the reference rounds deterministically, not {rounding!r}")


def round_float(value: Fraction, negative: bool, fmt: FloatFormat) -> int:
    """Code of ``value`` rounded to ``fmt`` (``negative`` carries the sign of zero). Saturates."""
    magnitude = abs(value)
    sign_bit = int(negative) << (fmt.width - 1)
    if magnitude == 0:
        return sign_bit
    binade = _binade(magnitude)
    if fmt.subnormals:
        binade = max(binade, fmt.emin)
    quantum = Fraction(2) ** (binade - fmt.frac_bits)
    rounded = _round_integer(magnitude / quantum, fmt.rounding) * quantum
    if rounded > Fraction(fmt.max_value):
        rounded = Fraction(fmt.max_value)
    if rounded == 0 or (not fmt.subnormals and rounded < Fraction(2) ** fmt.emin):
        return sign_bit
    if rounded < Fraction(2) ** fmt.emin:
        return sign_bit | int(rounded / Fraction(2) ** (fmt.emin - fmt.frac_bits))
    exponent = _binade(rounded)
    fraction = rounded / Fraction(2) ** exponent - 1
    return sign_bit | ((exponent + fmt.bias) << fmt.frac_bits) | int(fraction * (1 << fmt.frac_bits))


def _is_negative(code: int, fmt: FloatFormat) -> bool:
    return bool(code >> (fmt.width - 1))


def reference_mul(a: int, b: int, fmt: FloatFormat) -> int:
    product = float_value(a, fmt) * float_value(b, fmt)
    return round_float(product, _is_negative(a, fmt) != _is_negative(b, fmt), fmt)


def reference_add(x: int, y: int, fmt: FloatFormat) -> int:
    total = float_value(x, fmt) + float_value(y, fmt)
    if total == 0:
        return round_float(total, _is_negative(x, fmt) and _is_negative(y, fmt), fmt)
    return round_float(total, total < 0, fmt)


def reference_mac(a: int, b: int, c: int, fmt: FloatFormat) -> int:
    return reference_add(reference_mul(a, b, fmt), c, fmt)


def reference_quantize_float(x: float, fmt: FloatFormat) -> int:
    """Code of a finite Python float rounded to ``fmt`` (exact: Fraction(x) is the float's value)."""
    value = Fraction(x)
    return round_float(value, x < 0 or (x == 0 and str(x).startswith("-")), fmt)


def reference_quantize_fixed(x: float, fmt: FixedFormat) -> int:
    """Signed integer code of a finite float in ``fmt`` (deterministic rounding modes)."""
    scaled = Fraction(x) * Fraction(2) ** fmt.frac_bits
    magnitude = _round_integer(abs(scaled), fmt.rounding)  # all three modes are symmetric in the sign
    code = -magnitude if scaled < 0 else magnitude
    if fmt.saturate:
        return min(max(code, fmt.min_code), fmt.max_code)
    code %= 1 << fmt.bits
    return code - (1 << fmt.bits) if fmt.signed and code > fmt.max_code else code
