"""Reproduction ``e2train``: SMD + SLU + PSG together against a same-run FP32 baseline (Wang et al., NeurIPS 2019).

Arms, trained in one run on the same data, model, learning-rate schedule and seeds:

* ``fp32``: the baseline, float32 throughout, 15 epochs;
* ``e2train``: SMD (p = 0.5, over 4/3 of the baseline's epochs, the paper's
  SMD operating point, so that SMD alone does 2/3 of the baseline's
  iterations), SLU (target skip ratio 40 % of the gated blocks' MACs; its gates keep the
  baseline's peak LR 0.1, since they take ordinary gradients) and
  PSG (8-bit activations and weights, 16-bit gradients, MSB-slice sign
  predictor with beta = 0.05), at the PSG reproduction's learning rate;
* ``e2train_same_epochs``: the same combination on exactly the baseline's
  epochs, to show what the extra SMD epochs buy.

The three techniques compose through the trainer's hooks: SMD decides
before any compute, PSG sets every counted layer's precision and weight
gradient, SLU gates residual blocks. PSG attaches before SLU creates its
gates, so the gates (under 1 % of the MACs) stay in float32 and are priced
as float32 MACs.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from codesign.reproduce import check_output_dir
from codesign.reproduce.common import Arm, PaperClaim, Target, run_arms, summarize, write_report
from codesign.reproduce.psg import PSG_LR
from codesign.train.config import DataConfig, ModelConfig, OptimConfig, TrainConfig
from codesign.train.techniques.psg import Config as PsgConfig
from codesign.train.techniques.slu import Config as SluConfig
from codesign.train.techniques.smd import Config as SmdConfig

NAME = "e2train"
TITLE = "E²-Train (SMD + SLU + PSG) vs FP32, ResNet-14 on digits"
TARGET_SAVING = 0.80
TARGET_DROP_PT = 1.5

CLAIM = PaperClaim(
    text=("ResNet-74 on CIFAR-10: >90% and >60% training-energy savings at top-1 accuracy losses of about 2% and "
          "1.2%; ResNet-110 on CIFAR-100: >84% saving without degrading accuracy"),
    citation="Wang et al., E2-Train: Training State-of-the-art CNNs with Over 80% Less Energy, NeurIPS 2019, abstract and Sec. 4",
)


def _settings(smoke: bool) -> dict[str, Any]:
    if smoke:
        return {"data": DataConfig(name="synthetic", synthetic_samples=200), "model": ModelConfig(depth=14, width=8),
                "optim": OptimConfig(epochs=3, batch_size=16)}
    return {"data": DataConfig(name="digits"), "model": ModelConfig(depth=14, width=16),
            "optim": OptimConfig(epochs=15, batch_size=64, lr=0.1)}


def build_arms(smoke: bool = False) -> list[Arm]:
    s = _settings(smoke)
    base = TrainConfig(data=s["data"], model=s["model"], optim=s["optim"])
    techniques = {"smd": SmdConfig(p=0.5), "slu": SluConfig(target_skip=0.4, gate_lr=0.1), "psg": PsgConfig(beta=0.05)}
    # sign updates move every weight by the LR: PSG's arms use the PSG reproduction's LR (see its notes)
    sign_optim = dataclasses.replace(s["optim"], lr=PSG_LR)
    combined = base.replace(techniques=techniques, optim=sign_optim)
    longer = dataclasses.replace(sign_optim, epochs=s["optim"].epochs * 4 // 3)
    return [
        Arm("fp32", base, baseline=True),
        Arm("e2train", combined.replace(optim=longer)),
        Arm("e2train_same_epochs", combined),
    ]


def run(out_dir: Path, *, seeds: list[int] | None = None, smoke: bool = False, progress: bool = True) -> dict:
    out_dir = check_output_dir(out_dir)
    seeds = [0] if smoke and seeds is None else (seeds or [0, 1, 2])
    arms = build_arms(smoke)
    results = run_arms(arms, seeds, progress=progress)
    summaries = summarize(arms, results)
    main = next(s for s in summaries if s.name == "e2train")
    saving = 1 - main.energy_ratio_mean
    met = saving >= TARGET_SAVING and main.accuracy_drop_mean <= TARGET_DROP_PT
    target = Target(
        text=f">= {TARGET_SAVING:.0%} modelled energy saving at <= {TARGET_DROP_PT} pt accuracy drop vs FP32",
        met=met, measured=f"{saving:.1%} saving at {main.accuracy_drop_mean:+.2f} pt drop (arm e2train)",
    )
    skip = [run.techniques["slu"]["measured_train_skip_ratio"] for run in results["e2train"]]
    smd = [run.skipped_steps / run.steps for run in results["e2train"]]
    notes = [f"measured SMD drop rate per seed {', '.join(f'{v:.3f}' for v in smd)}; "
             f"SLU train skip ratio per seed {', '.join(f'{v:.3f}' for v in skip)}"]
    if smoke:
        notes.append("smoke run: tiny synthetic budget, numbers mean nothing")
    return write_report(out_dir, name=NAME, title=TITLE, summaries=summaries, claim=CLAIM, targets=[target],
                        seeds=seeds, settings={"smoke": smoke, "arms": [a.config.to_dict() for a in arms]},
                        notes=notes, extra={"smd_drop_rate": smd, "slu_train_skip": skip})
