"""Number formats: validated, frozen descriptions of how values are stored in bits.

The exact semantics (ties, subnormals, overflow, signed zero, NaN) are written
down in docs/numerics.md; every quantiser and every hardware level follows it.
"""

from __future__ import annotations

from codesign.numerics.records import keyword_record

ROUNDING_MODES = ("nearest_even", "nearest_away", "toward_zero", "stochastic")
DETERMINISTIC_ROUNDING = ROUNDING_MODES[:3]

FLOAT_EXP_BITS = (2, 8)
FLOAT_FRAC_BITS = (1, 23)
FIXED_BITS = (1, 32)
FIXED_FRAC_BITS = (-64, 64)


def _check_int(name: str, value: object, low: int, high: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    if not low <= value <= high:
        raise ValueError(f"{name}={value} is out of range [{low}, {high}]")


def _check_rounding(rounding: object) -> None:
    if rounding not in ROUNDING_MODES:
        raise ValueError(f"rounding={rounding!r} is not one of {', '.join(ROUNDING_MODES)}")


@keyword_record
class FloatFormat:
    """Sign, ``exp_bits`` exponent bits and ``frac_bits`` fraction bits (the ABVS "FB").

    No code is reserved for inf/NaN: the all-ones exponent is an ordinary binade.
    """

    exp_bits: int = 8
    frac_bits: int = 23
    rounding: str = "nearest_even"
    subnormals: bool = True
    saturate: bool = True

    def __post_init__(self) -> None:
        _check_int("exp_bits", self.exp_bits, *FLOAT_EXP_BITS)
        _check_int("frac_bits", self.frac_bits, *FLOAT_FRAC_BITS)
        _check_rounding(self.rounding)
        for flag in ("subnormals", "saturate"):
            if not isinstance(getattr(self, flag), bool):
                raise TypeError(f"{flag} must be a bool")

    @property
    def width(self) -> int:
        """Bits per code: sign + exponent + fraction."""
        return 1 + self.exp_bits + self.frac_bits

    @property
    def bias(self) -> int:
        return (1 << (self.exp_bits - 1)) - 1

    @property
    def emin(self) -> int:
        """Exponent of the smallest normal binade."""
        return 1 - self.bias

    @property
    def emax(self) -> int:
        """Exponent of the largest binade (the all-ones field is finite)."""
        return (1 << self.exp_bits) - 1 - self.bias

    @property
    def max_code(self) -> int:
        """Magnitude code of the largest finite value."""
        return (1 << (self.exp_bits + self.frac_bits)) - 1

    @property
    def max_value(self) -> float:
        return (2.0 - 2.0**-self.frac_bits) * 2.0**self.emax

    @property
    def min_normal(self) -> float:
        return 2.0**self.emin

    @property
    def min_subnormal(self) -> float:
        return 2.0 ** (self.emin - self.frac_bits)

    def with_frac_bits(self, frac_bits: int) -> FloatFormat:
        return FloatFormat(
            exp_bits=self.exp_bits,
            frac_bits=frac_bits,
            rounding=self.rounding,
            subnormals=self.subnormals,
            saturate=self.saturate,
        )


@keyword_record
class FixedFormat:
    """``bits``-wide integer code ``q`` standing for ``q * 2**-frac_bits``."""

    bits: int
    frac_bits: int
    signed: bool = True
    rounding: str = "nearest_even"
    saturate: bool = True

    def __post_init__(self) -> None:
        _check_int("bits", self.bits, 2 if self.signed else 1, FIXED_BITS[1])
        _check_int("frac_bits", self.frac_bits, *FIXED_FRAC_BITS)
        _check_rounding(self.rounding)
        for flag in ("signed", "saturate"):
            if not isinstance(getattr(self, flag), bool):
                raise TypeError(f"{flag} must be a bool")

    @property
    def min_code(self) -> int:
        return -(1 << (self.bits - 1)) if self.signed else 0

    @property
    def max_code(self) -> int:
        return (1 << (self.bits - 1)) - 1 if self.signed else (1 << self.bits) - 1

    @property
    def scale(self) -> float:
        """Value of one code step (the quantum)."""
        return 2.0**-self.frac_bits

    @property
    def min_value(self) -> float:
        return self.min_code * self.scale

    @property
    def max_value(self) -> float:
        return self.max_code * self.scale
