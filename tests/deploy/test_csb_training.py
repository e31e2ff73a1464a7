"""Compressed training through the driver on the emulated board ends bit-identical to the golden CSB loop.

The design is the shipped examples/digits_compressed_mlp.toml (MLP 64-64-32-10
on the digits, four CSB PEs with 16 x 16 blocks and 16 lanes); every fixed-point
layer product of the board run goes to one csb IP's generated HLS C++ on the
emulated board (the per-call route drives one IP), one transaction per block;
the golden run calls the golden layer schedules of codesign.pe.csb.golden.
"""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path

import numpy as np
import pytest

from codesign.deploy import DeployError, OverlayMismatch
from codesign.deploy.csb_training import CsbBoardTrainer, IpCsb
from codesign.design import load_design
from codesign.design.point import design_from_dict
from codesign.train.config import read_toml
from codesign.train.data import load_digits_dataset
from codesign.loops.common import HwTrainError
from codesign.design.families.csb import csb_setup, csb_setup_of
from codesign.loops.csb import CsbMlpTrainer
from codesign.loops.csb_backend import GoldenCsb
from tests.deploy.conftest import emulated_overlay

pytestmark = pytest.mark.slow

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
EXAMPLE = EXAMPLES / "digits_compressed_mlp.toml"
QUICK = {"epochs": 2, "warmup_epochs": 1}  # one float warm-up epoch, then one epoch on the PE
STEPS = 4  # steps per epoch (batch 64)


@pytest.fixture(scope="module")
def example(tmp_path_factory):
    design = load_design(EXAMPLE)
    return design, emulated_overlay(design, tmp_path_factory.mktemp("csb_train"))


@pytest.fixture(scope="module")
def data():
    return load_digits_dataset()


class SaturationCount(GoldenCsb):
    """The golden backend, counting FP/EB/WG results at an end of the accumulator range."""

    saturated = 0

    def _seen(self, out):
        spec = self.spec
        self.saturated += int(np.sum((out == spec.acc_min) | (out == spec.acc_max)))
        return out

    def forward(self, csb, x):
        return self._seen(super().forward(csb, x))

    def backward_error(self, csb, dy):
        return self._seen(super().backward_error(csb, dy))

    def weight_grad(self, csb, x, dy):
        return self._seen(super().weight_grad(csb, x, dy))


def _both_runs(overlay, design, data, backend=None, **changes):
    board = CsbBoardTrainer(overlay, design, ip="csb_0", **changes)  # one IP a call: the per-call route
    golden = CsbMlpTrainer(csb_setup_of(design, **changes), backend)
    seconds = {}
    for name, trainer in (("board", board), ("golden", golden)):
        started = time.perf_counter()
        trainer.fit(data, progress=False, max_steps=STEPS)
        seconds[name] = time.perf_counter() - started
    return board, golden, seconds


def _assert_same_state(board, golden) -> int:
    """Every buffer word and mask bit equal, and the scales; returns the words compared (buffers + masks)."""
    mine, theirs = board.read_weights(), golden.read_weights()
    assert mine["phase"] == theirs["phase"] == "fixed"
    assert mine["frac_bits"] == theirs["frac_bits"]
    compared = 0
    for key in ("buffers", "masks"):
        for index, (a, b) in enumerate(zip(mine[key], theirs[key])):
            differ = np.flatnonzero(a != b)
            assert differ.size == 0, f"{key}[{index}]: {differ.size} of {a.size} words differ"
            compared += a.size
    assert [row["loss"] for row in board.history] == [row["loss"] for row in golden.history]
    assert [row["accuracy"] for row in board.history] == [row["accuracy"] for row in golden.history]
    return compared


def _steps_per_s(trainer) -> float:
    return trainer.fixed_steps / sum(row["seconds"] for row in trainer.history if row["phase"] == "fixed")


def test_weights_and_masks_bit_identical_to_the_golden_run(example, data):
    design, overlay = example
    board, golden, seconds = _both_runs(overlay, design, data, **QUICK)
    assert board.fixed_steps == golden.fixed_steps == STEPS
    compared = _assert_same_state(board, golden)
    assert compared == 2 * sum(rows * cols for rows, cols in golden.shapes)
    pruned = golden.pruning_summary()["fraction_pruned"]
    assert 0 < pruned < 1
    # the buffers moved: every stored word of the first layer is compared after real updates
    assert board.backend.macs == golden.backend.macs and golden.backend.macs["UPD"] > 0
    figures = board.throughput()
    assert figures["ip_calls"] == board.backend.calls > 0 and figures["pe_cycles"] > 0
    print(f"\n{board.fixed_steps} steps through the driver, {compared} words compared (buffers and masks), "
          f"0 differ; {pruned:.1%} of the weights pruned; steps/s emulated {_steps_per_s(board):.2f}, golden "
          f"{_steps_per_s(golden):.2f} (epochs with evaluation); fit {seconds['board']:.1f} s vs "
          f"{seconds['golden']:.1f} s; {figures['transactions']} transactions in {figures['ip_calls']} IP calls")


def test_saturating_16_bit_accumulators_bit_identical(tmp_path, data):
    """acc_bits = 16: accumulators saturate, so the order of additions (the chaining) must be the golden one."""
    raw = read_toml(EXAMPLE)
    raw["design"]["pe"]["csb"]["acc_bits"] = 16
    raw["design"]["name"] = "digits_compressed_acc16"
    design = design_from_dict(raw)
    counting = SaturationCount(design.instances[0].spec)
    board, golden, _ = _both_runs(emulated_overlay(design, tmp_path), design, data, backend=counting, **QUICK)
    assert counting.saturated > 0
    compared = _assert_same_state(board, golden)
    print(f"\nacc_bits 16: {golden.fixed_steps} steps, {counting.saturated} saturated results, {compared} words equal")


def test_a_128_bit_stream_build_bit_identical(tmp_path, data):
    """The example's build, one copy, on a 128-bit stream (docs/csb.md, "Wide streams"), one call at a time (the
    per-call route, as an HLS export trains): every transaction sent as beats and every answer read back from them."""
    raw = read_toml(EXAMPLE)
    raw["design"]["pe"]["csb"].update(stream_bits=128, copies=1)  # copies share a step as lists only
    raw["design"]["name"] = "digits_compressed_w128"
    design = design_from_dict(raw)
    board, golden, _ = _both_runs(emulated_overlay(design, tmp_path), design, data, **QUICK)
    compared = _assert_same_state(board, golden)
    figures = board.throughput()
    assert board.backend.spec.parts == 4 and figures["transactions"] > 0
    print(f"\nstream_bits 128: {golden.fixed_steps} steps, {figures['transactions']} transactions in "
          f"{figures['ip_calls']} calls, {figures['pe_cycles']} PE cycles, {compared} words equal")


@pytest.mark.long
def test_full_configuration_bit_identical(example, data):
    """The example's own schedule: 5 warm-up and 7 fixed-point epochs of 21 steps (about 2.5 minutes here)."""
    design, overlay = example
    board = CsbBoardTrainer(overlay, design, ip="csb_0")
    golden = CsbMlpTrainer(csb_setup_of(design))
    for trainer in (board, golden):
        trainer.fit(data, progress=False)
    assert board.fixed_steps == golden.fixed_steps == 7 * 21
    compared = _assert_same_state(board, golden)
    figures = board.throughput()
    print(f"\n{board.fixed_steps} steps through the driver, {compared} words compared, 0 differ; "
          f"{golden.pruning_summary()['fraction_pruned']:.1%} pruned; accuracy after each epoch "
          f"{[round(row['accuracy'], 4) for row in board.history]}; steps/s emulated {_steps_per_s(board):.2f}, "
          f"golden {_steps_per_s(golden):.2f}; {figures['ip_calls']} IP calls, {figures['transactions']} "
          f"transactions, {figures['macs']} MACs, IP busy {figures['ip_busy_s']:.1f} s, PE model "
          f"{figures['pe_cycles']} cycles = {figures['pe_model_s'] * 1e3:.0f} ms at the design's clock")


# ---------------------------------------------------------------------------- bad input


def test_a_design_the_overlay_does_not_implement_is_refused(example):
    design, overlay = example
    other = dataclasses.replace(design, instances=(dataclasses.replace(
        design.instances[0], spec=dataclasses.replace(design.instances[0].spec, batch=8)),))
    with pytest.raises(OverlayMismatch, match="batch"):
        CsbBoardTrainer(overlay, other)
    with pytest.raises(OverlayMismatch, match="fpmac_array"):
        CsbBoardTrainer(overlay, load_design(EXAMPLES / "digits_abvs.toml"))


def test_configurations_the_loop_cannot_train_are_refused(example):
    design, _ = example
    with pytest.raises(HwTrainError, match="has no csb instance"):
        csb_setup_of(load_design(EXAMPLES / "digits_abvs.toml"))
    with pytest.raises(HwTrainError, match="not model 'resnet'"):
        csb_setup_of(load_design(EXAMPLES / "digits_compressed.toml"))
    with_momentum = dataclasses.replace(design.training, optim=dataclasses.replace(design.training.optim,
                                                                                   momentum=0.9))
    with pytest.raises(HwTrainError, match="plain SGD"):
        csb_setup(with_momentum)
    with pytest.raises(HwTrainError, match="warmup_epochs"):
        csb_setup_of(design, epochs=3, warmup_epochs=3)


def test_wrong_batches_are_refused_before_the_ip_runs(example):
    design, overlay = example
    trainer = CsbBoardTrainer(overlay, design, ip="csb_0", **QUICK)
    calls = trainer.backend.driver.calls
    rng = np.random.default_rng(0)
    with pytest.raises(HwTrainError, match=r"need \(n, 64\)"):
        trainer.train_step(rng.random((8, 63)), np.zeros(8, np.int64))
    with pytest.raises(HwTrainError, match="labels"):
        trainer.train_step(rng.random((8, 64)), np.zeros(7, np.int64))
    with pytest.raises(HwTrainError, match="labels"):
        trainer.train_step(rng.random((8, 64)), np.full(8, 10))
    assert trainer.backend.driver.calls == calls


def test_ip_csb_refuses_another_pe(overlay):
    from codesign.pe.csb.spec import CsbSpec

    with pytest.raises(DeployError, match="not csb"):
        IpCsb(overlay.accelerator("fpmac_array_0"), CsbSpec(kernel=1))
    with pytest.raises(DeployError, match="FC layers"):
        IpCsb(overlay.accelerator("csb_0"), CsbSpec(kernel=3, out_h=4, out_w=4))
