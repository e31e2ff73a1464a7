"""Write :mod:`codesign.contracts.constants` as a C++ header and a Verilog include, the files HLS and the RTL read.

The two files are generated and committed (``python -m codesign.hw.constants_gen``
rewrites them; ``--check`` fails when one differs): Vitis HLS, g++, Yosys, Icarus and
Verilator then read plain files wherever the tree is (a checkout, a wheel, a build
folder), with no render step in front of each tool, and a reader of the RTL sees the
values. tests/hw/test_constants_gen.py holds the committed files to this module.

C++: ``codesign::WORD_BITS`` and ``codesign::STATUS_BITS``, and each family's codes as
``codesign::<family>::STATUS_<NAME>`` (the namespace its header already uses).
Verilog: macros ``CODESIGN_WORD_BITS``, ``CODESIGN_STATUS_BITS`` and
``CODESIGN_<FAMILY>_STATUS_<NAME>`` as sized literals (``2'd1``).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from codesign.contracts.constants import STATUS_BITS, STATUS_CODES, WORD_BITS
from codesign.numerics import loss_grad
from codesign.resources import data_dir

HEADER_NAME = "codesign_constants.h"
VERILOG_NAME = "codesign_constants.vh"
LOSS_HEADER_NAME = "codesign_loss_table.h"  # the loss gradient's constants and exponent table (CSB LOSS)
LOSS_VERILOG_NAME = "codesign_loss_table.vh"
GENERATED = "Generated from codesign/contracts/constants.py by `python -m codesign.hw.constants_gen`; do not edit."
# The Verilog include's provenance line as it stood when the shipped Yosys reports (rtl/yosys-reports/) and the
# resource calibrations (codesign/design/calibration/) were measured: the include is part of the RTL hash that keys
# them, so rewording this comment would mark every one stale. It names the module's path before the move to
# codesign/contracts/; take GENERATED here at the next RTL change, when `make yosys-reports` and `codesign
# calibrate` measure everything again.
VERILOG_GENERATED = "Generated from codesign/hw/constants.py by `python -m codesign.hw.constants_gen`; do not edit."


def header_path() -> Path:
    return data_dir("hls_templates") / "include" / HEADER_NAME


def verilog_include_dir() -> Path:
    """The directory every RTL tool gets as an include path (``-I``), holding :data:`VERILOG_NAME`."""
    return data_dir("rtl") / "include"


def verilog_path() -> Path:
    return verilog_include_dir() / VERILOG_NAME


def cpp_header() -> str:
    lines = [f"// {HEADER_NAME} -- the stream contract's word width and status codes.",
             f"// {GENERATED}",
             "#ifndef CODESIGN_CONSTANTS_H", "#define CODESIGN_CONSTANTS_H", "", "namespace codesign {", "",
             f"const int WORD_BITS = {WORD_BITS};  // stream words (bits)",
             f"const int STATUS_BITS = {STATUS_BITS};  // the status field in the low bits of the status word", ""]
    for family, codes in STATUS_CODES.items():
        enumerators = ", ".join(f"STATUS_{code.name} = {code.value}" for code in codes)
        lines += [f"namespace {family} {{", f"enum {{ {enumerators} }};", f"}}  // namespace {family}", ""]
    lines += ["}  // namespace codesign", "", "#endif  // CODESIGN_CONSTANTS_H"]
    return "\n".join(lines) + "\n"


def verilog_include() -> str:
    lines = [f"// {VERILOG_NAME} -- the stream contract's word width and status codes.",
             f"// {VERILOG_GENERATED}",
             "`ifndef CODESIGN_CONSTANTS_VH", "`define CODESIGN_CONSTANTS_VH", "",
             f"`define CODESIGN_WORD_BITS {WORD_BITS}",
             f"`define CODESIGN_STATUS_BITS {STATUS_BITS}", ""]
    for family, codes in STATUS_CODES.items():
        lines += [f"`define CODESIGN_{family.upper()}_STATUS_{code.name} {STATUS_BITS}'d{code.value}" for code in codes]
        lines.append("")
    lines.append("`endif  // CODESIGN_CONSTANTS_VH")
    return "\n".join(lines) + "\n"


_LOSS_CONSTANTS = (("LOG2E_Q16", loss_grad.LOG2E_Q16, "round(log2(e) * 2^16)"),
                   ("EXP_FRAC_BITS", loss_grad.EXP_FRAC_BITS, "fraction bits of the base-2 exponent"),
                   ("EXP_LIMIT", loss_grad.EXP_LIMIT, "an exponent's integer part from which e is 0"),
                   ("CODE_SHIFT", loss_grad.CODE_SHIFT, "a code is w / 2^CODE_SHIFT, rounded"),
                   ("RECIP_SHIFT_MAX", loss_grad.RECIP_SHIFT_MAX, "r = floor(2^recip_shift / (S * n)), at most 2^32"))
_LOSS_SOURCE = "Generated from codesign/numerics/loss_grad.py by `python -m codesign.hw.constants_gen`; do not edit."


def loss_cpp_header() -> str:
    """``codesign::loss``: the loss gradient's constants and ``EXP_TABLE`` (2^16 * 2^(-f / 256), rounded)."""
    table = loss_grad.EXP_TABLE
    rows = [", ".join(str(v) for v in table[at:at + 12]) for at in range(0, len(table), 12)]
    lines = [f"// {LOSS_HEADER_NAME} -- the loss gradient's constants and exponent table (docs/csb.md, LOSS).",
             f"// {_LOSS_SOURCE}", "#ifndef CODESIGN_LOSS_TABLE_H", "#define CODESIGN_LOSS_TABLE_H", "",
             "namespace codesign {", "namespace loss {", ""]
    lines += [f"const int {name} = {value};  // {meaning}" for name, value, meaning in _LOSS_CONSTANTS]
    lines += ["", f"const unsigned EXP_TABLE[{len(table)}] = {{", *[f"    {row}," for row in rows], "};", "",
              "}  // namespace loss", "}  // namespace codesign", "", "#endif  // CODESIGN_LOSS_TABLE_H"]
    return "\n".join(lines) + "\n"


def loss_verilog_include() -> str:
    """Macros of the loss gradient's constants and the function ``codesign_exp_table`` (included in a module's
    body, once: no include guard)."""
    lines = [f"// {LOSS_VERILOG_NAME} -- the loss gradient's constants and exponent table (docs/csb.md, LOSS).",
             f"// {_LOSS_SOURCE}", "// Included inside a module body (it declares a function).", ""]
    lines += [f"`define CODESIGN_LOSS_{name} {value}  // {meaning}" for name, value, meaning in _LOSS_CONSTANTS]
    lines += ["", "function [16:0] codesign_exp_table(input [7:0] f);  // 2^16 * 2^(-f / 256), rounded",
              "    case (f)"]
    lines += [f"        8'd{f}: codesign_exp_table = 17'd{v};" for f, v in enumerate(loss_grad.EXP_TABLE)]
    lines += ["        default: codesign_exp_table = 17'd0;", "    endcase", "endfunction"]
    return "\n".join(lines) + "\n"


def generated_files() -> dict[Path, str]:
    """Path -> the text this module generates for it."""
    return {header_path(): cpp_header(), verilog_path(): verilog_include(),
            header_path().with_name(LOSS_HEADER_NAME): loss_cpp_header(),
            verilog_include_dir() / LOSS_VERILOG_NAME: loss_verilog_include()}


def stale_files() -> list[Path]:
    """The generated files that are missing or differ from what :func:`generated_files` gives."""
    return [path for path, text in generated_files().items()
            if not path.is_file() or path.read_text(encoding="utf-8") != text]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m codesign.hw.constants_gen", description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only say whether the committed files are current")
    args = parser.parse_args(argv)
    stale = stale_files()
    if args.check:
        for path in stale:
            print(f"{path} is not what codesign/contracts/constants.py generates", file=sys.stderr)
        return 1 if stale else 0
    from codesign.io.reports import write_text_atomic

    for path in stale:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_text_atomic(path, generated_files()[path])
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
