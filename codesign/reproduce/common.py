"""Shared machinery of the paper reproductions: arms x seeds, ratios against a same-run baseline, reports.

A reproduction trains a baseline arm and one or more technique arms on the
same data, model, epochs and seeds, in the same process. Ratios (energy,
BitOPs) are taken per seed against that seed's baseline and then averaged,
so seed-to-seed noise does not leak into them. Each reproduction writes
``results.json`` (machines), ``table.md`` and ``plot.png`` (people).
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from codesign.hw.reports import write_json_atomic, write_text_atomic
from codesign.train.config import TrainConfig
from codesign.train.trainer import TrainResult, Trainer


@dataclass(frozen=True)
class Arm:
    """One configuration to train; ``seed`` in its config is replaced per seed."""

    name: str
    config: TrainConfig
    baseline: bool = False


@dataclass(frozen=True)
class PaperClaim:
    """What the paper reports for this reproduction, with where it says so."""

    text: str
    citation: str


@dataclass(frozen=True)
class Target:
    """The target of the issue, and whether the measurement meets it."""

    text: str
    met: bool
    measured: str


@dataclass
class ArmSummary:
    name: str
    baseline: bool
    accuracy_mean: float
    accuracy_std: float
    energy_pj_mean: float
    bitops_mean: float
    energy_ratio_mean: float
    energy_ratio_std: float
    bitops_ratio_mean: float
    bitops_ratio_std: float
    accuracy_drop_mean: float
    seconds: float
    per_seed: list[dict[str, Any]] = field(default_factory=list)
    techniques: list[dict[str, Any]] = field(default_factory=list)


def mean_std(values: list[float]) -> tuple[float, float]:
    if not values:
        return float("nan"), float("nan")
    return statistics.fmean(values), (statistics.stdev(values) if len(values) > 1 else 0.0)


def run_arms(arms: list[Arm], seeds: list[int], *, progress: bool = True,
             trainer_hook: Callable[[Trainer], None] | None = None) -> dict[str, list[TrainResult]]:
    """Train every arm at every seed (seed-major, so a partial run still pairs arms by seed)."""
    if sum(arm.baseline for arm in arms) != 1:
        raise ValueError("exactly one arm must be the baseline")
    results: dict[str, list[TrainResult]] = {arm.name: [] for arm in arms}
    for seed in seeds:
        for arm in arms:
            trainer = Trainer(arm.config.replace(seed=seed), progress=progress, description=f"{arm.name} seed {seed}")
            if trainer_hook is not None:
                trainer_hook(trainer)
            results[arm.name].append(trainer.fit())
    return results


def summarize(arms: list[Arm], results: dict[str, list[TrainResult]]) -> list[ArmSummary]:
    baseline = next(arm for arm in arms if arm.baseline)
    base_runs = results[baseline.name]
    summaries = []
    for arm in arms:
        runs = results[arm.name]
        energy_ratios = [run.energy_pj / base.energy_pj for run, base in zip(runs, base_runs)]
        bitops_ratios = [run.bitops / base.bitops for run, base in zip(runs, base_runs)]
        drops = [base.test_accuracy - run.test_accuracy for run, base in zip(runs, base_runs)]
        accuracy = mean_std([run.test_accuracy for run in runs])
        energy_ratio = mean_std(energy_ratios)
        bitops_ratio = mean_std(bitops_ratios)
        summaries.append(ArmSummary(
            name=arm.name, baseline=arm.baseline, accuracy_mean=accuracy[0], accuracy_std=accuracy[1],
            energy_pj_mean=statistics.fmean(run.energy_pj for run in runs),
            bitops_mean=statistics.fmean(run.bitops for run in runs),
            energy_ratio_mean=energy_ratio[0], energy_ratio_std=energy_ratio[1],
            bitops_ratio_mean=bitops_ratio[0], bitops_ratio_std=bitops_ratio[1],
            accuracy_drop_mean=statistics.fmean(drops), seconds=sum(run.seconds for run in runs),
            per_seed=[{"seed": run.config["seed"], "test_accuracy": run.test_accuracy, "energy_pj": run.energy_pj,
                       "bitops": run.bitops, "skipped_steps": run.skipped_steps, "steps": run.steps}
                      for run in runs],
            techniques=[run.techniques for run in runs],
        ))
    return summaries


def markdown_table(summaries: list[ArmSummary]) -> str:
    rows = ["| arm | test accuracy (%) | drop vs baseline (pt) | energy ratio | energy saving | BitOPs ratio |",
            "|---|---:|---:|---:|---:|---:|"]
    for s in summaries:
        rows.append(f"| {s.name}{' (baseline)' if s.baseline else ''} | {s.accuracy_mean:.2f} ± {s.accuracy_std:.2f} | "
                    f"{s.accuracy_drop_mean:+.2f} | {s.energy_ratio_mean:.3f} ± {s.energy_ratio_std:.3f} | "
                    f"{100 * (1 - s.energy_ratio_mean):.1f}% | {s.bitops_ratio_mean:.3f} ± {s.bitops_ratio_std:.3f} |")
    return "\n".join(rows)


def plot_accuracy_vs_cost(path: Path, title: str, summaries: list[ArmSummary], *, cost: str = "energy") -> Path:
    """Accuracy (mean ± std over seeds) against relative energy or BitOPs, one point per arm."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from codesign.hw.reports import write_figure_png

    figure, axis = plt.subplots(figsize=(6, 4.2), dpi=120)
    for s in summaries:
        x = s.energy_ratio_mean if cost == "energy" else s.bitops_ratio_mean
        xerr = s.energy_ratio_std if cost == "energy" else s.bitops_ratio_std
        axis.errorbar(x, s.accuracy_mean, xerr=xerr, yerr=s.accuracy_std, fmt="s" if s.baseline else "o", capsize=4,
                      label=s.name)
    axis.set_xlabel(f"{'modelled energy' if cost == 'energy' else 'BitOPs'} relative to baseline")
    axis.set_ylabel("test accuracy (%)")
    axis.set_title(title)
    axis.grid(alpha=0.3)
    axis.legend(fontsize=8)
    figure.tight_layout()
    return write_figure_png(figure, path)


def write_report(out_dir: Path, *, name: str, title: str, summaries: list[ArmSummary], claim: PaperClaim,
                 targets: list[Target], seeds: list[int], settings: dict[str, Any], cost_axis: str = "energy",
                 notes: list[str] | None = None, extra: dict[str, Any] | None = None) -> dict[str, Any]:
    out_dir = Path(out_dir)
    payload = {
        "name": name, "title": title, "seeds": seeds, "settings": settings,
        "arms": [asdict(s) for s in summaries], "paper": asdict(claim),
        "targets": [asdict(t) for t in targets], "all_targets_met": all(t.met for t in targets),
        "notes": notes or [], "extra": extra or {},
    }
    write_json_atomic(out_dir / "results.json", payload)
    lines = [f"# {title}", "", markdown_table(summaries), "",
             f"Mean ± std over seeds {seeds}; ratios are per seed against the same-seed baseline trained in the same run.",
             "", f"**Paper:** {claim.text} ({claim.citation})", ""]
    for target in targets:
        lines.append(f"- target: {target.text} — measured {target.measured} — **{'met' if target.met else 'NOT met'}**")
    for note in notes or []:
        lines.append(f"- note: {note}")
    write_text_atomic(out_dir / "table.md", "\n".join(lines) + "\n")
    plot_accuracy_vs_cost(out_dir / "plot.png", title, summaries, cost=cost_axis)
    return payload
