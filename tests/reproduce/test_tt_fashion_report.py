"""``tt-fashion``'s analysis on hand-made runs: the readings, the charged passes, the seed-level goal test, the
weight choice, the two-worker schedule."""

import dataclasses
import math

import pytest

from codesign.reproduce.stats import above_bound
from codesign.reproduce.tt_fashion import choose_weight
from codesign.reproduce.tt_fashion_budget import budget, macs_per_sample, memory_bits
from codesign.reproduce.tt_fashion_report import (LOSS_BOUND_PT, PAPER_DROP_PT, charged_macs, compare, goals,
                                                  loss_tests, lpt_seconds, mode_order_test, readings)

START = {"layers.0": [1, 16, 16, 16, 1], "layers.1": [1, 8, 16, 16, 1]}
PRUNED = {"layers.0": [1, 4, 6, 4, 1], "layers.1": [1, 2, 3, 2, 1]}


def test_the_goal_bound_is_the_papers_drop_and_the_margin():
    assert PAPER_DROP_PT == 4.41 and LOSS_BOUND_PT == pytest.approx(-5.41)


def test_the_one_sided_test_on_hand_made_differences():
    """d = (-3, -4, -5): mean -4, s = 1, se = 1/sqrt(3); t = 1.41 / se = 2.4422 on 2 df: p = 0.0673 (t-table),
    lower bound -4 - 2.92 se = -5.686 < -5.41: not rejected. d = (-1, -2, -3): t = 5.906, p = 0.0137, rejected."""
    test = above_bound([-3.0, -4.0, -5.0], -5.41)
    assert test.p == pytest.approx(0.5 * (1 - 2.4422 / math.sqrt(2.4422 ** 2 + 2)), abs=1e-4)  # t's sf on 2 df
    assert test.p == pytest.approx(0.0673, abs=1e-4) and not test.rejected
    assert test.lower == pytest.approx(-4 - 2.919986 / math.sqrt(3), abs=1e-5)
    test = above_bound([-1.0, -2.0, -3.0], -5.41)
    assert test.rejected and test.p == pytest.approx(0.0137, abs=1e-4) and test.lower > -5.41
    for values in ([-1.0], [-1.0, -1.0, -1.0]):  # no spread: nothing claimed, however far above the bound
        assert not above_bound(values, -5.41).rejected and above_bound(values, -5.41).p == 1.0
    with pytest.raises(ValueError, match="bound"):
        above_bound([1.0, 2.0], float("nan"))


def _run(kind: str, seed: int, curves: list[tuple[float, float]], ranks=None, weight: float = 0.0) -> dict:
    """A hand-made record: (validation, test) accuracy per epoch, every epoch at ``ranks``."""
    epochs = [{"epoch": e, "loss": 1.0, "validation_accuracy": v, "test_accuracy": t, "ranks": ranks, "seconds": 1.0}
              for e, (v, t) in enumerate(curves)]
    return {"job": {"kind": kind, "seed": seed, "prior_weight": weight}, "epochs": epochs, "final_ranks": ranks,
            "pretrain": {"epochs": [{"epoch": 0, "test_accuracy": 90.0, "ranks": ranks}], "images_per_epoch": 100,
                         "images": {"train": 100, "test": 10}},
            "images_per_epoch": 1000, "images": {"train": 1000, "validation": 50, "test": 200},
            "prune_events": [], "train_accuracy": 95.0, "steps": 2, "seconds": {"total": 1.0}}


def test_the_three_readings_pick_their_epochs_with_their_models_memory():
    b = budget(smoke=False)
    record = _run("tt-fixed", 0, [(80.0, 81.0), (85.0, 84.0), (85.0, 83.0), (84.0, 86.0)], START)
    record["epochs"][2]["ranks"] = PRUNED  # the model of epoch 2 was pruned
    read = readings(b, record)
    assert read["best_test"]["epoch"] == 3 and read["best_test"]["test_accuracy"] == 86.0
    assert read["last"]["epoch"] == 3
    assert read["best_validation"]["epoch"] == 2  # a tie with epoch 1: the later epoch
    assert read["best_validation"]["test_accuracy"] == 83.0
    assert read["best_validation"]["memory_bits"] == memory_bits(b, "tt-fixed", PRUNED) == 11_600
    assert read["last"]["memory_bits"] == 84_560


def test_every_pass_is_charged_once():
    b = budget(smoke=False)
    record = _run("fp32", 0, [(80.0, 81.0), (85.0, 84.0)])
    dense = macs_per_sample(b, "fp32", None)
    macs = charged_macs(b, record)
    assert macs["pretrain"] == 100 * dense["training"] + 10 * dense["forward"]
    assert macs["train"] == 2 * 1000 * dense["training"]
    assert macs["validation"] == 2 * 50 * dense["forward"] and macs["test"] == 2 * 200 * dense["forward"]
    assert macs["train_accuracy"] == 1000 * dense["forward"] and macs["test_passes"] == 2
    assert macs["total"] == sum(macs[k] for k in ("pretrain", "train", "validation", "test", "train_accuracy"))
    assert macs["test_share"] == pytest.approx(400 * dense["forward"] / macs["total"])


def _arms(differences: list[float], *, bits: dict | None = None) -> dict:
    """fp32 at 90 % and the proposal at 90 + d per seed (best-validation = last epoch), its model at ``bits``."""
    b = budget(smoke=False)
    from codesign.reproduce.tt_fashion_report import arm_runs

    records = {"fp32": [_run("fp32", s, [(89.0, 90.0)]) for s in range(len(differences))],
               "tt-fixed-prior": [_run("tt-fixed", s, [(88.0, 90.0 + d)], bits or PRUNED, 1.0)
                                  for s, d in enumerate(differences)],
               "tt-fixed-no-prior": [_run("tt-fixed", s, [(88.0, 90.0 + d)], START) for s, d in enumerate(differences)]}
    return arm_runs(records, b)


def test_the_goals_on_hand_made_seeds():
    runs = _arms([-1.0, -2.0, -3.0])
    comparisons, tests = compare(runs), loss_tests(runs)
    assert tests["tt-fixed-prior"]["best_validation"]["rejected"]
    targets, verdict = goals(comparisons, tests, 3)
    assert [t.met for t in targets] == [True, True] and verdict == "met"  # 1,461.9x at every seed
    assert comparisons["best_validation"]["prior_effect"]["tt-fixed-prior vs tt-fixed-no-prior"][
        "memory_reduction"]["values"] == [84_560 / 11_600] * 3
    runs = _arms([-3.0, -4.0, -5.0], bits=START)  # a loss the test cannot bound, and 200x
    targets, verdict = goals(compare(runs), loss_tests(runs), 3)
    assert [t.met for t in targets] == [False, False] and verdict == "**not met**"
    runs = _arms([-1.0, -2.0])  # two seeds: no verdict on accuracy, whatever the test says
    targets, verdict = goals(compare(runs), loss_tests(runs), 2)
    assert not targets[0].met and "n < 3" in targets[0].measured and verdict == "accuracy **not met** and memory met"


def test_the_weight_choice_reads_validation_only():
    trials = [{"validation_accuracy": 86.0, "memory_bits": 60_000},
              {"validation_accuracy": 85.2, "memory_bits": 40_000},  # within 4.41 pt of 89.5: least memory wins
              {"validation_accuracy": 84.0, "memory_bits": 20_000}]  # 5.5 pt below: not chosen
    index, rule = choose_weight(trials, 89.5)
    assert index == 1 and "least memory" in rule
    index, rule = choose_weight(trials, 95.0)  # none close enough: the most accurate
    assert index == 0 and "most accurate" in rule


def test_the_two_worker_schedule_is_longest_first():
    assert lpt_seconds([3, 3, 2, 2, 2], 2) == 7  # 3|3, 5|3, 5|5, 7|5
    assert lpt_seconds([5, 4, 3], 2) == 7 and lpt_seconds([5, 4, 3], 1) == 12 and lpt_seconds([], 2) == 0
    with pytest.raises(ValueError):
        lpt_seconds([1.0], 0)


def test_a_fewest_order_run_is_read_at_its_order_and_refused_at_another():
    """A run of the fewest order reads its bits at that order's layers (its second layer's first core: 1 x 1 x 4
    x 4, not ours' 1 x 1 x 8 x 8); a record whose trained bits are not that order's is refused, not misread."""
    b = budget(smoke=False)
    fewest = dataclasses.replace(b, modes="fewest")
    ranks = {"layers.0": [1, 16, 16, 16, 1], "layers.1": [1, 4, 16, 16, 1]}
    record = _run("tt-fixed", 0, [(80.0, 81.0), (85.0, 84.0)], ranks, weight=1.0)
    record["job"]["modes"] = "fewest"
    record["model_bits"] = memory_bits(fewest, "tt-fixed", ranks)
    assert readings(b, record)["last"]["memory_bits"] == record["model_bits"] == 69_008  # the study's start
    assert memory_bits(b, "tt-fixed", START) == 84_560
    record["model_bits"] += 4
    with pytest.raises(ValueError, match="another mode order"):
        readings(b, record)


def test_the_mode_order_test_pairs_the_fewest_arm_with_the_proposal():
    b = budget(smoke=False)
    proposal = [{"readings": {"best_validation": {"test_accuracy": t, "memory_bits": 30_000.0}}} for t in (88, 87, 86)]
    fewest = [{"readings": {"best_validation": {"test_accuracy": t, "memory_bits": 33_000.0}}}
              for t in (88.5, 86.5, 86.5)]
    found = mode_order_test(b, {"tt-fixed-prior": proposal, "tt-fixed-prior-fewest": fewest})
    assert found["accuracy_difference_pt"]["values"] == [0.5, -0.5, 0.5]
    assert found["memory_ratio"]["values"] == pytest.approx([1.1] * 3) and found["tost"]["n"] == 3
    macs = found["training_macs_per_sample"]
    assert macs["tt-fixed-prior"] == 9_860_992 and macs["tt-fixed-prior-fewest"] == 2_645_888
    assert mode_order_test(b, {"tt-fixed-prior": proposal}) is None
