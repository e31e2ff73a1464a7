"""The loss gradient's integer definition (codesign.numerics.loss_grad) against a scalar reference written from
the definition in Python integers and fractions, and against the float softmax gradient it approximates."""

from __future__ import annotations

import math

import numpy as np
import pytest

from codesign.loops.common import softmax_gradient
from codesign.loops.csb import quantize
from codesign.numerics import loss_grad as lg
from codesign.numerics.round_stage import rounded_shift
from codesign.pe.csb.reference import loss_codes


def reference_codes(z, labels, *, classes, batch, exp_shift, recip_shift):
    """The PE reference's scalar loss codes (written from the definition in Python integers and Fractions)."""
    del classes
    return np.array(loss_codes([list(map(int, row)) for row in z], [int(y) for y in labels], batch=batch,
                               exp_shift=exp_shift, recip_shift=recip_shift), dtype=np.int64)


def test_table_is_the_rounded_power():
    assert lg.EXP_TABLE[0] == 1 << 16 and len(lg.EXP_TABLE) == 256
    assert lg.LOG2E_Q16 == round(math.log2(math.e) * 2 ** 16)
    for f, entry in enumerate(lg.EXP_TABLE):
        assert abs(entry - 2 ** (16 - f / 256)) <= 0.5


def _cases(rng, count):
    for _ in range(count):
        classes = int(rng.integers(1, 33))
        lanes = int(rng.integers(1, 17))
        spread = int(rng.integers(1, 32))
        z = rng.integers(-(1 << spread), 1 << spread, size=(classes, lanes))
        z = np.clip(z, -(1 << 31), (1 << 31) - 1)
        labels = rng.integers(0, classes, size=lanes)
        labels[rng.random(lanes) < 0.1] = lg.NO_SAMPLE
        yield z, labels, lg.LossGradConfig(classes=classes, batch=int(rng.integers(1, 4096)),
                                           exp_shift=int(rng.integers(0, 32)), recip_shift=int(rng.integers(0, 49)))


def test_random_against_the_reference():
    rng = np.random.default_rng(5)
    values = 0
    for z, labels, config in _cases(rng, 400):
        got = lg.loss_grad_codes(z, labels, config=config)
        want = reference_codes(z.tolist(), labels.tolist(), classes=config.classes, batch=config.batch,
                               exp_shift=config.exp_shift, recip_shift=config.recip_shift)
        np.testing.assert_array_equal(got, want)
        values += z.size
    assert values > 10_000


DIRECTED = [
    # all logits equal: p = 1/classes, ties of the maximum
    (np.zeros((10, 4), np.int64), [0, 3, 9, lg.NO_SAMPLE], 64, 8, 13 + 32),
    # the int32 extremes: d = 2^32 - 1, the exponent's integer part far past 17
    (np.array([[(1 << 31) - 1, -(1 << 31)], [-(1 << 31), (1 << 31) - 1]]), [1, 1], 1, 0, 7 + 32),
    # one class: p = 1, the gradient 0
    (np.array([[5, -7, 0]]), [0, 0, 0], 3, 9, 40),
    # four equal classes at recip_shift 33: 0.5 and -1.5, ties to 0 and -2
    (np.zeros((4, 2), np.int64), [0, 1], 1, 8, 33),
    # recip_shift 48 and a batch of 1: saturation at both ends
    (np.array([[0, 100], [3000, 0]]), [0, 1], 1, 8, 48),
    # recip_shift 0: the reciprocal is 0, every code 0
    (np.array([[0, 100], [3000, 0]]), [0, 1], 1, 8, 0),
]


@pytest.mark.parametrize("z, labels, batch, exp_shift, recip_shift", DIRECTED)
def test_directed_against_the_reference(z, labels, batch, exp_shift, recip_shift):
    z = np.asarray(z, np.int64)
    config = lg.LossGradConfig(classes=z.shape[0], batch=batch, exp_shift=exp_shift, recip_shift=recip_shift)
    got = lg.loss_grad_codes(z, np.array(labels), config=config)
    np.testing.assert_array_equal(got, reference_codes(z.tolist(), labels, classes=z.shape[0], batch=batch,
                                                       exp_shift=exp_shift, recip_shift=recip_shift))


def test_ties_and_saturation_happen():
    """The directed cases reach what they are there for: a tie of the final rounding, and both saturations."""
    config = lg.LossGradConfig(classes=4, batch=1, exp_shift=8, recip_shift=33)
    codes = lg.loss_grad_codes(np.zeros((4, 2), np.int64), np.array([0, 1]), config=config)
    np.testing.assert_array_equal(codes, [[-2, 0], [0, -2], [0, 0], [0, 0]])  # 0.5 -> 0, -1.5 -> -2
    config = lg.LossGradConfig(classes=2, batch=1, exp_shift=8, recip_shift=48)
    codes = lg.loss_grad_codes(np.array([[0, 100], [3000, 0]]), np.array([0, 1]), config=config)
    assert codes.max() == 127 and codes.min() == -128


def test_the_rounding_ties_to_even():
    values = np.array([1, 3, 5, -1, -3, -5, 2, -2, 7], np.int64)
    np.testing.assert_array_equal(rounded_shift(values, -1), [0, 2, 2, 0, -2, -2, 1, -1, 4])
    half = 1 << 31
    np.testing.assert_array_equal(rounded_shift(np.array([half, 3 * half, -half, -3 * half, half + 1]), -32),
                                  [0, 2, 0, -2, 1])


@pytest.mark.parametrize("batch, logit_frac, error_frac", [(64, 10, 13), (16, 12, 11), (10, 6, 10), (128, 14, 14)])
def test_within_one_code_of_the_float_gradient(batch, logit_frac, error_frac):
    """The definition approximates the float softmax gradient the loops used: every code within one."""
    rng = np.random.default_rng(batch)
    classes = 10
    z = np.round(rng.normal(0, 3, size=(classes, batch)) * 2 ** logit_frac).astype(np.int64)
    y = rng.integers(0, classes, size=batch)
    config = lg.LossGradConfig.of_fractions(classes=classes, batch=batch, logit_frac=logit_frac,
                                            error_frac=error_frac)
    got = lg.loss_grad_codes(z, y, config=config)
    grad, _ = softmax_gradient(z.T / 2.0 ** logit_frac, y)
    want = quantize(grad, error_frac).T
    assert np.abs(got - want).max() <= 1
    assert np.mean(got == want) > 0.9


@pytest.mark.parametrize("bad, message", [
    (dict(classes=0), "classes"), (dict(classes=65_537), "classes"), (dict(batch=0), "batch"),
    (dict(batch=65_537), "batch"), (dict(exp_shift=32), "exp_shift"), (dict(recip_shift=-1), "recip_shift"),
    (dict(recip_shift=49), "recip_shift"), (dict(recip_shift=True), "recip_shift"),
])
def test_config_refuses(bad, message):
    fields = dict(classes=10, batch=64, exp_shift=8, recip_shift=30) | bad
    with pytest.raises((ValueError, TypeError), match=message):
        lg.LossGradConfig(**fields)


def test_inputs_refused():
    config = lg.LossGradConfig(classes=3, batch=4, exp_shift=8, recip_shift=30)
    with pytest.raises(ValueError, match="classes=3"):
        lg.loss_grad_codes(np.zeros((2, 4), np.int64), np.zeros(4, np.int64), config=config)
    with pytest.raises(ValueError, match="outside 0..2"):
        lg.loss_grad_codes(np.zeros((3, 2), np.int64), np.array([0, 3]), config=config)
    with pytest.raises(ValueError, match="32-bit"):
        lg.loss_grad_codes(np.full((3, 1), 1 << 31), np.array([0]), config=config)
    with pytest.raises(ValueError, match="logit_frac"):
        lg.exp_shift_of(24)
    with pytest.raises(ValueError, match="error_frac"):
        lg.recip_shift_of(17)


def test_the_hosts_form_equals_the_definition():
    """sample_codes (samples x classes, in place, one gather for the exponent) against loss_grad_codes."""
    rng = np.random.default_rng(11)
    values = 0
    for case in range(500):
        classes, samples, spread = int(rng.integers(1, 33)), int(rng.integers(1, 70)), int(rng.integers(0, 32))
        z = np.clip(rng.integers(-(1 << spread), (1 << spread) + 1, (samples, classes)), -(1 << 31), (1 << 31) - 1)
        z = z.astype(np.int32 if case % 2 else np.int64)
        y = rng.integers(0, classes, samples)
        config = lg.LossGradConfig(classes=classes, batch=int(rng.integers(1, 4096)),
                                   exp_shift=int(rng.integers(0, 32)), recip_shift=int(rng.integers(0, 49)))
        np.testing.assert_array_equal(lg.sample_codes(z, y, config=config), lg.loss_grad_codes(z.T, y, config=config).T)
        values += z.size
    assert values > 100_000
