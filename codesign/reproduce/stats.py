"""Paired comparisons over seeds: differences, 95 % bootstrap intervals, and the wording of a claim.

Every reproduction trains its technique arms and its baseline at the same
seeds, so seed ``s`` of an arm is compared with seed ``s`` of the baseline
(same initial weights, same data order). The difference of interest is
always *technique − baseline* (accuracy in points; an energy or BitOPs
*ratio* technique / baseline), one sign convention everywhere: a negative
accuracy difference is a loss.

The interval is a percentile bootstrap over seeds: resample the per-seed
differences with replacement ``resamples`` times (a fixed generator, so a
report is reproducible), take the mean of each resample, and read the 2.5th
and 97.5th percentiles. With eight seeds this is wide; that is the point.

Beside it stands the Student t-interval of the mean (:func:`t_interval`):
at eight seeds the percentile bootstrap is some 20 % narrower than the
t-interval (it ignores the uncertainty of the spread itself), so a table
gives both. An equivalence claim ("no loss larger than ``margin`` points")
is judged by two one-sided t-tests (:func:`tost`, Schuirmann 1987) at a
margin each reproduction fixes in its code before it runs: equivalence
holds when the (1 - 2 alpha) t-interval lies inside (-margin, +margin). A
bootstrap interval that merely touches zero is not an equivalence test.

Runs that share a seed are not independent replicates when seeds are crossed
with train/test splits: :func:`seed_means` and :func:`seed_level` make the
seed the unit (one mean per seed, then the same intervals and tests over the
seed means), as :mod:`codesign.reproduce.replication` restates every claim.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np
from scipy import stats as scipy_stats

CONFIDENCE = 0.95
TOST_ALPHA = 0.05  # each one-sided test; the matching two-sided interval is the 90 % t-interval
RESAMPLES = 10_000
DECIMALS = 12  # interval ends are rounded here: float noise (1e-15) must not turn a zero into a "significant" loss
BOOTSTRAP_SEED = 20_191_013  # fixed: the same differences always give the same interval


@dataclass(frozen=True)
class Interval:
    """Mean of the per-seed values and its bootstrap interval (same units as the values)."""

    mean: float
    low: float
    high: float
    n: int
    confidence: float = CONFIDENCE

    def as_dict(self) -> dict:
        return asdict(self)

    def text(self, digits: int = 2, unit: str = "") -> str:
        return f"{self.mean:+.{digits}f}{unit} [{self.low:+.{digits}f}, {self.high:+.{digits}f}]"


def bootstrap_interval(values: Sequence[float], *, confidence: float = CONFIDENCE, resamples: int = RESAMPLES,
                       seed: int = BOOTSTRAP_SEED) -> Interval:
    """Percentile-bootstrap interval of the mean of ``values`` (one value per seed)."""
    data = np.asarray(list(values), dtype=np.float64)
    if data.size == 0:
        raise ValueError("no values to bootstrap")
    if not np.all(np.isfinite(data)):
        raise ValueError(f"values must be finite, got {data.tolist()}")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    if data.size == 1:
        value = round(float(data[0]), DECIMALS)
        return Interval(value, value, value, 1, confidence)
    rng = np.random.default_rng(seed)
    means = data[rng.integers(0, data.size, size=(resamples, data.size))].mean(axis=1)
    tail = 100 * (1 - confidence) / 2
    low, high = np.percentile(means, [tail, 100 - tail])
    mean, low, high = (round(float(value), DECIMALS) + 0.0 for value in (data.mean(), low, high))  # + 0.0: no -0.0
    return Interval(mean, low, high, int(data.size), confidence)


def paired_differences(technique: Sequence[float], baseline: Sequence[float]) -> list[float]:
    """Per-seed ``technique - baseline``; the two lists are the same seeds in the same order."""
    if len(technique) != len(baseline):
        raise ValueError(f"paired lists differ in length: {len(technique)} vs {len(baseline)}")
    return [float(t) - float(b) for t, b in zip(technique, baseline)]


def paired_ratios(technique: Sequence[float], baseline: Sequence[float]) -> list[float]:
    """Per-seed ``technique / baseline`` (energy, BitOPs, memory)."""
    if len(technique) != len(baseline):
        raise ValueError(f"paired lists differ in length: {len(technique)} vs {len(baseline)}")
    if any(b == 0 for b in baseline):
        raise ValueError("a baseline value is zero; the ratio is undefined")
    return [float(t) / float(b) for t, b in zip(technique, baseline)]


def accuracy_verdict(difference: Interval) -> str:
    """How a paired accuracy difference (technique − baseline, points) may be stated when no equivalence margin
    was fixed: the wording follows the interval only, and a claim of a loss or a gain needs the whole interval on
    one side of zero.
    """
    if difference.n < 2:  # one seed has no spread: its zero-width "interval" shows nothing significant either way
        return f"one seed: {difference.mean:+.2f} pt, no interval, nothing significant claimed"
    if difference.high < 0:
        return f"significant loss of {-difference.mean:.2f} pt"
    if difference.low > 0:
        return f"significant gain of {difference.mean:.2f} pt"
    return "no significant loss"


def _checked(values: Sequence[float]) -> np.ndarray:
    data = np.asarray(list(values), dtype=np.float64)
    if data.size == 0:
        raise ValueError("no values")
    if not np.all(np.isfinite(data)):
        raise ValueError(f"values must be finite, got {data.tolist()}")
    return data


def t_interval(values: Sequence[float], *, confidence: float = CONFIDENCE) -> Interval:
    """Student t-interval of the mean of ``values`` (one value per seed): mean ± t_{n-1} * s / sqrt(n).

    One value has no spread: its interval is the value itself, as for the bootstrap.
    """
    data = _checked(values)
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    mean = float(data.mean())
    if data.size == 1:
        value = round(mean, DECIMALS) + 0.0
        return Interval(value, value, value, 1, confidence)
    half = float(scipy_stats.t.ppf(0.5 + confidence / 2, data.size - 1)) * float(data.std(ddof=1)) / math.sqrt(data.size)
    mean, low, high = (round(value, DECIMALS) + 0.0 for value in (mean, mean - half, mean + half))
    return Interval(mean, low, high, int(data.size), confidence)


@dataclass(frozen=True)
class Tost:
    """Two one-sided t-tests of ``mean`` against ``-margin`` and ``+margin`` (same units as the values).

    ``p_lower``: p of H0 "mean <= -margin"; ``p_upper``: p of H0 "mean >=
    +margin". ``equivalent`` when both are below ``alpha``, which is the same
    as ``interval`` (the (1 - 2 alpha) t-interval) lying inside the margin.
    """

    mean: float
    margin: float
    alpha: float
    n: int
    p_lower: float
    p_upper: float
    interval: Interval
    equivalent: bool

    @property
    def p(self) -> float:
        return max(self.p_lower, self.p_upper)

    def as_dict(self) -> dict:
        return {**asdict(self), "p": self.p}

    def text(self, unit: str = " pt") -> str:
        verdict = "equivalent" if self.equivalent else "not shown equivalent"
        return (f"TOST at ±{self.margin:g}{unit}: {verdict} (p = {self.p:.3g}, n = {self.n}; "
                f"{100 * self.interval.confidence:.0f} % t-interval {self.interval.low:+.2f}, {self.interval.high:+.2f})")


def tost(values: Sequence[float], margin: float, *, alpha: float = TOST_ALPHA) -> Tost:
    """Equivalence of the mean of ``values`` (per-seed differences) with zero within ``±margin``.

    ``margin`` must be fixed before the data are seen (a constant in the
    reproduction's code). Fewer than two values, or no spread, give no test:
    ``equivalent`` is then False with p = 1, nothing is claimed.
    """
    if not (isinstance(margin, (int, float)) and math.isfinite(margin) and margin > 0):
        raise ValueError(f"margin must be a finite number > 0, got {margin!r}")
    if not 0 < alpha < 0.5:
        raise ValueError(f"alpha must be in (0, 0.5), got {alpha}")
    data = _checked(values)
    interval = t_interval(data, confidence=1 - 2 * alpha)
    sd = float(data.std(ddof=1)) if data.size > 1 else 0.0
    if data.size < 2 or sd == 0.0:
        return Tost(float(data.mean()), float(margin), alpha, int(data.size), 1.0, 1.0, interval, False)
    se, df, mean = sd / math.sqrt(data.size), data.size - 1, float(data.mean())
    p_lower = float(scipy_stats.t.sf((mean + margin) / se, df))
    p_upper = float(scipy_stats.t.cdf((mean - margin) / se, df))
    return Tost(mean, float(margin), alpha, int(data.size), p_lower, p_upper, interval,
                bool(p_lower < alpha and p_upper < alpha))


@dataclass(frozen=True)
class OneSided:
    """A one-sided one-sample t-test of H0 "mean <= ``bound``" against H1 "mean > ``bound``" (units of the values).

    ``p``: its p-value (Student t, n - 1 degrees of freedom); ``lower``: the one-sided (1 - alpha) lower
    confidence bound of the mean, ``mean - t_{1 - alpha, n-1} s / sqrt(n)``; ``rejected``: H0 rejected at ``alpha``,
    which is the same as ``lower > bound``. A non-inferiority claim ("loses no more than ``-bound``") is this test.
    """

    mean: float
    bound: float
    alpha: float
    n: int
    p: float
    lower: float
    rejected: bool

    def as_dict(self) -> dict:
        return asdict(self)

    def text(self, unit: str = " pt") -> str:
        verdict = "H0 rejected" if self.rejected else "H0 not rejected"
        return (f"one-sided t-test of H0 mean <= {self.bound:+.2f}{unit}: {verdict} (mean {self.mean:+.2f}{unit}, "
                f"{100 * (1 - self.alpha):.0f} % lower bound {self.lower:+.2f}{unit}, p = {self.p:.3g}, n = {self.n})")


def above_bound(values: Sequence[float], bound: float, *, alpha: float = TOST_ALPHA) -> OneSided:
    """Whether the mean of ``values`` (one per seed) lies above ``bound``: H0 mean <= bound, H1 mean > bound.

    ``bound`` must be fixed before the data are seen. Fewer than two values, or no spread, give no test:
    ``rejected`` is then False with p = 1 and the lower bound the mean itself, nothing is claimed (as :func:`tost`).
    """
    if not (isinstance(bound, (int, float)) and not isinstance(bound, bool) and math.isfinite(bound)):
        raise ValueError(f"bound must be a finite number, got {bound!r}")
    if not 0 < alpha < 0.5:
        raise ValueError(f"alpha must be in (0, 0.5), got {alpha}")
    data = _checked(values)
    mean = float(data.mean())
    sd = float(data.std(ddof=1)) if data.size > 1 else 0.0
    if data.size < 2 or sd == 0.0:
        return OneSided(mean, float(bound), alpha, int(data.size), 1.0, round(mean, DECIMALS) + 0.0, False)
    se, df = sd / math.sqrt(data.size), data.size - 1
    p = float(scipy_stats.t.sf((mean - bound) / se, df))
    lower = round(mean - float(scipy_stats.t.ppf(1 - alpha, df)) * se, DECIMALS) + 0.0
    return OneSided(mean, float(bound), alpha, int(data.size), p, lower, bool(p < alpha))


def both_intervals_text(values: Sequence[float], digits: int = 2, unit: str = "") -> str:
    """"mean [bootstrap low, high] (t: [low, high]), n = N": the two 95 % intervals side by side, as tables give them."""
    boot, t = bootstrap_interval(values), t_interval(values)
    return (f"{boot.mean:+.{digits}f}{unit} [boot {boot.low:+.{digits}f}, {boot.high:+.{digits}f}; "
            f"t {t.low:+.{digits}f}, {t.high:+.{digits}f}], n = {boot.n}")


def seed_means(values: Sequence[float], seeds: Sequence[int]) -> tuple[list[int], list[float]]:
    """The seed as the unit of replication: per seed, the mean of its runs; seeds in the order they first appear.

    Why: runs that share a seed share its initial weights and data order, so three seeds crossed with three
    train/test splits are nine runs but three replicates of what a seed fixes; their per-run values are averaged
    per seed before any interval or test. Every seed must hold as many runs as every other (a crossed study): then
    the mean of the seed means is the mean of the runs, and a bootstrap over the seed means is the cluster
    bootstrap by seed (resampling a seed resamples all of its runs).
    """
    data = _checked(values)
    if len(seeds) != data.size:
        raise ValueError(f"{data.size} values but {len(seeds)} seeds")
    order = list(dict.fromkeys(int(seed) for seed in seeds))
    groups = {seed: [float(v) for v, s in zip(data, seeds) if int(s) == seed] for seed in order}
    sizes = {len(group) for group in groups.values()}
    if len(sizes) != 1:
        raise ValueError("every seed must hold the same number of runs (a crossed study), got "
                         + ", ".join(f"seed {seed}: {len(group)}" for seed, group in groups.items()))
    return order, [float(np.mean(groups[seed])) for seed in order]


@dataclass(frozen=True)
class SeedLevel:
    """Per-run values summarised with the seed as the unit (:func:`seed_means`), in the values' units.

    ``bootstrap`` is the 95 % percentile bootstrap of the seed means (the cluster bootstrap by seed), ``t`` the
    95 % Student t-interval of the seed means (n seeds - 1 degrees of freedom); ``runs`` counts the values behind
    the means.
    """

    seeds: tuple[int, ...]
    means: tuple[float, ...]
    runs: int
    bootstrap: Interval
    t: Interval

    @property
    def n(self) -> int:
        return len(self.seeds)

    def as_dict(self) -> dict:
        return {"seeds": list(self.seeds), "means": list(self.means), "n": self.n, "runs": self.runs,
                "bootstrap": self.bootstrap.as_dict(), "t": self.t.as_dict()}


def seed_level(values: Sequence[float], seeds: Sequence[int]) -> SeedLevel:
    """``values`` (one per run, ``seeds`` the run's seed) as seed means with both 95 % intervals."""
    order, means = seed_means(values, seeds)
    return SeedLevel(tuple(order), tuple(means), len(seeds), bootstrap_interval(means), t_interval(means))
