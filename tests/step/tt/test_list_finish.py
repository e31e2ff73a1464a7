"""The host's part of a TT list step (codesign.step.tt.list_finish) on its own; the whole step's equality with
the per-call step is tests/step/tt/test_step_lists.py's."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from codesign.contracts.calls import RECORD, RECORD_WORDS
from codesign.step.tt.list_finish import _record_sums
from codesign.step.tt.list_reads import record_sums_of


def _reads(stats, record_words, record_starts, counts) -> SimpleNamespace:
    """The record fields of a :class:`~codesign.step.tt.list_reads.BackwardReads`, derived as it derives them."""
    sum_words, summed, sum_starts = record_sums_of(record_words, record_starts)
    return SimpleNamespace(stats=stats, record_words=record_words, record_starts=record_starts, counts=counts,
                           sum_words=sum_words, summed=summed, sum_starts=sum_starts)


def test_record_sums_join_both_halves_per_tracker_and_give_a_tracker_without_records_zero():
    """Sums of |acc| over 64-bit records (low and high words, carries across the halves exact), one tracker per
    group of records; a tracker with no record (in the middle, and last) sums to 0, not to its neighbour's."""
    totals = [(1 << 32) - 1, 5, (7 << 32) + 3, 1 << 40, 9]
    arena = np.zeros(RECORD_WORDS * len(totals) + 4, np.uint32)
    words = np.arange(len(totals), dtype=np.int64) * RECORD_WORDS
    for word, total in zip(words, totals):
        arena[word + RECORD["sum_abs_lo"]], arena[word + RECORD["sum_abs_hi"]] = total & 0xFFFFFFFF, total >> 32
    stats = (("act_frac_bits", 1), ("grad_frac_bits", 0), ("core_grad_frac_bits", 0), ("core_grad_frac_bits", 1),
             ("core_grad_frac_bits", 2))
    reads = _reads(stats, words, np.array([0, 2, 2, 4, 5]), (10, 0, 20, 30, 0))
    assert _record_sums(reads, arena) == {stats[0]: (totals[0] + totals[1], 10), stats[1]: (0, 0),
                                          stats[2]: (totals[2] + totals[3], 20), stats[3]: (totals[4], 30),
                                          stats[4]: (0, 0)}
    none = _reads(stats[:1], np.zeros(0, np.int64), np.array([0]), (0,))
    assert _record_sums(none, arena) == {stats[0]: (0, 0)}
