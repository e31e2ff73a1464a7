"""codesign.energy.abvs_cost: the alpha-power voltage solver and the per-FB FP-MAC energy model.

Expected values are worked out by hand with a = 1 (then the alpha-power
condition d * V/(V - Vt) = D * V0/(V0 - Vt) solves in closed form:
V = k*Vt/(k - 1) with k = (D/d) * V0/(V0 - Vt)).
"""

from __future__ import annotations

import json

import pytest

from codesign.energy.abvs_cost import (FALLBACK_XC7, PATH_CATEGORIES, PER_CELL_DELAYS, UNIFORM_DELAYS, DelayModel,
                                       FpMacEnergyModel, MacCostPoint, VoltageModel, fpmac_energy_model,
                                       points_from_report)
from codesign.energy.table import horowitz_45nm
from codesign.hw import yosys as ys
from codesign.pe.fpmac import estimate as est

LINEAR = VoltageModel(supply_v=1.0, threshold_v=0.5, alpha_power=1.0, min_supply_v=0.55, max_supply_v=1.2)


def _entry(max_fb: int, luts: int, ffs: int, dsps: int, depth: int) -> dict:
    raw = {"LUT6": luts, "FDRE": ffs, "DSP48E1": dsps, "CARRY4": 3}
    counts = ys.categorize(raw)
    board = est.board_for_family("xc7")
    return {
        "family": "xc7", "board": board.name, "part": board.part, "exp_bits": 8, "max_fb": max_fb,
        "rounding": "nearest_even", "counts": counts.to_dict(), "raw_cells": raw,
        "logic_depth": {"cells": depth, "by_category": {"lut": depth}, "loops": 0, "ltp_cells": depth,
                        "ltp_loops": 0},
        "wall_s": 1.0, "budget": dict(board.resources),
        "utilisation_percent": counts.utilisation_percent(board.resources),
    }


@pytest.fixture
def tiny_report(tmp_path):
    """Three synthesised points: FB 4 (100 LUT, depth 8), FB 8 (200 LUT, depth 10), FB 23 (400 LUT, depth 20)."""
    report = {
        "schema": est.SCHEMA, "version": est.SCHEMA_VERSION,
        "tool": {"name": "yosys", "version": "Yosys 0.23", "flow": "synth_xilinx", "workers": 1},
        "top": "fpmac", "sources": [{"name": "fpmac.v", "sha256": "0" * 64}],
        "depth_definition": est.DEPTH_DEFINITION,
        "entries": [_entry(4, 100, 20, 0, 8), _entry(8, 200, 40, 1, 10), _entry(23, 400, 80, 2, 20)],
    }
    path = tmp_path / "fpmac_cost.json"
    path.write_text(json.dumps(report))
    return path


# ---------------------------------------------------------------------------- voltage solver


def test_reference_depth_runs_at_nominal_supply():
    model = VoltageModel()
    assert model.min_supply(30, 30) == pytest.approx(1.0, abs=1e-9)
    assert LINEAR.min_supply(7, 7) == pytest.approx(1.0, abs=1e-9)


def test_closed_form_with_linear_law():
    # k = (5/4) * 1/(1 - 0.5) = 2.5 -> V = 2.5 * 0.5 / 1.5 = 5/6
    assert LINEAR.min_supply(4, 5) == pytest.approx(5 / 6, abs=1e-9)
    # k = (10/9) * 2 = 20/9 -> V = (20/9 * 0.5) / (11/9) = 10/11
    assert LINEAR.min_supply(9, 10) == pytest.approx(10 / 11, abs=1e-9)


def test_solution_meets_timing_with_the_alpha_power_law():
    model = VoltageModel(supply_v=1.0, threshold_v=0.35, alpha_power=1.3)
    volts = model.min_supply(23, 28)
    delay = lambda v: v / (v - 0.35) ** 1.3  # noqa: E731 - the law, written out independently
    assert 23 * delay(volts) <= 28 * delay(1.0) * (1 + 1e-12)
    assert 23 * delay(volts - 1e-6) > 28 * delay(1.0)  # and it is the lowest such supply


def test_supply_is_monotone_in_depth_and_within_bounds():
    model = VoltageModel()
    volts = [model.min_supply(depth, 30) for depth in range(5, 36)]
    assert all(a <= b for a, b in zip(volts, volts[1:]))
    assert all(model.min_supply_v <= v <= model.max_supply_v for v in volts)
    assert model.min_supply(1, 30) == model.min_supply_v  # clamped at the floor
    assert model.min_supply(31, 30) > 1.0  # a deeper path needs more than the nominal supply


def test_timing_that_cannot_be_met_raises():
    with pytest.raises(ValueError, match="cannot match"):
        VoltageModel().min_supply(60, 30)


@pytest.mark.parametrize("kwargs", [{"alpha_power": 0.5}, {"alpha_power": 2.5}, {"threshold_v": 0.7},
                                    {"min_supply_v": 1.1}, {"max_supply_v": 0.9}, {"supply_v": float("nan")}])
def test_voltage_model_rejects_bad_parameters(kwargs):
    with pytest.raises(ValueError):
        VoltageModel(**kwargs)


# ---------------------------------------------------------------------------- energy model on a hand-made report


def test_energy_on_tiny_report(tiny_report):
    model = fpmac_energy_model(tiny_report, timing_fb=8, voltage=LINEAR)
    fp32 = horowitz_45nm().fp32_mul + horowitz_45nm().fp32_add  # 4.6 pJ
    assert "Yosys report" in model.source and "does NOT match" in model.source
    # FB 8 sets the clock: V = V0, E = 4.6 * 200/400
    assert model.supply_v(8) == pytest.approx(1.0, abs=1e-9)
    assert model.energy_pj(8) == pytest.approx(fp32 * 0.5, rel=1e-9)
    # FB 4: V = 5/6, E = 4.6 * 100/400 * (5/6)^2
    assert model.supply_v(4) == pytest.approx(5 / 6, abs=1e-9)
    assert model(4) == pytest.approx(fp32 * 0.25 * 25 / 36, rel=1e-9)
    # FB 6 is interpolated: area 150, depth 9 -> V = 10/11
    assert not model.measured(6)
    assert model.area(6) == 150 and model.depth(6) == 9
    assert model(6) == pytest.approx(fp32 * 150 / 400 * (10 / 11) ** 2, rel=1e-9)
    # below the smallest swept FB, the smallest point is used (no extrapolated savings)
    assert model(2) == pytest.approx(model(4), rel=1e-12)
    # FB 23 (depth 20) cannot meet the FB 8 clock below 1.2 V
    with pytest.raises(ValueError, match="cannot meet"):
        model(23)


def test_anchor_fb23_costs_horowitz_fp32_mac(tiny_report):
    model = fpmac_energy_model(tiny_report, timing_fb=23, voltage=LINEAR)
    assert model(23) == pytest.approx(4.6, rel=1e-12)
    assert model.describe([8, 23])["anchor"]["energy_pj"] == pytest.approx(4.6)


def test_weighted_area_counts_ff_and_dsp(tiny_report):
    model = fpmac_energy_model(tiny_report, timing_fb=8, voltage=LINEAR, area_metric="weighted")
    assert model.area(8) == 200 + 40 / 2 + 20 * 1
    assert model.area(23) == 400 + 80 / 2 + 20 * 2
    assert model(8) == pytest.approx(4.6 * 240 / 480, rel=1e-9)


def test_energy_falls_with_fb_on_the_fallback_table():
    model = fpmac_energy_model(None, timing_fb=10)
    assert model.supply_v(10) == pytest.approx(1.0, abs=1e-9)
    assert model(1) < model(3) < model(10)
    assert all(model.supply_v(fb) <= model.voltage.max_supply_v for fb in range(1, 11))


# ---------------------------------------------------------------------------- fallback and errors


def test_fallback_used_without_a_report(tmp_path):
    model = fpmac_energy_model(None, timing_fb=9)
    assert model.source.startswith("fallback table")
    assert model.points == FALLBACK_XC7
    missing = fpmac_energy_model(str(tmp_path / "absent.json"), timing_fb=9)
    assert "fallback table" in missing.source and "absent" in missing.source
    assert missing(5) == model(5)


def test_invalid_report_is_an_error_not_a_silent_fallback(tmp_path):
    broken = tmp_path / "fpmac_cost.json"
    broken.write_text("{not json")
    with pytest.raises(est.FpmacCostError):
        fpmac_energy_model(broken, timing_fb=9)


def test_model_needs_the_fb23_anchor():
    points = [MacCostPoint(fb=4, lut=10, ff=1, dsp=0, carry=0, depth=3)]
    with pytest.raises(ValueError, match="FB=23"):
        FpMacEnergyModel(points, source="test", timing_fb=4)


def test_fb_outside_range_is_rejected():
    model = fpmac_energy_model(None, timing_fb=9)
    for fb in (0, 24, 2.0):
        with pytest.raises(ValueError):
            model(fb)


# ---------------------------------------------------------------------------- per-cell-type delays

HAND = DelayModel(name="hand", lut=0.5, carry=0.15, muxf=0.3, dsp=4.0, other=0.5)


def _dsp_points() -> list[MacCostPoint]:
    """FB 4: 8 LUT levels; FB 8: 9 LUT levels and a DSP; FB 23: 19 LUT levels and a DSP (depths 8, 10, 20)."""
    return [MacCostPoint(fb=4, lut=100, ff=20, dsp=0, carry=3, depth=8, path=(("lut", 8),)),
            MacCostPoint(fb=8, lut=200, ff=40, dsp=1, carry=3, depth=10, path=(("dsp", 1), ("lut", 9))),
            MacCostPoint(fb=23, lut=400, ff=80, dsp=2, carry=3, depth=20, path=(("dsp", 1), ("lut", 19)))]


def test_path_delay_sums_each_cell_at_its_type_delay():
    assert HAND.path_delay({"lut": 2, "carry": 3, "dsp": 1}) == pytest.approx(2 * 0.5 + 3 * 0.15 + 4.0)
    assert HAND.path_delay({}) == 0
    point = MacCostPoint(fb=9, lut=1, ff=1, dsp=1, carry=7, depth=28,
                         path=(("carry", 7), ("dsp", 1), ("lut", 18), ("muxf", 2)))
    assert point.delay(HAND) == pytest.approx(7 * 0.15 + 4.0 + 18 * 0.5 + 2 * 0.3)
    assert point.delay(UNIFORM_DELAYS) == 28  # the earlier model: the cell count


def test_a_dsp_on_the_timing_path_lowers_the_narrow_macs_supply():
    uniform = FpMacEnergyModel(_dsp_points(), source="test", timing_fb=8, voltage=LINEAR, delay=UNIFORM_DELAYS)
    weighted = FpMacEnergyModel(_dsp_points(), source="test", timing_fb=8, voltage=LINEAR, delay=HAND)
    # uniform: 8 cells against 10 -> k = (10/8) * 1/(1 - 0.5) = 2.5, V = 2.5 * 0.5 / 1.5 = 5/6
    assert uniform.supply_v(4) == pytest.approx(5 / 6, abs=1e-9)
    # per cell type: 8 x 0.5 = 4 ns against 9 x 0.5 + 4 = 8.5 ns -> k = 4.25, V = 4.25 * 0.5 / 3.25 = 17/26
    assert weighted.delay(4) == pytest.approx(4.0) and weighted.delay(8) == pytest.approx(8.5)
    assert weighted.supply_v(4) == pytest.approx(17 / 26, abs=1e-9)
    assert weighted(4) == pytest.approx(4.6 * 100 / 400 * (17 / 26) ** 2, rel=1e-9)
    assert weighted.supply_v(8) == pytest.approx(1.0, abs=1e-9) and weighted(8) == pytest.approx(uniform(8))
    # interpolated FB 6: delay (4 + 8.5) / 2 = 6.25 ns -> k = (8.5 / 6.25) * 2 = 2.72, V = 1.36 / 1.72
    assert weighted.delay(6) == pytest.approx(6.25)
    assert weighted.supply_v(6) == pytest.approx(1.36 / 1.72, abs=1e-9)
    assert weighted.describe([4])["delay_model"]["ns"]["dsp"] == 4.0


def test_scaling_one_cell_type_changes_only_that_delay():
    slower = HAND.scaled("dsp", 1.5)
    assert slower.dsp == pytest.approx(6.0) and (slower.lut, slower.carry, slower.muxf) == (0.5, 0.15, 0.3)
    assert "dsp x1.5" in slower.name
    # a slower DSP (only on the wide path) leaves the narrow MAC still more slack
    base = FpMacEnergyModel(_dsp_points(), source="test", timing_fb=8, voltage=LINEAR, delay=HAND)
    assert FpMacEnergyModel(_dsp_points(), source="test", timing_fb=8, voltage=LINEAR,
                            delay=slower).supply_v(4) < base.supply_v(4)


@pytest.mark.parametrize("kwargs", [{"lut": 0.0}, {"dsp": -1.0}, {"carry": float("nan")}, {"muxf": True}])
def test_delay_model_rejects_bad_delays(kwargs):
    values = {"name": "bad", "lut": 0.5, "carry": 0.15, "muxf": 0.3, "dsp": 4.0, "other": 0.5} | kwargs
    with pytest.raises(ValueError, match="delay of"):
        DelayModel(**values)


def test_unknown_cell_category_and_inconsistent_paths_are_refused():
    with pytest.raises(ValueError, match="unknown cell category"):
        HAND.path_delay({"bram": 1})
    with pytest.raises(ValueError, match="do not add up"):
        MacCostPoint(fb=4, lut=1, ff=1, dsp=0, carry=0, depth=5, path=(("lut", 4),))
    with pytest.raises(ValueError, match="categories"):
        MacCostPoint(fb=4, lut=1, ff=1, dsp=0, carry=0, depth=1, path=(("bram", 1),))
    unknown = [MacCostPoint(fb=fb, lut=10 * fb, ff=1, dsp=0, carry=0, depth=fb) for fb in (4, 23)]
    with pytest.raises(ValueError, match="only the uniform"):
        FpMacEnergyModel(unknown, source="test", timing_fb=4, delay=HAND)
    assert FpMacEnergyModel(unknown, source="test", timing_fb=4).delay_model == UNIFORM_DELAYS


def test_the_factory_defaults_to_the_family_datasheet_delays(tiny_report):
    assert fpmac_energy_model(None, timing_fb=9).delay_model == PER_CELL_DELAYS["xc7"]
    assert fpmac_energy_model(None, timing_fb=9, delay=UNIFORM_DELAYS).delay_model == UNIFORM_DELAYS
    assert fpmac_energy_model(tiny_report, timing_fb=8).delay_model == PER_CELL_DELAYS["xc7"]
    with pytest.raises(ValueError, match="no per-cell delays"):
        fpmac_energy_model(tiny_report, timing_fb=8, family="xcvu")


def test_datasheet_delays_name_their_sources_and_assumptions():
    for family, model in PER_CELL_DELAYS.items():
        sources = dict(model.sources)
        assert set(sources) == set(PATH_CATEGORIES), family
        assert model.dsp > model.lut > model.carry  # a DSP is slower than a LUT level, a carry cell faster
        for category, text in sources.items():
            assert text.startswith("assumption") or text.startswith("DS9"), (family, category)
    assert "338 MHz" in dict(PER_CELL_DELAYS["xcup"].sources)["dsp"]
    assert PER_CELL_DELAYS["xcup"].dsp == pytest.approx(1e3 / 338, abs=0.01)


def test_report_points_carry_their_critical_path_cell_types(tiny_report):
    cost = est.load_fpmac_cost(tiny_report)
    points = points_from_report(cost)
    assert [p.path for p in points] == [(("lut", 8),), (("lut", 10),), (("lut", 20),)]


def test_the_fallback_table_knows_every_points_critical_path():
    for point in FALLBACK_XC7:
        assert sum(count for _, count in point.path) == point.depth
        assert dict(point.path).get("dsp", 0) <= point.dsp
    # the narrow MACs have no DSP on their longest path, the wider ones do: a DSP costs time there
    model = fpmac_energy_model(None, timing_fb=9)
    uniform = fpmac_energy_model(None, timing_fb=9, delay=UNIFORM_DELAYS)
    assert model.supply_v(3) < uniform.supply_v(3)
