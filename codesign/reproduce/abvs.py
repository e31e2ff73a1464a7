"""Reproduction of ABVS (paper 004, Cheng & Hashimoto): FP32, fixed least-sufficient FB, and ABVS, on 8x8 digits.

Flow, as in the paper's Sec. IV-A:

1. Preliminary fixed-FB runs (on five seeds of their own, so the choice is
   not made on the seeds that are then compared, and five because one test
   sample is 0.22 pt, which makes 3-seed means as noisy as the 0.25 pt
   tolerance) find the *least sufficient FB*
   ``L``: the smallest FB, scanned upward from 1, whose mean test accuracy is
   within ``TOLERANCE_PT`` of FP32 (:func:`codesign.train.techniques.abvs.least_sufficient_fb`).
2. The FP-MAC cost report (Yosys, xc7) is synthesised once for the FBs the
   arms use plus FB = 23 into ``out_dir/fpmac_cost/`` and reused when
   present (a report from other RTL, or lacking an FB, is re-made; without
   Yosys the embedded fallback table prices the MACs — results say which).
3. FB_min and the check interval (the paper determines both experimentally)
   are chosen on the same preliminary seeds: every ``FB_min = L - gap``
   (gaps 3, 2, 1; the paper's settings use 3, 4 and 2) with a check every
   4, 2 or 1 epochs (4 is what the epoch counts of Fig. 5b, 13/8/12/17 at FB
   6/7/8/9 over 50 epochs, imply); the pick is the lowest Eq. (2) energy among
   the schedules whose mean accuracy is within 0.5 pt of FP32 (else the most
   accurate). Alpha is then set so that Eq. (1) gives that interval.
4. Arms, same data/model/epochs/seeds (0, 1, 2): ``fp32`` (baseline),
   ``fixed_fbL`` (fixed-FB training at ``L``) and ``abvs_fbMtoL`` (ABVS from
   the chosen ``M`` to ``L``, the paper's main setting).

Settings taken from the paper: T = 50 epochs, epsilon = 0.005 on accuracy.
Deviations are listed in the report's notes.

Energy: the target compares Eq. (2) energies — the FP-MAC energy summed over
all MACs, i.e. the ledger's ``compute_pj`` (every epoch does the same MACs,
so this is ``sum_i T_epoch * P(i) * N_epoch(i)``) — of ABVS and of the
fixed-``L`` arm, per seed. The ledger's total (with buffer and DRAM traffic,
which the paper leaves out) is reported next to it.
"""

from __future__ import annotations

import statistics
import time
from pathlib import Path
from typing import Any

import torch

from codesign.energy.abvs_cost import ANCHOR_FB, fpmac_energy_model
from codesign.reproduce import check_output_dir
from codesign.reproduce.common import Arm, PaperClaim, Target, mean_std, run_arms, summarize, write_report
from codesign.train.config import DataConfig, ModelConfig, OptimConfig, TrainConfig
from codesign.train.techniques.abvs import Config as AbvsConfig
from codesign.train.techniques.abvs import least_sufficient_fb
from codesign.train.trainer import Trainer

NAME = "abvs"
TITLE = "ABVS: adaptive fraction bits with voltage scaling (MLP on 8x8 digits)"
EPOCHS, SMOKE_EPOCHS = 50, 2
PRELIMINARY_SEEDS, SMOKE_PRELIMINARY_SEEDS = (100, 101, 102, 103, 104), (100,)
SCAN_FBS, SMOKE_SCAN_FBS = tuple(range(1, 24)), (3,)
TOLERANCE_PT = 0.25  # about one test sample of 450: "the same quality as FP32"
FB_GAPS, SMOKE_FB_GAPS = (3, 2, 1), (1,)  # fb_max - fb_min; the paper uses 3 (CIFAR-10, ImageNet), 4 and 2
CHECK_INTERVALS, SMOKE_CHECK_INTERVALS = (4, 2, 1), (1,)  # epochs; 4 is what Fig. 5b's epoch counts imply
EPSILON = 0.005
ACCURACY_DROP_PT = 0.5
SAVING_TARGET = 0.09
FAMILY = "xc7"
CLAIM = PaperClaim(
    text=("ABVS ends within 0-0.5% of FP32 accuracy and uses 9-37% less energy than training at the least "
          "sufficient FB (CIFAR-10/100, ImageNet, Pascal VOC; 57-63% less than FP32 for ImageNet and VOC)"),
    citation=("T. Cheng, M. Hashimoto, 'Minimizing Energy of DNN Training with Adaptive Bit-width and Voltage "
              "Scaling', Fig. 10a (energy normalised to the least sufficient FB), Figs. 5-8, Sec. IV-C, Eq. (2)"),
)


def base_config(smoke: bool) -> TrainConfig:
    """MLP on digits for T = 50 epochs (smoke: 2 epochs on the synthetic set)."""
    data = DataConfig(name="synthetic", synthetic_samples=200) if smoke else DataConfig(name="digits")
    return TrainConfig(data=data, model=ModelConfig(name="mlp"),
                       optim=OptimConfig(epochs=SMOKE_EPOCHS if smoke else EPOCHS))


def alpha_for_interval(total_epochs: int, interval_epochs: float, fb_min: int, fb_max: int) -> float:
    """The alpha of Eq. (1) that gives a check every ``interval_epochs`` (1.0 when fb_min == fb_max: no checks)."""
    if fb_max == fb_min:
        return 1.0
    return total_epochs / (interval_epochs * (fb_max - fb_min))


def abvs_config(fb_min: int, fb_max: int, *, total_epochs: int, cost_report: str,
                check_every: float = 1.0) -> AbvsConfig:
    return AbvsConfig(fb_min=fb_min, fb_max=fb_max, epsilon=EPSILON, cost_report=cost_report, family=FAMILY,
                      alpha=alpha_for_interval(total_epochs, check_every, fb_min, fb_max))


# ---------------------------------------------------------------------------- step 1: least sufficient FB


def scan_least_sufficient_fb(base: TrainConfig, *, seeds: tuple[int, ...], candidates: tuple[int, ...],
                             tolerance_pt: float, progress: bool) -> dict[str, Any]:
    """Train FP32 and fixed-FB runs on ``seeds``, FBs ascending, until one is sufficient; the scan's record."""
    started = time.perf_counter()
    fp32 = [Trainer(base.replace(seed=seed), progress=progress, description=f"prelim fp32 seed {seed}").fit()
            .test_accuracy for seed in seeds]
    by_fb: dict[int, list[float]] = {}
    chosen = None
    for fb in candidates:
        config = base.replace(techniques={"abvs": abvs_config(fb, fb, total_epochs=base.optim.epochs,
                                                              cost_report="")})
        by_fb[fb] = [Trainer(config.replace(seed=seed), progress=progress,
                             description=f"prelim fb{fb} seed {seed}").fit().test_accuracy for seed in seeds]
        chosen = least_sufficient_fb(by_fb, fp32, tolerance=tolerance_pt)
        if chosen is not None:
            break
    return {"seeds": list(seeds), "tolerance_pt": tolerance_pt, "fp32_accuracy": fp32,
            "fp32_mean": statistics.fmean(fp32),
            "fixed_fb_accuracy": {str(fb): accs for fb, accs in by_fb.items()},
            "fixed_fb_mean": {str(fb): statistics.fmean(accs) for fb, accs in by_fb.items()},
            "least_sufficient_fb": chosen, "found": chosen is not None,
            "seconds": time.perf_counter() - started}


# ---------------------------------------------------------------------------- step 2: FP-MAC cost report


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
                    return {"path": str(path), "status": "reused (RTL unchanged, all FBs present)",
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
    return {"path": str(path), "status": f"synthesised now ({len(wanted)} Yosys runs, xc7)", "fbs": wanted,
            "seconds": time.perf_counter() - started}


# ---------------------------------------------------------------------------- step 3: FB_min and alpha


def select_schedule(base: TrainConfig, *, seeds: tuple[int, ...], lsfb: int, fp32_mean: float, cost_report: str,
                    gaps: tuple[int, ...], intervals: tuple[float, ...], progress: bool) -> dict[str, Any]:
    """Pick FB_min and the check interval of ABVS from runs on the preliminary seeds (paper: both "experimentally
    determined", Sec. IV-A/B): among the candidates whose mean accuracy is within ``ACCURACY_DROP_PT`` of FP32,
    the one with the lowest Eq. (2) energy relative to fixed ``lsfb``; if none is, the most accurate one."""
    started = time.perf_counter()
    energy = fpmac_energy_model(cost_report or None, timing_fb=lsfb, family=FAMILY)
    candidates = []
    for gap in gaps:
        fb_min = lsfb - gap
        if fb_min < 1:
            continue
        for interval in intervals:
            config = base.replace(techniques={"abvs": abvs_config(fb_min, lsfb, total_epochs=base.optim.epochs,
                                                                  cost_report=cost_report, check_every=interval)})
            runs = [Trainer(config.replace(seed=seed), progress=progress,
                            description=f"prelim abvs fb{fb_min}to{lsfb} every {interval} seed {seed}").fit()
                    for seed in seeds]
            accuracy = statistics.fmean(run.test_accuracy for run in runs)
            ratio = statistics.fmean(eq2_ratio(run.techniques["abvs"]["epochs_per_fb"], lsfb, energy)
                                     for run in runs)
            candidates.append({"fb_min": fb_min, "check_every_epochs": interval,
                               "accuracy": [run.test_accuracy for run in runs], "accuracy_mean": accuracy,
                               "eq2_ratio_vs_fixed_mean": ratio,
                               "within_accuracy": accuracy >= fp32_mean - ACCURACY_DROP_PT})
    passing = [c for c in candidates if c["within_accuracy"]]
    if passing:
        chosen = min(passing, key=lambda c: (c["eq2_ratio_vs_fixed_mean"], -c["accuracy_mean"]))
    elif candidates:
        chosen = max(candidates, key=lambda c: (c["accuracy_mean"], -c["eq2_ratio_vs_fixed_mean"]))
    else:  # lsfb == 1: nothing narrower to start from
        chosen = {"fb_min": lsfb, "check_every_epochs": 1}
    return {"seeds": list(seeds), "rule": f"lowest Eq. (2) energy with mean accuracy >= FP32 - {ACCURACY_DROP_PT} pt",
            "candidates": candidates, "any_within_accuracy": bool(passing), "fb_min": chosen["fb_min"],
            "check_every_epochs": chosen["check_every_epochs"], "seconds": time.perf_counter() - started}


# ---------------------------------------------------------------------------- step 4: arms and metrics


def eq2_ratio(epochs_per_fb: dict[str, int], reference_fb: int, energy) -> float:
    """Eq. (2) energy of an FB trace over that of training every epoch at ``reference_fb`` (same MACs per epoch)."""
    epochs = sum(epochs_per_fb.values())
    return sum(n * energy(int(fb)) for fb, n in epochs_per_fb.items()) / (epochs * energy(reference_fb))


def sensitivity(epochs_per_fb: list[dict[str, int]], *, fb_min: int, fb_max: int, cost_report: str) -> dict:
    """Eq. (2) saving of ABVS vs fixed ``fb_max`` under other energy-model choices (per seed, from the FB traces)."""
    variants = {}
    for timing in sorted({fb_max, ANCHOR_FB}):
        for metric in ("lut", "weighted"):
            model = fpmac_energy_model(cost_report or None, timing_fb=timing, family=FAMILY, area_metric=metric)
            savings = [1 - eq2_ratio(trace, fb_max, model) for trace in epochs_per_fb]
            variants[f"timing_fb={timing}, area={metric}"] = savings
    area = fpmac_energy_model(cost_report or None, timing_fb=fb_max, family=FAMILY).area  # energy ∝ area at V0
    variants["bit-width scaling only (every FB at V0), area=lut"] = [
        1 - eq2_ratio(trace, fb_max, area) for trace in epochs_per_fb]
    return {name: {"per_seed": values, "mean": statistics.fmean(values)} for name, values in variants.items()}


def plot_traces(path: Path, results: dict, arm_names: list[str], lsfb: int, savings: list[float]) -> None:
    """Fig. 5-style accuracy and FB per epoch (first seed), and Fig. 10a-style energy normalised to fixed FB."""

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    from codesign.hw.reports import write_figure_png

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


def run(out_dir: Path, *, seeds: list[int] | None = None, smoke: bool = False, progress: bool = True) -> dict:
    """Train the preliminary runs and the three arms, write results.json, table.md, plot.png and fb_trace.png.

    Runs with one torch thread (restored afterwards): the MLP's tensors are so
    small that intra-op threads only add synchronisation — measured on the
    2-core machine under load, a 10-epoch FB-float run took 1.05 s CPU with
    one thread and 17 s with two.
    """
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return _run(out_dir, seeds=seeds, smoke=smoke, progress=progress)
    finally:
        torch.set_num_threads(threads)


def _run(out_dir: Path, *, seeds: list[int] | None, smoke: bool, progress: bool) -> dict:
    started = time.perf_counter()
    out_dir = check_output_dir(Path(out_dir))
    seeds = list(seeds) if seeds is not None else ([0] if smoke else [0, 1, 2])
    base = base_config(smoke)
    epochs = base.optim.epochs
    notes: list[str] = []

    prelim_seeds = SMOKE_PRELIMINARY_SEEDS if smoke else PRELIMINARY_SEEDS
    gaps = SMOKE_FB_GAPS if smoke else FB_GAPS
    scan = scan_least_sufficient_fb(base, seeds=prelim_seeds,
                                    candidates=SMOKE_SCAN_FBS if smoke else SCAN_FBS, tolerance_pt=TOLERANCE_PT,
                                    progress=progress)
    lsfb = scan["least_sufficient_fb"]
    if lsfb is None:
        lsfb = max(int(fb) for fb in scan["fixed_fb_mean"])
        notes.append(f"no scanned FB reached FP32 accuracy within {TOLERANCE_PT} pt in the preliminary runs; "
                     f"the widest scanned FB ({lsfb}) stands in for the least sufficient FB")
    cost = ensure_cost_report(out_dir / "fpmac_cost",
                              set(range(max(1, lsfb - max(gaps)), lsfb + 1)) | {ANCHOR_FB},
                              allow_synthesis=not smoke, progress=progress)
    report = cost["path"]
    schedule = select_schedule(base, seeds=prelim_seeds, lsfb=lsfb, fp32_mean=scan["fp32_mean"], cost_report=report,
                               gaps=gaps, intervals=SMOKE_CHECK_INTERVALS if smoke else CHECK_INTERVALS,
                               progress=progress)
    fb_min, check_every = schedule["fb_min"], schedule["check_every_epochs"]
    if fb_min == lsfb:
        notes.append("the least sufficient FB is 1, so ABVS has no narrower FB to start from and equals the "
                     "fixed-FB arm")
    elif not schedule["any_within_accuracy"]:
        notes.append(f"no ABVS schedule came within {ACCURACY_DROP_PT} pt of FP32 on the preliminary seeds; the "
                     "most accurate one is used")
    fixed_name, abvs_name = f"fixed_fb{lsfb}", f"abvs_fb{fb_min}to{lsfb}"
    arms = [
        Arm("fp32", base, baseline=True),
        Arm(fixed_name, base.replace(techniques={"abvs": abvs_config(lsfb, lsfb, total_epochs=epochs,
                                                                     cost_report=report)})),
        Arm(abvs_name, base.replace(techniques={"abvs": abvs_config(fb_min, lsfb, total_epochs=epochs,
                                                                    cost_report=report,
                                                                    check_every=check_every)})),
    ]
    arms_started = time.perf_counter()
    results = run_arms(arms, seeds, progress=progress)
    arms_seconds = time.perf_counter() - arms_started
    summaries = summarize(arms, results)

    fp32_runs, fixed_runs, abvs_runs = results["fp32"], results[fixed_name], results[abvs_name]
    eq2_ratios = [a.cost["total"]["compute_pj"] / f.cost["total"]["compute_pj"] for a, f in zip(abvs_runs, fixed_runs)]
    total_ratios = [a.energy_pj / f.energy_pj for a, f in zip(abvs_runs, fixed_runs)]
    savings = [1 - r for r in eq2_ratios]
    drops = [b.test_accuracy - a.test_accuracy for a, b in zip(abvs_runs, fp32_runs)]
    fixed_drops = [b.test_accuracy - f.test_accuracy for f, b in zip(fixed_runs, fp32_runs)]
    abvs_reports = [run.techniques["abvs"] for run in abvs_runs]
    traces = [r["epochs_per_fb"] for r in abvs_reports]
    energy_model = abvs_reports[0]["energy_model"]
    model = fpmac_energy_model(report or None, timing_fb=lsfb, family=FAMILY)
    eq2_from_traces = [eq2_ratio(t, lsfb, model) for t in traces]
    saving_mean, saving_std = mean_std(savings)
    drop_mean, drop_std = mean_std(drops)
    eq2_vs_fp32 = [a.cost["total"]["compute_pj"] / b.cost["total"]["compute_pj"] for a, b in zip(abvs_runs, fp32_runs)]

    per_seed = ", ".join(f"seed {s}: {100 * v:.1f}%" for s, v in zip(seeds, savings))
    targets = [
        Target(text=f"ABVS Eq. (2) energy >= {100 * SAVING_TARGET:.0f}% below fixed-FB training at the least "
                    f"sufficient FB (FB = {lsfb}), mean over seeds",
               met=saving_mean >= SAVING_TARGET,
               measured=f"{100 * saving_mean:.1f}% ± {100 * saving_std:.1f}% ({per_seed})"),
        Target(text=f"ABVS test accuracy <= {ACCURACY_DROP_PT} pt below FP32, mean over seeds",
               met=drop_mean <= ACCURACY_DROP_PT,
               measured=f"{drop_mean:+.2f} ± {drop_std:.2f} pt below FP32 "
                        f"(per seed {', '.join(f'{d:+.2f}' for d in drops)})"),
    ]
    mean_total_saving = 1 - statistics.fmean(total_ratios)
    if drop_mean > ACCURACY_DROP_PT:
        notes.append(
            f"accuracy: on the evaluation seeds the fixed-FB arm at the least sufficient FB is itself "
            f"{statistics.fmean(fixed_drops):.2f} pt below FP32 (it was within {TOLERANCE_PT} pt on the preliminary "
            f"seeds), and ABVS is {statistics.fmean(drops) - statistics.fmean(fixed_drops):.2f} pt below that arm; "
            "one test sample is 0.22 pt, so seed-to-seed spread is of the size of the 0.5 pt budget. A likely "
            "cause (not isolated here): the weights are stored in FB-float, so the early narrow-FB epochs shape "
            "them coarsely at high learning rate, and once FB has risen the decayed learning rate gives updates "
            "below half an FB-ulp, which rounding drops")
    notes += [
        f"least sufficient FB = {lsfb} from preliminary fixed-FB runs on seeds {scan['seeds']} (FP32 mean "
        f"{scan['fp32_mean']:.2f}%, tolerance {TOLERANCE_PT} pt; means by FB: "
        + ", ".join(f"FB{fb} {acc:.2f}%" for fb, acc in scan["fixed_fb_mean"].items()) + "); "
        f"ABVS runs FB {fb_min} -> {lsfb}, a check every {check_every} epochs "
        f"(alpha = {alpha_for_interval(epochs, check_every, fb_min, lsfb):.4g}), epsilon = {EPSILON}; FB_min and "
        f"the interval were chosen on the preliminary seeds ({schedule['rule']}; candidates: "
        + ", ".join(f"FB{c['fb_min']}/every {c['check_every_epochs']}: {c['accuracy_mean']:.2f}%, "
                    f"{100 * (1 - c['eq2_ratio_vs_fixed_mean']):.1f}% saving" for c in schedule["candidates"]) + ")",
        f"energy model: {energy_model['source']}; cost report {cost['status']}; area = LUT cells, delay ∝ logic "
        f"depth, alpha-power supply scaling for the FB = {lsfb} clock at 1.0 V (V_t 0.35 V, a 1.3), "
        "FB = 23 at 1.0 V anchored at Horowitz's FP32 MAC (4.6 pJ)",
        f"the ledger's total energy (MACs + on-chip buffer + DRAM traffic, which Eq. (2) leaves out) is "
        f"{100 * mean_total_saving:.1f}% below the fixed-FB arm: memory traffic dominates this small MLP and "
        "shrinks only with the operand width (sign + exponent + FB bits)",
        "model: MLP 64-128-64-10, not ResNet-8: in development runs a ResNet-8 (batch norm) reached FP32 "
        "accuracy on digits even at FB = 1 (seed 0, 15 epochs: 97.6% vs 97.1%), which leaves ABVS nothing to scale",
        "deviations from the paper: float32 accumulation inside each layer (rounding to FB at layer inputs, "
        "outputs' gradients, weight gradients, weights and momentum, not after every MAC); the quality metric "
        "A_cur is the test accuracy (no separate validation split); cosine learning-rate schedule instead of "
        "the paper's polynomial decay; FPGA (Yosys xc7) area and depth with an alpha-power voltage model "
        "instead of Nangate 45 nm synthesis at each minimum voltage and PrimeTime power",
    ]
    extra = {
        "least_sufficient_fb": lsfb, "fb_min": fb_min, "check_every_epochs": check_every,
        "alpha": alpha_for_interval(epochs, check_every, fb_min, lsfb),
        "preliminary": scan, "schedule_selection": schedule, "cost_report": cost, "energy_model": energy_model,
        "eq2_saving_vs_fixed": {"per_seed": savings, "mean": saving_mean, "std": saving_std},
        "eq2_ratio_vs_fixed_from_fb_traces": eq2_from_traces,
        "total_energy_saving_vs_fixed": {"per_seed": [1 - r for r in total_ratios], "mean": mean_total_saving},
        "eq2_saving_vs_fp32": {"per_seed": [1 - r for r in eq2_vs_fp32], "mean": 1 - statistics.fmean(eq2_vs_fp32)},
        "accuracy_drop_vs_fp32_pt": {"abvs": drops, "fixed": fixed_drops},
        "fb_traces": [r["fb_trace"] for r in abvs_reports], "epochs_per_fb": traces,
        "average_fb": [r["average_fb"] for r in abvs_reports], "checks": [r["checks"] for r in abvs_reports],
        "sensitivity_eq2_saving_vs_fixed": sensitivity(traces, fb_min=fb_min, fb_max=lsfb, cost_report=report),
        "seconds": {"preliminary": scan["seconds"], "cost_report": cost["seconds"],
                    "schedule_selection": schedule["seconds"], "arms": arms_seconds,
                    "total": time.perf_counter() - started},
    }
    settings = {
        "data": base.data.name, "model": "mlp (64-128-64-10)", "epochs": epochs, "optim": base.to_dict()["optim"],
        "preliminary_seeds": scan["seeds"], "scan_fbs": list(SMOKE_SCAN_FBS if smoke else SCAN_FBS),
        "tolerance_pt": TOLERANCE_PT, "fb_gaps": list(gaps), "epsilon": EPSILON,
        "check_intervals": list(SMOKE_CHECK_INTERVALS if smoke else CHECK_INTERVALS), "family": FAMILY,
        "smoke": smoke,
    }
    plot_traces(out_dir / "fb_trace.png", results, [arm.name for arm in arms], lsfb, savings)
    extra["seconds"]["total"] = time.perf_counter() - started
    return write_report(out_dir, name=NAME, title=TITLE, summaries=summaries, claim=CLAIM, targets=targets,
                        seeds=seeds, settings=settings, notes=notes, extra=extra)
