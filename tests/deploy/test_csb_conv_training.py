"""The CSB conv family on the emulated board: a design.json of model 'convnet' picks the conv list trainer, which
trains through the warm-up, the pruning event and fixed-point steps as call lists on the csb IP (the generated C++
in list mode, through the PYNQ driver) and ends with every loss and state word equal to the golden conv loop's,
within issue 40's host traffic goals; and what the family refuses, before anything runs."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from codesign.deploy.csb_conv_training import CsbConvListBoardTrainer, csb_conv_board_trainer
from codesign.deploy.families import board_trainer, golden_trainer, measure_loop_host
from codesign.deploy.manifest import DeployError
from codesign.deploy.selfcheck import compare_states
from codesign.design import load_design
from codesign.design.families import loop_entry
from codesign.train.trainer import load_dataset
from tests.deploy.conftest import emulated_overlay

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "digits_compressed_conv.toml"
RESNET = EXAMPLE.with_name("digits_compressed_resnet.toml")
SMALL = Path(__file__).resolve().parents[1] / "design" / "fixtures" / "small_conv.toml"


def test_an_ip_without_call_lists_is_refused_before_anything_runs():
    manifest = {"design": "conv", "ips": [{"pe": "csb", "ip_route": "hls"}], "loop": {"family": "csb_conv"}}
    with pytest.raises(DeployError, match="does not run call lists.*RTL route"):
        csb_conv_board_trainer(SimpleNamespace(manifest=manifest, device=SimpleNamespace()))


def test_the_numpy_host_share_sends_a_conv_loop_to_its_list_steps():
    entry = loop_entry(load_design(EXAMPLE))
    with pytest.raises(DeployError, match="host_share TARGET --lists"):
        measure_loop_host(entry)


def _a_step_within_the_goals(overlay, board, golden, data, n: int) -> int:
    """One more step of ``n`` samples on both: the same loss, the host's traffic within issue 40's goals (flushed
    at most twice the batch as float32 plus 64 KiB, read back at most 64 KiB, at most 64 register writes), then
    every state word equal; returns the words compared."""
    traffic = overlay.device.traffic
    x, y = data.train_x[:n], data.train_y[:n]
    traffic.clear()
    assert board.train_step(x, y) == golden.train_step(x, y)
    figures = traffic.as_dict()
    print(f"\n[conv lists, emulated board] a step of {n}: {figures}")
    assert figures["flushed_bytes"] <= 2 * 4 * np.asarray(x).size + (64 << 10)
    assert figures["invalidated_bytes"] <= 64 << 10 and figures["register_writes"] <= 64
    words = compare_states(board.read_weights(), golden.read_weights(), ("buffers", "masks"))
    assert words["differ"] == 0
    return words["compared"]


@pytest.mark.slow
@pytest.mark.parametrize("copies, stream_bits", [(1, 32), (2, 32), (1, 64)])
def test_conv_training_from_design_json_equals_the_golden_loop(tmp_path, copies, stream_bits):
    """On the design's csb IP, on two copies of it sharing each phase's lists, and on one IP of a 64-bit stream
    (8 lanes: a position's codes a beat)."""
    path = tmp_path / "small_conv.toml"
    path.write_text(SMALL.read_text() + f"copies = {copies}\nstream_bits = {stream_bits}\n")
    design = load_design(path)
    overlay = emulated_overlay(design, tmp_path)
    board, golden = board_trainer(overlay), golden_trainer(overlay.manifest)
    assert isinstance(board, CsbConvListBoardTrainer)
    data = load_dataset(design.training)
    for trainer in (board, golden):
        trainer.fit(data, progress=False, max_steps=2)  # the warm-up, the pruning, two fixed epochs of two steps
    assert [row["phase"] for row in board.history] == ["warmup", "fixed", "fixed"]
    for row_b, row_g in zip(board.history, golden.history):
        assert (row_b["loss"], row_b["accuracy"], row_b["macs"]) == (row_g["loss"], row_g["accuracy"], row_g["macs"])
    assert _a_step_within_the_goals(overlay, board, golden, data, 16) == 2920
    mine = board.read_weights()["buffers"]
    assert [b.shape for b in mine] == [(4, 1, 3, 3), (8, 4, 3, 3), (10, 8 * 4 * 4, 1, 1)]
    figures = board.throughput()
    assert board.copies == copies == len(overlay.manifest["ips"])
    # a list a direction on one IP; on two, five phases of two lists (the convs' forward, the head's EB by block
    # columns, the masks and EB by lane chunks, the blocks' WG and update) but the folded head's forward: one list
    lists = 2 if copies == 1 else 2 * 5 - 1
    assert figures["list_steps"] == board.list_steps == 5 and figures["lists"] == lists * board.list_steps
    assert 0 < figures["host_s_per_step"] < figures["seconds_per_step"]


@pytest.mark.slow
@pytest.mark.parametrize("example, words", [(EXAMPLE, 28_320), (RESNET, 92_320)])
def test_the_shipped_conv_examples_train_within_the_traffic_goals(tmp_path, example, words):
    """The example's own build (two csb IPs of 16 lanes and 2 groups on 128-bit streams: four lane chunks on a head
    folded 2 x 2) and network (the residual one: each shortcut added in place, the identity's constant codes
    written at the pruning event), its family's quick changes: every state word equal to the golden loop's, and a
    step's host traffic within issue 40's goals (the input's padding channels are never flushed)."""
    design = load_design(example)
    overlay = emulated_overlay(design, tmp_path)
    changes = {"epochs": 2, "warmup_epochs": 1, "schedule": "constant"}
    board, golden = board_trainer(overlay, **changes), golden_trainer(overlay.manifest, **changes)
    data = load_dataset(design.training)
    for trainer in (board, golden):
        trainer.fit(data, progress=False, max_steps=2)
    assert board.net.layers[-1].fold == 2 and board.net.chunks_of(64) == 4 and board.copies == 2
    assert _a_step_within_the_goals(overlay, board, golden, data, 64) == words
