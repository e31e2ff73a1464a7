"""The build target of a PE: where and how it is built, kept apart from what it computes.

A PE's arithmetic spec (formats, widths, block sizes) says what the hardware
computes and is all the golden model, the RTL and the stimulus need. The
build target says which FPGA part, which HLS clock, which data interface and
which top-function name the generated project uses; it changes the Vitis HLS
project and the fit estimate, never a result bit.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass

from codesign.boards import Board, board, board_for_part

INTERFACES = ("m_axi", "axis")
CLOCK_RANGE_NS = (1.0, 100.0)
_C_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@dataclass(frozen=True, kw_only=True)
class BuildTarget:
    """FPGA ``part`` (must belong to a board in ``boards/``), HLS clock period (ns), data interface and top name.

    ``interface`` and ``top`` may stay None: the PE then picks its first
    supported interface and ``<pe>_kernel`` (see :meth:`resolve`).
    """

    part: str = "xc7z020clg484-1"
    clock_period_ns: float = 10.0
    interface: str | None = None
    top: str | None = None

    def __post_init__(self) -> None:
        board_for_part(self.part)
        if isinstance(self.clock_period_ns, bool) or not isinstance(self.clock_period_ns, (int, float)):
            raise TypeError("clock_period_ns must be a number")
        low, high = CLOCK_RANGE_NS
        if not low <= self.clock_period_ns <= high:
            raise ValueError(f"clock_period_ns={self.clock_period_ns} is out of range [{low:g}, {high:g}] ns")
        if self.interface is not None and self.interface not in INTERFACES:
            raise ValueError(f"interface={self.interface!r} is not one of {', '.join(INTERFACES)}")
        if self.top is not None and (not isinstance(self.top, str) or not _C_IDENTIFIER.match(self.top)):
            raise ValueError(f"top={self.top!r} is not a C identifier")

    @classmethod
    def for_board(cls, name: str, **fields) -> BuildTarget:
        """The target on board ``name``'s part."""
        return cls(part=board(name).part, **fields)

    @property
    def board(self) -> Board:
        return board_for_part(self.part)

    def resolve(self, pe_name: str, interfaces: tuple[str, ...]) -> BuildTarget:
        """This target with interface and top filled in for a PE; refuses an interface the PE lacks."""
        interface = self.interface or interfaces[0]
        if interface not in interfaces:
            raise ValueError(f"the {pe_name} PE supports interface(s) {', '.join(interfaces)}, not {interface!r}")
        return BuildTarget(part=self.part, clock_period_ns=self.clock_period_ns, interface=interface,
                           top=self.top or f"{pe_name}_kernel")

    def to_dict(self) -> dict:
        return asdict(self)
