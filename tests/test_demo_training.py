"""The demo's training stage: the shipped design reaches an accuracy a person believes on the emulated board (its
generated HLS C++), bit-identical to the golden loop beside it, and says both figures."""

from __future__ import annotations

import json

import pytest

from codesign.demo import DEMO_SCHEDULE, Stage, build_stage, training_stage


@pytest.mark.slow
def test_the_demo_trains_the_shipped_design_to_ninety_percent_bit_identically(tmp_path, capsys):
    build_stage("zedboard", tmp_path, tmp_path / "estimate-cache", stage=Stage("build"))
    stage = Stage("training")
    training_stage(tmp_path, full=False, stage=stage)
    result = json.loads((tmp_path / "training" / "training.json").read_text())
    board, golden = result["history"][-1], result["golden_history"][-1]
    assert result["epochs"] == DEMO_SCHEDULE["epochs"] == len(result["history"])
    assert board["accuracy"] >= 0.90 and board["accuracy"] == golden["accuracy"]
    assert result["state_words"]["differ"] == 0 and result["state_words"]["compared"] > 10_000
    shown = f"test accuracy {100 * board['accuracy']:.1f} % on the emulated board"
    assert stage.status == "running" and shown in stage.detail
    assert f"{100 * golden['accuracy']:.1f} % in the golden loop" in (tmp_path / "training" / "training.md").read_text()
