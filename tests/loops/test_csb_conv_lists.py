"""The conv loop with every fixed-point step as call lists equals the golden conv loop bit for bit: losses, every
buffer word, rate exponents and predictions, over full and short batches and UPD's left and right shifts."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from codesign.loops.common import HwTrainError
from codesign.loops.csb_conv import CsbConvSetup, CsbConvTrainer
from codesign.loops.csb_conv_lists import CsbConvListTrainer
from codesign.pe.csb import CsbSpec
from codesign.shell.list_runner import GoldenListShell
from codesign.train.data import synthetic_dataset

SPEC = CsbSpec(block_rows=8, block_cols=8, kernel=3, out_h=4, out_w=4, batch=8, max_stride=2)
SETUP = CsbConvSetup(spec=SPEC, image=(1, 8, 8), convs=((8, 1), (12, 2)), classes=10, batch_size=24, epochs=3,
                     warmup_epochs=1, lr=0.1, schedule="cosine", seed=0)


def _pair(setup=SETUP, copies: int = 1):
    data = synthetic_dataset(samples=120, seed=1)
    shell = GoldenListShell({"csb": setup.spec}, units={"csb": copies})
    loop, lists = CsbConvTrainer(setup), CsbConvListTrainer(setup, shell)
    for trainer in (loop, lists):
        trainer.fit(data, epochs=1, progress=False, max_steps=3)
        assert trainer.phase == "fixed"
    return data, loop, lists


def _same_state(loop, lists) -> None:
    lists._pull()
    assert all(np.array_equal(mine, theirs) for mine, theirs in zip(loop.buffers, lists.buffers))
    assert loop.lr_exponents == lists.lr_exponents


# the head folded over several output tiles: 4 lanes, a 2 x 2 tile, 9 lane chunks on a 3 x 3 head map
SPREAD = CsbConvSetup(spec=CsbSpec(block_rows=8, block_cols=8, kernel=3, out_h=2, out_w=2, batch=4, max_stride=2),
                      image=(1, 8, 8), convs=((8, 1), (12, 2)), classes=10, batch_size=36, epochs=3, warmup_epochs=1,
                      lr=0.1, schedule="cosine", seed=0)
# wide streams: 8 lanes on 64 bits; 16 lanes on 128 bits, three chunks folded on a 2 x 2 head map
WIDE64 = CsbConvSetup(**{**SETUP.__dict__, "spec": dataclasses.replace(SPEC, stream_bits=64)})
WIDE128 = CsbConvSetup(**{**SPREAD.__dict__, "batch_size": 40,
                          "spec": dataclasses.replace(SPREAD.spec, batch=16, stream_bits=128)})
# residual blocks: an identity and a stride-2 projection after the stem; on a 64-bit stream, two identities
RESIDUAL = CsbConvSetup(**{**SETUP.__dict__, "convs": ((8, 1),), "blocks": ((8, 1), (12, 2))})
RESIDUAL64 = CsbConvSetup(**{**WIDE64.__dict__, "convs": ((8, 2),), "blocks": ((8, 1), (8, 1))})
STEPS = {"one-tile fold": (SETUP, (24, 13, 24, 5)), "fold over four tiles": (SPREAD, (36, 17, 36, 3)),
         "64-bit stream": (WIDE64, (24, 13, 24, 5)), "128-bit stream": (WIDE128, (40, 17, 40, 3)),
         "residual blocks": (RESIDUAL, (24, 13, 24, 5)), "residual, 64-bit stream": (RESIDUAL64, (24, 13, 24, 5))}


@pytest.mark.parametrize("copies", [1, 2, 3])
@pytest.mark.parametrize("case", sorted(STEPS))
def test_list_steps_equal_the_loop_word_for_word(case, copies):
    """On one csb IP, and shared among two or three (a short batch's fewer chunks leave an IP idle)."""
    setup, sizes = STEPS[case]
    data, loop, lists = _pair(setup, copies)
    head = lists.net.layers[-1]
    assert head.fold and head.tiles == {SPREAD: (2, 2)}.get(setup, (1, 1))
    rng = np.random.default_rng(0)
    # UPD's LEFT at rate 1, its right shift later; short batches leave positions of the folded head unused
    for n, rate in zip(sizes, (0.1, 1.0, 2.0 ** -12, 0.02)):
        rows = rng.choice(data.train_x.shape[0], n, replace=False)
        for trainer in (loop, lists):
            trainer.setup = type(setup)(**{**trainer.setup.__dict__, "lr": rate, "schedule": "constant"})
        losses = [trainer.train_step(data.train_x[rows], data.train_y[rows]) for trainer in (loop, lists)]
        assert losses[0] == losses[1]
        _same_state(loop, lists)
    assert np.array_equal(loop.logits(data.test_x), lists.logits(data.test_x))
    assert len(set(loop.lr_exponents)) > 1
    steps = len(sizes)  # a list a direction on one IP; five phases, some of several lists, on more
    assert lists.shell.lists == 2 * steps if copies == 1 else lists.shell.lists > 5 * steps


def test_residual_list_steps_equal_the_loop_where_pruning_empties_block_rows_and_columns():
    """A block's conv2 (and projection) with a block row of no kernel, whose sums the shortcut (conv2) then starts
    alone, and a conv1 with a block column of no kernel, onto whose errors the shortcut's EB then adds nothing but
    starts them: the masks forced after the pruning event, on both trainers alike."""
    setup = CsbConvSetup(**{**RESIDUAL.__dict__, "convs": ((16, 1),), "blocks": ((16, 1), (24, 2))})
    data, loop, lists = _pair(setup)
    masks = [m.copy() for m in loop.masks]
    for layer, rows, cols in ((1, slice(None), slice(0, 8)), (2, slice(8, 16), slice(None)),
                              (4, slice(0, 8), slice(None)), (5, slice(16, 24), slice(None)),
                              (3, slice(None), slice(8, 16))):
        masks[layer][rows, cols] = False
    dense = [np.where(m.reshape(m.shape + (1,) * (b.ndim - 2)), b, 0) for m, b in zip(masks, loop.dense_buffers())]
    for trainer in (loop, lists):
        trainer._set_fixed(masks, dense, loop.frac_bits)
    rng = np.random.default_rng(1)
    for n in (24, 7, 24):
        rows = rng.choice(data.train_x.shape[0], n, replace=False)
        losses = [trainer.train_step(data.train_x[rows], data.train_y[rows]) for trainer in (loop, lists)]
        assert losses[0] == losses[1]
        _same_state(loop, lists)
    assert np.array_equal(loop.logits(data.test_x), lists.logits(data.test_x))


def test_a_fixed_epoch_through_fit_equals_the_loop_s():
    data, loop, lists = _pair()
    rows = [trainer.fit(data, epochs=1, progress=False, max_steps=2)[-1] for trainer in (loop, lists)]
    assert rows[0]["loss"] == rows[1]["loss"] and rows[0]["accuracy"] == rows[1]["accuracy"]
    assert rows[0]["macs"] == rows[1]["macs"]
    _same_state(loop, lists)
    assert lists.list_steps == 2 and len(lists._built) == 2  # one list pair per buffer phase


def test_a_shell_or_build_the_lists_cannot_run_is_refused():
    with pytest.raises(HwTrainError, match="not the set-up's"):
        CsbConvListTrainer(SETUP, GoldenListShell({"csb": CsbSpec(kernel=3, batch=8, max_stride=2)}))
    odd = CsbSpec(block_rows=8, block_cols=8, kernel=3, out_h=4, out_w=4, batch=6, max_stride=2)
    with pytest.raises(HwTrainError, match="multiple of 4"):
        CsbConvListTrainer(CsbConvSetup(**{**SETUP.__dict__, "spec": odd}), GoldenListShell({"csb": odd}))
    narrow = dataclasses.replace(SPEC, stream_bits=128)  # 8 lanes: half a beat a position
    with pytest.raises(HwTrainError, match="multiple of 16"):
        CsbConvListTrainer(CsbConvSetup(**{**SETUP.__dict__, "spec": narrow}), GoldenListShell({"csb": narrow}))
    wide = CsbConvSetup(**{**SETUP.__dict__, "image": (1, 8, 64)})  # a row of 64 positions x 8 lanes: 512
    with pytest.raises(HwTrainError, match="more than one SELECT"):
        CsbConvListTrainer(wide, GoldenListShell({"csb": SPEC}))
