"""Reproduction ``tt-fashion``: paper 003's Table 1 at the paper's operating point (issue 41, item 4).

Paper: "On-FPGA Training with Ultra Memory Reduction: A Low-Precision Tensor
Method" (2021), paper 003: Sec. 5 and Table 1 (a two-layer TT network on
Fashion-MNIST, 784 inputs zero-padded to 1,024, 512 hidden, 10 classes, 30
epochs after MNIST pre-training; dense 89.27 % test accuracy, the proposal,
fixed point with the low-rank prior, 84.86 % at 292x less parameter memory,
243x without the prior), App. B (the set-up; each row is reported at its
epoch of best test accuracy).

What it trains (:mod:`codesign.reproduce.tt_fashion_budget` has the budget
and why; :mod:`codesign.reproduce.tt_fashion_train` one run), per seed, every
run pre-trained on MNIST and then trained on Fashion-MNIST, every TT arm from
the seed's one start (``tt-fixed-prior-fewest``: from its own TT-SVD of the
seed's one random matrix):

* ``fp32``: the dense 1024-512-10 MLP in float32, Adam (Table 1's "Vanilla");
* ``tt-float-no-prior`` / ``tt-float-prior``: torch's float TT layers without
  and with the low-rank prior at the paper's weight 1;
* ``tt-fixed-no-prior`` / ``tt-fixed-prior`` (the proposal): 4-bit cores,
  8-bit activations and biases, 16-bit gradients, tracked scales, on the fast
  exact golden (:class:`codesign.loops.tt.TtMlpTrainer`), without and with
  the prior at weight 1;
* ``tt-fixed-prior-tuned``: the proposal at the prior weight chosen at
  :data:`~codesign.reproduce.protocol.TUNING_SEED` on the validation split
  (:func:`choose_weight`), its trials charged in the study's cost.
* ``tt-fixed-prior-fewest``: the proposal with each layer's modes in its
  order of fewest step products (:mod:`codesign.step.tt.mode_order`),
  set against the proposal by seed (:func:`~codesign.reproduce.tt_fashion_report.mode_order_test`).

Every run is a cached sweep task under ``<out>/tasks/``
(:func:`codesign.reproduce.common.train_groups`), keyed by what it trains
(kind, prior weight, mode order where not ours, seed) and a fingerprint of
the budget, so a killed run
resumes with what finished and a tuned weight of 1 reuses the proposal's
runs. The tuning trials and every arm that does not wait for them run as one
sweep, the tuned arm after it. The readings, comparisons, goals and their
tests are :mod:`codesign.reproduce.tt_fashion_report`'s; the table, notes and
plot :mod:`codesign.reproduce.tt_fashion_table`'s.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from codesign.io.reports import write_json_atomic, write_text_atomic
from codesign.reproduce import check_output_dir
from codesign.reproduce.common import Execution, task_key, train_groups
from codesign.reproduce.machine import machine_record
from codesign.reproduce.protocol import CLAIM_SEEDS, TUNING_SEED, check_seeds, study_seeds
from codesign.reproduce.run_cost import cost_text, run_cost
from codesign.reproduce.tt import least_memory_within
from codesign.reproduce.tt_budget import BASELINE
from codesign.reproduce.tt_fashion_budget import (ARMS, FIXED_PRIOR_FEWEST, FIXED_PRIOR_TUNED, MAIN_ARM,
                                                  PAPER_PRIOR_WEIGHT, Budget,
                                                  arm_spec, budget, dense_bits, digest, kind_of, settings_record)
from codesign.reproduce.tt_fashion_report import (GOAL_READING, LOSS_BOUND_PT, MARGIN_PT, PAPER_DROP_PT, arm_runs,
                                                  compare, cost_record, goals, headline, loss_tests,
                                                  mode_order_test, readings,
                                                  readme_row)
from codesign.reproduce.tt_fashion_table import notes, plot, table_text
from codesign.reproduce.tt_fashion_train import Job
from codesign.reproduce.tt_report import CLAIM, PAPER_TABLE1, ranks_text
from codesign.sweep import SweepTask
from codesign.train.config import plain

NAME = "tt-fashion"
TITLE = ("Paper 003's Table 1 on Fashion-MNIST: TT MLP 1024-512-10 after MNIST pre-training, 4-bit cores on the "
         "exact golden, against dense FP32")
TASK_FUNCTION = "codesign.reproduce.tt_fashion_train:train_task"  # part of every cached task: never move it
EVALUATION_SEEDS = CLAIM_SEEDS  # three seeds, the unit of replication
KIND_ORDER = {"tt-float": 0, "tt-fixed": 1, "fp32": 2}  # the sweep starts the longest runs first


def arm_job(arm: str, seed: int, weight: float = PAPER_PRIOR_WEIGHT) -> Job:
    """The run of ``arm`` at ``seed``; a prior arm trains with the prior at ``weight``."""
    prior = arm != BASELINE and arm_spec(arm).prior
    return Job(kind=kind_of(arm), seed=seed, prior_weight=float(weight) if prior else 0.0,
               modes="fewest" if arm == FIXED_PRIOR_FEWEST else "ours")


def job_task(b: Budget, job: Job, *, smoke: bool) -> SweepTask:
    """The cached task of ``job``: its key names the purpose, kind, prior weight and seed and ends in a fingerprint
    of its arguments, so a run of another budget never reads this one's result."""
    kwargs = {"smoke": smoke, "digest": digest(b), "job": job.to_dict()}
    fingerprint = hashlib.sha256(json.dumps(kwargs, sort_keys=True).encode()).hexdigest()[:10]
    purpose = "tune" if job.seed == TUNING_SEED else "eval"
    modes = [] if job.modes == "ours" else [f"modes={job.modes}"]  # ours names no order: its keys carry none
    return SweepTask(key=task_key(purpose, job.kind, f"prior={job.prior_weight:g}", *modes, f"seed={job.seed}",
                                  fingerprint), function=TASK_FUNCTION, kwargs=kwargs)


def run_jobs(b: Budget, jobs: Sequence[Job], task_dir: Path, *, smoke: bool, execution: Execution
             ) -> tuple[list[dict[str, Any]], dict[str, int], list[float]]:
    """Every job's record in the order of ``jobs`` (a job listed twice trains once), how many tasks trained now
    or were found in the cache, and the recorded seconds of each distinct task."""
    unique = sorted(set(jobs), key=lambda job: (KIND_ORDER[job.kind], job.prior_weight, job.modes, job.seed))
    trained = train_groups({job: [job_task(b, job, smoke=smoke)] for job in unique}, task_dir, execution)
    done = {job: trained.groups[job][0] for job in unique}
    return [done[job] for job in jobs], trained.counts(), [done[job]["seconds"]["total"] for job in unique]


def tuning_jobs(b: Budget) -> list[Job]:
    """The prior-weight trials of the proposal and the one ``fp32`` reference run, at the tuning seed."""
    return ([arm_job(MAIN_ARM, TUNING_SEED, weight) for weight in b.weight_grid]
            + [arm_job(BASELINE, TUNING_SEED)])


def choose_weight(trials: Sequence[Mapping[str, Any]], reference_accuracy: float) -> tuple[int, str]:
    """The tuned weight's trial: the least memory among the trials whose best validation accuracy lies within the
    paper's 4.41 pt of the ``fp32`` reference's (the paper's operating point: memory at a bounded loss), ties: the
    more accurate; none so close: the most accurate. Read on the validation split only."""
    floor = reference_accuracy - PAPER_DROP_PT
    best, close = least_memory_within(trials, floor)
    if close:
        return best, (f"the least memory among the trials within {PAPER_DROP_PT:.2f} pt of the {BASELINE} "
                      f"reference's best validation accuracy (>= {floor:.2f} %; ties: more accurate)")
    return best, f"no trial within {PAPER_DROP_PT:.2f} pt of the {BASELINE} reference: the most accurate"


def tuning_record(b: Budget, records: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The trials read at their best-validation epochs, the reference, and the choice."""
    reference = dense_bits(b)
    trials = []
    for weight, record in zip(b.weight_grid, records):
        read = readings(b, record)[GOAL_READING]
        trials.append({"prior_weight": weight, "validation_accuracy": read["validation_accuracy"],
                       "epoch": read["epoch"], "memory_bits": read["memory_bits"],
                       "reduction": reference / read["memory_bits"], "ranks": read["ranks"],
                       "final_ranks": record["final_ranks"]})
    base = readings(b, records[len(b.weight_grid)])[GOAL_READING]
    index, rule = choose_weight(trials, base["validation_accuracy"])
    return {"seed": TUNING_SEED, "trials": trials, "chosen_index": index, "chosen_weight": trials[index]["prior_weight"],
            "rule": rule, "reference": {"validation_accuracy": base["validation_accuracy"], "epoch": base["epoch"]}}


def evaluation_jobs(seeds: Sequence[int], tuned_weight: float | None) -> dict[str, list[Job]]:
    """Every arm's runs in seed order; without ``tuned_weight`` (not chosen yet) the tuned arm is left out."""
    arms = [arm for arm in ARMS if tuned_weight is not None or arm != FIXED_PRIOR_TUNED]
    return {arm: [arm_job(arm, seed, tuned_weight if arm == FIXED_PRIOR_TUNED else PAPER_PRIOR_WEIGHT)
                  for seed in seeds] for arm in arms}


def train_all(b: Budget, seeds: list[int], task_dir: Path, *, smoke: bool, execution: Execution) -> dict[str, Any]:
    """The trials and the untuned arms in one sweep, the tuned arm in a second; every record and the timing."""
    started = time.perf_counter()
    trials = tuning_jobs(b)
    first = evaluation_jobs(seeds, None)
    jobs = trials + [job for arm_jobs in first.values() for job in arm_jobs]
    records, counts, first_seconds = run_jobs(b, jobs, task_dir, smoke=smoke, execution=execution)
    tuning = tuning_record(b, records[:len(trials)])
    done = dict(zip(jobs, records))
    tuned = evaluation_jobs(seeds, tuning["chosen_weight"])[FIXED_PRIOR_TUNED]
    new = [job for job in tuned if job not in done]
    more, more_counts, more_seconds = run_jobs(b, new, task_dir, smoke=smoke, execution=execution)
    done.update(zip(new, more))
    every = {**first, FIXED_PRIOR_TUNED: tuned}
    return {"tuning": tuning, "records": {arm: [done[job] for job in arm_jobs] for arm, arm_jobs in every.items()},
            "phases": {"trials and untuned arms": first_seconds, "tuned arm": more_seconds},
            "tasks": {key: counts[key] + more_counts[key] for key in counts}, "wall": time.perf_counter() - started}


def run(out_dir: Path, *, seeds: list[int] | None = None, smoke: bool = False, progress: bool = True,
        execution: Execution = Execution()) -> dict:
    """Tune the prior weight, train every arm at every seed, compare; write results.json, table.md and plot.png."""
    out_dir = check_output_dir(out_dir)
    seeds = check_seeds(study_seeds(seeds, smoke, default=EVALUATION_SEEDS), reserved=(TUNING_SEED,))
    b = budget(smoke)
    execution = dataclasses.replace(execution, progress=progress)
    trained = train_all(b, seeds, out_dir / "tasks", smoke=smoke, execution=execution)
    payload = build_payload(b, seeds, trained, execution=execution, smoke=smoke) | {"run_cost": run_cost(out_dir)}
    write_json_atomic(out_dir / "results.json", payload)
    write_text_atomic(out_dir / "table.md", table_text(payload) + f"\n**Cost:** {cost_text(payload['run_cost'])}.\n")
    plot(out_dir / "plot.png", payload)
    return payload


def build_payload(b: Budget, seeds: list[int], trained: Mapping[str, Any], *, execution: Execution,
                  smoke: bool) -> dict[str, Any]:
    """``results.json``: settings, the comparisons and tests at every reading, the goals, the cost, the notes and
    every run's summary (accuracy in %, memory in bits, compute in MACs, time in s)."""
    runs = arm_runs(trained["records"], b)
    comparisons = compare(runs)
    tests = loss_tests(runs)
    targets, verdict = goals(comparisons, tests, len(seeds))
    settings = {"smoke": smoke, "budget": plain(b), **settings_record(b), "workers": execution.workers,
                "wall_seconds": trained["wall"], "validation_fraction": b.data.validation_fraction}
    payload = {
        "name": NAME, "title": TITLE, "seeds": seeds, "settings": settings, "machine": machine_record(),
        "protocol": {"unit": "seed", "tuning_seed": TUNING_SEED, "goal_reading": GOAL_READING,
                     "loss_bound_pt": LOSS_BOUND_PT, "margin_pt": MARGIN_PT, "paper_drop_pt": PAPER_DROP_PT,
                     "hypotheses": (f"d_s = test accuracy of {MAIN_ARM} - {BASELINE} at seed s (pt, best-validation "
                                    f"epoch); H0: mean d <= {LOSS_BOUND_PT:+.2f}; H1: mean d > {LOSS_BOUND_PT:+.2f}; "
                                    "one-sided one-sample t-test, alpha 0.05, n - 1 degrees of freedom")},
        "paper": asdict(CLAIM), "paper_table1": PAPER_TABLE1, "comparisons": comparisons, "tests": tests,
        "mode_order": mode_order_test(b, runs),
        "targets": [asdict(t) for t in targets], "all_targets_met": all(t.met for t in targets),
        "readme": asdict(readme_row(comparisons, tests, verdict, ranks_text(settings["initial_ranks"]))),
        "cost": cost_record(trained["phases"], trained["wall"], execution.workers, trained["tasks"]),
        "extra": {"tuning": trained["tuning"], "runs": runs},
    }
    payload["notes"] = notes(b, payload, smoke)
    return payload


def estimate_study(*, smoke: bool = False, seeds: Sequence[int] = EVALUATION_SEEDS, repeats: int = 10
                   ) -> dict[str, Any]:
    """The study's time, estimated from one step of each kind of run measured here, before running it.

    One training step and one evaluation of 64 images per kind (with and
    without the prior; :func:`codesign.reproduce.tt_fashion_train.step_seconds`)
    make a run's seconds (:func:`codesign.reproduce.tt_fashion_budget.plan_seconds`,
    full splits); the study's runs on two workers, longest first, in its two
    sweeps (the tuned arm's three runs only when its weight is not the
    paper's). Upper bounds: a pruned model steps faster. Seconds per step and
    per 64 images in ms, runs in minutes, the study in hours.
    """
    from codesign.reproduce.tt_fashion_budget import plan_seconds
    from codesign.reproduce.tt_fashion_report import lpt_seconds
    from codesign.reproduce.tt_fashion_train import step_seconds

    b = budget(smoke)

    def kind(job: Job) -> Job:  # what a run's time depends on: its kind, and whether it has a prior
        return Job(kind=job.kind, seed=0, prior_weight=PAPER_PRIOR_WEIGHT if job.prior_weight else 0.0)

    first = sorted(set(tuning_jobs(b) + [job for jobs in evaluation_jobs(seeds, None).values() for job in jobs]),
                   key=lambda job: (KIND_ORDER[job.kind], job.prior_weight, job.modes, job.seed))
    measured = step_seconds(b, sorted({kind(job) for job in first}, key=lambda job: (job.kind, job.prior_weight)),
                            repeats=repeats)
    run_s = plan_seconds(b, {job: m["step"] for job, m in measured.items()},
                         {job: m["evaluate_64"] for job, m in measured.items()})
    first_s = [run_s[kind(job)] for job in first]
    tuned_s = [run_s[kind(arm_job(FIXED_PRIOR_TUNED, seed, 2.0))] for seed in seeds]
    return {"step_ms": {job.label: 1e3 * m["step"] for job, m in measured.items()},
            "evaluate_64_ms": {job.label: 1e3 * m["evaluate_64"] for job, m in measured.items()},
            "run_minutes": {job.label: seconds / 60 for job, seconds in run_s.items()}, "runs": len(first),
            "cpu_hours": sum(first_s) / 3600, "tuned_arm_cpu_hours": sum(tuned_s) / 3600,
            "two_worker_hours": lpt_seconds(first_s, 2) / 3600,
            "two_worker_hours_with_tuned_arm": (lpt_seconds(first_s, 2) + lpt_seconds(tuned_s, 2)) / 3600}


__all__ = ["EVALUATION_SEEDS", "NAME", "TITLE", "arm_job", "build_payload", "choose_weight", "estimate_study",
           "evaluation_jobs",
           "headline", "job_task", "run", "run_jobs", "train_all", "tuning_jobs", "tuning_record"]
