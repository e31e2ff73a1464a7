"""Shared machinery of the paper reproductions: tuned arms x seeds, paired intervals against a same-run baseline.

A reproduction trains a baseline arm and one or more technique arms on the
same data, model, epochs and seeds. The protocol (:func:`run_study`):

1. **Validation split.** Every arm trains with ``data.validation_fraction``
   (:data:`VALIDATION_FRACTION` unless the arm sets one) held out of the
   training split; every choice reads it, never the test split.
2. **Tuning, the same budget for every arm.** Each arm lists candidate
   settings (``Arm.tune``: dotted field -> values, e.g. ``{"optim.lr": (...)}``);
   every arm, baseline included, gets the same number of trials, each trained
   at the three :data:`TUNING_SEEDS` (seeds no evaluation uses) on split
   the first of :data:`SPLIT_SEEDS` with the full epoch budget. The trial with the
   highest *mean* final validation accuracy over those seeds wins (ties: the
   first listed): one seed on a few hundred validation images picks noise.
3. **Widening.** When the choice lies on the edge of a numeric grid (the
   largest or the smallest value tried), the grid is continued one step beyond
   that edge (its geometric step when the values are, else its arithmetic
   one) and the arm's new trials run; at most :data:`MAX_WIDENINGS` times per
   arm. Every widening is recorded (``tuning[arm]["widenings"]``), and an arm
   still on an edge after the last one says so (``"edge"``).
4. **Evaluation.** The chosen setting of each arm is trained at every seed
   crossed with every resampled train/test split (:data:`CLAIM_SEEDS` x
   :data:`SPLIT_SEEDS`: n = 9 paired runs per arm) and tested once; each run
   records its split seed.
5. **Paired comparison.** Per (seed, split), *technique − baseline* for
   accuracy (points) and *technique / baseline* for energy and BitOPs; the mean
   of each with its 95 % bootstrap and Student t-intervals
   (:mod:`codesign.reproduce.stats`), and the accuracy claim judged by two
   one-sided tests (TOST) at the equivalence margin each reproduction fixes in
   its code (``margin_pt`` of :func:`summarize`).

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

from codesign.io.reports import write_json_atomic, write_text_atomic
from codesign.reproduce.stats import (Interval, accuracy_verdict, bootstrap_interval, paired_differences, paired_ratios,
                                      t_interval, tost)
from codesign.train.config import TrainConfig, config_from_dict
from codesign.train.trainer import TrainResult, Trainer

VALIDATION_FRACTION = 0.2  # of the training split, stratified
TUNING_SEED = 1000  # trial runs use seeds no evaluation uses, so the evaluated seeds are not the selected ones
TUNING_SEEDS = (TUNING_SEED, TUNING_SEED + 1, TUNING_SEED + 2)  # every trial at each; the mean validation accuracy decides
SPLIT_SEEDS = (0, 1, 2)  # resampled train/test splits (DataConfig.split_seed), crossed with the evaluation seeds
CLAIM_SEEDS = (0, 1, 2)  # the default evaluation seeds of a full run: x SPLIT_SEEDS = 9 paired runs per arm
MAX_WIDENINGS = 2  # how many times an arm's grid is continued past the edge its choice landed on
GEOMETRIC_TOLERANCE = 0.15  # consecutive ratios within 15 % of each other: the grid's step is geometric
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
    accuracy_tost: dict[str, Any] = field(default_factory=dict)  # Tost.as_dict() of Δ accuracy at the margin (points)
    paper_ratio: dict[str, Any] = field(default_factory=dict)  # Interval.as_dict() of the paper's own cost ratio
    paper_accounting: dict[str, Any] = field(default_factory=dict)  # asdict(PaperAccounting): what that ratio counts
    evaluation_share: float | None = None  # of the charged ledger energy, the validation and test passes' share
    training_energy_ratio: dict[str, Any] = field(default_factory=dict)  # Interval.as_dict(): the ledger, training only

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


def _set_aside_superseded(tasks: list, out_dir: Path) -> None:
    """Move a cached result that another task wrote under the same key to ``<key>.superseded.json``.

    A reproduction's cache outlives its choices: when re-tuning picks another setting, the evaluation run
    ``eval,<arm>,seed=<s>`` of the old choice sits under the key of the new one. The sweep refuses to read it (it
    is another task); here it is kept aside, never read as this task's result, and the task runs again.
    """
    from codesign.io.jsonfile import load_json
    from codesign.sweep import result_path

    for task in tasks:
        path = result_path(out_dir, task.key)
        if path.is_file() and load_json(path, what="sweep result").get("task") != task.to_dict():
            path.replace(path.with_name(f"{task.key}.superseded.json"))


def _run_tasks(tasks: list, out_dir: Path, execution: Execution) -> dict[str, dict]:
    from codesign.sweep import read_result, run_sweep

    _set_aside_superseded(tasks, out_dir)
    report = run_sweep(tasks, out_dir, scheduler=execution.scheduler, workers=execution.workers,
                       retries=execution.retries, progress=execution.progress)
    if report.failed:
        raise RuntimeError("training tasks failed (a re-run retries them):\n" + report.summary())
    return {task.key: read_result(out_dir, task) for task in tasks}


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def widened_value(grid: Sequence[Any], chosen: Any) -> Any | None:
    """The next value beyond the edge of ``grid`` that ``chosen`` lies on, or None (not on an edge, not numeric).

    The grid's own step is continued from its two outermost values on that side: geometric (``edge * edge /
    neighbour``) when every value is positive and the consecutive ratios agree within
    :data:`GEOMETRIC_TOLERANCE`, else arithmetic (``edge + (edge - neighbour)``). An integer grid stays
    integer; a step that rounds onto the edge itself gives None.
    """
    values = list(grid)
    if len(values) < 2 or not all(_is_number(v) for v in values) or len(set(values)) != len(values):
        return None
    if chosen == values[0]:
        edge, neighbour = values[0], values[1]
    elif chosen == values[-1]:
        edge, neighbour = values[-1], values[-2]
    else:
        return None
    ratios = [b / a for a, b in zip(values, values[1:])] if all(v > 0 for v in values) else []
    geometric = bool(ratios) and max(ratios) <= min(ratios) * (1 + GEOMETRIC_TOLERANCE) and \
        (all(r > 1 for r in ratios) or all(r < 1 for r in ratios))
    new = edge * (edge / neighbour) if geometric else edge + (edge - neighbour)
    if all(isinstance(v, int) for v in values):
        new = int(round(new))
    else:
        new = float(f"{new:.6g}")  # 0.1 * 2 stays 0.2, not 0.20000000000000001
    return None if new == edge or new in values else new


def _tuning_key(arm: str, number: int, seed: int) -> str:
    # the first tuning seed keeps the name (and description) runs had before tuning crossed seeds, so a cached
    # trial stays valid
    return _key("tune", arm, str(number)) if seed == TUNING_SEEDS[0] else _key("tune", arm, str(number), f"seed={seed}")


def _evaluation_key(arm: str, seed: int, split: int) -> str:
    # split 0 keeps the name (and description) runs had before splits were resampled, so a cached run stays valid
    return _key("eval", arm, f"seed={seed}") if split == SPLIT_SEEDS[0] else _key("eval", arm, f"seed={seed}",
                                                                                 f"split={split}")


def _with_split(config: TrainConfig, split: int) -> TrainConfig:
    return config.replace(data=dataclasses.replace(config.data, split_seed=split))


def _run_trials(pending: list[tuple[Arm, int, dict[str, Any]]], out_dir: Path, execution: Execution
                ) -> dict[tuple[str, int], list[float]]:
    """Train each (arm, trial number, setting) at every tuning seed; its validation accuracies (%), seed order."""
    from codesign.sweep import SweepTask

    tasks, index = [], {}
    for arm, number, trial in pending:
        for seed in TUNING_SEEDS:
            config = _with_split(with_settings(with_validation(arm.config), trial), SPLIT_SEEDS[0]).replace(seed=seed)
            task = SweepTask(key=_tuning_key(arm.name, number, seed), function="codesign.reproduce.common:train_task",
                             kwargs={"config": config.to_dict(), "description": f"tune {arm.name} {trial}" + (
                                 "" if seed == TUNING_SEEDS[0] else f" seed {seed}")})
            tasks.append(task)
            index[task.key] = (arm.name, number)
    accuracies: dict[tuple[str, int], list[float]] = {}
    for key, result in _run_tasks(tasks, out_dir, execution).items():
        accuracies.setdefault(index[key], []).append(result["validation_accuracy"])
    return accuracies


def _choose(trials: list[dict[str, Any]]) -> dict[str, Any]:
    return max(enumerate(trials), key=lambda item: (item[1]["validation_accuracy"], -item[0]))[1]["setting"]


def tune_arms(arms: list[Arm], out_dir: Path, execution: Execution) -> dict[str, dict[str, Any]]:
    """Trials of every arm's candidates on the validation split, each at every tuning seed; widened at an edge.

    Returns, per arm: ``trials`` (setting, mean validation accuracy, the per-seed accuracies, the widening round
    that added it: 0 for the arm's own grid), ``chosen``, ``grid`` (each tuned field's values as finally tried),
    ``widenings`` (field, edge value, value added, round) and ``edge`` (fields whose choice is still on an edge
    after :data:`MAX_WIDENINGS` rounds, or where the grid could not be continued).
    """
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
    tuning: dict[str, dict[str, Any]] = {
        arm.name: {"trials": [], "chosen": {}, "grid": {path: list(values) for path, values in arm.tune.items()},
                   "widenings": [], "edge": []} for arm in arms}
    pending = [(arm, number, trial) for arm in arms for number, trial in enumerate(arm.trials())]
    by_name = {arm.name: arm for arm in arms}
    for round_number in range(MAX_WIDENINGS + 1):
        accuracies = _run_trials(pending, out_dir, execution)
        for arm, number, trial in pending:
            values = accuracies[(arm.name, number)]
            tuning[arm.name]["trials"].append({"setting": trial, "validation_accuracy": statistics.fmean(values),
                                               "validation_accuracies": values, "tuning_seeds": list(TUNING_SEEDS),
                                               "widening": round_number})
        pending = []
        for name, entry in tuning.items():
            entry["chosen"] = chosen = _choose(entry["trials"])
            entry["edge"] = []
            for path, grid in entry["grid"].items():
                new = widened_value(grid, chosen[path])
                if new is None:
                    continue
                if round_number == MAX_WIDENINGS:
                    entry["edge"].append(path)
                    continue
                setting = {**chosen, path: new}
                try:
                    with_settings(by_name[name].config, setting)
                except ValueError as error:  # the continued grid leaves what the configuration accepts
                    entry["edge"].append(path)
                    entry["widenings"].append({"path": path, "edge": chosen[path], "added": new,
                                               "round": round_number + 1, "refused": str(error)})
                    continue
                entry["grid"][path] = [new] + grid if chosen[path] == grid[0] else grid + [new]
                entry["widenings"].append({"path": path, "edge": chosen[path], "added": new, "round": round_number + 1})
                pending.append((by_name[name], len(entry["trials"]) + len(
                    [p for p in pending if p[0].name == name]), setting))
        if not pending:
            break
    return tuning


def study_seeds(seeds: Sequence[int] | None, smoke: bool, default: Sequence[int] = CLAIM_SEEDS) -> list[int]:
    """The evaluation seeds of a reproduction: those given, else seed 0 for a smoke run and ``default`` (the
    reproduction's claim seeds, :data:`CLAIM_SEEDS` unless it has its own) for a claim.

    An empty list is refused, never taken as "the default".
    """
    if seeds is None:
        return [0] if smoke else list(default)
    if not seeds:
        raise ValueError("seeds: give at least one seed, or none for the default")
    return list(seeds)


def study_splits(seeds: Sequence[int]) -> list[int]:
    """The train/test splits crossed with ``seeds``: all of :data:`SPLIT_SEEDS`, or the first alone for one seed.

    One seed is a smoke run or a spot check (``codesign reproduce check --seeds 1``), not a claim.
    """
    return list(SPLIT_SEEDS) if len(seeds) > 1 else [SPLIT_SEEDS[0]]


def run_study(arms: list[Arm], seeds: Sequence[int], out_dir: Path, *, execution: Execution = Execution(),
              splits: Sequence[int] | None = None
              ) -> tuple[dict[str, list[TrainResult]], dict[str, dict[str, Any]]]:
    """Tune every arm (same budget, validation split), then train its choice at every (split, seed).

    Returns the evaluation runs (arm name -> one :class:`TrainResult` per (split, seed), splits outer and
    seeds inner, the same order for every arm: the pairing) and the tuning record (arm name -> trials,
    chosen, widenings). ``splits`` defaults to :func:`study_splits`.
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
    if set(TUNING_SEEDS) & set(seeds):
        raise ValueError(f"seeds {list(TUNING_SEEDS)} are reserved for tuning runs")
    splits = study_splits(seeds) if splits is None else list(splits)
    if not splits or len(set(splits)) != len(splits):
        raise ValueError(f"splits must be a non-empty list without repeats, got {splits}")
    for arm in arms:  # every candidate is a valid configuration before any task runs
        for trial in arm.trials():
            with_settings(arm.config, trial)
    task_dir = Path(out_dir) / "tasks"
    tuning = tune_arms(arms, task_dir, execution)
    tasks, index = [], {}
    for arm in arms:
        config = with_settings(with_validation(arm.config), tuning[arm.name]["chosen"])
        for split in splits:
            for seed in seeds:
                task = SweepTask(key=_evaluation_key(arm.name, seed, split),
                                 function="codesign.reproduce.common:train_task",
                                 kwargs={"config": _with_split(config, split).replace(seed=seed).to_dict(),
                                         "description": f"{arm.name} seed {seed}" + (
                                             "" if split == SPLIT_SEEDS[0] else f" split {split}")})
                tasks.append(task)
                index[task.key] = arm.name
    results = _run_tasks(tasks, task_dir, execution)
    runs: dict[str, list[TrainResult]] = {arm.name: [] for arm in arms}
    for key, name in index.items():
        runs[name].append(TrainResult(**results[key]))
    return runs, tuning


COST_KEYS = ("macs", "bitops", "compute_pj", "energy_pj")  # the cost totals charged per run, training plus evaluation


@dataclass(frozen=True, kw_only=True)
class PaperAccounting:
    """What a paper counts as its cost, read from the ledger's totals beside the project's modelled energy.

    ``key`` is one of :data:`COST_KEYS`: ``compute_pj`` (the energy of the MACs alone, by their precision, no
    data movement: E²-Train's computational energy, ABVS's Eq. (2)), ``bitops`` (CPT) or ``macs`` (an
    operation count). ``name`` says it in the paper's words, ``citation`` where.
    """

    key: str
    name: str
    citation: str

    def __post_init__(self) -> None:
        if self.key not in COST_KEYS:
            raise ValueError(f"paper accounting key must be one of {COST_KEYS}, got {self.key!r}")


E2TRAIN_ACCOUNTING = PaperAccounting(
    key="compute_pj", name="computational energy",
    citation=("E²-Train (NeurIPS 2019) Sec. 4.1: the energy of the computation, by precision (its FPGA measures "
              "the compute engine); here the ledger's MAC energy alone, no buffer or DRAM traffic"))


def _data_sizes(config: Mapping[str, Any]) -> dict[str, int]:
    """Images in the training, validation and test splits of a run's data (the same at every split seed)."""
    from codesign.train.trainer import load_dataset

    dataset = load_dataset(config_from_dict(dict(config)))
    return {"train": dataset.train_size, "validation": int(dataset.validation_y.numel()) if dataset.has_validation
            else 0, "test": int(dataset.test_y.numel())}


# Forward MACs a technique spends on images that are not training samples (counted in the ledger's forward
# phase): compressed training's pruning search over the validation split, CPT's range-test batches (held, and
# probe batches when branched). They are charged already, once; they must not inflate the forward cost per image
# that evaluation passes are priced at.
NON_TRAINING_FORWARD_MACS = (("compress", ("search_forward_macs",)), ("cpt", ("range_test", "held_forward_macs")),
                             ("cpt", ("range_test", "probe_forward_macs")))


def non_training_forward_macs(run: TrainResult) -> int:
    """The forward MACs of :data:`NON_TRAINING_FORWARD_MACS` in this run's technique reports (0 when none)."""
    total = 0
    for technique, path in NON_TRAINING_FORWARD_MACS:
        value: Any = run.techniques.get(technique)
        for key in path:
            value = value.get(key) if isinstance(value, Mapping) else None
        total += int(value or 0)
    return total


def charged_cost(run: TrainResult, sizes: Mapping[str, int]) -> dict[str, float]:
    """The run's cost with every pass charged once: training (the ledger), plus evaluation forward passes.

    The ledger counts training only (forward, error, weight gradient). A run also evaluates the validation
    split after every epoch (what every choice reads) and the test split once at the end; those forward
    passes are charged here at the run's own training forward cost per image (forward-phase totals, less the
    share of :func:`non_training_forward_macs`, over the images it trained on: ``train`` x epochs x the share of
    steps not dropped), in each of :data:`COST_KEYS`. That is the mean over training: for compressed training it
    mixes the dense FP32 warm-up epochs with the pruned 8-bit ones, so it overstates the pruned model's evaluation.
    For an arm that skips blocks in training (SLU, stochastic depth) that undercounts the full network an
    evaluation runs; for CPT or ABVS it prices evaluation at the mean training precision.
    Returns ``{key: training + evaluation}`` and ``evaluation_share`` (of ``energy_pj``).
    """
    forward = run.cost["by_phase"]["forward"]
    training_share = 1 - non_training_forward_macs(run) / forward["macs"] if forward["macs"] else 0.0
    epochs = int(run.config["optim"]["epochs"])
    kept = (run.steps - run.skipped_steps) / run.steps if run.steps else 0.0
    forwarded = sizes["train"] * epochs * kept
    evaluated = epochs * sizes["validation"] + sizes["test"]
    charged: dict[str, float] = {}
    for key in COST_KEYS:
        evaluation = forward[key] * training_share / forwarded * evaluated if forwarded else 0.0
        charged[key] = float(run.cost["total"][key]) + evaluation
        if key == "energy_pj":
            charged["evaluation_share"] = evaluation / charged[key] if charged[key] else 0.0
    return charged


def summarize(arms: list[Arm], results: dict[str, list[TrainResult]],
              tuning: dict[str, dict[str, Any]] | None = None, *,
              margin_pt: float | Mapping[str, float] | None = None,
              paper: PaperAccounting | None = None) -> list[ArmSummary]:
    """Per arm: accuracy over the (seed, split) runs, paired intervals against the same-run baseline, TOST.

    ``margin_pt`` is the reproduction's equivalence margin (points, fixed in its code before the run; one for
    every arm, or arm name -> margin): each technique arm's verdict is then the two one-sided tests
    (:func:`codesign.reproduce.stats.tost`) of its paired accuracy difference at ±margin. Energy and BitOPs ratios charge every pass once
    (:func:`charged_cost`); ``paper`` adds the paper's own accounting as a second ratio.
    """
    baseline = next(arm for arm in arms if arm.baseline)
    sizes = _data_sizes(results[baseline.name][0].config)
    charged = {arm.name: [charged_cost(run, sizes) for run in results[arm.name]] for arm in arms}
    base_runs, base_cost = results[baseline.name], charged[baseline.name]
    summaries = []
    for arm in arms:
        runs, cost = results[arm.name], charged[arm.name]
        if [(r.config["seed"], r.config["data"]["split_seed"]) for r in runs] != \
                [(b.config["seed"], b.config["data"]["split_seed"]) for b in base_runs]:
            raise ValueError(f"arm {arm.name}: its runs are not the baseline's (seed, split) pairs in order")
        differences = paired_differences([r.test_accuracy for r in runs], [b.test_accuracy for b in base_runs])
        energy_ratios = paired_ratios([c["energy_pj"] for c in cost], [b["energy_pj"] for b in base_cost])
        bitops_ratios = paired_ratios([c["bitops"] for c in cost], [b["bitops"] for b in base_cost])
        difference = bootstrap_interval(differences)
        accuracy = mean_std([run.test_accuracy for run in runs])
        energy_ratio = mean_std(energy_ratios)
        bitops_ratio = mean_std(bitops_ratios)
        validation = [r.validation_accuracy for r in runs if r.validation_accuracy is not None]
        margin = margin_pt.get(arm.name) if isinstance(margin_pt, Mapping) else margin_pt
        test = tost(differences, margin) if margin is not None and not arm.baseline else None
        equivalence = test.as_dict() if test is not None else {}
        if arm.baseline:
            verdict = "baseline"
        elif test is not None:
            verdict = test.text()
        else:
            verdict = accuracy_verdict(difference)
        paper_ratio = {}
        if paper is not None:
            paper_ratio = bootstrap_interval(paired_ratios([c[paper.key] for c in cost],
                                                           [b[paper.key] for b in base_cost])).as_dict()
        summaries.append(ArmSummary(
            name=arm.name, baseline=arm.baseline, accuracy_mean=accuracy[0], accuracy_std=accuracy[1],
            energy_pj_mean=statistics.fmean(c["energy_pj"] for c in cost),
            bitops_mean=statistics.fmean(c["bitops"] for c in cost),
            energy_ratio_mean=energy_ratio[0], energy_ratio_std=energy_ratio[1],
            bitops_ratio_mean=bitops_ratio[0], bitops_ratio_std=bitops_ratio[1],
            accuracy_difference_mean=difference.mean, seconds=sum(run.seconds for run in runs),
            accuracy_difference=difference.as_dict(), accuracy_difference_t=t_interval(differences).as_dict(),
            energy_ratio=bootstrap_interval(energy_ratios).as_dict(),
            bitops_ratio=bootstrap_interval(bitops_ratios).as_dict(),
            verdict=verdict, accuracy_tost=equivalence, paper_ratio=paper_ratio,
            paper_accounting=asdict(paper) if paper is not None else {},
            training_energy_ratio=bootstrap_interval(paired_ratios([r.energy_pj for r in runs],
                                                                   [b.energy_pj for b in base_runs])).as_dict(),
            evaluation_share=statistics.fmean(c["evaluation_share"] for c in cost),
            validation_accuracy_mean=statistics.fmean(validation) if validation else None,
            chosen=dict((tuning or {}).get(arm.name, {}).get("chosen", {})),
            per_seed=[{"seed": run.config["seed"], "split_seed": run.config["data"]["split_seed"],
                       "test_accuracy": run.test_accuracy, "validation_accuracy": run.validation_accuracy,
                       "energy_pj": c["energy_pj"], "training_energy_pj": run.energy_pj, "bitops": c["bitops"],
                       "compute_pj": c["compute_pj"], "macs": c["macs"], "skipped_steps": run.skipped_steps,
                       "steps": run.steps}
                      for run, c in zip(runs, cost)],
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


def paper_ratio_text(summary: ArmSummary) -> str:
    """The paper's own cost ratio with its bootstrap interval, or '—' where the reproduction gives none."""
    return ratio_text(summary.interval("paper_ratio")) if summary.paper_ratio else "—"


def markdown_table(summaries: list[ArmSummary]) -> str:
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
                    f"{'—' if s.baseline else _difference_text(s)} | {s.verdict} | "
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


def widening_text(tuning: dict[str, dict[str, Any]]) -> str:
    """One line for a README row: how many arms' grids were widened, and which still end on an edge."""
    widened = [name for name, entry in tuning.items() if entry.get("widenings")]
    edge = [name for name, entry in tuning.items() if entry.get("edge")]
    return (f"grids widened for {', '.join(widened) or 'no arm'}"
            + (f"; still on an edge: {', '.join(edge)}" if edge else ""))


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


@dataclass(frozen=True)
class ReadmeRow:
    """The README's line for a reproduction (the table there is generated from ``results.json``)."""

    reproduction: str
    target: str
    measured: str
    verdict: str


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


def tost_text(summary: ArmSummary) -> str:
    """A README-sized verdict: 'equivalent within ±1 pt (TOST p = 0.003)' or 'not shown equivalent ...'."""
    test = summary.accuracy_tost
    if not test:
        return summary.verdict
    return (f"{'equivalent' if test['equivalent'] else 'not shown equivalent'} within ±{test['margin']:g} pt "
            f"(TOST p = {test['p']:.2g}, n = {test['n']})")


def energy_text(summary: ArmSummary) -> str:
    """Both accountings of an arm for a README row: the ledger's energy ratio and the paper's own ratio."""
    text = f"ledger energy {ratio_text(summary.interval('energy_ratio'))}"
    if summary.paper_ratio:
        text += f", paper's {summary.paper_accounting['name']} {ratio_text(summary.interval('paper_ratio'))}"
    return text


def write_report(out_dir: Path, *, name: str, title: str, summaries: list[ArmSummary], claim: PaperClaim,
                 targets: list[Target], seeds: list[int], settings: dict[str, Any], cost_axis: str = "energy",
                 notes: list[str] | None = None, extra: dict[str, Any] | None = None,
                 tuning: dict[str, dict[str, Any]] | None = None, readme: ReadmeRow | None = None) -> dict[str, Any]:
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
                               "epoch and the final test pass (codesign.reproduce.common.charged_cost)"},
        "arms": [asdict(s) for s in summaries], "tuning": tuning or {}, "paper": asdict(claim),
        "targets": [asdict(t) for t in targets], "all_targets_met": all(t.met for t in targets),
        "notes": notes or [], "extra": extra or {}, "readme": asdict(readme) if readme else None,
    }
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
             "", machine_text(payload["machine"]), "",
             f"**Paper:** {claim.text} ({claim.citation})", ""]
    for target in targets:
        lines.append(f"- target: {target.text} — measured {target.measured} — **{'met' if target.met else 'NOT met'}**")
    for note in notes or []:
        lines.append(f"- note: {note}")
    if tuning and any(entry["trials"] for entry in tuning.values()):
        lines += ["", f"## Tuning (seeds {list(TUNING_SEEDS)} on split {SPLIT_SEEDS[0]}, mean validation accuracy "
                      f"on the validation split of {VALIDATION_FRACTION:.0%}; the test split is never read; a choice "
                      f"on a grid's edge widens the grid, at most {MAX_WIDENINGS} times)", "", tuning_table(tuning)]
    write_text_atomic(out_dir / "table.md", "\n".join(lines) + "\n")
    plot_accuracy_vs_cost(out_dir / "plot.png", title, summaries, cost=cost_axis)
    return payload
