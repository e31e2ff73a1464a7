"""Training through the driver on the emulated board ends bit-identical to the golden design-point run.

The design is the shipped examples/digits_abvs.toml (FB-float MLP on the
digits, ABVS); every layer GEMM of the board run is sent to the
fpmac_array IP's generated HLS C++ on the emulated board, tiled to its
buffers. The golden run calls the golden FP-MAC GEMM on whole layers.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest

from codesign.pe import REGISTRY

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "digits_abvs.toml"

pytestmark = pytest.mark.slow

STEPS = 3  # SGD steps per epoch, two epochs: the FB may change between them
EPOCHS = 2


def _fpmac_array_ip_ready() -> str | None:
    if "fpmac_array" not in REGISTRY:
        return "the fpmac_array PE is not registered yet (codesign.pe.REGISTRY), so no design has its IP"
    return None


@pytest.fixture(scope="module")
def design():
    why = _fpmac_array_ip_ready()
    if why:
        pytest.skip(why)
    from codesign.design import load_design

    return load_design(EXAMPLE)


def test_weights_bit_identical_to_the_golden_run(design, tmp_path):
    from codesign.deploy import CodesignOverlay, write_emulation_folder
    from codesign.deploy.training import BoardTrainer
    from codesign.train.data import load_digits_dataset
    from codesign.train.hw_golden import FbMlpTrainer, HwTrainSetup

    folder = write_emulation_folder(design, tmp_path / design.board.name)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        overlay = CodesignOverlay(folder, design=design, emulate=True)
    data = load_digits_dataset()
    changes = {"epochs": EPOCHS, "epsilon": 1.0}  # epsilon 1: every check raises the FB
    board = BoardTrainer(overlay, design, **changes)
    golden = FbMlpTrainer(HwTrainSetup.from_design(design, **changes))
    for trainer in (board, golden):
        trainer.fit(data, progress=False, max_steps=STEPS)
    assert [row["fb"] for row in board.history] == [row["fb"] for row in golden.history]
    assert [row["accuracy"] for row in board.history] == [row["accuracy"] for row in golden.history]
    mine, theirs = board.read_weights(), golden.read_weights()
    assert mine["fb"] == theirs["fb"]
    compared = 0
    for key in ("weights", "biases", "velocity"):
        for index, (a, b) in enumerate(zip(mine[key], theirs[key])):
            differ = np.flatnonzero(a != b)
            assert differ.size == 0, f"{key}[{index}]: {differ.size} of {a.size} words differ"
            compared += a.size
    parameters = sum(i * o + o for i, o in zip(golden.setup.layers[:-1], golden.setup.layers[1:]))
    assert compared == 2 * parameters  # every weight, bias and momentum word
    assert board.gemm.macs == golden.gemm.macs
    assert board.throughput()["ip_calls"] == board.gemm.calls
