"""Runners around a runner of PE calls: one that records, one that replays, one that counts, one that streams.

A layer's forward pass and its training step ask the PEs for the same
forward contractions (the step starts with the forward sweep). Both TT
loops, the torch trainer on PEs (:mod:`codesign.train.hw_golden_tt`) and the
NumPy loop a board runs (:mod:`codesign.loops.tt`), record the forward
pass's calls and replay them in the step, so the PEs compute every
contraction of a step once; :class:`Counting` gives the MACs and seconds.
Around a runner that computes whole contractions
(:class:`codesign.step.tt.whole.WholeRunner`) the three pass whole stages
through (``contract_whole``), recording, replaying and counting the PE calls
the contractions stand for; around a runner of single calls they keep
handing over single calls.

A board's host also shares a stage's calls among the PE copies
(:func:`stage_layout`), packs every call's operands into stream words in its
copy's input buffer (:func:`pack_stage`) and reads the results back out of
the IPs' output buffers (:func:`unpack_results`), what
:class:`codesign.deploy.tt_training.IpRunner` does; :class:`Streamed` does
the same around any runner and times it, so that the host's share of a step
measured on a desktop counts that work too.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from codesign.contracts.constants import STATUS_OK, status_names
from codesign.pe.tt import golden
from codesign.pe.tt.contract import header_word, output_parts, word_parts
from codesign.pe.tt.cycles import stream_words, transaction_cycles
from codesign.step.tt.schedule import StepHardware, StepPlan, assign_calls
from codesign.step.tt.whole import stood_for

STATUS_NAMES = status_names("tt")

Calls = Sequence[Tuple[str, np.ndarray, np.ndarray]]
Jobs = Sequence[Tuple[int, np.ndarray, np.ndarray]]
WHOLE = "whole"  # marks a recorded whole contraction (codesign.step.tt.whole) among recorded PE calls


def _whole_key(plan: StepPlan, jobs: Jobs) -> list:
    """A stage of whole contractions as a record compares it: per contraction ``((WHOLE, builds, contraction), A,
    B)``, so that :func:`_same_calls` matches it only against the same contraction on the same builds with every
    operand code equal (never against a PE call, whose first field is its PE's name)."""
    return [((WHOLE, plan.hardware, plan.contractions[index]), a, b) for index, a, b in jobs]


def _inner_whole(runner):
    """``runner``'s whole-contraction entry (:meth:`codesign.step.tt.whole.WholeRunner.contract_whole`), or None:
    a wrapper offers one only where the runner it wraps has one, so around a runner of single PE calls (the C-sim,
    a board's IPs) it keeps handing over single calls."""
    return getattr(runner, "contract_whole", None)


class Recording:
    """Passes calls to ``runner`` and keeps every (calls, results) pair, in order."""

    def __init__(self, runner) -> None:
        self.runner = runner
        self.recorded: List[Tuple[list, List[np.ndarray]]] = []

    def run(self, hardware: StepHardware, calls: Calls) -> List[np.ndarray]:
        results = self.runner.run(hardware, calls)
        self.recorded.append((list(calls), results))
        return results

    @property
    def contract_whole(self):
        """Around a whole-contraction runner: records each stage's contractions (:func:`_whole_key`) and results."""
        inner = _inner_whole(self.runner)
        if inner is None:
            return None

        def contract(plan: StepPlan, jobs: Jobs) -> List[np.ndarray]:
            results = inner(plan, jobs)
            self.recorded.append((_whole_key(plan, jobs), results))
            return results
        return contract


def _same_calls(a: Sequence, b: Sequence) -> bool:
    return len(a) == len(b) and all(pa == pb and np.array_equal(xa, xb) and np.array_equal(ya, yb)
                                    for (pa, xa, ya), (pb, xb, yb) in zip(a, b))


class Replay:
    """Answers calls identical (PE and every operand code) to the next recorded ones from the record; else ``runner``."""

    def __init__(self, runner, recorded: List[Tuple[list, List[np.ndarray]]]) -> None:
        self.runner = runner
        self.pending = list(recorded)
        self.replayed = 0
        self.misses = 0

    def run(self, hardware: StepHardware, calls: Calls) -> List[np.ndarray]:
        if self.pending:
            kept, results = self.pending.pop(0)
            if _same_calls(kept, calls):
                self.replayed += len(calls)
                return results
            self.misses += len(calls)
            self.pending.clear()
        return self.runner.run(hardware, calls)

    @property
    def contract_whole(self):
        """Around a whole-contraction runner: answers a stage equal to the next recorded one from the record,
        counting the PE calls its contractions stand for (:func:`codesign.step.tt.whole.stood_for`)."""
        inner = _inner_whole(self.runner)
        if inner is None:
            return None

        def contract(plan: StepPlan, jobs: Jobs) -> List[np.ndarray]:
            if self.pending:
                kept, results = self.pending.pop(0)
                calls = stood_for(plan, [index for index, _, _ in jobs])[0]
                if _same_calls(kept, _whole_key(plan, jobs)):
                    self.replayed += calls
                    return results
                self.misses += calls
                self.pending.clear()
            return inner(plan, jobs)
        return contract


class Counting:
    """Counts the PE transactions, MACs and seconds of the calls it passes to ``runner``."""

    def __init__(self, runner) -> None:
        self.runner = runner
        self.transactions, self.macs, self.seconds = 0, 0, 0.0

    def run(self, hardware: StepHardware, calls: Calls) -> List[np.ndarray]:
        started = time.perf_counter()
        results = self.runner.run(hardware, calls)
        self.seconds += time.perf_counter() - started
        self.transactions += len(calls)
        for pe, a, b in calls:
            self.macs += a.size * b.shape[0] if pe != "tt3" else a.size * b.size
        return results

    @property
    def contract_whole(self):
        """Around a whole-contraction runner: its seconds, and the transactions and MACs of the plan's PE calls its
        contractions stand for (:func:`codesign.step.tt.whole.stood_for`), the figures the calls would give."""
        inner = _inner_whole(self.runner)
        if inner is None:
            return None

        def contract(plan: StepPlan, jobs: Jobs) -> List[np.ndarray]:
            started = time.perf_counter()
            results = inner(plan, jobs)
            self.seconds += time.perf_counter() - started
            calls, macs = stood_for(plan, [index for index, _, _ in jobs])
            self.transactions += calls
            self.macs += macs
            return results
        return contract


def _shape_key(call) -> Tuple[str, Tuple[int, ...], Tuple[int, ...]]:
    """A call's PE and operand shapes: equal for a contraction's equal cuts, which pack, model and read alike."""
    pe, a, b = call
    return pe, a.shape if isinstance(a, np.ndarray) else np.shape(a), b.shape if isinstance(b, np.ndarray) else \
        np.shape(b)


def share_calls(hardware: StepHardware, calls: Calls, cycles: Sequence[int]) -> List[Tuple[str, int, List[int]]]:
    """How a stage's calls go to the PE copies: ``(pe, copy, positions of its calls)`` for every copy that gets
    any, each PE's calls split by :func:`codesign.step.tt.schedule.assign_calls` on their modelled cycles."""
    shares = []
    for pe in dict.fromkeys(pe for pe, _, _ in calls):
        positions = [position for position, call in enumerate(calls) if call[0] == pe]
        units = assign_calls([cycles[p] for p in positions], hardware.units(pe))
        for unit in range(hardware.units(pe)):
            mine = [p for p, u in zip(positions, units) if u == unit]
            if mine:
                shares.append((pe, unit, mine))
    return shares


@dataclass(frozen=True)
class CopyShare:
    """One PE copy's share of a stage: its calls (``positions`` in the stage, in order), where each call's
    words begin in the copy's input buffer (``starts``, 32-bit parts), the buffer's parts in and out, and the
    copy's modelled cycles (the calls' sum)."""

    pe: str
    unit: int
    positions: Tuple[int, ...]
    starts: Tuple[int, ...]
    words_in: int
    words_out: int
    cycles: int


@dataclass(frozen=True)
class StageLayout:
    """Where a stage's calls go: each call's modelled ``cycles``, the ``copies`` that get calls
    (:func:`share_calls`) with their buffer layouts, the ``groups`` of equal-shape calls packed in one pass,
    and each group's ``runs``: ``(copy, start, calls)``, the group's calls that lie one after another in a
    copy's buffer, in the group's order.

    A copy takes its calls grouped by shape (in call order within a group):
    the order of a copy's calls changes neither its cycles nor its results,
    and a run of equal calls is packed straight into the buffer in one pass.
    A function of the calls' PE and operand shapes alone, which repeat every
    step, so :func:`stage_layout` works it out once per distinct stage."""

    cycles: Tuple[int, ...]
    copies: Tuple[CopyShare, ...]
    groups: Tuple[Tuple[int, ...], ...]
    runs: Tuple[Tuple[Tuple[int, int, int], ...], ...]


LAYOUT_CACHE = 128  # distinct stages kept (a two-layer step has about 16, at the same shapes every step)
_layouts: Dict[tuple, StageLayout] = {}


def call_header(pe: str, a_shape: Tuple[int, ...], b_shape: Tuple[int, ...]) -> int:
    """The header word of a call with operands of these shapes (docs/tt_pe.md): ``I, J`` for PE3, else
    ``I, J, K, L``; the cycle model needs nothing else."""
    if pe == "tt3":
        return header_word(a_shape[-1], b_shape[-1])
    return header_word(*a_shape[-3:], b_shape[0])


def stage_layout(hardware: StepHardware, calls: Calls) -> StageLayout:
    """:class:`StageLayout` of ``calls`` on ``hardware``: cycles by the RTL-exact model of each call's header
    (:func:`codesign.pe.tt.cycles.transaction_cycles`), calls shared among copies by
    :func:`codesign.step.tt.schedule.assign_calls`, each copy's calls laid out one after another."""
    keys = tuple(_shape_key(call) for call in calls)
    cache_key = (hardware, keys)
    layout = _layouts.get(cache_key)
    if layout is not None:
        return layout
    groups: Dict[Tuple[str, Tuple[int, ...], Tuple[int, ...]], List[int]] = {}
    for position, key in enumerate(keys):
        groups.setdefault(key, []).append(position)
    per_key = {}
    for pe, a_shape, b_shape in groups:
        spec = hardware.spec(pe)
        header = call_header(pe, a_shape, b_shape)
        per_key[pe, a_shape, b_shape] = (
            transaction_cycles(spec, header).total, stream_words(spec, header)[0] * word_parts(spec.stream_bits),
            output_parts(math.prod(golden.result_shape_of(pe, a_shape, b_shape)), spec.stream_bits))
    cycles = [per_key[key][0] for key in keys]
    group_of = {position: index for index, positions in enumerate(groups.values()) for position in positions}
    copies, place = [], {}
    for pe, unit, positions in share_calls(hardware, calls, cycles):
        positions = sorted(positions, key=lambda p: (group_of[p], p))  # a copy's calls grouped by shape
        starts, words_in = [], 0
        for position in positions:
            place[position] = (len(copies), words_in)
            starts.append(words_in)
            words_in += per_key[keys[position]][1]
        copies.append(CopyShare(pe, unit, tuple(positions), tuple(starts), words_in,
                                sum(per_key[keys[p]][2] for p in positions), sum(cycles[p] for p in positions)))
    ordered, runs = [], []
    for positions in groups.values():
        positions = sorted(positions, key=lambda p: (place[p][0], p))  # by copy: each copy's calls one run
        mine: List[Tuple[int, int, int]] = []
        for position in positions:
            copy, start = place[position]
            if mine and mine[-1][0] == copy:
                mine[-1] = (copy, mine[-1][1], mine[-1][2] + 1)
            else:
                mine.append((copy, start, 1))
        ordered.append(tuple(positions))
        runs.append(tuple(mine))
    layout = StageLayout(tuple(cycles), tuple(copies), tuple(ordered), tuple(runs))
    if len(_layouts) >= LAYOUT_CACHE:
        _layouts.pop(next(iter(_layouts)))
    _layouts[cache_key] = layout
    return layout


def pack_stage(hardware: StepHardware, calls: Calls, layout: StageLayout, buffers: Sequence[np.ndarray]) -> None:
    """Every call's input words (:func:`codesign.pe.tt.golden.words`) written where ``layout`` puts them in its
    copy's buffer (``buffers[c]``, 1-D uint32, at least ``layout.copies[c].words_in`` long: an IP's DMA buffer
    on a board): a group of equal calls packed in one pass (:func:`codesign.pe.tt.golden.stacked_words`), then
    each of its runs copied into its copy's buffer as one block."""
    if len(buffers) != len(layout.copies):
        raise ValueError(f"{len(buffers)} buffers for {len(layout.copies)} copies")
    for buffer, copy in zip(buffers, layout.copies):
        if buffer.dtype != np.uint32 or buffer.ndim != 1 or buffer.size < copy.words_in:
            raise ValueError(f"the {copy.pe} copy {copy.unit} needs a 1-D uint32 buffer of {copy.words_in} words, "
                             f"got {buffer.dtype} of shape {buffer.shape}")
    for positions, runs in zip(layout.groups, layout.runs):
        pe = calls[positions[0]][0]
        stacked = golden.stacked_words(hardware.spec(pe), np.stack([calls[p][1] for p in positions]),
                                       np.stack([calls[p][2] for p in positions]))
        row = 0
        for copy, start, count in runs:  # one block copy a run
            buffers[copy][start:start + count * stacked.shape[1]] = stacked[row:row + count].reshape(-1)
            row += count


def stage_buffers(hardware: StepHardware, calls: Calls, layout: Optional[StageLayout] = None) -> List[np.ndarray]:
    """Each copy's input buffer of a stage (:func:`pack_stage` into new arrays), as ``layout`` (default:
    :func:`stage_layout`) shares the calls."""
    layout = layout or stage_layout(hardware, calls)
    buffers = [np.empty(copy.words_in, dtype=np.uint32) for copy in layout.copies]
    pack_stage(hardware, calls, layout, buffers)
    return buffers


class AnswerError(ValueError):
    """An IP's answer to a call is not results: a refused status, or fewer result words than the call has."""


def unpack_results(hardware: StepHardware, calls: Calls, out: np.ndarray) -> List[np.ndarray]:
    """The results of ``calls`` (one IP call's transactions, in order) from its output words ``out``: per call a
    status word, then the results, sign-extended 32-bit parts (docs/tt_pe.md). Each result is an int32 view of
    ``out``'s words, not a copy: the host adds it into its 64-bit sums anyway. A refused status or too few
    words is an :class:`AnswerError` naming the call."""
    words = np.ascontiguousarray(out, dtype=np.uint32)
    signed = words.view(np.int32)
    layouts: Dict[Tuple[str, Tuple[int, ...], Tuple[int, ...]], Tuple[Tuple[int, ...], int, int, int]] = {}
    results, position = [], 0
    for pe, a, b in calls:
        key = _shape_key((pe, a, b))
        layout = layouts.get(key)
        if layout is None:
            shape = golden.result_shape(pe, a, b)
            size, bits = int(np.prod(shape)), hardware.spec(pe).stream_bits
            layout = layouts[key] = (shape, size, word_parts(bits), output_parts(size, bits))
        shape, size, status_parts, parts = layout
        if position >= words.size:
            raise AnswerError(f"answered no status word for a {shape} transaction")
        status = int(words[position])
        if status != STATUS_OK:
            raise AnswerError(f"refused a {shape} transaction: status {status} ({STATUS_NAMES.get(status, 'unknown')})")
        values = signed[position + status_parts:position + status_parts + size]
        if values.size != size:
            raise AnswerError(f"answered {values.size} of {size} result words")
        results.append(values.reshape(shape))
        position += parts
    return results


class Streamed:
    """``runner`` with a board host's stream work around it, as :class:`codesign.deploy.tt_training.IpRunner`
    does it: the calls shared among copies (:func:`stage_layout`) and every call's input words packed into its
    copy's input buffer (:func:`pack_stage`) before they run, the results read back from output words;
    ``host_seconds`` times that work (the output words themselves, which an IP writes, are made from
    ``runner``'s results and not timed)."""

    def __init__(self, runner) -> None:
        self.runner = runner
        self.host_seconds = 0.0

    def run(self, hardware: StepHardware, calls: Calls) -> List[np.ndarray]:
        started = time.perf_counter()
        stage_buffers(hardware, calls)  # every copy's input buffer
        self.host_seconds += time.perf_counter() - started
        answers = self.runner.run(hardware, calls)
        out = np.concatenate([golden.output_words(hardware.spec(pe), z)
                              for (pe, _, _), z in zip(calls, answers)]).astype(np.uint32)
        started = time.perf_counter()
        results = unpack_results(hardware, calls, out)
        self.host_seconds += time.perf_counter() - started
        return results


__all__ = ["AnswerError", "CopyShare", "Counting", "Recording", "Replay", "StageLayout", "Streamed", "call_header",
           "pack_stage", "share_calls", "stage_buffers", "stage_layout", "unpack_results"]
