"""The TT PEs' stream width (``stream_bits``: 32, 64, 128): spec checks, the word counts step models use, the word
layout worked by hand, refusals above bit 31, and the accelerator shell around a wide PE (g++ C-sim).

The three levels (golden, C-sim, RTL) of the wide builds run in tests/pe/test_levels.py (the grid has 64- and
128-bit points) and tests/pe/test_stream_rtl.py (cycle counts against the model at every width).
"""

from __future__ import annotations

import dataclasses
import shutil

import numpy as np
import pytest

from codesign.shell import ip as accel
from codesign.hw.target import BuildTarget
from codesign.pe import get_pe
from codesign.pe.tt import contract, golden
from codesign.pe.tt.cycles import stream_words
from codesign.pe.tt.spec import Tt1Spec, Tt2Spec, Tt3Spec
from codesign.pe.tt.stimulus import TtStimulusOptions


@pytest.mark.parametrize("spec_class", [Tt1Spec, Tt2Spec, Tt3Spec])
@pytest.mark.parametrize("bad", [0, 16, 48, 96, 256, 32.0, True, "32"])
def test_spec_refuses_other_widths_by_name(spec_class, bad):
    with pytest.raises(ValueError, match="stream_bits"):
        spec_class(stream_bits=bad)


def test_default_width_is_32_and_named_in_the_build_parameters():
    assert Tt1Spec().stream_bits == Tt2Spec().stream_bits == Tt3Spec().stream_bits == 32
    assert get_pe("tt1").rtl_parameters(Tt1Spec(stream_bits=128))["STREAM_BITS"] == 128
    assert get_pe("tt3").rtl_parameters(Tt3Spec(stream_bits=64))["STREAM_BITS"] == 64
    assert get_pe("tt2").bench_environment(Tt2Spec(stream_bits=128), "v", "s", 1)["STREAM_WORD_PARTS"] == "4"


def test_word_counts_by_hand():
    # 16 lanes of 4-bit slots: 64 bits, so 2 words at 32, 1 at 64 and at 128 (a chunk starts a new word)
    assert [contract.chunk_words(16, 4, bits) for bits in (32, 64, 128)] == [2, 1, 1]
    # 16 lanes of 16-bit slots: 256 bits
    assert [contract.chunk_words(16, 16, bits) for bits in (32, 64, 128)] == [8, 4, 2]
    assert contract.row_words(33, 16, 8, 128) == 3 and contract.row_words(33, 16, 8) == 12
    assert [contract.result_stream_words(9, bits) for bits in (32, 64, 128)] == [9, 5, 3]
    assert contract.words_at(9, 32, 128) == 3 and contract.words_at(100, 4, 64) == 7
    with pytest.raises(ValueError, match="stream_bits"):
        contract.row_words(4, 4, 8, 48)


def test_pe3_wide_transaction_by_hand():
    """PE3 at 64 bits, 2 lanes of 16-bit slots (32 bits a chunk, half a word): B = (-32768, 7, 100), A = (3, -1)."""
    spec = Tt3Spec(lanes=2, a_bits=8, b_bits=16, max_j=3, stream_bits=64)
    words = golden.words(spec, np.array([3, -1]), np.array([-32768, 7, 100]))
    assert words.tolist() == [2 | 3 << 8, 0, 0x00078000, 0, 0x0064, 0, 0xFF03, 0]
    z = [(x * y) & 0xFFFFFFFF for x in (3, -1) for y in (-32768, 7, 100)]
    assert golden.output(spec, np.array([3, -1]), np.array([-32768, 7, 100])).tolist() == [0, 0] + z
    assert stream_words(spec, 2 | 3 << 8) == (4, 4)


@pytest.mark.parametrize("pe_name, spec", [("tt1", Tt1Spec(stream_bits=128)), ("tt2", Tt2Spec(stream_bits=64)),
                                           ("tt3", Tt3Spec(stream_bits=128))])
def test_set_bit_above_the_fields_is_refused(pe_name, spec):
    pe = get_pe(pe_name)
    header = contract.header_word(1, 1) if pe_name == "tt3" else contract.header_word(1, 1, 1, 1)
    assert golden.status(spec, header) == contract.STATUS_OK
    for bit in range(32, spec.stream_bits):
        word = header | 1 << bit
        assert golden.status(spec, word) == contract.STATUS_BAD_HEADER
        parts = [(word >> (32 * p)) & 0xFFFFFFFF for p in range(spec.parts)]
        assert pe.reference_output(spec, np.array(parts, dtype=np.uint64)).tolist() == [1] + [0] * (spec.parts - 1)


def test_stimulus_at_32_bits_has_no_wide_refusals_and_wide_stimulus_has_them():
    pe = get_pe("tt1")
    narrow = pe.build_stimulus(Tt1Spec(), TtStimulusOptions())
    wide = pe.build_stimulus(Tt1Spec(stream_bits=128), TtStimulusOptions())
    assert len(wide) == len(narrow) + 4  # bits 32, 64, 96 and 127 set in a valid header
    assert all(len(words_in) % 4 == 0 and len(words_out) % 4 == 0 for words_in, words_out in wide)


@pytest.mark.skipif(shutil.which("g++") is None, reason="no g++")
@pytest.mark.parametrize("pe_name, spec", [  # 6 s each: make test's only TT C++ at wide streams, but TT3's
    ("tt1", Tt1Spec(lanes=4, rows=3, a_bits=16, b_bits=16, acc_bits=16, max_j=5, max_k=9, max_l=7, stream_bits=128)),
    ("tt2", Tt2Spec(lanes=4, rows=3, a_bits=16, b_bits=16, acc_bits=16, max_j=5, max_k=9, max_l=7, stream_bits=64)),
    pytest.param("tt3", Tt3Spec(lanes=4, a_bits=4, b_bits=8, max_j=9, stream_bits=128), marks=pytest.mark.slow),
])
def test_accel_shell_around_a_wide_pe_matches_golden(tmp_path, pe_name, spec):
    """The HLS shell reads 32-bit memory words into wide stream words and back (C-sim, every transaction in one
    call); its m_axi ports are widened to the stream word, and so are the RTL shell's (tests/shell/test_ip_rtl.py runs it)."""
    pe = get_pe(pe_name)
    stimulus = pe.build_stimulus(spec, TtStimulusOptions(min_macs=2000))
    accel.render_accel_project(pe, spec, f"{pe_name}_0", BuildTarget(), tmp_path / "prj", stimulus=stimulus)
    top = (tmp_path / "prj" / f"{pe_name}_0_accel.cpp").read_text()
    assert top.count(f"max_widen_bitwidth = {spec.stream_bits}") == 3  # in, out and calls (in's port)
    vectors = pe.write_vectors(spec, stimulus, tmp_path / "vectors.txt")
    result = accel.run_accel_csim(tmp_path / "prj", vectors, tmp_path / "build")
    assert (result.vectors, result.mismatches) == (len(stimulus), 0)
    broken = [(words_in, words_out.copy()) for words_in, words_out in stimulus]
    broken[0][1][-1] ^= np.uint64(1 << 31)
    vectors = pe.write_vectors(spec, broken, tmp_path / "broken.txt")
    assert accel.run_accel_csim(tmp_path / "prj", vectors, tmp_path / "build").mismatches == 1
    wrapper = next(path for path in accel.render_accel_rtl(pe, spec, tmp_path / "rtl") if path.name == "accel_top.v")
    assert f".DATA_BITS({spec.stream_bits})" in wrapper.read_text()
    assert "max_widen_bitwidth" not in accel.m_axi_options(pe.stream_context(dataclasses.replace(spec,
                                                                                                   stream_bits=32)))


def _fields_by_hand(values: np.ndarray, lanes: int, bits: int, stream_bits: int) -> list[int]:
    """The words of docs/tt_pe.md's chunk rule, one field at a time in Python integers."""
    slot, length = contract.slot_bits(bits), values.shape[-1]
    parts = contract.chunk_words(lanes, bits, stream_bits) * stream_bits // 32
    words = []
    for row in values.reshape(int(np.prod(values.shape[:-1])), length).tolist():
        for chunk in range(contract.chunks(length, lanes)):
            bits_of_chunk = 0
            for lane, k in enumerate(range(chunk * lanes, min(length, (chunk + 1) * lanes))):
                bits_of_chunk |= (row[k] & ((1 << bits) - 1)) << (lane * slot)
            words += [(bits_of_chunk >> (32 * part)) & 0xFFFFFFFF for part in range(parts)]
    return words


@pytest.mark.parametrize("stream_bits", [32, 64, 128])
@pytest.mark.parametrize("lanes", [1, 2, 4, 8, 16])
def test_host_packing_lays_every_field_as_the_contract_says(lanes, stream_bits):
    """The host's packing (no noise: what a board writes) against the chunk rule field by field, at every operand
    width, with rows that end inside a chunk, both ends of the code range, and strided (cut) operands."""
    rng = np.random.default_rng(lanes * stream_bits)
    for bits in range(2, 17):
        low, high = contract.code_range(bits)
        for shape in [(1, 1), (3, 5), (2, 4, 17), (2, 33), (4, 0)]:
            values = rng.integers(low, high + 1, size=shape)
            if values.size:
                values.flat[0], values.flat[-1] = low, high
            words = contract.pack_rows(values, lanes, bits, None, stream_bits)
            assert words.dtype == np.uint32 and words.tolist() == _fields_by_hand(values, lanes, bits, stream_bits)
        wide = rng.integers(low, high + 1, size=(6, 40))
        cut = wide[1:5:2, 3:37]  # a call's slice of a larger operand: not contiguous
        assert contract.pack_rows(cut, lanes, bits, None, stream_bits).tolist() == \
            _fields_by_hand(np.ascontiguousarray(cut), lanes, bits, stream_bits)
