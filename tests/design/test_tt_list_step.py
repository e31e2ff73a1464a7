"""The explorer's price of the TT step as call lists at a point (codesign.design.families.tt_list_step)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from codesign.boards import board
from codesign.design import load_design
from codesign.design.families.tt import tt_setup_of
from codesign.design.calibration import pe_resources
from codesign.design.families.tt_list_step import (b_order_choice, list_point, list_step_report, measure_list_host,
                                                    pairs_choice)
from codesign.pe.tt.spec import Tt1Spec, Tt2Spec

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
SPECS = dict(lanes=4, rows=2, a_bits=16, b_bits=16, max_j=8, max_k=16, max_l=8)


def _setup(rule: str = "tracked", batch: int | None = None):
    """digits_tt's set-up at ``rule``; ``batch`` (None: the example's 64) shrinks the step a pricing test prices."""
    found = tt_setup_of(load_design(EXAMPLES / "digits_tt.toml"))
    return dataclasses.replace(found, precision={**found.precision, "scale_rule": rule},
                               batch_size=batch or found.batch_size)


def test_a_tracked_point_is_priced_with_its_host_measured():
    found = list_step_report(_setup(batch=16), Tt1Spec(**SPECS), Tt2Spec(**SPECS), board("zedboard"),
                             clock_mhz=100.0, per_call_total_s=0.004)
    assert found["priced"]
    assert found["host_s"] > 0 and found["pe_s"] > 0
    assert found["total_s"] == pytest.approx(found["pe_s"] + found["memory_s"] + found["host_s"])
    assert found["host_share"] == pytest.approx(found["host_s"] / found["total_s"])
    assert sum(found["layers_s"]) == pytest.approx(found["pe_s"])
    work, measured = found["host_work"], found["host_measured"]
    assert (measured["flushed_bytes"], measured["read_bytes"], measured["lists"]) == (
        work["flushed_bytes"], work["read_bytes"], work["lists"])
    # the host's work beside the lists is hidden by their phases: beside layer 0's forward, layer 1 prepared,
    # layer 0's input tracker and its bias; beside its backward, layer 1's update, the next batch, its output
    # gradient's tracker, its bias gradient and (beside the last) its early reads and update; beside layer 1's
    # forward and backward, its own trackers and bias, and beside its backward the loss: work beside every phase
    assert [(layer, phase) for layer, phase, _ in measured["beside"]] == [(0, 0), (0, 1), (0, 2), (0, 3), (0, 4),
                                                                          (1, 0), (1, 1), (1, 2), (1, 3), (1, 4)]
    assert found["host_hidden_s"] > 0
    assert found["host_s"] + found["host_hidden_s"] == pytest.approx(measured["seconds"])


def test_the_host_of_a_list_step_excludes_the_shell():
    measured = measure_list_host(_setup(), Tt1Spec(**SPECS), Tt2Spec(**SPECS), repeats=1)
    assert 0 < measured["seconds"] < 1.0


@pytest.mark.parametrize("rule, spec2, why", [
    ("exact", SPECS, "scale_rule = 'tracked'"),
    ("tracked", {**SPECS, "lanes": 8}, "lanes and stream widths must agree"),
    ("tracked", {**SPECS, "b_bits": 8}, "16-bit A and B"),
])
def test_a_point_that_cannot_run_lists_says_why(rule, spec2, why):
    found = list_step_report(_setup(rule), Tt1Spec(**SPECS), Tt2Spec(**spec2), board("zedboard"), clock_mhz=100.0,
                             per_call_total_s=0.004)
    assert not found["priced"] and why in found["why"]


def test_the_best_point_whose_builds_run_lists_is_found():
    """A space whose best point mixes stream widths: the list step is priced at the best point that does not."""
    from types import SimpleNamespace

    import numpy as np

    def option(pe, stream):
        return SimpleNamespace(pe=pe, spec=(Tt1Spec if pe == "tt1" else Tt2Spec)(**{**SPECS, "stream_bits": stream}))

    points = [[option("tt1", 32), option("tt2", 64)], [option("tt1", 128), option("tt2", 128)],
              [option("tt1", 64), option("tt2", 64)], [option("tt1", 32), option("tt2", 32)]]
    space = SimpleNamespace(total_s=np.array([1.0, 3.0, 2.0, 0.5]), energy_pj=np.array([1.0, 3.0, 2.0, 0.5]),
                            feasible=np.array([True, True, True, False]), chosen_options=lambda i: points[i])
    assert list_point(space, _setup(), "time") == 2  # point 0 mixes widths, point 3 does not fit
    assert list_point(space, _setup("exact"), "time") is None


@pytest.mark.slow  # 10 s
def test_pe1_takes_b_j_outer_where_it_is_faster_and_fits():
    """The j-outer build's lists are faster on the core-gradient calls; it costs PE1's IPs one DSP slice each and
    its address registers (the calibrated model), so it is chosen only where that fits the room left."""
    setup, spec1, spec2, zed = _setup(batch=16), Tt1Spec(**SPECS), Tt2Spec(**SPECS), board("zedboard")
    found = b_order_choice(setup, spec1, spec2, zed, clock_mhz=100.0, copies=(2, 1), room={"dsp": 2, "lut": 1e9})
    assert found["pe_dma_s"]["jl"] < found["pe_dma_s"]["lj"]
    extra = {key: 2 * (pe_resources("tt1", Tt1Spec(**SPECS, b_order="jl"), zed.yosys_family)[key]
                       - pe_resources("tt1", spec1, zed.yosys_family)[key]) for key in ("dsp", "lut", "ff")}
    assert extra["dsp"] == 2 and extra["ff"] > 0  # LUTs: within Yosys's noise, either sign (docs/design.md)
    assert {key: found["jl_extra"][key] for key in extra} == pytest.approx(extra)
    assert (found["chosen"], found["spec1"].b_order, found["jl_fits"]) == ("jl", "jl", True)
    tight = b_order_choice(setup, spec1, spec2, zed, clock_mhz=100.0, copies=(2, 1), room={"dsp": 1})
    assert (tight["chosen"], tight["spec1"], tight["jl_fits"]) == ("lj", spec1, False)
    unpriced = b_order_choice(setup, spec1, spec2, zed, clock_mhz=100.0)
    assert unpriced == {"chosen": "lj", "spec1": spec1}


@pytest.mark.parametrize("pe, field, copies", [("tt2", "row_pairs", (1, 2)), ("tt1", "j_pairs", (2, 1))])
def test_pairs_are_chosen_where_faster_and_within_the_room(pe, field, copies):
    """On 8 lanes digits_tt's contractions of K <= 4 run in pairs, so the PE's lists are faster with them; they
    cost each of its IPs logic (the calibrated model, no DSP slice), so they are chosen only where that fits. On
    4 lanes no K of the step fits half of them: the same seconds, and no pairs."""
    setup, zed, wide = _setup(batch=16), board("zedboard"), {**SPECS, "lanes": 8}
    spec1, spec2 = Tt1Spec(**wide), Tt2Spec(**wide)
    plain, featured = ((spec1, Tt1Spec(**wide, j_pairs=True)) if pe == "tt1" else
                       (spec2, Tt2Spec(**wide, row_pairs=True)))

    def choice(room, *specs):
        return pairs_choice(setup, *(specs or (spec1, spec2)), zed, pe=pe, clock_mhz=100.0, copies=copies, room=room)

    found = choice({"lut": 1e4, "dsp": 0})
    assert found["pe_dma_s"]["pairs"] < found["pe_dma_s"]["plain"]
    ips = copies[0] if pe == "tt1" else copies[1]
    extra = {key: ips * (pe_resources(pe, featured, zed.yosys_family)[key] - pe_resources(pe, plain,
                                                                                          zed.yosys_family)[key])
             for key in ("dsp", "lut")}
    assert extra["dsp"] == 0 and extra["lut"] > 0 and found["pairs_extra"]["lut"] == pytest.approx(extra["lut"])
    assert (found["chosen"], getattr(found["spec"], field), found["pairs_fits"]) == (True, True, True)
    tight = choice({"lut": 10})
    assert (tight["chosen"], tight["spec"], tight["pairs_fits"]) == (False, plain, False)
    narrow = choice({"lut": 1e4}, Tt1Spec(**SPECS), Tt2Spec(**SPECS))
    assert narrow["pe_dma_s"]["pairs"] == narrow["pe_dma_s"]["plain"] and not narrow["chosen"]
    assert choice(None) == {"chosen": False, "spec": plain}


@pytest.mark.slow  # 7 s
def test_the_list_step_is_priced_in_the_order_chosen():
    found = list_step_report(_setup(batch=16), Tt1Spec(**SPECS), Tt2Spec(**SPECS), board("zedboard"),
                             clock_mhz=100.0, per_call_total_s=0.004, room={"dsp": 10})
    order = found["b_order"]
    assert order["chosen"] == "jl" and "spec1" not in order
    assert found["pe_s"] + found["memory_s"] == pytest.approx(order["pe_dma_s"]["jl"])
