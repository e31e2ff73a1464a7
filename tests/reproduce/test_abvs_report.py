"""ABVS's report texts: how the schedule grid was widened, and the results table's headline figure."""

import json
from pathlib import Path

from codesign.reproduce.abvs_report import headline, schedule_widening_text

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
