"""FpmacArraySpec: defaults, derived sizes, and refusal of every out-of-range field by name."""

from __future__ import annotations

import dataclasses

import pytest

from codesign.pe.fpmac_array.spec import FpmacArraySpec


def test_defaults_and_derived_sizes():
    spec = FpmacArraySpec()
    assert (spec.exp_bits, spec.max_fb, spec.rounding, spec.rows, spec.cols) == (8, 23, "nearest_even", 4, 4)
    assert (spec.width, spec.macs, spec.tile_rows, spec.tile_cols, spec.rounding_code) == (32, 16, 8, 8, 0)
    odd = FpmacArraySpec(rows=3, cols=5, max_m=7, max_n=11, max_k=2, rounding="toward_zero")
    assert (odd.tile_rows, odd.tile_cols, odd.rounding_code) == (3, 3, 2)


@pytest.mark.parametrize("field, value", [
    ("exp_bits", 1), ("exp_bits", 9), ("max_fb", 0), ("max_fb", 24), ("rows", 0), ("rows", 17), ("cols", 0),
    ("cols", 17), ("max_m", 0), ("max_m", 128), ("max_n", 0), ("max_n", 256), ("max_k", 0), ("max_k", 256),
])
def test_refuses_out_of_range_fields_by_name(field, value):
    with pytest.raises(ValueError, match=field):
        FpmacArraySpec(**{field: value})


@pytest.mark.parametrize("rounding", ["stochastic", "nearest", ""])
def test_refuses_roundings_the_mac_does_not_implement(rounding):
    with pytest.raises(ValueError, match="rounding"):
        FpmacArraySpec(rounding=rounding)


def test_is_frozen_keyword_only_and_typed():
    with pytest.raises(TypeError):
        FpmacArraySpec(8)  # the fields are keyword-only
    with pytest.raises(TypeError, match="rows"):
        FpmacArraySpec(rows=2.0)
    with pytest.raises(TypeError, match="max_k"):
        FpmacArraySpec(max_k=True)
    with pytest.raises(dataclasses.FrozenInstanceError):
        FpmacArraySpec().rows = 2
