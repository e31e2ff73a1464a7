"""Yosys cost of any registered PE: cells per resource, logic depth, and utilisation of each board's budget.

``estimate(pe, specs, families=...)`` synthesises ``rtl/<pe>`` once per
(family, spec) with :mod:`codesign.hw.yosys` (out-of-context, pre-place-and-
route estimates: use them to compare configurations and to check fit, not to
sign off) and writes ``<pe>_cost.json`` (machines), ``<pe>_cost.md`` and
``<pe>_cost.png`` (people: resources against the board budget).

:func:`estimate_task` is one (PE configuration, board) point as a task of
:mod:`codesign.sweep`, so that a grid of configurations x boards spreads over
a Dask cluster and a re-run skips the points already estimated
(``examples/sweep_tt2_estimates.toml``).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from pathlib import Path

from codesign.boards import Board, boards
from codesign.hw import yosys as ys
from codesign.hw.protocol import ProcessingElement
from codesign.io.reports import write_figure_png, write_text_atomic

SCHEMA = "codesign-pe-cost"
SCHEMA_VERSION = 1
RESOURCES = ("lut", "ff", "dsp", "bram_36k")


def board_for_family(family: str) -> Board:
    """The board whose FPGA belongs to Yosys family ``family``: the smallest PL budget, then the first by name.

    A PE's utilisation is then reported against the family's smallest device (the conservative figure), and a
    larger board of the family (the Kria KV260 beside the Ultra96-V2) does not change what a report says.
    """
    matching = sorted((b for b in boards().values() if b.yosys_family == family),
                      key=lambda b: (tuple(b.resources[key] for key in RESOURCES), b.name))
    if not matching:
        known = sorted({b.yosys_family for b in boards().values()})
        raise ValueError(f"unknown family {family!r}: no board uses it; known families: {', '.join(known)}")
    return matching[0]


def check_families(families: Iterable[str]) -> tuple[str, ...]:
    if isinstance(families, str):
        raise ValueError(f"families must be a sequence of family names, got the string {families!r}")
    families = tuple(families)
    if not families or len(set(families)) != len(families):
        raise ValueError(f"families must be non-empty and distinct, got {families}")
    for family in families:
        if family not in ys.SUPPORTED_FAMILIES:
            raise ValueError(f"unknown family {family!r}; expected one of {', '.join(ys.SUPPORTED_FAMILIES)}")
        board_for_family(family)
    return families


def estimate(pe: ProcessingElement, specs: Sequence, *, out_dir: Path, families: Iterable[str] = ys.SUPPORTED_FAMILIES,
             abc9: bool | None = None, workers: int = 1, progress: bool = True, plot: bool = True,
             timeout_s: float | None = None) -> dict:
    """Synthesise every (family, spec); write JSON, Markdown and (with ``plot``) PNG; return the report.

    Every spec, family and the RTL are checked, and Yosys located, before the
    first synthesis starts. ``abc9`` defaults to the PE's ``estimate_abc9``.
    """
    abc9 = pe.estimate_abc9 if abc9 is None else abc9
    families = check_families(families)
    specs = list(specs)
    if not specs:
        raise ValueError("no specs to estimate")
    for spec in specs:
        pe.check_spec(spec)
    ys.find_yosys()
    jobs = ys.synth_jobs(pe.rtl_sources(), pe.rtl_top, families, [pe.rtl_parameters(spec) for spec in specs],
                         abc9=abc9)
    out_dir = Path(out_dir)
    try:
        results = ys.synthesize_many(jobs, out_dir / "yosys", workers=workers, progress=progress,
                                     timeout_s=timeout_s, desc=f"{pe.name} synth")
    except ys.YosysError as error:
        if error.job is None or error.job not in jobs:
            raise
        spec = specs[jobs.index(error.job) % len(specs)]  # synth_jobs is family-major
        log = error.log if error.log is not None and error.log.is_file() else None
        raise ys.YosysError(f"Yosys failed on PE {pe.name}, spec {pe.describe_spec(spec)} ({error.job.family}): "
                            f"{error.why}; " + (f"see its log {log}" if log else f"no log in {error.job.slug}'s work "
                                                f"folder {out_dir / 'yosys' / error.job.slug}"),
                            job=error.job, why=error.why, log=log) from error
    spec_of_job = [spec for _ in families for spec in specs]  # synth_jobs is family-major
    entries = []
    for result, spec in zip(results, spec_of_job):
        board = board_for_family(result.job.family)
        entries.append({
            "family": result.job.family, "board": board.name, "part": board.part,
            "spec": spec.to_dict(), "label": pe.describe_spec(spec), "parameters": dict(result.job.params),
            "counts": result.counts.to_dict(), "raw_cells": dict(result.raw_cells),
            "logic_depth": result.depth.to_dict(), "wall_s": round(result.wall_s, 3),
            "budget": {key: board.resources[key] for key in RESOURCES},
            "utilisation_percent": {key: round(value, 4)
                                    for key, value in result.counts.utilisation_percent(board.resources).items()},
        })
    report = {"schema": SCHEMA, "version": SCHEMA_VERSION, "pe": pe.name, "top": pe.rtl_top,
              "tool": {"name": "yosys", "version": ys.yosys_version(), "flow": jobs[0].synth_command},
              "entries": entries}
    stem = f"{pe.name}_cost"
    write_text_atomic(out_dir / f"{stem}.json", json.dumps(report, indent=1) + "\n")
    write_text_atomic(out_dir / f"{stem}.md", render_markdown(report, pe.title))
    if plot:
        plot_cost(report, out_dir / f"{stem}.png", pe.title)
    return report


def render_markdown(report: dict, title: str) -> str:
    lines = [f"# {title} cost estimates (Yosys)", "",
             f"Tool: {report['tool']['version']}; flow: `{report['tool']['flow']}`. Cells before place and route; "
             "LUT = LUT sites upper bound; % = share of the board budget in `boards/*.toml`.", "",
             "| family | board | config | LUT | FF | DSP | BRAM36 | CARRY | depth | LUT % | FF % | DSP % | BRAM % |",
             "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for e in report["entries"]:
        c, u = e["counts"], e["utilisation_percent"]
        lut = c["lut"] + c["lutram"] + c["srl"]  # LUT sites, as ResourceCounts.lut_sites
        lines.append(f"| {e['family']} | {e['board']} | {e['label']} | {lut} | {c['ff']} | {c['dsp']} "
                     f"| {c['bram_36k']:g} | {c['carry']} | {e['logic_depth']['cells']} | {u['lut']:.2f} "
                     f"| {u['ff']:.2f} | {u['dsp']:.2f} | {u['bram_36k']:.2f} |")
    return "\n".join(lines) + "\n"


def plot_cost(report: dict, path: Path, title: str, limit_percent: float = 90.0) -> Path:
    """Per configuration, bars of LUT/FF/DSP/BRAM as percent of each family's board budget (PNG, atomic), with the
    budget (100 %) and the fit's default limit (``codesign design``'s 90 %) as lines: a bar above them is a
    configuration that does not fit, and the plot says so."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    entries = report["entries"]
    families = sorted({e["family"] for e in entries})
    figure, axes = plt.subplots(1, len(families), figsize=(6 * len(families), 4.5), squeeze=False,
                                constrained_layout=True)
    for ax, family in zip(axes[0], families):
        chosen = [e for e in entries if e["family"] == family]
        width = 0.8 / len(RESOURCES)
        for index, key in enumerate(RESOURCES):
            ax.bar([i + index * width for i in range(len(chosen))], [e["utilisation_percent"][key] for e in chosen],
                   width, label=key.upper())
        ax.set_xticks([i + 0.4 - width / 2 for i in range(len(chosen))])
        ax.set_xticklabels([e["label"] for e in chosen], rotation=30, ha="right", fontsize=7)
        ax.axhline(100, color="black", linewidth=1, label="board budget")
        ax.axhline(limit_percent, color="red", linestyle="--", linewidth=1, label=f"fit limit {limit_percent:g} %")
        ax.set_ylabel(f"% of {chosen[0]['board']} budget")
        ax.set_title(f"{family} ({chosen[0]['part']})")
        ax.grid(True, axis="y", alpha=0.3)
        ax.legend(fontsize=7)
    figure.suptitle(f"{title}: Yosys resources against the board budget", fontsize=10)
    return write_figure_png(figure, path, dpi=110)
