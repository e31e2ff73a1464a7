"""The explorer's price of the TT step as call lists at a point (codesign.design.families.tt_list_step)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from codesign.boards import board
from codesign.design import load_design
from codesign.design.families.tt import tt_setup_of
from codesign.design.calibration import pe_resources
from codesign.design.explore_run import _builds_words
from codesign.design.families import tt_list_step
from codesign.design.families.tt_list_step import (CHOICES, builds_choice, list_points, list_step_report,
                                                    measure_list_host)
from codesign.pe.tt.spec import Tt1Spec, Tt2Spec
from codesign.hw.resource_model import RESOURCES

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
SPECS = dict(lanes=4, rows=2, a_bits=16, b_bits=16, max_j=8, max_k=16, max_l=8)


def _setup(rule: str = "tracked", batch: int | None = None):
    """digits_tt's set-up at ``rule``; ``batch`` (None: the example's 64) shrinks the step a pricing test prices."""
    found = tt_setup_of(load_design(EXAMPLES / "digits_tt.toml"))
    return dataclasses.replace(found, precision={**found.precision, "scale_rule": rule},
                               batch_size=batch or found.batch_size)


def test_a_tracked_point_is_priced_with_its_host_measured():
    found, steps = list_step_report(_setup(batch=16), Tt1Spec(**SPECS), Tt2Spec(**SPECS), board("zedboard"),
                                    clock_mhz=100.0, per_call_total_s=0.004, other_ports=(1, 2))
    assert found["priced"] and sorted(steps) == [1, 2]  # the step on 1 port (the report's) and on 2, for the explorer
    assert steps[1].time.total_s == found["total_s"] and steps[2].time.pe_s == steps[1].time.pe_s  # one IP a PE
    assert sum(stage.cycles for stage in steps[1].stages) == sum(steps[1].layer_cycles)
    assert found["host_s"] > 0 and found["pe_s"] > 0
    assert found["total_s"] == pytest.approx(found["pe_s"] + found["memory_s"] + found["host_s"])
    assert found["host_share"] == pytest.approx(found["host_s"] / found["total_s"])
    assert sum(found["layers_s"]) == pytest.approx(found["pe_s"])
    work, measured = found["host_work"], found["host_measured"]
    assert (measured["flushed_bytes"], measured["read_bytes"], measured["lists"]) == (
        work["flushed_bytes"], work["read_bytes"], work["lists"])
    # the host's work beside the lists is hidden by their phases: beside layer 0's forward, layer 1 prepared (its
    # bias with it), layer 0's input tracker and its bias; beside its backward, layer 1's update (its input's
    # tracker with it), the next batch, its output gradient's tracker, its bias gradient and (beside the last)
    # its early reads and update; beside layer 1's forward layer 0's output (which wrote layer 1's input codes),
    # and beside its first phase its input's copy for its core gradient; beside its backward the loss, its output
    # gradient's tracker, its bias gradient and where its input gradient passes
    assert [(layer, phase) for layer, phase, _ in measured["beside"]] == [(0, 0), (0, 1), (0, 2), (0, 3), (0, 4),
                                                                          (1, 0), (1, 2), (1, 3), (1, 4)]
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
    found, steps = list_step_report(_setup(rule), Tt1Spec(**SPECS), Tt2Spec(**spec2), board("zedboard"),
                                    clock_mhz=100.0, per_call_total_s=0.004)
    assert not found["priced"] and why in found["why"] and steps == {}


def test_the_best_point_whose_builds_run_lists_is_found():
    """A space whose best point mixes stream widths: the list step is priced at the best points that do not."""
    from types import SimpleNamespace

    import numpy as np

    def option(pe, stream):
        return SimpleNamespace(pe=pe, spec=(Tt1Spec if pe == "tt1" else Tt2Spec)(**{**SPECS, "stream_bits": stream}))

    points = [[option("tt1", 32), option("tt2", 64)], [option("tt1", 128), option("tt2", 128)],
              [option("tt1", 64), option("tt2", 64)], [option("tt1", 32), option("tt2", 32)]]
    space = SimpleNamespace(total_s=np.array([1.0, 3.0, 2.0, 0.5]), energy_pj=np.array([1.0, 3.0, 2.0, 0.5]),
                            feasible=np.array([True, True, True, False]), chosen_options=lambda i: points[i])
    assert list_points(space, _setup(), "time") == [2, 1]  # point 0 mixes widths, point 3 does not fit
    assert list_points(space, _setup(), "time", count=1) == [2]
    assert list_points(space, _setup("exact"), "time") == []


def test_the_builds_are_chosen_together_on_the_list_model(monkeypatch):
    """On 8 lanes digits_tt's contractions of K <= 4 run in pairs, so each PE's lists are faster with its pairs;
    the list model prices all eight builds (seconds from the same lists on other builds), and with room for all
    the fastest is chosen. On 4 lanes no K fits half the lanes, so pairs change no cycle and are not chosen (the
    cheaper of equal seconds), and PE1's core-gradient calls are faster with B j outer."""
    setup, zed, wide, pe_dma_s = _setup(batch=16), board("zedboard"), {**SPECS, "lanes": 8}, tt_list_step._pe_dma_s
    found = builds_choice(setup, Tt1Spec(**wide), Tt2Spec(**wide), zed, clock_mhz=100.0, copies=(2, 1),
                          room=dict.fromkeys(RESOURCES, 1e9))
    seconds = {tuple(build[name] for name in CHOICES): build["pe_dma_s"] for build in found["builds"]}
    assert len(seconds) == 8
    for order in ("lj", "jl"):
        assert seconds[order, True, False] < seconds[order, False, False] > seconds[order, False, True]
        assert seconds[order, True, True] < min(seconds[order, True, False], seconds[order, False, True])
    chosen = tuple(found["chosen"][name] for name in CHOICES)
    assert seconds[chosen] == min(seconds.values()) and chosen[1:] == (True, True)
    assert (found["spec1"].b_order, found["spec2"].row_pairs, found["spec1"].j_pairs) == chosen
    plain = {pe: pe_resources(pe, spec, zed.yosys_family) for pe, spec in (("tt1", Tt1Spec(**wide)),
                                                                           ("tt2", Tt2Spec(**wide)))}
    both = next(build for build in found["builds"] if build["row_pairs"] and build["j_pairs"]
                and build["b_order"] == "lj")
    extra = 2 * (pe_resources("tt1", Tt1Spec(**wide, j_pairs=True), zed.yosys_family)["lut"] - plain["tt1"]["lut"]) \
        + pe_resources("tt2", Tt2Spec(**wide, row_pairs=True), zed.yosys_family)["lut"] - plain["tt2"]["lut"]
    assert both["extra"]["lut"] == pytest.approx(extra) and both["extra"]["dsp"] == 0
    # on 4 lanes PE2 has no call of K <= 2, so its row pairs take their plain twin's cycles, unpriced (PE1 has,
    # all of J = 1, where pairs save no cycle: priced, the same seconds)
    priced = []
    monkeypatch.setattr(tt_list_step, "_pe_dma_s", lambda *args: priced.append(args) or pe_dma_s(*args))
    narrow = builds_choice(setup, Tt1Spec(**SPECS), Tt2Spec(**SPECS), zed, clock_mhz=100.0, copies=(2, 1),
                           room=dict.fromkeys(RESOURCES, 1e9))
    assert sorted((args[1].b_order, args[1].j_pairs) for args in priced) == [("jl", False), ("jl", True),
                                                                             ("lj", False), ("lj", True)]
    assert not any(args[2].row_pairs for args in priced)
    by_order = {build["b_order"]: build["pe_dma_s"] for build in narrow["builds"]}
    assert len({build["pe_dma_s"] for build in narrow["builds"]}) == 2 and by_order["jl"] < by_order["lj"]
    assert narrow["chosen"] == {"b_order": "jl", "row_pairs": False, "j_pairs": False}
    assert "PE1 takes B j outer, PE2 without row pairs, PE1 without j pairs" in _builds_words(narrow)
    fixed = builds_choice(setup, Tt1Spec(**SPECS), Tt2Spec(**SPECS), zed, clock_mhz=100.0, copies=(2, 1),
                          room=dict.fromkeys(RESOURCES, 1e9), fixed={"b_order": "lj", "row_pairs": False})
    assert [(build["b_order"], build["row_pairs"]) for build in fixed["builds"]] == [("lj", False)] * 2


# a build's seconds and per-IP LUT in the choice rule's test: each feature saves time and costs logic
FEATURE_S = {"b_order": 3e-4, "row_pairs": 5e-4, "j_pairs": 1e-4}
FEATURE_LUT = {"b_order": ("tt1", 100.0), "row_pairs": ("tt2", 600.0), "j_pairs": ("tt1", 200.0)}


def _fake_seconds(setup, spec1, spec2, board_, clock_mhz, copies, hp_ports):
    fields = {"b_order": spec1.b_order == "jl", "row_pairs": spec2.row_pairs, "j_pairs": spec1.j_pairs}
    return 1e-2 - sum(FEATURE_S[name] for name, on in fields.items() if on)


def _fake_price(pe, spec):
    fields = {"b_order": getattr(spec, "b_order", "lj") == "jl", "row_pairs": getattr(spec, "row_pairs", False),
              "j_pairs": getattr(spec, "j_pairs", False)}
    lut = 1000.0 + sum(FEATURE_LUT[name][1] for name, on in fields.items() if on and FEATURE_LUT[name][0] == pe)
    return {"lut": lut, "ff": 10.0, "dsp": 8.0 + (pe == "tt1" and fields["b_order"]), "bram_36k": 2.0}


@pytest.mark.parametrize("room, chosen", [  # extra LUT: j outer 2 x 100, row pairs 600, j pairs 2 x 200
    ({"lut": 1e9, "dsp": 10}, ("jl", True, True)),  # all fit (1,200): the fastest, 0.9 ms saved
    ({"lut": 1100, "dsp": 10}, ("jl", True, False)),  # j outer and row pairs (800: 0.8 ms) beat both pairs (0.6)
    ({"lut": 700, "dsp": 10}, ("lj", True, False)),  # row pairs alone (0.5 ms) beat j outer and j pairs (0.4)
    ({"lut": 500, "dsp": 10}, ("jl", False, False)),  # j outer (0.3 ms) beats j pairs (0.1)
    ({"lut": 1e9, "dsp": 1}, ("lj", True, True)),  # j outer's DSP slice a PE1 IP (two of them) does not fit
    ({"lut": 100, "dsp": 10}, ("lj", False, False)),  # nothing fits but the builds given
])
def test_the_fastest_build_that_fits_is_chosen(monkeypatch, room, chosen):
    """The choice rule on seconds and prices made up (two PE1 IPs, one PE2): among the eight builds whose extra
    over the builds given fits the room, the fewest seconds, whichever features that takes together."""
    monkeypatch.setattr(tt_list_step, "_pe_dma_s", _fake_seconds)
    monkeypatch.setattr(tt_list_step, "_runs_pairs", lambda *args: {"tt1": True, "tt2": True})
    found = builds_choice(_setup(batch=16), Tt1Spec(**SPECS), Tt2Spec(**SPECS), board("zedboard"),
                          clock_mhz=100.0, copies=(2, 1), room=room, price=_fake_price)
    assert tuple(found["chosen"][name] for name in CHOICES) == chosen
    assert (found["spec1"].b_order, found["spec2"].row_pairs, found["spec1"].j_pairs) == chosen
    mine = next(build for build in found["builds"] if tuple(build[name] for name in CHOICES) == chosen)
    assert mine["extra"]["lut"] == sum(FEATURE_LUT[name][1] * (2 if FEATURE_LUT[name][0] == "tt1" else 1)
                                       for name, on in zip(CHOICES, (chosen[0] == "jl", *chosen[1:])) if on)
    assert mine["fits"] and len(found["builds"]) == 8


GIVEN_ALL = {"b_order": "jl", "j_pairs": True}, {"row_pairs": True}  # j outer and both pairs


@pytest.mark.parametrize("given, fixed, room, chosen", [
    (({}, {}), {}, {"lut": -1, "dsp": 10}, ("lj", False, False)),  # over the room already: nothing is added
    (GIVEN_ALL, {"b_order": "lj"}, {"lut": -1e4, "dsp": 10}, ("lj", True, True)),  # the fixed order, none adds
    (GIVEN_ALL, {}, {"lut": 1e9, "dsp": 10}, ("jl", True, True)),  # equal seconds: the builds given stay
])
def test_over_the_room_or_at_equal_seconds_no_resource_is_added(monkeypatch, given, fixed, room, chosen):
    """Where the builds given are over the room, the choice is among builds that add to no resource (within
    ``fixed``), marked as not fitting; of equal seconds the builds given stay, not the one of fewest LUTs."""
    equal = room["lut"] > 0
    monkeypatch.setattr(tt_list_step, "_pe_dma_s", (lambda *args: 1e-2) if equal else _fake_seconds)
    monkeypatch.setattr(tt_list_step, "_runs_pairs", lambda *args: {"tt1": True, "tt2": True})
    found = builds_choice(_setup(batch=16), Tt1Spec(**SPECS, **given[0]), Tt2Spec(**SPECS, **given[1]),
                          board("zedboard"), clock_mhz=100.0, copies=(2, 1), room=room, price=_fake_price,
                          fixed=fixed)
    assert tuple(found["chosen"][name] for name in CHOICES) == chosen
    mine = next(build for build in found["builds"] if tuple(build[name] for name in CHOICES) == chosen)
    assert mine["fits"] is equal and all(value <= 0 for value in mine["extra"].values())
    assert len(found["builds"]) == 8 // 2 ** len(fixed)


def test_a_fixed_field_that_cannot_fit_is_refused(monkeypatch):
    monkeypatch.setattr(tt_list_step, "_pe_dma_s", _fake_seconds)
    monkeypatch.setattr(tt_list_step, "_runs_pairs", lambda *args: {"tt1": True, "tt2": True})
    with pytest.raises(ValueError, match="no build with {'b_order': 'jl'} fits the room"):
        builds_choice(_setup(batch=16), Tt1Spec(**SPECS), Tt2Spec(**SPECS), board("zedboard"), clock_mhz=100.0,
                      copies=(2, 1), room={"lut": -1, "dsp": 10}, price=_fake_price, fixed={"b_order": "jl"})


def test_builds_given_stay_unpriced_without_a_room():
    spec1, spec2 = Tt1Spec(**SPECS, b_order="jl"), Tt2Spec(**SPECS)
    found = builds_choice(_setup(batch=16), spec1, spec2, board("zedboard"), clock_mhz=100.0)
    assert found == {"spec1": spec1, "spec2": spec2, "chosen": {"b_order": "jl", "row_pairs": False,
                                                               "j_pairs": False}}
    assert _builds_words(found) == ""


@pytest.mark.slow  # 7 s
def test_the_list_step_is_priced_in_the_order_chosen():
    found, _ = list_step_report(_setup(batch=16), Tt1Spec(**SPECS), Tt2Spec(**SPECS), board("zedboard"),
                                clock_mhz=100.0, per_call_total_s=0.004, room={"dsp": 10})
    builds = found["builds"]
    assert builds["chosen"]["b_order"] == "jl" and "spec1" not in builds
    mine = next(build for build in builds["builds"] if all(build[k] == v for k, v in builds["chosen"].items()))
    assert found["pe_s"] + found["memory_s"] == pytest.approx(mine["pe_dma_s"])


def test_the_list_step_is_priced_at_a_few_points_and_offered_fastest_first():
    """The explorer prices the list step at the best few points per call whose builds run lists and offers them
    as lists fastest first, on every HP port count, with the builds' fields builds_choice chose there; a chosen
    point whose builds run lists is priced too, and again on its own builds where others were chosen for it (the
    host measured once)."""
    from codesign.design.families import tt as tt_family
    from codesign.step.host import HostModel

    setup, zed = _setup(batch=16), board("zedboard")
    design = load_design(EXAMPLES / "digits_tt.toml", board_name="zedboard")
    knobs = {"lanes": (4, 8), "rows": (1, 2), "copies": (1,)}
    space = tt_family.explore_tt(setup, zed, bases={"tt1": Tt1Spec(**SPECS), "tt2": Tt2Spec(**SPECS)},
                                 clock_mhz=100.0, host=HostModel(fixed_s=1e-3, per_call_s=2e-5, source="test"),
                                 macs=1, knobs={"tt1": knobs, "tt2": knobs})
    chosen = space.best("time")
    report, instead = tt_family._list_step(setup, design, space.chosen_options(chosen), space.point(chosen), space,
                                           "time", lambda _: None)
    ats, candidates = list_points(space, setup, "time"), instead["candidates"]
    labels = [found["label"] for found in report["points"]]
    assert len(ats) == 3 and sorted(labels) == sorted(space.point(i)["label"] for i in ats)
    assert [found["total_s"] for found in report["points"]] == sorted(found["total_s"] for found in report["points"])
    assert [candidate["label"] for candidate in candidates] == labels and report is candidates[0]["reported"]
    for candidate in candidates:
        reported = candidate["reported"]
        assert reported["points"] == report["points"] and candidate["index"] in ats
        assert reported["label"] == space.point(candidate["index"])["label"]
        assert sorted(candidate["steps"]) == list(range(1, zed.hp_ports + 1))
        assert candidate["steps"][reported["hp_ports"]].total_s == reported["total_s"]
        builds = reported["builds"]["chosen"]
        assert candidate["pe"] == {"tt1": {"b_order": builds["b_order"], "j_pairs": builds["j_pairs"]},
                                   "tt2": {"row_pairs": builds["row_pairs"]}}
        mine = next(build for build in reported["builds"]["builds"] if all(build[k] == v for k, v in builds.items()))
        point = space.point(candidate["index"])
        assert candidate["resources"] == {key: point[key] + mine["extra"][key] for key in RESOURCES}
        assert len(candidate["stages"][1]) == len(reported["layers_s"]) * 5  # five phases a layer
    assert not instead["runs_at_chosen"]  # no chosen index given
    fourth = list_points(space, setup, "time", count=4)[3]  # a chosen point whose builds run lists is priced too
    report, instead = tt_family._list_step(setup, design, space.chosen_options(fourth), space.point(fourth), space,
                                           "time", lambda _: None, chosen=fourth)
    assert instead["runs_at_chosen"] and len(instead["candidates"]) == 5
    mine, own = (candidate for candidate in instead["candidates"] if candidate["index"] == fourth)
    given = mine["reported"]["builds"]["given"]
    assert mine["pe"] != {"tt1": {"b_order": given["b_order"], "j_pairs": given["j_pairs"]},
                          "tt2": {"row_pairs": given["row_pairs"]}}  # builds_choice changed them: its own priced too
    assert own["label"] == mine["label"] + ", its own builds" and own["reported"]["builds"] == {"chosen": given}
    assert own["pe"] == {"tt1": {"b_order": given["b_order"], "j_pairs": given["j_pairs"]},
                         "tt2": {"row_pairs": given["row_pairs"]}}
    assert own["resources"] == {key: space.point(fourth)[key] for key in RESOURCES}
    assert own["reported"]["host_measured"] == mine["reported"]["host_measured"]
