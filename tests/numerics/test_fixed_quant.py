"""Fixed-point quantiser and MSB slices against the exact rational reference."""

import numpy as np
import pytest
import torch

from codesign.numerics import FixedFormat, decode, encode
from codesign.numerics.fixed_quant import to_values
from codesign.train.quantize import msb_slice, quantize
from codesign.numerics.reference import reference_quantize_fixed

FORMATS = [(8, 4, True), (8, 0, True), (16, 12, True), (4, -2, True), (12, 20, False), (24, 16, True), (32, 8, True), (2, 1, True)]


def fixed_values(fmt: FixedFormat, rng: np.random.Generator, count: int) -> np.ndarray:
    span = max(abs(fmt.min_value), fmt.max_value) * 1.5
    values = rng.uniform(-span, span, count)
    codes = rng.integers(fmt.min_code, fmt.max_code, count // 4)
    ties = (codes + 0.5) * fmt.scale  # exactly halfway between two codes
    return np.concatenate([values, ties, -ties, [0.0, fmt.max_value, fmt.min_value]])


@pytest.mark.parametrize("rounding", ["nearest_even", "nearest_away", "toward_zero"])
@pytest.mark.parametrize("saturate", [True, False])
def test_fixed_matches_exact_reference(rounding, saturate):
    # 8 formats x ~1500 values x 6 combinations: > 10^4 generated examples per mode family.
    rng = np.random.default_rng(17)
    for bits, frac_bits, signed in FORMATS:
        fmt = FixedFormat(bits=bits, frac_bits=frac_bits, signed=signed, rounding=rounding, saturate=saturate)
        values = fixed_values(fmt, rng, 250)
        expected = np.array([reference_quantize_fixed(float(v), fmt) for v in values], dtype=np.int64)
        patterns = encode(values, fmt)
        assert np.array_equal(patterns, (expected & ((1 << bits) - 1)).astype(np.uint64)), fmt
        assert np.array_equal(decode(patterns, fmt), expected * fmt.scale)
        assert np.array_equal(quantize(values, fmt), expected * fmt.scale)


def test_saturation_wrap_and_specials():
    fmt = FixedFormat(bits=8, frac_bits=4)
    assert quantize(np.array([100.0, -100.0, np.inf, -np.inf]), fmt).tolist() == [127 / 16, -8.0, 127 / 16, -8.0]
    wrap = FixedFormat(bits=8, frac_bits=4, saturate=False)
    assert quantize(np.array([8.0, -8.0625]), wrap).tolist() == [-8.0, 127 / 16]
    with pytest.raises(ValueError, match="cannot wrap"):
        quantize(np.array([np.inf]), wrap)
    assert np.isnan(quantize(np.array([np.nan]), fmt)[0])
    with pytest.raises(ValueError, match="NaN has no code"):
        encode(np.array([np.nan]), fmt)
    assert encode(np.array([-1 / 16, -8.0]), fmt).tolist() == [0xFF, 0x80]
    with pytest.raises(ValueError, match="wider than 8 bits"):
        decode(np.array([0x100], dtype=np.uint64), fmt)


def test_stochastic_fixed_is_seeded_and_unbiased():
    fmt = FixedFormat(bits=8, frac_bits=0, rounding="stochastic")
    x = np.full(20000, 2.25)
    q = quantize(x, fmt, rng=1)
    assert np.array_equal(q, quantize(x, fmt, rng=1)) and set(np.unique(q)) == {2.0, 3.0}
    assert abs(q.mean() - 2.25) < 4 * np.sqrt(0.25 * 0.75 / x.size)


def test_torch_matches_numpy_and_refuses_inexact_float32():
    rng = np.random.default_rng(2)
    x = rng.standard_normal(5000) * 10
    fmt = FixedFormat(bits=16, frac_bits=8)
    assert np.array_equal(quantize(torch.from_numpy(x), fmt).numpy(), quantize(x, fmt))
    x32 = torch.from_numpy(x.astype(np.float32))
    assert np.array_equal(quantize(x32, fmt).numpy(), quantize(x32.numpy().astype(np.float64), fmt).astype(np.float32))
    with pytest.raises(ValueError, match="does not fit a float32 tensor"):
        quantize(x32, FixedFormat(bits=32, frac_bits=8))


def test_msb_slice_takes_the_top_bits_with_floor():
    fmt = FixedFormat(bits=8, frac_bits=4)
    x = np.array([7.9375, 1.0, 0.0625, -0.0625, -8.0, -1.0])  # codes 127, 16, 1, -1, -128, -16
    values, slice_fmt = msb_slice(x, fmt, 4)
    assert slice_fmt == FixedFormat(bits=4, frac_bits=0, rounding="toward_zero")
    assert values.tolist() == [7.0, 1.0, 0.0, -1.0, -8.0, -1.0]  # codes >> 4 (arithmetic)
    grads = FixedFormat(bits=16, frac_bits=12)
    g = np.array([0.7, -0.7, 3.99])
    top, top_fmt = msb_slice(g, grads, 10)
    assert top_fmt.bits == 10 and top_fmt.frac_bits == 6
    assert top.tolist() == [np.floor(0.7 * 64) / 64, np.floor(-0.7 * 64) / 64, np.floor(3.99 * 64) / 64]
    t, _ = msb_slice(torch.tensor(g), grads, 10)
    assert t.tolist() == top.tolist()
    with pytest.raises(ValueError, match="MSB slice width"):
        msb_slice(x, fmt, 9)


@pytest.mark.parametrize("dtype", [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64])
def test_to_values_equals_ldexp_at_every_scale_and_extreme_code(dtype):
    """Codes times 2^-frac are ldexp's values bit for bit: the extremes of each type (|codes| < 2^53), zeros, and
    fractions up to the fast path's bound and past it, where products would be subnormal or overflow."""
    info = np.iinfo(dtype)
    low, high = max(int(info.min), -(2**53 - 1)), min(int(info.max), 2**53 - 1)
    rng = np.random.default_rng(dtype(0).itemsize)
    codes = np.concatenate([np.array([low, low + 1, -1, 0, 1, high - 1, high], dtype=np.int64).clip(low, high),
                            rng.integers(low, high, 500, endpoint=True)]).astype(dtype)
    for frac in (-1000, -961, -960, -64, -1, 0, 1, 13, 64, 960, 961, 1040, 1100):
        got, want = to_values(codes, frac), np.ldexp(codes.astype(np.float64), -frac)
        assert got.dtype == np.float64 and np.array_equal(got.view(np.uint64), want.view(np.uint64)), frac
