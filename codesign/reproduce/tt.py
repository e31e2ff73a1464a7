"""Reproduction ``tt``: rank-adaptive, low-precision tensor-train training of an MLP on digits.

Paper: "On-FPGA Training with Ultra Memory Reduction: A Low-Precision Tensor
Method" (2021), paper 003: Sec. 3 (rank-adaptive TT model, BinaryConnect
with 4-bit cores, 8-bit activations and biases, 16-bit gradients, automatic
power-of-two scales), Sec. 5 / Table 1 (292x parameter-memory reduction).

Arms, trained in one run on the same data split, epochs, batch size, cosine
schedule, optimiser (Adam) and seeds:

* ``fp32``: the dense 64-256-256-10 MLP in float32 (the baseline);
* ``tt-lowp-prior``: the same MLP with every layer a TT layer, low-precision
  training with the low-rank prior and rank pruning (the paper's proposal,
  "Fixed, w/ prior");
* ``tt-lowp-fixed-rank``: the same TT layers and precision, no prior, the
  ranks stay at their initial value (the paper's "Fixed, w/o prior").

Tuning reads a validation split carved (stratified, 20 %) from the training
split, never the test split: each of the two tuned arms gets the same number
of trial runs at the full epoch budget on the rest of the training split.
The baseline picks its learning rate; the TT arm picks learning rate and
prior weight, preferring trials that meet the memory target. The chosen
settings are then trained on the whole training split for every seed and
evaluated once on the test split. The fixed-rank ablation reuses the TT
arm's learning rate.

Memory counts the bits of the parameters the trained model computes with:
the dense baseline's weights and biases at 32 bits, the TT arms' cores at 4
bits and biases at 8 bits, after pruning. Power-of-two scale exponents (one
small integer per tensor) are not counted.
"""

from __future__ import annotations

import math
import statistics
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch

from codesign.hw.reports import write_figure_png, write_json_atomic, write_text_atomic
from codesign.reproduce import check_output_dir
from codesign.reproduce.common import Arm, PaperClaim, Target, markdown_table, mean_std, summarize
from codesign.train.config import DataConfig, ModelConfig, OptimConfig, TrainConfig
from codesign.train.data import Dataset, load_digits_dataset, stratified_split, synthetic_dataset
from codesign.train.trainer import Trainer, TrainResult
from codesign.train.tt import RankPrior, TTLayerSpec, TTMLPConfig, TTPrecision, model_memory_bits, tt_trainer, use_adam

NAME = "tt"
TITLE = "Rank-adaptive low-precision tensor-train training (4-bit cores), MLP 64-256-256-10 on digits"
BASELINE, MAIN_ARM, ABLATION_ARM = "fp32", "tt-lowp-prior", "tt-lowp-fixed-rank"
TARGET_REDUCTION = 292.0
TARGET_DROP_PT = 3.0
VALIDATION_FRACTION = 0.2

CLAIM = PaperClaim(
    text=("Two-layer TT network on FashionMNIST (784 inputs zero-padded to 1024, 512 hidden, 10 classes), 30 epochs, "
          "pretrained on MNIST: vanilla training 89.27 % test accuracy; floating point without prior 88.03 %; "
          "fixed point without prior 86.67 %; floating point with prior 87.88 %; fixed point with prior (4-bit cores, "
          "8-bit activations and biases, 16-bit gradients; the proposal) 84.86 % at a 292x parameter-memory "
          "reduction over the vanilla model. On an Ultra96-V2 at 100 MHz: 59x speed-up and 123x energy reduction "
          "against a Raspberry Pi 3B"),
    citation="paper 003: Abstract, Sec. 3.2-3.3, Sec. 5 and Table 1, App. B",
)


@dataclass(frozen=True, kw_only=True)
class Budget:
    """Everything a run of this reproduction trains with; smoke shrinks it to seconds."""

    data: DataConfig
    optim: OptimConfig
    hidden: tuple[int, ...]
    tt_layers: tuple[TTLayerSpec, ...]
    baseline_lrs: tuple[float, ...]
    tt_grid: tuple[tuple[float, float], ...]  # (learning rate, prior weight)
    warmup_epochs: int
    threshold: float


def budget(smoke: bool) -> Budget:
    if smoke:
        return Budget(
            data=DataConfig(name="synthetic", synthetic_samples=120),
            optim=OptimConfig(epochs=2, batch_size=20, lr=1e-2, weight_decay=0.0),
            hidden=(16,),
            tt_layers=(TTLayerSpec(in_modes=(8, 8), out_modes=(4, 4), max_rank=4),
                       TTLayerSpec(in_modes=(4, 4), out_modes=(2, 5), max_rank=3)),
            baseline_lrs=(3e-3, 1e-2), tt_grid=((1e-2, 0.5), (1e-2, 2.0)), warmup_epochs=1, threshold=0.1)
    # 64 = 2*4*4*2 (8x8 pixels: row = 2*4, column = 4*2), 256 = 4*4*4*4, 10 = 1*1*2*5 (modes of 1 cost nothing)
    return Budget(
        data=DataConfig(name="digits"),
        optim=OptimConfig(epochs=30, batch_size=64, lr=1e-2, weight_decay=0.0),
        hidden=(256, 256),
        tt_layers=(TTLayerSpec(in_modes=(2, 4, 4, 2), out_modes=(4, 4, 4, 4), max_rank=4),
                   TTLayerSpec(in_modes=(4, 4, 4, 4), out_modes=(4, 4, 4, 4), max_rank=4),
                   TTLayerSpec(in_modes=(4, 4, 4, 4), out_modes=(1, 1, 2, 5), max_rank=4)),
        baseline_lrs=(1e-3, 3e-3, 1e-2, 3e-2), tt_grid=((3e-3, 1.0), (1e-2, 0.5), (1e-2, 1.0), (1e-2, 2.0)),
        warmup_epochs=5, threshold=0.1)


def load_data(b: Budget) -> Dataset:
    if b.data.name == "digits":
        return load_digits_dataset(test_fraction=b.data.test_fraction, split_seed=b.data.split_seed)
    return synthetic_dataset(samples=b.data.synthetic_samples, test_fraction=b.data.test_fraction,
                             seed=b.data.split_seed)


def validation_split(data: Dataset, seed: int = 0) -> Dataset:
    """The training split cut into (train, validation); the validation part stands where the test set would."""
    train, validation = stratified_split(data.train_y.numpy(), VALIDATION_FRACTION, seed)
    train, validation = torch.from_numpy(train), torch.from_numpy(validation)
    return Dataset(data.train_x[train], data.train_y[train], data.train_x[validation], data.train_y[validation],
                   data.classes)


def _train_config(b: Budget, seed: int, lr: float) -> TrainConfig:
    return TrainConfig(seed=seed, data=b.data, model=ModelConfig(name="mlp", hidden=b.hidden),
                       optim=OptimConfig(epochs=b.optim.epochs, batch_size=b.optim.batch_size, lr=lr,
                                         weight_decay=b.optim.weight_decay))


def _tt_model(b: Budget) -> TTMLPConfig:
    return TTMLPConfig(layers=b.tt_layers, precision=TTPrecision())


def _prior(b: Budget, weight: float) -> RankPrior:
    return RankPrior(weight=weight, warmup_epochs=b.warmup_epochs, threshold=b.threshold,
                     prune_from_epoch=b.warmup_epochs)


def dense_bits(b: Budget) -> int:
    """Bits of the dense float32 MLP: every weight and bias at 32 bits."""
    sizes = (64, *b.hidden, 10)
    return 32 * sum(i * o + o for i, o in zip(sizes[:-1], sizes[1:]))


def _run_baseline(b: Budget, seed: int, lr: float, dataset: Dataset, progress: bool) -> tuple[TrainResult, Trainer]:
    trainer = use_adam(Trainer(_train_config(b, seed, lr), dataset=dataset, progress=progress,
                               description=f"{BASELINE} seed {seed}"))
    return trainer.fit(), trainer


def _run_tt(b: Budget, seed: int, lr: float, weight: float | None, dataset: Dataset,
            progress: bool) -> tuple[TrainResult, Trainer]:
    prior = _prior(b, weight) if weight is not None else None
    name = MAIN_ARM if prior is not None else ABLATION_ARM
    trainer = tt_trainer(_train_config(b, seed, lr), _tt_model(b), prior, dataset=dataset, progress=progress,
                         description=f"{name} seed {seed}")
    return trainer.fit(), trainer


def tune(b: Budget, data: Dataset, progress: bool) -> dict[str, Any]:
    """Trial runs on the validation split; the same number for the baseline and for the TT arm."""
    tuning = validation_split(data)
    reference = dense_bits(b)
    baseline_trials = []
    for lr in b.baseline_lrs:
        result, _ = _run_baseline(b, 0, lr, tuning, progress)
        baseline_trials.append({"lr": lr, "validation_accuracy": result.test_accuracy})
    tt_trials = []
    for lr, weight in b.tt_grid:
        result, trainer = _run_tt(b, 0, lr, weight, tuning, progress)
        bits = model_memory_bits(trainer.model)["total_bits"]
        tt_trials.append({"lr": lr, "prior_weight": weight, "validation_accuracy": result.test_accuracy,
                          "memory_bits": bits, "reduction": reference / bits,
                          "final_ranks": result.techniques["tt_rank"]["final_ranks"]})
    best_baseline = max(baseline_trials, key=lambda t: (t["validation_accuracy"], -t["lr"]))
    meeting = [t for t in tt_trials if t["reduction"] >= TARGET_REDUCTION]
    if meeting:
        best_tt = max(meeting, key=lambda t: (t["validation_accuracy"], t["reduction"]))
        rule = f"highest validation accuracy among the trials with >= {TARGET_REDUCTION:g}x memory reduction"
    else:
        best_tt = max(tt_trials, key=lambda t: (t["reduction"], t["validation_accuracy"]))
        rule = f"no trial reached {TARGET_REDUCTION:g}x: the trial with the largest reduction"
    return {"validation": {"fraction": VALIDATION_FRACTION, "train_size": tuning.train_size,
                           "validation_size": int(tuning.test_y.numel()), "seed": 0},
            "baseline_trials": baseline_trials, "tt_trials": tt_trials, "baseline_lr": best_baseline["lr"],
            "tt_lr": best_tt["lr"], "tt_prior_weight": best_tt["prior_weight"], "tt_rule": rule,
            "baseline_rule": "highest validation accuracy (ties: smaller learning rate)"}


def _plot(path: Path, summaries, memory: dict[str, list[float]], rank_histories: list[list[dict[str, list[int]]]],
          title: str) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2), dpi=120)
    for s in summaries:
        bits = memory[s.name]
        left.errorbar(statistics.fmean(bits), s.accuracy_mean, yerr=s.accuracy_std,
                      xerr=(statistics.stdev(bits) if len(bits) > 1 else 0.0), fmt="s" if s.baseline else "o",
                      capsize=4, label=s.name)
    left.set_xscale("log")
    left.set_xlabel("parameter memory (bits, log scale)")
    left.set_ylabel("test accuracy (%)")
    left.set_title("accuracy vs memory (mean ± std over seeds)", fontsize=9)
    left.grid(alpha=0.3)
    left.legend(fontsize=8)
    for seed_index, history in enumerate(rank_histories):  # history: one {layer: ranks} per epoch
        for layer_index, layer in enumerate(history[0]):
            inner = [sum(epoch[layer][1:-1]) for epoch in history]
            right.plot(range(len(inner)), inner, alpha=0.8, label=layer if seed_index == 0 else None,
                       color=f"C{layer_index}", linestyle=("-", "--", ":")[seed_index % 3])
    right.set_xlabel("epoch (0 = initial)")
    right.set_ylabel("sum of inner TT ranks")
    right.set_title(f"{MAIN_ARM}: ranks over training (line style = seed)", fontsize=9)
    right.grid(alpha=0.3)
    right.legend(fontsize=8)
    figure.suptitle(title, fontsize=9)
    figure.tight_layout()
    return write_figure_png(figure, path)


def _fmt(values, digits: int = 2) -> str:
    return ", ".join(f"{v:.{digits}f}" for v in values)


def run(out_dir: Path, *, seeds: list[int] | None = None, smoke: bool = False, progress: bool = True) -> dict:
    out_dir = check_output_dir(out_dir)
    seeds = list(seeds) if seeds else ([0] if smoke else [0, 1, 2])
    torch.set_num_threads(1)
    b = budget(smoke)
    data = load_data(b)
    started = time.perf_counter()
    tuning = tune(b, data, progress)
    tuned_at = time.perf_counter()

    results: dict[str, list[TrainResult]] = {BASELINE: [], MAIN_ARM: [], ABLATION_ARM: []}
    memory: dict[str, list[float]] = {BASELINE: [], MAIN_ARM: [], ABLATION_ARM: []}
    reference = dense_bits(b)
    for seed in seeds:  # seed-major, so a partial run still pairs the arms by seed
        result, trainer = _run_baseline(b, seed, tuning["baseline_lr"], data, progress)
        results[BASELINE].append(result)
        memory[BASELINE].append(float(model_memory_bits(trainer.model)["total_bits"]))
        for arm, weight in ((MAIN_ARM, tuning["tt_prior_weight"]), (ABLATION_ARM, None)):
            result, trainer = _run_tt(b, seed, tuning["tt_lr"], weight, data, progress)
            results[arm].append(result)
            memory[arm].append(float(model_memory_bits(trainer.model)["total_bits"]))
    wall = time.perf_counter() - started
    if memory[BASELINE][0] != reference:
        raise AssertionError(f"dense baseline holds {memory[BASELINE][0]} bits, expected {reference}")

    arms = [Arm(BASELINE, _train_config(b, 0, tuning["baseline_lr"]), baseline=True),
            Arm(MAIN_ARM, _train_config(b, 0, tuning["tt_lr"])), Arm(ABLATION_ARM, _train_config(b, 0, tuning["tt_lr"]))]
    summaries = summarize(arms, results)
    by_name = {s.name: s for s in summaries}
    reductions = {arm: [reference / bits for bits in memory[arm]] for arm in memory}
    drops = {arm: [base.test_accuracy - run_.test_accuracy for run_, base in zip(results[arm], results[BASELINE])]
             for arm in (MAIN_ARM, ABLATION_ARM)}
    reduction_mean, reduction_std = mean_std(reductions[MAIN_ARM])
    drop_mean, drop_std = mean_std(drops[MAIN_ARM])
    main, base = by_name[MAIN_ARM], by_name[BASELINE]
    target = Target(
        text=(f">= {TARGET_REDUCTION:g}x parameter-memory reduction (dense FP32 bits / TT bits: 4-bit cores + 8-bit "
              f"biases after pruning) at <= {TARGET_DROP_PT:g} pt test-accuracy drop vs the same-seed fp32 run "
              f"({MAIN_ARM}, mean over seeds)"),
        met=reduction_mean >= TARGET_REDUCTION and drop_mean <= TARGET_DROP_PT,
        measured=(f"{reduction_mean:.1f}x ± {reduction_std:.1f} (per seed {_fmt(reductions[MAIN_ARM], 1)}), drop "
                  f"{drop_mean:+.2f} ± {drop_std:.2f} pt (per seed {_fmt(drops[MAIN_ARM])}); accuracy "
                  f"{main.accuracy_mean:.2f} ± {main.accuracy_std:.2f} % vs fp32 {base.accuracy_mean:.2f} ± "
                  f"{base.accuracy_std:.2f} %"),
    )

    rank_histories = [run_.techniques["tt_rank"]["rank_history"] for run_ in results[MAIN_ARM]]
    per_seed = {arm: [{"seed": run_.config["seed"], "test_accuracy": run_.test_accuracy, "memory_bits": bits,
                       "reduction": reference / bits, "macs": run_.cost["total"]["macs"],
                       "energy_pj": run_.energy_pj,
                       "history": [round(h["test_accuracy"], 2) for h in run_.history],
                       **({"final_ranks": run_.techniques["tt_rank"]["final_ranks"],
                           "prune_events": run_.techniques["tt_rank"]["prune_events"]}
                          if "tt_rank" in run_.techniques else {})}
                      for run_, bits in zip(results[arm], memory[arm])]
                for arm in results}
    memory_rows = ["| arm | parameter memory (bits) | reduction vs fp32 | total MACs (mean) | paired drop (pt) |",
                   "|---|---:|---:|---:|---:|"]
    for arm in (BASELINE, MAIN_ARM, ABLATION_ARM):
        bits_mean, bits_std = mean_std(memory[arm])
        red_mean, red_std = mean_std(reductions[arm])
        macs = statistics.fmean(run_.cost["total"]["macs"] for run_ in results[arm])
        drop = "—" if arm == BASELINE else "{:+.2f} ± {:.2f}".format(*mean_std(drops[arm]))
        memory_rows.append(f"| {arm} | {bits_mean:,.0f} ± {bits_std:,.0f} | {red_mean:.1f}x ± {red_std:.1f} | "
                           f"{macs:.3e} | {drop} |")
    final_ranks = {layer: [row["final_ranks"][layer] for row in per_seed[MAIN_ARM]]
                   for layer in per_seed[MAIN_ARM][0]["final_ranks"]}
    tt_params = sum(math.prod(spec.in_modes) for spec in b.tt_layers)
    notes = [
        (f"Model: {' -> '.join(str(x) for x in (64, *b.hidden, 10))} MLP with ReLU; TT factorisations (in modes -> "
         f"out modes, initial max rank): "
         + "; ".join(f"{s.in_modes} -> {s.out_modes}, r <= {s.max_rank}" for s in b.tt_layers)
         + f". Dense FP32 parameter memory {reference:,} bits. Digits images are 8x8, so the dense network is small "
           f"and the 8-bit biases ({8 * (sum(b.hidden) + 10):,} bits) are a large share of the TT budget: at "
           f"{TARGET_REDUCTION:g}x the whole model must fit in {reference / TARGET_REDUCTION:,.0f} bits."),
        (f"Tuning on a stratified {VALIDATION_FRACTION:.0%} validation split of the training split (seed 0, "
         f"{tuning['validation']['train_size']} train / {tuning['validation']['validation_size']} validation "
         f"samples), {len(b.baseline_lrs)} trials per tuned arm at the full budget. fp32: lr in "
         f"{list(b.baseline_lrs)} -> {tuning['baseline_lr']:g} ({tuning['baseline_rule']}). {MAIN_ARM}: (lr, prior "
         f"weight) in {[list(t) for t in b.tt_grid]} -> ({tuning['tt_lr']:g}, {tuning['tt_prior_weight']:g}) "
         f"({tuning['tt_rule']}). Pruning threshold {b.threshold:g} of the largest lambda per rank and a "
         f"{b.warmup_epochs}-epoch prior warm-up were fixed before tuning, not tuned. The test split decides nothing."),
        (f"Final ranks of {MAIN_ARM} per seed: " + "; ".join(f"{layer} {ranks}" for layer, ranks in final_ranks.items())
         + "."),
        ("Energy: the project's ledger prices each TT contraction as integer MACs (forward 8x4 bits, error 16x4, "
         "core gradients 16x8) and the fp32 baseline as FP32 MACs, with the ledger's buffer and DRAM model (each "
         "contraction streams its operands once). The energy ratio therefore mixes fewer MACs with narrower "
         "arithmetic; it is a model, not a measurement, and the optimiser (Adam on the shadow cores, done on the "
         "ARM core in the paper) is not in it for any arm."),
        (f"Cost: MACs per run (mean) fp32 {statistics.fmean(r.cost['total']['macs'] for r in results[BASELINE]):.3e}, "
         f"{MAIN_ARM} {statistics.fmean(r.cost['total']['macs'] for r in results[MAIN_ARM]):.3e}: at these layer "
         f"sizes and ranks the contraction sequence is not much cheaper in MACs than the dense product, and the "
         f"ledger charges every intermediate state's trip through DRAM once per contraction, so a modelled energy "
         f"ratio above 1 is possible; the paper's 123x energy figure is against an embedded CPU, not a dense "
         f"accelerator, and is not reproduced here."),
        ("Deviations from the paper: digits (8x8, 1347 training images) instead of FashionMNIST with MNIST "
         "pretraining; a three-layer MLP instead of the two-layer 1024-512-10 network; the prior's lambda is shared "
         "by the two core slices a rank index joins (so a pruned index leaves both cores); the exact interval for "
         "the tracked mean |code| (Sec. 3.3) is not legible in our copy, we keep it in "
         "[2^(b-2-h), 2^(b-1-h)) with h = 1 (4-bit cores, scale fixed at initialisation), 3 (8-bit activations, "
         "biases), 6 (16-bit gradients); the states between two contractions are rounded too (8 bits forward, 16 "
         "bits backward); core gradients are contracted directly, not through the dense weight gradient of Eq. (13)."),
        (f"Smoke run: synthetic data, a 64-16-10 network, 2 epochs, one seed; the numbers check the pipeline, not the "
         f"paper. Wall time {wall:.0f} s." if smoke else
         f"Wall time {wall:.0f} s (tuning {tuned_at - started:.0f} s), one thread."),
    ]
    settings = {"smoke": smoke, "budget": asdict(b), "wall_seconds": wall, "tuning_seconds": tuned_at - started,
                "dense_bits": reference, "tt_in_features": tt_params}
    payload = {
        "name": NAME, "title": TITLE, "seeds": seeds, "settings": settings,
        "arms": [asdict(s) for s in summaries], "paper": asdict(CLAIM), "targets": [asdict(target)],
        "all_targets_met": target.met, "notes": notes,
        "extra": {"tuning": tuning, "per_seed": per_seed, "memory_bits": memory, "reduction": reductions,
                  "drop_pt": drops, "reduction_mean": reduction_mean, "drop_pt_mean": drop_mean,
                  "rank_history": rank_histories},
    }
    write_json_atomic(out_dir / "results.json", payload)
    lines = [f"# {TITLE}", "", markdown_table(summaries), "", "\n".join(memory_rows), "",
             f"Mean ± std over seeds {seeds}; ratios and drops are per seed against the same-seed fp32 run trained in "
             f"the same process.", "", f"**Paper:** {CLAIM.text} ({CLAIM.citation})", "",
             f"- target: {target.text} — measured {target.measured} — **{'met' if target.met else 'NOT met'}**"]
    lines += [f"- note: {note}" for note in notes]
    write_text_atomic(out_dir / "table.md", "\n".join(lines) + "\n")
    _plot(out_dir / "plot.png", summaries, memory, rank_histories, TITLE)
    return payload


__all__ = ["budget", "dense_bits", "run", "tune", "validation_split"]
