"""Fit before build: Yosys resources of every IP of a design point against its board's budget.

An IP is one PE instance inside the accelerator shell (AXI-Lite control,
AXI4 read and write engines; :mod:`codesign.shell.ip`). Its cost is the
PE's Yosys estimate (:func:`codesign.hw.estimate.estimate`, out of context,
before place and route) plus the shell's. The PS, the AXI interconnect and
the reset block of the block design are not counted, so the limit below
keeps a margin (default: every resource at most 90 % of the board).

Estimates are cached per (PE, spec, family, RTL sources), so asking again
costs nothing; the cache key includes a hash of the Verilog, so an RTL change
is never answered from a stale entry. Reports the repository ships
(``rtl/yosys-reports/``) answer too, when their recorded RTL hash matches
(:mod:`codesign.hw.estimate_cache`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from codesign.design.point import DesignPoint
from codesign.hw.estimate import RESOURCES
from codesign.hw.estimate_cache import cached_report
from codesign.io.reports import write_figure_png, write_json_atomic, write_text_atomic
from codesign.hw.resource_model import fpga_counts
from codesign.pe import get_pe

DEFAULT_LIMIT_PERCENT = 90.0
LABELS = {"lut": "LUT", "ff": "FF", "dsp": "DSP", "bram_36k": "BRAM36"}


class DesignDoesNotFit(ValueError):
    """A design point needs more of some resource than its board allows (the message gives the numbers)."""


def pe_cost(pe_name: str, spec, family: str, cache_dir: Path, *, progress: bool = False) -> dict[str, float]:
    """Yosys resources of one PE configuration on ``family``: from the cache or a shipped report when the RTL matches.

    See :func:`codesign.hw.estimate_cache.cached_report`; when Yosys had to run
    although the repository ships reports, the reason is printed with ``progress``.
    """
    cached = cached_report(get_pe(pe_name), spec, family, cache_dir, progress=progress)
    if progress and cached.note:
        print(f"[fit {pe_name} {family}] {cached.note}")
    return fpga_counts(cached.entry["counts"])


@dataclass(frozen=True)
class FitReport:
    """Resources per IP (PE + shell) and in total, the board budget, and the verdict at ``limit_percent``."""

    design: str
    board: str
    family: str
    budget: dict[str, int]
    per_ip: dict[str, dict[str, dict[str, float]]]  # ip -> {"pe": {...}, "shell": {...}, "total": {...}}
    total: dict[str, float]
    limit_percent: float
    memory: dict | None = None  # the board's DDR against a training run's estimated peak (DesignPoint.memory)
    hls: dict | None = None  # per IP, Vitis HLS's own C-synthesis estimate where it ran (codesign.design.hls_reports)

    @property
    def percent(self) -> dict[str, float]:
        return {key: 100.0 * self.total[key] / self.budget[key] for key in RESOURCES}

    @property
    def over(self) -> list[str]:
        """Resources above the limit."""
        return [key for key in RESOURCES if self.percent[key] > self.limit_percent]

    @property
    def fits(self) -> bool:
        return not self.over

    def to_dict(self) -> dict:
        return {"design": self.design, "board": self.board, "family": self.family, "budget": self.budget,
                "per_ip": self.per_ip, "total": self.total, "percent": {k: round(v, 3) for k, v in self.percent.items()},
                "limit_percent": self.limit_percent, "fits": self.fits, "over": self.over,
                "counted": "Yosys synth_xilinx per PE + accelerator shell; PS, interconnect and reset blocks not counted",
                **({"memory": self.memory} if self.memory is not None else {}),
                **({"hls": self.hls} if self.hls is not None else {})}

    def table(self) -> str:
        head = "| IP | " + " | ".join(LABELS[k] for k in RESOURCES) + " |"
        lines = [f"Fit of design {self.design} on {self.board} (Yosys {self.family}, limit {self.limit_percent:g} % "
                 "of each resource; PS and interconnect not counted)", "", head,
                 "|---|" + "---:|" * len(RESOURCES)]
        for ip, parts in self.per_ip.items():
            for part in ("pe", "shell"):
                lines.append(f"| {ip} ({part}) | " + " | ".join(f"{parts[part][k]:g}" for k in RESOURCES) + " |")
        lines.append("| **total** | " + " | ".join(f"{self.total[k]:g}" for k in RESOURCES) + " |")
        lines.append("| budget | " + " | ".join(f"{self.budget[k]}" for k in RESOURCES) + " |")
        lines.append("| % of budget | " + " | ".join(f"{self.percent[k]:.1f}" for k in RESOURCES) + " |")
        verdict = "fits" if self.fits else f"does NOT fit ({', '.join(LABELS[k] for k in self.over)} over the limit)"
        return "\n".join(lines) + f"\n\nVerdict: {verdict}.\n" + self.hls_table()

    def hls_table(self) -> str:
        """Vitis HLS's estimate per IP beside the Yosys rows (not part of the verdict); empty where it did not run."""
        if not self.hls:
            return ""
        lines = ["", "Vitis HLS C synthesis (its own estimate, before Vivado; where vitis_hls ran):", "",
                 "| IP | LUT | FF | DSP | BRAM36 | clock ns (target) |", "|---|---:|---:|---:|---:|---:|"]
        for ip, row in self.hls.items():
            used = row["resources"]
            lines.append(f"| {ip} | {used['lut']:g} | {used['ff']:g} | {used['dsp']:g} | {row['bram_36k']:g} | "
                         f"{row['estimated_clock_ns']:g} ({row['target_clock_ns']:g}) |")
        return "\n".join(lines) + "\n"

    def refusal(self) -> str:
        parts = [f"{LABELS[k]} {self.total[k]:g} of {self.budget[k]} ({self.percent[k]:.1f} %)" for k in self.over]
        return (f"design {self.design} does not fit {self.board}: {'; '.join(parts)} exceed "
                f"{self.limit_percent:g} % of the board")


def fit_design(design: DesignPoint, *, cache_dir: Path, limit_percent: float = DEFAULT_LIMIT_PERCENT,
               progress: bool = False) -> FitReport:
    """Estimate every IP of ``design`` on its board's Yosys family and total them against the budget."""
    from codesign.shell.ip import ip_shell_cost

    if not 0 < limit_percent <= 100:
        raise ValueError(f"limit_percent must be in (0, 100], got {limit_percent}")
    family = design.board.yosys_family
    per_ip = {}
    for instance in design.instances:
        pe = pe_cost(instance.pe, instance.spec, family, cache_dir, progress=progress)
        shell = fpga_counts(ip_shell_cost(get_pe(instance.pe), instance.spec, family, held_sums=instance.held_sums))
        per_ip[instance.name] = {"pe": pe, "shell": shell, "total": {k: pe[k] + shell[k] for k in RESOURCES}}
    total = {key: sum(parts["total"][key] for parts in per_ip.values()) for key in RESOURCES}
    return FitReport(design=design.name, board=design.board.name, family=family,
                     budget={key: design.board.resources[key] for key in RESOURCES}, per_ip=per_ip, total=total,
                     limit_percent=limit_percent, memory=design.memory())


def write_fit(report: FitReport, out_dir: Path) -> list[Path]:
    """fit.json, fit.md and fit.png (stacked bars per IP against the board budget), each written atomically."""
    out_dir = Path(out_dir)
    return [write_json_atomic(out_dir / "fit.json", report.to_dict()),
            write_text_atomic(out_dir / "fit.md", report.table()),
            plot_fit(report, out_dir / "fit.png")]


def plot_fit(report: FitReport, path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, ax = plt.subplots(figsize=(6.5, 4), constrained_layout=True)
    positions = range(len(RESOURCES))
    bottom = [0.0] * len(RESOURCES)
    for ip, parts in report.per_ip.items():
        for part in ("pe", "shell"):
            heights = [100.0 * parts[part][k] / report.budget[k] for k in RESOURCES]
            ax.bar(positions, heights, 0.6, bottom=bottom, label=f"{ip} ({part})")
            bottom = [b + h for b, h in zip(bottom, heights)]
    ax.axhline(report.limit_percent, color="red", linestyle="--", linewidth=1, label=f"limit {report.limit_percent:g} %")
    ax.axhline(100, color="black", linewidth=1)
    ax.set_xticks(list(positions))
    ax.set_xticklabels([f"{LABELS[k]}\n{report.total[k]:g}/{report.budget[k]}" for k in RESOURCES], fontsize=8)
    ax.set_ylabel(f"% of {report.board} budget")
    ax.set_title(f"{report.design} on {report.board}: {'fits' if report.fits else 'does not fit'}", fontsize=10)
    ax.legend(fontsize=7)
    ax.grid(True, axis="y", alpha=0.3)
    return write_figure_png(figure, path, dpi=110)
