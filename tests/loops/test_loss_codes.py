"""softmax_gradient_codes equals the loop's composition (to_values, softmax_gradient, quantize_unit) bit for bit, into
its own array or rounded into a strided one (the arena's tiles)."""

import numpy as np
import pytest

from codesign.loops.common import softmax_gradient
from codesign.loops.csb import quantize_unit
from codesign.loops.loss_codes import label_terms, softmax_gradient_codes
from codesign.numerics.fixed_quant import to_values


def loop_codes(z, y, logit_frac, error_frac):
    grad, chosen = softmax_gradient(to_values(z, logit_frac), y)
    return quantize_unit(grad, error_frac), chosen


def check(z, y, logit_frac, error_frac):
    codes, chosen = softmax_gradient_codes(z, y, logit_frac=logit_frac, error_frac=error_frac)
    expected, expected_chosen = loop_codes(z, y, logit_frac, error_frac)
    assert codes.dtype == np.int8 and codes.flags.c_contiguous
    assert np.array_equal(codes, expected), (z.shape, logit_frac, error_frac)
    assert chosen.tobytes() == expected_chosen.tobytes()
    n, classes = z.shape
    room = np.full((n, 2, classes), 0x5A, np.int8)  # codes into every other row of it, as into the arena's tiles
    into, again = softmax_gradient_codes(z, y, logit_frac=logit_frac, error_frac=error_frac, out=room[:, :1],
                                         labels=label_terms(y, n, classes, error_frac))  # as a list step gives them
    assert np.shares_memory(into, room) and np.array_equal(room[:, 0], expected) and (room[:, 1] == 0x5A).all()
    assert again.tobytes() == expected_chosen.tobytes()
    own, chosen = softmax_gradient_codes(z, y, logit_frac=logit_frac, error_frac=error_frac,
                                         labels=label_terms(y, n, classes, error_frac))
    assert np.array_equal(own, expected) and chosen.tobytes() == expected_chosen.tobytes()
    return codes


@pytest.mark.parametrize("n", [1, 3, 16, 48, 64])
@pytest.mark.parametrize("classes", [1, 2, 10, 17])
def test_random_accumulators_in_either_memory_order(n, classes):
    rng = np.random.default_rng(n * 100 + classes)
    values = 0
    for logit_frac in (-2, 0, 6, 10, 24):
        for error_frac in (0, 4, 9, 13, 20):
            for spread in (1 << 4, 1 << 12, 1 << 31):
                z = rng.integers(-spread, spread, (n, classes)).astype(np.int32)
                y = rng.integers(0, classes, n)
                check(z, y, logit_frac, error_frac)
                check(np.asfortranarray(z), y, logit_frac, error_frac)  # as the arena's tiles are read
                values += 2 * z.size
    assert values >= 2 * 75 * n * classes


def test_ties_round_to_even_and_a_sure_class_saturates():
    even = np.zeros((1, 2), np.int32)  # p = 1/2 each: -1/2 and +1/2 at 0 fraction bits, ties to 0
    assert check(even, np.array([0]), 0, 0).tolist() == [[0, 0]]
    assert check(even, np.array([1]), 0, 2).tolist() == [[2, -2]]
    four = np.zeros((1, 4), np.int32)  # p = 1/4: 1/2 rounds to 0, -3/2 to -2
    assert check(four, np.array([2]), 0, 1).tolist() == [[0, 0, -2, 0]]
    sure = np.array([[0, 1 << 20]], np.int32)  # class 1 certain: p = 1.0 exactly
    assert check(sure, np.array([0]), 0, 7).tolist() == [[-128, 127]]  # +128 clipped, -128 kept
    assert check(sure, np.array([0]), 0, 9).tolist() == [[-128, 127]]
    assert check(sure, np.array([1]), 0, 9).tolist() == [[0, 0]]
    for n in (2, 3, 5, 64):  # below, at and past the bound where the clip may be skipped
        z = np.tile(sure, (n, 1))
        for error_frac in range(12):
            check(z, np.zeros(n, int), 0, error_frac)


def test_power_of_two_batches_far_from_the_codes_scale(monkeypatch):
    """The one-hot subtracted after the scaling (a power-of-two batch with its labels' terms) equals the loop where
    the scaled values are subnormal, far below one code, or far past the codes' ends; none of these falls back to
    the loop's composition."""
    import codesign.loops.loss_codes as loss_codes

    def no_fallback(*args):
        raise AssertionError("fell back to the composition")
    monkeypatch.setattr(loss_codes, "softmax_gradient", no_fallback)
    rng = np.random.default_rng(7)
    for n in (1, 2, 64):
        z = rng.integers(-(1 << 31), 1 << 31, (n, 10)).astype(np.int32)
        y = rng.integers(0, 10, n)
        for logit_frac in (0, 12, 31):
            for error_frac in (-960, -950, -60, -1, 30, 950, 960):
                check(z, y, logit_frac, error_frac)


def test_extreme_accumulators_and_wide_fractions_fall_back_exactly():
    top, bottom = np.iinfo(np.int32).max, np.iinfo(np.int32).min
    z = np.array([[top, bottom, 0], [bottom, bottom, bottom], [top, top, top - 1]], np.int32)
    for logit_frac in (-40, 0, 31, 960):
        check(z, np.array([0, 1, 2]), logit_frac, 13)
    check(z.astype(np.int64) * 4, np.array([2, 1, 0]), 20, 13)  # wider than the PE's accumulators
    check(z, np.array([0, 1, 2]), 1000, 13)
    check(z, np.array([0, 1, 2]), 3, 1001)


def test_bad_labels_and_no_samples_are_refused():
    z = np.zeros((2, 3), np.int32)
    for terms in (label_terms([0, 1, 2], 3, 3, 4), label_terms([0, 1], 2, 4, 4), label_terms([0], 1, 6, 4)):
        with pytest.raises(ValueError, match="labels' terms made for"):
            softmax_gradient_codes(z, np.array([0, 1]), logit_frac=0, error_frac=4, labels=terms)
    for y in (np.array([0, 3]), np.array([-1, 0]), np.array([0])):
        with pytest.raises(ValueError):
            softmax_gradient_codes(z, y, logit_frac=0, error_frac=4)
    for out in (np.zeros(5, np.int8), np.zeros(6, np.int16)):
        with pytest.raises(ValueError, match="codes of 2 x 3"):
            softmax_gradient_codes(z, np.array([0, 1]), logit_frac=0, error_frac=4, out=out)
    with pytest.raises(ValueError, match="no samples"):
        softmax_gradient_codes(np.zeros((0, 3), np.int32), np.zeros(0, int), logit_frac=0, error_frac=4)
