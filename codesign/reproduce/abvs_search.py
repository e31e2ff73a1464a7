"""The ``abvs`` reproduction's own choices, made on preliminary seeds before the shared study tunes the arms.

After the paper's Sec. IV-A, every choice reads the validation split of runs
on :attr:`~codesign.reproduce.abvs_budget.Budget.preliminary_seeds` (never an
evaluated seed), each run a cached task of the one path
(:func:`codesign.reproduce.common.train_groups`):

1. **Least sufficient FB** ``L`` (:func:`scan_least_sufficient_fb`): fixed-FB
   runs, FBs ascending in batches of :data:`SCAN_BATCH`, until the smallest
   FB whose mean validation accuracy is within ``TOLERANCE_PT`` of FP32's.
2. **FB_min and the check interval** (:func:`select_schedule`): every
   ``FB_min = L - gap`` with every check interval; the rule
   (:func:`choose_schedule`) is the lowest Eq. (2) energy among the schedules
   within ``ACCURACY_DROP_PT`` of FP32 (else the most accurate). A choice on
   the grid's edge widens it as every arm's tuning grid is widened.
3. **The baselines' search** (:func:`select_optimiser`): as many settings of
   weight decay and momentum as step 2 tried schedules, chosen by the shared
   rule (:func:`codesign.reproduce.tuning.best_mean`), so that every arm
   spends the same number of runs on its choices.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from codesign.energy.abvs_cost import fpmac_energy_model
from codesign.reproduce.abvs_budget import ACCURACY_DROP_PT, BASELINE_SEARCH, abvs_config
from codesign.reproduce.abvs_energy import FAMILY, eq2_ratio
from codesign.reproduce.arms import with_settings
from codesign.reproduce.common import Execution, config_tasks, train_groups
from codesign.reproduce.protocol import MAX_WIDENINGS
from codesign.reproduce.tuning import best_mean, widened_value
from codesign.train.config import TrainConfig
from codesign.train.techniques.abvs import least_sufficient_fb

SCAN_BATCH = 4  # FBs trained together (in parallel) before the scan looks for a sufficient one


def _validation(results: list[dict]) -> list[float]:
    return [result["validation_accuracy"] for result in results]


def scan_least_sufficient_fb(base: TrainConfig, *, seeds: tuple[int, ...], candidates: tuple[int, ...],
                             tolerance_pt: float, task_dir: Path, execution: Execution) -> dict[str, Any]:
    """FP32 and fixed-FB runs on ``seeds``, FBs ascending in batches, until one is sufficient on validation."""
    started = time.perf_counter()
    fp32_tasks = config_tasks({f"scan,fp32,seed={seed}": base.replace(seed=seed) for seed in seeds})
    fp32 = _validation(train_groups({"fp32": fp32_tasks}, task_dir, execution).groups["fp32"])
    by_fb: dict[int, list[float]] = {}
    chosen = None
    for start in range(0, len(candidates), SCAN_BATCH):
        batch = candidates[start:start + SCAN_BATCH]
        fixed = {fb: base.replace(techniques={"abvs": abvs_config(fb, fb, total_epochs=base.optim.epochs,
                                                                  cost_report="")}) for fb in batch}
        groups = {fb: config_tasks({f"scan,fb={fb},seed={seed}": fixed[fb].replace(seed=seed) for seed in seeds})
                  for fb in batch}
        by_fb |= {fb: _validation(results) for fb, results in train_groups(groups, task_dir, execution).groups.items()}
        chosen = least_sufficient_fb(by_fb, fp32, tolerance=tolerance_pt)
        if chosen is not None:
            break
    return {"seeds": list(seeds), "reads": "validation accuracy", "tolerance_pt": tolerance_pt,
            "fp32_validation_accuracy": fp32, "fp32_mean": statistics.fmean(fp32),
            "fixed_fb_validation_accuracy": {str(fb): accs for fb, accs in by_fb.items()},
            "fixed_fb_mean": {str(fb): statistics.fmean(accs) for fb, accs in by_fb.items()},
            "least_sufficient_fb": chosen, "found": chosen is not None, "runs": len(seeds) * (1 + len(by_fb)),
            "seconds": time.perf_counter() - started}


def schedule_grid_widening(gaps: list[int], intervals: list[float], chosen: Mapping[str, Any], *, lsfb: int,
                           epochs: int) -> tuple[str, Any] | None:
    """The axis (``"gap"`` or ``"check_every_epochs"``) and value that continue the schedule grid past the edge the
    choice landed on (:func:`codesign.reproduce.tuning.widened_value`), or None. A gap must leave FB_min >= 1 and
    be >= 1 (a gap of 0 is the fixed-FB arm); an interval must be one epoch or more and at most the run."""
    gap = lsfb - chosen["fb_min"]
    new_gap = widened_value(gaps, gap)
    if new_gap is not None and 1 <= new_gap <= lsfb - 1:
        return "gap", new_gap
    new_interval = widened_value(intervals, chosen["check_every_epochs"])
    if new_interval is not None and 1 <= new_interval <= epochs:
        return "check_every_epochs", new_interval
    return None


def choose_schedule(candidates: Sequence[Mapping[str, Any]]) -> Mapping[str, Any]:
    """ABVS's choice rule: among the schedules within the accuracy bound of FP32 (validation), the lowest Eq. (2)
    energy relative to fixed FB (ties: more accurate); if none is, the most accurate (ties: less energy)."""
    passing = [c for c in candidates if c["within_accuracy"]]
    if passing:
        return min(passing, key=lambda c: (c["eq2_ratio_vs_fixed_mean"], -c["validation_accuracy_mean"]))
    return max(candidates, key=lambda c: (c["validation_accuracy_mean"], -c["eq2_ratio_vs_fixed_mean"]))


def _schedule_candidates(grid: list[tuple[int, float]], widening: int, *, base: TrainConfig, seeds: tuple[int, ...],
                         lsfb: int, fp32_mean: float, cost_report: str, task_dir: Path,
                         execution: Execution) -> list[dict[str, Any]]:
    """Train every (FB_min, check interval) of ``grid`` up to ``lsfb`` on ``seeds``; one candidate record each."""
    energy = fpmac_energy_model(cost_report or None, timing_fb=lsfb, family=FAMILY)
    groups = {(fb_min, interval): config_tasks({
        f"schedule,fb{fb_min}to{lsfb},every={interval},seed={seed}": base.replace(
            seed=seed, techniques={"abvs": abvs_config(fb_min, lsfb, total_epochs=base.optim.epochs,
                                                       cost_report=cost_report, check_every=interval)})
        for seed in seeds}) for fb_min, interval in grid}
    trained = train_groups(groups, task_dir, execution).groups
    candidates = []
    for (fb_min, interval), runs in trained.items():
        accuracy = statistics.fmean(_validation(runs))
        ratio = statistics.fmean(eq2_ratio(run["techniques"]["abvs"]["epochs_per_fb"], lsfb, energy) for run in runs)
        candidates.append({"fb_min": fb_min, "check_every_epochs": interval, "validation_accuracy": _validation(runs),
                           "validation_accuracy_mean": accuracy, "eq2_ratio_vs_fixed_mean": ratio,
                           "within_accuracy": accuracy >= fp32_mean - ACCURACY_DROP_PT, "widening": widening})
    return candidates


def select_schedule(base: TrainConfig, *, seeds: tuple[int, ...], lsfb: int, fp32_mean: float, cost_report: str,
                    gaps: tuple[int, ...], intervals: tuple[float, ...], task_dir: Path,
                    execution: Execution) -> dict[str, Any]:
    """Pick FB_min and the check interval of ABVS from runs on the preliminary seeds (paper: both "experimentally
    determined", Sec. IV-A/B) by :func:`choose_schedule`.

    A choice on the edge of the gap or interval grid continues that axis one step of its own kind and the new
    candidates (the new value with every value of the other axis) run, at most :data:`MAX_WIDENINGS` times, as
    every arm's tuning grid does; each widening is recorded."""
    started = time.perf_counter()
    gap_axis = [gap for gap in gaps if lsfb - gap >= 1]
    interval_axis = list(intervals)
    train = dict(base=base, seeds=seeds, lsfb=lsfb, fp32_mean=fp32_mean, cost_report=cost_report, task_dir=task_dir,
                 execution=execution)
    candidates = _schedule_candidates([(lsfb - gap, every) for gap in gap_axis for every in interval_axis], 0, **train)
    widenings: list[dict[str, Any]] = []
    if candidates:
        chosen = choose_schedule(candidates)
        for round_number in range(1, MAX_WIDENINGS + 2):
            step = schedule_grid_widening(gap_axis, interval_axis, chosen, lsfb=lsfb, epochs=base.optim.epochs)
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
            candidates += _schedule_candidates(grid, round_number, **train)
            chosen = choose_schedule(candidates)
        on_edge = step is not None  # the rounds ran out with the choice still on an edge
    else:  # lsfb == 1: nothing narrower to start from
        chosen, on_edge = {"fb_min": lsfb, "check_every_epochs": 1}, False
    return {"seeds": list(seeds), "reads": "validation accuracy",
            "rule": f"lowest Eq. (2) energy with mean validation accuracy >= FP32 - {ACCURACY_DROP_PT} pt",
            "candidates": candidates, "widenings": widenings, "gaps": gap_axis, "intervals": interval_axis,
            "still_on_edge": on_edge,
            "any_within_accuracy": any(c["within_accuracy"] for c in candidates), "fb_min": chosen["fb_min"],
            "check_every_epochs": chosen["check_every_epochs"], "runs": len(candidates) * len(seeds),
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

    groups = {index: config_tasks({key(settings, seed): with_settings(config, settings).replace(seed=seed)
                                   for seed in seeds}) for index, settings in enumerate(grid)}
    trained = train_groups(groups, task_dir, execution).groups
    candidates = [{"settings": settings, "validation_accuracy": _validation(trained[index])}
                  for index, settings in enumerate(grid)]
    for candidate in candidates:
        candidate["validation_accuracy_mean"] = statistics.fmean(candidate["validation_accuracy"])
    # with no schedule to match (least sufficient FB 1) the configuration stays
    chosen = candidates[best_mean(candidates, "validation_accuracy_mean")]["settings"] if candidates else {}
    return {"seeds": list(seeds), "reads": "validation accuracy", "candidates": candidates,
            "chosen": chosen, "runs": len(grid) * len(seeds), "seconds": time.perf_counter() - started}
