"""The golden compressed conv loop: its fast backend is the golden PE's layer sums, its fixed-point step is the
same on either, and it trains the digits."""

from __future__ import annotations

import copy
import dataclasses

import numpy as np
import pytest

from codesign.loops.common import HwTrainError
from codesign.loops.csb_backend import FastConvCsb, GoldenConvCsb
from codesign.loops.csb_conv import CsbConvSetup, CsbConvTrainer
from codesign.pe.csb import CsbSpec, encode
from codesign.train.data import load_digits_dataset, synthetic_dataset

SPEC = CsbSpec(block_rows=8, block_cols=8, kernel=3, out_h=4, out_w=4, batch=8, max_stride=2)


def _setup(**changes) -> CsbConvSetup:
    values = dict(spec=SPEC, image=(1, 8, 8), convs=((8, 1), (16, 2)), classes=10, batch_size=32, epochs=4,
                  warmup_epochs=2, lr=0.1, schedule="cosine", seed=0)
    return CsbConvSetup(**{**values, **changes})


@pytest.mark.parametrize("c, o, h, w, k, s", [(5, 7, 6, 7, 3, 1), (8, 9, 8, 8, 3, 2), (6, 4, 5, 5, 1, 2),
                                              (40, 10, 1, 1, 1, 1), (3, 5, 6, 6, 5, 1)])
def test_the_fast_backend_gives_the_golden_pe_s_sums(c, o, h, w, k, s):
    rng = np.random.default_rng(c + o + k)
    spec = CsbSpec(block_rows=4, block_cols=4, kernel=k, batch=4, max_stride=s)
    kernels = rng.integers(-128, 128, (o, c, k, k)) * (rng.random((o, c)) < 0.6)[:, :, None, None]
    csb = encode(kernels.astype(np.int64), block_rows=4, block_cols=4)
    p = (k - 1) // 2
    x = np.pad(rng.integers(-128, 128, (6, c, h, w)), ((0, 0), (0, 0), (p, p), (p, p)))
    golden, fast = GoldenConvCsb(spec), FastConvCsb(spec)
    z = golden.forward(csb, x, s)
    assert np.array_equal(fast.forward(csb, x, s), z) and z.any()
    dy = rng.integers(-128, 128, z.shape)
    assert np.array_equal(fast.weight_grad(csb, x, dy, s), golden.weight_grad(csb, x, dy, s).reshape(-1, k, k))
    assert np.array_equal(fast.backward_error_on(csb, dy, x.shape, s), golden.backward_error_on(csb, dy, x.shape, s))
    assert fast.macs == golden.macs


def _warmed(setup, data):
    trainer = CsbConvTrainer(setup)
    trainer.fit(data, epochs=setup.warmup_epochs, progress=False, max_steps=4)
    assert trainer.phase == "fixed"
    return trainer


def test_a_fixed_step_on_the_golden_pe_is_the_fast_step():
    """Buffers, loss and rate exponents bit for bit, whether the products run as the PE's block operations or as
    matrix products, over steps whose learning rate needs UPD's left shift and its right shift."""
    data = synthetic_dataset(samples=200, seed=1)  # 8 x 8 images of one channel
    trainer = _warmed(_setup(), data)
    golden = copy.deepcopy(trainer)
    golden.backend = GoldenConvCsb(SPEC)
    x, y = data.train_x[:32], data.train_y[:32]
    for rate in (1.0, 2.0 ** -9):
        for run in (trainer, golden):
            run.setup = dataclasses.replace(run.setup, lr=rate, schedule="constant")
        losses = [run.train_step(x, y) for run in (trainer, golden)]
        assert losses[0] == losses[1]
        for mine, theirs in zip(trainer.buffers, golden.buffers):
            assert np.array_equal(mine, theirs)
    assert trainer.lr_exponents == golden.lr_exponents
    assert sum(golden.backend.macs.values()) > 0


def test_the_loop_trains_the_digits_and_prunes_the_convs_only():
    data = load_digits_dataset()
    setup = _setup(convs=((16, 1), (16, 1), (32, 2)), epochs=6, warmup_epochs=3, batch_size=64)
    trainer = CsbConvTrainer(setup)
    history = trainer.fit(data, progress=False)
    print(f"\n[csb conv loop] {[round(row['accuracy'], 3) for row in history]}, {trainer.pruning_summary()}")
    assert history[-1]["phase"] == "fixed" and history[-1]["accuracy"] > 0.9
    assert trainer.masks[-1].all() and trainer.pruning_summary()["fraction_pruned"] > 0
    assert {row["layer"] for row in trainer.search_log} <= {0, 1, 2}
    assert history[-1]["macs"]["FP"] > 0 and history[-1]["macs"]["UPD"] > 0


@pytest.mark.parametrize("changes, match", [
    ({"convs": ((8, 2),), "spec": dataclasses.replace(SPEC, max_stride=1)}, "max_stride 2"),
    ({"convs": ()}, "convs"),
    ({"convs": ((8, 3),)}, "convs"),
    ({"spec": dataclasses.replace(SPEC, kernel=2)}, "odd kernel"),
    ({"warmup_epochs": 4}, "warmup_epochs"),
    ({"batch_size": 2048}, "could saturate"),  # 2048 samples x 64 positions: WG's sums could reach 2^31
    ({"spec": dataclasses.replace(SPEC, acc_bits=16)}, "could saturate"),
    ({"image": (1, 8)}, "image"),
    ({"image": 8}, "sequences"),
    ({"convs": ((8,),)}, "convs"),
    ({"order": "random"}, "pruning search"),
])
def test_a_setup_the_loop_cannot_run_is_refused(changes, match):
    with pytest.raises(HwTrainError, match=match):
        _setup(**changes)


def test_a_setup_read_from_json_lists_holds_tuples():
    setup = _setup(image=[1, 8, 8], convs=[[8, 1], [16, 2]])
    assert setup == _setup() and hash((setup.image, setup.convs))
