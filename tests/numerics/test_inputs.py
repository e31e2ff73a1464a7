"""Non-real input to the quantisers is refused with a TypeError naming the dtype, never silently truncated.

Every public entry point is tried (NumPy and torch quantize, encode, decode,
msb_slice) on every format kind, against inputs ``np.asarray(x, float64)``
would once have turned into numbers: complex values (the imaginary part
dropped), strings (parsed), booleans (read as 0 and 1), objects, and float
codes (truncated to a bit pattern).
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

from codesign.numerics import FixedFormat, FloatFormat, decode, encode
from codesign.numerics import msb_slice as msb_slice_numpy
from codesign.numerics import quantize as quantize_numpy
from codesign.numerics.inputs import code_array, real_array
from codesign.train.quantize import msb_slice, quantize

FORMATS = {"fixed": FixedFormat(bits=8, frac_bits=4), "float_e5m4": FloatFormat(exp_bits=5, frac_bits=4),
           "float_e8m7": FloatFormat(exp_bits=8, frac_bits=7)}

NOT_REAL = {
    "complex128": (np.array([1.25 + 2.0j, -0.5 + 0j]), "complex"),
    "complex64": (np.array([0.75 + 0j], dtype=np.complex64), "complex"),
    "python_complex_list": ([1.5, 2j], "complex"),
    "zero_imaginary": (np.array([1.0 + 0j]), "complex"),  # refused too: the dtype says complex
    "strings": (np.array(["1.5", "2"]), "dtype <U"),
    "bytes": (np.array([b"1"]), "dtype |S"),
    "bools": (np.array([True, False]), "not numbers"),
    "objects": (np.array([1.5, None], dtype=object), "dtype object"),
    "datetimes": (np.array(["2026-01-01"], dtype="datetime64[D]"), "dtype datetime64"),
}

TORCH_NOT_REAL = {
    "complex64": (torch.tensor([1.0 + 1.0j, 2.0 + 0j]), "complex"),
    "complex128": (torch.tensor([0.5 + 0.5j], dtype=torch.complex128), "complex"),
    "bool": (torch.tensor([True, False]), "not numbers"),
}


def _calls(fmt):
    """(name, call) for every public quantiser that takes values in ``fmt``."""
    calls = [("numerics.quantize", lambda x: quantize_numpy(x, fmt)), ("train.quantize", lambda x: quantize(x, fmt)),
             ("encode", lambda x: encode(x, fmt))]
    if isinstance(fmt, FixedFormat):
        calls += [("numerics.msb_slice", lambda x: msb_slice_numpy(x, fmt, 4)),
                  ("train.msb_slice", lambda x: msb_slice(x, fmt, 4))]
    return calls


CASES = [pytest.param(fmt_name, input_name, call_name, id=f"{fmt_name}-{input_name}-{call_name}")
         for fmt_name, fmt in FORMATS.items() for input_name in NOT_REAL for call_name, _ in _calls(fmt)]


@pytest.mark.parametrize("fmt_name, input_name, call_name", CASES)
def test_non_real_numpy_input_is_a_type_error(fmt_name, input_name, call_name):
    fmt = FORMATS[fmt_name]
    value, message = NOT_REAL[input_name]
    call = dict(_calls(fmt))[call_name]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a ComplexWarning on the way would mean the value was cast first
        with pytest.raises(TypeError, match=message):
            call(value)


TORCH_CASES = [pytest.param(fmt_name, input_name, id=f"{fmt_name}-{input_name}")
               for fmt_name in FORMATS for input_name in TORCH_NOT_REAL]


@pytest.mark.parametrize("fmt_name, input_name", TORCH_CASES)
def test_non_real_tensors_are_a_type_error(fmt_name, input_name):
    fmt = FORMATS[fmt_name]
    tensor, message = TORCH_NOT_REAL[input_name]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(TypeError, match=message):
            quantize(tensor, fmt)
        with pytest.raises(TypeError, match=message):
            encode(tensor, fmt)


def test_a_complex_input_used_to_lose_its_imaginary_part():
    """The refusal guards a real hazard: the float64 cast the quantisers used keeps only the real part."""
    value = np.array([1.25 + 2.0j])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert np.asarray(value, dtype=np.float64).tolist() == [1.25]
    with pytest.raises(TypeError, match="complex"):
        real_array(value)


@pytest.mark.parametrize("fmt_name", FORMATS)
def test_real_input_of_every_numeric_dtype_is_still_taken(fmt_name):
    """The control: ints, unsigned ints, float32 and float64 (arrays, lists, scalars, tensors) quantise as before."""
    fmt = FORMATS[fmt_name]
    expected = quantize_numpy(np.array([1.0, 2.0, 3.0]), fmt)
    for value in (np.array([1, 2, 3], dtype=np.int8), np.array([1, 2, 3], dtype=np.uint16), [1, 2, 3],
                  np.array([1, 2, 3], dtype=np.float32)):
        np.testing.assert_array_equal(quantize_numpy(value, fmt), expected)
    assert quantize(torch.tensor([1.0, 2.0, 3.0]), fmt).tolist() == expected.tolist()
    assert float(quantize_numpy(1.0, fmt)) == expected[0]


@pytest.mark.parametrize("fmt_name", FORMATS)
@pytest.mark.parametrize("codes, error, message", [
    (np.array([1.5]), TypeError, "integer bit patterns, got dtype float64"),
    (np.array([3 + 0j]), TypeError, "integer bit patterns, got dtype complex128"),
    (np.array([True]), TypeError, "integer bit patterns, got dtype bool"),
    (np.array(["3"]), TypeError, "integer bit patterns"),
    ([1, -1], ValueError, "non-negative bit patterns, got -1"),
], ids=["float", "complex", "bool", "string", "negative"])
def test_decode_takes_non_negative_integer_codes_only(fmt_name, codes, error, message):
    with pytest.raises(error, match=message):
        decode(codes, FORMATS[fmt_name])


@pytest.mark.parametrize("fmt_name", FORMATS)
def test_decode_of_integer_codes_of_any_width_agrees(fmt_name):
    fmt = FORMATS[fmt_name]
    codes = encode(np.array([0.5, -1.25, 3.0]), fmt)
    for same in (codes, codes.astype(np.uint16), codes.astype(np.int64), codes.tolist()):
        np.testing.assert_array_equal(decode(same, fmt), decode(codes, fmt))


def test_a_ragged_input_is_named_a_value_error():
    with pytest.raises(ValueError, match="not a rectangular array of numbers"):
        real_array([[1.0], [1.0, 2.0]])
    with pytest.raises(ValueError, match="not a rectangular array of numbers"):
        code_array([[1], [1, 2]])
