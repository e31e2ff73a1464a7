import math
from pathlib import Path

import numpy as np
import pytest
from scipy import stats as scipy_stats

from codesign.reproduce.stats import (
    Interval,
    accuracy_verdict,
    bootstrap_interval,
    paired_differences,
    paired_ratios,
    seed_level,
    seed_means,
    t_interval,
    tost,
)


def test_interval_covers_the_mean_and_shrinks_with_more_seeds():
    rng = np.random.default_rng(1)
    few = bootstrap_interval(rng.normal(1.0, 1.0, 8))
    many = bootstrap_interval(rng.normal(1.0, 1.0, 200))
    assert few.low < few.mean < few.high
    assert many.high - many.low < few.high - few.low
    assert many.low <= 1.0 <= many.high


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
    assert accuracy_verdict(Interval(0.6, 0.1, 1.1, 8)) == "significant gain of 0.60 pt"
    assert accuracy_verdict(Interval(-0.5, -0.5, -0.5, 1)).startswith("one seed: -0.50 pt")


def test_t_interval_matches_the_t_table():
    # 1..5: mean 3, s = sqrt(2.5), t_{4, 0.975} = 2.7764 (printed t tables)
    interval = t_interval([1.0, 2.0, 3.0, 4.0, 5.0])
    half = 2.7764 * math.sqrt(2.5) / math.sqrt(5)
    assert interval.n == 5 and interval.mean == 3.0
    assert (interval.low, interval.high) == pytest.approx((3.0 - half, 3.0 + half), abs=1e-4)
    assert t_interval([2.5]) == Interval(2.5, 2.5, 2.5, 1)
    with pytest.raises(ValueError):
        t_interval([])


def test_bootstrap_is_narrower_than_t_at_eight_seeds():
    values = np.random.default_rng(3).normal(0.0, 1.0, 8)
    boot, t = bootstrap_interval(values), t_interval(values)
    assert boot.high - boot.low < t.high - t.low


def test_tost_decides_as_the_90_percent_interval_inside_the_margin():
    rng = np.random.default_rng(11)
    decided = set()
    for _ in range(200):
        values = rng.normal(rng.uniform(-3, 3), rng.uniform(0.2, 2.0), 8)
        result = tost(values, 2.0)
        inside = -2.0 < result.interval.low and result.interval.high < 2.0
        assert result.interval.confidence == pytest.approx(0.90)
        assert result.equivalent == inside == (result.p < 0.05)
        decided.add(result.equivalent)
    assert decided == {True, False}  # both outcomes occur: the test can fail


def test_tost_p_values_by_hand():
    # mean 0.5, s = 1, n = 8: se = 1/sqrt(8); upper test t = (0.5 - 2) / se = -4.243 at 7 df -> p = 0.0019
    values = [0.5 + v for v in (-1, 1, -1, 1, -1, 1, -1, 1)]
    values = [0.5 + (v - 0.5) * math.sqrt(7 / 8) for v in values]  # sample sd exactly 1
    result = tost(values, 2.0)
    assert result.mean == pytest.approx(0.5) and result.n == 8
    assert result.p_upper == pytest.approx(0.00192, abs=5e-5)
    assert result.p_lower < 1e-4 and result.equivalent
    assert not tost(values, 0.5).equivalent
    assert "TOST at ±2 pt: equivalent" in result.text()


def test_tost_refuses_what_it_cannot_test():
    with pytest.raises(ValueError, match="margin"):
        tost([0.1, 0.2], 0.0)
    with pytest.raises(ValueError, match="alpha"):
        tost([0.1, 0.2], 1.0, alpha=0.6)
    assert not tost([0.0] * 8, 1.0).equivalent  # no spread, no test: nothing claimed
    assert not tost([0.3], 1.0).equivalent


def test_seed_means_average_each_seed_over_its_splits_in_first_seen_order():
    # splits outer, seeds inner, as a crossed study records its runs
    values = [1.0, 4.0, -2.0, 3.0, 6.0, 0.0, 2.0, 2.0, -4.0]
    seeds = [5, 7, 9, 5, 7, 9, 5, 7, 9]
    order, means = seed_means(values, seeds)
    assert order == [5, 7, 9]
    assert means == pytest.approx([2.0, 4.0, -2.0])  # (1 + 3 + 2) / 3, (4 + 6 + 2) / 3, (-2 + 0 - 4) / 3


def test_seed_means_refuse_unbalanced_or_mismatched_runs():
    with pytest.raises(ValueError, match="same number of runs"):
        seed_means([1.0, 2.0, 3.0], [0, 0, 1])
    with pytest.raises(ValueError, match="3 values but 2 seeds"):
        seed_means([1.0, 2.0, 3.0], [0, 1])


def test_seed_level_intervals_are_those_of_the_seed_means():
    values = [1.0, 4.0, -2.0, 3.0, 6.0, 0.0, 2.0, 2.0, -4.0]
    level = seed_level(values, [0, 1, 2] * 3)
    assert level.n == 3 and level.runs == 9 and level.means == pytest.approx((2.0, 4.0, -2.0))
    assert level.t == t_interval([2.0, 4.0, -2.0]) and level.bootstrap == bootstrap_interval([2.0, 4.0, -2.0])
    # the t-interval over three seed means is wider than over the nine runs: the seed is the unit
    assert level.t.high - level.t.low > t_interval(values).high - t_interval(values).low
    assert level.as_dict()["seeds"] == [0, 1, 2] and level.as_dict()["t"]["n"] == 3


def test_smd_tost_over_seed_means_matches_a_hand_computation():
    """The committed smd study: TOST at +-1 pt gives p = 0.002 over the 9 runs but 0.052 over the 3 seed means."""
    import json

    payload = json.loads((Path(__file__).resolve().parents[2] / "results" / "smd" / "results.json").read_text())
    arms = {arm["name"]: arm["per_seed"] for arm in payload["arms"]}
    rows, base = arms["smd_x4/3"], arms["smb"]
    differences = [r["test_accuracy"] - b["test_accuracy"] for r, b in zip(rows, base)]
    _, means = seed_means(differences, [r["seed"] for r in rows])
    # by hand: the larger one-sided p of t = (mean +- 1) / (s / sqrt 3) at 2 degrees of freedom
    mean, se = float(np.mean(means)), float(np.std(means, ddof=1)) / math.sqrt(3)
    by_hand = max(scipy_stats.t.sf((mean + 1.0) / se, 2), scipy_stats.t.cdf((mean - 1.0) / se, 2))
    assert tost(means, 1.0).p == pytest.approx(by_hand, rel=1e-12)
    assert round(by_hand, 3) == 0.052 and not tost(means, 1.0).equivalent
    assert round(tost(differences, 1.0).p, 3) == 0.002 and tost(differences, 1.0).equivalent
