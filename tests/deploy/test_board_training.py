"""Training through the driver on the emulated board ends bit-identical to the golden design-point run.

The design is the shipped examples/digits_abvs.toml (FB-float MLP on the
digits, ABVS, FB 6..9); every layer GEMM of the board run goes to the
fpmac_array IP's generated HLS C++ on the emulated board, tiled to its
32 x 32 x 32 buffers. The golden run calls the golden FP-MAC GEMM on whole
layers.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from codesign.deploy.training import BoardTrainer
from codesign.design import load_design
from codesign.train.data import load_digits_dataset
from codesign.design.families.fpmac_array import fb_setup_of
from codesign.loops.fb import FbMlpTrainer
from tests.deploy.conftest import emulated_overlay

pytestmark = pytest.mark.slow

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "digits_abvs.toml"
STEPS = 3  # SGD steps (batch 64) per epoch
EPOCHS = 2  # the FB rises between them (epsilon 1), so both widths are checked


def _both_runs(tmp_path, max_steps, **changes) -> tuple[BoardTrainer, FbMlpTrainer]:
    design = load_design(EXAMPLE)
    overlay = emulated_overlay(design, tmp_path)
    data = load_digits_dataset(validation_fraction=0.2)
    board = BoardTrainer(overlay, design, ip="fpmac_array_0", **changes)  # one IP a GEMM: the per-call route
    golden = FbMlpTrainer(fb_setup_of(design, **changes))
    for trainer in (board, golden):
        trainer.fit(data, progress=False, max_steps=max_steps)
    return board, golden


def _assert_same_words(board, golden) -> int:
    """Every weight, bias and momentum word equal; returns how many were compared."""
    mine, theirs = board.read_weights(), golden.read_weights()
    assert mine["fb"] == theirs["fb"]
    compared = 0
    for key in ("weights", "biases", "velocity"):
        for index, (a, b) in enumerate(zip(mine[key], theirs[key])):
            differ = np.flatnonzero(a != b)
            assert differ.size == 0, f"{key}[{index}]: {differ.size} of {a.size} words differ"
            compared += a.size
    assert [row["accuracy"] for row in board.history] == [row["accuracy"] for row in golden.history]
    return compared


def test_weights_bit_identical_to_the_golden_run(tmp_path):
    board, golden = _both_runs(tmp_path, STEPS, epochs=EPOCHS, epsilon=1.0)
    assert [row["fb"] for row in golden.history] == [row["fb"] for row in board.history] == [6, 7]
    assert golden.fb == 8
    parameters = sum(i * o + o for i, o in zip(golden.setup.layers[:-1], golden.setup.layers[1:]))
    assert _assert_same_words(board, golden) == 2 * parameters  # weights and biases, and their momentum
    assert board.gemm.macs == golden.gemm.macs
    figures = board.throughput()
    assert figures["ip_calls"] == board.gemm.calls > 0
    assert figures["pe_cycles"] > sum(board.gemm.macs.values()) // (golden.spec.rows * golden.spec.cols)


@pytest.mark.long
def test_four_full_epochs_bit_identical(tmp_path):
    """The configuration's own optimiser settings over 4 full epochs (68 steps; about 3 minutes here)."""
    board, golden = _both_runs(tmp_path, None, epochs=4)
    assert board.step == golden.step == 4 * 17  # 1,078 training images (20 % held out for validation), batch 64
    compared = _assert_same_words(board, golden)
    figures = board.throughput()
    print(f"\n{board.step} steps through the driver, {figures['ip_calls']} IP calls, {figures['macs']:,} MACs; "
          f"{compared} words compared, 0 differ; test accuracy per epoch "
          f"{[round(100 * row['accuracy'], 1) for row in board.history]} %, FB {[row['fb'] for row in board.history]}; "
          f"IP busy {figures['ip_busy_s']:.0f} s, golden GEMM {golden.throughput()['seconds']:.0f} s")
