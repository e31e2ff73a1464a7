"""Arithmetic spec of the FP-MAC array PE (docs/fpmac_array.md), validated before anything is generated.

Only what changes the numbers, the word stream or the buffer sizes lives
here; part, clock and top name are a :class:`codesign.hw.target.BuildTarget`.
"""

from __future__ import annotations

from dataclasses import asdict

from codesign.numerics.formats import FLOAT_EXP_BITS, FLOAT_FRAC_BITS, _check_int
from codesign.numerics.records import keyword_record
from codesign.pe.fpmac.spec import ROUNDING_CODES

MAX_ARRAY = 16  # MACs along one side of the array
DIM_BITS = 8  # one header field per dimension (docs/fpmac_array.md)
MAX_DIM = (1 << DIM_BITS) - 1
M_BITS = 7  # a GEMM's M: bits 6..0 of its field, bit 7 asks for ReLU on the results
MAX_M = (1 << M_BITS) - 1


def ceil_div(n: int, d: int) -> int:
    return -(-n // d)


@keyword_record
class FpmacArraySpec:
    """``rows`` x ``cols`` FP-MACs in format ``(exp_bits, fb <= max_fb)`` over buffers for up to max_m x max_k x max_n.

    A transaction may use any ``M <= max_m``, ``N <= max_n``, ``K <= max_k``
    and any ``fb`` in ``[1, max_fb]``; the operand buffers are sized by the
    maxima (containers of ``1 + exp_bits + max_fb`` bits).
    """

    exp_bits: int = 8
    max_fb: int = 23
    rounding: str = "nearest_even"
    rows: int = 4
    cols: int = 4
    max_m: int = 32
    max_n: int = 32
    max_k: int = 32

    def __post_init__(self) -> None:
        _check_int("exp_bits", self.exp_bits, *FLOAT_EXP_BITS)
        _check_int("max_fb", self.max_fb, *FLOAT_FRAC_BITS)
        if self.rounding not in ROUNDING_CODES:
            raise ValueError(f"rounding={self.rounding!r}: the FP-MAC hardware implements {', '.join(ROUNDING_CODES)}")
        _check_int("rows", self.rows, 1, MAX_ARRAY)
        _check_int("cols", self.cols, 1, MAX_ARRAY)
        _check_int("max_m", self.max_m, 1, MAX_M)
        for name in ("max_n", "max_k"):
            _check_int(name, getattr(self, name), 1, MAX_DIM)

    @property
    def width(self) -> int:
        """Container bits: sign + exponent + max_fb fraction bits (at most 32)."""
        return 1 + self.exp_bits + self.max_fb

    @property
    def rounding_code(self) -> int:
        """RTL/HLS parameter value: 0 nearest_even, 1 nearest_away, 2 toward_zero."""
        return ROUNDING_CODES[self.rounding]

    @property
    def macs(self) -> int:
        """FP-MACs working in one cycle."""
        return self.rows * self.cols

    @property
    def tile_rows(self) -> int:
        """Row tiles of the largest C (``ceil(max_m / rows)``): depth factor of the A banks and the C banks."""
        return ceil_div(self.max_m, self.rows)

    @property
    def tile_cols(self) -> int:
        """Column tiles of the largest C (``ceil(max_n / cols)``)."""
        return ceil_div(self.max_n, self.cols)

    def to_dict(self) -> dict:
        """Every field, as transaction-file metadata."""
        return asdict(self)
