"""Reproduction ``slu``: selective layer update at target skip ratios 20/40/60 % (E²-Train, Sec. 3.2 and 4.3).

Arms (same data, model, epochs, learning-rate schedule and seeds, one run):

* ``fp32`` (baseline): every block for every sample;
* ``slu_20``, ``slu_40``, ``slu_60``: SLU gates on every identity-shortcut
  block, the cost weight alpha steered toward 20, 40 and 60 % of the gated
  blocks' MACs skipped (the skipping ratios of the paper's Table 3).

The model is ResNet-14 (4 of its 6 blocks have identity shortcuts; they
hold about 71 % of the forward MACs), so a skip ratio ``s`` saves at most
about ``0.71 s`` of the work; the gates' own MACs and the pooling are in the
ledger. Measured skip ratios are MAC-weighted over the gated blocks, over
every training step (what the energy follows) and at the final evaluation
(the same hard gates on the test set).
"""

from __future__ import annotations

import dataclasses
import statistics
from pathlib import Path
from typing import Any

from codesign.reproduce.common import (
    Arm,
    Execution,
    PaperClaim,
    ReadmeRow,
    Target,
    mean_std,
    ratio_text,
    run_study,
    study_seeds,
    summarize,
    write_report,
)
from codesign.reproduce.stats import no_significant_loss
from codesign.train.config import DataConfig, ModelConfig, OptimConfig, TrainConfig
from codesign.train.techniques.slu import GATES_MODULE
from codesign.train.techniques.slu import Config as SluConfig
from codesign.train.trainer import TrainResult

NAME = "slu"
TITLE = "SLU (learned per-sample block skipping) vs full training"
TARGET_SKIPS = (0.2, 0.4, 0.6)
# The controller steers the training-average skip ratio; +-5 points is what "at 20 %" means here.
SKIP_TOLERANCE = 0.05
LRS = (0.2, 0.1, 0.05)  # every arm tunes its learning rate over these, on the validation split

CLAIM = PaperClaim(
    text=("SLU alone, ResNet-38 on CIFAR-10 (repeated trials, 95 % CI): energy saving 39.55-40.52 % at top-1 "
          "92.47-92.58 % vs 92.50 % for the baseline (Sec. 4.3); SLU at energy ratio 0.3 is 0.86 pt more accurate "
          "than stochastic depth at 0.5 (Fig. 4). E²-Train (SMD + SLU + PSG), ResNet-74 on CIFAR-10, SLU skipping "
          "20/40/60 %: 92.12/91.84/91.36 % (beta = 0.05) vs 93.52 % for 32-bit SGD, energy savings "
          "84.64/88.72/92.81 % (Table 3)"),
    citation="Wang et al., E²-Train, NeurIPS 2019, Sec. 4.3, Fig. 4 and Table 3",
)


def arm_name(target: float) -> str:
    return f"slu_{round(100 * target)}"


def _settings(smoke: bool) -> dict[str, Any]:
    if smoke:
        return {"data": DataConfig(name="synthetic", synthetic_samples=200),
                "model": ModelConfig(depth=14, width=8), "optim": OptimConfig(epochs=2, batch_size=16)}
    # 9 epochs x 17 batches of 64 (1,078 training images after the validation split) = 153 baseline steps;
    # width 8 so that four tuned arms at eight seeds fit a run of minutes
    return {"data": DataConfig(name="digits"), "model": ModelConfig(depth=14, width=8),
            "optim": OptimConfig(epochs=9, batch_size=64, lr=0.1)}


def build_arms(smoke: bool = False, targets: tuple[float, ...] = TARGET_SKIPS) -> list[Arm]:
    s = _settings(smoke)
    base = TrainConfig(data=s["data"], model=s["model"], optim=s["optim"])
    tune = {"optim.lr": LRS[1:2] if smoke else LRS}  # smoke: one candidate, no trial runs
    arms = [Arm("fp32", base, baseline=True, tune=tune)]
    arms += [Arm(arm_name(t), base.replace(techniques={"slu": SluConfig(target_skip=t)}), tune=tune) for t in targets]
    return arms


def gate_energy_share(run: TrainResult) -> float:
    """Fraction of a run's modelled energy spent in the SLU gates (their MACs, pooling and DRAM)."""
    gates = sum(pj for layer, pj in run.cost["by_layer"].items() if layer.startswith(f"{GATES_MODULE}."))
    return gates / run.energy_pj


def skip_measurements(runs: list[TrainResult]) -> dict[str, Any]:
    reports = [run.techniques["slu"] for run in runs]
    train = [r["measured_train_skip_ratio"] for r in reports]
    evaluation = [r["measured_eval_skip_ratio"] for r in reports]
    return {
        "target_skip": reports[0]["target_skip"],
        "train_skip_per_seed": train, "train_skip_mean": mean_std(train)[0], "train_skip_std": mean_std(train)[1],
        "eval_skip_per_seed": evaluation, "eval_skip_mean": mean_std(evaluation)[0],
        "eval_skip_std": mean_std(evaluation)[1],
        "final_alpha_per_seed": [r["alpha"] for r in reports],
        "per_block_per_seed": [r["per_block"] for r in reports],
        "gate_energy_share_mean": statistics.fmean(gate_energy_share(run) for run in runs),
    }


def run(out_dir: Path, *, seeds: list[int] | None = None, smoke: bool = False, progress: bool = True,
        execution: Execution = Execution()) -> dict:
    seeds = study_seeds(seeds, smoke)
    arms = build_arms(smoke)
    results, tuning = run_study(arms, seeds, out_dir, execution=dataclasses.replace(execution, progress=progress))
    summaries = summarize(arms, results, tuning)
    by_name = {s.name: s for s in summaries}
    skips = {arm.name: skip_measurements(results[arm.name]) for arm in arms if not arm.baseline}

    targets, notes = [], []
    for name, skip in skips.items():
        summary = by_name[name]
        t = skip["target_skip"]
        tracked = abs(skip["train_skip_mean"] - t) <= SKIP_TOLERANCE
        difference = summary.interval("accuracy_difference")
        kept = no_significant_loss(difference)
        targets.append(Target(
            text=(f"SLU at {100 * t:.0f} % skipping: measured training skip ratio within ±{100 * SKIP_TOLERANCE:.0f} "
                  "points and no significant accuracy loss (95 % interval of the paired difference reaches 0)"),
            met=tracked and kept,
            measured=(f"skip ratio train {skip['train_skip_mean']:.3f} ± {skip['train_skip_std']:.3f}, final eval "
                      f"{skip['eval_skip_mean']:.3f} ± {skip['eval_skip_std']:.3f}; Δ accuracy {difference.text()} pt "
                      f"({summary.verdict}); energy ratio {ratio_text(summary.interval('energy_ratio'))}"),
        ))
        if not tracked:
            notes.append(f"{name}: the controller left the training skip ratio at {skip['train_skip_mean']:.3f} "
                         f"against {t:.2f} (per seed {', '.join(f'{v:.3f}' for v in skip['train_skip_per_seed'])})")
        if not kept:
            notes.append(f"{name}: {summary.verdict} against the same-seed baseline")
    notes.append("gates' share of the modelled energy (their MACs, pooling adds and the gate layers' DRAM traffic): "
                 + ", ".join(f"{name} {100 * skip['gate_energy_share_mean']:.3f} %" for name, skip in skips.items()))
    notes.append("skipped samples never enter a block (sub-batch via index_select); BatchNorm in a block sees only "
                 "the samples that run it; evaluation uses the same hard gates")
    if smoke:
        notes.append("smoke budget (synthetic data, 2 epochs, 1 seed): the pipeline is checked, not the claim")
    config = arms[0].config
    settings = {"model": config.to_dict()["model"], "data": config.to_dict()["data"],
                "optim": config.to_dict()["optim"],
                "slu": {arm.name: arm.config.to_dict()["techniques"]["slu"] for arm in arms if not arm.baseline},
                "smoke": smoke}
    title = f"{TITLE}, ResNet-{config.model.depth} on {config.data.name}"
    readme = ReadmeRow(
        reproduction=f"`slu` (ResNet-{config.model.depth})",
        target="skip " + "/".join(f"{100 * t:.0f}" for t in TARGET_SKIPS) + " % at no accuracy loss",
        measured="; ".join(
            f"{name}: skip {skips[name]['train_skip_mean']:.2f}, energy ratio "
            f"{ratio_text(by_name[name].interval('energy_ratio'))}, Δ accuracy "
            f"{by_name[name].interval('accuracy_difference').text()} pt" for name in skips),
        verdict=" / ".join(f"{name} {'met' if target.met else '**not met**'}" for name, target in zip(skips, targets)))
    return write_report(out_dir, name=NAME, title=title, summaries=summaries, claim=CLAIM, targets=targets,
                        seeds=seeds, settings=settings, notes=notes, extra={"skip": skips}, tuning=tuning,
                        readme=readme)
