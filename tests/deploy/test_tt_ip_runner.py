"""The TT board trainer's IP path (IpRunner: the step's calls packed per copy, sent to each IP, answers unpacked)
in make test, at a size that fits: one step of the shipped digits_tt design on its emulated board, every state
word equal to the golden NumPy loop's. The long runs over copies, routes and schedules are tests/deploy/
test_tt_training.py's (slow)."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np

from codesign.deploy import CodesignOverlay
from codesign.deploy.families import golden_trainer
from codesign.deploy.selfcheck import compare_states
from codesign.deploy.tt_training import TtBoardTrainer
from codesign.design import load_design
from codesign.design.build import write_emulation_folder
from codesign.loops.data import as_arrays
from codesign.train.trainer import load_dataset

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "digits_tt.toml"


def test_one_step_through_the_ip_runner_equals_the_golden_loop(tmp_path):
    design = load_design(EXAMPLE)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the notice that the emulated board stands in for the board
        overlay = CodesignOverlay(write_emulation_folder(design, tmp_path / "zedboard"), design=design, emulate=True)
    changes = {"epochs": 1}
    board, golden = TtBoardTrainer(overlay, **changes), golden_trainer(overlay.manifest, **changes)
    data = as_arrays(load_dataset(design.training))
    for trainer in (board, golden):
        trainer.fit(data, progress=False, max_steps=1)
    words = compare_states(board.read_weights(), golden.read_weights(), ("cores", "biases", "moments", "trackers"))
    assert words["differ"] == 0 and words["compared"] > 1000
    assert [row["loss"] for row in board.history] == [row["loss"] for row in golden.history]
    assert all(driver.calls > 0 for pe in ("tt1", "tt2") for driver in board.ip_runner.drivers[pe])
    assert board.throughput()["transactions"] == golden.throughput()["transactions"] > 0
    assert np.array_equal(board.predict(data.test_x[:32]), golden.predict(data.test_x[:32]))
