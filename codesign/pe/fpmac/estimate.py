"""FP-MAC hardware cost against MAX_FB: Yosys cell counts and logic depth per Xilinx family.

``estimate_fpmac`` synthesises ``rtl/fpmac/*.v`` (top ``fpmac``) once per
(family, MAX_FB) with :mod:`codesign.hw.yosys` and writes three files:

* ``fpmac_cost.json``: the machine-readable report the ABVS energy model reads
  through :func:`load_fpmac_cost` (schema below);
* ``fpmac_cost.md``: the same numbers as a Markdown table;
* ``fpmac_cost.png``: resources and logic depth against MAX_FB, one line per
  family, and utilisation of each family's board budget.

Schema (``version`` 1)::

    {"schema": "codesign-fpmac-cost", "version": 1,
     "tool": {"name": "yosys", "version": "Yosys 0.23 (...)", "flow": "synth_xilinx ... -flatten ...",
              "workers": 1},
     "top": "fpmac", "sources": [{"name": "fpmac.v", "sha256": "..."}],
     "depth_definition": "...",
     "entries": [{"family": "xc7", "board": "zedboard", "part": "xc7z020clg484-1",
                  "exp_bits": 8, "max_fb": 23, "rounding": "nearest_even",
                  "counts": {<ResourceCounts fields>}, "raw_cells": {"LUT6": 39, ...},
                  "logic_depth": {"cells": 38, "by_category": {"lut": 26, ...}, "loops": 0,
                                  "ltp_cells": 38, "ltp_loops": 0},
                  "wall_s": 2.9, "budget": {"lut": 53200, ...},
                  "utilisation_percent": {"lut": 0.25, "ff": 0.03, "dsp": 0.9, "bram_36k": 0.0}}]}

Counts are cells (see :class:`codesign.hw.yosys.ResourceCounts`), depth is
cells on the longest combinational path (:class:`codesign.hw.yosys.LogicDepth`),
``wall_s`` is Yosys wall-clock seconds (with ``tool.workers`` runs sharing
the machine, so compare it only within one report), utilisation is percent of the board
budget in ``boards/*.toml``.
"""

from __future__ import annotations

import hashlib
import json
import math
import warnings
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, fields
from pathlib import Path

from codesign.boards import Board, board_for_part
from codesign.hw import yosys as ys
from codesign.hw.estimate import board_for_family
from codesign.io.jsonfile import JsonFileError, load_json
from codesign.io.reports import write_figure_png, write_text_atomic
from codesign.numerics.formats import FLOAT_FRAC_BITS
from codesign.pe.fpmac.spec import ROUNDING_CODES, FpmacSpec
from codesign.resources import data_dir

SCHEMA = "codesign-fpmac-cost"
SCHEMA_VERSION = 1
TOP = "fpmac"
JSON_NAME, MARKDOWN_NAME, PLOT_NAME = "fpmac_cost.json", "fpmac_cost.md", "fpmac_cost.png"
# bf16-like (7), fp16-like (10) and fp32-like (23) fraction widths plus points between.
DEFAULT_MAX_FB = (2, 4, 7, 10, 13, 16, 19, 23)
DEPTH_DEFINITION = (
    "cells on the longest combinational path of the flattened, mapped netlist (flip-flops, latches, SRLs and "
    "RAMs are cut points): paths run from a primary input or register output to a register input or primary "
    "output; each LUT/INV, MUXF7/8/9, CARRY4/8 cell and DSP48 block counts 1; carry cells with per-bit arcs "
    "(ltp_cells: Yosys ltp's all-to-all figure, for cross-checking)"
)


class FpmacCostError(ValueError):
    """A cost report is missing, of another schema version, or inconsistent."""


def _check_sweep(families: Iterable[str], max_fb_values: Iterable[int], exp_bits: int,
                 rounding: str) -> tuple[tuple[str, ...], tuple[int, ...]]:
    if isinstance(families, str) or not tuple(families):
        raise ValueError(f"families must be a non-empty sequence of family names, got {families!r}")
    families = tuple(families)
    max_fb_values = tuple(max_fb_values)
    if not max_fb_values:
        raise ValueError("max_fb_values is empty")
    for name, values in (("families", families), ("max_fb_values", max_fb_values)):
        if len(set(values)) != len(values):
            raise ValueError(f"{name} has duplicates: {values}")
    for family in families:
        if family not in ys.SUPPORTED_FAMILIES:
            raise ValueError(f"unknown family {family!r}; expected one of {', '.join(ys.SUPPORTED_FAMILIES)}")
        board_for_family(family)
        for max_fb in max_fb_values:
            if isinstance(max_fb, bool) or not isinstance(max_fb, int):
                raise TypeError(f"max_fb values must be ints, got {max_fb!r}")
            if not FLOAT_FRAC_BITS[0] <= max_fb <= FLOAT_FRAC_BITS[1]:
                raise ValueError(f"max_fb={max_fb} is outside {FLOAT_FRAC_BITS[0]}..{FLOAT_FRAC_BITS[1]}")
            FpmacSpec(exp_bits=exp_bits, max_fb=max_fb, rounding=rounding)
    return families, tuple(sorted(max_fb_values))


def fpmac_sources(rtl_dir: Path | None = None) -> tuple[Path, ...]:
    """The FP-MAC Verilog files (``rtl/fpmac/*.v`` unless ``rtl_dir`` is given), sorted by name."""
    directory = Path(rtl_dir) if rtl_dir is not None else data_dir("rtl") / "fpmac"
    sources = tuple(sorted(directory.glob("*.v")))
    if not sources:
        raise FileNotFoundError(f"no FP-MAC Verilog (*.v) in {directory}")
    return sources


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _entry(result: ys.SynthResult, board: Board, exp_bits: int, max_fb: int, rounding: str) -> dict:
    return {
        "family": result.job.family, "board": board.name, "part": board.part,
        "exp_bits": exp_bits, "max_fb": max_fb, "rounding": rounding,
        "counts": result.counts.to_dict(), "raw_cells": dict(result.raw_cells),
        "logic_depth": result.depth.to_dict(), "wall_s": round(result.wall_s, 3),
        "budget": dict(board.resources),
        "utilisation_percent": {key: round(value, 4)
                                for key, value in result.counts.utilisation_percent(board.resources).items()},
    }


def estimate_fpmac(*, families: Iterable[str] = ys.SUPPORTED_FAMILIES, max_fb_values: Iterable[int] = DEFAULT_MAX_FB,
                   exp_bits: int = 8, rounding: str = "nearest_even", out_dir: Path,
                   rtl_dir: Path | None = None, abc9: bool = True, workers: int = 1, progress: bool = True,
                   plot: bool = True, timeout_s: float | None = None) -> dict:
    """Synthesise the FP-MAC per (family, MAX_FB); write JSON, Markdown and (if ``plot``) PNG to ``out_dir``.

    Every argument is checked, and the RTL and Yosys located, before the first
    synthesis starts. Yosys work directories stay under ``out_dir/yosys/``.
    ``abc9`` (default on) maps with Yosys' timing-driven ABC9 flow: with the
    default ABC flow, Yosys 0.23 builds structural loops through the adder's
    CARRY4 chain at MAX_FB=23 (see :mod:`codesign.hw.yosys`), which makes the
    logic depth meaningless. Returns the report dictionary written as JSON.
    """
    families, max_fb_values = _check_sweep(families, max_fb_values, exp_bits, rounding)
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise ValueError(f"workers={workers!r} must be a positive int")
    if not isinstance(abc9, bool):
        raise TypeError("abc9 must be a bool")
    sources = fpmac_sources(rtl_dir)
    ys.find_yosys()
    param_sets = [{"EXP_BITS": exp_bits, "MAX_FB": max_fb, "ROUNDING": ROUNDING_CODES[rounding]}
                  for max_fb in max_fb_values]
    jobs = ys.synth_jobs(sources, TOP, families, param_sets, abc9=abc9)
    out_dir = Path(out_dir)
    results = ys.synthesize_many(jobs, out_dir / "yosys", workers=workers, progress=progress,
                                 timeout_s=timeout_s, desc="fpmac synth")
    entries = [_entry(result, board_for_family(result.job.family), exp_bits, dict(result.job.params)["MAX_FB"],
                      rounding) for result in results]
    for result in results:
        if result.depth.loops:
            warnings.warn(f"{result.job.slug}: {result.depth.loops} net bits on combinational loops; its logic "
                          "depth leaves them out and is not reliable", RuntimeWarning, stacklevel=2)
    report = {
        "schema": SCHEMA, "version": SCHEMA_VERSION,
        "tool": {"name": "yosys", "version": ys.yosys_version(), "flow": jobs[0].synth_command,
                 "workers": workers},
        "top": TOP, "sources": [{"name": source.name, "sha256": _sha256(source)} for source in sources],
        "depth_definition": DEPTH_DEFINITION, "entries": entries,
    }
    load_fpmac_cost_dict(report)  # never write a report the loader would reject
    write_text_atomic(out_dir / JSON_NAME, json.dumps(report, indent=1) + "\n")
    write_text_atomic(out_dir / MARKDOWN_NAME, render_markdown(report))
    if plot:
        plot_fpmac_cost(report, out_dir / PLOT_NAME)
    return report


# ---------------------------------------------------------------------------- loading


@dataclass(frozen=True, kw_only=True)
class FpmacCostEntry:
    """One synthesised configuration; units as in the module docstring."""

    family: str
    board: str
    part: str
    exp_bits: int
    max_fb: int
    rounding: str
    counts: ys.ResourceCounts
    raw_cells: dict[str, int]
    depth: ys.LogicDepth
    wall_s: float
    budget: dict[str, int]
    utilisation_percent: dict[str, float]


@dataclass(frozen=True, kw_only=True)
class FpmacCost:
    """A validated ``fpmac_cost.json``: per-(family, MAX_FB) area and depth for the energy model."""

    version: int
    tool_version: str
    flow: str
    top: str
    sources: tuple[tuple[str, str], ...]  # (file name, sha256)
    entries: tuple[FpmacCostEntry, ...]

    def series(self, family: str, *, exp_bits: int | None = None,
               rounding: str | None = None) -> tuple[FpmacCostEntry, ...]:
        """Entries of ``family`` (optionally one exp_bits / rounding), sorted by MAX_FB."""
        chosen = [e for e in self.entries if e.family == family and exp_bits in (None, e.exp_bits)
                  and rounding in (None, e.rounding)]
        if not chosen:
            raise KeyError(f"no entries for family={family!r} exp_bits={exp_bits} rounding={rounding}; "
                           f"families in report: {sorted({e.family for e in self.entries})}")
        return tuple(sorted(chosen, key=lambda e: (e.exp_bits, e.rounding, e.max_fb)))

    def entry(self, family: str, max_fb: int, *, exp_bits: int | None = None,
              rounding: str | None = None) -> FpmacCostEntry:
        """The one entry for (family, max_fb); KeyError if absent or ambiguous."""
        chosen = [e for e in self.series(family, exp_bits=exp_bits, rounding=rounding) if e.max_fb == max_fb]
        if len(chosen) != 1:
            available = sorted({e.max_fb for e in self.series(family, exp_bits=exp_bits, rounding=rounding)})
            raise KeyError(f"{len(chosen)} entries for family={family!r} max_fb={max_fb} "
                           f"(exp_bits={exp_bits}, rounding={rounding}); MAX_FB available: {available}")
        return chosen[0]

    def sources_match(self, rtl_dir: Path | None = None) -> bool:
        """True if the report was made from exactly the Verilog now in ``rtl_dir`` (default rtl/fpmac)."""
        current = tuple((p.name, _sha256(p)) for p in fpmac_sources(rtl_dir))
        return current == self.sources


def _require(mapping: object, key: str, kind: type | tuple[type, ...], where: str) -> object:
    if not isinstance(mapping, dict) or key not in mapping:
        raise FpmacCostError(f"{where}: missing key {key!r}")
    value = mapping[key]
    if isinstance(value, bool) and bool not in (kind if isinstance(kind, tuple) else (kind,)):
        raise FpmacCostError(f"{where}.{key}: expected {kind}, got a bool")
    if not isinstance(value, kind):
        raise FpmacCostError(f"{where}.{key}: expected {kind}, got {type(value).__name__}")
    return value


def _count(value: object, where: str, *, real: bool = False) -> float:
    ok = isinstance(value, (int, float) if real else int) and not isinstance(value, bool)
    if not ok or value < 0 or (real and not math.isfinite(value)):
        raise FpmacCostError(f"{where}: expected a non-negative {'number' if real else 'int'}, got {value!r}")
    return value


def _load_entry(raw: object, where: str) -> FpmacCostEntry:
    family = _require(raw, "family", str, where)
    if family not in ys.SUPPORTED_FAMILIES:
        raise FpmacCostError(f"{where}.family: unknown family {family!r}")
    exp_bits = _require(raw, "exp_bits", int, where)
    max_fb = _require(raw, "max_fb", int, where)
    rounding = _require(raw, "rounding", str, where)
    part = _require(raw, "part", str, where)
    try:
        FpmacSpec(exp_bits=exp_bits, max_fb=max_fb, rounding=rounding)
        board_for_part(part)
    except (TypeError, ValueError) as error:
        raise FpmacCostError(f"{where}: {error}") from error
    raw_cells = _require(raw, "raw_cells", dict, where)
    for cell_type, count in raw_cells.items():
        _count(count, f"{where}.raw_cells.{cell_type}")
    counts_raw = _require(raw, "counts", dict, where)
    names = {f.name for f in fields(ys.ResourceCounts)}
    if set(counts_raw) != names:
        raise FpmacCostError(f"{where}.counts: keys {sorted(counts_raw)} differ from {sorted(names)}")
    for name, value in counts_raw.items():
        _count(value, f"{where}.counts.{name}", real=name == "bram_36k")
    counts = ys.ResourceCounts(**counts_raw)
    if counts != ys.categorize(raw_cells):
        raise FpmacCostError(f"{where}.counts do not match its raw_cells")
    depth_raw = _require(raw, "logic_depth", dict, where)
    by_category = _require(depth_raw, "by_category", dict, f"{where}.logic_depth")
    depth = ys.LogicDepth(
        by_category={k: int(_count(v, f"{where}.logic_depth.by_category.{k}")) for k, v in by_category.items()},
        **{name: int(_count(_require(depth_raw, name, int, f"{where}.logic_depth"), f"{where}.logic_depth.{name}"))
           for name in ("cells", "loops", "ltp_cells", "ltp_loops")},
    )
    if sum(depth.by_category.values()) != depth.cells:
        raise FpmacCostError(f"{where}.logic_depth: by_category does not add up to cells={depth.cells}")
    budget = {k: int(_count(v, f"{where}.budget.{k}")) for k, v in _require(raw, "budget", dict, where).items()}
    utilisation = {k: float(_count(v, f"{where}.utilisation_percent.{k}", real=True))
                   for k, v in _require(raw, "utilisation_percent", dict, where).items()}
    missing = {"lut", "ff", "dsp", "bram_36k"} - set(utilisation)
    if missing:
        raise FpmacCostError(f"{where}.utilisation_percent lacks {sorted(missing)}")
    return FpmacCostEntry(
        family=family, board=_require(raw, "board", str, where), part=part, exp_bits=exp_bits, max_fb=max_fb,
        rounding=rounding, counts=counts, raw_cells=dict(raw_cells), depth=depth,
        wall_s=float(_count(_require(raw, "wall_s", (int, float), where), f"{where}.wall_s", real=True)),
        budget=budget, utilisation_percent=utilisation,
    )


def load_fpmac_cost_dict(raw: Mapping) -> FpmacCost:
    """Validate an in-memory report (see :func:`load_fpmac_cost`)."""
    if not isinstance(raw, dict) or raw.get("schema") != SCHEMA:
        raise FpmacCostError(f"not a {SCHEMA} report (schema={raw.get('schema') if isinstance(raw, dict) else None!r})")
    version = _require(raw, "version", int, "report")
    if version != SCHEMA_VERSION:
        raise FpmacCostError(f"report version {version} is not the supported version {SCHEMA_VERSION}; "
                             "re-run estimate_fpmac")
    tool = _require(raw, "tool", dict, "report")
    sources = _require(raw, "sources", list, "report")
    pairs = tuple((_require(s, "name", str, "report.sources[]"), _require(s, "sha256", str, "report.sources[]"))
                  for s in sources)
    raw_entries = _require(raw, "entries", list, "report")
    if not raw_entries:
        raise FpmacCostError("report has no entries")
    entries = tuple(_load_entry(entry, f"entries[{index}]") for index, entry in enumerate(raw_entries))
    keys = [(e.family, e.exp_bits, e.rounding, e.max_fb) for e in entries]
    if len(set(keys)) != len(keys):
        raise FpmacCostError("report has duplicate (family, exp_bits, rounding, max_fb) entries")
    return FpmacCost(version=version, tool_version=_require(tool, "version", str, "report.tool"),
                     flow=_require(tool, "flow", str, "report.tool"), top=_require(raw, "top", str, "report"),
                     sources=pairs, entries=entries)


def load_fpmac_cost(path: Path) -> FpmacCost:
    """Read and validate ``fpmac_cost.json``; :class:`FpmacCostError` on any schema violation."""
    path = Path(path)
    try:
        raw = load_json(path, what="FP-MAC cost report (estimate_fpmac writes it)")
    except JsonFileError as error:
        raise FpmacCostError(str(error)) from None
    try:
        return load_fpmac_cost_dict(raw)
    except FpmacCostError as error:
        raise FpmacCostError(f"{path}: FP-MAC cost report: {error}") from None


# ---------------------------------------------------------------------------- rendering


def render_markdown(report: Mapping) -> str:
    """A Markdown table of a report: one row per (family, MAX_FB)."""
    cost = load_fpmac_cost_dict(report)
    lines = [
        "# FP-MAC cost estimates (Yosys)", "",
        f"Tool: {cost.tool_version}; flow: `{cost.flow}`.",
        f"Sources: {', '.join(f'{name} (sha256 {digest[:12]})' for name, digest in cost.sources)}.", "",
        "Counts are mapped cells before place and route. LUT = logic LUT cells (upper bound on sites); "
        "utilisation is of the board budget in `boards/*.toml`. "
        f"Depth = {DEPTH_DEFINITION}; LUT lvl = LUTs on that path.", "",
        "| family | board | EXP | FB | rounding | LUT | FF | DSP | CARRY | MUXF | BRAM36 | depth | LUT lvl "
        "| LUT % | FF % | DSP % | Yosys s |",
        "|---|---|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for e in sorted(cost.entries, key=lambda e: (e.family, e.exp_bits, e.rounding, e.max_fb)):
        c, u = e.counts, e.utilisation_percent
        lines.append(
            f"| {e.family} | {e.board} | {e.exp_bits} | {e.max_fb} | {e.rounding} | {c.lut_sites} | {c.ff} "
            f"| {c.dsp} | {c.carry} | {c.muxf} | {c.bram_36k:g} | {e.depth.cells} | {e.depth.lut_levels} "
            f"| {u['lut']:.2f} | {u['ff']:.2f} | {u['dsp']:.2f} | {e.wall_s:.1f} |"
        )
    return "\n".join(lines) + "\n"


def plot_fpmac_cost(report: Mapping, path: Path) -> Path:
    """Resources, logic depth and board utilisation against MAX_FB, one line per family (PNG, atomic)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as error:  # optional dependency: pip install codesign[plot]
        raise ImportError("plotting needs matplotlib (pip install 'codesign[plot]')") from error
    cost = load_fpmac_cost_dict(report)
    groups = sorted({(e.family, e.exp_bits, e.rounding) for e in cost.entries})
    palette = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    figure, axes = plt.subplots(2, 2, figsize=(11, 8), constrained_layout=True)
    (ax_lut, ax_hard), (ax_depth, ax_util) = axes
    for index, (family, exp_bits, rounding) in enumerate(groups):
        series = cost.series(family, exp_bits=exp_bits, rounding=rounding)
        fb = [e.max_fb for e in series]
        label = f"{family} ({series[0].board})" if len(groups) == len({g[0] for g in groups}) \
            else f"{family} ({series[0].board}) E{exp_bits} {rounding}"
        colour = palette[index % len(palette)]
        ax_lut.plot(fb, [e.counts.lut_sites for e in series], "o-", color=colour, label=f"{label} LUT")
        ax_lut.plot(fb, [e.counts.ff for e in series], "s--", color=colour, label=f"{label} FF")
        ax_hard.plot(fb, [e.counts.dsp for e in series], "o-", color=colour, label=f"{label} DSP")
        ax_hard.plot(fb, [e.counts.carry for e in series], "s--", color=colour, label=f"{label} CARRY")
        ax_depth.plot(fb, [e.depth.cells for e in series], "o-", color=colour, label=f"{label} all cells")
        ax_depth.plot(fb, [e.depth.lut_levels for e in series], "s--", color=colour, label=f"{label} LUT levels")
        for key, style in (("lut", "o-"), ("ff", "s--"), ("dsp", "^:")):
            ax_util.plot(fb, [e.utilisation_percent[key] for e in series], style, color=colour,
                         label=f"{label} {key.upper()}")
    titles = (("LUT sites and flip-flops", "cells"), ("DSP slices and carry cells", "cells"),
              ("Logic depth (longest combinational path)", "cells on path"),
              ("Utilisation of the board budget", "% of board"))
    for ax, (title, ylabel) in zip(axes.flat, titles):
        ax.set_title(title)
        ax.set_xlabel("MAX_FB (fraction bits)")
        ax.set_ylabel(ylabel)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7)
    exp_values = ", ".join(str(v) for v in sorted({e.exp_bits for e in cost.entries}))
    figure.suptitle(f"FP-MAC (EXP_BITS={exp_values}) per family, {cost.tool_version}", fontsize=10)
    return write_figure_png(figure, path, dpi=110)
