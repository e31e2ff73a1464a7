"""StreamPE: how a stream bench's summary becomes a verification outcome."""

from __future__ import annotations

from pathlib import Path

from codesign.pe import get_pe


def summary(**overrides) -> dict:
    base = {"transactions": 5, "mismatches": 0, "first_mismatches": [], "cycles": [10, 11, 12, 13, 14],
            "missing_words": 0, "extra_words": 0, "timed_out": False}
    return {**base, **overrides}


def test_clean_summary_is_a_pass():
    outcome = get_pe("csb").rtl_outcome(None, summary(), Path("unused"))
    assert (outcome.vectors, outcome.mismatches, outcome.cycles) == (5, 0, (10, 11, 12, 13, 14))


def test_missing_and_extra_words_count_as_mismatches():
    outcome = get_pe("csb").rtl_outcome(None, summary(missing_words=2, extra_words=1, timed_out=True,
                                                      first_mismatches=["txn 3 word 0"]), Path("unused"))
    assert outcome.mismatches == 3
    assert "timed out" in outcome.first_mismatches[0] and outcome.first_mismatches[-1] == "txn 3 word 0"
