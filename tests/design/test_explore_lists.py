"""The explorer and a TT design's step as call lists: which of the points priced as lists it takes, and an
explore end to end that takes one (:func:`codesign.design.explore_run.instead_choice`)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest

from codesign.design import load_design
from codesign.design.explore_run import design_of_point, instead_choice, summary
from codesign.design.families.tt import tt_hardware, tt_setup_of
from codesign.step.tt.list_time import tt_list_plans
from codesign.step.tt.time import tt_step_time
from codesign.train.config import read_toml
from tests.design.conftest import GRID_KNOBS, HOST

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def test_a_step_priced_as_the_board_runs_it_is_taken_where_it_wins(space, design, tmp_path):
    """instead_choice (a TT design's call lists): taken at another point only where faster, at the chosen point
    whatever its time (the board runs the lists there), never where Yosys puts it over the cap; taken, it sets
    the builds' fields, drops the forward split and spreads its IPs over the fewest ports within PORT_GAIN of
    its best. Candidates passed over (over the cap, or their IPs need more ports than asked) give way to the
    next. Yosys from the shipped reports of the calibration grid's builds."""
    raw = read_toml(EXAMPLES / "digits_tt.toml")
    chosen = space.best("time")
    step = tt_step_time(tt_setup_of(design), tt_hardware(space.chosen_options(chosen)), design.board,
                        clock_mhz=100.0, host=HOST, hp_ports=int(space.hp_ports[chosen]))
    other = next(int(i) for i in np.flatnonzero(space.feasible) if int(i) != chosen)
    field = {"tt1": {"b_order": "lj"}, "tt2": {}}  # the grid's builds as they are: no synthesis

    def candidate(index, scale, pe=field, label=None, by_ports=(1.0, 0.8, 0.8, 0.8), **changes):
        # the step on 1..4 ports: ``scale`` times the chosen step's host, times ``by_ports``
        steps = {count: dataclasses.replace(step, host_s=step.host_s * scale * factor, **changes)
                 for count, factor in enumerate(by_ports, start=1)}
        return {"index": index, "label": label or space.point(index)["label"], "pe": pe,
                "design": {"forward_split": False}, "steps": steps, "host_hidden_s": {c: 1e-5 * c for c in steps},
                "stages": {count: (count,) for count in steps}, "hardware": {"built": index},
                "resources": {"dsp": index}, "reported": {}}

    def choose(*candidates, cap=0.8, here=False, hp_ports=None, objective="time"):  # here: the chosen point's
        asked = {**raw, "design": {**raw["design"], "hp_ports": hp_ports}} if hp_ports else raw  # builds run lists
        return instead_choice(asked, design, space, chosen, step, {"candidates": list(candidates),
                                                                   "runs_at_chosen": here, "report": "list_step"},
                              objective=objective, cache_dir=tmp_path, cap=cap, progress=lambda _: None)

    taken = choose(candidate(other, 0.5))
    mine = candidate(other, 0.5)["steps"][taken["hp_ports"]["chosen"]]
    (yosys,) = taken["confirmed"]
    ports = taken["hp_ports"]["chosen"]
    assert taken["report"] == {"chosen": True, "why": None, "tried": [], "instead_of": {
        "index": chosen, "label": space.point(chosen)["label"], "total_s": step.total_s, "energy_pj": step.energy_pj},
        "index": other, "hp_ports": ports, "total_s": mine.total_s, "pe_s": mine.pe_s, "memory_s": mine.memory_s,
        "host_s": mine.host_s, "host_hidden_s": 1e-5 * ports, "host_share": mine.host_s / mine.total_s,
        "resources": {"model": {"dsp": other}, "yosys": yosys["yosys_total"]}}
    assert yosys["fits"] and yosys["point"]["label"] == space.point(other)["label"] + " as call lists"
    assert yosys["point"]["dsp"] == other  # the candidate's builds by the model, as estimate_layer_resources gives
    ports = taken["hp_ports"]
    assert ports["chosen"] == taken["toml"]["design"]["hp_ports"] == max(ports["fewest"], 2)
    assert list(ports["steps"]) == list(range(ports["fewest"], 5))
    assert taken["step"] == candidate(other, 0.5)["steps"][ports["chosen"]] and taken["candidate"]["index"] == other
    assert taken["toml"]["design"]["forward_split"] is False and taken["toml"]["design"]["pe"]["tt1"]["b_order"] == "lj"
    assert {i.pe: (i.spec.lanes, i.spec.rows, i.spec.b_order) for i in taken["design"].instances if i.pe == "tt1"} == \
        {"tt1": (space.point(other)["tt1"]["lanes"], space.point(other)["tt1"]["rows"], "lj")}
    assert taken["stages"] == (taken["hp_ports"]["chosen"],) and taken["hardware"] == {"built": other}
    slower = choose(candidate(other, 1.5))
    assert slower["report"]["why"] == "the chosen point's step is faster" and not slower["report"]["chosen"]
    assert "toml" not in slower and slower["confirmed"] == []  # no Yosys run for a step that is not taken
    assert choose(candidate(other, 1.5), here=True)["report"]["chosen"]  # the chosen point's board runs lists
    many = candidate(other, 0.4, pe={"tt1": {"copies": 8}, "tt2": {"copies": 8}})  # 17 IPs: 3 ports or more
    asked = choose(many, hp_ports=1)
    assert asked["report"]["why"] == "[design] hp_ports = 1 asks for fewer than its IPs need (3)"
    assert asked["confirmed"] == []
    over = choose(candidate(other, 0.5), cap=0.01)
    assert not over["report"]["chosen"] and over["report"]["why"].startswith("Yosys puts its builds over the cap")
    passed = choose(many, candidate(other, 0.5), hp_ports=2)  # the first needs 3 ports: the next is taken
    assert passed["report"]["chosen"] and passed["report"]["hp_ports"] == 2 and passed["candidate"]["pe"] == field
    refused = choose(many, hp_ports=2)["report"]
    assert refused["tried"] == [{"label": many["label"], "why": "[design] hp_ports = 2 asks for fewer than its IPs "
                                                                "need (3)"}]
    one_port = candidate(other, 0.3, label="fast on one port", by_ports=(0.3, 3.0, 3.0, 3.0))
    ranked = choose(one_port, candidate(other, 0.5), hp_ports=2)  # ranked at the ports asked, not the first's
    assert ranked["report"]["chosen"] and ranked["candidate"]["label"] == space.point(other)["label"]
    cheaper = candidate(other, 1.5, energy_pj=0.5 * step.energy_pj)  # slower, but less energy
    assert choose(cheaper, objective="energy")["report"]["chosen"]
    same_energy = choose(candidate(other, 0.5), objective="energy")["report"]
    assert same_energy["why"] == "the chosen point's step is less energy"
    big = dict(candidate(other, 0.4, pe={"tt1": {"copies": 4}, "tt2": {"copies": 4}}), label="big")
    bigger = choose(big, candidate(other, 0.5), cap=_cap_between(design, raw, space, other, tmp_path))
    assert bigger["report"]["chosen"] and bigger["candidate"]["pe"] == field  # the best over the cap: the next
    assert [entry["point"]["label"] for entry in bigger["confirmed"]] == \
        ["big as call lists", space.point(other)["label"] + " as call lists"]
    assert [entry["fits"] for entry in bigger["confirmed"]] == [False, True]
    assert bigger["report"]["tried"][0]["why"].startswith("Yosys puts its builds over the cap: ")


def _cap_between(design, raw, space, index, tmp_path):
    """A cap that point ``index``'s builds fit, on the grid's shipped reports, and four copies of each do not."""
    from codesign.design.fit import fit_design

    point = space.point(index)
    used = []
    for copies in (None, 4):
        fields = {pe: {**point[pe], **({"copies": copies} if copies else {})} for pe in ("tt1", "tt2")}
        built = design_of_point(raw, design, {**point, **fields})[1]
        fit = fit_design(built, cache_dir=tmp_path, limit_percent=100.0)
        used.append(max(fit.total[key] / fit.budget[key] for key in fit.budget))
    assert used[0] < used[1]
    return (used[0] + used[1]) / 2


@pytest.mark.slow  # 40 s on the shipped Yosys reports; about 2 min where builds are synthesised
def test_explore_takes_a_tracked_designs_step_as_call_lists_end_to_end(tmp_path, explore_end_to_end):
    """digits_tt under tracked scales (its PEs then read 16-bit B operands, so their builds run call lists): the
    explorer prices its best points as lists, takes the fastest, and the reports, chosen.toml, the summary and
    the fit ``codesign design`` checks all describe that step and its builds."""
    import tomli_w

    from codesign.design.fit import fit_design

    raw = read_toml(EXAMPLES / "digits_tt.toml")
    raw["techniques"]["tt"]["precision"]["scale_rule"] = "tracked"
    example = tmp_path / "digits_tt_tracked.toml"
    example.write_text(tomli_w.dumps(raw))
    design = load_design(example, board_name="ultra96v2")
    run = explore_end_to_end(example, design, knobs={"tt1": GRID_KNOBS, "tt2": GRID_KNOBS},
                             cache_dir=tmp_path / "cache", out=tmp_path / "out")
    found, step = run.performance["list_step"], run.performance["step"]
    assert run.result["instead"] and found["chosen"] and found["why"] is None
    assert found["label"].startswith(run.point["label"]) and len(found["points"]) >= 3
    builds = found["builds"]["chosen"]
    specs = {i.pe: i.spec for i in run.again.instances}
    assert (specs["tt1"].b_order, specs["tt1"].j_pairs, specs["tt2"].row_pairs) == \
        (builds["b_order"], builds["j_pairs"], builds["row_pairs"])
    assert run.again.forward_split is False
    assert run.again.ports_used == found["hp_ports"] == run.performance["hp_ports"]["chosen"]
    assert (step["pe_s"], step["host_s"]) == (found["pe_s"], found["host_s"])
    cycles = json.loads((tmp_path / "out" / "estimate_layer_cycles.json").read_text())
    copies = tuple(sum(i.pe == pe for i in run.again.instances) for pe in ("tt1", "tt2"))
    plans = tt_list_plans(tt_setup_of(design), specs["tt1"], specs["tt2"], copies)
    assert len(plans) == len(found["layers_s"])
    assert len(cycles["stages"]) == sum(len(lists.phases) for lists in plans)  # a stage a phase of each layer
    assert found["resources"]["yosys"] == run.result["confirmed"][-1]["yosys_total"]
    assert found["resources"]["model"] == run.result["instead"]["resources"]
    assert run.performance["throughput"]["equivalent_ops_per_dsp_cycle"] == pytest.approx(
        step["dense_macs"] * 2 / (found["resources"]["model"]["dsp"] * step["pe_s"] * step["clock_mhz"] * 1e6))
    text = summary(run.result)
    assert f"chosen (time): {run.point['label']}, its step as call lists" in text
    assert "resources (model, its builds as call lists): " in text
    assert fit_design(run.again, cache_dir=tmp_path / "cache", limit_percent=80).fits  # as codesign design checks


def test_the_summary_gives_the_list_step_or_why_it_was_not_priced():
    from codesign.design.explore_run import _as_lists_words, _list_step_lines

    found = {"priced": True, "chosen": False, "label": "2 x tt1 8x8x128 + 2 x tt2 8x8x128", "total_s": 0.0061,
             "pe_s": 0.0038, "memory_s": 0.0, "host_s": 0.0023, "host_share": 0.377, "per_call_total_s": 0.0039,
             "macs_s": 0.0003, "layers_s": [0.0021, 0.0017],
             "host_work": {"lists": 15, "calls": 176, "flushed_bytes": 55_500, "read_bytes": 61_600}}
    (line,) = _list_step_lines(found)
    assert "at 2 x tt1 8x8x128 + 2 x tt2 8x8x128, the best point whose builds run lists" in line
    assert "6.100 ms = PE and DMA 3.800 + memory 0.000 + host 2.300 (measured, 38%), against 3.900 ms" in line
    assert "layers 2.100, 1.700 ms; MAC bound 0.300 ms; per step 15 lists, 176 calls, 54.2 KiB flushed" in line
    (line,) = _list_step_lines({**found, "why": "the chosen point's step is faster"})
    assert "run lists (not chosen: the chosen point's step is faster) (host left" in line
    (line,) = _list_step_lines({**found, "points": [{"label": found["label"], "total_s": 0.0061},
                                                     {"label": "b", "total_s": 0.0072}]})
    assert "8x8x128, the fastest as lists of the 2 best points per call whose builds run them (host left" in line
    assert line.endswith("54.2 KiB flushed, 60.2 KiB read; as lists also b 7.200 ms")
    (line,) = _list_step_lines({**found, "chosen": True})
    assert "the step as call lists at the chosen point (host left" in line
    tried = [{"label": "a", "why": "Yosys puts its builds over the cap: lut"}, {"label": "b", "why": "c"}]
    (line,) = _list_step_lines({**found, "chosen": True, "tried": tried})
    assert line.endswith("60.2 KiB read; passed over: a (Yosys puts its builds over the cap: lut); b (c)")
    (line,) = _list_step_lines({**found, "why": tried[0]["why"], "tried": tried})  # the first said once
    assert "(not chosen: Yosys puts its builds over the cap: lut)" in line and line.endswith("read; passed over: b (c)")
    replaced = {**found, "chosen": True, "index": 7,
                "instead_of": {"index": 3, "label": "1 x tt1 16x8x64", "total_s": 0.1759}}
    assert _as_lists_words(replaced) == ", its step as call lists (over 1 x tt1 16x8x64, per call 175.900 ms)"
    own = {**replaced, "label": "1 x tt1 16x8x64, its own builds", "index": 3}  # the chosen point, its own builds
    assert _as_lists_words(own) == ", its step as call lists (per call 175.900 ms)"
    assert _as_lists_words(found) == ""
    assert _list_step_lines({"priced": False, "why": "scale_rule"}) == ["  the step as call lists: not priced "
                                                                        "(scale_rule)"]
    assert _list_step_lines(None) == []
