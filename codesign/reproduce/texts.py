"""How a reproduction writes its figures: ratios and savings with their intervals, TOST verdicts, both accountings.

Why one place: every report table and README row states an interval the
same way (``mean [low, high]``, a saving as ``1 - ratio`` with its bounds
swapped), so a reader compares reproductions without re-reading each one's
conventions. Ratios have no unit, savings and shares are per cent, accuracy
differences are points.
"""

from __future__ import annotations

from codesign.reproduce.stats import Interval
from codesign.reproduce.summary import ArmSummary


def ratio_text(interval: Interval, digits: int = 3) -> str:
    """A ratio's interval: ``0.702 [0.675, 0.735]``."""
    return f"{interval.mean:.{digits}f} [{interval.low:.{digits}f}, {interval.high:.{digits}f}]"


def percent_text(interval: dict) -> str:
    """A fraction's interval (``Interval.as_dict()``) in per cent: ``12.3 % [10.1, 14.0]``."""
    return f"{100 * interval['mean']:.1f} % [{100 * interval['low']:.1f}, {100 * interval['high']:.1f}]"


def saving_text(interval: Interval) -> str:
    """An energy ratio's interval as a saving in per cent (1 - ratio; the bounds swap)."""
    return f"{100 * (1 - interval.mean):.1f} % [{100 * (1 - interval.high):.1f}, {100 * (1 - interval.low):.1f}]"


def difference_text(summary: ArmSummary) -> str:
    """The accuracy difference with both 95 % intervals, bootstrap and Student t (a report of an older run has the
    bootstrap one only)."""
    boot = summary.interval("accuracy_difference")
    if not summary.accuracy_difference_t:
        return boot.text()
    t = summary.interval("accuracy_difference_t")
    return f"{boot.mean:+.2f} [boot {boot.low:+.2f}, {boot.high:+.2f}; t {t.low:+.2f}, {t.high:+.2f}]"


def paper_ratio_text(summary: ArmSummary) -> str:
    """The paper's own cost ratio with its bootstrap interval, or '—' where the reproduction gives none."""
    return ratio_text(summary.interval("paper_ratio")) if summary.paper_ratio else "—"


def tost_text(summary: ArmSummary) -> str:
    """A README-sized verdict: 'equivalent within ±1 pt (TOST p = 0.003)' or 'not shown equivalent ...'."""
    test = summary.accuracy_tost
    if not test:
        return summary.verdict
    return (f"{'equivalent' if test['equivalent'] else 'not shown equivalent'} within ±{test['margin']:g} pt "
            f"(TOST p = {test['p']:.2g}, n = {test['n']})")


def energy_text(summary: ArmSummary) -> str:
    """Both accountings of an arm for a README row: the ledger's energy ratio and the paper's own ratio."""
    text = f"ledger energy {ratio_text(summary.interval('energy_ratio'))}"
    if summary.paper_ratio:
        text += f", paper's {summary.paper_accounting['name']} {ratio_text(summary.interval('paper_ratio'))}"
    return text
