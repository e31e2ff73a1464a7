"""Reproduction of ABVS (paper 004, Cheng & Hashimoto): FP32, fixed least-sufficient FB, and ABVS, on 8x8 digits.

Every choice reads the validation split (:data:`codesign.reproduce.common.VALIDATION_FRACTION`
of the training split, stratified), never the test split. Flow, after the
paper's Sec. IV-A:

1. **Least sufficient FB** ``L``: fixed-FB runs on preliminary seeds of their
   own (:data:`PRELIMINARY_SEEDS`, not the evaluated ones), FBs ascending in
   batches of :data:`SCAN_BATCH`, until the smallest FB whose mean *validation*
   accuracy is within :data:`TOLERANCE_PT` of FP32's on the same seeds
   (:func:`codesign.train.techniques.abvs.least_sufficient_fb`).
2. The FP-MAC cost report (Yosys, xc7) is synthesised once for the FBs the
   arms use plus FB = 23 into ``out_dir/fpmac_cost/`` and reused when
   present (a report from other RTL, or lacking an FB, is re-made; without
   Yosys the embedded fallback table prices the MACs — results say which).
3. **FB_min and the check interval** (the paper determines both
   experimentally), on the same preliminary seeds: every ``FB_min = L - gap``
   (gaps 3, 2, 1) with a check every 4 or 2 epochs (4 is what the epoch counts
   of Fig. 5b imply); the pick is the lowest Eq. (2) energy among the schedules
   whose mean validation accuracy is within :data:`ACCURACY_DROP_PT` of FP32
   (else the most accurate). Alpha is then set so that Eq. (1) gives that
   interval. During training the FB controller reads validation accuracy too
   (:mod:`codesign.train.techniques.abvs`).
4. **The baselines' search**: ``fp32`` and ``fixed_fbL`` each try as many
   settings of weight decay and momentum (:data:`BASELINE_SEARCH`) on the same
   preliminary seeds as step 3 tried schedules, chosen on mean validation
   accuracy, so that every arm spends the same number of runs on its choices.
5. **Arms** ``fp32`` (baseline), ``fixed_fbL`` and ``abvs_fbMtoL``, each with
   its learning rate tuned on the validation split with the same three trials
   (:func:`codesign.reproduce.common.run_study`), then trained at every
   evaluation seed (0..7) and compared per seed.

Energy: the target compares Eq. (2) energies — the FP-MAC energy summed over
all MACs, the ledger's ``compute_pj`` (every epoch does the same MACs, so this
is ``sum_i T_epoch * P(i) * N_epoch(i)``) — of ABVS and of the fixed-``L`` arm,
per seed, with a 95 % bootstrap interval. The per-MAC energy scales the
supply with the FP-MAC's critical-path delay, now weighted per cell type
(:data:`codesign.energy.abvs_cost.PER_CELL_DELAYS`); the report gives the
saving under the earlier uniform model (a DSP counts like a LUT) and with each
cell type's delay halved and increased by half.
"""

from __future__ import annotations

import dataclasses
import statistics
import time
from collections.abc import Mapping
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from codesign.energy.abvs_cost import (ANCHOR_FB, PATH_CATEGORIES, PER_CELL_DELAYS, UNIFORM_DELAYS, DelayModel,
                                       fpmac_energy_model)
from codesign.reproduce import check_output_dir
from codesign.reproduce.common import (MAX_WIDENINGS, Arm, Execution, PaperAccounting, PaperClaim, ReadmeRow, Target,
                                       energy_text, percent_text, run_study, study_seeds, summarize, tost_text,
                                       widened_value, with_settings, with_validation, write_report)
from codesign.reproduce.stats import Interval, bootstrap_interval
from codesign.train.config import DataConfig, ModelConfig, OptimConfig, TrainConfig
from codesign.train.techniques.abvs import Config as AbvsConfig
from codesign.train.techniques.abvs import least_sufficient_fb
from codesign.train.trainer import TrainResult

NAME = "abvs"
TITLE = "ABVS: adaptive fraction bits with voltage scaling (MLP on 8x8 digits)"
EPOCHS, SMOKE_EPOCHS = 50, 2
PRELIMINARY_SEEDS, SMOKE_PRELIMINARY_SEEDS = (100, 101, 102), (100,)
SCAN_FBS, SMOKE_SCAN_FBS = tuple(range(1, 24)), (3,)
SCAN_BATCH = 4  # FBs trained together (in parallel) before the scan looks for a sufficient one
TOLERANCE_PT = 0.25  # "the same quality as FP32": less than one validation image (0.37 pt) on average
FB_GAPS, SMOKE_FB_GAPS = (3, 2, 1), (1,)  # fb_max - fb_min; the paper uses 3 (CIFAR-10, ImageNet), 4 and 2
CHECK_INTERVALS, SMOKE_CHECK_INTERVALS = (4, 2), (1,)  # epochs; 4 is what Fig. 5b's epoch counts imply
LEARNING_RATES, SMOKE_LEARNING_RATES = (0.05, 0.1, 0.2), (0.05, 0.1)  # every arm's tuning trials
# the baselines' counterpart of ABVS's schedule selection: as many optimiser settings, tried on the same preliminary
# seeds, so that every arm spends the same number of runs on its choices (the configuration's default first). 12
# settings cover the schedule grid's 6 candidates and its widenings (at most 6 more).
BASELINE_SEARCH = tuple({"optim.weight_decay": wd, "optim.momentum": m}
                        for m in (0.9, 0.8, 0.95, 0.7) for wd in (5e-4, 0.0, 1e-3))
EPSILON = 0.005
# Equivalence margin (points), fixed before the run: "comparable quality to FP32 with at most 0.5% accuracy drop"
# (abstract; Sec. I: 0-0.5 % loss; Sec. IV-B: "0.5% accuracy loss is considered acceptable").
ACCURACY_DROP_PT = 0.5
PAPER_ACCOUNTING = PaperAccounting(
    key="compute_pj", name="Eq. (2) energy",
    citation="ABVS Sec. IV-C, Eq. (2): FP-MAC power x time summed over the epochs at each FB (no memory traffic)")
SAVING_TARGET = 0.09
FAMILY = "xc7"
DELAY_FACTORS = (0.5, 1.5)  # each cell type's delay x these, one at a time (sensitivity)
CLAIM = PaperClaim(
    text=("ABVS ends within 0-0.5% of FP32 accuracy and uses 9-37% less energy than training at the least "
          "sufficient FB (CIFAR-10/100, ImageNet, Pascal VOC; 57-63% less than FP32 for ImageNet and VOC)"),
    citation=("T. Cheng, M. Hashimoto, 'Minimizing Energy of DNN Training with Adaptive Bit-width and Voltage "
              "Scaling', Fig. 10a (energy normalised to the least sufficient FB), Figs. 5-8, Sec. IV-C, Eq. (2)"),
)


def base_config(smoke: bool) -> TrainConfig:
    """MLP on digits for T = 50 epochs (smoke: 2 epochs on the synthetic set), with the validation split."""
    data = DataConfig(name="synthetic", synthetic_samples=200) if smoke else DataConfig(name="digits")
    return with_validation(TrainConfig(data=data, model=ModelConfig(name="mlp"),
                                       optim=OptimConfig(epochs=SMOKE_EPOCHS if smoke else EPOCHS)))


def alpha_for_interval(total_epochs: int, interval_epochs: float, fb_min: int, fb_max: int) -> float:
    """The alpha of Eq. (1) that gives a check every ``interval_epochs`` (1.0 when fb_min == fb_max: no checks)."""
    if fb_max == fb_min:
        return 1.0
    return total_epochs / (interval_epochs * (fb_max - fb_min))


def abvs_config(fb_min: int, fb_max: int, *, total_epochs: int, cost_report: str,
                check_every: float = 1.0) -> AbvsConfig:
    return AbvsConfig(fb_min=fb_min, fb_max=fb_max, epsilon=EPSILON, cost_report=cost_report, family=FAMILY,
                      alpha=alpha_for_interval(total_epochs, check_every, fb_min, fb_max))


def train_runs(configs: dict[str, TrainConfig], task_dir: Path, execution: Execution) -> dict[str, TrainResult]:
    """Train ``configs`` (name -> configuration) as cached sweep tasks under ``task_dir``; name -> result."""
    from codesign.sweep import SweepTask, read_result, run_sweep

    tasks = {name: SweepTask(key=name, function="codesign.reproduce.common:train_task",
                             kwargs={"config": config.to_dict(), "description": name})
             for name, config in configs.items()}
    report = run_sweep(list(tasks.values()), task_dir, scheduler=execution.scheduler, workers=execution.workers,
                       retries=execution.retries, progress=execution.progress)
    if report.failed:
        raise RuntimeError("training tasks failed (a re-run retries them):\n" + report.summary())
    return {name: TrainResult(**read_result(task_dir, task)) for name, task in tasks.items()}


# ---------------------------------------------------------------------------- step 1: least sufficient FB


def scan_least_sufficient_fb(base: TrainConfig, *, seeds: tuple[int, ...], candidates: tuple[int, ...],
                             tolerance_pt: float, task_dir: Path, execution: Execution) -> dict[str, Any]:
    """FP32 and fixed-FB runs on ``seeds``, FBs ascending in batches, until one is sufficient on validation."""
    started = time.perf_counter()
    fp32_runs = train_runs({f"scan,fp32,seed={seed}": base.replace(seed=seed) for seed in seeds}, task_dir, execution)
    fp32 = [run.validation_accuracy for run in fp32_runs.values()]
    by_fb: dict[int, list[float]] = {}
    chosen = None
    for start in range(0, len(candidates), SCAN_BATCH):
        batch = candidates[start:start + SCAN_BATCH]
        configs = {f"scan,fb={fb},seed={seed}": base.replace(seed=seed, techniques={"abvs": abvs_config(
            fb, fb, total_epochs=base.optim.epochs, cost_report="")}) for fb in batch for seed in seeds}
        runs = train_runs(configs, task_dir, execution)
        for fb in batch:
            by_fb[fb] = [runs[f"scan,fb={fb},seed={seed}"].validation_accuracy for seed in seeds]
        chosen = least_sufficient_fb(by_fb, fp32, tolerance=tolerance_pt)
        if chosen is not None:
            break
    return {"seeds": list(seeds), "reads": "validation accuracy", "tolerance_pt": tolerance_pt,
            "fp32_validation_accuracy": fp32, "fp32_mean": statistics.fmean(fp32),
            "fixed_fb_validation_accuracy": {str(fb): accs for fb, accs in by_fb.items()},
            "fixed_fb_mean": {str(fb): statistics.fmean(accs) for fb, accs in by_fb.items()},
            "least_sufficient_fb": chosen, "found": chosen is not None, "runs": len(seeds) * (1 + len(by_fb)),
            "seconds": time.perf_counter() - started}


# ---------------------------------------------------------------------------- step 2: FP-MAC cost report


def _portable(path: Path) -> str:
    """``path`` relative to the working directory when inside it (``results/abvs/fpmac_cost/fpmac_cost.json`` from
    the repository), else absolute: the cost report's name goes into every run's configuration and the committed
    report, which must not name the machine's folders. Training tasks resolve it from the same working directory
    (a local Dask cluster's workers inherit it)."""
    import os

    path = Path(path).resolve()
    cwd = Path.cwd().resolve()
    return os.path.relpath(path, cwd) if cwd in path.parents else str(path)


def ensure_cost_report(cost_dir: Path, fbs: set[int], *, allow_synthesis: bool, progress: bool) -> dict[str, Any]:
    """A ``fpmac_cost.json`` covering ``fbs`` (xc7): reused if valid, current and complete, else synthesised.

    Returns ``{"path": str ('' = fallback table), "status": ..., "seconds": ...}``.
    """
    from codesign.hw.yosys import YosysError
    from codesign.pe.fpmac.estimate import JSON_NAME, FpmacCostError, estimate_fpmac, load_fpmac_cost

    started = time.perf_counter()
    path = Path(cost_dir) / JSON_NAME
    have: set[int] = set()
    if path.is_file():
        try:
            cost = load_fpmac_cost(path)
            if cost.sources_match():
                have = {e.max_fb for e in cost.series(FAMILY, exp_bits=8, rounding="nearest_even")}
                if fbs <= have:
                    return {"path": _portable(path), "status": "reused (RTL unchanged, all FBs present)",
                            "fbs": sorted(have), "seconds": time.perf_counter() - started}
        except (FpmacCostError, KeyError, FileNotFoundError):
            have = set()
    if not allow_synthesis:
        return {"path": "", "status": "fallback table (smoke run: no synthesis, no usable report)", "fbs": [],
                "seconds": time.perf_counter() - started}
    wanted = sorted(fbs | have)
    try:
        estimate_fpmac(families=(FAMILY,), max_fb_values=wanted, out_dir=Path(cost_dir), workers=2,
                       progress=progress)
    except (YosysError, FileNotFoundError) as error:
        return {"path": "", "status": f"fallback table (synthesis unavailable: {error})", "fbs": [],
                "seconds": time.perf_counter() - started}
    return {"path": _portable(path), "status": f"synthesised now ({len(wanted)} Yosys runs, xc7)", "fbs": wanted,
            "seconds": time.perf_counter() - started}


# ---------------------------------------------------------------------------- step 3: FB_min and alpha


def _schedule_grid_widening(gaps: list[int], intervals: list[float], chosen: Mapping[str, Any], *, lsfb: int,
                            epochs: int) -> tuple[str, Any] | None:
    """The axis (``"gap"`` or ``"check_every_epochs"``) and value that continue the schedule grid past the edge the
    choice landed on (:func:`codesign.reproduce.common.widened_value`), or None. A gap must leave FB_min >= 1 and
    be >= 1 (a gap of 0 is the fixed-FB arm); an interval must be one epoch or more and at most the run."""
    gap = lsfb - chosen["fb_min"]
    new_gap = widened_value(gaps, gap)
    if new_gap is not None and 1 <= new_gap <= lsfb - 1:
        return "gap", new_gap
    new_interval = widened_value(intervals, chosen["check_every_epochs"])
    if new_interval is not None and 1 <= new_interval <= epochs:
        return "check_every_epochs", new_interval
    return None


def select_schedule(base: TrainConfig, *, seeds: tuple[int, ...], lsfb: int, fp32_mean: float, cost_report: str,
                    gaps: tuple[int, ...], intervals: tuple[float, ...], task_dir: Path,
                    execution: Execution) -> dict[str, Any]:
    """Pick FB_min and the check interval of ABVS from runs on the preliminary seeds (paper: both "experimentally
    determined", Sec. IV-A/B): among the candidates whose mean validation accuracy is within ``ACCURACY_DROP_PT``
    of FP32's, the one with the lowest Eq. (2) energy relative to fixed ``lsfb``; if none is, the most accurate.

    A choice on the edge of the gap or interval grid continues that axis one step of its own kind and the new
    candidates (the new value with every value of the other axis) run, at most :data:`MAX_WIDENINGS` times, as
    every arm's tuning grid does; each widening is recorded."""
    started = time.perf_counter()
    energy = fpmac_energy_model(cost_report or None, timing_fb=lsfb, family=FAMILY)
    gap_axis = [gap for gap in gaps if lsfb - gap >= 1]
    interval_axis = list(intervals)
    candidates: list[dict[str, Any]] = []
    widenings: list[dict[str, Any]] = []
    runs_total = 0

    def run_grid(grid: list[tuple[int, float]], widening: int) -> None:
        nonlocal runs_total
        configs = {f"schedule,fb{fb_min}to{lsfb},every={interval},seed={seed}": base.replace(
            seed=seed, techniques={"abvs": abvs_config(fb_min, lsfb, total_epochs=base.optim.epochs,
                                                       cost_report=cost_report, check_every=interval)})
            for fb_min, interval in grid for seed in seeds}
        runs = train_runs(configs, task_dir, execution) if configs else {}
        runs_total += len(configs)
        for fb_min, interval in grid:
            mine = [runs[f"schedule,fb{fb_min}to{lsfb},every={interval},seed={seed}"] for seed in seeds]
            accuracy = statistics.fmean(run.validation_accuracy for run in mine)
            ratio = statistics.fmean(eq2_ratio(run.techniques["abvs"]["epochs_per_fb"], lsfb, energy) for run in mine)
            candidates.append({"fb_min": fb_min, "check_every_epochs": interval,
                               "validation_accuracy": [run.validation_accuracy for run in mine],
                               "validation_accuracy_mean": accuracy, "eq2_ratio_vs_fixed_mean": ratio,
                               "within_accuracy": accuracy >= fp32_mean - ACCURACY_DROP_PT, "widening": widening})

    def choose() -> dict[str, Any]:
        passing = [c for c in candidates if c["within_accuracy"]]
        if passing:
            return min(passing, key=lambda c: (c["eq2_ratio_vs_fixed_mean"], -c["validation_accuracy_mean"]))
        return max(candidates, key=lambda c: (c["validation_accuracy_mean"], -c["eq2_ratio_vs_fixed_mean"]))

    run_grid([(lsfb - gap, interval) for gap in gap_axis for interval in interval_axis], 0)
    if candidates:
        chosen = choose()
        for round_number in range(1, MAX_WIDENINGS + 2):
            step = _schedule_grid_widening(gap_axis, interval_axis, chosen, lsfb=lsfb, epochs=base.optim.epochs)
            if step is None or round_number > MAX_WIDENINGS:
                break
            axis, value = step
            if axis == "gap":
                gap_axis.append(value)
                grid = [(lsfb - value, interval) for interval in interval_axis]
            else:
                interval_axis.append(value)
                grid = [(lsfb - gap, value) for gap in gap_axis]
            gap_axis.sort()
            interval_axis.sort()
            widenings.append({"round": round_number, "axis": axis, "value": value,
                              "edge": lsfb - chosen["fb_min"] if axis == "gap" else chosen["check_every_epochs"]})
            run_grid(grid, round_number)
            chosen = choose()
        on_edge = step is not None  # the rounds ran out with the choice still on an edge
    else:  # lsfb == 1: nothing narrower to start from
        chosen, on_edge = {"fb_min": lsfb, "check_every_epochs": 1}, False
    return {"seeds": list(seeds), "reads": "validation accuracy",
            "rule": f"lowest Eq. (2) energy with mean validation accuracy >= FP32 - {ACCURACY_DROP_PT} pt",
            "candidates": candidates, "widenings": widenings, "gaps": gap_axis, "intervals": interval_axis,
            "still_on_edge": on_edge,
            "any_within_accuracy": any(c["within_accuracy"] for c in candidates), "fb_min": chosen["fb_min"],
            "check_every_epochs": chosen["check_every_epochs"], "runs": runs_total,
            "seconds": time.perf_counter() - started}


def select_optimiser(name: str, config: TrainConfig, *, seeds: tuple[int, ...], count: int, task_dir: Path,
                     execution: Execution) -> dict[str, Any]:
    """A baseline arm's share of the preliminary search: the first ``count`` settings of :data:`BASELINE_SEARCH`
    (weight decay x momentum) on the preliminary seeds, the best mean validation accuracy chosen (ties: the
    earlier, the configuration's default first). ``count`` is the number of ABVS schedule candidates, so that
    every arm spends as many runs on its choices."""
    started = time.perf_counter()
    grid = list(BASELINE_SEARCH[:count])
    if len(grid) < count:
        raise ValueError(f"the baseline search has {len(BASELINE_SEARCH)} settings, fewer than the {count} "
                         "schedule candidates it must match")

    def key(settings: dict[str, Any], seed: int) -> str:
        return f"search,{name}," + ",".join(f"{path}={value}" for path, value in settings.items()) + f",seed={seed}"

    configs = {key(settings, seed): with_settings(config, settings).replace(seed=seed)
               for settings in grid for seed in seeds}
    runs = train_runs(configs, task_dir, execution) if configs else {}
    candidates = [{"settings": settings, "validation_accuracy": [runs[key(settings, seed)].validation_accuracy
                                                                 for seed in seeds]} for settings in grid]
    for candidate in candidates:
        candidate["validation_accuracy_mean"] = statistics.fmean(candidate["validation_accuracy"])
    # max keeps the first of equals; with no schedule to match (least sufficient FB 1) the configuration stays
    chosen = max(candidates, key=lambda c: c["validation_accuracy_mean"])["settings"] if candidates else {}
    return {"seeds": list(seeds), "reads": "validation accuracy", "candidates": candidates,
            "chosen": chosen, "runs": len(runs), "seconds": time.perf_counter() - started}


# ---------------------------------------------------------------------------- step 4: metrics


def eq2_ratio(epochs_per_fb: dict[str, int], reference_fb: int, energy) -> float:
    """Eq. (2) energy of an FB trace over that of training every epoch at ``reference_fb`` (same MACs per epoch)."""
    epochs = sum(epochs_per_fb.values())
    return sum(n * energy(int(fb)) for fb, n in epochs_per_fb.items()) / (epochs * energy(reference_fb))


def delay_variants(family: str = FAMILY) -> dict[str, DelayModel]:
    """The delay models of the sensitivity study: uniform, the per-cell model, and each cell type x 0.5 and x 1.5."""
    per_cell = PER_CELL_DELAYS[family]
    variants = {"uniform (a DSP counts like a LUT)": UNIFORM_DELAYS, "per-cell": per_cell}
    for category in PATH_CATEGORIES:
        if category == "other":
            continue
        for factor in DELAY_FACTORS:
            variants[f"per-cell, {category} x{factor:g}"] = per_cell.scaled(category, factor)
    return variants


def delay_sensitivity(epochs_per_fb: list[dict[str, int]], *, fb_max: int, cost_report: str) -> dict[str, Any]:
    """Eq. (2) saving of ABVS vs fixed ``fb_max`` under each delay model (per seed, from the FB traces), with CIs."""
    out = {}
    used = sorted({int(fb) for trace in epochs_per_fb for fb in trace} | {fb_max})
    for name, delay in delay_variants().items():
        model = fpmac_energy_model(cost_report or None, timing_fb=fb_max, family=FAMILY, delay=delay)
        entry: dict[str, Any] = {"delay_ns": delay.describe()["ns"]}
        try:
            savings = [1 - eq2_ratio(trace, fb_max, model) for trace in epochs_per_fb]
            entry |= {"per_seed": savings, "saving": bootstrap_interval(savings).as_dict(),
                      "supply_v": {str(fb): model.supply_v(fb) for fb in used}}
        except ValueError as error:  # a narrower FB's path is slower than FB_max's even at max_supply_v
            entry |= {"per_seed": None, "saving": None, "infeasible": str(error)}
        out[name] = entry
    return out


def other_sensitivity(epochs_per_fb: list[dict[str, int]], *, fb_max: int, cost_report: str) -> dict[str, Any]:
    """Eq. (2) saving under other energy-model choices: timing FB, area metric, no voltage scaling."""
    variants = {}
    for timing in sorted({fb_max, ANCHOR_FB}):
        for metric in ("lut", "weighted"):
            model = fpmac_energy_model(cost_report or None, timing_fb=timing, family=FAMILY, area_metric=metric)
            variants[f"timing_fb={timing}, area={metric}"] = [1 - eq2_ratio(t, fb_max, model) for t in epochs_per_fb]
    area = fpmac_energy_model(cost_report or None, timing_fb=fb_max, family=FAMILY).area  # energy ∝ area at V0
    variants["bit-width scaling only (every FB at V0), area=lut"] = [1 - eq2_ratio(t, fb_max, area)
                                                                     for t in epochs_per_fb]
    return {name: {"per_seed": values, "saving": bootstrap_interval(values).as_dict()}
            for name, values in variants.items()}



def _saving_text(entry: dict[str, Any]) -> str:
    """A delay-sensitivity entry's saving, or why that delay model cannot time the schedule."""
    return percent_text(entry["saving"]) if entry["saving"] else f"infeasible ({entry['infeasible']})"


def plot_traces(path: Path, results: dict, arm_names: list[str], lsfb: int, savings: list[float]) -> None:
    """Fig. 5-style accuracy and FB per epoch (first seed), and Fig. 10a-style energy normalised to fixed FB."""

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    from codesign.io.reports import write_figure_png

    figure, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2), dpi=110)
    for name in arm_names:
        history = results[name][0].history
        left.plot([h["epoch"] for h in history], [h["test_accuracy"] for h in history], label=name)
    abvs = results[arm_names[-1]][0].techniques["abvs"]
    twin = left.twinx()
    twin.step(range(len(abvs["fb_trace"])), abvs["fb_trace"], where="post", color="black", linestyle="--",
              label="ABVS FB")
    twin.set_ylabel("ABVS fraction bits (FB)")
    twin.yaxis.set_major_locator(MaxNLocator(integer=True))
    left.set_xlabel("epoch")
    left.set_ylabel("test accuracy (%)")
    left.set_title("first seed; FB trace dashed (right axis)")
    left.legend(fontsize=8, loc="lower right")
    left.grid(alpha=0.3)
    seeds = [run.config["seed"] for run in results[arm_names[-1]]]
    right.bar([str(s) for s in seeds], [1 - s for s in savings], color="tab:blue", label="ABVS (this run)")
    right.axhline(1.0, color="black", linewidth=1, label=f"fixed FB = {lsfb}")
    right.axhspan(0.63, 0.91, color="tab:orange", alpha=0.2, label="paper Fig. 10a (9-37% saving)")
    right.set_ylim(0, 1.1)
    right.set_xlabel("seed")
    right.set_ylabel(f"Eq. (2) energy / energy at FB = {lsfb}")
    right.set_title("energy normalised to the least sufficient FB")
    right.legend(fontsize=8, loc="lower right")
    figure.tight_layout()
    write_figure_png(figure, path)


def _preliminary(base, *, smoke: bool, out_dir: Path, task_dir: Path, execution: Execution, progress: bool,
                 notes: list[str]) -> SimpleNamespace:
    """Phase 1: the least sufficient FB (preliminary fixed-FB scan), the FP-MAC cost report, and ABVS's FB_min and
    check interval chosen on the preliminary seeds."""
    prelim_seeds = SMOKE_PRELIMINARY_SEEDS if smoke else PRELIMINARY_SEEDS
    gaps = SMOKE_FB_GAPS if smoke else FB_GAPS
    scan = scan_least_sufficient_fb(base, seeds=prelim_seeds, candidates=SMOKE_SCAN_FBS if smoke else SCAN_FBS,
                                    tolerance_pt=TOLERANCE_PT, task_dir=task_dir, execution=execution)
    lsfb = scan["least_sufficient_fb"]
    if lsfb is None:
        lsfb = max(int(fb) for fb in scan["fixed_fb_mean"])
        notes.append(f"no scanned FB reached FP32 validation accuracy within {TOLERANCE_PT} pt in the preliminary "
                     f"runs; the widest scanned FB ({lsfb}) stands in for the least sufficient FB")
    cost = ensure_cost_report(out_dir / "fpmac_cost", set(range(max(1, lsfb - max(gaps)), lsfb + 1)) | {ANCHOR_FB},
                              allow_synthesis=not smoke, progress=progress)
    report = cost["path"]
    schedule = select_schedule(base, seeds=prelim_seeds, lsfb=lsfb, fp32_mean=scan["fp32_mean"], cost_report=report,
                               gaps=gaps, intervals=SMOKE_CHECK_INTERVALS if smoke else CHECK_INTERVALS,
                               task_dir=task_dir, execution=execution)
    fb_min, check_every = schedule["fb_min"], schedule["check_every_epochs"]
    if fb_min == lsfb:
        notes.append("the least sufficient FB is 1, so ABVS has no narrower FB to start from and equals the "
                     "fixed-FB arm")
    elif not schedule["any_within_accuracy"]:
        notes.append(f"no ABVS schedule came within {ACCURACY_DROP_PT} pt of FP32's validation accuracy on the "
                     "preliminary seeds; the most accurate one is used")
    return SimpleNamespace(prelim_seeds=prelim_seeds, gaps=gaps, scan=scan, lsfb=lsfb, cost=cost, report=report,
                           schedule=schedule, fb_min=fb_min, check_every=check_every)


def _arms(base, p: SimpleNamespace, *, epochs: int, smoke: bool, task_dir: Path, execution: Execution) -> SimpleNamespace:
    """Phase 2: the three arms (FP32, fixed FB, ABVS), the baselines' optimiser searches of the same budget."""
    lsfb, fb_min, check_every, report, schedule, prelim_seeds = (p.lsfb, p.fb_min, p.check_every, p.report,
                                                                 p.schedule, p.prelim_seeds)
    fixed_name, abvs_name = f"fixed_fb{lsfb}", f"abvs_fb{fb_min}to{lsfb}"
    fixed_base = base.replace(techniques={"abvs": abvs_config(lsfb, lsfb, total_epochs=epochs, cost_report=report)})
    searches = {name: select_optimiser(name, config, seeds=prelim_seeds, count=len(schedule["candidates"]),
                                       task_dir=task_dir, execution=execution)
                for name, config in (("fp32", base), (fixed_name, fixed_base))}
    tune = {"optim.lr": SMOKE_LEARNING_RATES if smoke else LEARNING_RATES}
    arms = [
        Arm("fp32", with_settings(base, searches["fp32"]["chosen"]), baseline=True, tune=tune),
        Arm(fixed_name, with_settings(fixed_base, searches[fixed_name]["chosen"]), tune=tune),
        Arm(abvs_name, base.replace(techniques={"abvs": abvs_config(fb_min, lsfb, total_epochs=epochs,
                                                                    cost_report=report, check_every=check_every)}),
            tune=tune),
    ]
    search_runs = {"fp32": searches["fp32"]["runs"], fixed_name: searches[fixed_name]["runs"],
                   abvs_name: schedule["runs"]}
    if len(set(search_runs.values())) != 1:
        raise RuntimeError(f"unequal preliminary searches: {search_runs} runs")
    return SimpleNamespace(fixed_name=fixed_name, abvs_name=abvs_name, searches=searches, tune=tune, arms=arms,
                           search_runs=search_runs)


def _measure(results, a: SimpleNamespace, p: SimpleNamespace, by_name) -> SimpleNamespace:
    """Phase 4: Eq. (2) and total energy savings per seed, the FB traces, the delay-model sensitivity."""
    fixed_name, abvs_name, lsfb, report = a.fixed_name, a.abvs_name, p.lsfb, p.report
    abvs_runs = results[abvs_name]
    # every pass charged once (training, each epoch's validation pass, the test pass): the summaries' per-run costs
    charged = {name: by_name[name].per_seed for name in (fixed_name, abvs_name)}
    eq2_ratios = [a["compute_pj"] / f["compute_pj"] for a, f in zip(charged[abvs_name], charged[fixed_name])]
    total_ratios = [a["energy_pj"] / f["energy_pj"] for a, f in zip(charged[abvs_name], charged[fixed_name])]
    savings = [1 - r for r in eq2_ratios]
    saving = bootstrap_interval(savings)
    total_saving = bootstrap_interval([1 - r for r in total_ratios])
    abvs_reports = [run.techniques["abvs"] for run in abvs_runs]
    traces = [r["epochs_per_fb"] for r in abvs_reports]
    energy_model = abvs_reports[0]["energy_model"]
    model = fpmac_energy_model(report or None, timing_fb=lsfb, family=FAMILY)
    eq2_from_traces = [eq2_ratio(t, lsfb, model) for t in traces]
    delays = delay_sensitivity(traces, fb_max=lsfb, cost_report=report)
    saving_range = [Interval(**entry["saving"]).mean for entry in delays.values() if entry["saving"]]
    abvs_delta = by_name[abvs_name].interval("accuracy_difference")
    fixed_delta = by_name[fixed_name].interval("accuracy_difference")

    return SimpleNamespace(eq2_ratios=eq2_ratios, total_ratios=total_ratios, savings=savings, saving=saving,
                           total_saving=total_saving, abvs_reports=abvs_reports, traces=traces,
                           energy_model=energy_model, eq2_from_traces=eq2_from_traces, delays=delays,
                           saving_range=saving_range, abvs_delta=abvs_delta, fixed_delta=fixed_delta)


def _targets(m: SimpleNamespace, a: SimpleNamespace, p: SimpleNamespace, by_name) -> list:
    lsfb, saving, delays, saving_range = p.lsfb, m.saving, m.delays, m.saving_range
    abvs_delta, fixed_delta, abvs_name = m.abvs_delta, m.fixed_delta, a.abvs_name
    targets = [
        Target(text=f"ABVS Eq. (2) energy >= {100 * SAVING_TARGET:.0f} % below fixed-FB training at the least "
                    f"sufficient FB (FB = {lsfb}): whole 95 % interval of the per-run saving, every pass "
                    "(training, validation, test) charged once",
               met=saving.low >= SAVING_TARGET,
               measured=(f"saving {percent_text(saving.as_dict())} (per-cell delay model; uniform model "
                         f"{_saving_text(delays['uniform (a DSP counts like a LUT)'])}; over all "
                         f"delay variants {100 * min(saving_range):.1f}-{100 * max(saving_range):.1f} %)")),
        Target(text=f"ABVS test accuracy equivalent to FP32's within ±{ACCURACY_DROP_PT} pt (TOST)",
               met=bool(by_name[abvs_name].accuracy_tost.get("equivalent")),
               measured=f"Δ accuracy {abvs_delta.text()} pt ({by_name[abvs_name].verdict}); fixed FB = {lsfb}: "
                        f"{fixed_delta.text()} pt"),
    ]
    return targets


def schedule_widening_text(schedule: Mapping[str, Any]) -> str:
    """How the schedule grid was widened (each widening: the axis, the edge the choice was on, the new value)."""
    rounds = schedule.get("widenings", [])
    if not rounds:
        return "the choice lay inside the grid, which was not widened"
    names = {"gap": "gap FB_max - FB_min", "check_every_epochs": "check interval (epochs)"}
    text = "grid widened " + "; ".join(f"round {w['round']}: the {names[w['axis']]} continued to {w['value']:g}"
                                       for w in rounds)
    if schedule.get("still_on_edge"):
        text += f"; the choice is still on the grid's edge after the {MAX_WIDENINGS} rounds allowed"
    return text


def _notes(m: SimpleNamespace, a: SimpleNamespace, p: SimpleNamespace, *, epochs: int) -> list[str]:
    """The report's notes on how FB, the schedule, the tuning budgets, the delay and energy models were chosen."""
    lsfb, scan, fb_min, check_every, schedule, cost = p.lsfb, p.scan, p.fb_min, p.check_every, p.schedule, p.cost
    prelim_seeds, fixed_name, searches, tune = p.prelim_seeds, a.fixed_name, a.searches, a.tune
    delays, energy_model, total_saving = m.delays, m.energy_model, m.total_saving
    notes: list[str] = []
    per_cell = PER_CELL_DELAYS[FAMILY]
    notes += [
        (f"least sufficient FB = {lsfb} from preliminary fixed-FB runs on seeds {scan['seeds']}, read on validation "
         f"accuracy (FP32 mean {scan['fp32_mean']:.2f} %, tolerance {TOLERANCE_PT} pt; means by FB: "
         + ", ".join(f"FB{fb} {acc:.2f} %" for fb, acc in scan["fixed_fb_mean"].items()) + "); "
         f"ABVS runs FB {fb_min} -> {lsfb}, a check every {check_every} epochs "
         f"(alpha = {alpha_for_interval(epochs, check_every, fb_min, lsfb):.4g}), epsilon = {EPSILON}; FB_min and "
         f"the interval were chosen on the preliminary seeds' validation accuracy ({schedule['rule']}; candidates: "
         + ", ".join(f"FB{c['fb_min']}/every {c['check_every_epochs']}: {c['validation_accuracy_mean']:.2f} %, "
                     f"{100 * (1 - c['eq2_ratio_vs_fixed_mean']):.1f} % saving" for c in schedule["candidates"])
         + "; " + schedule_widening_text(schedule)
         + "). The FB controller reads validation accuracy after every epoch; the test split decides nothing."),
        (f"equal tuning budgets: each arm spends {schedule['runs']} preliminary runs ({len(schedule['candidates'])} "
         f"settings x {len(prelim_seeds)} seeds) on its own choice — ABVS its FB_min and interval, fp32 and "
         f"{fixed_name} their weight decay and momentum (chosen: "
         + "; ".join(f"{name} {search['chosen']}" for name, search in searches.items())
         + f"; this list is matched in length to ABVS's candidates, so it is not widened past its edges) — then "
         f"each arm's learning-rate grid ({len(tune['optim.lr'])} values at every tuning seed, widened where the "
         "choice lands on its edge: table below), all read on validation accuracy"),
        (f"delay model ({per_cell.name}): "
         + ", ".join(f"{c} {per_cell.delay(c):g} ns" for c in PATH_CATEGORIES)
         + ". Sources: " + "; ".join(f"{c}: {text}" for c, text in per_cell.sources) + ". The report's critical "
         "path is the one with the most cells, re-weighted per cell type, so its delay is a lower bound on the "
         "weighted critical path."),
        ("Eq. (2) saving vs fixed FB under each delay model, mean [95 % CI] over seeds: "
         + "; ".join(f"{name}: {_saving_text(entry)}" for name, entry in delays.items()) + "."),
        (f"energy model: {energy_model['source']}; cost report {cost['status']}; area = LUT cells, alpha-power "
         f"supply scaling for the FB = {lsfb} clock at 1.0 V (V_t 0.35 V, a 1.3), FB = 23 at 1.0 V anchored at "
         "Horowitz's FP32 MAC (4.6 pJ)"),
        (f"the ledger's total energy (MACs + on-chip buffer + DRAM traffic, which Eq. (2) leaves out) is "
         f"{percent_text(total_saving.as_dict())} below the fixed-FB arm: memory traffic dominates this small MLP "
         "and shrinks only with the operand width (sign + exponent + FB bits)"),
        "model: MLP 64-128-64-10, not ResNet-8: in development runs a ResNet-8 (batch norm) reached FP32 "
        "accuracy on digits even at FB = 1 (seed 0, 15 epochs: 97.6% vs 97.1%), which leaves ABVS nothing to scale",
        "deviations from the paper: float32 accumulation inside each layer (rounding to FB at layer inputs, "
        "outputs' gradients, weight gradients, weights and momentum, not after every MAC); cosine learning-rate "
        "schedule instead of the paper's polynomial decay; FPGA (Yosys xc7) area and critical path with "
        "per-cell-type delays and an alpha-power voltage model instead of Nangate 45 nm synthesis at each minimum "
        "voltage and PrimeTime power; validation split of 20 % of the training images (269) and 450 test images",
    ]
    return notes


def _extra(m: SimpleNamespace, a: SimpleNamespace, p: SimpleNamespace, *, epochs: int, seconds: dict) -> dict:
    lsfb, fb_min, check_every, scan, schedule, cost, report = (p.lsfb, p.fb_min, p.check_every, p.scan, p.schedule,
                                                               p.cost, p.report)
    searches, search_runs = a.searches, a.search_runs
    energy_model, savings, saving, eq2_from_traces, total_ratios, total_saving = (
        m.energy_model, m.savings, m.saving, m.eq2_from_traces, m.total_ratios, m.total_saving)
    abvs_reports, traces, delays = m.abvs_reports, m.traces, m.delays
    extra = {
        "least_sufficient_fb": lsfb, "fb_min": fb_min, "check_every_epochs": check_every,
        "alpha": alpha_for_interval(epochs, check_every, fb_min, lsfb),
        "preliminary": scan, "schedule_selection": schedule, "baseline_searches": searches,
        "preliminary_search_runs": search_runs, "cost_report": cost, "energy_model": energy_model,
        "eq2_saving_vs_fixed": {"per_seed": savings, "saving": saving.as_dict()},
        "eq2_ratio_vs_fixed_from_fb_traces": eq2_from_traces,
        "total_energy_saving_vs_fixed": {"per_seed": [1 - r for r in total_ratios], "saving": total_saving.as_dict()},
        "fb_traces": [r["fb_trace"] for r in abvs_reports], "epochs_per_fb": traces,
        "average_fb": [r["average_fb"] for r in abvs_reports], "checks": [r["checks"] for r in abvs_reports],
        "delay_sensitivity": delays,
        "other_sensitivity": other_sensitivity(traces, fb_max=lsfb, cost_report=report),
        "seconds": seconds,
    }
    return extra


def _settings(base, p: SimpleNamespace, arms, *, epochs: int, smoke: bool) -> dict:
    scan, gaps = p.scan, p.gaps
    settings = {
        "data": base.data.name, "validation_fraction": base.data.validation_fraction, "model": "mlp (64-128-64-10)",
        "epochs": epochs, "optim": base.to_dict()["optim"], "preliminary_seeds": scan["seeds"],
        "scan_fbs": list(SMOKE_SCAN_FBS if smoke else SCAN_FBS), "tolerance_pt": TOLERANCE_PT, "fb_gaps": list(gaps),
        "epsilon": EPSILON, "check_intervals": list(SMOKE_CHECK_INTERVALS if smoke else CHECK_INTERVALS),
        "tuned": {arm.name: {path: list(values) for path, values in arm.tune.items()} for arm in arms},
        "baseline_search": [dict(settings) for settings in BASELINE_SEARCH],
        "family": FAMILY, "smoke": smoke,
    }
    return settings


def _readme(m: SimpleNamespace, targets, abvs) -> ReadmeRow:
    saving, saving_range, abvs_delta = m.saving, m.saving_range, m.abvs_delta
    return ReadmeRow(
        reproduction="`abvs` (FB rule vs fixed least sufficient FB and FP32, MLP)",
        target=f">= {100 * SAVING_TARGET:.0f} % Eq. (2) energy saving vs fixed FB; accuracy equivalent to FP32 within "
               f"±{ACCURACY_DROP_PT} pt (abstract)",
        measured=(f"saving vs fixed FB {percent_text(saving.as_dict())} (Eq. (2), per-cell delays, assumed for xc7; "
                  f"{100 * min(saving_range):.1f}-{100 * max(saving_range):.1f} % over delay variants, training "
                  f"only), ledger {percent_text(m.total_saving.as_dict())}; vs FP32: {energy_text(abvs)}; Δacc "
                  f"{abvs_delta.text()} pt, {tost_text(abvs)}"),
        verdict=(f"saving {'met' if targets[0].met else 'not met'}, accuracy "
                 f"{'met' if targets[1].met else 'not met'}"),
    )


def run(out_dir: Path, *, seeds: list[int] | None = None, smoke: bool = False, progress: bool = True,
        execution: Execution = Execution()) -> dict:
    """Scan, select, tune and train; write results.json, table.md, plot.png and fb_trace.png.

    Every training run is a sweep task with one torch thread (the MLP's tensors
    are so small that intra-op threads only add synchronisation).
    """
    started = time.perf_counter()
    out_dir = check_output_dir(Path(out_dir).resolve())  # the cost report path is part of the cached tasks
    seeds = study_seeds(seeds, smoke)
    execution = dataclasses.replace(execution, progress=progress and execution.progress)
    task_dir = out_dir / "tasks"
    base = base_config(smoke)
    epochs = base.optim.epochs
    notes: list[str] = []
    p = _preliminary(base, smoke=smoke, out_dir=out_dir, task_dir=task_dir, execution=execution, progress=progress,
                     notes=notes)
    a = _arms(base, p, epochs=epochs, smoke=smoke, task_dir=task_dir, execution=execution)
    arms_started = time.perf_counter()
    results, tuning = run_study(a.arms, seeds, out_dir, execution=execution)
    arms_seconds = time.perf_counter() - arms_started
    summaries = summarize(a.arms, results, tuning, margin_pt=ACCURACY_DROP_PT, paper=PAPER_ACCOUNTING)
    by_name = {s.name: s for s in summaries}
    m = _measure(results, a, p, by_name)
    targets = _targets(m, a, p, by_name)
    notes += _notes(m, a, p, epochs=epochs)
    seconds = {"scan": p.scan["seconds"], "cost_report": p.cost["seconds"], "schedule_selection": p.schedule["seconds"],
               "baseline_searches": sum(search["seconds"] for search in a.searches.values()),
               "tuning_and_arms": arms_seconds}
    extra = _extra(m, a, p, epochs=epochs, seconds=seconds)
    settings = _settings(base, p, a.arms, epochs=epochs, smoke=smoke)
    plot_traces(out_dir / "fb_trace.png", results, [arm.name for arm in a.arms], p.lsfb, m.savings)
    seconds["total"] = time.perf_counter() - started
    notes.append(f"wall time: scan {seconds['scan']:.0f} s, cost report {seconds['cost_report']:.0f} s, schedule "
                 f"selection {seconds['schedule_selection']:.0f} s, baseline searches "
                 f"{seconds['baseline_searches']:.0f} s, tuning and arms {seconds['tuning_and_arms']:.0f} s, "
                 f"total {seconds['total']:.0f} s (of this invocation: cached runs add nothing); training time summed "
                 f"over the evaluation runs: {sum(summary.seconds for summary in summaries):.0f} s")
    return write_report(out_dir, name=NAME, title=TITLE, summaries=summaries, claim=CLAIM, targets=targets,
                        seeds=seeds, settings=settings, notes=notes, extra=extra, tuning=tuning,
                        readme=_readme(m, targets, by_name[a.abvs_name]))


__all__ = ["delay_sensitivity", "delay_variants", "run", "scan_least_sufficient_fb", "select_optimiser",
           "select_schedule"]
