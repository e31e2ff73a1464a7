"""Hardware spec of the FP-MAC PE: everything the generators need, validated before any file is written."""

from __future__ import annotations

from dataclasses import asdict

from codesign.numerics.formats import (
    DETERMINISTIC_ROUNDING,
    FLOAT_EXP_BITS,
    FLOAT_FRAC_BITS,
    _check_int,
)
from codesign.numerics.records import keyword_record

ROUNDING_CODES = {name: index for index, name in enumerate(DETERMINISTIC_ROUNDING)}
# every container (at most 1 + 8 + 23 bits) travels in one WORD_BITS-bit word

LATENCY = 4  # clock cycles from in_valid to out_valid; the RTL's LATENCY parameter is checked against it


@keyword_record
class FpmacSpec:
    """One FP-MAC PE: ``exp_bits`` exponent bits, up to ``max_fb`` fraction bits chosen at run time.

    ``max_vectors`` bounds the MAC count per call and sizes the m_axi depth for
    co-simulation. Where it is built (part, clock, interface, top name) is a
    :class:`codesign.hw.target.BuildTarget`, not part of the arithmetic.
    """

    exp_bits: int = 8
    max_fb: int = 23
    rounding: str = "nearest_even"
    max_vectors: int = 65536

    def __post_init__(self) -> None:
        _check_int("exp_bits", self.exp_bits, *FLOAT_EXP_BITS)
        _check_int("max_fb", self.max_fb, *FLOAT_FRAC_BITS)
        if self.rounding not in ROUNDING_CODES:
            raise ValueError(
                f"rounding={self.rounding!r}: the FP-MAC hardware implements {', '.join(ROUNDING_CODES)}"
            )
        _check_int("max_vectors", self.max_vectors, 1, 1 << 20)

    @property
    def width(self) -> int:
        """Container bits: sign + exponent + max_fb fraction bits."""
        return 1 + self.exp_bits + self.max_fb

    @property
    def fb_bits(self) -> int:
        """Width of the run-time fb port (bits)."""
        return self.max_fb.bit_length()

    @property
    def rounding_code(self) -> int:
        """RTL/HLS parameter value: 0 nearest_even, 1 nearest_away, 2 toward_zero."""
        return ROUNDING_CODES[self.rounding]

    def to_dict(self) -> dict:
        return asdict(self)
