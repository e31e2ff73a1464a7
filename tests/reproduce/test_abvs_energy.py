"""ABVS's energy figures: Eq. (2) from an FB trace, the delay variants, and the cost report's fallback."""

import pytest

from codesign.energy.abvs_cost import PER_CELL_DELAYS, UNIFORM_DELAYS
from codesign.reproduce.abvs_energy import FAMILY, delay_sensitivity, delay_variants, ensure_cost_report, eq2_ratio


def test_eq2_weighs_each_fb_by_the_epochs_spent_at_it():
    energy = {3: 1.0, 6: 2.0}.__getitem__
    assert eq2_ratio({"3": 2, "6": 2}, 6, energy) == pytest.approx((2 * 1.0 + 2 * 2.0) / (4 * 2.0))
    assert eq2_ratio({"6": 4}, 6, energy) == 1.0


def test_the_delay_variants_are_uniform_per_cell_and_each_cell_type_scaled():
    variants = delay_variants()
    assert variants["uniform (a DSP counts like a LUT)"] is UNIFORM_DELAYS
    assert variants["per-cell"] is PER_CELL_DELAYS[FAMILY]
    assert {"per-cell, dsp x0.5", "per-cell, lut x1.5", "per-cell, carry x0.5"} <= set(variants)
    sensitivity = delay_sensitivity([{"5": 10, "6": 40}], fb_max=6, cost_report="")
    assert set(sensitivity) == set(variants)
    assert all(entry["saving"] is None or 0 < entry["per_seed"][0] < 1 for entry in sensitivity.values())


def test_without_synthesis_and_without_a_report_the_fallback_table_prices_the_macs(tmp_path):
    cost = ensure_cost_report(tmp_path / "fpmac_cost", {5, 6, 23}, allow_synthesis=False, progress=False)
    assert cost["path"] == "" and "fallback" in cost["status"] and not (tmp_path / "fpmac_cost").exists()
