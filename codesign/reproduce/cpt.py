"""Reproduction ``cpt``: cyclic precision training against static 8-bit fixed point (Fu et al., ICLR 2021, Table 2).

Arms, all trained in one run on the same data, model, epochs, learning-rate
schedule and seeds:

* ``fp32``: float32 everywhere (the ``summarize`` baseline, so that the table
  also shows what fixed point saves against float);
* ``static8``: fixed point, weights and activations 8 bits, gradients 8 bits
  ("FW 8 / BW 8"): the same CPT code with ``B_min = B_max = 8``, hence the same
  quantiser;
* ``cpt``: CPT as the issue specifies it, FW ``B_min``-8 / BW 8 with the paper's
  ``ceil`` schedule, ``B_min`` picked by the precision range test in epoch 0;
* ``cpt_rint``: the same, with the schedule rounded as the authors' code does
  (``np.rint``), which is where Table 2's BitOPs come from.

The issue's target compares CPT with ``static8``, not with the ``summarize``
baseline, so those ratios are computed here, per seed, and written to
``extra["vs_static8"]`` and to the target's ``measured``.
"""

from __future__ import annotations

import dataclasses
import statistics
import time
from pathlib import Path
from typing import Any

from codesign.reproduce import check_output_dir
from codesign.reproduce.common import Arm, PaperClaim, Target, mean_std, run_arms, summarize, write_report
from codesign.train.config import DataConfig, ModelConfig, OptimConfig, TrainConfig
from codesign.train.techniques.cpt import Config as CptConfig
from codesign.train.techniques.cpt import cyclic_bits
from codesign.train.trainer import TrainResult

NAME = "cpt"
TITLE = "CPT (FW B_min-8 / BW 8) vs static 8-bit, ResNet-8 on digits"
TARGET_RATIO = 0.65
STATIC_ARM = "static8"
CPT_ARMS = ("cpt", "cpt_rint")

CLAIM = PaperClaim(
    text=("ResNet-74, CPT FW 3-8 / BW 8 vs the best static FW 8 / BW 8 baseline (SBM): 1.68e8 vs 2.67e8 GBitOPs "
          "(0.63x, -37.1 %) at 72.35 % vs 71.44 % on CIFAR-100 (+0.91 pt) and 93.23 % vs 92.57 % on CIFAR-10 "
          "(+0.66 pt); ResNet-164: 3.8e8 vs 6.04e8 GBitOPs (-37.1 %), MobileNetV2 (FW 4-8): -30.2 %"),
    citation="Fu et al., CPT: Efficient Deep Neural Network Training via Cyclic Precision, ICLR 2021, Table 2",
)


def _settings(smoke: bool) -> dict[str, Any]:
    if smoke:
        # 150 training samples / 10 = 15 steps per epoch: room for the 7 candidate widths x 2 steps in epoch 0
        return {"data": DataConfig(name="synthetic", synthetic_samples=200),
                "model": ModelConfig(name="mlp", hidden=(32,)), "optim": OptimConfig(epochs=2, batch_size=10),
                "cycles": 2, "range_test_steps": 2, "range_test_samples": 32}
    # 30 epochs x 22 steps = 660 steps; N = 6 cycles of 110 steps = 5 epochs each, the paper's 160 epochs / 32
    return {"data": DataConfig(name="digits"), "model": ModelConfig(depth=8, width=16),
            "optim": OptimConfig(epochs=30, batch_size=64, lr=0.1), "cycles": 6, "range_test_steps": 3,
            "range_test_samples": 128}


def build_arms(smoke: bool = False) -> list[Arm]:
    s = _settings(smoke)
    base = TrainConfig(data=s["data"], model=s["model"], optim=s["optim"])
    cpt = CptConfig(max_bits=8, grad_bits=8, cycles=s["cycles"], range_test=True, range_test_start_bits=2,
                    range_test_steps=s["range_test_steps"], range_test_samples=s["range_test_samples"],
                    range_test_threshold=10.0)
    return [
        Arm("fp32", base, baseline=True),
        Arm(STATIC_ARM, base.replace(techniques={"cpt": CptConfig(min_bits=8, max_bits=8, grad_bits=8)})),
        Arm("cpt", base.replace(techniques={"cpt": cpt})),
        Arm("cpt_rint", base.replace(techniques={"cpt": dataclasses.replace(cpt, schedule_rounding="rint")})),
    ]


def _versus_static(results: dict[str, list[TrainResult]]) -> dict[str, Any]:
    """Per-seed BitOPs/energy ratios and accuracy differences of each CPT arm against the same-seed static8 run."""
    static = results[STATIC_ARM]
    out = {}
    for arm in CPT_ARMS:
        runs = results[arm]
        bitops = [run.bitops / base.bitops for run, base in zip(runs, static)]
        energy = [run.energy_pj / base.energy_pj for run, base in zip(runs, static)]
        delta = [run.test_accuracy - base.test_accuracy for run, base in zip(runs, static)]
        (bitops_mean, bitops_std), (energy_mean, energy_std) = mean_std(bitops), mean_std(energy)
        out[arm] = {
            "seeds": [run.config["seed"] for run in runs], "bitops_ratio_per_seed": bitops,
            "bitops_ratio_mean": bitops_mean, "bitops_ratio_std": bitops_std, "energy_ratio_per_seed": energy,
            "energy_ratio_mean": energy_mean, "energy_ratio_std": energy_std,
            "accuracy_minus_static_per_seed": delta, "accuracy_minus_static_mean": statistics.fmean(delta),
            "accuracy_mean": mean_std([run.test_accuracy for run in runs])[0],
            "accuracy_std": mean_std([run.test_accuracy for run in runs])[1],
        }
    return out


def _range_tests(results: dict[str, list[TrainResult]]) -> dict[str, list[dict[str, Any]]]:
    """What the precision range test measured and picked, per arm and seed, and what it cost."""
    out: dict[str, list[dict[str, Any]]] = {}
    for arm in CPT_ARMS:
        rows = []
        for run in results[arm]:
            report = run.techniques["cpt"]
            test = report["range_test"]
            rows.append({
                "seed": run.config["seed"], "min_bits": report["min_bits"], "crossed": test["crossed"],
                "candidates_tried": test["candidates_tried"], "differences_pt": test["differences"],
                "held_forward_macs": test["held_forward_macs"],
                "held_share_of_run_macs": test["held_forward_macs"] / run.cost["total"]["macs"],
                "held_share_of_run_bitops": test["held_forward_bitops"] / run.bitops,
                "mean_forward_bits": report["mean_forward_bits"],
                "steps_by_forward_bits": report["steps_by_forward_bits"],
            })
        out[arm] = rows
    return out


def schedule_estimate(min_bits: int, rounding: str, *, max_bits: int = 8, grad_bits: int = 8, steps: int = 6000) -> float:
    """BitOPs of CPT over static ``max_bits`` from the schedule alone: (E[b^2] + 2 g E[b]) / (3 max^2), one cycle."""
    widths = [cyclic_bits(t, steps, 1, min_bits, max_bits, rounding=rounding) for t in range(steps)]
    mean_b, mean_b2 = statistics.fmean(widths), statistics.fmean(b * b for b in widths)
    return (mean_b2 + 2 * grad_bits * mean_b) / (3 * max_bits * max_bits)


def _fmt(values: list[float], digits: int = 3) -> str:
    return ", ".join(f"{v:.{digits}f}" for v in values)


def run(out_dir: Path, *, seeds: list[int] | None = None, smoke: bool = False, progress: bool = True) -> dict:
    out_dir = check_output_dir(out_dir)
    seeds = list(seeds) if seeds else ([0] if smoke else [0, 1, 2])
    arms = build_arms(smoke)
    started = time.perf_counter()
    results = run_arms(arms, seeds, progress=progress)
    wall = time.perf_counter() - started
    summaries = summarize(arms, results)
    by_name = {s.name: s for s in summaries}
    versus = _versus_static(results)
    range_tests = _range_tests(results)

    cpt, static = versus["cpt"], by_name[STATIC_ARM]
    met = cpt["bitops_ratio_mean"] <= TARGET_RATIO and by_name["cpt"].accuracy_mean >= static.accuracy_mean
    measured = (f"cpt (ceil schedule): BitOPs {cpt['bitops_ratio_mean']:.3f} ± {cpt['bitops_ratio_std']:.3f} x static8 "
                f"(per seed {_fmt(cpt['bitops_ratio_per_seed'])}), accuracy {by_name['cpt'].accuracy_mean:.2f} ± "
                f"{by_name['cpt'].accuracy_std:.2f} % vs static8 {static.accuracy_mean:.2f} ± {static.accuracy_std:.2f} %")
    target = Target(text=f"BitOPs <= {TARGET_RATIO}x static 8-bit at accuracy >= static (CPT FW B_min-8 / BW 8)",
                    met=met, measured=measured)

    rint = versus["cpt_rint"]
    epochs = arms[0].config.optim.epochs
    steps = results["cpt"][0].steps
    cycles = arms[2].config.techniques["cpt"].cycles
    picked = sorted({row["min_bits"] for rows in range_tests.values() for row in rows})
    held_share = max(row["held_share_of_run_macs"] for rows in range_tests.values() for row in rows)
    estimates = {(b, r): schedule_estimate(b, r) for b in (3, 4) for r in ("ceil", "rint")}
    notes = [
        (f"The issue's schedule rounds up (ceil, the paper's equation). With B_min = 3 that spends 6.0 bits on "
         f"average in the forward pass, and with 8-bit gradients multiplying those operands in both backward phases "
         f"the schedule alone gives (E[b^2] + 16 E[b]) / 192 = {estimates[3, 'ceil']:.3f}x static 8-bit BitOPs "
         f"(B_min = 4: {estimates[4, 'ceil']:.3f}x), above the 0.65 target before any training is run. The authors' "
         f"code rounds to nearest (np.rint): {estimates[3, 'rint']:.3f}x (B_min = 4: {estimates[4, 'rint']:.3f}x); "
         f"the paper's Table 2 has 1.68e8 / 2.67e8 = 0.629 for FW 3-8. Measured here: cpt (ceil) "
         f"{cpt['bitops_ratio_mean']:.3f}x, cpt_rint {rint['bitops_ratio_mean']:.3f} ± {rint['bitops_ratio_std']:.3f}x "
         f"(per seed {_fmt(rint['bitops_ratio_per_seed'])}) at {by_name['cpt_rint'].accuracy_mean:.2f} ± "
         f"{by_name['cpt_rint'].accuracy_std:.2f} % accuracy. The target is judged on the ceil arm, as specified."),
        (f"Precision range test (epoch 0): widths 2, 3, ... 8 bits each train {arms[2].config.techniques['cpt'].range_test_steps} "
         f"steps; a held batch of {arms[2].config.techniques['cpt'].range_test_samples} training images is classified "
         f"(batch-statistics BatchNorm) at that width before and after; B_min is the first width whose accuracy gain "
         f"exceeds 10 pt. Picked B_min: {picked} bits over all seeds and both CPT arms; the held-batch forwards are "
         f"in the ledger and cost at most {100 * held_share:.2f} % of a run's MACs."),
        ("Number format: signed fixed point with a power-of-two per-tensor scale chosen from max|x| at every call "
         "(FixedQuantizer with dynamic frac_bits), round to nearest even, for the weights and input activations of "
         "every conv and linear layer (stem and head included) and for their output gradients; products are "
         "accumulated exactly. The paper's code uses a min/max range scale instead; both static8 and CPT use the "
         "same quantiser here. BatchNorm, residual additions and the optimiser stay in float32."),
        ("Test accuracy of the fixed-point arms is measured at 8 bits (B_max, the static counterpart's width)."
         + ("" if smoke else " The digits test set has 450 images: one image is 0.22 pt, and differences of a few "
                             "tenths are within seed noise.")),
        (f"Modelled energy (Horowitz 45 nm, DRAM and buffer traffic included) against static8: cpt "
         f"{cpt['energy_ratio_mean']:.3f} ± {cpt['energy_ratio_std']:.3f}x, cpt_rint {rint['energy_ratio_mean']:.3f} ± "
         f"{rint['energy_ratio_std']:.3f}x; BitOPs only count the multipliers, which is the paper's metric."),
        (f"Scale: ResNet-8 on 8x8 digits for {epochs} epochs ({steps} steps, cosine learning rate) instead of "
         f"ResNet-74 on CIFAR for 160 epochs; N = {cycles} cycles of {epochs / cycles:g} epochs each (the paper: "
         f"160 epochs / 32 cycles = 5 epochs per cycle)."),
        (f"The table's ratios are against fp32 (the summarize baseline); the ratios against static8 asked for by "
         f"the target are computed per seed in extra.vs_static8. Wall time of all arms: {wall:.0f} s."),
    ]
    if smoke:
        notes.append("Smoke run: an MLP on synthetic data, 2 epochs, one seed; the numbers check the pipeline, "
                     "not the paper.")
    settings = {
        "smoke": smoke, **{key: value for key, value in arms[0].config.to_dict().items() if key != "seed"},
        "arms": {arm.name: arm.config.to_dict()["techniques"] for arm in arms}, "wall_seconds": wall,
    }
    extra = {
        "vs_static8": versus, "range_test": range_tests,
        "schedule_estimate_vs_static8": {f"B_min={b},{r}": v for (b, r), v in estimates.items()},
        "target_ratio": TARGET_RATIO,
    }
    return write_report(out_dir, name=NAME, title=TITLE, summaries=summaries, claim=CLAIM, targets=[target],
                        seeds=seeds, settings=settings, cost_axis="bitops", notes=notes, extra=extra)


__all__ = ["build_arms", "run", "schedule_estimate"]
