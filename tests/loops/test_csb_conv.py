"""The golden compressed conv loop: its fast backend is the golden PE's layer sums, its fixed-point step is the
same on either, it trains the digits; with residual blocks its warm-up is torch's and its shortcuts add in place
exactly."""

from __future__ import annotations

import copy
import dataclasses

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from codesign.loops.common import HwTrainError
from codesign.loops.csb import rescale
from codesign.loops.csb_backend import FastConvCsb, GoldenConvCsb
from codesign.loops.csb_conv import CsbConvSetup, CsbConvTrainer
from codesign.pe.csb import CsbSpec, encode
from codesign.step.csb.conv_net import check_aligned
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


@pytest.mark.parametrize("residual", [False, True])
def test_a_fixed_step_on_the_golden_pe_is_the_fast_step(residual):
    """Buffers, loss and rate exponents bit for bit, whether the products run as the PE's block operations or as
    matrix products, over steps whose learning rate needs UPD's left shift and its right shift."""
    data = synthetic_dataset(samples=200, seed=1)  # 8 x 8 images of one channel
    trainer = _warmed(_residual() if residual else _setup(), data)
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


def _residual(**changes) -> CsbConvSetup:
    """A stem, an identity block and a stride-2 projection block."""
    return _setup(**{"convs": ((8, 1),), "blocks": ((8, 1), (16, 2)), **changes})


def _torch_forward(weights, x, trainer):
    """The same network in torch, written from the block's definition (no code of the loop's)."""
    w = [torch.tensor(v, requires_grad=True) for v in weights]
    a = torch.tensor(x)
    layer = 0
    for _ in trainer.setup.convs:
        a = torch.relu(F.conv2d(a, w[layer], stride=trainer.layers[layer][3], padding=1))
        layer += 1
    for outputs, stride in trainer.setup.blocks:
        h = torch.relu(F.conv2d(a, w[layer], stride=stride, padding=1))
        z = F.conv2d(h, w[layer + 1], padding=1)
        if stride == 1 and outputs == a.shape[1]:
            a, layer = torch.relu(z + a), layer + 2
        else:
            a, layer = torch.relu(z + F.conv2d(a, w[layer + 2], stride=stride)), layer + 3
    return w, F.conv2d(a.reshape(a.shape[0], -1, 1, 1), w[layer]).reshape(a.shape[0], -1)


def test_a_warm_up_step_is_torch_s():
    trainer = CsbConvTrainer(_residual(schedule="constant"))
    data = synthetic_dataset(samples=32, seed=3)
    x, y = trainer._batch(data.train_x[:16], data.train_y[:16])
    w, logits = _torch_forward([v.copy() for v in trainer.weights], x, trainer)
    loss = F.cross_entropy(logits, torch.tensor(y))
    loss.backward()
    assert trainer.train_step(x, y) == pytest.approx(loss.item(), rel=1e-12)
    for mine, theirs in zip(trainer.weights, w):
        assert np.allclose(mine, (theirs - 0.1 * theirs.grad).detach().numpy(), rtol=0, atol=1e-12)


def _values(codes, frac):
    return torch.tensor(np.asarray(codes, dtype=np.float64) * 2.0 ** -frac)


def test_every_shortcut_adds_exactly_at_conv2_s_and_conv1_s_fractions():
    """A block's forward sums and its input's error sums equal torch's on the codes' values, scaled to the sums'
    fractions: the identity's shifts and the projection's fractions are right."""
    data = synthetic_dataset(samples=200, seed=1)
    trainer = _warmed(_residual(), data)
    check_aligned(trainer.frac_bits, trainer.blocks)
    x, _ = trainer._batch(data.train_x[:16])
    inputs, pre = trainer._fixed_forward(x)
    fb, rng = trainer.frac_bits, np.random.default_rng(0)
    for block in trainer.blocks:
        c1, c2, p = block.first, block.second, block.projection
        w = {i: _values(trainer.matrix(i).to_dense(), fb[i]["weight"]) for i in block.layers}
        xv = _values(inputs[c1], fb[c1]["activation"])
        shortcut = xv if p is None else F.conv2d(xv, w[p], stride=trainer.layers[p][3])
        z = F.conv2d(_values(inputs[c2], fb[c2]["activation"]), w[c2], padding=1) + shortcut
        frac = fb[c2]["weight"] + fb[c2]["activation"]
        assert np.array_equal(z.numpy() * 2.0 ** frac, pre[c2]) and pre[c2].any()
        dz2 = rng.integers(-128, 128, pre[c2].shape)
        grads = [None] * len(trainer.layers)
        dx = trainer._block_errors(inputs, pre, block, dz2, grads)
        tx = xv.clone().requires_grad_(True)
        th = _values(inputs[c2], fb[c2]["activation"]).requires_grad_(True)
        (F.conv2d(th, w[c2], padding=1) * _values(dz2, fb[c2]["error"])).sum().backward()
        dh = np.where(pre[c1] > 0, th.grad.numpy() * 2.0 ** (fb[c2]["weight"] + fb[c2]["error"]), 0)
        dz1 = _values(rescale(dh, fb[c2]["weight"] + fb[c2]["error"], fb[c1]["error"]), fb[c1]["error"])
        out = (F.conv2d(tx, w[c1], stride=trainer.layers[c1][3], padding=1) * dz1).sum()
        out = out + ((tx * _values(dz2, fb[c2]["error"])).sum() if p is None else
                     (F.conv2d(tx, w[p], stride=trainer.layers[p][3]) * _values(dz2, fb[c2]["error"])).sum())
        out.backward()
        assert np.array_equal(tx.grad.numpy() * 2.0 ** (fb[c1]["weight"] + fb[c1]["error"]), dx) and dx.any()
        assert grads[c1] is not None and grads[c2] is not None and (p is None or grads[p] is not None)


@pytest.mark.slow
def test_the_loop_trains_the_digits_with_resnet_8_s_layers():  # 13 s
    data = load_digits_dataset()
    spec = dataclasses.replace(SPEC, block_rows=16, block_cols=16, batch=16)
    setup = _residual(spec=spec, convs=((16, 1),), blocks=((16, 1), (32, 2), (64, 2)), batch_size=64, epochs=6,
                      warmup_epochs=3)
    trainer = CsbConvTrainer(setup)
    history = trainer.fit(data, progress=False)
    print(f"\n[csb resnet loop] {[round(row['accuracy'], 3) for row in history]}, {trainer.frac_bits}")
    assert history[-1]["phase"] == "fixed" and history[-1]["accuracy"] > 0.9
    assert trainer.masks[-1].all() and trainer.pruning_summary()["fraction_pruned"] > 0
    assert {row["layer"] for row in trainer.search_log} <= set(range(len(trainer.layers) - 1))


@pytest.mark.parametrize("changes, match", [
    ({"blocks": ((8, 3),)}, "blocks"),
    ({"blocks": ((8,),)}, "blocks"),
    ({"blocks": 8}, "sequence"),
    ({"blocks": ((8, 2),), "spec": dataclasses.replace(SPEC, max_stride=1), "convs": ((8, 1),)}, "max_stride 2"),
    ({"spec": dataclasses.replace(SPEC, acc_bits=16)}, "could saturate"),
])
def test_a_residual_setup_the_loop_cannot_run_is_refused(changes, match):
    with pytest.raises(HwTrainError, match=match):
        _residual(**changes)


def test_a_switch_to_fixed_point_whose_shortcuts_cannot_add_in_place_is_refused():
    data = synthetic_dataset(samples=200, seed=1)
    trainer = _warmed(_residual(), data)
    fracs = [dict(f) for f in trainer.frac_bits]
    fracs[2]["activation"] += 7  # the identity block's conv2 input: jf past 6
    with pytest.raises(HwTrainError, match="fixed point: block at layer 1"):
        trainer._set_fixed(trainer.masks, trainer.dense_buffers(), fracs)


def test_a_residual_setup_read_from_json_lists_holds_tuples():
    setup = _residual(image=[1, 8, 8], convs=[[8, 1]], blocks=[[8, 1], [16, 2]])
    assert setup == _residual() and setup.to_dict()["blocks"] == [[8, 1], [16, 2]]
    assert CsbConvSetup.from_dict(setup.to_dict()) == setup
    plain = _setup().to_dict()
    del plain["blocks"]  # a design.json of a network without blocks may leave them out
    assert CsbConvSetup.from_dict(plain) == _setup()
