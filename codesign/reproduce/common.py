"""Shared machinery of the paper reproductions: tuned arms x seeds, paired intervals against a same-run baseline.

A reproduction trains a baseline arm and one or more technique arms on the
same data, model, epochs and seeds. The protocol (:func:`run_study`):

1. **Validation split.** Every arm trains with ``data.validation_fraction``
   (:data:`VALIDATION_FRACTION` unless the arm sets one) held out of the
   training split; every choice reads it, never the test split.
2. **Tuning, the same budget for every arm.** Each arm lists candidate
   settings (``Arm.tune``: dotted field -> values, e.g. ``{"optim.lr": (...)}``);
   every arm, baseline included, gets the same number of trial runs, at
   :data:`TUNING_SEED` (a seed no evaluation uses) and the full epoch budget.
   The trial with the highest final validation accuracy wins (ties: the first
   listed).
3. **Evaluation.** The chosen setting of each arm is trained at every seed
   (eight or more for a claim) and tested once.
4. **Paired comparison.** Per seed, *technique − baseline* for accuracy
   (points) and *technique / baseline* for energy and BitOPs; the mean of
   each with its 95 % bootstrap interval (:mod:`codesign.reproduce.stats`).

Every training run is an independent task of :func:`codesign.sweep.run_sweep`
(Dask: a local cluster, an existing one, or this process), cached under
``<report dir>/tasks/``: a re-run skips what is done. Each reproduction writes
``results.json`` (machines; with a ``readme`` row the README's table is
generated from), ``table.md`` and ``plot.png`` (people).
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from codesign.hw.reports import write_json_atomic, write_text_atomic
from codesign.reproduce.stats import (Interval, accuracy_verdict, bootstrap_interval, paired_differences, paired_ratios,
                                      t_interval)
from codesign.train.config import TrainConfig, config_from_dict
from codesign.train.trainer import TrainResult, Trainer

VALIDATION_FRACTION = 0.2  # of the training split, stratified
TUNING_SEED = 1000  # trial runs use a seed no evaluation uses, so the evaluated seeds are not the selected ones
CLAIM_SEEDS = tuple(range(8))  # the default evaluation seeds of a full run
TRAINING_THREADS = 1  # torch threads of every training task (see train_task)
_PINNED_CHOICES: contextvars.ContextVar[Mapping[str, Mapping[str, Any]] | None] = contextvars.ContextVar(
    "pinned_tuning_choices", default=None)


def cpu_model() -> str:
    """The CPU's marketing name (``/proc/cpuinfo``'s model name, else what :mod:`platform` says; '' if unknown)."""
    import platform

    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace").splitlines():
            if line.lower().startswith(("model name", "hardware")) and ":" in line:
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def machine_record() -> dict[str, Any]:
    """The machine a reproduction ran on, as far as it can move a float32 result: no path, no host name.

    torch picks its vectorised kernels by the CPU's instruction set (``cpu_capability``: DEFAULT, AVX2,
    AVX512; ``ATEN_CPU_CAPABILITY`` can lower it), and those kernels sum in different orders, so the same code
    and seed give different last bits on different CPUs. ``threads`` is the torch thread count every training
    task runs with. With a remote Dask scheduler the workers may be other machines: this records the machine
    that wrote the report.
    """
    import os
    import platform

    import numpy
    import torch

    return {"cpu_model": cpu_model(), "machine": platform.machine(),
            "cpu_capability": torch.backends.cpu.get_cpu_capability(),
            "aten_cpu_capability_env": os.environ.get("ATEN_CPU_CAPABILITY", ""),
            "torch": torch.__version__, "numpy": numpy.__version__, "python": platform.python_version(),
            "threads": TRAINING_THREADS}


MACHINE_KEYS = ("cpu_model", "machine", "cpu_capability", "torch", "numpy", "python", "threads")  # what moves bits


def same_machine(a: Mapping[str, Any] | None, b: Mapping[str, Any] | None) -> bool:
    """Whether two machine records promise the same float path (every key of :data:`MACHINE_KEYS` equal)."""
    return bool(a) and bool(b) and all(a.get(key) == b.get(key) for key in MACHINE_KEYS)


class UnpinnedArms(ValueError):
    """Within :func:`pinned_tuning`, the run planned arms the pinned choices do not name (a reproduction whose own
    selections, such as abvs's least sufficient FB, chose differently from the committed run)."""

    def __init__(self, arms: list[str]) -> None:
        super().__init__(f"no recorded tuning choice for arm(s) {', '.join(arms)}")
        self.arms = arms


@contextlib.contextmanager
def pinned_tuning(choices: Mapping[str, Mapping[str, Any]]):
    """Within the block, :func:`tune_arms` runs no trial and returns ``choices`` (arm name -> chosen setting).

    ``codesign reproduce check`` reruns a reproduction with the committed tuning choices: re-tuning on
    another machine could pick another setting, and then nothing would be compared like for like.
    """
    token = _PINNED_CHOICES.set(dict(choices))
    try:
        yield
    finally:
        _PINNED_CHOICES.reset(token)


@dataclass(frozen=True)
class Arm:
    """One configuration to train; ``seed`` in its config is replaced per seed.

    ``tune`` maps dotted config fields (``"optim.lr"``, ``"techniques.psg.beta"``)
    to candidate values; the trials are their Cartesian product.
    """

    name: str
    config: TrainConfig
    baseline: bool = False
    tune: Mapping[str, Sequence[Any]] = field(default_factory=dict)

    def trials(self) -> list[dict[str, Any]]:
        import itertools

        paths = list(self.tune)
        return [dict(zip(paths, values)) for values in itertools.product(*(self.tune[p] for p in paths))] or [{}]


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


@dataclass(frozen=True, kw_only=True)
class Execution:
    """Where the training tasks run: ``workers`` Dask worker processes (0: in this process) or ``scheduler``."""

    workers: int = 0
    scheduler: str | None = None
    retries: int = 1
    progress: bool = True


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
    accuracy_difference_mean: float  # technique - baseline, points (negative: a loss)
    seconds: float
    accuracy_difference: dict[str, Any] = field(default_factory=dict)  # Interval.as_dict(), points
    accuracy_difference_t: dict[str, Any] = field(default_factory=dict)  # the Student t-interval of the same, points
    energy_ratio: dict[str, Any] = field(default_factory=dict)  # Interval.as_dict()
    bitops_ratio: dict[str, Any] = field(default_factory=dict)  # Interval.as_dict()
    verdict: str = ""
    validation_accuracy_mean: float | None = None
    chosen: dict[str, Any] = field(default_factory=dict)  # the tuned setting this arm was evaluated with
    per_seed: list[dict[str, Any]] = field(default_factory=list)
    techniques: list[dict[str, Any]] = field(default_factory=list)
    validation_fraction: float | None = None  # of the training split held out in this arm's evaluation runs

    def interval(self, name: str) -> Interval:
        return Interval(**getattr(self, name))


def mean_std(values: list[float]) -> tuple[float, float]:
    if not values:
        return float("nan"), float("nan")
    return statistics.fmean(values), (statistics.stdev(values) if len(values) > 1 else 0.0)


# ---------------------------------------------------------------------------- settings and tasks


def with_setting(config: TrainConfig, path: str, value: Any) -> TrainConfig:
    """``config`` with the dotted field ``path`` set to ``value`` (validated like any configuration)."""
    head, _, rest = path.partition(".")
    if head == "techniques":
        name, _, leaf = rest.partition(".")
        if name not in config.techniques or not leaf:
            raise ValueError(f"{path}: the configuration has no technique {name!r} to tune")
        techniques = dict(config.techniques)
        techniques[name] = dataclasses.replace(techniques[name], **{leaf: value})
        return config.replace(techniques=techniques)
    if head in ("data", "model", "optim") and rest and "." not in rest:
        return config.replace(**{head: dataclasses.replace(getattr(config, head), **{rest: value})})
    if path == "seed":
        return config.replace(seed=value)
    raise ValueError(f"cannot tune {path!r}: expected data.X, model.X, optim.X or techniques.NAME.X")


def with_settings(config: TrainConfig, settings: Mapping[str, Any]) -> TrainConfig:
    for path, value in settings.items():
        config = with_setting(config, path, value)
    return config


def with_validation(config: TrainConfig) -> TrainConfig:
    if config.data.validation_fraction > 0:
        return config
    return config.replace(data=dataclasses.replace(config.data, validation_fraction=VALIDATION_FRACTION))


def train_task(*, config: dict, description: str = "train") -> dict:
    """One training run (a sweep task): the configuration as plain data in, the :class:`TrainResult` as data out.

    Torch runs on one thread: float32 sums can differ in their last bits with
    the thread count, and results must not depend on where a task ran.
    """
    import torch

    torch.set_num_threads(TRAINING_THREADS)
    result = Trainer(config_from_dict(config), progress=False, description=description).fit()
    return asdict(result)


def _key(*parts: str) -> str:
    import re

    return ",".join(re.sub(r"[^A-Za-z0-9._=+-]", "_", part) for part in parts)


def _run_tasks(tasks: list, out_dir: Path, execution: Execution) -> dict[str, dict]:
    from codesign.sweep import read_result, run_sweep

    report = run_sweep(tasks, out_dir, scheduler=execution.scheduler, workers=execution.workers,
                       retries=execution.retries, progress=execution.progress)
    if report.failed:
        raise RuntimeError("training tasks failed (a re-run retries them):\n" + report.summary())
    return {task.key: read_result(out_dir, task) for task in tasks}


def tune_arms(arms: list[Arm], out_dir: Path, execution: Execution) -> dict[str, dict[str, Any]]:
    """Trial runs of every arm's candidates on the validation split; returns each arm's trials and choice."""
    from codesign.sweep import SweepTask

    pinned = _PINNED_CHOICES.get()
    if pinned is not None:
        missing = [arm.name for arm in arms if arm.name not in pinned]
        if missing:
            raise UnpinnedArms(missing)
        return {arm.name: {"trials": [], "chosen": dict(pinned[arm.name]), "pinned": True} for arm in arms}
    budgets = {arm.name: len(arm.trials()) for arm in arms}
    if len(set(budgets.values())) != 1:
        raise ValueError(f"every arm must get the same tuning budget (number of trials), got {budgets}")
    if budgets[arms[0].name] == 1:  # one candidate each: nothing to choose, no trial runs
        return {arm.name: {"trials": [], "chosen": arm.trials()[0]} for arm in arms}
    tasks, index = [], {}
    for arm in arms:
        for number, trial in enumerate(arm.trials()):
            config = with_settings(with_validation(arm.config), trial).replace(seed=TUNING_SEED)
            task = SweepTask(key=_key("tune", arm.name, str(number)), function="codesign.reproduce.common:train_task",
                             kwargs={"config": config.to_dict(), "description": f"tune {arm.name} {trial}"})
            tasks.append(task)
            index[task.key] = (arm.name, trial)
    results = _run_tasks(tasks, out_dir, execution)
    tuning: dict[str, dict[str, Any]] = {arm.name: {"trials": [], "chosen": {}} for arm in arms}
    for key, (name, trial) in index.items():
        result = results[key]
        tuning[name]["trials"].append({"setting": trial, "validation_accuracy": result["validation_accuracy"]})
    for name, entry in tuning.items():
        best = max(enumerate(entry["trials"]), key=lambda item: (item[1]["validation_accuracy"], -item[0]))[1]
        entry["chosen"] = best["setting"]
    return tuning


def study_seeds(seeds: Sequence[int] | None, smoke: bool) -> list[int]:
    """The evaluation seeds of a reproduction: those given, else seed 0 for a smoke run and CLAIM_SEEDS for a claim.

    An empty list is refused, never taken as "the default".
    """
    if seeds is None:
        return [0] if smoke else list(CLAIM_SEEDS)
    if not seeds:
        raise ValueError("seeds: give at least one seed, or none for the default")
    return list(seeds)


def run_study(arms: list[Arm], seeds: Sequence[int], out_dir: Path, *, execution: Execution = Execution()
              ) -> tuple[dict[str, list[TrainResult]], dict[str, dict[str, Any]]]:
    """Tune every arm (same budget, validation split), then train its choice at every seed.

    Returns the evaluation runs (arm name -> one :class:`TrainResult` per seed,
    in ``seeds`` order) and the tuning record (arm name -> trials, chosen).
    """
    from codesign.sweep import SweepTask

    if sum(arm.baseline for arm in arms) != 1:
        raise ValueError("exactly one arm must be the baseline")
    names = [arm.name for arm in arms]
    if len(set(names)) != len(names):
        raise ValueError(f"arm names must be unique, got {names}")
    seeds = list(seeds)
    if not seeds or len(set(seeds)) != len(seeds):
        raise ValueError(f"seeds must be a non-empty list without repeats, got {seeds}")
    if TUNING_SEED in seeds:
        raise ValueError(f"seed {TUNING_SEED} is reserved for tuning runs")
    for arm in arms:  # every candidate is a valid configuration before any task runs
        for trial in arm.trials():
            with_settings(arm.config, trial)
    task_dir = Path(out_dir) / "tasks"
    tuning = tune_arms(arms, task_dir, execution)
    tasks, index = [], {}
    for arm in arms:
        config = with_settings(with_validation(arm.config), tuning[arm.name]["chosen"])
        for seed in seeds:
            task = SweepTask(key=_key("eval", arm.name, f"seed={seed}"), function="codesign.reproduce.common:train_task",
                             kwargs={"config": config.replace(seed=seed).to_dict(),
                                     "description": f"{arm.name} seed {seed}"})
            tasks.append(task)
            index[task.key] = arm.name
    results = _run_tasks(tasks, task_dir, execution)
    runs: dict[str, list[TrainResult]] = {arm.name: [] for arm in arms}
    for key, name in index.items():
        runs[name].append(TrainResult(**results[key]))
    return runs, tuning


def summarize(arms: list[Arm], results: dict[str, list[TrainResult]],
              tuning: dict[str, dict[str, Any]] | None = None) -> list[ArmSummary]:
    """Per arm: accuracy over seeds, and paired intervals against the same-seed baseline runs."""
    baseline = next(arm for arm in arms if arm.baseline)
    base_runs = results[baseline.name]
    summaries = []
    for arm in arms:
        runs = results[arm.name]
        differences = paired_differences([r.test_accuracy for r in runs], [b.test_accuracy for b in base_runs])
        energy_ratios = paired_ratios([r.energy_pj for r in runs], [b.energy_pj for b in base_runs])
        bitops_ratios = paired_ratios([r.bitops for r in runs], [b.bitops for b in base_runs])
        difference = bootstrap_interval(differences)
        accuracy = mean_std([run.test_accuracy for run in runs])
        energy_ratio = mean_std(energy_ratios)
        bitops_ratio = mean_std(bitops_ratios)
        validation = [r.validation_accuracy for r in runs if r.validation_accuracy is not None]
        summaries.append(ArmSummary(
            name=arm.name, baseline=arm.baseline, accuracy_mean=accuracy[0], accuracy_std=accuracy[1],
            energy_pj_mean=statistics.fmean(run.energy_pj for run in runs),
            bitops_mean=statistics.fmean(run.bitops for run in runs),
            energy_ratio_mean=energy_ratio[0], energy_ratio_std=energy_ratio[1],
            bitops_ratio_mean=bitops_ratio[0], bitops_ratio_std=bitops_ratio[1],
            accuracy_difference_mean=difference.mean, seconds=sum(run.seconds for run in runs),
            accuracy_difference=difference.as_dict(), accuracy_difference_t=t_interval(differences).as_dict(),
            energy_ratio=bootstrap_interval(energy_ratios).as_dict(),
            bitops_ratio=bootstrap_interval(bitops_ratios).as_dict(),
            verdict="baseline" if arm.baseline else accuracy_verdict(difference),
            validation_accuracy_mean=statistics.fmean(validation) if validation else None,
            chosen=dict((tuning or {}).get(arm.name, {}).get("chosen", {})),
            per_seed=[{"seed": run.config["seed"], "test_accuracy": run.test_accuracy,
                       "validation_accuracy": run.validation_accuracy, "energy_pj": run.energy_pj,
                       "bitops": run.bitops, "skipped_steps": run.skipped_steps, "steps": run.steps}
                      for run in runs],
            techniques=[run.techniques for run in runs],
            validation_fraction=_ran_validation_fraction(runs),
        ))
    return summaries


def machine_text(machine: Mapping[str, Any]) -> str:
    return (f"Machine: {machine['cpu_model']} ({machine['machine']}), torch CPU capability "
            f"{machine['cpu_capability']}, torch {machine['torch']}, numpy {machine['numpy']}, "
            f"Python {machine['python']}, {machine['threads']} torch thread(s) per training run.")


def _ran_validation_fraction(runs: list[TrainResult]) -> float | None:
    fractions = {float(run.config.get("data", {}).get("validation_fraction", 0.0)) for run in runs}
    return fractions.pop() if len(fractions) == 1 else None


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


def ratio_text(interval: Interval, digits: int = 3) -> str:
    return f"{interval.mean:.{digits}f} [{interval.low:.{digits}f}, {interval.high:.{digits}f}]"


def percent_text(interval: dict) -> str:
    """A fraction's interval (``Interval.as_dict()``) in per cent: ``12.3 % [10.1, 14.0]``."""
    return f"{100 * interval['mean']:.1f} % [{100 * interval['low']:.1f}, {100 * interval['high']:.1f}]"


def saving_text(interval: Interval) -> str:
    """An energy ratio's interval as a saving in per cent (1 - ratio; the bounds swap)."""
    return f"{100 * (1 - interval.mean):.1f} % [{100 * (1 - interval.high):.1f}, {100 * (1 - interval.low):.1f}]"


def _difference_text(summary: ArmSummary) -> str:
    """The accuracy difference with both 95 % intervals, bootstrap and Student t (a report of an older run has the
    bootstrap one only)."""
    boot = summary.interval("accuracy_difference")
    if not summary.accuracy_difference_t:
        return boot.text()
    t = summary.interval("accuracy_difference_t")
    return f"{boot.mean:+.2f} [boot {boot.low:+.2f}, {boot.high:+.2f}; t {t.low:+.2f}, {t.high:+.2f}]"


def markdown_table(summaries: list[ArmSummary]) -> str:
    rows = ["| arm | tuned setting | test accuracy (%) | Δ accuracy vs baseline (pt) [95 % CI] | energy ratio [95 % CI] "
            "| BitOPs ratio [95 % CI] | verdict | n |",
            "|---|---|---:|---:|---:|---:|---|---:|"]
    for s in summaries:
        chosen = ", ".join(f"{path} = {value:g}" if isinstance(value, float) else f"{path} = {value}"
                           for path, value in s.chosen.items()) or "—"
        rows.append(f"| {s.name}{' (baseline)' if s.baseline else ''} | {chosen} | "
                    f"{s.accuracy_mean:.2f} ± {s.accuracy_std:.2f} | "
                    f"{'—' if s.baseline else _difference_text(s)} | "
                    f"{ratio_text(s.interval('energy_ratio'))} | {ratio_text(s.interval('bitops_ratio'))} | "
                    f"{s.verdict} | {len(s.per_seed)} |")
    return "\n".join(rows)


def tuning_table(tuning: dict[str, dict[str, Any]]) -> str:
    """The trial runs behind each arm's choice (validation accuracy only was read)."""
    rows = ["| arm | trial setting | validation accuracy (%) | chosen |", "|---|---|---:|---|"]
    for name, entry in tuning.items():
        for trial in entry["trials"]:
            setting = ", ".join(f"{k} = {v}" for k, v in trial["setting"].items())
            rows.append(f"| {name} | {setting} | {trial['validation_accuracy']:.2f} | "
                        f"{'yes' if trial['setting'] == entry['chosen'] else ''} |")
    return "\n".join(rows)


def plot_accuracy_vs_cost(path: Path, title: str, summaries: list[ArmSummary], *, cost: str = "energy") -> Path:
    """Accuracy (mean ± std over seeds) against relative energy or BitOPs (mean, 95 % interval), one point per arm."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from codesign.hw.reports import write_figure_png

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


@dataclass(frozen=True)
class ReadmeRow:
    """The README's line for a reproduction (the table there is generated from ``results.json``)."""

    reproduction: str
    target: str
    measured: str
    verdict: str


def write_report(out_dir: Path, *, name: str, title: str, summaries: list[ArmSummary], claim: PaperClaim,
                 targets: list[Target], seeds: list[int], settings: dict[str, Any], cost_axis: str = "energy",
                 notes: list[str] | None = None, extra: dict[str, Any] | None = None,
                 tuning: dict[str, dict[str, Any]] | None = None, readme: ReadmeRow | None = None) -> dict[str, Any]:
    out_dir = Path(out_dir)
    payload = {
        "name": name, "title": title, "seeds": seeds, "settings": ran_settings(settings, summaries),
        "machine": machine_record(),
        "protocol": {"validation_fraction": VALIDATION_FRACTION, "tuning_seed": TUNING_SEED,
                     "difference": "technique - baseline, per seed; 95 % percentile bootstrap of the mean"},
        "arms": [asdict(s) for s in summaries], "tuning": tuning or {}, "paper": asdict(claim),
        "targets": [asdict(t) for t in targets], "all_targets_met": all(t.met for t in targets),
        "notes": notes or [], "extra": extra or {}, "readme": asdict(readme) if readme else None,
    }
    write_json_atomic(out_dir / "results.json", payload)
    lines = [f"# {title}", "", markdown_table(summaries), "",
             f"Seeds {seeds}. Δ accuracy is technique − baseline per seed (negative: a loss) and ratios are per seed "
             "against the same-seed baseline trained in the same run; intervals are 95 % bootstrap intervals of the "
             "mean over seeds, and for Δ accuracy also the Student t-interval (narrower bootstraps at few seeds are "
             "why both are given); n is the number of seeds.", "", machine_text(payload["machine"]), "",
             f"**Paper:** {claim.text} ({claim.citation})", ""]
    for target in targets:
        lines.append(f"- target: {target.text} — measured {target.measured} — **{'met' if target.met else 'NOT met'}**")
    for note in notes or []:
        lines.append(f"- note: {note}")
    if tuning and any(entry["trials"] for entry in tuning.values()):
        lines += ["", f"## Tuning (seed {TUNING_SEED}, validation split of {VALIDATION_FRACTION:.0%}; "
                      "the test split is never read)", "", tuning_table(tuning)]
    write_text_atomic(out_dir / "table.md", "\n".join(lines) + "\n")
    plot_accuracy_vs_cost(out_dir / "plot.png", title, summaries, cost=cost_axis)
    return payload
