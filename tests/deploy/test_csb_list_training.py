"""CSB training with every fixed-point step as call lists on the emulated board's csb IP or copies of it (the
generated C++ in list mode) ends bit-identical to the golden loop in every state word and loss, over the warm-up,
the pruning event and two fixed-point epochs, within issue 40's host traffic goals."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from codesign.deploy.csb_list_training import CsbListBoardTrainer
from codesign.deploy.families import board_trainer
from codesign.design import load_design
from codesign.design.families.csb import csb_setup_of
from codesign.loops.csb import CsbMlpTrainer
from codesign.train.data import load_digits_dataset
from tests.deploy.conftest import emulated_overlay

pytestmark = pytest.mark.slow

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "digits_compressed_mlp.toml"
CHANGES = {"epochs": 3, "warmup_epochs": 1, "schedule": "constant"}  # a warm-up epoch, then two fixed-point epochs


@pytest.mark.parametrize("copies, bits, loss", [(1, 32, False), (2, 32, False), (4, 32, False), (2, 128, False),
                                                (4, 32, True), (2, 128, True)])
def test_list_training_on_the_ip_is_bit_identical_and_within_the_traffic_goals(tmp_path, copies, bits, loss):
    """On one csb IP of the example's build, and on two and on four copies of it (the example's): on copies the
    forward's and the errors' lane chunks run side by side, the blocks' gradients and updates dealt among them
    (three phases a step); on two copies of it on a 128-bit stream (docs/csb.md, "Wide streams"); and with the
    LOSS unit (the loss gradient on the PE, docs/csb.md "The loss on the PE")."""
    path = tmp_path / "design.toml"
    text = EXAMPLE.read_text()
    assert text.count("\ncopies = 4 ") == 1 and text.count("\nparallel = 1") == 1  # the example's build
    assert text.count("\nloss = true ") == 1
    path.write_text(text.replace("\ncopies = 4 ", f"\ncopies = {copies} ").replace(
        "\nparallel = 1", "\nparallel = 1" + (f"\nstream_bits = {bits}" if bits != 32 else "")).replace(
        "\nloss = true ", f"\nloss = {'true' if loss else 'false'} "))
    design = load_design(path)
    assert design.instances[0].spec.stream_bits == bits and design.instances[0].spec.loss == loss
    overlay = emulated_overlay(design, tmp_path)
    data = load_digits_dataset(validation_fraction=0.2)
    board, golden = board_trainer(overlay, **CHANGES), CsbMlpTrainer(csb_setup_of(design, **CHANGES))
    assert isinstance(board, CsbListBoardTrainer)  # the family's trainer of a build with square blocks
    for trainer in (board, golden):
        trainer.fit(data, progress=False, max_steps=3)
    assert [row["phase"] for row in board.history] == ["warmup", "fixed", "fixed"]
    assert board.inputs_staged == 4  # each fixed epoch's later two batches written beside the step before
    for row_b, row_g in zip(board.history, golden.history):
        assert (row_b["loss"], row_b["accuracy"], row_b["macs"]) == (row_g["loss"], row_g["accuracy"], row_g["macs"])
    traffic = overlay.device.traffic
    lists_a_step, stages = (2, 2) if copies == 1 else (3 * copies, 3)  # four lane chunks: a list an IP a phase
    x, y = data.train_x[:64], data.train_y[:64]
    figures = []
    for _ in range(2):  # a step in each phase, the lists built before
        traffic.clear()
        lists_before = board.shell.lists
        losses = [trainer.train_step(x, y) for trainer in (board, golden)]
        assert losses[0] == losses[1]
        figures.append(traffic.as_dict())
        built = list(board._built.values())[-1]  # this step's lists
        calls = [sum(len(listed) for _, listed in phase) for phase in built.phases]
        print(f"\nstep on {copies} IP(s), {bits}-bit stream, loss on the PE {loss}: "
              f"{board.shell.lists - lists_before} lists, calls by "
              f"phase {calls}, "
              f"{figures[-1]}")
        assert board.shell.lists - lists_before == lists_a_step
        batch_bytes = 4 * np.asarray(x).size  # the batch as float32: 16 KiB
        assert figures[-1]["flushed_bytes"] <= 2 * batch_bytes + (64 << 10)  # issue 40's goals
        assert figures[-1]["invalidated_bytes"] <= 64 << 10
        assert figures[-1]["register_writes"] <= 64
    mine, theirs = board.read_weights(), golden.read_weights()
    compared = 0
    for a, b, m, n in zip(mine["buffers"], theirs["buffers"], mine["masks"], theirs["masks"]):
        np.testing.assert_array_equal(a, b)
        np.testing.assert_array_equal(m, n)
        compared += a.size
    assert compared == 64 * 64 + 64 * 32 + 32 * 10
    assert golden.lr_exponents == board.lr_exponents
    figures = board.throughput()  # per list step (the warm-up's steps ran on the host), the model's and measured
    assert figures["list_steps"] == board.list_steps == board.step - 3
    assert figures["lists"] == lists_a_step * board.list_steps
    assert figures["model"]["stages"] == stages * board.list_steps and figures["model"]["pe_s_per_step"] > 0
    assert 0 < figures["host_s_per_step"] < figures["seconds_per_step"]
