"""Per arm, the paired comparison against the same-run baseline: accuracy, charged cost, intervals, TOST.

Why paired: every arm trains at the baseline's (seed, split) pairs, so run
``i`` of an arm shares the baseline's initial weights, data order and split;
per pair, *technique − baseline* for accuracy (points) and *technique /
baseline* for energy and BitOPs, each mean with its 95 % bootstrap (and for
accuracy Student t) interval (:mod:`codesign.reproduce.stats`), and the
accuracy claim judged by two one-sided tests (TOST) at the equivalence
margin each reproduction fixes in its code.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from codesign.reproduce.arms import Arm
from codesign.reproduce.cost import COST_KEYS, PaperAccounting, charged_cost, data_sizes
from codesign.reproduce.stats import (Interval, accuracy_verdict, bootstrap_interval, paired_differences, paired_ratios,
                                      t_interval, tost)
from codesign.train.trainer import TrainResult


EVERY_TEST_KEYS = tuple(f"{key}_every_test" for key in COST_KEYS)  # per run: the cost with every test pass charged


@dataclass(frozen=True, kw_only=True)
class ArmSummary:
    """One arm's evaluation runs summarised against the baseline's (units in each field's comment)."""

    name: str
    baseline: bool
    accuracy_mean: float  # test accuracy over the runs, %
    accuracy_std: float  # its sample standard deviation, points
    energy_pj_mean: float  # charged ledger energy per run (training and evaluation passes), pJ
    bitops_mean: float  # charged BitOPs per run
    energy_ratio_mean: float  # technique / baseline per run, then the mean
    energy_ratio_std: float
    bitops_ratio_mean: float
    bitops_ratio_std: float
    accuracy_difference_mean: float  # technique - baseline, points (negative: a loss)
    seconds: float  # training time summed over the runs, s
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
        """One of the interval fields (``"energy_ratio"``, ``"accuracy_difference"``, ...) as an :class:`Interval`."""
        return Interval(**getattr(self, name))


def mean_std(values: list[float]) -> tuple[float, float]:
    """Mean and sample standard deviation (0 for one value, NaN for none)."""
    if not values:
        return float("nan"), float("nan")
    return statistics.fmean(values), (statistics.stdev(values) if len(values) > 1 else 0.0)


def _ran_validation_fraction(runs: list[TrainResult]) -> float | None:
    fractions = {float(run.config.get("data", {}).get("validation_fraction", 0.0)) for run in runs}
    return fractions.pop() if len(fractions) == 1 else None


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
    sizes = data_sizes(results[baseline.name][0].config)
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
                       "steps": run.steps, "test_passes": len(run.history),
                       **{key: c[key] for key in EVERY_TEST_KEYS}}
                      for run, c in zip(runs, cost)],
            techniques=[run.techniques for run in runs],
            validation_fraction=_ran_validation_fraction(runs),
        ))
    return summaries


def committed_arm(payload: Mapping[str, Any], name: str) -> ArmSummary:
    """Arm ``name`` of a written ``results.json`` as its summary (fields a report of an older run lacks take their
    defaults)."""
    entry = next(arm for arm in payload["arms"] if arm["name"] == name)
    known = {item.name for item in fields(ArmSummary)}
    return ArmSummary(**{key: value for key, value in entry.items() if key in known})
