"""The host's conversions between real values and codes (codesign.step.tt.rounding), against their definitions."""

from __future__ import annotations

import numpy as np
import pytest

from codesign.step.tt.rounding import (biased_float32, biased_relu_codes, code_dtype, masked_codes, masked_float32,
                                      quantize_values, relu_codes_and_range)


def _defined(values, frac_bits, bits):
    """``values · 2^frac_bits`` to nearest, ties to even, saturated at ``bits``: the definition, in float64."""
    scaled = np.ldexp(np.asarray(values, dtype=np.float64), frac_bits)
    return np.clip(np.rint(scaled), -(1 << (bits - 1)), (1 << (bits - 1)) - 1).astype(np.int64)


@pytest.mark.parametrize("bits", [4, 8, 16, 32])
def test_quantize_values_is_its_definition_on_ties_extremes_and_per_value_scales(bits):
    """Ties both ways, ±0, float32 subnormals, values past float32's range and float64's 1e200s, at fraction bits
    from -64 to 64 (the fixed-point range), an int or one per value, into int64 and into the codes' own type."""
    rng = np.random.default_rng(bits)
    x = (rng.normal(size=4096) * 10.0 ** rng.integers(-8, 8, size=4096)).astype(np.float32)
    x[:12] = [0.5, 1.5, -0.5, -2.5, 2.5, -0.0, 1e-40, -1e-45, 3.4e38, -3.4e38, 1e30, 7.5]
    for values in (x, x.astype(np.float64) * 1e-3 + 1e-300, x.astype(np.float64) * 1e200):
        for frac in (-64, -3, 0, 1, 5, 40, 64):
            expected = _defined(values, frac, bits)
            assert np.array_equal(quantize_values(values, frac, bits), expected), frac
            narrow = quantize_values(values, frac, bits, code_dtype(bits))
            assert narrow.dtype == code_dtype(bits) and np.array_equal(narrow, expected)
        per_value = rng.integers(-64, 65, size=values.size)
        assert np.array_equal(quantize_values(values, per_value, bits), _defined(values, per_value, bits))
    # per-value scales at the edge of float32's normal powers (a table's, within ±126) and ties at each value's own
    # scale, by blocks as a layer's cores are quantised at once
    for low, high in ((-126, 126), (-127, 7), (-5, 127)):
        fracs = np.resize(np.repeat([low, -5, 0, 7, high], 512), 4096)
        with np.errstate(over="ignore"):  # past float32's range at -127: inf, which saturates
            ties = ((rng.integers(-300, 300, size=4096) + 0.5) * np.ldexp(1.0, -fracs)).astype(np.float32)
        for values in (ties, np.where(rng.random(4096) < 0.5, ties, x)):
            assert np.array_equal(quantize_values(values, fracs, bits), _defined(values, fracs, bits)), (low, high)


@pytest.mark.parametrize("bits", [4, 8, 16])
def test_relu_codes_and_range_give_the_codes_and_where_values_lie_within_their_bounds(bits):
    """Of x = max(values, 0): its codes as quantize_values gives them, and ``low <= x · 2^frac_bits <= high``
    before rounding, in float64: values just inside and just past each bound (which round onto it), on it, ±0,
    subnormals, ±inf and NaN, in float32 and float64, and at fractions past float32's powers (float64 products)."""
    rng = np.random.default_rng(bits + 100)
    low, high = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    for frac in (-130, -3, 0, 5, 40, 130):
        edges = np.ldexp(np.array([low, high, low - 0.25, high + 0.25, low + 0.25, high - 0.25, high + 0.5, high + 1,
                                   0.0, -0.0, 1e-300, -1e-300, np.inf, -np.inf]), -frac)
        wide = np.concatenate([edges, rng.normal(size=500) * 2.0 ** (bits - frac)])
        with np.errstate(over="ignore"):  # at fraction -130 past float32's range: inf
            narrow = np.concatenate([edges, rng.normal(size=500) * 2.0 ** (bits - 1 - frac)]).astype(np.float32)
        for values in (narrow, wide):
            relu = np.maximum(values, values.dtype.type(0))
            scaled = np.ldexp(relu.astype(np.float64), frac)
            codes, inside = relu_codes_and_range(relu, frac, bits, code_dtype(bits))
            assert np.array_equal(codes, quantize_values(relu, frac, bits, code_dtype(bits)))
            assert np.array_equal(inside, (scaled >= low) & (scaled <= high))
            assert inside.any() and not inside.all() and codes.min() == 0 and codes.max() == high
        nan = np.array([np.nan, 1.0], np.float32)  # NaN is out of range, as the comparisons have it
        with np.errstate(invalid="ignore"):  # its code is undefined
            inside = relu_codes_and_range(nan, frac, bits)[1]
        assert inside.tolist() == [False, 2.0 ** frac <= high]


def test_masked_accumulators_round_once_to_float32_as_through_float64():
    """int32 accumulators with more than float32's 24 bits (ties between two float32 both ways, the extremes, ±1,
    0), masked, at fraction bits across and past the one-rounding path's range (-32..126), against the float64
    expression; int64 ones beyond 2^53 take that expression itself."""
    rng = np.random.default_rng(7)
    ties = np.array([(1 << 24) + 1, (1 << 24) + 3, -(1 << 25) - 2, (1 << 30) + 64, -(1 << 30) - 192, 2**31 - 1,
                     -2**31, 1, -1, 0, 2**31 - 65, -(2**31 - 64)], dtype=np.int64)
    acc = np.concatenate([ties, rng.integers(-2**31, 2**31, size=4000)]).astype(np.int32)
    mask = rng.random(acc.size) < 0.7
    for frac in (-40, -33, -32, -5, 0, 3, 17, 40, 100, 126, 127, 140, 160, 180):
        expected = (acc.astype(np.float64) * np.ldexp(1.0, -frac) * mask).astype(np.float32)
        got = masked_float32(acc, frac, mask)
        assert got.dtype == np.float32 and got.tobytes() == expected.tobytes(), frac  # -0.0 where masked, too
    wide = np.array([2**53 + 1, -(2**60) - 3, (1 << 40) + 1, 5], dtype=np.int64)  # rounded in float64 first
    expected = np.array([2.0 ** 44, -(2.0 ** 51), 2.0 ** 31, 0.0], dtype=np.float32)
    assert masked_float32(wide, 9, np.array([True, True, True, False])).tobytes() == expected.tobytes()


def test_biased_accumulators_round_once_to_float32_as_through_float64():
    """Accumulators of up to 24 bits (int32, and int64 as chained sums come) plus 8-bit bias codes, their sums past
    float32's 24 bits (ties between two float32 both ways, at the bias's finest fraction), at fractions across the
    path's range, against the float64 expression rounded to float32; out of range (wider accumulators, another
    type, fractions apart or beyond the powers' range) there is no float32 path."""
    rng = np.random.default_rng(11)
    ties = np.array([(1 << 24) - 1, -(1 << 24) + 1, (1 << 24) - 3, (1 << 23) + 1, 1 << 24, -(1 << 24), 0, 1, -1])
    acc = np.concatenate([ties, rng.integers(-(1 << 24), (1 << 24) + 1, size=3000)]).astype(np.int32)
    checked = 0
    for frac, bias_frac in [(0, 1), (0, 29), (10, -19), (-100, -71), (126, 97), (40, 69), (-5, 24), (3, 3)]:
        half = np.full(acc.size, 1 << max(bias_frac - frac - 1, 0), np.int64)  # a half of acc's last bit
        codes = np.where(rng.random(acc.size) < 0.5, np.clip(half, -128, 127), rng.integers(-128, 128, acc.size))
        codes[:ties.size] = np.clip(half[:ties.size] * np.sign(ties + 0.5).astype(np.int64), -128, 127)
        bias = codes * np.ldexp(1.0, -bias_frac)
        expected = (acc.astype(np.float64) * np.ldexp(1.0, -frac) + bias).astype(np.float32)
        for given in (acc, acc.astype(np.int64)):
            got = biased_float32(given, frac, bias, bias_frac, 24)
            assert got is not None and got.dtype == np.float32 and got.tobytes() == expected.tobytes(), frac
        assert biased_float32(acc, frac, None, 0, 24).tobytes() == \
            (acc * np.ldexp(1.0, -frac)).astype(np.float32).tobytes()
        checked += int(np.count_nonzero(expected.astype(np.float64) != acc * np.ldexp(1.0, -frac) + bias))
    assert checked > 1000  # sums float32 rounds: the one rounding is tested, not only exact values
    bias = np.zeros(acc.size)
    for args in [(acc.astype(np.int16), 0, bias, 0, 24), (acc, 0, bias, 0, 25), (acc, 0, bias, 30, 24),
                 (acc, 10, bias, -20, 24), (acc, -101, bias, -101, 24), (acc, 127, bias, 127, 24),
                 (acc, 110, bias, 119, 24), (acc, -90, bias, -101, 24),
                 (acc, 0, np.full(acc.size, 2.0 ** 24 + 1), 0, 24), (acc, 0, np.full(acc.size, 2.0 ** -4), 29, 24)]:
        assert biased_float32(*args) is None, args[1:]


def _through_float32_output(acc, frac, bias, bias_frac, next_frac, bits):
    """The next layer's codes and range the long way: the output in float32, its ReLU, then its codes."""
    y = biased_float32(acc, frac, bias, bias_frac, 24)
    return relu_codes_and_range(np.maximum(y, np.float32(0)), next_frac, bits, code_dtype(bits))


@pytest.mark.parametrize("bits", [4, 8, 16])
def test_biased_relu_codes_are_the_output_rounded_to_float32_then_its_relu_codes(bits):
    """Accumulators to the next layer's codes in one scaling, against the output in float32, its ReLU and its
    codes: sums float32 rounds (ties both ways), negative outputs, outputs halfway between codes, onto and past
    the codes' top, 0, at scales across and at the edges of the one-scaling path; past them, None."""
    rng = np.random.default_rng(bits + 40)
    high = (1 << (bits - 1)) - 1
    ties = np.array([(1 << 24) - 1, -(1 << 24) + 1, (1 << 24) - 3, (1 << 23) + 1, 1 << 24, -(1 << 24), 0, 1, -1])
    acc = np.concatenate([ties, rng.integers(-(1 << 24), (1 << 24) + 1, size=3000)]).astype(np.int32)
    small = np.concatenate([[0, 1, -1, 2, -2, 3, -3, 5, -5], rng.integers(-(1 << bits), (1 << bits) + 1, size=3000)]
                           ).astype(np.int32)
    seen = {"within": 0, "zero": 0, "past": 0, "halfway": 0}
    for frac, bias_frac in [(0, 1), (10, -19), (-5, 24), (3, 3), (40, 69), (126, 97), (-100, -71), (24, 20)]:
        half = np.full(acc.size, 1 << max(bias_frac - frac - 1, 0), np.int64)
        codes = np.where(rng.random(acc.size) < 0.5, np.clip(half, -128, 127), rng.integers(-128, 128, acc.size))
        bias = codes * np.ldexp(1.0, -bias_frac)
        for values, next_frac in [(acc, frac + bits - 25), (acc, frac - 1), (small, frac - 1), (small, frac)]:
            for given in (values, values.astype(np.int64)):
                got = biased_relu_codes(given, frac, bias, bias_frac, 24, next_frac, bits)
                expected = _through_float32_output(values, frac, bias, bias_frac, next_frac, bits)
                assert got is not None and got[0].dtype == np.float32, (frac, next_frac)
                assert np.array_equal(got[0], expected[0]) and np.array_equal(got[1], expected[1]), (frac, next_frac)
            no_bias = biased_relu_codes(values, frac, None, 0, 24, next_frac, bits)
            assert np.array_equal(no_bias[0], _through_float32_output(values, frac, None, 0, next_frac, bits)[0])
            seen["within"] += bool(np.any((got[0] > 0) & (got[0] < high)))
            seen["zero"] += bool(np.any(got[0] == 0))
            seen["past"] += bool(np.any(~got[1]))
            exact = (values * np.ldexp(1.0, next_frac - frac) + bias * 2.0 ** next_frac)
            seen["halfway"] += bool(np.any((exact % 1 == 0.5) & (exact > 0) & (exact < high)))
    assert min(seen.values()) >= 4, seen  # each kind of value at several scales, not at one
    bias = np.zeros(acc.size)
    for args in [(acc, 0, bias, 0, 25, 0, bits), (acc, 0, bias, 0, 24, 127, bits), (acc, 0, bias, 0, 24, 0, 25),
                 (acc, 0, bias, 0, 24, 103, bits), (acc, 100, bias, 100, 24, -27, bits),
                 (acc, 0, bias, -3, 24, 100, bits), (acc, -100, bias, -100, 24, 126, bits)]:
        assert biased_relu_codes(*args) is None, args[1:]


@pytest.mark.parametrize("bits", [4, 8, 16])
def test_masked_codes_are_the_masked_float32_values_codes(bits):
    """Input-gradient accumulators to the layer below's output-gradient codes in one scaling, against
    masked_float32 then quantize_values: int32 accumulators past float32's 24 bits (ties both ways), the extremes,
    ±1 and 0, masked, at scales from far below the codes (products down to 2^-126, the path's edge) to past
    their top; past the one-scaling path's range, None."""
    rng = np.random.default_rng(bits + 70)
    ties = np.array([(1 << 24) + 1, (1 << 24) + 3, -(1 << 25) - 2, (1 << 30) + 64, -(1 << 30) - 192, 2**31 - 1,
                     -2**31, 1, -1, 0, 2**31 - 65, -(2**31 - 64)], dtype=np.int64)
    acc = np.concatenate([ties, rng.integers(-2**31, 2**31, size=4000)]).astype(np.int32)
    mask = rng.random(acc.size) < 0.7
    for frac, next_frac in [(-32, -126), (0, 0), (17, 3), (40, 30), (100, -26), (126, 126), (126, 0), (30, -96),
                            (-10, 86), (20, 20 - 31 + bits)]:
        expected = quantize_values(masked_float32(acc, frac, mask), next_frac, bits, code_dtype(bits))
        got = masked_codes(acc, frac, mask, next_frac, bits)
        assert got is not None and got.dtype == np.float32 and np.array_equal(got, expected), (frac, next_frac)
    for args in [(acc.astype(np.int64), 0, mask, 0, bits), (acc, -33, mask, 0, bits), (acc, 127, mask, 0, bits),
                 (acc, 0, mask, 127, bits), (acc, 0, mask, 0, 25), (acc, 30, mask, 127, bits),
                 (acc, 0, mask, 97, bits), (acc, 100, mask, -27, bits)]:
        assert masked_codes(*args) is None, args[1:]
