"""Reproduction ``e2train``: SMD + SLU + PSG together against a same-run FP32 baseline (Wang et al., NeurIPS 2019).

Arms, a ladder that adds one technique at a time, trained in one run on the
same data (20 % of the training split held out for validation), model and
seeds, so that the saving splits into what each step adds:

* ``fp32``: the baseline, float32 throughout, 9 epochs (ResNet-14 of width 8);
* ``fixed``: 8-bit activations and weights, 16-bit gradients (PSG's
  precision, no prediction), ordinary SGD;
* ``fixed+smd``: plus SMD (p = 0.5 over 4/3 of the epochs, the paper's
  operating point: 2/3 of the baseline's iterations);
* ``fixed+smd+slu``: plus SLU (target skip ratio 40 % of the gated blocks'
  MACs; gates in float32, under 1 % of the MACs);
* ``e2train``: plus PSG's sign prediction (4/10-bit MSB predictors,
  beta = 0.05), the paper's full method;
* ``e2train+swa``: the full method with stochastic weight averaging over
  the last quarter of its epochs (3 of 12), as the paper trains every PSG
  run (Sec. 4.1, "we also employed SWA when PSG is adopted", SWALP [64]).
  The mechanism is PSG's own (``psg.Config(swa=True)``, the one of the
  ``psg`` reproduction's PSG+SWA arm): the float32 weights averaged once
  per epoch, BatchNorm statistics recomputed in one counted forward pass
  over the training set (through SLU's gates), the averaged model
  evaluated. It is judged against the same target as ``e2train`` and
  compared with it per seed; it is not a rung of the ladder.

Every arm tunes its learning rate with the same budget (three trial runs on
the validation split); the SGD arms over 0.2..0.05, the sign-gradient arms
over 1e-3..1e-4 (SLU's gates keep the baseline's 0.1: they take ordinary
gradients). PSG attaches before SLU creates its gates, so the gates stay in
float32 and are priced as float32 MACs.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from codesign.reproduce.arms import Arm
from codesign.reproduce.common import Execution
from codesign.reproduce.cost import E2TRAIN_ACCOUNTING
from codesign.reproduce.protocol import study_seeds
from codesign.reproduce.replication import PaperReference
from codesign.reproduce.report import PaperClaim, ReadmeRow, Target, write_report
from codesign.reproduce.stats import both_intervals_text, bootstrap_interval
from codesign.reproduce.study import run_study
from codesign.reproduce.summary import committed_arm, summarize
from codesign.reproduce.texts import energy_text, percent_text, saving_text, tost_text
from codesign.train.config import DataConfig, ModelConfig, OptimConfig, TrainConfig
from codesign.train.techniques.psg import Config as PsgConfig
from codesign.train.techniques.slu import Config as SluConfig
from codesign.train.techniques.smd import Config as SmdConfig

NAME = "e2train"
TITLE = "E²-Train (SMD + SLU + PSG) vs FP32, ResNet-14 on digits"
TARGET_SAVING = 0.80
# Equivalence margin (points), fixed before the run: at its >80 % savings the paper loses 1.40 pt (84.6 % saving,
# SLU 20 %) and 1.68 pt (88.7 %) against 32-bit SGD (Table 3), and "about 1.2 %" at >60 % (abstract); 1.5 pt sits
# between the two Table 3 points around the 80 % target.
TARGET_DROP_PT = 1.5
PAPER_REFERENCE = PaperReference(accuracy_pct=93.52, citation=(  # the margin's reference (replication)
    "E²-Train (NeurIPS 2019) Table 2, 32-bit SGD, ResNet-74 on CIFAR-10: the reference of Table 3's losses"))

CLAIM = PaperClaim(
    text=("ResNet-74 on CIFAR-10: >90% and >60% training-energy savings at top-1 accuracy losses of about 2% and "
          "1.2%; ResNet-110 on CIFAR-100: >84% saving without degrading accuracy"),
    citation="Wang et al., E2-Train: Training State-of-the-art CNNs with Over 80% Less Energy, NeurIPS 2019, abstract and Sec. 4",
)


def _settings(smoke: bool) -> dict[str, Any]:
    if smoke:
        return {"data": DataConfig(name="synthetic", synthetic_samples=200), "model": ModelConfig(depth=14, width=8),
                "optim": OptimConfig(epochs=3, batch_size=16)}
    # width 8 and 9 epochs (17 batches of 64 each): five tuned arms at eight seeds fit a run of minutes
    return {"data": DataConfig(name="digits"), "model": ModelConfig(depth=14, width=8),
            "optim": OptimConfig(epochs=9, batch_size=64, lr=0.1)}


SGD_LRS = (0.2, 0.1, 0.05)
SIGN_LRS = (1e-3, 3e-4, 1e-4)
LADDER = ("fp32", "fixed", "fixed+smd", "fixed+smd+slu", "e2train")
STEP_NAMES = ("quantisation", "SMD", "SLU", "prediction")  # what each rung of the ladder adds
SWA_ARM = "e2train+swa"
JUDGED = ("e2train", SWA_ARM)  # the arms held to the target


def build_arms(smoke: bool = False) -> list[Arm]:
    s = _settings(smoke)
    base = TrainConfig(data=s["data"], model=s["model"], optim=s["optim"])
    longer = dataclasses.replace(s["optim"], epochs=s["optim"].epochs * 4 // 3)
    fixed = {"psg": PsgConfig(predict=False)}
    smd = {"smd": SmdConfig(p=0.5)}
    slu = {"slu": SluConfig(target_skip=0.4, gate_lr=0.1)}
    sgd, sign = ({"optim.lr": SGD_LRS[1:2]}, {"optim.lr": SIGN_LRS[1:2]}) if smoke else \
        ({"optim.lr": SGD_LRS}, {"optim.lr": SIGN_LRS})
    return [
        Arm("fp32", base, baseline=True, tune=sgd),
        Arm("fixed", base.replace(techniques=fixed), tune=sgd),
        Arm("fixed+smd", base.replace(techniques={**fixed, **smd}, optim=longer), tune=sgd),
        Arm("fixed+smd+slu", base.replace(techniques={**fixed, **smd, **slu}, optim=longer), tune=sgd),
        Arm("e2train", base.replace(techniques={"psg": PsgConfig(beta=0.05), **smd, **slu}, optim=longer), tune=sign),
        Arm(SWA_ARM, base.replace(techniques={"psg": PsgConfig(beta=0.05, swa=True, swa_epochs=longer.epochs // 4),
                                              **smd, **slu}, optim=longer), tune=sign),
    ]


def swa_comparison(runs: dict[str, list]) -> dict[str, Any]:
    """e2train+swa minus e2train, test accuracy per seed (points), with both 95 % intervals; SWA's own report."""
    differences = [a.test_accuracy - b.test_accuracy for a, b in zip(runs[SWA_ARM], runs["e2train"])]
    swa = [run.techniques["psg"]["swa"] for run in runs[SWA_ARM]]
    return {"differences": differences, "text": both_intervals_text(differences, unit=" pt"),
            "last_iterate_per_seed": [s["test_accuracy_last_iterate"] for s in swa],
            "averaged_epochs": swa[0]["averaged_epochs"]}


def target_for(summary) -> Target:
    ratio, difference = summary.interval("energy_ratio"), summary.interval("accuracy_difference")
    return Target(
        text=(f"{summary.name}: >= {TARGET_SAVING:.0%} modelled energy saving (ledger, 95 % interval) with test "
              f"accuracy equivalent to FP32's within ±{TARGET_DROP_PT:g} pt (TOST)"),
        met=1 - ratio.high >= TARGET_SAVING and bool(summary.accuracy_tost["equivalent"]),
        measured=(f"saving {saving_text(ratio)} (ledger; paper's computational energy saving "
                  f"{saving_text(summary.interval('paper_ratio'))}), Δ accuracy {difference.text()} pt "
                  f"({summary.verdict})"))


def energy_breakdown(summaries) -> dict[str, dict]:
    """Per run, the charged ledger energy each rung removes, as a fraction of the baseline's; the four parts add up
    to the saving."""
    energy = {s.name: [row["energy_pj"] for row in s.per_seed] for s in summaries if s.name in LADDER}
    base = energy["fp32"]
    out = {}
    for step, (before, after) in zip(STEP_NAMES, zip(LADDER[:-1], LADDER[1:])):
        out[step] = bootstrap_interval([(b - a) / e for b, a, e in zip(energy[before], energy[after], base)]).as_dict()
    return out



def run(out_dir: Path, *, seeds: list[int] | None = None, smoke: bool = False, progress: bool = True,
        execution: Execution = Execution()) -> dict:
    seeds = study_seeds(seeds, smoke)
    arms = build_arms(smoke)
    results, tuning = run_study(arms, seeds, out_dir, execution=dataclasses.replace(execution, progress=progress))
    summaries = summarize(arms, results, tuning, margin_pt=TARGET_DROP_PT, paper=E2TRAIN_ACCOUNTING)
    main = next(s for s in summaries if s.name == "e2train")
    ratio, difference = main.interval("energy_ratio"), main.interval("accuracy_difference")
    targets = [target_for(s) for name in JUDGED for s in summaries if s.name == name]
    swa = swa_comparison(results)
    breakdown = energy_breakdown(summaries)
    skip = [run.techniques["slu"]["measured_train_skip_ratio"] for run in results["e2train"]]
    smd = [run.skipped_steps / run.steps for run in results["e2train"]]
    notes = [f"measured SMD drop rate per seed {', '.join(f'{v:.3f}' for v in smd)}; "
             f"SLU train skip ratio per seed {', '.join(f'{v:.3f}' for v in skip)}",
             "energy saving by rung (fraction of the baseline's energy, per seed): "
             + "; ".join(f"{step} {percent_text(interval)}" for step, interval in breakdown.items()),
             f"{SWA_ARM} − e2train per seed: {swa['text']} (SWA over the last {swa['averaged_epochs']} epochs; "
             f"the SWA arm's last iterate averaged "
             f"{sum(swa['last_iterate_per_seed']) / len(swa['last_iterate_per_seed']):.2f}%)"]
    if smoke:
        notes.append("smoke run: tiny synthetic budget, numbers mean nothing")
    readme = ReadmeRow(
        reproduction="`e2train` (SMD+SLU+PSG, ResNet-14; ladder fp32 → fixed → +SMD → +SLU → +PSG; +SWA)",
        target=f">= {TARGET_SAVING:.0%} saving, accuracy equivalent within ±{TARGET_DROP_PT:g} pt (Table 3)",
        measured=(f"{energy_text(main)}; ledger saving {saving_text(ratio)} = "
                  + " + ".join(f"{step} {100 * i['mean']:.1f} %" for step, i in breakdown.items())
                  + f"; Δ accuracy {difference.text()} pt, {tost_text(main)}; {SWA_ARM}: {targets[1].measured}, "
                    f"− e2train {swa['text']}"),
        verdict=" / ".join(f"{t.text.split(':')[0]} {'met' if t.met else '**not met**'}" for t in targets))
    return write_report(out_dir, name=NAME, title=TITLE, summaries=summaries, claim=CLAIM, targets=targets,
                        seeds=seeds, settings={"smoke": smoke, "arms": [a.config.to_dict() for a in arms],
                                               "tuning_grids": {a.name: {k: list(v) for k, v in a.tune.items()}
                                                                for a in arms}},
                        notes=notes, extra={"smd_drop_rate": smd, "slu_train_skip": skip,
                                            "energy_breakdown": breakdown, "swa": swa}, tuning=tuning,
                        readme=readme)


def headline(payload: Mapping[str, Any]) -> str:
    """The results table's figure: the full method's ledger energy saving and Δ accuracy (points) against FP32."""
    arm = committed_arm(payload, "e2train")
    return (f"e2train: ledger saving {saving_text(arm.interval('energy_ratio'))}, Δacc "
            f"{arm.interval('accuracy_difference').text()} pt")
