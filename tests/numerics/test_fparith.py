"""FP arithmetic on codes against the exact rational reference: > 10^4 MACs over many formats."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from codesign.numerics import FloatFormat, encode, fp_add, fp_dot, fp_mac, fp_mul
from codesign.numerics.reference import reference_add, reference_mac, reference_mul

SHAPES = [(8, 23), (8, 10), (8, 3), (5, 10), (5, 2), (4, 7), (3, 1), (2, 1)]


def random_codes(fmt: FloatFormat, rng: np.random.Generator, count: int) -> np.ndarray:
    return rng.integers(0, 1 << fmt.width, count, dtype=np.uint64)


@pytest.mark.parametrize("rounding", ["nearest_even", "nearest_away", "toward_zero"])
@pytest.mark.parametrize("subnormals", [True, False])
def test_mac_matches_exact_reference(rounding, subnormals):
    # 8 shapes x 300 MACs x 6 combinations = 14,400 MACs (each also checks a product and a sum).
    rng = np.random.default_rng(99)
    for exp_bits, frac_bits in SHAPES:
        fmt = FloatFormat(exp_bits=exp_bits, frac_bits=frac_bits, rounding=rounding, subnormals=subnormals)
        a, b, c = (random_codes(fmt, rng, 300) for _ in range(3))
        # half of the accumulators cancel the product's magnitude closely
        product = fp_mul(a, b, fmt)
        c[::2] = product[::2] ^ np.uint64(1 << (fmt.width - 1)) ^ (c[::2] & np.uint64(3))
        got = fp_mac(a, b, c, fmt)
        expected = [reference_mac(int(x), int(y), int(z), fmt) for x, y, z in zip(a, b, c)]
        assert got.tolist() == expected, fmt


@settings(max_examples=400, deadline=None)
@given(
    st.integers(0, 2**12 - 1), st.integers(0, 2**12 - 1), st.sampled_from(["nearest_even", "nearest_away", "toward_zero"])
)
def test_mul_and_add_on_a_small_format(x, y, rounding):
    fmt = FloatFormat(exp_bits=4, frac_bits=7, rounding=rounding)
    xs, ys = np.array([x], dtype=np.uint64), np.array([y], dtype=np.uint64)
    assert int(fp_mul(xs, ys, fmt)[0]) == reference_mul(x, y, fmt)
    assert int(fp_add(xs, ys, fmt)[0]) == reference_add(x, y, fmt)


def test_signed_zero_rules():
    fmt = FloatFormat(exp_bits=8, frac_bits=10)
    pz, nz = 0, 1 << (fmt.width - 1)
    one = int(encode(np.array([1.0]), fmt)[0])
    codes = lambda *v: np.array(v, dtype=np.uint64)  # noqa: E731
    assert fp_add(codes(pz, nz, nz, one), codes(nz, nz, pz, one | nz), fmt).tolist() == [pz, nz, pz, pz]
    assert fp_mul(codes(nz, pz, nz), codes(one, one | nz, one | nz), fmt).tolist() == [nz, nz, pz]


def test_saturating_overflow_and_not_fused():
    fmt = FloatFormat(exp_bits=5, frac_bits=2)
    big = int(encode(np.array([fmt.max_value]), fmt)[0])
    two = int(encode(np.array([2.0]), fmt)[0])
    assert fp_mul(np.array([big]), np.array([two]), fmt).tolist() == [big]
    assert fp_mac(np.array([big]), np.array([two]), np.array([big | 1 << 7]), fmt).tolist() == [0]
    # not fused: 1.25 * 1.25 = 1.5625 rounds to 1.5 before the subtraction of 1.5
    x = encode(np.array([1.25, 1.5]), fmt)
    assert fp_mac(x[:1], x[:1], x[1:] | np.uint64(1 << 7), fmt).tolist() == [0]


def test_dot_accumulates_in_order():
    fmt = FloatFormat(exp_bits=8, frac_bits=3)
    a = encode(np.array([[1.0, 2.0**10, 1.0, -(2.0**10)]]), fmt)
    ones = encode(np.ones((1, 4)), fmt)
    # in order: 1 + 1024 -> 1024 (absorbed), + 1 -> 1024, - 1024 -> 0; a fused/exact sum would give 2
    assert fp_dot(a, ones, 0, fmt).tolist() == [0]
    with pytest.raises(ValueError, match="operand shapes differ"):
        fp_dot(a, ones[:, :3], 0, fmt)


def test_arithmetic_rejects_unsupported_formats():
    with pytest.raises(ValueError, match="saturating formats only"):
        fp_mul([0], [0], FloatFormat(saturate=False))
    with pytest.raises(ValueError, match="rounds with"):
        fp_add([0], [0], FloatFormat(rounding="stochastic"))
    with pytest.raises(ValueError, match="code wider than"):
        fp_mul([1 << 20], [0], FloatFormat(exp_bits=5, frac_bits=2))
