"""The host's conversions between real values and codes (codesign.step.tt.rounding), against their definitions."""

from __future__ import annotations

import numpy as np
import pytest

from codesign.step.tt.rounding import code_dtype, quantize_and_range, quantize_values


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


@pytest.mark.parametrize("bits", [4, 8, 16])
def test_quantize_and_range_gives_the_codes_and_where_values_lie_within_their_bounds(bits):
    """The codes of quantize_values, and ``low <= values · 2^frac_bits <= high`` before rounding, in float64:
    values just inside and just past each bound (which round onto it), on it, ±0, subnormals, ±inf."""
    rng = np.random.default_rng(bits + 100)
    low, high = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    for frac in (-3, 0, 5, 40):
        edges = np.ldexp(np.array([low, high, low - 0.25, high + 0.25, low + 0.25, high - 0.25, high + 0.5,
                                   0.0, -0.0, 1e-300, np.inf, -np.inf]), -frac)
        for values in (np.concatenate([edges, rng.normal(size=500) * 2.0 ** (bits - 1 - frac)]).astype(np.float32),
                       np.concatenate([edges, rng.normal(size=500) * 2.0 ** (bits - frac)])):
            codes, inside = quantize_and_range(values, frac, bits, code_dtype(bits))
            scaled = np.ldexp(values.astype(np.float64), frac)
            assert np.array_equal(codes, quantize_values(values, frac, bits, code_dtype(bits)))
            assert np.array_equal(inside, (scaled >= low) & (scaled <= high))
            assert inside.any() and not inside.all()
