"""The conv loop's fixed-point steps as call lists on the emulated board's csb IP (the generated C++ in list mode,
through the PYNQ driver): every loss and buffer word equal to the golden conv loop's, with the host's traffic per
step within issue 40's goals."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

from codesign.deploy.list_shell import ListShell
from codesign.design import load_design
from codesign.loops.csb_conv import CsbConvSetup, CsbConvTrainer
from codesign.loops.csb_conv_lists import CsbConvListTrainer
from codesign.pe.csb import CsbSpec
from codesign.train.data import synthetic_dataset
from tests.deploy.conftest import emulated_overlay

pytestmark = pytest.mark.slow

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "digits_compressed.toml"
SPEC = CsbSpec(block_rows=8, block_cols=8, kernel=3, out_h=4, out_w=4, batch=8, max_stride=2)


def test_conv_list_steps_on_the_emulated_ip_equal_the_golden_loop(tmp_path):
    design = load_design(EXAMPLE)
    design = dataclasses.replace(design, instances=(dataclasses.replace(design.instances[0], spec=SPEC),))
    overlay = emulated_overlay(design, tmp_path)
    setup = CsbConvSetup(spec=SPEC, image=(1, 8, 8), convs=((8, 1), (12, 2)), classes=10, batch_size=24, epochs=4,
                         warmup_epochs=1, lr=0.1, schedule="constant", seed=0)
    board = CsbConvListTrainer(setup, ListShell(overlay, {"csb": SPEC}))
    golden = CsbConvTrainer(setup)
    data = synthetic_dataset(samples=120, seed=1)
    for trainer in (board, golden):
        trainer.fit(data, epochs=2, progress=False, max_steps=2)  # the warm-up, the pruning, a fixed epoch
    for row_b, row_g in zip(board.history, golden.history):
        assert (row_b["loss"], row_b["accuracy"], row_b["macs"]) == (row_g["loss"], row_g["accuracy"], row_g["macs"])
    traffic = overlay.device.traffic
    x, y = data.train_x[:24], data.train_y[:24]
    traffic.clear()
    assert board.train_step(x, y) == golden.train_step(x, y)
    figures = traffic.as_dict()
    print(f"\n[conv lists, emulated board] a step: {figures}")
    assert figures["flushed_bytes"] <= 2 * 4 * np.asarray(x).size + (64 << 10)
    assert figures["invalidated_bytes"] <= 64 << 10 and figures["register_writes"] <= 64
    board._pull()
    words = sum(b.size for b in golden.buffers)
    assert all(np.array_equal(mine, theirs) for mine, theirs in zip(board.buffers, golden.buffers)) and words > 1000
