import math

import numpy as np
import pytest

from codesign.reproduce.stats import (
    Interval,
    accuracy_verdict,
    bootstrap_interval,
    loss_within,
    paired_differences,
    paired_ratios,
)


def test_interval_covers_the_mean_and_shrinks_with_more_seeds():
    rng = np.random.default_rng(1)
    few = bootstrap_interval(rng.normal(1.0, 1.0, 8))
    many = bootstrap_interval(rng.normal(1.0, 1.0, 200))
    assert few.low < few.mean < few.high
    assert many.high - many.low < few.high - few.low
    assert many.contains(1.0)


def test_interval_is_reproducible_and_close_to_normal_theory():
    values = np.random.default_rng(7).normal(0.0, 2.0, 400)
    first, second = bootstrap_interval(values), bootstrap_interval(values)
    assert first == second
    half_width = 1.96 * values.std(ddof=1) / math.sqrt(values.size)
    assert (first.high - first.low) / 2 == pytest.approx(half_width, rel=0.1)


def test_float_noise_around_zero_is_not_a_loss():
    # 97.333... - 97.5 and similar differences of percentages carry 1e-15 of rounding noise
    noisy = [-0.2222222222222, 0.0 - 3.5e-15, -3.5e-15, 0.2222222222222 - 0.2222222222222] * 2
    interval = bootstrap_interval(noisy)
    assert interval.high == 0.0 and accuracy_verdict(interval) == "no significant loss"


def test_constant_and_single_values():
    assert bootstrap_interval([0.5] * 8) == Interval(0.5, 0.5, 0.5, 8)
    assert bootstrap_interval([3.0]) == Interval(3.0, 3.0, 3.0, 1)


@pytest.mark.parametrize("values", [[], [1.0, float("nan")], [float("inf")]])
def test_bad_values_are_refused(values):
    with pytest.raises(ValueError):
        bootstrap_interval(values)


def test_paired_helpers_keep_the_sign_convention():
    assert paired_differences([97.0, 98.0], [98.0, 98.0]) == [-1.0, 0.0]
    assert paired_ratios([2.0, 3.0], [4.0, 4.0]) == [0.5, 0.75]
    with pytest.raises(ValueError, match="length"):
        paired_differences([1.0], [1.0, 2.0])
    with pytest.raises(ValueError, match="zero"):
        paired_ratios([1.0], [0.0])


def test_verdict_follows_the_interval():
    assert accuracy_verdict(Interval(-0.3, -0.9, 0.2, 8)) == "no significant loss"
    assert accuracy_verdict(Interval(-1.2, -1.8, -0.6, 8)) == "significant loss of 1.20 pt"
    assert accuracy_verdict(Interval(-0.5, -0.8, -0.2, 8), margin=1.0).endswith("(within the 1 pt allowed)")
    assert accuracy_verdict(Interval(0.6, 0.1, 1.1, 8)) == "significant gain of 0.60 pt"
    assert loss_within(Interval(-0.5, -0.9, -0.1, 8), 1.0)
    assert not loss_within(Interval(-0.5, -1.1, 0.1, 8), 1.0)
    with pytest.raises(ValueError):
        accuracy_verdict(Interval(0, 0, 0, 1), margin=-1)
