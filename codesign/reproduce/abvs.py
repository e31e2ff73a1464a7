"""Reproduction of ABVS (paper 004, Cheng & Hashimoto): FP32, fixed least-sufficient FB, and ABVS, on 8x8 digits.

Every choice reads the validation split (:data:`codesign.reproduce.protocol.VALIDATION_FRACTION`
of the training split, stratified), never the test split. Flow, after the
paper's Sec. IV-A:

1. **Preliminary choices** on seeds of their own, never evaluated
   (:mod:`codesign.reproduce.abvs_search`): the least sufficient FB ``L``,
   then FB_min and the check interval of ABVS. Alpha is set so that Eq. (1)
   gives that interval; during training the FB controller reads validation
   accuracy too (:mod:`codesign.train.techniques.abvs`).
2. The FP-MAC cost report (Yosys, xc7) is synthesised once for the FBs the
   arms use plus FB = 23 into ``out_dir/fpmac_cost/`` and reused when
   present (:func:`codesign.reproduce.abvs_energy.ensure_cost_report`;
   without Yosys the embedded fallback table prices the MACs — results say
   which).
3. **The baselines' search**: ``fp32`` and ``fixed_fbL`` each try as many
   weight-decay and momentum settings as ABVS tried schedules, so that every
   arm spends the same number of runs on its choices.
4. **Arms** ``fp32`` (baseline), ``fixed_fbL`` and ``abvs_fbMtoL``, each with
   its learning rate tuned on the validation split
   (:func:`codesign.reproduce.study.run_study`), then trained at every
   evaluation seed and split and compared per run.
5. **Energy** (:mod:`codesign.reproduce.abvs_energy`): the Eq. (2) saving of
   ABVS against the fixed-``L`` arm per run, under the per-cell delay model
   and its variants.

Every run, preliminary or evaluated, is a cached task of the one path
(:func:`codesign.reproduce.common.train_groups`) with one torch thread (the
MLP's tensors are so small that intra-op threads only add synchronisation).
"""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path

from codesign.reproduce import abvs_report, check_output_dir
from codesign.reproduce.abvs_budget import ACCURACY_DROP_PT, base_config, budget
from codesign.reproduce.abvs_phases import measure, plan_arms, preliminary
from codesign.reproduce.abvs_report import (CLAIM, PAPER_ACCOUNTING, PAPER_REFERENCE, headline, plot_traces,
                                            restated_notes)
from codesign.reproduce.common import Execution
from codesign.reproduce.protocol import study_seeds
from codesign.reproduce.report import write_report
from codesign.reproduce.study import run_study
from codesign.reproduce.summary import summarize

NAME = "abvs"
TITLE = "ABVS: adaptive fraction bits with voltage scaling (MLP on 8x8 digits)"


def run(out_dir: Path, *, seeds: list[int] | None = None, smoke: bool = False, progress: bool = True,
        execution: Execution = Execution()) -> dict:
    """Select, tune and train; write results.json, table.md, plot.png and fb_trace.png."""
    started = time.perf_counter()
    out_dir = check_output_dir(Path(out_dir).resolve())  # the cost report path is part of the cached tasks
    seeds = study_seeds(seeds, smoke)
    execution = dataclasses.replace(execution, progress=progress and execution.progress)
    task_dir = out_dir / "tasks"
    base, b = base_config(smoke), budget(smoke)
    epochs = base.optim.epochs
    p = preliminary(base, b, out_dir=out_dir, task_dir=task_dir, execution=execution, progress=progress)
    a = plan_arms(base, p, task_dir=task_dir, execution=execution)
    arms_started = time.perf_counter()
    results, tuning = run_study(a.arms, seeds, out_dir, execution=execution)
    arms_seconds = time.perf_counter() - arms_started
    summaries = summarize(a.arms, results, tuning, margin_pt=ACCURACY_DROP_PT, paper=PAPER_ACCOUNTING)
    by_name = {s.name: s for s in summaries}
    m = measure(results, a, p, by_name)
    targets = abvs_report.targets(m, a, p, by_name)
    notes = [*p.notes, *abvs_report.notes(m, a, p, epochs=epochs)]
    seconds = {"scan": p.scan["seconds"], "cost_report": p.cost["seconds"], "schedule_selection": p.schedule["seconds"],
               "baseline_searches": sum(search["seconds"] for search in a.searches.values()),
               "tuning_and_arms": arms_seconds}
    extra = abvs_report.extra(m, a, p, epochs=epochs, seconds=seconds)
    plot_traces(out_dir / "fb_trace.png", results, [arm.name for arm in a.arms], p.lsfb, m.savings)
    seconds["total"] = time.perf_counter() - started
    notes.append(f"wall time: scan {seconds['scan']:.0f} s, cost report {seconds['cost_report']:.0f} s, schedule "
                 f"selection {seconds['schedule_selection']:.0f} s, baseline searches "
                 f"{seconds['baseline_searches']:.0f} s, tuning and arms {seconds['tuning_and_arms']:.0f} s, "
                 f"total {seconds['total']:.0f} s (of this invocation: cached runs add nothing); training time summed "
                 f"over the evaluation runs: {sum(summary.seconds for summary in summaries):.0f} s")
    return write_report(out_dir, name=NAME, title=TITLE, summaries=summaries, claim=CLAIM, targets=targets,
                        seeds=seeds, settings=abvs_report.settings(base, p, a.arms, epochs=epochs), notes=notes,
                        extra=extra, tuning=tuning, readme=abvs_report.readme_row(m, targets, by_name[a.abvs_name]))


__all__ = ["NAME", "PAPER_REFERENCE", "TITLE", "headline", "restated_notes", "run"]
