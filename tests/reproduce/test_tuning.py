"""Choosing on the validation split: the shared rule, grids widened past the edge a choice lands on, pinned choices."""

import pytest

from codesign.reproduce.arms import Arm
from codesign.reproduce.common import Execution
from codesign.reproduce.protocol import MAX_WIDENINGS, TUNING_SEEDS
from codesign.reproduce.tuning import UnpinnedArms, best_mean, pinned_tuning, tune_arms, tuning_key, widened_value
from tests.reproduce.conftest import TINY


def test_a_choice_on_the_edge_widens_the_grid_and_every_widening_is_recorded(study):
    _, arms, _, tuning = study
    for arm in arms:
        entry = tuning[arm.name]
        grid = entry["grid"]["optim.lr"]
        assert len(entry["widenings"]) <= MAX_WIDENINGS
        assert sorted(grid) == sorted({0.1, 0.01} | {w["added"] for w in entry["widenings"]})
        for number, widening in enumerate(entry["widenings"], start=1):
            assert widening["round"] == number
            assert [t["setting"]["optim.lr"] for t in entry["trials"] if t["widening"] == number] == [widening["added"]]
        chosen = entry["chosen"]["optim.lr"]
        on_edge = chosen in (grid[0], grid[-1])
        # either the choice ends inside its grid, or the limit of widenings was reached and the report says so
        assert (not on_edge and entry["edge"] == []) or (len(entry["widenings"]) == MAX_WIDENINGS
                                                          and entry["edge"] == ["optim.lr"])


@pytest.mark.parametrize(("grid", "chosen", "expected"), [
    ((0.2, 0.1, 0.05), 0.2, 0.4), ((0.2, 0.1, 0.05), 0.05, 0.025), ((0.05, 0.1, 0.2), 0.2, 0.4),
    ((1e-3, 3e-4, 1e-4), 1e-4, 1e-4 / 3), ((4, 2), 4, 8), ((4, 2), 2, 1), ((3, 2, 1), 3, 4), ((3, 2, 1), 1, 0),
    ((0.0, 0.5, 1.0), 0.0, -0.5), ((0.2, 0.1, 0.05), 0.1, None), (("a", "b"), "a", None), ((0.1,), 0.1, None),
])
def test_a_grid_continues_its_own_step_beyond_the_edge(grid, chosen, expected):
    new = widened_value(grid, chosen)
    assert new == (pytest.approx(expected, rel=1e-5) if isinstance(expected, float) else expected)


def test_the_shared_rule_takes_the_highest_mean_and_the_first_of_equals():
    trials = [{"validation_accuracy": 90.0}, {"validation_accuracy": 92.0}, {"validation_accuracy": 92.0}]
    assert best_mean(trials) == 1
    assert best_mean([{"m": 1.0}, {"m": 3.0}], key="m") == 1


def test_the_first_tuning_seed_keeps_the_key_trials_had_before_tuning_crossed_seeds():
    assert tuning_key("psg", 2, TUNING_SEEDS[0]) == "tune,psg,2"
    assert tuning_key("psg", 2, TUNING_SEEDS[1]) == f"tune,psg,2,seed={TUNING_SEEDS[1]}"


def test_pinned_choices_run_no_trial_and_refuse_an_arm_they_do_not_name(tmp_path):
    arms = [Arm("a", TINY, baseline=True, tune={"optim.lr": (0.1, 0.01)})]
    with pinned_tuning({"a": {"optim.lr": 0.05}}):
        assert tune_arms(arms, tmp_path, Execution()) == {"a": {"trials": [], "chosen": {"optim.lr": 0.05},
                                                                "pinned": True}}
        with pytest.raises(UnpinnedArms, match="b") as refused:
            tune_arms([*arms, Arm("b", TINY, tune={"optim.lr": (0.1, 0.01)})], tmp_path, Execution())
        assert refused.value.arms == ["b"]
    assert not any(tmp_path.iterdir())
    # one candidate per arm: nothing to choose, nothing trained
    assert tune_arms([Arm("a", TINY, baseline=True)], tmp_path, Execution()) == {"a": {"trials": [], "chosen": {}}}
