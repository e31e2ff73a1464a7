"""Stream words of the TT PEs (codesign.pe.tt.cycles.stream_words) against the golden word streams themselves.

The per-phase cycle formulas are checked by hand in test_tt_pe1/2/3.py and
against the RTL's counts in tests/rtl/test_tt_rtl.py.
"""

from __future__ import annotations

import pytest

from codesign.pe.tt.cycles import stream_words, transaction_cycles
from codesign.pe.tt.spec import Tt1Spec, Tt2Spec, Tt3Spec
from codesign.pe.tt.stimulus import TtStimulusOptions, build

SPECS = [Tt1Spec(), Tt1Spec(lanes=4, rows=3, a_bits=16, b_bits=16, acc_bits=16, max_j=5, max_k=9, max_l=7),
         Tt2Spec(), Tt2Spec(lanes=4, rows=3, a_bits=16, b_bits=16, acc_bits=16, max_j=5, max_k=9, max_l=7),
         Tt3Spec(), Tt3Spec(lanes=4, a_bits=4, b_bits=8, max_j=9)]


@pytest.mark.parametrize("spec", SPECS, ids=lambda spec: type(spec).__name__ + f"_l{spec.lanes}")
def test_stream_words_are_the_lengths_of_the_golden_streams(spec):
    transactions = build(spec, TtStimulusOptions(min_macs=2_000, min_contractions=40, seed=7))
    refused = 0
    for words_in, words_out in transactions:
        assert stream_words(spec, int(words_in[0])) == (len(words_in), len(words_out))
        refused += len(words_out) == 1
    assert refused > 0 and len(transactions) - refused >= 40  # both kinds were checked


@pytest.mark.parametrize("spec", SPECS[::2], ids=["tt1", "tt2", "tt3"])
def test_no_phase_is_shorter_than_its_stream(spec):
    for words_in, words_out in build(spec, TtStimulusOptions(min_macs=2_000, seed=8)):
        cycles = transaction_cycles(spec, int(words_in[0]))
        moved_in, moved_out = stream_words(spec, int(words_in[0]))
        assert cycles.load == moved_in - 1 and cycles.drain >= moved_out - 1
