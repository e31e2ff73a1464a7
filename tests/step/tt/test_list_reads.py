"""What the host reads after a TT layer step's backward lists (codesign.step.tt.list_reads), split at the last
phase: the host reads the first part while the last phase computes, so the last phase must write none of it."""

from __future__ import annotations

import numpy as np
import pytest

from codesign.contracts.calls import RECORD_WORDS
from codesign.pe.tt.spec import Tt1Spec, Tt2Spec
from codesign.step.tt.step_lists import Fracs, step_lists

SIXTEEN = dict(a_bits=16, b_bits=16)
SMALL = dict(spec1=Tt1Spec(lanes=4, rows=3, max_j=5, max_k=8, max_l=17, **SIXTEEN),
             spec2=Tt2Spec(lanes=4, rows=3, max_j=8, max_k=68, max_l=6, **SIXTEEN))  # tiled, sums chained
CORES = {"three": [(1, 7, 3, 2), (2, 2, 5, 3), (3, 3, 17, 1)], "one": [(1, 5, 8, 1)]}


def _lists(cores, need_grad_x: bool, copies):
    d = len(cores)
    fracs = Fracs(act=(5,) * d, grad=(9,) * d, core_grad=(6,) * d, core=(2,) * d, act_bits=8, grad_bits=16,
                  core_bits=4)
    n, m = np.prod([c[2] for c in cores]), np.prod([c[1] for c in cores])
    return step_lists(np.zeros((9, n), np.int64), [np.zeros(c, np.int64) for c in cores], np.zeros((9, m), np.int64),
                      fracs, **SMALL, need_grad_x=need_grad_x, copies=copies, share_products=1)


def _words(ranges) -> set:
    return {int(word) for start, words in ranges for word in range(start, start + words)}


@pytest.mark.parametrize("name", list(CORES))
@pytest.mark.parametrize("need_grad_x", [False, True])
@pytest.mark.parametrize("copies", [(1, 1), (2, 3)])
def test_the_reads_split_at_the_last_phase_which_writes_all_of_the_second_part_and_none_of_the_first(
        name, need_grad_x, copies):
    lists = _lists(CORES[name], need_grad_x, copies)
    every, early, late = lists.backward_reads
    last = [call for _, calls in lists.phases[-1] for call in calls]
    written = {int(w) for call in last for w in np.concatenate([call.out.word_indices(),
                                                                call.record // 4 + np.arange(RECORD_WORDS)])}
    # the last phase is core 0's gradient and the input gradient where one is taken (a one-core layer's input
    # gradient is its only one, taken either way): nothing of the first part is among its words, everything of
    # the second is, whole records included
    assert late.cores == (0,) and late.grad_x == (need_grad_x or name == "one") and not early.grad_x
    assert early.cores == tuple(range(1, len(CORES[name])))
    assert _words(early.ranges).isdisjoint(written) and _words(late.ranges) <= written
    # together they are every read, each once
    assert sorted(early.ranges + late.ranges) == sorted(every.ranges)
    assert len(set(early.ranges) | set(late.ranges)) == len(every.ranges)
    assert set(early.stats).isdisjoint(late.stats) and set(early.stats) | set(late.stats) == set(every.stats)
    assert sorted(np.concatenate([early.core_slots, late.core_slots])) == sorted(every.core_slots)
    assert every.ranges == tuple(lists.read_ranges(forward=False))
    # a tracker's records are its results' count of sending calls, in the part that holds them
    for part in (early, late):
        assert len(part.record_starts) == len(part.stats) == len(part.counts)
        assert all(count > 0 for count in part.counts)
