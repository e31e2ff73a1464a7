"""The design-point training loop: seeded, learning, K-tiled GEMMs equal to untiled ones, weights in and out."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from codesign.deploy.training import IpGemm
from codesign.pe.fpmac_array import FpmacArraySpec, Header, spec_gemm
from codesign.pe.fpmac_array.contract import STATUS_OK
from codesign.train.config import config_from_dict
from codesign.train.data import synthetic_dataset
from codesign.design.families.fpmac_array import fb_setup
from codesign.loops.fb import (
    FbMlpTrainer,
    GoldenGemm,
    HwTrainError,
    HwTrainSetup,
)

pytestmark = pytest.mark.slow

SMALL = FpmacArraySpec(exp_bits=5, max_fb=9, max_m=8, max_n=4, max_k=16)


def abvs_config(**optim):
    return config_from_dict({"seed": 3, "model": {"name": "mlp", "hidden": [12]},
                             "optim": {"epochs": 2, "batch_size": 20, "lr": 0.1, **optim},
                             "techniques": {"abvs": {"fb_min": 5, "fb_max": 7, "exp_bits": 5}}})


def small_setup(**changes) -> HwTrainSetup:
    return fb_setup(abvs_config(), SMALL, **changes)


class TransactionStandIn:
    """Reads the FP-MAC array word stream and answers each transaction with the golden GEMM (no tiling inside).

    Stands in for an fpmac_array IP to test how IpGemm tiles and chains; it
    says nothing about the IP itself (the emulated-board test does that).
    """

    ip_name, pe = "stand_in", "fpmac_array"

    def __init__(self, spec):
        self.spec, self.calls, self.transactions = spec, 0, 0

    def run(self, words_in, n_out, n_transactions):
        out, position = [], 0
        for _ in range(n_transactions):
            header = Header.parse(words_in[position])
            position += 1
            if header.status(self.spec) != STATUS_OK:
                out.append(np.array([header.status(self.spec)], dtype=np.uint64))
                continue
            m, n, k = header.m, header.n, header.k

            def take(rows, cols):
                nonlocal position
                block = words_in[position:position + rows * cols].astype(np.uint64).reshape(rows, cols)
                position += rows * cols
                return block

            a = take(k, m).T if header.trans_a else take(m, k)
            b = take(n, k).T if header.trans_b else take(k, n)
            c = take(m, n) if header.accumulate else None
            out += [np.array([STATUS_OK], dtype=np.uint64), spec_gemm(self.spec, a, b, c, fb=header.fb).reshape(-1)]
        self.calls += 1
        self.transactions += n_transactions
        words = np.concatenate(out)
        assert position == words_in.size and words.size == n_out
        return words.astype(np.uint32)


def random_words(rng, shape, spec, fb):
    values = rng.normal(0, 1, shape) * rng.choice([1e-3, 1.0, 40.0], size=shape)
    trainer = FbMlpTrainer(fb_setup(abvs_config(), spec))
    trainer.controller.fb = fb
    return trainer.to_words(values)


@pytest.mark.parametrize("m, k, n, trans_a, trans_b, accumulate", [
    (1, 1, 1, False, False, False),
    (8, 16, 4, False, False, True),       # exactly one tile
    (17, 40, 9, False, False, True),      # ragged tiles in every dimension, K chained three times
    (20, 33, 11, True, False, False),
    (9, 17, 5, False, True, True),
])
def test_tiled_gemm_equals_the_untiled_golden_gemm(m, k, n, trans_a, trans_b, accumulate):
    rng = np.random.default_rng(m * 1000 + k * 10 + n)
    fb = 7
    a, b = random_words(rng, (m, k), SMALL, fb), random_words(rng, (k, n), SMALL, fb)
    c = random_words(rng, (m, n), SMALL, fb) if accumulate else None
    stand_in = TransactionStandIn(SMALL)
    tiled = IpGemm(stand_in, SMALL)(a, b, c, fb=fb, trans_a=trans_a, trans_b=trans_b)
    np.testing.assert_array_equal(tiled, spec_gemm(SMALL, a, b, c, fb=fb))
    assert stand_in.calls == -(-k // SMALL.max_k)
    assert stand_in.transactions == stand_in.calls * -(-m // SMALL.max_m) * -(-n // SMALL.max_n)


def test_a_refused_tile_is_a_clear_error():
    class Refusing(TransactionStandIn):
        def run(self, words_in, n_out, n_transactions):
            return np.array([2] + [0] * (n_out - 1), dtype=np.uint32)

    words = np.zeros((2, 2), dtype=np.uint64)
    with pytest.raises(RuntimeError, match=r"refused a 2x2 GEMM tile at fb=3: status 2 \(too large\)"):
        IpGemm(Refusing(SMALL), SMALL)(words, words, fb=3)


def test_training_is_seeded_and_the_tiled_loop_matches_the_golden_loop():
    data = synthetic_dataset(samples=120, seed=1, validation_fraction=0.2)
    golden = FbMlpTrainer(small_setup())
    golden.fit(data, progress=False, max_steps=3)
    again = FbMlpTrainer(small_setup())
    again.fit(data, progress=False, max_steps=3)
    tiled = FbMlpTrainer(small_setup(), IpGemm(TransactionStandIn(SMALL), SMALL))
    tiled.fit(data, progress=False, max_steps=3)
    for other in (again, tiled):
        for key in ("weights", "biases", "velocity"):
            for mine, theirs in zip(golden.read_weights()[key], other.read_weights()[key]):
                np.testing.assert_array_equal(mine, theirs)
        assert [row["accuracy"] for row in other.history] == [row["accuracy"] for row in golden.history]
    assert golden.gemm.macs == tiled.gemm.macs
    different = FbMlpTrainer(small_setup(seed=4))
    assert not np.array_equal(different.read_weights()["weights"][0], FbMlpTrainer(small_setup()).weights[0])


def test_training_learns_and_the_fb_rule_runs():
    data = synthetic_dataset(samples=300, seed=2, validation_fraction=0.2)
    trainer = FbMlpTrainer(small_setup(epochs=4, lr=0.2, epsilon=1.0))
    chance = 1 / data.classes
    trainer.fit(data, progress=False)
    assert trainer.history[-1]["accuracy"] > 3 * chance
    # epsilon = 1: no epoch gains a whole accuracy point of 1.0, so every check raises the FB until fb_max
    assert [row["fb"] for row in trainer.history] == [5, 6, 7, 7]
    assert set(trainer.gemm.macs) == {5, 6, 7}


def test_every_gemm_is_counted_once_per_step():
    setup = small_setup()
    trainer = FbMlpTrainer(setup)
    data = synthetic_dataset(samples=40, seed=0, validation_fraction=0.2)
    trainer.train_step(data.train_x[:20], data.train_y[:20])
    (i, h, o), batch = setup.layers, 20
    forward = batch * (i * h + h * o)
    weight_grads = i * batch * h + h * batch * o
    bias_grads = batch * (h + o)
    input_grads = batch * o * h  # none for the first layer
    assert trainer.gemm.macs == Counter({5: forward + weight_grads + bias_grads + input_grads})
    assert trainer.gemm.calls == 2 + 2 * 2 + 1


def test_weights_round_trip_and_bad_weights_leave_the_model_unchanged():
    trainer = FbMlpTrainer(small_setup())
    state = trainer.read_weights()
    other = FbMlpTrainer(small_setup(seed=9))
    other.load_weights(state)
    for mine, theirs in zip(state["weights"], other.read_weights()["weights"]):
        np.testing.assert_array_equal(mine, theirs)
    before = [w.copy() for w in other.weights]
    bad = {**state, "weights": [state["weights"][0], state["weights"][1].astype(np.float32)]}
    with pytest.raises(HwTrainError, match=r"weights\[1\] must be integer words"):
        other.load_weights(bad)
    too_wide = {**state, "biases": [b | np.uint64(1 << SMALL.width) for b in state["biases"]]}
    with pytest.raises(HwTrainError, match="outside the 15-bit container"):
        other.load_weights(too_wide)
    with pytest.raises(HwTrainError, match="3 weights, the model has 2"):
        other.load_weights({**state, "weights": [*state["weights"], state["weights"][0]]})
    for mine, theirs in zip(before, other.weights):
        np.testing.assert_array_equal(mine, theirs)


def test_bad_batches_and_setups_are_refused():
    trainer = FbMlpTrainer(small_setup())
    with pytest.raises(HwTrainError, match=r"need \(n, 64\)"):
        trainer.train_step(np.zeros((4, 63)), np.zeros(4, dtype=int))
    with pytest.raises(HwTrainError, match=r"labels y hold -1\.\.2"):
        trainer.train_step(np.zeros((4, 64)), np.array([0, -1, 2, 1]))
    with pytest.raises(HwTrainError, match="4 non-finite values"):
        trainer.train_step(np.full((4, 64), [np.nan] + [0.0] * 63), np.zeros(4, dtype=int))  # column 0 of each row
    assert trainer.step == 0
    with pytest.raises(HwTrainError, match="FB range"):
        small_setup(fb_max=12)
    with pytest.raises(HwTrainError, match="not model 'resnet'"):
        fb_setup(config_from_dict({"model": {"name": "resnet"}}), SMALL)
    with pytest.raises(HwTrainError, match="not the IP's"):
        fb_setup(abvs_config(), FpmacArraySpec(exp_bits=8, max_fb=9))


def test_plain_fp32_training_runs_at_full_width():
    setup = fb_setup(config_from_dict({"model": {"name": "mlp", "hidden": [8]}}))
    assert (setup.fb_min, setup.fb_max, setup.spec.exp_bits, setup.spec.max_fb) == (23, 23, 8, 23)
    assert isinstance(FbMlpTrainer(setup).gemm, GoldenGemm)
