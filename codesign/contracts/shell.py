"""The accelerator shell's facts that both sides of the flow read: arguments, register map, file names, design.json.

The desktop renders the shell (:mod:`codesign.shell.ip`); the board runtime
(:mod:`codesign.deploy`) drives it through these registers and reads the
build folder by these names. Keeping them here, free of the template engine,
is what lets the board import them with the standard library alone.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, Optional, Sequence, Tuple

from codesign.contracts.constants import WORD_BITS
from codesign.io.project import PROJECT_MARKER, read_project_marker

MANIFEST_FILE = "design.json"
MANIFEST_FORMAT = "codesign-design"
MANIFEST_VERSION = 2  # 2: design.json records the board's facts and the golden loop's set-up (``board_facts``, ``loop``)

# -------------------------------------------------------------------------- the argument list

KINDS = ("pointer", "scalar")
DIRECTIONS = ("read", "write")
AXI_WORD_BITS = WORD_BITS  # the shell's register and data-bus width (bits)
POINTER_BITS = 64  # Vitis HLS keeps m_axi offsets as 64-bit registers, on Zynq-7000 too
# A lower-case C identifier: the rule for argument, bundle and IP instance names (use with ``fullmatch``).
LOWER_IDENTIFIER = re.compile(r"[a-z][a-z0-9_]*")


def is_lower_identifier(value: object) -> bool:
    """Whether ``value`` is a string matching :data:`LOWER_IDENTIFIER` (argument, bundle and IP instance names)."""
    return isinstance(value, str) and LOWER_IDENTIFIER.fullmatch(value) is not None


@dataclass(frozen=True)
class ShellArg:
    """One argument of the shell's top function.

    ``kind`` is ``pointer`` (an m_axi port on ``bundle``; ``width`` is the bits
    of one memory word, ``direction`` whether the shell reads or writes it) or
    ``scalar`` (an s_axilite register of ``width`` bits).
    """

    name: str
    kind: str
    width: int
    bundle: Optional[str] = None
    direction: Optional[str] = None
    doc: str = ""

    def __post_init__(self) -> None:
        if not is_lower_identifier(self.name):
            raise ValueError(f"argument name {self.name!r} must be a lower-case C identifier")
        if self.kind not in KINDS:
            raise ValueError(f"argument {self.name}: kind {self.kind!r} is not one of {', '.join(KINDS)}")
        if self.width not in (8, 16, 32, 64):
            raise ValueError(f"argument {self.name}: width {self.width} is not 8, 16, 32 or 64 bits")
        if self.kind == "pointer":
            if not is_lower_identifier(self.bundle):
                raise ValueError(f"pointer argument {self.name} needs an m_axi bundle name")
            if self.direction not in DIRECTIONS:
                raise ValueError(f"pointer argument {self.name}: direction must be one of {', '.join(DIRECTIONS)}")
        elif self.bundle is not None or self.direction is not None:
            raise ValueError(f"scalar argument {self.name} takes no bundle or direction")

    @property
    def register_bits(self) -> int:
        """Bits of the s_axilite register holding this argument (a pointer holds a 64-bit byte address)."""
        return POINTER_BITS if self.kind == "pointer" else self.width

    @property
    def ctype(self) -> str:
        """C type of the argument in the shell's signature."""
        word = f"uint{self.width}_t"
        if self.kind == "scalar":
            return word
        return f"const {word} *" if self.direction == "read" else f"{word} *"

    @property
    def port(self) -> str | None:
        """The m_axi interface name Vivado shows for a pointer (``m_axi_<bundle>``)."""
        return f"m_axi_{self.bundle}" if self.kind == "pointer" else None


SHELL_ARGS: Tuple[ShellArg, ...] = (
    ShellArg(name="in", kind="pointer", width=32, bundle="gmem0", direction="read",
             doc="byte address of the input words (the PE's input stream, all transactions back to back)"),
    ShellArg(name="out", kind="pointer", width=32, bundle="gmem1", direction="write",
             doc="byte address of the output buffer"),
    ShellArg(name="n_in", kind="scalar", width=32, doc="input words to read"),
    ShellArg(name="n_out", kind="scalar", width=32, doc="output words to write"),
    ShellArg(name="n_transactions", kind="scalar", width=32, doc="process() calls"),
    ShellArg(name="calls", kind="pointer", width=32, bundle="gmem0", direction="read",
             doc="byte address of a call list (codesign.contracts.calls); with n_calls > 0, in and out hold the "
                 "arena's base"),
    ShellArg(name="n_calls", kind="scalar", width=32, doc="calls in the list; 0 runs the direct call above"),
)

CONTROL_BUNDLE = "control"
# Block-level registers of an ap_ctrl_hs s_axilite slave, and the bits of CTRL (byte offsets, bit numbers).
CONTROL_REGISTERS = {"CTRL": 0x00, "GIE": 0x04, "IER": 0x08, "ISR": 0x0C}
FIRST_ARGUMENT_OFFSET = 0x10
CTRL_BITS = {"ap_start": 0, "ap_done": 1, "ap_idle": 2, "ap_ready": 3, "auto_restart": 7}
ISR_BITS = {"ap_done": 0, "ap_ready": 1}


def register_map(args: Sequence[ShellArg] = SHELL_ARGS) -> Dict[str, int]:
    """Byte offsets of the control registers and of every argument's first data word.

    The layout is the one Vitis HLS gives an s_axilite bundle with an
    ``ap_ctrl_hs`` block protocol (Vitis HLS user guide UG1399, "S_AXILITE
    Control Register Map"; the same map is printed at the top of the
    ``x<top>_hw.h`` driver header HLS generates): ``0x00`` control
    (ap_start bit 0, ap_done bit 1, clear on read, ap_idle bit 2, ap_ready
    bit 3, auto_restart bit 7), ``0x04`` global interrupt enable, ``0x08``
    IP interrupt enable, ``0x0c`` IP interrupt status (toggle on write),
    then the arguments in signature order from ``0x10``. Each argument takes
    its data in 32-bit words (low word first) followed by one reserved word:
    a 64-bit pointer takes 12 bytes, a 32-bit scalar 8 bytes.
    """
    names = [arg.name for arg in args]
    if len(set(names)) != len(names):
        raise ValueError(f"argument names repeat: {names}")
    clash = set(names) & set(CONTROL_REGISTERS)
    if clash:
        raise ValueError(f"argument names {sorted(clash)} collide with control registers")
    offsets = dict(CONTROL_REGISTERS)
    offset = FIRST_ARGUMENT_OFFSET
    for arg in args:
        offsets[arg.name] = offset
        offset += 4 * (-(-arg.register_bits // AXI_WORD_BITS) + 1)
    return offsets


def register_span(args: Sequence[ShellArg] = SHELL_ARGS) -> int:
    """Bytes of register space the map uses (the end of the last argument's reserved word)."""
    last = args[-1]
    return register_map(args)[last.name] + 4 * (-(-last.register_bits // AXI_WORD_BITS) + 1)


def control_address_bits(args: Sequence[ShellArg] = SHELL_ARGS) -> int:
    """Address bits of the s_axilite slave: enough for :func:`register_span` bytes."""
    return max(4, (register_span(args) - 1).bit_length())


@dataclass(frozen=True)
class AccelFiles:
    """File names of an accelerator project (all relative to the project folder)."""

    top: str

    @property
    def top_cpp(self) -> str:
        return f"{self.top}.cpp"

    @property
    def top_h(self) -> str:
        return f"{self.top}.h"

    @property
    def testbench(self) -> str:
        return f"{self.top}_tb.cpp"

    @property
    def bridge(self) -> str:
        return f"{self.top}_bridge.cpp"

    tcl = "run_hls.tcl"


def project_files(project_dir: Path) -> Dict[str, Path]:
    """The shell's generated files in an accelerator project (top .cpp, testbench, bridge, vectors)."""
    project_dir = Path(project_dir)
    manifest = read_project_marker(project_dir)
    if manifest is None or (manifest.get("target") or {}).get("interface") != "m_axi":
        raise ValueError(f"{project_dir} is not an accelerator project (render it with render_accel_project)")
    files = AccelFiles(manifest["target"]["top"])
    return {"top_cpp": project_dir / files.top_cpp, "top_h": project_dir / files.top_h,
            "testbench": project_dir / files.testbench, "bridge": project_dir / files.bridge,
            "manifest": project_dir / PROJECT_MARKER}


