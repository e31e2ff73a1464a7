"""ABVS's report texts: how the schedule grid was widened, and the results table's headline figure."""

import json
from pathlib import Path

import pytest

from codesign.reproduce.abvs_report import fb_schedule_note, headline, restated_notes, schedule_widening_text

RESULTS = Path(__file__).resolve().parents[2] / "results"


def test_the_widening_text_names_each_round():
    assert "not widened" in schedule_widening_text({"widenings": []})
    text = schedule_widening_text({"widenings": [{"round": 1, "axis": "check_every_epochs", "value": 8, "edge": 4}]})
    assert "round 1: the check interval (epochs) continued to 8" in text and "still" not in text
    text = schedule_widening_text({"still_on_edge": True, "widenings": [
        {"round": 1, "axis": "check_every_epochs", "value": 8, "edge": 4},
        {"round": 2, "axis": "gap", "value": 4, "edge": 3}]})
    assert "round 2: the gap FB_max - FB_min continued to 4" in text and "still on the grid's edge" in text


def test_the_headline_reads_the_saving_and_the_accuracy_difference_of_a_committed_report():
    payload = json.loads((RESULTS / "abvs" / "results.json").read_text(encoding="utf-8"))
    saving = payload["extra"]["eq2_saving_vs_fixed"]["saving"]
    text = headline(payload)
    assert text.startswith(f"Eq. (2) saving vs fixed FB {100 * saving['mean']:.1f} % [") and text.endswith(" pt")


def test_identical_fb_traces_are_called_a_fixed_schedule_and_different_ones_adaptive():
    same = [[5, 5, 5, 6, 6]] * 3
    text = fb_schedule_note(same)
    assert text.startswith("the FB rule took the same path in all 3 evaluation runs (FB 5 in epochs 0-2, FB 6 in "
                           "epochs 3-4): on this data it is a fixed FB schedule")
    assert fb_schedule_note([[5, 5, 6], [5, 6, 6]]).startswith("the FB rule took 2 different paths over the 2 ")
    with pytest.raises(ValueError, match="no FB traces"):
        fb_schedule_note([])


def test_the_committed_abvs_report_ran_one_fixed_schedule_on_digits():
    payload = json.loads((RESULTS / "abvs" / "results.json").read_text(encoding="utf-8"))
    (note,) = restated_notes(payload)
    assert "same path in all 9 evaluation runs (FB 5 in epochs 0-32, FB 6 in epochs 33-49)" in note
