"""ABVS's own choices on preliminary seeds: the schedule rule, its grid widened past an edge, and the baselines'
search of as many runs."""

import pytest

from codesign.reproduce.abvs_budget import BASELINE_SEARCH, base_config
from codesign.reproduce.abvs_search import choose_schedule, schedule_grid_widening, select_optimiser
from codesign.reproduce.common import Execution
from codesign.reproduce.protocol import MAX_WIDENINGS


def test_the_baseline_search_matches_the_schedule_search_in_size(tmp_path):
    base = base_config(True)
    empty = select_optimiser("fp32", base, seeds=(100,), count=0, task_dir=tmp_path, execution=Execution())
    assert empty["chosen"] == {} and empty["runs"] == 0 and empty["candidates"] == []  # nothing to match: no run
    with pytest.raises(ValueError, match=f"fewer than the {len(BASELINE_SEARCH) + 1} schedule candidates"):
        select_optimiser("fp32", base, seeds=(100,), count=len(BASELINE_SEARCH) + 1, task_dir=tmp_path,
                         execution=Execution())
    assert not any(tmp_path.iterdir())  # refused before anything was written


def test_the_baseline_search_covers_the_schedule_grid_and_its_widest_widening():
    # 3 gaps x 2 intervals, then at most two widenings of 3 (a new interval for every gap) candidates each
    assert len(BASELINE_SEARCH) >= 3 * 2 + MAX_WIDENINGS * 3
    assert BASELINE_SEARCH[0] == {"optim.weight_decay": 5e-4, "optim.momentum": 0.9}  # the default first
    assert len({tuple(sorted(s.items())) for s in BASELINE_SEARCH}) == len(BASELINE_SEARCH)


@pytest.mark.parametrize("gaps, intervals, chosen, lsfb, expected", [
    # FB 5 -> 6 (gap 1, the grid's smallest) cannot go lower (gap 0 is the fixed-FB arm); interval 4 doubles
    ([3, 2, 1], [4, 2], {"fb_min": 5, "check_every_epochs": 4}, 6, ("check_every_epochs", 8)),
    # the widest gap continues by its arithmetic step, before the interval is looked at
    ([3, 2, 1], [4, 2], {"fb_min": 3, "check_every_epochs": 2}, 6, ("gap", 4)),
    # a gap of 4 would leave FB_min 0 at least sufficient FB 4: the interval halves instead
    ([3, 2, 1], [4, 2], {"fb_min": 1, "check_every_epochs": 2}, 4, ("check_every_epochs", 1)),
    # inside the grid on both axes: no widening
    ([3, 2, 1], [8, 4, 2], {"fb_min": 4, "check_every_epochs": 4}, 6, None),
    # an interval longer than the 50-epoch run is no schedule
    ([3, 2, 1], [32, 64], {"fb_min": 5, "check_every_epochs": 64}, 6, None),
])
def test_the_schedule_grid_widens_past_the_edge_its_choice_landed_on(gaps, intervals, chosen, lsfb, expected):
    assert schedule_grid_widening(gaps, intervals, chosen, lsfb=lsfb, epochs=50) == expected


def _candidate(accuracy, ratio, within):
    return {"validation_accuracy_mean": accuracy, "eq2_ratio_vs_fixed_mean": ratio, "within_accuracy": within}


def test_the_schedule_rule_takes_the_least_energy_within_the_bound_else_the_most_accurate():
    cheap, accurate, outside = _candidate(95.0, 0.80, True), _candidate(96.0, 0.90, True), _candidate(90.0, 0.5, False)
    assert choose_schedule([accurate, cheap, outside]) is cheap  # the cheapest outside the bound is not taken
    tie = _candidate(95.5, 0.80, True)
    assert choose_schedule([cheap, tie]) is tie  # equal energy: the more accurate
    assert choose_schedule([outside, _candidate(91.0, 0.9, False)])["validation_accuracy_mean"] == 91.0
