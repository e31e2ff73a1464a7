"""Boards are data: each ``boards/*.toml`` names a part, its clocks and its resource budget."""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from functools import cache

from codesign.resources import data_dir


@dataclass(frozen=True, kw_only=True)
class Board:
    """One FPGA board. Resources count LUTs, flip-flops, DSP slices and 36 Kib BRAMs."""

    name: str
    display_name: str
    part: str
    board_part: str
    yosys_family: str
    ps: str
    fclk_mhz: float
    hp_port_bits: int
    ddr_mib: int
    resources: dict[str, int]


@cache
def boards() -> dict[str, Board]:
    """All boards shipped with codesign, by name."""
    found = {}
    for path in sorted(data_dir("boards").glob("*.toml")):
        with path.open("rb") as handle:
            raw = tomllib.load(handle)
        found[raw["name"]] = Board(**raw)
    return found


def board(name: str) -> Board:
    known = boards()
    if name not in known:
        raise ValueError(f"unknown board {name!r}; known boards: {', '.join(sorted(known))}")
    return known[name]


def board_for_part(part: str) -> Board:
    """The board built around FPGA ``part``; a clear error for a part no board uses."""
    for candidate in boards().values():
        if candidate.part == part:
            return candidate
    known = ", ".join(f"{b.part} ({b.name})" for b in boards().values())
    raise ValueError(f"unknown FPGA part {part!r}; known parts: {known}")
