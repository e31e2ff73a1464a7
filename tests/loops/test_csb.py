"""The golden compressed-training loop: its host arithmetic against Fraction oracles, its PE path against dense integers."""

from __future__ import annotations

from collections import Counter
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from codesign.design import load_design
from codesign.pe.csb import golden as csb_golden
from codesign.pe.csb.golden import weight_update
from codesign.train.data import synthetic_dataset
from codesign.loops.common import HwTrainError
from codesign.design.families.csb import csb_setup, csb_setup_of
from codesign.loops.csb import (
    CsbMlpTrainer,
    CsbTrainSetup,
    learning_rate_exponent,
    quantize,
    rescale,
)

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "digits_compressed_mlp.toml"


def _sat(value: int, bits: int) -> int:
    return max(-(1 << (bits - 1)), min((1 << (bits - 1)) - 1, value))


@pytest.mark.parametrize("shift", [-9, -3, -1, 0, 1, 2, 5, 17, 40])
def test_rescale_matches_fraction_rounding(shift):
    rng = np.random.default_rng(shift + 100)
    ties = [(2 * k + 1) << max(shift - 1, 0) for k in range(-6, 6)] if shift > 0 else []
    codes = np.concatenate([rng.integers(-(1 << 31), 1 << 31, 400), rng.integers(-300, 300, 200), ties,
                            [0, 1, -1, 127, -128, 128, -129, (1 << 31) - 1, -(1 << 31)]]).astype(np.int64)
    for bits in (8, 32):
        got = rescale(codes, shift, 0, bits)
        want = [_sat(round(Fraction(int(c), 1 << shift)) if shift >= 0 else int(c) << -shift, bits) for c in codes]
        assert got.tolist() == want  # Fraction's round() is ties-to-even


def test_quantize_rounds_ties_to_even_and_saturates():
    values = np.array([0.5, 1.5, 2.5, -0.5, -2.5, 0.49, 126.5, 127.5, 1000.0, -1000.0, -128.5, 0.0])
    assert quantize(values, 0).tolist() == [0, 2, 2, 0, -2, 0, 126, 127, 127, -128, -128, 0]
    assert quantize(np.array([0.375, -0.375]), 2).tolist() == [2, -2]  # 1.5 and -1.5 steps of 1/4
    assert quantize(np.array([3.0]), 5, 24).tolist() == [96]


def test_learning_rate_exponent():
    assert [learning_rate_exponent(r) for r in (1.0, 0.25, 0.3, 0.1, 2.0 ** -20, 3.0)] == [0, 2, 2, 3, 20, -2]
    with pytest.raises(HwTrainError):
        learning_rate_exponent(0.0)


class DenseIntegers:
    """An independent PE: whole-matrix integer products with NumPy (exact while nothing saturates)."""

    def __init__(self, acc_bits: int = 32) -> None:
        self.macs: Counter = Counter()
        self.limit = 1 << (acc_bits - 1)

    def _checked(self, out):
        assert np.all(np.abs(out) < self.limit - (1 << 15)), "saturation: the dense reference no longer applies"
        return out

    def forward(self, csb, x):
        return self._checked(np.asarray(x, np.int64) @ csb.to_dense().astype(np.int64).T)

    def backward_error(self, csb, dy):
        return self._checked(np.asarray(dy, np.int64) @ csb.to_dense().astype(np.int64))

    def weight_grad(self, csb, x, dy):
        rows, cols = csb.entry_coordinates()
        return self._checked((np.asarray(dy, np.int64).T @ np.asarray(x, np.int64))[rows, cols])

    def update(self, csb, buffer, grads, shift):
        return weight_update(buffer, grads, shift)


def _setup(**changes) -> CsbTrainSetup:
    values = {"epochs": 2, "warmup_epochs": 1, "batch_size": 40}
    values.update(changes)
    return csb_setup_of(load_design(EXAMPLE), **values)


def test_golden_loop_equals_dense_integer_arithmetic():
    data = synthetic_dataset(samples=200)
    golden, dense = CsbMlpTrainer(_setup()), CsbMlpTrainer(_setup(), DenseIntegers())
    for trainer in (golden, dense):
        trainer.fit(data, progress=False, max_steps=3)
    assert golden.fixed_steps == 3
    mine, theirs = golden.read_weights(), dense.read_weights()
    for a, b in zip(mine["buffers"] + mine["masks"], theirs["buffers"] + theirs["masks"]):
        assert np.array_equal(a, b)
    assert [row["loss"] for row in golden.history] == [row["loss"] for row in dense.history]
    assert golden.lr_exponents and all(e >= 0 for e in golden.lr_exponents)


def test_runs_are_deterministic_and_state_round_trips():
    data = synthetic_dataset(samples=200)
    first, second = CsbMlpTrainer(_setup()), CsbMlpTrainer(_setup())
    for trainer in (first, second):
        trainer.fit(data, progress=False, max_steps=2)
    state = first.read_weights()
    for a, b in zip(state["buffers"], second.read_weights()["buffers"]):
        assert np.array_equal(a, b)
    fresh = CsbMlpTrainer(_setup())
    fresh.load_weights(state)
    assert fresh.phase == "fixed"
    x = np.asarray(data.test_x).reshape(len(data.test_y), -1)
    assert np.array_equal(fresh.logits(x), first.logits(x))
    # pruned weights stay zero and out of the CSB structure
    for index, mask in enumerate(state["masks"]):
        assert np.all(state["buffers"][index][~mask] == 0)
        assert first.matrix(index).nnz == int(mask.sum())


def test_bad_states_are_refused_and_leave_the_trainer_unchanged():
    data = synthetic_dataset(samples=200)
    trainer = CsbMlpTrainer(_setup())
    trainer.fit(data, progress=False, max_steps=1)
    state = trainer.read_weights()

    def broken(key, index, change):
        bad = {name: [item.copy() if hasattr(item, "copy") else item for item in value]
               if isinstance(value, list) else value for name, value in state.items()}
        bad[key][index] = change(bad[key][index])
        return bad

    pruned = np.argwhere(~state["masks"][0])[0]

    def at_pruned(words):
        words[tuple(pruned)] = 5
        return words

    cases = [(broken("buffers", 1, lambda w: w + (1 << 23) * (w >= 0)), "24-bit"),
             (broken("buffers", 0, at_pruned), "pruned"),
             (broken("buffers", 2, lambda w: w[:, :-1]), "shape"),
             (broken("masks", 0, lambda m: m.astype(np.int8)), "bool"),
             (broken("frac_bits", 0, lambda f: {"weight": 7}), "frac_bits"),
             ({"phase": "other"}, "phase")]
    for bad, match in cases:
        with pytest.raises(HwTrainError, match=match):
            trainer.load_weights(bad)
        for a, b in zip(trainer.read_weights()["buffers"], state["buffers"]):
            assert np.array_equal(a, b)


def test_setup_validation():
    from codesign.pe.csb.spec import CsbSpec

    with pytest.raises(HwTrainError, match="spec comes from"):
        _setup(spec=CsbSpec(kernel=1))
    with pytest.raises(HwTrainError, match="FC CSB PE"):
        csb_setup(load_design(EXAMPLE).training, CsbSpec(kernel=3, out_h=4, out_w=4))
    with pytest.raises(HwTrainError, match="schedule"):
        _setup(schedule="step")
    with pytest.raises(HwTrainError, match="fill one batch"):
        CsbMlpTrainer(_setup(batch_size=1000)).fit(synthetic_dataset(samples=200), progress=False)


class FailsOnUpdate(DenseIntegers):
    """The dense PE, failing on one chosen UPD call (as an IP that times out would), counted from 1."""

    def __init__(self, fail_at: int | None = None) -> None:
        super().__init__()
        self.fail_at, self.updates = fail_at, 0

    def update(self, csb, buffer, grads, shift):
        self.updates += 1
        if self.updates == self.fail_at:
            raise RuntimeError("UPD did not finish")
        return super().update(csb, buffer, grads, shift)


def test_a_backend_failing_part_way_leaves_the_step_undone():
    """Three layers: the last layer's UPD fails after the first two answered; no buffer moves, the step can be retried."""
    data = synthetic_dataset(samples=200)
    backend, reference = FailsOnUpdate(), CsbMlpTrainer(_setup(), DenseIntegers())
    trainer = CsbMlpTrainer(_setup(), backend)
    for loop in (trainer, reference):
        loop.fit(data, epochs=1, progress=False, max_steps=2)  # the warm-up and the pruning search
    x, y = np.asarray(data.train_x[:40]), np.asarray(data.train_y[:40])
    before, exponents = trainer.read_weights(), list(trainer.lr_exponents)
    backend.fail_at = backend.updates + len(trainer.shapes)
    with pytest.raises(RuntimeError, match="UPD did not finish"):
        trainer.train_step(x, y)
    assert backend.updates == backend.fail_at  # the earlier layers' UPDs did answer
    after = trainer.read_weights()
    for a, b in zip(before["buffers"], after["buffers"]):
        assert np.array_equal(a, b)
    assert trainer.lr_exponents == exponents and trainer.fixed_steps == 0 and trainer.step == reference.step
    for loop in (trainer, reference):  # the retried step equals a step that never failed
        loop.train_step(x, y)
    for a, b in zip(trainer.read_weights()["buffers"], reference.read_weights()["buffers"]):
        assert np.array_equal(a, b)
    assert trainer.lr_exponents == reference.lr_exponents


def test_quantize_equals_the_exact_dyadic_rounding():
    """The float fast path against golden.round_into_buffer on the exact value: ties either side of every code,
    saturation edges, subnormals, +-0, huge magnitudes and random values, at fraction bits from -1000 to 1000 (at
    -1000, 1e308 is 9,332,636 codes: no clamp before the scaling may touch it)."""
    rng = np.random.default_rng(7)
    ties = np.arange(-300, 301) / 2.0
    directed = np.concatenate([ties, np.nextafter(ties, np.inf), np.nextafter(ties, -np.inf),
                               [0.0, -0.0, 5e-324, -5e-324, 2.2e-308, 1e300, -1e300, 1e308, -1e308, 2.0**40, 2.0**41,
                                -2.0**62]])
    values = np.concatenate([directed, rng.normal(0, 3, 4000), rng.normal(0, 1e-3, 2000) * 2.0**rng.integers(-20, 20, 2000)])
    for frac_bits in (-1000, -12, -8, -1, 0, 1, 3, 7, 12, 40, 1000):
        for bits in (8, 16, 24, 32):
            with np.errstate(over="ignore"):  # 1e300 * 2^40 is inf, which split_dyadic clamps
                scaled = np.ldexp(values, frac_bits)
            exact = csb_golden.round_into_buffer(*csb_golden.split_dyadic(scaled), buffer_bits=bits)
            assert np.array_equal(quantize(values, frac_bits, bits), exact), (frac_bits, bits)
