"""What the host reads of a TT layer step's lists after its backward phases, and where: the core gradients' codes,
the records whose sums move the tracked scales, the input gradient. Split by phase, so the host can read what
the earlier phases wrote while the last one computes (its own reads then wait only for that phase's words)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Collection, Dict, List, Tuple

import numpy as np

from codesign.contracts.calls import RECORD, RECORD_WORDS, Call


@dataclass(frozen=True)
class BackwardReads:
    """The reads of some of a step's backward contractions, worked out once per layout (no rounding shift moves
    them; the lists :func:`~codesign.step.tt.step_lists.reshift` makes share them).

    ``cores``: the cores whose gradients, in order, and ``core_slots`` where their codes are (indices into the
    arena viewed as int16, each core's in its layout ``(a, m, n, c)``, core after core: one gather);
    ``stats``: the trackers whose records, ``record_words`` every such record's first word (a tracker's one
    after the other), ``record_starts`` the index of each tracker's first among them, ``counts`` each
    tracker's results (the calls that send: a held call's sum goes on in the next); ``grad_x``: whether the
    input gradient is among them; ``ranges``: the words ``(start, words)`` a board invalidates before.
    ``sum_words``: each record's two sum words (low, high), and ``summed``/``sum_starts`` which trackers have
    records and where each one's first lies among them: what one gather and one ``reduceat`` take (a tracker
    without a record sums to 0)."""

    cores: Tuple[int, ...]
    core_slots: np.ndarray = field(repr=False)
    stats: Tuple[Tuple[str, int], ...]
    record_words: np.ndarray = field(repr=False)
    record_starts: np.ndarray = field(repr=False)
    counts: Tuple[int, ...]
    grad_x: bool
    ranges: Tuple[Tuple[int, int], ...]
    sum_words: np.ndarray = field(repr=False)
    summed: np.ndarray = field(repr=False)
    sum_starts: np.ndarray = field(repr=False)


def backward_reads(lists, names: Collection[str]) -> BackwardReads:
    """The reads of the backward contractions of ``lists`` (a :class:`~codesign.step.tt.step_lists.StepLists`)
    named in ``names``: a core's gradient is read with contraction ``"core gradient k"``, the input gradient
    with ``"input gradient 0"``, a tracker's records with the contraction whose results move it."""
    d = len(lists.cores)
    cores = tuple(k for k in range(d) if f"core gradient {k}" in names)
    slots = [_core_grad_slots(lists, k) for k in cores]
    # per tracker, every call that sends its results (a tracker's results may come from two PEs' contractions)
    records: Dict[Tuple[str, int], List[Call]] = {}
    for name, (item, calls) in lists.contractions.items():
        if item.stat is not None and name in names:
            records.setdefault(item.stat, []).extend(call for call in calls if not call.acc_hold)
    stats, words, starts, counts = [], [], [], []
    for stat, sent in records.items():
        stats.append(stat)
        starts.append(len(words))
        words += [call.record // 4 for call in sent]
        counts.append(sum(call.count for call in sent))
    grad_x = "grad_x" in lists.outputs and "input gradient 0" in names
    ranges = []
    if grad_x:
        offset, per_value = lists.outputs["grad_x"]
        ranges.append((offset // 4, per_value * lists.batch * math.prod(s[2] for s in lists.cores)))
    for k in cores:
        offset, cfg = lists.codes[f"core_grad {k}"]
        ranges.append((offset // 4, cfg.words_out(math.prod(lists.cores[k]))))
    ranges += [(word, RECORD_WORDS) for word in words]
    record_words, record_starts = np.array(words, np.int64), np.array(starts, np.int64)
    arrays = read_only(np.concatenate(slots) if slots else np.zeros(0, np.int64), record_words, record_starts,
                       *record_sums_of(record_words, record_starts))  # shared by the lists reshift makes of these
    return BackwardReads(cores=cores, core_slots=arrays[0], stats=tuple(stats), record_words=arrays[1],
                         record_starts=arrays[2], counts=tuple(counts), grad_x=grad_x, ranges=tuple(ranges),
                         sum_words=arrays[3], summed=arrays[4], sum_starts=arrays[5])


def record_sums_of(record_words: np.ndarray, record_starts: np.ndarray) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:class:`BackwardReads`' ``sum_words``, ``summed`` and ``sum_starts`` of its records (``record_words``) and
    where each tracker's first lies among them (``record_starts``)."""
    summed = np.diff(np.append(record_starts, record_words.size)) > 0  # reduceat gives an empty group its next
    return (np.asarray(record_words)[:, None] + np.array([RECORD["sum_abs_lo"], RECORD["sum_abs_hi"]]), summed,
            np.asarray(record_starts)[summed])


def read_only(*arrays: np.ndarray) -> Tuple[np.ndarray, ...]:
    """``arrays``, made read-only: kept for lists that share them."""
    for array in arrays:
        array.setflags(write=False)
    return arrays


def split_at_last_phase(lists) -> Tuple[BackwardReads, BackwardReads, BackwardReads]:
    """What the host reads of ``lists`` after the backward: all of it, what the phases before the last wrote, what
    the last writes."""
    last = len(lists.phases) - 1  # the forward's records too: read after the backward with the rest
    everything = backward_reads(lists, set(lists.contractions))
    return everything, reads_ending(lists, 0, last), reads_ending(lists, last, last + 1)


def reads_ending(lists, first: int, stop: int) -> BackwardReads:
    """What the host reads of the contractions of ``lists`` whose last call runs in phases ``first`` to ``stop - 1``:
    beside phase ``stop``, given the arena the phases before it left, those are written."""
    phase_of = {id(call): index for index, phase in enumerate(lists.phases) for _, calls in phase for call in calls}
    return backward_reads(lists, {name for name, (_, calls) in lists.contractions.items()
                                  if first <= max((phase_of[id(call)] for call in calls), default=0) < stop})


def _core_grad_slots(lists, k: int) -> np.ndarray:
    """Core ``k``'s gradient codes in the arena viewed as int16, in its layout ``(a, m, n, c)``. The rounding stage
    writes rows of ``row_values`` 16-bit fields a stream word at a time; an inner core's gradient in PE1's
    ``(m, c) x (a, n)`` order, the last core's in PE2's ``m x (a, n)``."""
    a, m, n, c = lists.cores[k]
    offset, cfg = lists.codes[f"core_grad {k}"]
    i = np.arange(a * m * n * c)
    where = offset // 2 + i // cfg.row_values * 2 * cfg.words_out(cfg.row_values) + i % cfg.row_values
    return (where.reshape(m, a, n)[None].transpose(2, 1, 3, 0) if k == len(lists.cores) - 1
            else where.reshape(m, c, a, n).transpose(2, 0, 3, 1)).reshape(-1)


__all__ = ["BackwardReads", "backward_reads", "read_only", "reads_ending", "record_sums_of",
           "split_at_last_phase"]
