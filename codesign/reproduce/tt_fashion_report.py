"""The ``tt-fashion`` reproduction's analysis: the three readings of a run, its charged compute, the paired
comparisons, the goals and their tests, the headline.

**Readings.** Paper 003 reports each row at its epoch of best test accuracy
(App. B): a choice made on the test split, so optimistic. Each run is read
three ways, each with the memory of the very model it scores (the ranks that
epoch trained and was evaluated at): ``best_test`` (the paper's), ``last``
(the last epoch) and ``best_validation`` (the epoch of highest validation
accuracy: the honest choice, and the one the goals are judged on). Ties go to
the later epoch (trained longer, no more ranks).

**Compute.** Every pass is charged in multiply-accumulates with one formula
for every arm (:func:`codesign.reproduce.tt_fashion_budget.macs_per_sample`
at the ranks of each epoch): the MNIST pre-training and its test passes, the
Fashion-MNIST training steps, the validation and test passes after every
epoch (the test every epoch, for the paper's reading) and the final pass over
the training split. The test passes' share of a run's MACs is reported.

**Goals** (issue 41), fixed before the runs, the seed the unit of replication:

* accuracy: with ``d_s`` = test accuracy of ``tt-fixed-prior`` − that of
  ``fp32`` at seed ``s`` (points, best-validation reading) and ``mu`` its
  mean, H0: ``mu <= -(4.41 + 1) = -5.41`` pt (the proposal loses more than
  the paper's 4.41 pt, 89.27 % -> 84.86 % in Table 1, plus a 1 pt margin)
  against H1: ``mu > -5.41`` pt; a one-sided one-sample t-test on the
  ``n >= 3`` seed differences (n - 1 degrees of freedom), alpha 0.05
  (:func:`codesign.reproduce.stats.above_bound`); met when H0 is rejected;
* memory: ``tt-fixed-prior``'s reduction (dense FP32 bits / its bits, the
  best-validation model) at least 292x at every seed.
"""

from __future__ import annotations

import dataclasses
import heapq
import statistics
from collections.abc import Mapping, Sequence
from typing import Any

from codesign.reproduce.report import ReadmeRow, Target
from codesign.reproduce.stats import (above_bound, bootstrap_interval, paired_differences, paired_ratios, t_interval,
                                     tost)
from codesign.reproduce.tt_budget import BASELINE, FIXED_PLAIN, FIXED_PRIOR, FLOAT_PLAIN, FLOAT_PRIOR
from codesign.reproduce.tt_fashion_budget import (ARMS, FIXED_PRIOR_FEWEST, FIXED_PRIOR_TUNED, MAIN_ARM, PRIOR_PAIRS,
                                                  Budget, dense_bits,
                                                  macs_per_sample, memory_bits, start_ranks)
from codesign.reproduce.tt_report import PAPER_TABLE1, TARGET_REDUCTION

READINGS = ("best_test", "last", "best_validation")
READING_TEXT = {"best_test": "best epoch on test (the paper's; selected on test, optimistic)",
                "last": "last epoch", "best_validation": "epoch of best validation accuracy (honest)"}
GOAL_READING = "best_validation"
PAPER_DROP_PT = round(PAPER_TABLE1[BASELINE][1] - PAPER_TABLE1[FIXED_PRIOR][1], 2)  # 89.27 - 84.86 = 4.41
MARGIN_PT = 1.0  # fixed before the runs
LOSS_BOUND_PT = -(PAPER_DROP_PT + MARGIN_PT)  # H0: the mean difference lies at or below this
MIN_SEEDS = 3  # the goal test needs at least this many seeds
# Paper 003, Table 1: training accuracy (%) of each row
PAPER_TRAIN_ACCURACY = {BASELINE: 95.75, FLOAT_PLAIN: 92.54, FIXED_PLAIN: 88.31, FLOAT_PRIOR: 90.17, FIXED_PRIOR: 85.45}
CAPTION = {BASELINE: "Vanilla (dense FP32)", FLOAT_PLAIN: "Floating, w/o prior", FIXED_PLAIN: "Fixed, w/o prior",
           FLOAT_PRIOR: "Floating, w/ prior", FIXED_PRIOR: "Fixed, w/ prior (proposed)",
           FIXED_PRIOR_TUNED: "Fixed, w/ prior at the tuned weight (ours)",
           FIXED_PRIOR_FEWEST: "Fixed, w/ prior, modes in the order of fewest step products (ours)"}


def _pick(epochs: Sequence[Mapping[str, Any]], key: str) -> int:
    """The index of the epoch of highest ``key`` (ties: the later epoch)."""
    return max(range(len(epochs)), key=lambda i: (epochs[i][key], i))


def budget_of(b: Budget, record: Mapping[str, Any]) -> Budget:
    """The budget a run trained with: the study's, at the run's mode order (its layers' modes, and so its bits).
    The fewest order is ranked again as the report reads it, so a run's recorded model bits must be those of that
    order at its final ranks: a record trained at an order the ranking no longer picks is refused, not misread."""
    modes = record["job"].get("modes", "ours")
    if modes == "ours":
        return b
    found = dataclasses.replace(b, modes=modes)
    if memory_bits(found, record["job"]["kind"], record["final_ranks"]) != record["model_bits"]:
        raise ValueError(f"the run {record['job']} trained another mode order than {found.layer_modes} (its model "
                         f"held {record['model_bits']} bits): delete its cached record and train it again")
    return found


def readings(b: Budget, record: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """A run's three readings: epoch, test and validation accuracy (%), ranks and memory (bits) of that model."""
    epochs, kind, b = record["epochs"], record["job"]["kind"], budget_of(b, record)
    chosen = {"best_test": _pick(epochs, "test_accuracy"), "last": len(epochs) - 1,
              "best_validation": _pick(epochs, "validation_accuracy")}
    return {name: {"epoch": index, "test_accuracy": epochs[index]["test_accuracy"],
                   "validation_accuracy": epochs[index]["validation_accuracy"], "ranks": epochs[index]["ranks"],
                   "memory_bits": memory_bits(b, kind, epochs[index]["ranks"])} for name, index in chosen.items()}


def charged_macs(b: Budget, record: Mapping[str, Any]) -> dict[str, float]:
    """The run's multiply-accumulates, every pass charged once, by phase; the test passes' count and share."""
    kind, images, b = record["job"]["kind"], record["images"], budget_of(b, record)
    pre = record["pretrain"]

    def per(ranks, key: str) -> int:
        return macs_per_sample(b, kind, ranks)[key]

    macs = {"pretrain": sum(pre["images_per_epoch"] * per(row["ranks"], "training")
                            + pre["images"]["test"] * per(row["ranks"], "forward") for row in pre["epochs"]),
            "train": sum(record["images_per_epoch"] * per(row["ranks"], "training") for row in record["epochs"]),
            "validation": sum(images["validation"] * per(row["ranks"], "forward") for row in record["epochs"]),
            "test": sum(images["test"] * per(row["ranks"], "forward") for row in record["epochs"]),
            "train_accuracy": images["train"] * per(record["final_ranks"], "forward")}
    total = sum(macs.values())
    return {**macs, "total": total, "test_share": macs["test"] / total, "test_passes": len(record["epochs"]),
            "evaluation_share": (macs["validation"] + macs["test"] + macs["train_accuracy"]) / total}


def trajectory(b: Budget, record: Mapping[str, Any]) -> dict[str, Any]:
    """Ranks and memory (bits) of every Fashion-MNIST epoch's model, and after the last epoch's pruning."""
    kind, b = record["job"]["kind"], budget_of(b, record)
    ranks = [row["ranks"] for row in record["epochs"]] + [record["final_ranks"]]
    return {"ranks": ranks, "memory_bits": [memory_bits(b, kind, r) for r in ranks],
            "prune_events": record["prune_events"]}


def run_summary(b: Budget, record: Mapping[str, Any]) -> dict[str, Any]:
    """Everything the report reads of one run: readings, reductions, training accuracy, curves, cost, time."""
    read = readings(b, record)
    reference = dense_bits(b)
    return {"seed": record["job"]["seed"], "prior_weight": record["job"]["prior_weight"], "readings": read,
            "reduction": {name: reference / entry["memory_bits"] for name, entry in read.items()},
            "train_accuracy": record["train_accuracy"],
            "validation_curve": [round(row["validation_accuracy"], 2) for row in record["epochs"]],
            "test_curve": [round(row["test_accuracy"], 2) for row in record["epochs"]],
            "pretrain_test_accuracy": [round(row["test_accuracy"], 2) for row in record["pretrain"]["epochs"]],
            "trajectory": trajectory(b, record), "macs": charged_macs(b, record), "seconds": record["seconds"],
            "steps": record["steps"], "images": {**record["images"], "pretrain": record["pretrain"]["images"]}}


def _interval(values: list[float]) -> dict[str, Any]:
    """Mean with its 95 % bootstrap and t-intervals over the seeds (same units as the values)."""
    return {"bootstrap": bootstrap_interval(values).as_dict(), "t": t_interval(values).as_dict(), "n": len(values),
            "values": values}


def values(runs: Sequence[Mapping[str, Any]], reading: str, key: str) -> list[float]:
    """One figure per seed (seed order): ``key`` of ``reading``, or ``"reduction"`` at that reading."""
    return [float(run["reduction"][reading] if key == "reduction" else run["readings"][reading][key])
            for run in runs]


def compare(arms: Mapping[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """Per reading: every arm's accuracy, every TT arm against ``fp32`` (difference, points; memory reduction) and
    the prior's own effect (with − without, same start and seed), paired by seed."""
    out: dict[str, Any] = {}
    for reading in READINGS:
        accuracy = {arm: values(runs, reading, "test_accuracy") for arm, runs in arms.items()}
        bits = {arm: values(runs, reading, "memory_bits") for arm, runs in arms.items()}
        out[reading] = {
            "accuracy": {arm: _interval(accuracy[arm]) for arm in arms},
            "against_baseline": {arm: {"accuracy_difference_pt": _interval(paired_differences(accuracy[arm],
                                                                                              accuracy[BASELINE])),
                                       "memory_reduction": _interval(paired_ratios(bits[BASELINE], bits[arm]))}
                                 for arm in arms if arm != BASELINE},
            "prior_effect": {f"{arm} vs {reference}": {
                "accuracy_difference_pt": _interval(paired_differences(accuracy[arm], accuracy[reference])),
                "memory_reduction": _interval(paired_ratios(bits[reference], bits[arm]))}
                for arm, reference in PRIOR_PAIRS if arm in arms and reference in arms}}
    out["train_accuracy"] = {arm: _interval([float(run["train_accuracy"]) for run in runs])
                             for arm, runs in arms.items()}
    return out


def loss_tests(arms: Mapping[str, list[dict[str, Any]]]) -> dict[str, dict[str, dict[str, Any]]]:
    """The goal's one-sided test (H0 mean difference <= :data:`LOSS_BOUND_PT`) of every fixed-point prior arm
    against ``fp32`` at every reading; only ``tt-fixed-prior`` at :data:`GOAL_READING` is the goal."""
    tests = {}
    for arm in (FIXED_PRIOR, FIXED_PRIOR_TUNED, FIXED_PRIOR_FEWEST):
        if arm in arms:
            tests[arm] = {reading: above_bound(paired_differences(values(arms[arm], reading, "test_accuracy"),
                                                                  values(arms[BASELINE], reading, "test_accuracy")),
                                               LOSS_BOUND_PT).as_dict() for reading in READINGS}
    return tests


def mode_order_test(b: Budget, arms: Mapping[str, list[dict[str, Any]]]) -> dict[str, Any] | None:
    """The fewest-products order against the proposal's (same arm otherwise, same seeds): both orders' modes and
    step products a sample at the start's ranks, and at the goal's reading the paired test-accuracy difference's
    TOST at +-:data:`MARGIN_PT` and the paired memory ratio. None without both arms."""
    if FIXED_PRIOR_FEWEST not in arms or MAIN_ARM not in arms:
        return None
    fewest = dataclasses.replace(b, modes="fewest")
    differences = paired_differences(values(arms[FIXED_PRIOR_FEWEST], GOAL_READING, "test_accuracy"),
                                     values(arms[MAIN_ARM], GOAL_READING, "test_accuracy"))
    bits = {arm: values(arms[arm], GOAL_READING, "memory_bits") for arm in (MAIN_ARM, FIXED_PRIOR_FEWEST)}
    return {"modes": {MAIN_ARM: b.layer_modes, FIXED_PRIOR_FEWEST: fewest.layer_modes},
            "training_macs_per_sample": {arm: macs_per_sample(budget, "tt-fixed", start_ranks(budget))["training"]
                                         for arm, budget in ((MAIN_ARM, b), (FIXED_PRIOR_FEWEST, fewest))},
            "accuracy_difference_pt": _interval(differences), "tost": tost(differences, MARGIN_PT).as_dict(),
            "memory_ratio": _interval(paired_ratios(bits[FIXED_PRIOR_FEWEST], bits[MAIN_ARM]))}


def _test_text(test: Mapping[str, Any]) -> str:
    verdict = "H0 rejected" if test["rejected"] else "H0 not rejected"
    return (f"mean {test['mean']:+.2f} pt, 95 % lower bound {test['lower']:+.2f} pt, p = {test['p']:.2g}, "
            f"n = {test['n']}: {verdict}")


def _mean_text(entry: Mapping[str, Any], digits: int = 2, unit: str = "", signed: bool = True) -> str:
    boot, t = entry["bootstrap"], entry["t"]
    f = f"{'+' if signed else ''}.{digits}f"
    return (f"{boot['mean']:{f}}{unit} [boot {boot['low']:{f}}, {boot['high']:{f}}; t {t['low']:{f}}, "
            f"{t['high']:{f}}]")


def goals(comparisons: Mapping[str, Any], tests: Mapping[str, Any], n: int) -> tuple[list[Target], str]:
    """The accuracy and memory goals of :data:`MAIN_ARM` at :data:`GOAL_READING`, and the verdict."""
    test = tests[MAIN_ARM][GOAL_READING]
    reduction = comparisons[GOAL_READING]["against_baseline"][MAIN_ARM]["memory_reduction"]
    accuracy_met = bool(test["rejected"]) and n >= MIN_SEEDS
    memory_met = min(reduction["values"]) >= TARGET_REDUCTION
    targets = [
        Target(text=(f"{MAIN_ARM} − {BASELINE} test accuracy (best-validation epoch, per seed): H0 mean <= "
                     f"{LOSS_BOUND_PT:+.2f} pt (the paper's −{PAPER_DROP_PT:.2f} pt, Table 1, and a {MARGIN_PT:g} pt "
                     f"margin) rejected by a one-sided t-test at alpha 0.05 over n >= {MIN_SEEDS} seeds"),
               met=accuracy_met, measured=_test_text(test) + ("" if n >= MIN_SEEDS else f" (n < {MIN_SEEDS})")),
        Target(text=(f"{MAIN_ARM}: >= {TARGET_REDUCTION:g}x parameter-memory reduction (dense FP32 bits / TT bits, "
                     f"the best-validation model) at every seed (paper 003, Table 1: 292x)"),
               met=memory_met, measured=(f"{_mean_text(reduction, 1, 'x', False)}, smallest "
                                         f"{min(reduction['values']):.1f}x, n = {reduction['n']}"))]
    met = {"accuracy": accuracy_met, "memory": memory_met}
    if all(met.values()):
        verdict = "met"
    elif not any(met.values()):
        verdict = "**not met**"
    else:
        verdict = " and ".join(f"{name} {'met' if ok else '**not met**'}" for name, ok in met.items())
    return targets, verdict


def lpt_seconds(seconds: Sequence[float], workers: int) -> float:
    """Wall seconds of tasks of the given seconds on ``workers`` processes, longest first to the idlest (LPT)."""
    if workers < 1:
        raise ValueError(f"workers must be >= 1, got {workers}")
    loads = [0.0] * workers
    for value in sorted(seconds, reverse=True):
        heapq.heapreplace(loads, loads[0] + value)
    return max(loads)


def cost_record(phases: Mapping[str, Sequence[float]], wall: float, workers: int, tasks: Mapping[str, int]
                ) -> dict[str, Any]:
    """The study's cost: the tasks' recorded seconds per phase (each task timed where it ran, one thread), their
    sum, and the wall time they take on two workers (each phase scheduled longest first after the one before);
    the wall time of this invocation, which read ``tasks["cached"]`` runs from the cache."""
    return {"task_seconds": {phase: list(map(float, secs)) for phase, secs in phases.items()},
            "cpu_seconds": float(sum(sum(secs) for secs in phases.values())),
            "two_worker_seconds": float(sum(lpt_seconds(secs, 2) for secs in phases.values() if secs)),
            "wall_seconds": float(wall), "workers": workers, "tasks": dict(tasks)}


def headline(payload: Mapping[str, Any]) -> str:
    """The results table's figure: the proposal's memory reduction and its Δ accuracy against ``fp32`` (best-validation
    reading), each mean [95 % bootstrap CI], and the goal test's p."""
    entry = payload["comparisons"][GOAL_READING]["against_baseline"][MAIN_ARM]
    reduction, delta = entry["memory_reduction"]["bootstrap"], entry["accuracy_difference_pt"]["bootstrap"]
    test = payload["tests"][MAIN_ARM][GOAL_READING]
    return (f"{MAIN_ARM}: {reduction['mean']:.0f}× [{reduction['low']:.0f}, {reduction['high']:.0f}] less memory, "
            f"Δacc {delta['mean']:+.2f} [{delta['low']:+.2f}, {delta['high']:+.2f}] pt (p = {test['p']:.2g})")


def readme_row(comparisons: Mapping[str, Any], tests: Mapping[str, Any], verdict: str, start: str) -> ReadmeRow:
    """The reproduction's entry in results/README.md."""
    goal = comparisons[GOAL_READING]["against_baseline"]
    paper = comparisons["best_test"]["against_baseline"][MAIN_ARM]
    return ReadmeRow(
        reproduction=("`tt-fashion` (paper 003's TT MLP 1024-512-10 on Fashion-MNIST after MNIST pre-training: "
                      "Table 1's arms, 4-bit cores on the exact golden, vs dense FP32)"),
        target=(f"≥ {TARGET_REDUCTION:g}× less parameter memory at every seed, and a loss against dense FP32 no larger "
                f"than the paper's {PAPER_DROP_PT:.2f} pt (one-sided t-test over seeds, {MARGIN_PT:g} pt margin)"),
        measured=(f"from ranks {start}, {MAIN_ARM} at the best-validation epoch: memory reduction "
                  f"{_mean_text(goal[MAIN_ARM]['memory_reduction'], 0, '×', False)}, Δ accuracy "
                  f"{_mean_text(goal[MAIN_ARM]['accuracy_difference_pt'], unit=' pt')} "
                  f"({_test_text(tests[MAIN_ARM][GOAL_READING])}); at the paper's best-test epoch Δ "
                  f"{_mean_text(paper['accuracy_difference_pt'], unit=' pt')}; without the prior "
                  f"{_mean_text(goal[FIXED_PLAIN]['memory_reduction'], 0, '×', False)}"),
        verdict=verdict)


def arm_runs(records: Mapping[str, list[Mapping[str, Any]]], b: Budget) -> dict[str, list[dict[str, Any]]]:
    """Each arm's runs in seed order, summarised (:func:`run_summary`)."""
    return {arm: [run_summary(b, record) for record in sorted(records[arm], key=lambda r: r["job"]["seed"])]
            for arm in ARMS if arm in records}


def mean_of(runs: Sequence[Mapping[str, Any]], path: Sequence[str]) -> float:
    """The mean over runs of the value at ``path`` (e.g. ``("macs", "total")``)."""
    def at(run):
        value = run
        for key in path:
            value = value[key]
        return float(value)
    return statistics.fmean(at(run) for run in runs)


__all__ = ["CAPTION", "GOAL_READING", "LOSS_BOUND_PT", "MARGIN_PT", "PAPER_DROP_PT", "PAPER_TRAIN_ACCURACY", "READINGS",
           "READING_TEXT", "arm_runs", "charged_macs", "compare", "cost_record", "goals", "headline", "loss_tests",
           "lpt_seconds", "mean_of", "mode_order_test", "readings", "readme_row", "run_summary", "trajectory", "values"]
