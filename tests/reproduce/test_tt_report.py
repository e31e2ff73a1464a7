"""The ``tt`` report's comparisons, verdict wording and results-table figure."""

import json
from pathlib import Path

import pytest

from codesign.reproduce.tt_budget import (ARMS, BASELINE, FIXED_PLAIN, FIXED_PRIOR, FIXED_PRIOR_DENSE,
                                          FIXED_PRIOR_TRACKED, MAIN_ARM, TT_ARMS)
from codesign.reproduce.tt_report import (PAPER_REFERENCES, PRIOR_MARGIN_PT, ROUTE_MARGIN_PT, SCALE_RULE_MARGIN_PT,
                                          TOST_MARGIN_PT, compare, headline, judged, pruning_summary,
                                          targets_and_verdict)

RESULTS = Path(__file__).resolve().parents[2] / "results"


def test_comparisons_pair_every_arm_with_the_baseline_and_the_prior_with_its_absence():
    accuracy = {arm: [90.0 + i, 91.0 - i, 92.0, 90.5] for i, arm in enumerate(ARMS)}
    memory = {arm: [1000.0 * (i + 1)] * 4 for i, arm in enumerate(ARMS)}
    memory[BASELINE] = [300_000.0] * 4
    comparisons = compare(accuracy, memory)
    assert set(comparisons["against_baseline"]) == set(TT_ARMS)
    main = comparisons["against_baseline"][MAIN_ARM]
    assert main["memory_reduction"]["bootstrap"]["mean"] == pytest.approx(300_000 / 2000)
    difference = main["accuracy_difference_pt"]
    assert difference["tost"]["margin"] == TOST_MARGIN_PT and difference["n"] == 4
    effect = comparisons["prior_effect"][f"{FIXED_PRIOR} vs {FIXED_PLAIN}"]
    assert effect["accuracy_difference_pt"]["tost"]["margin"] == PRIOR_MARGIN_PT
    targets, verdict = targets_and_verdict(comparisons)
    assert not targets[0].met and "not met" in verdict  # 150x is short of 292x
    assert set(comparisons["route_effect"]) == {f"{FIXED_PRIOR_DENSE} vs {FIXED_PRIOR}"}


def test_tracked_scales_are_paired_against_the_proposal_with_a_tost_at_one_point():
    accuracy = {arm: [95.0, 96.0, 94.5, 95.5, 96.5] for arm in ARMS}
    accuracy[FIXED_PRIOR_TRACKED] = [95.2, 95.8, 94.6, 95.5, 96.4]  # within 0.2 pt of the proposal, seed by seed
    memory = {arm: [2000.0] * 5 for arm in ARMS}
    memory[FIXED_PRIOR_TRACKED] = [1000.0, 2000.0, 4000.0, 2000.0, 2000.0]
    memory[BASELINE] = [300_000.0] * 5
    comparisons = compare(accuracy, memory)
    assert FIXED_PRIOR_TRACKED in comparisons["against_baseline"]
    assert set(comparisons["scale_rule_effect"]) == {f"{FIXED_PRIOR_TRACKED} vs {MAIN_ARM}"}
    effect = comparisons["scale_rule_effect"][f"{FIXED_PRIOR_TRACKED} vs {MAIN_ARM}"]
    difference = effect["accuracy_difference_pt"]
    assert difference["values"] == pytest.approx([0.2, -0.2, 0.1, 0.0, -0.1])  # tracked − exact, per seed
    assert difference["n"] == 5 and difference["bootstrap"]["mean"] == pytest.approx(0.0, abs=1e-9)
    assert SCALE_RULE_MARGIN_PT == ROUTE_MARGIN_PT == 1.0 and difference["tost"]["margin"] == SCALE_RULE_MARGIN_PT
    assert difference["tost"]["equivalent"]
    assert effect["memory_reduction"]["values"] == pytest.approx([2.0, 1.0, 0.5, 1.0, 1.0])  # exact bits / tracked
    accuracy[FIXED_PRIOR_TRACKED] = [a - 3.0 + d for a, d in zip(accuracy[MAIN_ARM], (0.2, -0.2, 0.1, 0.0, -0.1))]
    # about 3 pt worse: not equivalent at ±1 pt
    far = compare(accuracy, memory)["scale_rule_effect"][f"{FIXED_PRIOR_TRACKED} vs {MAIN_ARM}"]
    assert not far["accuracy_difference_pt"]["tost"]["equivalent"]


def test_pruning_summary_says_when_and_to_which_ranks_the_prior_pruned():
    paths = [{"ranks": [{"layers.0": [1, 4, 1]}, {"layers.0": [1, 2, 1]}], "memory_bits": [100, 60],
              "prune_events": [{"epoch": 1}]},
             {"ranks": [{"layers.0": [1, 4, 1]}, {"layers.0": [1, 4, 1]}], "memory_bits": [100, 100],
              "prune_events": []}]
    summary = pruning_summary(paths)
    assert summary["pruned_seeds"] == 1 and summary["first_prune_epoch"] == [1]
    assert summary["final_inner_rank_range"] == {"layers.0": [[2, 4]]} and summary["final_bits"] == [60, 100]


def test_the_headline_reads_the_memory_reduction_and_accuracy_difference_of_a_committed_report():
    payload = json.loads((RESULTS / "tt" / "results.json").read_text(encoding="utf-8"))
    reduction = payload["comparisons"]["against_baseline"][MAIN_ARM]["memory_reduction"]["bootstrap"]["mean"]
    assert headline(payload).startswith(f"{MAIN_ARM}: {reduction:.0f}× [")


def test_the_claims_restated_are_the_comparisons_recorded_with_their_paper_figures():
    payload = json.loads((RESULTS / "tt" / "results.json").read_text(encoding="utf-8"))
    claims = judged(payload)
    assert [(c.arm, c.reference, c.margin_pt) for c in claims[:len(TT_ARMS)]] == \
        [(arm, BASELINE, TOST_MARGIN_PT) for arm in payload["comparisons"]["against_baseline"]]
    assert [(c.arm, c.reference, c.margin_pt) for c in claims[len(TT_ARMS):]][0] == \
        (FIXED_PRIOR, FIXED_PLAIN, PRIOR_MARGIN_PT)
    assert {c.margin_pt for c in claims} == {TOST_MARGIN_PT, PRIOR_MARGIN_PT, ROUTE_MARGIN_PT}
    assert PAPER_REFERENCES[(MAIN_ARM, BASELINE)].accuracy_pct == 89.27
    assert PAPER_REFERENCES[(FIXED_PRIOR, FIXED_PLAIN)].accuracy_pct == 86.67
    assert PAPER_REFERENCES[(FIXED_PRIOR_DENSE, FIXED_PRIOR)].accuracy_pct is None
