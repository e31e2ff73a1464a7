"""The ``abvs`` reproduction's phases and what each gives: preliminary choices, the arms, the measured savings.

Why records: the report's notes, targets and README entry read the outcome
of every phase, so each phase returns one frozen record instead of a bag of
loose values; units are in each field's comment (FBs in fraction bits,
intervals in epochs, savings and ratios as fractions).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from codesign.energy.abvs_cost import ANCHOR_FB, fpmac_energy_model
from codesign.reproduce.abvs_budget import ACCURACY_DROP_PT, TOLERANCE_PT, Budget, abvs_config
from codesign.reproduce.abvs_energy import FAMILY, delay_sensitivity, ensure_cost_report, eq2_ratio
from codesign.reproduce.abvs_search import scan_least_sufficient_fb, select_optimiser, select_schedule
from codesign.reproduce.arms import Arm, with_settings
from codesign.reproduce.common import Execution
from codesign.reproduce.stats import Interval, bootstrap_interval
from codesign.reproduce.summary import ArmSummary
from codesign.train.config import TrainConfig
from codesign.train.trainer import TrainResult


@dataclass(frozen=True, kw_only=True)
class Preliminary:
    """Phase 1: the least sufficient FB, the FP-MAC cost report, ABVS's schedule, all read on preliminary seeds."""

    budget: Budget
    scan: dict[str, Any]  # scan_least_sufficient_fb's record
    lsfb: int  # least sufficient FB (fraction bits): the fixed arm's FB and ABVS's FB_max
    cost: dict[str, Any]  # ensure_cost_report's record; cost["path"] '' = the fallback table
    schedule: dict[str, Any]  # select_schedule's record
    notes: tuple[str, ...]  # what went unusually (no sufficient FB, no schedule within the bound)

    @property
    def report(self) -> str:
        """The cost report's path ('' = the fallback table)."""
        return self.cost["path"]

    @property
    def fb_min(self) -> int:
        """ABVS's first FB (fraction bits)."""
        return self.schedule["fb_min"]

    @property
    def check_every(self) -> float:
        """Epochs between two FB checks of ABVS."""
        return self.schedule["check_every_epochs"]


@dataclass(frozen=True, kw_only=True)
class ArmPlan:
    """Phase 2: the three arms (FP32 baseline, fixed FB, ABVS) and the baselines' optimiser searches."""

    fixed_name: str
    abvs_name: str
    searches: dict[str, dict[str, Any]]  # arm name -> select_optimiser's record
    tune: dict[str, tuple[float, ...]]  # every arm's tuning grid (learning rates)
    arms: list[Arm]
    search_runs: dict[str, int]  # preliminary runs each arm spent on its own choice (all equal)


@dataclass(frozen=True, kw_only=True)
class Measured:
    """Phase 4: ABVS's savings against the fixed-FB arm per seed (fractions), its FB traces, the delay variants."""

    savings: list[float]  # Eq. (2) saving per run
    saving: Interval  # of savings
    total_ratios: list[float]  # charged ledger energy ABVS / fixed per run
    total_saving: Interval  # of 1 - total_ratios
    abvs_reports: list[dict[str, Any]]  # ABVS's technique report per run
    traces: list[dict[str, int]]  # epochs spent at each FB, per run
    energy_model: dict[str, Any]
    eq2_from_traces: list[float]  # Eq. (2) ratio recomputed from the traces (equals 1 - savings)
    delays: dict[str, Any]  # delay_sensitivity's record
    saving_range: list[float]  # mean saving under each feasible delay variant
    abvs_delta: Interval  # Δ test accuracy ABVS - FP32 (points)
    fixed_delta: Interval  # Δ test accuracy fixed FB - FP32 (points)


def preliminary(base: TrainConfig, b: Budget, *, out_dir: Path, task_dir: Path, execution: Execution,
                progress: bool) -> Preliminary:
    """Phase 1: the least sufficient FB (preliminary fixed-FB scan), the FP-MAC cost report, and ABVS's FB_min and
    check interval chosen on the preliminary seeds."""
    notes = []
    scan = scan_least_sufficient_fb(base, seeds=b.preliminary_seeds, candidates=b.scan_fbs, tolerance_pt=TOLERANCE_PT,
                                    task_dir=task_dir, execution=execution)
    lsfb = scan["least_sufficient_fb"]
    if lsfb is None:
        lsfb = max(int(fb) for fb in scan["fixed_fb_mean"])
        notes.append(f"no scanned FB reached FP32 validation accuracy within {TOLERANCE_PT} pt in the preliminary "
                     f"runs; the widest scanned FB ({lsfb}) stands in for the least sufficient FB")
    cost = ensure_cost_report(out_dir / "fpmac_cost", set(range(max(1, lsfb - max(b.fb_gaps)), lsfb + 1)) | {ANCHOR_FB},
                              allow_synthesis=not b.smoke, progress=progress)
    schedule = select_schedule(base, seeds=b.preliminary_seeds, lsfb=lsfb, fp32_mean=scan["fp32_mean"],
                               cost_report=cost["path"], gaps=b.fb_gaps, intervals=b.check_intervals,
                               task_dir=task_dir, execution=execution)
    if schedule["fb_min"] == lsfb:
        notes.append("the least sufficient FB is 1, so ABVS has no narrower FB to start from and equals the "
                     "fixed-FB arm")
    elif not schedule["any_within_accuracy"]:
        notes.append(f"no ABVS schedule came within {ACCURACY_DROP_PT} pt of FP32's validation accuracy on the "
                     "preliminary seeds; the most accurate one is used")
    return Preliminary(budget=b, scan=scan, lsfb=lsfb, cost=cost, schedule=schedule, notes=tuple(notes))


def plan_arms(base: TrainConfig, p: Preliminary, *, task_dir: Path, execution: Execution) -> ArmPlan:
    """Phase 2: the three arms (FP32, fixed FB, ABVS), the baselines' optimiser searches of the same budget."""
    epochs, lsfb = base.optim.epochs, p.lsfb
    fixed_name, abvs_name = f"fixed_fb{lsfb}", f"abvs_fb{p.fb_min}to{lsfb}"
    fixed_base = base.replace(techniques={"abvs": abvs_config(lsfb, lsfb, total_epochs=epochs, cost_report=p.report)})
    searches = {name: select_optimiser(name, config, seeds=p.budget.preliminary_seeds,
                                       count=len(p.schedule["candidates"]), task_dir=task_dir, execution=execution)
                for name, config in (("fp32", base), (fixed_name, fixed_base))}
    tune = {"optim.lr": p.budget.learning_rates}
    arms = [
        Arm("fp32", with_settings(base, searches["fp32"]["chosen"]), baseline=True, tune=tune),
        Arm(fixed_name, with_settings(fixed_base, searches[fixed_name]["chosen"]), tune=tune),
        Arm(abvs_name, base.replace(techniques={"abvs": abvs_config(p.fb_min, lsfb, total_epochs=epochs,
                                                                    cost_report=p.report, check_every=p.check_every)}),
            tune=tune),
    ]
    search_runs = {"fp32": searches["fp32"]["runs"], fixed_name: searches[fixed_name]["runs"],
                   abvs_name: p.schedule["runs"]}
    if len(set(search_runs.values())) != 1:
        raise RuntimeError(f"unequal preliminary searches: {search_runs} runs")
    return ArmPlan(fixed_name=fixed_name, abvs_name=abvs_name, searches=searches, tune=tune, arms=arms,
                   search_runs=search_runs)


def measure(results: dict[str, list[TrainResult]], a: ArmPlan, p: Preliminary,
            by_name: dict[str, ArmSummary]) -> Measured:
    """Phase 4: Eq. (2) and total energy savings per seed, the FB traces, the delay-model sensitivity."""
    # every pass charged once (training, each epoch's validation pass, the test pass): the summaries' per-run costs
    abvs_runs, fixed_runs = by_name[a.abvs_name].per_seed, by_name[a.fixed_name].per_seed
    savings = [1 - run["compute_pj"] / fixed["compute_pj"] for run, fixed in zip(abvs_runs, fixed_runs)]
    total_ratios = [run["energy_pj"] / fixed["energy_pj"] for run, fixed in zip(abvs_runs, fixed_runs)]
    abvs_reports = [run.techniques["abvs"] for run in results[a.abvs_name]]
    traces = [report["epochs_per_fb"] for report in abvs_reports]
    model = fpmac_energy_model(p.report or None, timing_fb=p.lsfb, family=FAMILY)
    delays = delay_sensitivity(traces, fb_max=p.lsfb, cost_report=p.report)
    return Measured(savings=savings, saving=bootstrap_interval(savings), total_ratios=total_ratios,
                    total_saving=bootstrap_interval([1 - r for r in total_ratios]), abvs_reports=abvs_reports,
                    traces=traces, energy_model=abvs_reports[0]["energy_model"],
                    eq2_from_traces=[eq2_ratio(trace, p.lsfb, model) for trace in traces], delays=delays,
                    saving_range=[Interval(**entry["saving"]).mean for entry in delays.values() if entry["saving"]],
                    abvs_delta=by_name[a.abvs_name].interval("accuracy_difference"),
                    fixed_delta=by_name[a.fixed_name].interval("accuracy_difference"))
