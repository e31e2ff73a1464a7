import pytest

from codesign.numerics import FixedFormat, FloatFormat


def test_float_format_derived_values():
    fp32 = FloatFormat(exp_bits=8, frac_bits=23)
    assert (fp32.width, fp32.bias, fp32.emin, fp32.emax) == (32, 127, -126, 128)
    assert fp32.max_value == (2 - 2**-23) * 2.0**128
    assert fp32.min_subnormal == 2.0**-149
    small = FloatFormat(exp_bits=2, frac_bits=1)
    assert (small.width, small.bias, small.emin, small.emax, small.max_value) == (4, 1, 0, 2, 6.0)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"exp_bits": 1}, "exp_bits=1 is out of range"),
        ({"exp_bits": 9}, "exp_bits=9 is out of range"),
        ({"frac_bits": 0}, "frac_bits=0 is out of range"),
        ({"frac_bits": 24}, "frac_bits=24 is out of range"),
        ({"rounding": "nearest"}, "rounding='nearest' is not one of"),
    ],
)
def test_float_format_rejects_out_of_range(kwargs, message):
    with pytest.raises(ValueError, match=message):
        FloatFormat(**kwargs)


def test_formats_are_frozen_and_keyword_only():
    fmt = FloatFormat(frac_bits=10)
    with pytest.raises(AttributeError):
        fmt.frac_bits = 11
    with pytest.raises(TypeError):
        FloatFormat(8, 10)
    with pytest.raises(TypeError, match="must be an int"):
        FloatFormat(frac_bits=10.0)
    with pytest.raises(TypeError, match="must be a bool"):
        FloatFormat(saturate=1)


def test_fixed_format_ranges_and_validation():
    fmt = FixedFormat(bits=8, frac_bits=4)
    assert (fmt.min_code, fmt.max_code, fmt.min_value, fmt.max_value) == (-128, 127, -8.0, 127 / 16)
    unsigned = FixedFormat(bits=8, frac_bits=0, signed=False)
    assert (unsigned.min_code, unsigned.max_code) == (0, 255)
    with pytest.raises(ValueError, match="bits=1 is out of range"):
        FixedFormat(bits=1, frac_bits=0)
    with pytest.raises(ValueError, match="bits=33 is out of range"):
        FixedFormat(bits=33, frac_bits=0)
    with pytest.raises(ValueError, match="frac_bits=65 is out of range"):
        FixedFormat(bits=8, frac_bits=65)
