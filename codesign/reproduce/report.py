"""A reproduction's report: ``results.json`` (machines), ``table.md`` and ``plot.png`` (people).

``results.json`` carries the arms' summaries, the tuning record, the paper's
claim, the targets with what was measured and whether each is met, a
``readme`` row (the reproduction table of ``results/README.md`` is generated
from it, :mod:`codesign.reproduce.readme`) and the claims restated with the
seed as the unit (``replication``, :mod:`codesign.reproduce.replication`;
also the last section of ``table.md``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from codesign.io.reports import write_json_atomic, write_text_atomic
from codesign.reproduce.machine import machine_record, machine_text
from codesign.reproduce.protocol import MAX_WIDENINGS, SPLIT_SEEDS, TUNING_SEEDS, VALIDATION_FRACTION
from codesign.reproduce.replication import module_of, replication, section
from codesign.reproduce.run_cost import cost_text, run_cost
from codesign.reproduce.summary import ArmSummary
from codesign.reproduce.texts import difference_text, paper_ratio_text, ratio_text


@dataclass(frozen=True, kw_only=True)
class PaperClaim:
    """What the paper reports for this reproduction, with where it says so."""

    text: str
    citation: str


@dataclass(frozen=True, kw_only=True)
class Target:
    """The target of the issue, and whether the measurement meets it."""

    text: str
    met: bool
    measured: str


@dataclass(frozen=True, kw_only=True)
class ReadmeRow:
    """A reproduction's entry in ``results/README.md`` (generated from ``results.json`` by
    :mod:`codesign.reproduce.readme`): its name and what it compares, the target, what was measured with its 95 %
    intervals, and the verdict."""

    reproduction: str
    target: str
    measured: str
    verdict: str


def ran_settings(settings: dict[str, Any], summaries: list[ArmSummary]) -> dict[str, Any]:
    """``settings`` with ``validation_fraction`` as the evaluation runs ran it (one value, or arm -> value).

    With one value for every arm, each nested ``validation_fraction`` (the arms' data configurations) says it too.

    A reproduction's base configuration may say 0.0 while :func:`run_study` held out
    :data:`VALIDATION_FRACTION`; the report records what ran.
    """
    ran = {s.name: s.validation_fraction for s in summaries if s.validation_fraction is not None}
    if not ran:
        return settings
    values = set(ran.values())
    if len(values) > 1:
        return {**settings, "validation_fraction": ran}
    fraction = values.pop()

    def ran_as(value: Any) -> Any:  # nested configurations (settings["data"], settings["arms"][i]["data"]) too
        if isinstance(value, dict):
            return {key: fraction if key == "validation_fraction" else ran_as(item) for key, item in value.items()}
        if isinstance(value, list):
            return [ran_as(item) for item in value]
        return value

    return {**ran_as(settings), "validation_fraction": fraction}


def report_margin(summaries: list[ArmSummary]) -> float | dict[str, float] | None:
    """The equivalence margin the arms' TOSTs used (points): one number when every judged arm shares it, else
    arm name -> margin; None when no arm was judged by TOST."""
    margins = {s.name: s.accuracy_tost["margin"] for s in summaries if s.accuracy_tost}
    if not margins:
        return None
    return next(iter(margins.values())) if len(set(margins.values())) == 1 else margins


def _margin_text(margin_pt: float | Mapping[str, float] | None) -> str:
    if margin_pt is None:
        return "no margin: no TOST"
    if isinstance(margin_pt, Mapping):
        return ", ".join(f"{name} {value:g} pt" for name, value in margin_pt.items())
    return f"{margin_pt:g} pt"


def markdown_table(summaries: list[ArmSummary]) -> str:
    """``table.md``'s table: per arm its setting, accuracy, paired Δ accuracy, verdict, both accountings' ratios, n."""
    paper = next((s.paper_accounting for s in summaries if s.paper_accounting), None)
    paper_head = f"paper's accounting: {paper['name']} ratio [95 % CI]" if paper else "paper's accounting"
    rows = ["| arm | tuned setting | test accuracy (%) | Δ accuracy vs baseline (pt) [95 % CI] | verdict (TOST) "
            f"| energy ratio, ledger [95 % CI] | {paper_head} | BitOPs ratio [95 % CI] | evaluation share of energy "
            "| n |",
            "|---|---|---:|---:|---|---:|---:|---:|---:|---:|"]
    for s in summaries:
        chosen = ", ".join(f"{path} = {value:g}" if isinstance(value, float) else f"{path} = {value}"
                           for path, value in s.chosen.items()) or "—"
        share = f"{100 * s.evaluation_share:.1f} %" if s.evaluation_share is not None else "—"
        rows.append(f"| {s.name}{' (baseline)' if s.baseline else ''} | {chosen} | "
                    f"{s.accuracy_mean:.2f} ± {s.accuracy_std:.2f} | "
                    f"{'—' if s.baseline else difference_text(s)} | {s.verdict} | "
                    f"{ratio_text(s.interval('energy_ratio'))} | {paper_ratio_text(s)} | "
                    f"{ratio_text(s.interval('bitops_ratio'))} | {share} | {len(s.per_seed)} |")
    return "\n".join(rows)


def tuning_table(tuning: dict[str, dict[str, Any]]) -> str:
    """The trials behind each arm's choice (validation accuracy only was read), and every widening of a grid."""
    rows = ["| arm | trial setting | widening round | validation accuracy (%), mean | per tuning seed | chosen |",
            "|---|---|---:|---:|---|---|"]
    for name, entry in tuning.items():
        for trial in entry["trials"]:
            setting = ", ".join(f"{k} = {v}" for k, v in trial["setting"].items())
            per_seed = ", ".join(f"{v:.2f}" for v in trial.get("validation_accuracies", []))
            rows.append(f"| {name} | {setting} | {trial.get('widening', 0)} | {trial['validation_accuracy']:.2f} | "
                        f"{per_seed} | {'yes' if trial['setting'] == entry['chosen'] else ''} |")
    lines = []
    for name, entry in tuning.items():
        for w in entry.get("widenings", []):
            lines.append(f"- {name}: choice on the edge {w['path']} = {w['edge']}; grid widened to {w['added']} "
                         f"(round {w['round']})" + (f", refused by the configuration: {w['refused']}"
                                                    if "refused" in w else ""))
        if entry.get("edge"):
            lines.append(f"- {name}: still on the edge of {', '.join(entry['edge'])} after "
                         f"{MAX_WIDENINGS} widening(s) or where the grid cannot continue")
    return "\n".join(rows + ([""] + lines if lines else []))


def plot_accuracy_vs_cost(path: Path, title: str, summaries: list[ArmSummary], *, cost: str = "energy") -> Path:
    """Accuracy (mean ± std over seeds) against relative energy or BitOPs (mean, 95 % interval), one point per arm."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from codesign.io.reports import write_figure_png

    figure, axis = plt.subplots(figsize=(6, 4.2), dpi=120)
    for s in summaries:
        ratio = s.interval("energy_ratio" if cost == "energy" else "bitops_ratio")
        xerr = [[ratio.mean - ratio.low], [ratio.high - ratio.mean]]
        axis.errorbar(ratio.mean, s.accuracy_mean, xerr=xerr, yerr=s.accuracy_std, fmt="s" if s.baseline else "o",
                      capsize=4, label=s.name)
    axis.set_xlabel(f"{'modelled energy' if cost == 'energy' else 'BitOPs'} relative to baseline")
    axis.set_ylabel("test accuracy (%)")
    axis.set_title(title)
    axis.grid(alpha=0.3)
    axis.legend(fontsize=8)
    figure.tight_layout()
    return write_figure_png(figure, path)


def write_report(out_dir: Path, *, name: str, title: str, summaries: list[ArmSummary], claim: PaperClaim,
                 targets: list[Target], seeds: list[int], settings: dict[str, Any], cost_axis: str = "energy",
                 notes: list[str] | None = None, extra: dict[str, Any] | None = None,
                 tuning: dict[str, dict[str, Any]] | None = None, readme: ReadmeRow | None = None) -> dict[str, Any]:
    """Write ``results.json``, ``table.md`` and ``plot.png`` (accuracy against ``cost_axis``: energy or bitops) of a
    shared-protocol study into ``out_dir``; return the payload of ``results.json``."""
    out_dir = Path(out_dir)
    margin_pt = report_margin(summaries)
    payload = {
        "name": name, "title": title, "seeds": seeds, "settings": ran_settings(settings, summaries),
        "machine": machine_record(),
        "protocol": {"validation_fraction": VALIDATION_FRACTION, "tuning_seeds": list(TUNING_SEEDS),
                     "tuning_split_seed": SPLIT_SEEDS[0], "max_widenings": MAX_WIDENINGS,
                     "split_seeds": sorted({row["split_seed"] for s in summaries for row in s.per_seed}),
                     "equivalence_margin_pt": margin_pt,
                     "difference": "technique - baseline, per (seed, split); 95 % percentile bootstrap and Student "
                                   "t-interval of the mean; TOST (two one-sided t-tests, alpha 0.05) at the margin",
                     "energy": "every pass charged once: training (ledger) plus the validation pass after every "
                               "epoch and the final test pass (codesign.reproduce.cost.charged_cost)"},
        "arms": [asdict(s) for s in summaries], "tuning": tuning or {}, "paper": asdict(claim),
        "targets": [asdict(t) for t in targets], "all_targets_met": all(t.met for t in targets),
        "notes": notes or [], "extra": extra or {}, "readme": asdict(readme) if readme else None,
    }
    payload["run_cost"] = run_cost(out_dir)
    payload["replication"] = replication(payload, module_of(name))
    write_json_atomic(out_dir / "results.json", payload)
    lines = [f"# {title}", "", markdown_table(summaries), "",
             f"Seeds {seeds} crossed with train/test split seeds {payload['protocol']['split_seeds']}; n is the "
             "number of paired (seed, split) runs. Δ accuracy is technique − baseline per run (negative: a loss) and "
             "ratios are per run against the baseline at the same seed and split, trained in the same study; "
             "intervals are 95 % bootstrap intervals of the mean, and for Δ accuracy also the Student t-interval "
             "(the bootstrap is narrower at few runs). The verdict is TOST: two one-sided t-tests (alpha 0.05) that "
             f"Δ accuracy lies within ±margin ({_margin_text(margin_pt)}), the margin fixed in the code before the "
             "run; \"equivalent\" when both reject (p = the larger of the two). Energy: the "
             "project's ledger (compute, on-chip buffers, DRAM; Horowitz 45 nm) and the paper's own accounting, "
             "each charging every pass once (training, the validation pass of every epoch, the final test pass).",
             "", machine_text(payload["machine"]), "", f"**Cost:** {cost_text(payload['run_cost'])}.", "",
             f"**Paper:** {claim.text} ({claim.citation})", ""]
    for target in targets:
        lines.append(f"- target: {target.text} — measured {target.measured} — **{'met' if target.met else 'NOT met'}**")
    for note in notes or []:
        lines.append(f"- note: {note}")
    if tuning and any(entry["trials"] for entry in tuning.values()):
        lines += ["", f"## Tuning (seeds {list(TUNING_SEEDS)} on split {SPLIT_SEEDS[0]}, mean validation accuracy "
                      f"on the validation split of {VALIDATION_FRACTION:.0%}; the test split is never read; a choice "
                      f"on a grid's edge widens the grid, at most {MAX_WIDENINGS} times)", "", tuning_table(tuning)]
    lines += ["", section(payload["replication"])]
    write_text_atomic(out_dir / "table.md", "\n".join(lines) + "\n")
    plot_accuracy_vs_cost(out_dir / "plot.png", title, summaries, cost=cost_axis)
    return payload
