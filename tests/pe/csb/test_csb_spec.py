"""CsbSpec: ranges of every field, derived sizes, and the metadata it hands to vector files."""

from __future__ import annotations

import dataclasses

import pytest

from codesign.pe.csb.spec import CsbSpec

FIELDS = ("block_rows", "block_cols", "kernel", "out_h", "out_w", "batch", "parallel", "acc_bits", "max_stride")


def test_defaults_are_a_valid_fc_block():
    spec = CsbSpec()
    assert (spec.block_rows, spec.block_cols, spec.kernel, spec.out_h, spec.out_w) == (16, 16, 1, 1, 1)
    assert spec.acc_bits == 32 and spec.data_bits == 8 and spec.buffer_bits == 24


def test_derived_sizes():
    spec = CsbSpec(block_rows=3, block_cols=5, kernel=3, out_h=4, out_w=6, batch=2, parallel=4, acc_bits=20)
    assert (spec.in_h, spec.in_w, spec.kk) == (6, 8, 9)
    assert (spec.out_pos, spec.in_pos, spec.capacity) == (24, 48, 15)
    assert (spec.acc_min, spec.acc_max) == (-(1 << 19), (1 << 19) - 1)
    assert spec.max_stride == 1 and spec.in_tile(1) == (6, 8)
    with pytest.raises(ValueError, match="runs strides 1..1"):
        spec.in_tile(2)
    wide = CsbSpec(**{**spec.to_dict(), "max_stride": 2})
    assert (wide.in_tile(1), wide.in_tile(2), wide.in_pos_at(2)) == ((6, 8), (9, 13), 117)  # 2*(out - 1) + k
    for bad in (0, 3, True):
        with pytest.raises(ValueError, match="stride"):
            wide.in_tile(bad)


def test_to_dict_holds_exactly_the_nine_parameters():
    spec = CsbSpec(kernel=2, out_h=3, out_w=3)
    assert tuple(spec.to_dict()) == FIELDS
    assert CsbSpec(**spec.to_dict()) == spec


def test_stream_bits_are_32_64_or_128_with_lanes_in_multiples_of_the_parts():
    """A beat of sums is one position's lanes; files written for 32-bit builds read as before."""
    wide = CsbSpec(batch=4, stream_bits=128)
    assert (wide.parts, CsbSpec().parts, CsbSpec(stream_bits=64).parts) == (4, 1, 2)
    assert wide.to_dict() == {**CsbSpec(batch=4).to_dict(), "stream_bits": 128}
    assert CsbSpec(**wide.to_dict()) == wide and "stream_bits" not in CsbSpec().to_dict()
    for bad in (16, 96, 256, 0):
        with pytest.raises(ValueError, match="stream_bits"):
            CsbSpec(stream_bits=bad)
    for bad in (64.0, True, "64", None):
        with pytest.raises(TypeError, match="stream_bits"):
            CsbSpec(stream_bits=bad)
    for batch, bits in ((2, 128), (6, 128), (3, 64)):
        with pytest.raises(ValueError, match="multiples of its"):
            CsbSpec(batch=batch, stream_bits=bits)
    CsbSpec(batch=6, stream_bits=64)


def test_packed_is_a_flag_for_an_even_batch_and_in_the_dict_only_when_set():
    """Two lanes a DSP slice: an even batch only; files written for unpacked builds read as before."""
    packed = CsbSpec(batch=4, packed=True)
    assert packed.to_dict() == {**CsbSpec(batch=4).to_dict(), "packed": True}
    assert CsbSpec(**packed.to_dict()) == packed and CsbSpec(**CsbSpec().to_dict()).packed is False
    for odd in (1, 3, 15):
        with pytest.raises(ValueError, match="even batch"):
            CsbSpec(batch=odd, packed=True)
    for bad in (1, 0, "true", None):
        with pytest.raises(TypeError, match="packed"):
            CsbSpec(batch=4, packed=bad)


@pytest.mark.parametrize("name, low, high", [("block_rows", 1, 16), ("block_cols", 1, 16), ("kernel", 1, 7),
                                             ("batch", 1, 16), ("parallel", 1, 8), ("acc_bits", 16, 32),
                                             ("max_stride", 1, 2)])
def test_every_field_is_range_checked(name, low, high):
    CsbSpec(**{name: low})
    CsbSpec(**{name: high})
    for bad in (low - 1, high + 1):
        with pytest.raises(ValueError, match=name):
            CsbSpec(**{name: bad})


@pytest.mark.parametrize("name", FIELDS)
def test_non_int_fields_are_refused(name):
    for bad in (2.0, True, "4", None):
        with pytest.raises(TypeError, match=name):
            CsbSpec(**{name: bad})


def test_tile_must_fit_the_channel_buffer():
    CsbSpec(out_h=32, out_w=32)  # 1024 input positions with k = 1
    CsbSpec(kernel=3, out_h=30, out_w=30)  # 32 x 32
    with pytest.raises(ValueError, match="channel buffer"):
        CsbSpec(kernel=3, out_h=31, out_w=30)
    CsbSpec(kernel=3, out_h=15, out_w=15, max_stride=2)  # stride 2: 31 x 31
    with pytest.raises(ValueError, match="stride 2.*channel buffer"):
        CsbSpec(kernel=3, out_h=16, out_w=16, max_stride=2)
    for name in ("out_h", "out_w"):
        with pytest.raises(ValueError, match=name):
            CsbSpec(**{name: 0})


def test_frozen_and_keyword_only():
    spec = CsbSpec()
    with pytest.raises(dataclasses.FrozenInstanceError):
        spec.batch = 4
    with pytest.raises(TypeError):
        CsbSpec(16, 16)
