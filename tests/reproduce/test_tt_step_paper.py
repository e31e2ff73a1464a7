"""Paper 003's network on the step model (codesign.reproduce.tt_step_paper): seconds per step against the paper
and the goal, the dense route, the Markdown table and the written reports."""

from __future__ import annotations

import dataclasses
import json

import pytest

from codesign.design.families.tt import PAPER_BATCH
from codesign.reproduce.tt_step_paper import (GOAL_DSP, GOAL_SECONDS, comparison_table, paper_comparison, paper_plans,
                                              write_comparison)
from codesign.step.tt.cycles import PARALLEL_HARDWARE, step_cycles
from codesign.step.tt.schedule import StepHardware


def test_parallel_hardware_counts_dsp_per_copy_and_beats_one_copy_each():
    dsp = {"tt1": 32, "tt2": 32, "tt3": 17}
    row = paper_comparison(8, dsp=dsp, hardware=PARALLEL_HARDWARE)
    assert row.dsp_total == 2 * 32 + 4 * 32 + 17 <= GOAL_DSP
    single = paper_comparison(8, hardware=StepHardware(pe1=PARALLEL_HARDWARE.pe1, pe2=PARALLEL_HARDWARE.pe2))
    assert row.cycles < single.cycles and row.busy_cycles == single.busy_cycles and row.macs == single.macs
    assert row.meets_goal == (row.seconds <= GOAL_SECONDS)
    assert row.stream_seconds <= row.overlapped_seconds <= row.seconds
    table = comparison_table([row])
    assert "2 x 32 + 4 x 32 + 17 = 209" in table and "2 x tt1 16x2 + 4 x tt2 16x2" in table


def test_paper_network_first_layer_has_no_input_gradient():
    first, second = paper_plans(8)
    assert "input_grad[0]" not in [c.name for c in first.contractions]
    assert "input_grad[0]" in [c.name for c in second.contractions]
    assert first.geometry.batch == second.geometry.batch == PAPER_BATCH


def test_paper_comparison_seconds_and_goal():
    row = paper_comparison(4, dsp={"tt1": 128, "tt2": 128, "tt3": 16})
    assert row.seconds == pytest.approx(row.cycles / 100e6)
    assert row.dsp_total == 272
    assert row.meets_goal == (row.seconds <= GOAL_SECONDS)
    assert paper_comparison(4).meets_goal is None  # no DSP count, no verdict
    bigger = paper_comparison(8)
    assert bigger.cycles > row.cycles and bigger.macs > row.macs
    table = comparison_table([row, bigger])
    assert table.count("\n") == 9 and "272" in table and "not measured" in table
    for r in (row, bigger):
        assert r.stream_seconds <= r.overlapped_seconds <= r.seconds
        assert sum(r.phases.values()) < r.busy_cycles  # headers and status words are the rest
        assert 0 < r.phases["load"] < sum(s.sum_of("load") for s in map(step_cycles, paper_plans(r.rank)))
        assert r.cycles < r.busy_cycles  # the paired stages overlap PE1 and PE2
    assert f"{bigger.stream_seconds:.4f}" in table and f"{bigger.overlapped_seconds:.4f}" in table


def test_paper_comparison_dict_is_complete():
    payload = paper_comparison(4, dsp={"tt1": 1, "tt2": 2, "tt3": 3}).to_dict()
    for key in ("cycles", "seconds", "dsp_total", "paper_seconds", "paper_dsp", "goal_seconds", "goal_dsp",
                "meets_goal", "layer_cycles", "mac_utilisation", "phases", "words_in", "words_out", "overlapped_seconds",
                "stream_seconds", "hardware", "units", "busy_cycles", "array_macs"):
        assert key in payload


def test_write_comparison_writes_json_markdown_and_plot(tmp_path):
    rows = [paper_comparison(rank, hardware=hardware, dsp=dsp) for hardware, dsp in
            ((StepHardware(), None), (PARALLEL_HARDWARE, {"tt1": 32, "tt2": 32, "tt3": 17})) for rank in (2, 8)]
    paths = write_comparison(tmp_path / "out", rows)
    payload = json.loads(paths["json"].read_text())
    assert [entry["rank"] for entry in payload] == [2, 8, 2, 8]
    assert payload[3]["dsp_total"] == 209 and payload[0]["dsp_total"] is None
    assert paths["md"].read_text() == comparison_table(rows)
    assert paths["png"].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    with pytest.raises(ValueError, match="no comparison rows"):
        write_comparison(tmp_path / "none", [])
    assert not (tmp_path / "none").exists()


def test_paper_comparison_on_the_dense_route():
    """The dense route: fewer MACs than the direct one at rank 16 (the route's contractions shrink with the rank,
    dW's do not); with PE3 forming dW every product leaves as a word, several times the whole direct step."""
    direct = paper_comparison(16, hardware=PARALLEL_HARDWARE)
    dense = paper_comparison(16, hardware=dataclasses.replace(PARALLEL_HARDWARE, outer_pe="tt1"), route="dense")
    assert dense.macs < direct.macs and dense.seconds < direct.seconds
    assert dense.route == "dense" and dense.outer_pe == "tt1"
    table = comparison_table([direct, dense])
    assert "| direct | 16 |" in table and "| dense, dW on PE1 | 16 |" in table
    on_pe3 = paper_comparison(8, hardware=PARALLEL_HARDWARE, route="dense")
    assert on_pe3.seconds > 5 * paper_comparison(8, hardware=PARALLEL_HARDWARE).seconds
    assert on_pe3.words_out > 64 * 1024 * 512  # every product of the batch's outer products, one word each
