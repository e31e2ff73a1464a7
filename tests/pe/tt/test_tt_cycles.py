"""Stream words of the TT PEs (codesign.pe.tt.cycles.stream_words) against the golden word streams themselves.

The per-phase cycle formulas are checked by hand in test_tt_pe1/2/3.py and
against the RTL's counts in tests/pe/test_stream_rtl.py.
"""

from __future__ import annotations

import dataclasses

import pytest

from codesign.pe.tt.contract import STREAM_BITS_CHOICES, stream_header
from codesign.pe.tt.cycles import stream_words, transaction_cycles
from codesign.pe.tt.spec import Tt1Spec, Tt2Spec, Tt3Spec
from codesign.pe.tt.stimulus import TtStimulusOptions, build

SPECS = [Tt1Spec(), Tt1Spec(lanes=4, rows=3, a_bits=16, b_bits=16, acc_bits=16, max_j=5, max_k=9, max_l=7),
         Tt2Spec(), Tt2Spec(lanes=4, rows=3, a_bits=16, b_bits=16, acc_bits=16, max_j=5, max_k=9, max_l=7),
         Tt3Spec(), Tt3Spec(lanes=4, a_bits=4, b_bits=8, max_j=9)]


@pytest.mark.parametrize("stream_bits", STREAM_BITS_CHOICES)
@pytest.mark.parametrize("spec", SPECS, ids=lambda spec: type(spec).__name__ + f"_l{spec.lanes}")
def test_stream_words_are_the_lengths_of_the_golden_streams(spec, stream_bits):
    """At every width: the words of the golden streams (32-bit parts, ``parts`` to a word) are the model's."""
    spec = dataclasses.replace(spec, stream_bits=stream_bits)
    transactions = build(spec, TtStimulusOptions(min_macs=2_000, min_contractions=40, seed=7))
    refused = 0
    for words_in, words_out in transactions:
        moved_in, moved_out = stream_words(spec, stream_header(words_in, stream_bits))
        assert (moved_in * spec.parts, moved_out * spec.parts) == (len(words_in), len(words_out))
        refused += int(words_out[0]) != 0
    assert refused > 0 and len(transactions) - refused >= 40  # both kinds were checked


@pytest.mark.parametrize("stream_bits", STREAM_BITS_CHOICES)
@pytest.mark.parametrize("spec", SPECS[::2], ids=["tt1", "tt2", "tt3"])
def test_no_phase_is_shorter_than_its_stream(spec, stream_bits):
    spec = dataclasses.replace(spec, stream_bits=stream_bits)
    for words_in, words_out in build(spec, TtStimulusOptions(min_macs=2_000, seed=8)):
        cycles = transaction_cycles(spec, stream_header(words_in, stream_bits))
        moved_in, moved_out = stream_words(spec, stream_header(words_in, stream_bits))
        assert cycles.load == moved_in - 1 and cycles.drain >= moved_out - 1
