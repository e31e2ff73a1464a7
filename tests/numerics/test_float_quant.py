"""Float quantiser against the exact rational reference, NumPy against torch, and special values."""

import numpy as np
import pytest
import torch

from codesign.numerics import FloatFormat, decode, encode
from codesign.train.quantize import quantize
from codesign.numerics.reference import float_value, reference_quantize_float

DETERMINISTIC = ("nearest_even", "nearest_away", "toward_zero")
SHAPES = [(8, 23), (8, 10), (8, 7), (8, 1), (5, 10), (5, 2), (4, 3), (3, 6), (2, 1)]


def spread_values(fmt: FloatFormat, rng: np.random.Generator, count: int) -> np.ndarray:
    """Values over the whole range of fmt and beyond, plus exact ties between neighbouring codes."""
    exponents = rng.uniform(fmt.emin - fmt.frac_bits - 3, fmt.emax + 2, count)
    values = rng.choice([-1.0, 1.0], count) * rng.uniform(1, 2, count) * np.exp2(np.floor(exponents))
    codes = rng.integers(0, fmt.max_code, count // 4, dtype=np.uint64)
    lower = decode(codes, fmt)
    upper = decode(codes + np.uint64(1), fmt)
    ties = (lower + upper) / 2 * rng.choice([-1.0, 1.0], codes.size)
    return np.concatenate([values, ties, [0.0, -0.0, fmt.max_value, -fmt.min_subnormal / 2]])


@pytest.mark.parametrize("rounding", DETERMINISTIC)
@pytest.mark.parametrize("subnormals", [True, False])
def test_quantize_matches_exact_reference(rounding, subnormals):
    # 9 shapes x ~290 values x 6 mode/subnormal combinations: > 10^4 generated examples in all.
    rng = np.random.default_rng(hash((rounding, subnormals)) % 2**32)
    checked = 0
    for exp_bits, frac_bits in SHAPES:
        fmt = FloatFormat(exp_bits=exp_bits, frac_bits=frac_bits, rounding=rounding, subnormals=subnormals)
        values = spread_values(fmt, rng, 230)
        codes = encode(values, fmt)
        expected = [reference_quantize_float(float(v), fmt) for v in values]
        assert codes.tolist() == expected, fmt
        quantized = quantize(values, fmt)
        assert np.array_equal(quantized.view(np.int64), decode(codes, fmt).view(np.int64))
        checked += values.size
    assert checked >= 2000


def test_every_code_round_trips():
    for fmt in (FloatFormat(exp_bits=5, frac_bits=10), FloatFormat(exp_bits=4, frac_bits=3), FloatFormat(exp_bits=2, frac_bits=1)):
        codes = np.arange(1 << fmt.width, dtype=np.uint64)
        values = decode(codes, fmt)
        assert np.array_equal(encode(values, fmt), codes)
        exact = [float(float_value(int(c), fmt)) for c in codes[:: max(1, codes.size // 512)]]
        assert np.array_equal(np.abs(values[:: max(1, codes.size // 512)]), np.abs(exact))


def test_ties_follow_the_mode():
    fmt = FloatFormat(exp_bits=8, frac_bits=2)
    # 1.125 lies halfway between 1.0 and 1.25; 1.375 halfway between 1.25 and 1.5
    values = np.array([1.125, 1.375, -1.125, -1.375])
    assert quantize(values, fmt).tolist() == [1.0, 1.5, -1.0, -1.5]
    away = FloatFormat(exp_bits=8, frac_bits=2, rounding="nearest_away")
    assert quantize(values, away).tolist() == [1.25, 1.5, -1.25, -1.5]
    zero = FloatFormat(exp_bits=8, frac_bits=2, rounding="toward_zero")
    assert quantize(values, zero).tolist() == [1.0, 1.25, -1.0, -1.25]


def test_subnormals_and_flush_to_zero():
    gradual = FloatFormat(exp_bits=4, frac_bits=3)  # emin = -6, smallest subnormal 2**-9
    flush = FloatFormat(exp_bits=4, frac_bits=3, subnormals=False)
    tiny = np.array([2.0**-9, 3 * 2.0**-9, 2.0**-10, 1.5 * 2.0**-10, (2 - 2**-3) * 2.0**-7, 0.99 * 2.0**-6])
    # 2^-10 is a tie between 0 and 2^-9 (even: 0); 1.875 * 2^-7 = 7.5 quanta, a tie that goes to 8 quanta = 2^-6
    assert quantize(tiny, gradual).tolist() == [2.0**-9, 3 * 2.0**-9, 0.0, 2.0**-9, 2.0**-6, 2.0**-6]
    # flush-to-zero rounds at full precision first: (2 - 2^-3) * 2^-7 stays below 2^-6 and flushes,
    # 0.99 * 2^-6 rounds up to 2^-6 and survives
    assert quantize(tiny, flush).tolist() == [0.0, 0.0, 0.0, 0.0, 0.0, 2.0**-6]
    assert decode(np.array([0b0_0000_101], dtype=np.uint64), flush).tolist() == [0.0]


def test_overflow_saturation_signed_zero_and_nan():
    fmt = FloatFormat(exp_bits=5, frac_bits=2)
    assert fmt.max_value == 1.75 * 2.0**16
    values = np.array([1e9, -1e9, np.inf, -np.inf, -0.0, -1e-30, np.nan])
    out = quantize(values, fmt)
    assert out[:4].tolist() == [fmt.max_value, -fmt.max_value, fmt.max_value, -fmt.max_value]
    assert np.signbit(out[4]) and out[4] == 0 and np.signbit(out[5]) and out[5] == 0
    assert np.isnan(out[6])
    with pytest.raises(ValueError, match="NaN has no code"):
        encode(values, fmt)
    wrap = FloatFormat(exp_bits=5, frac_bits=2, saturate=False)
    assert quantize(values[:4], wrap).tolist() == [np.inf, -np.inf, np.inf, -np.inf]
    with pytest.raises(OverflowError, match="exceed the largest finite value"):
        encode(np.array([1e9]), wrap)
    # the all-ones exponent field is an ordinary binade
    assert decode(np.array([0b0_11111_00], dtype=np.uint64), fmt).tolist() == [2.0**16]


def torch_inputs(rng: np.random.Generator, count: int) -> np.ndarray:
    normal = rng.standard_normal(count) * np.exp2(rng.uniform(-140, 120, count))
    specials = [0.0, -0.0, np.inf, -np.inf, np.nan, 1e-45, -1e-45, 3.4e38, -3.4e38, 2.0**-126]
    return np.concatenate([normal, specials]).astype(np.float32)


@pytest.mark.parametrize("rounding", DETERMINISTIC + ("stochastic",))
@pytest.mark.parametrize("saturate", [True, False])
@pytest.mark.parametrize("subnormals", [True, False])
def test_torch_and_numpy_agree_bit_for_bit(rounding, saturate, subnormals):
    rng = np.random.default_rng(7)
    x = torch_inputs(rng, 4000)
    for exp_bits, frac_bits in SHAPES:
        fmt = FloatFormat(exp_bits=exp_bits, frac_bits=frac_bits, rounding=rounding, saturate=saturate, subnormals=subnormals)
        with np.errstate(over="ignore"):  # E = 8 top binade: float64 -> float32 gives inf
            from_numpy = quantize(x.astype(np.float64), fmt, rng=11).astype(np.float32)
        from_torch = quantize(torch.from_numpy(x), fmt, rng=11).numpy()
        if exp_bits == 8:
            # float32 cannot hold the top binade [2^128, max] of E = 8 formats: both paths give inf
            assert np.isinf(from_numpy[np.abs(from_numpy) >= 2.0**128]).all()
        nan = np.isnan(x)
        assert np.array_equal(from_numpy[~nan].view(np.int32), from_torch[~nan].view(np.int32)), fmt
        assert np.isnan(from_torch[nan]).all()


def test_stochastic_rounding_is_seeded_and_unbiased():
    fmt = FloatFormat(exp_bits=8, frac_bits=3, rounding="stochastic")
    value = 1.0 + 0.3 * 2.0**-3  # 30% of the way from 1.0 to 1.125
    x = np.full(20000, value)
    first, second = quantize(x, fmt, rng=3), quantize(x, fmt, rng=3)
    assert np.array_equal(first, second)
    assert set(np.unique(first)) == {1.0, 1.125}
    assert abs(first.mean() - value) < 4 * 0.125 * np.sqrt(0.3 * 0.7 / x.size)
    assert not np.array_equal(first, quantize(x, fmt, rng=4))
    with pytest.raises(ValueError, match="needs rng="):
        quantize(x, fmt)


def test_float64_input_is_rounded_once():
    fmt = FloatFormat(exp_bits=8, frac_bits=10)
    # just above the tie at 1 + 2^-11: float32 would round it onto the tie, float64 keeps it above
    x = np.array([1.0 + 2.0**-11 + 2.0**-40])
    assert quantize(x, fmt).tolist() == [1.0 + 2.0**-10]


def test_torch_keeps_dtype_and_shape():
    fmt = FloatFormat(exp_bits=5, frac_bits=4)
    x = torch.randn(3, 4, 5, dtype=torch.float64)
    q = quantize(x, fmt)
    assert q.dtype == torch.float64 and q.shape == x.shape
    assert np.array_equal(q.numpy(), quantize(x.numpy(), fmt))


@pytest.mark.slow
def test_compiled_torch_kernel_matches_eager(monkeypatch):
    rng = np.random.default_rng(5)
    x = torch.from_numpy(torch_inputs(rng, 1 << 20))
    for fmt in (FloatFormat(exp_bits=8, frac_bits=10, rounding="nearest_away"), FloatFormat(exp_bits=5, frac_bits=7)):
        monkeypatch.setenv("CODESIGN_TORCH_COMPILE", "0")
        eager = quantize(x, fmt)
        monkeypatch.setenv("CODESIGN_TORCH_COMPILE", "1")
        compiled = quantize(x, fmt)
        assert torch.equal(eager.view(torch.int32), compiled.view(torch.int32))


def _general_codes(x: np.ndarray, fmt: FloatFormat) -> tuple[np.ndarray, np.ndarray]:
    """Codes and overflow of float64 ``x`` through the general routine (frexp, then round_to_code)."""
    from codesign.numerics.rounding import round_to_code

    finite = np.isfinite(x)
    frac, exp2 = np.frexp(np.where(finite, np.abs(x), 0.0))
    codes, overflow = round_to_code(np.signbit(x), np.ldexp(frac, 53).astype(np.int64), exp2.astype(np.int64) - 53,
                                    fmt)
    sign = codes & np.uint64(1 << (fmt.width - 1))
    return np.where(finite, codes, np.uint64(fmt.max_code) | sign), overflow | ~finite


@pytest.mark.parametrize("subnormals", [True, False])
@pytest.mark.parametrize("rounding", DETERMINISTIC)
def test_the_binary64_fast_path_is_the_general_rounding(rounding, subnormals, float_edge_values):
    """encode's fast path for float64 (its bit fields read directly; the normal binades in one integer rounding,
    the rest field by field, and the field-by-field branch on every value) against round_to_code, code for code
    and overflow for overflow: 9 shapes plus the corners of the formats' range, ~10^4 values each."""
    from codesign.numerics.float_quant import _fast_path, _round_binary64, _round_binary64_fields

    rng = np.random.default_rng(len(rounding) + subnormals)
    for exp_bits, frac_bits in SHAPES + [(8, 23), (2, 23), (8, 1), (6, 12)]:
        fmt = FloatFormat(exp_bits=exp_bits, frac_bits=frac_bits, rounding=rounding, subnormals=subnormals)
        assert _fast_path(fmt, None)
        x = float_edge_values(fmt, rng)
        general = _general_codes(x, fmt)
        for fast in (_round_binary64(x, fmt), _round_binary64_fields(x, fmt)):  # both of the path's branches
            assert np.array_equal(fast[0], general[0]) and np.array_equal(fast[1], general[1]), fmt
    assert not _fast_path(FloatFormat(exp_bits=5, frac_bits=2, rounding="stochastic"), None)
    assert not _fast_path(FloatFormat(exp_bits=5, frac_bits=2), np.random.default_rng(0))


@pytest.mark.parametrize("subnormals", [True, False])
def test_decode_moves_fields_as_split_code_reads_them(subnormals):
    """decode (fields moved into a double) against split_code's (sign, significand, exponent) read exactly: every
    code of the narrow formats, 20,000 random codes and the extremes of the wide ones, signed zeros by their sign."""
    from codesign.numerics.rounding import split_code

    rng = np.random.default_rng(subnormals)
    for exp_bits, frac_bits in SHAPES + [(2, 23), (8, 1), (6, 12)]:
        fmt = FloatFormat(exp_bits=exp_bits, frac_bits=frac_bits, subnormals=subnormals)
        top = (1 << fmt.width) - 1
        codes = (np.arange(top + 1, dtype=np.uint64) if fmt.width <= 16 else
                 np.concatenate([rng.integers(0, top + 1, 20_000, dtype=np.uint64),
                                 np.arange(0, 1 << (frac_bits + 1), max(1, 1 << (frac_bits - 8)), dtype=np.uint64),
                                 np.uint64(top) - np.arange(64, dtype=np.uint64)]))
        sign, mant, exp = split_code(codes, fmt)
        exact = np.where(sign, -1.0, 1.0) * np.ldexp(mant.astype(np.float64), exp.astype(np.int32))
        assert np.array_equal(decode(codes, fmt).view(np.int64), exact.view(np.int64)), fmt
