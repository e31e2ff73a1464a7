"""How figures are written: ratios and savings with their intervals, per cent, the accuracy difference."""

from codesign.reproduce.stats import Interval
from codesign.reproduce.summary import ArmSummary
from codesign.reproduce.texts import difference_text, energy_text, percent_text, ratio_text, saving_text, tost_text


def _summary(**fields) -> ArmSummary:
    return ArmSummary(name="a", baseline=False, accuracy_mean=90.0, accuracy_std=1.0, energy_pj_mean=1.0,
                      bitops_mean=1.0, energy_ratio_mean=0.5, energy_ratio_std=0.0, bitops_ratio_mean=0.5,
                      bitops_ratio_std=0.0, accuracy_difference_mean=-0.5, seconds=1.0, **fields)


def test_ratios_savings_and_shares_state_the_mean_then_the_interval():
    ratio = Interval(0.4, 0.3, 0.45, 8)
    assert ratio_text(ratio) == "0.400 [0.300, 0.450]"
    assert saving_text(ratio) == "60.0 % [55.0, 70.0]"  # 1 - ratio: the bounds swap
    assert percent_text(ratio.as_dict()) == "40.0 % [30.0, 45.0]"


def test_an_arm_states_both_intervals_its_verdict_and_both_accountings():
    boot, t = Interval(-0.5, -0.9, -0.1, 8).as_dict(), Interval(-0.5, -1.0, 0.0, 8).as_dict()
    ratio = Interval(0.5, 0.4, 0.6, 8).as_dict()
    summary = _summary(accuracy_difference=boot, accuracy_difference_t=t, energy_ratio=ratio, paper_ratio=ratio,
                       paper_accounting={"name": "BitOPs"}, verdict="v",
                       accuracy_tost={"equivalent": True, "margin": 1.0, "p": 0.01, "n": 8})
    assert difference_text(summary) == "-0.50 [boot -0.90, -0.10; t -1.00, +0.00]"
    assert difference_text(_summary(accuracy_difference=boot)) == "-0.50 [-0.90, -0.10]"  # an older report
    assert tost_text(summary) == "equivalent within ±1 pt (TOST p = 0.01, n = 8)"
    assert tost_text(_summary(verdict="no TOST")) == "no TOST"
    assert energy_text(summary) == "ledger energy 0.500 [0.400, 0.600], paper's BitOPs 0.500 [0.400, 0.600]"
