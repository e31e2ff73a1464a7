"""The container codec equals the general path, to_container(encode(...)) and decode(from_container(...)), bit for bit."""

from __future__ import annotations

import numpy as np
import pytest

from codesign.numerics import FloatFormat, decode, encode
from codesign.pe.fpmac.container_codec import ContainerCodec
from codesign.pe.fpmac.golden import from_container, to_container

ROUNDINGS = ("nearest_even", "nearest_away", "toward_zero")
# (exp_bits, fb, max_fb): the FB loops' formats (E 8, FB 1..23 in 23- and 9-bit containers) and narrow exponents
SHAPES = [(8, 9, 9), (8, 5, 9), (8, 1, 23), (8, 23, 23), (8, 10, 23), (5, 3, 7), (4, 2, 2), (2, 4, 6), (6, 12, 20)]


def _general_words(x, fmt: FloatFormat, max_fb: int) -> np.ndarray:
    return to_container(encode(x, fmt), fmt.frac_bits, max_fb=max_fb)


@pytest.mark.parametrize("rounding", ROUNDINGS)
def test_words_are_the_general_encode_in_its_container(rounding, float_edge_values):
    """~10^4 values a shape (9 shapes): every code's value, ties, their neighbours, the subnormal range, overflow and
    infinities, as float64 and (where exact) float32, in any shape."""
    rng = np.random.default_rng(len(rounding))
    for exp_bits, fb, max_fb in SHAPES:
        fmt = FloatFormat(exp_bits=exp_bits, frac_bits=fb, rounding=rounding)
        codec = ContainerCodec(fmt, max_fb=max_fb)
        x = float_edge_values(fmt, rng)
        assert np.array_equal(codec.words(x), _general_words(x, fmt, max_fb)), (fmt, max_fb)
        with np.errstate(over="ignore"):  # beyond float32's range: infinities, as the general path gets them
            single = x.astype(np.float32)
        assert np.array_equal(codec.words(single.reshape(-1, 2)).reshape(-1), _general_words(single, fmt, max_fb))
        assert np.array_equal(codec.words(np.arange(-300, 300)), _general_words(np.arange(-300.0, 300.0), fmt, max_fb))


def test_values_are_the_general_decode_of_every_container_word():
    """Every word of the narrow containers (garbage below the FB included), 20,000 random words and the extremes of
    the wide ones; signed zeros by their sign bit."""
    rng = np.random.default_rng(0)
    for exp_bits, fb, max_fb in SHAPES:
        fmt = FloatFormat(exp_bits=exp_bits, frac_bits=fb)
        codec = ContainerCodec(fmt, max_fb=max_fb)
        top = (1 << codec.width) - 1
        words = (np.arange(top + 1, dtype=np.uint64) if codec.width <= 16 else
                 np.concatenate([rng.integers(0, top + 1, 20_000, dtype=np.uint64),
                                 np.arange(0, 1 << (max_fb + 1), max(1, 1 << (max_fb - 8)), dtype=np.uint64),
                                 np.uint64(top) - np.arange(64, dtype=np.uint64)]))
        general = decode(from_container(words, fb, max_fb=max_fb), fmt)
        for given in (words, words.astype(np.int64), words.astype(np.uint32) if codec.width <= 32 else words):
            assert np.array_equal(codec.values(given).view(np.int64), general.view(np.int64)), (fmt, max_fb)


def test_bad_input_raises_as_the_general_path_does():
    codec = ContainerCodec(FloatFormat(exp_bits=8, frac_bits=5), max_fb=9)
    with pytest.raises(ValueError, match="NaN"):
        codec.words(np.array([1.0, np.nan]))
    with pytest.raises(ValueError, match="wider"):
        codec.values(np.array([1 << 18], dtype=np.uint64))
    with pytest.raises(ValueError, match="wider"):  # a negative word wraps as the general path reads it
        codec.values(np.array([-1]))
    with pytest.raises(ValueError, match="max_fb"):
        ContainerCodec(FloatFormat(exp_bits=8, frac_bits=9), max_fb=5)
    strict = FloatFormat(exp_bits=4, frac_bits=2, saturate=False)
    with pytest.raises(OverflowError):
        ContainerCodec(strict, max_fb=3).words(np.array([strict.max_value * 2]))
    stochastic = ContainerCodec(FloatFormat(exp_bits=4, frac_bits=2, rounding="stochastic"), max_fb=3)
    with pytest.raises(ValueError, match="rng"):  # the general path's refusal: no random bits here
        stochastic.words(np.array([1.0]))


def test_the_fast_path_takes_the_normal_binades_and_leaves_the_rest():
    """A mutation of the one-addition rounding (ties away where even is asked) is caught on the values above."""
    fmt = FloatFormat(exp_bits=8, frac_bits=5)
    codec = ContainerCodec(fmt, max_fb=9)
    tie = 1.0 + 2.0 ** -6  # halfway between 1 and 1 + 2^-5: to even is 1
    assert codec.values(codec.words(np.array([tie, -tie]))).tolist() == [1.0, -1.0]
    codec._half += 1  # the increment of nearest_away: the tie goes up
    assert codec.values(codec.words(np.array([tie])))[0] == 1.0 + 2.0 ** -5
