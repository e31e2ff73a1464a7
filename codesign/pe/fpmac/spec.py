"""Hardware spec of the FP-MAC PE: everything the generators need, validated before any file is written."""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass

from codesign.boards import board_for_part
from codesign.numerics.formats import DETERMINISTIC_ROUNDING, FLOAT_EXP_BITS, FLOAT_FRAC_BITS, _check_int

INTERFACES = ("m_axi", "axis")
ROUNDING_CODES = {name: index for index, name in enumerate(DETERMINISTIC_ROUNDING)}
WORD_BITS = 32  # every container (at most 1 + 8 + 23 bits) travels in one 32-bit word
_C_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@dataclass(frozen=True, kw_only=True)
class FpmacSpec:
    """One FP-MAC PE: ``exp_bits`` exponent bits, up to ``max_fb`` fraction bits chosen at run time.

    ``clock_period_ns`` is the HLS target clock (ns); ``max_vectors`` bounds the
    MAC count per call and sizes the m_axi depth for co-simulation.
    """

    exp_bits: int = 8
    max_fb: int = 23
    rounding: str = "nearest_even"
    interface: str = "m_axi"
    part: str = "xc7z020clg484-1"
    clock_period_ns: float = 10.0
    top: str = "fpmac_kernel"
    max_vectors: int = 65536

    def __post_init__(self) -> None:
        _check_int("exp_bits", self.exp_bits, *FLOAT_EXP_BITS)
        _check_int("max_fb", self.max_fb, *FLOAT_FRAC_BITS)
        if self.rounding not in ROUNDING_CODES:
            raise ValueError(
                f"rounding={self.rounding!r}: the FP-MAC hardware implements {', '.join(ROUNDING_CODES)}"
            )
        if self.interface not in INTERFACES:
            raise ValueError(f"interface={self.interface!r} is not one of {', '.join(INTERFACES)}")
        board_for_part(self.part)
        if isinstance(self.clock_period_ns, bool) or not isinstance(self.clock_period_ns, (int, float)):
            raise TypeError("clock_period_ns must be a number")
        if not 1.0 <= self.clock_period_ns <= 100.0:
            raise ValueError(f"clock_period_ns={self.clock_period_ns} is out of range [1, 100] ns")
        if not isinstance(self.top, str) or not _C_IDENTIFIER.match(self.top):
            raise ValueError(f"top={self.top!r} is not a C identifier")
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
