"""The stream contract's shared numbers: word width and status codes, the one place they are written.

Python imports them from here; the C++ header ``hls_templates/include/codesign_constants.h``
and the Verilog include ``rtl/include/codesign_constants.vh`` are generated from this
module (:mod:`codesign.hw.constants_gen`, ``python -m codesign.hw.constants_gen``) and
committed, so HLS projects, Yosys and the simulators read plain files; a test checks that the
committed files are what this module generates.

Every stream PE answers a transaction with one status word first: 0 accepts it, anything
else refuses it (nothing else follows). The codes a PE can give and what they mean are
listed per PE family in :data:`STATUS_CODES`. The board runtime imports this module, so it
needs the standard library alone (Python >= 3.8).
"""

from __future__ import annotations

from typing import Dict, Mapping, NamedTuple, Tuple

WORD_BITS = 32  # stream words, the AXI data bus and the shell's registers (bits)
WORD_MASK = (1 << WORD_BITS) - 1
STATUS_BITS = 2  # the status field, the low bits of the status word (bits; the rest are 0)


class StatusCode(NamedTuple):
    """One status word value: its C/Verilog identifier (after ``STATUS_``), its number, and what it means."""

    name: str
    value: int
    meaning: str


_OK = StatusCode("OK", 0, "ok")
_BAD_HEADER = StatusCode("BAD_HEADER", 1, "bad header")

# PE family -> its status codes, in value order (docs/csb.md, docs/fpmac_array.md, docs/tt_pe.md)
STATUS_CODES: Dict[str, Tuple[StatusCode, ...]] = {
    "csb": (_OK, _BAD_HEADER, StatusCode("NNZ", 2, "nnz above the block capacity"),
            StatusCode("INDEX", 3, "index outside the block")),
    "fpmac_array": (_OK, _BAD_HEADER, StatusCode("TOO_LARGE", 2, "too large")),
    "tt": (_OK, _BAD_HEADER, StatusCode("TOO_LARGE", 2, "too large")),
}


def _check() -> None:
    """Codes are numbered 0.. in order, fit the status field, and 0 and 1 mean the same for every PE."""
    for family, codes in STATUS_CODES.items():
        if [code.value for code in codes] != list(range(len(codes))) or len(codes) > 1 << STATUS_BITS:
            raise ValueError(f"{family}'s status codes must be numbered 0..{(1 << STATUS_BITS) - 1} in order")
        if codes[:2] != (_OK, _BAD_HEADER):
            raise ValueError(f"{family}'s status codes must start with OK and BAD_HEADER")


_check()


def status_code(family: str, name: str) -> int:
    """The value of status ``name`` (e.g. ``"TOO_LARGE"``) of PE ``family``; a clear error for an unknown one."""
    for code in STATUS_CODES[family]:
        if code.name == name:
            return code.value
    raise KeyError(f"PE {family} has no status {name!r}; it has {', '.join(c.name for c in STATUS_CODES[family])}")


def status_names(family: str) -> Mapping[int, str]:
    """Status value -> what it means, for the messages of a refused transaction."""
    return {code.value: code.meaning for code in STATUS_CODES[family]}


STATUS_OK = _OK.value
STATUS_BAD_HEADER = _BAD_HEADER.value
