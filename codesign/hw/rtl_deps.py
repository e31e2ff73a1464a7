"""Which Verilog files a top module needs: the files of the modules it instantiates, recursively.

The TT PEs share one folder (``rtl/tt``): three tops and the modules they
build on. Every tool (Yosys, the simulators, the IP packager) and every hash
of "the RTL" (the Yosys report cache key, a resource calibration's
``rtl_hash``) should cover exactly the files the top elaborates, so that a
change to one top's file does not stale another top's Yosys reports and
calibrations while a change to a module it uses always does.

The tools must read only these files, not merely hash them: Yosys numbers
the cells of every file it reads from one counter, and ABC's mapping follows
the names, so a file the top never instantiates still moves its counts
(PE3, 2 lanes on xc7: 635 LUT with every ``rtl/tt`` file of commit c8c55b1
read, 610 with today's ``tt1_pe.v``, 612 with its own six files alone).

:func:`used_sources` errs on the side of more files: a file counts as used
when its module's name appears as a word anywhere in a used file's code
(comments aside), instantiated or not. A name that no file declares (the
deliberate ``*_unsupported_parameters`` instances that stop elaboration of a
bad build) is ignored.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

COMMENTS = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)
MODULE = re.compile(r"^\s*module\s+([A-Za-z_]\w*)", re.M)
WORD = re.compile(r"[A-Za-z_]\w*")


def code_of(path: Path) -> str:
    """The file's text without comments (a module named in a comment is not used)."""
    return COMMENTS.sub(" ", Path(path).read_text())


def declared_modules(sources: Sequence[Path]) -> dict[str, Path]:
    """Module name -> the file declaring it; raises when two files declare one name (the tools would refuse it)."""
    owner: dict[str, Path] = {}
    for path in sources:
        for name in MODULE.findall(code_of(path)):
            if name in owner and owner[name] != path:
                raise ValueError(f"module {name} is declared in {owner[name]} and in {path}")
            owner[name] = path
    return owner


def used_sources(sources: Sequence[Path], top: str) -> list[Path]:
    """The files of ``sources`` that module ``top`` needs (its own and every module it names, recursively), in the
    order of ``sources``; raises FileNotFoundError when no file declares ``top``."""
    owner = declared_modules(sources)
    if top not in owner:
        raise FileNotFoundError(f"no file of {[p.name for p in sources]} declares module {top}")
    used, pending = set(), [owner[top]]
    while pending:
        path = pending.pop()
        if path in used:
            continue
        used.add(path)
        pending.extend(owner[word] for word in set(WORD.findall(code_of(path))) if word in owner)
    return [path for path in sources if path in used]


__all__ = ["declared_modules", "used_sources"]
