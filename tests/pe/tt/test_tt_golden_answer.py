"""The TT PEs' vectorised golden answer from raw input words (what the golden list runner asks of a PE for every
call of a step) against the plain-loop reference, on every PE's stimulus: directed headers (refused, at the
buffers' limits, wider stream words) and random operands whose ignored bits are noise."""

from __future__ import annotations

import numpy as np
import pytest

from codesign.pe import get_pe
from codesign.pe.tt import golden
from codesign.pe.tt.contract import pack_rows, unpack_rows
from codesign.pe.tt.spec import Tt2Spec
from codesign.pe.tt.stimulus import TtStimulusOptions
from codesign.pe.tt.stimulus import build as build_stimulus

CASES = [(pe, case) for pe in ("tt1", "tt2", "tt3") for case in get_pe(pe).verification_grid() if not case.long]


@pytest.mark.parametrize("pe, case", CASES, ids=[f"{pe}-{case.id}" for pe, case in CASES])
def test_the_golden_answer_is_the_references_word_for_word(pe, case):
    model = get_pe(pe)
    transactions = build_stimulus(case.spec, TtStimulusOptions(min_macs=2_000))
    for words_in, _ in transactions:
        assert model.golden_output(case.spec, words_in).tolist() == model.reference_output(case.spec, words_in).tolist()
    assert any(int(out[0]) == 0 for _, out in transactions) and any(int(out[0]) != 0 for _, out in transactions)


@pytest.mark.parametrize("bits", [3, 4, 5, 8, 12, 16])
@pytest.mark.parametrize("stream_bits", [32, 64, 128])
def test_rows_unpack_to_what_was_packed_whatever_the_noise(bits, stream_bits):
    rng = np.random.default_rng(bits * stream_bits)
    low, high = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    values = rng.integers(low, high + 1, (7, 11))
    values[0, :2] = low, high
    for lanes in (1, 3, 8):
        for noise in (None, rng):
            words = pack_rows(values, lanes, bits, noise, stream_bits)
            assert np.array_equal(unpack_rows(words, 7, 11, lanes, bits, stream_bits), values)
    with pytest.raises(ValueError, match="left"):
        unpack_rows(words[:-1], 7, 11, lanes, bits, stream_bits)


def test_a_transaction_of_the_wrong_length_is_refused_by_name():
    spec = Tt2Spec(max_j=4, max_k=8, max_l=4)
    words = golden.words(spec, np.ones((2, 3, 5), int), np.ones((2, 3), int))
    assert golden.answer(spec, words).tolist() == golden.output(spec, np.ones((2, 3, 5), int), np.ones((2, 3), int)).tolist()
    for wrong in (words[:-1], np.concatenate([words, [0]])):
        with pytest.raises(ValueError, match="operand parts"):
            golden.answer(spec, wrong)
