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
# C++17 keywords and alternative tokens ([lex.key] table 5, [lex.digraph] table 6 of ISO/IEC 14882:2017), plus the
# C++20 keywords a newer compiler reserves; none may name a function.
CXX_KEYWORDS = frozenset("""
    alignas alignof asm auto bool break case catch char char16_t char32_t class const constexpr const_cast continue
    decltype default delete do double dynamic_cast else enum explicit export extern false float for friend goto if
    inline int long mutable namespace new noexcept nullptr operator private protected public register
    reinterpret_cast return short signed sizeof static static_assert static_cast struct switch template this
    thread_local throw true try typedef typeid typename union unsigned using virtual void volatile wchar_t while
    and and_eq bitand bitor compl not not_eq or or_eq xor xor_eq
    char8_t concept consteval constinit co_await co_return co_yield requires
""".split())
# the C simulation testbench's entry point, and namespaces and types every generated project includes
RESERVED_NAMES = frozenset({"main", "std", "hls", "ap_int", "ap_uint", "ap_fixed", "ap_ufixed"})
MAX_TOP_LENGTH = 64  # Vivado IP names stay well below this


def check_top_name(top: object) -> str:
    """``top`` as a legal HLS top-function name, or ValueError saying why not: a C++ identifier, not a C++17
    keyword (:data:`CXX_KEYWORDS`), not ``main``, and not a name the C++ standard reserves for the implementation
    (a double underscore anywhere, or an underscore followed by a capital letter at the start)."""
    if not isinstance(top, str) or not _C_IDENTIFIER.match(top):
        raise ValueError(f"top={top!r} is not a C identifier (letters, digits and _, not starting with a digit)")
    if top in CXX_KEYWORDS:
        raise ValueError(f"top={top!r} is a C++ keyword; choose another top-function name")
    if top in RESERVED_NAMES:
        raise ValueError(f"top={top!r} is reserved: the C simulation testbench's main, or a namespace or type every "
                         "generated project includes; choose another top-function name")
    if "__" in top or re.match(r"^_[A-Z]", top):
        raise ValueError(f"top={top!r} is reserved by the C++ standard (a double underscore, or _ and a capital "
                         "letter at the start)")
    if len(top) > MAX_TOP_LENGTH:
        raise ValueError(f"top={top[:16]!r}...: at most {MAX_TOP_LENGTH} characters, got {len(top)}")
    return top


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
        if self.top is not None:
            check_top_name(self.top)

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
