"""The host's conversions between real values and codes (codesign.step.tt.rounding), against their definitions."""

from __future__ import annotations

import numpy as np
import pytest

from codesign.step.tt.rounding import code_dtype, quantize_values


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
