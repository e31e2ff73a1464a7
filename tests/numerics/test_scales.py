"""The scale rules (codesign.numerics.scales.aim_scale): exact aims at the tensor, tracked at earlier steps' mean."""

from __future__ import annotations

import math

import pytest

from codesign.numerics.scales import NO_MEAN, UNSET, aim_scale, check_scale_rule, mean_abs_frac_bits

RULE = dict(bits=8, headroom_bits=3)


def frac_of(mean: float) -> int:
    """The range rule by hand: mean |code| = mean * 2^frac in [2^(8-2-3), 2^(8-1-3)) = [8, 16)."""
    return next(f for f in range(-64, 65) if 8 <= mean * 2.0 ** f < 16)


def test_the_range_rule_by_hand():
    for mean in (1e-6, 0.013, 0.5, 1.0, 3.7, 250.0):
        assert mean_abs_frac_bits(mean, fallback=0, **RULE) == frac_of(mean)


def test_exact_aims_at_the_tensor_itself():
    used, kept, mean = aim_scale(0.5, rule="exact", current=2, mean=NO_MEAN, momentum=0.9, update=True, **RULE)
    assert used == kept == frac_of(0.5) and mean == NO_MEAN
    assert aim_scale(0.5, rule="exact", current=2, mean=NO_MEAN, momentum=0.9, update=False, **RULE)[:2] == (2, 2)


def test_tracked_rounds_at_the_earlier_scale_and_aims_the_next_at_the_running_mean():
    # first sight: aimed at the tensor, its mean starts the running mean
    used, kept, mean = aim_scale(0.5, rule="tracked", current=UNSET, mean=NO_MEAN, momentum=0.75, update=True, **RULE)
    assert used == kept == frac_of(0.5) and mean == 0.5
    # a tensor 16x larger: rounded at the old scale; the mean moves by a quarter of the way
    used, kept, mean = aim_scale(8.0, rule="tracked", current=kept, mean=mean, momentum=0.75, update=True, **RULE)
    assert used == frac_of(0.5)
    assert mean == 0.75 * 0.5 + 0.25 * 8.0 == 2.375 and kept == frac_of(2.375) != used
    # momentum 0: the next scale is the exact scale of this tensor, one step late
    assert aim_scale(8.0, rule="tracked", current=3, mean=0.5, momentum=0.0, update=True, **RULE) == \
        (3, frac_of(8.0), 8.0)


def test_tracked_keeps_everything_on_zeros_and_in_evaluation():
    for observed, update in ((0.0, True), (math.nan, True), (math.inf, True), (4.0, False)):
        assert aim_scale(observed, rule="tracked", current=5, mean=0.3, momentum=0.9, update=update, **RULE) == \
            (5, 5, 0.3)
    # an unset tracker meeting zeros takes the fallback, and still has no mean
    assert aim_scale(0.0, rule="tracked", current=UNSET, mean=NO_MEAN, momentum=0.9, update=True, **RULE) == \
        (7, 7, NO_MEAN)


@pytest.mark.parametrize("rule, momentum, match", [("max", 0.9, "scale_rule"), ("tracked", 1.0, "scale_momentum"),
                                                    ("tracked", -0.1, "scale_momentum"),
                                                    ("tracked", True, "scale_momentum")])
def test_bad_rules_are_refused(rule, momentum, match):
    with pytest.raises(ValueError, match=match):
        check_scale_rule(rule, momentum)
