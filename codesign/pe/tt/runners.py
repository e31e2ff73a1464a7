"""Runners around a runner of PE calls: one that records, one that replays, one that counts, one that streams.

A layer's forward pass and its training step ask the PEs for the same
forward contractions (the step starts with the forward sweep). Both TT
loops, the torch trainer on PEs (:mod:`codesign.train.hw_golden_tt`) and the
NumPy loop a board runs (:mod:`codesign.loops.tt`), record the forward
pass's calls and replay them in the step, so the PEs compute every
contraction of a step once; :class:`Counting` gives the MACs and seconds.

A board's host also packs every call's operands into stream words and reads
the results back out of the IPs' output buffers (:func:`call_words`,
:func:`unpack_results`, what :class:`codesign.deploy.tt_training.IpRunner`
does); :class:`Streamed` does the same around any runner and times it, so
that the host's share of a step measured on a desktop counts that work too.
"""

from __future__ import annotations

import time
from typing import Dict, List, Sequence, Tuple

import numpy as np

from codesign.hw.constants import STATUS_OK, status_names
from codesign.pe.tt import golden
from codesign.pe.tt.contract import output_parts, word_parts
from codesign.pe.tt.schedule import StepHardware, assign_calls

STATUS_NAMES = status_names("tt")

Calls = Sequence[Tuple[str, np.ndarray, np.ndarray]]


class Recording:
    """Passes calls to ``runner`` and keeps every (calls, results) pair, in order."""

    def __init__(self, runner) -> None:
        self.runner = runner
        self.recorded: List[Tuple[list, List[np.ndarray]]] = []

    def run(self, hardware: StepHardware, calls: Calls) -> List[np.ndarray]:
        results = self.runner.run(hardware, calls)
        self.recorded.append((list(calls), results))
        return results


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


def _shape_key(call) -> Tuple[str, Tuple[int, ...], Tuple[int, ...]]:
    """A call's PE and operand shapes: equal for a contraction's equal cuts, which pack, model and read alike."""
    pe, a, b = call
    return pe, a.shape if isinstance(a, np.ndarray) else np.shape(a), b.shape if isinstance(b, np.ndarray) else \
        np.shape(b)


def call_words(hardware: StepHardware, calls: Calls) -> List[np.ndarray]:
    """Every call's input words (:func:`codesign.pe.tt.golden.words`, 32-bit parts as uint32), as a host writes
    them into an IP's input buffer. Calls of equal shapes (a contraction's cuts) are packed together
    (:func:`codesign.pe.tt.golden.stacked_words`), so the host's NumPy work grows with the words more than
    with the calls."""
    groups: Dict[Tuple[str, Tuple[int, ...], Tuple[int, ...]], List[int]] = {}
    for position, call in enumerate(calls):
        groups.setdefault(_shape_key(call), []).append(position)
    words: List[np.ndarray] = [np.empty(0)] * len(calls)
    for (pe, _, _), positions in groups.items():
        stacked = golden.stacked_words(hardware.spec(pe), np.stack([calls[p][1] for p in positions]),
                                       np.stack([calls[p][2] for p in positions]))
        for position, row in zip(positions, stacked):
            words[position] = row
    return words


def call_cycles(hardware: StepHardware, calls: Calls, words: Sequence[np.ndarray]) -> List[int]:
    """Each call's PE cycles by its RTL-exact model (:func:`codesign.pe.transaction_cycles`), which reads the
    header alone, a function of the operands' shapes: worked out once per shape, as a stage repeats a few call
    shapes many times."""
    from codesign.pe import transaction_cycles  # the registry imports every PE, this one included

    known: Dict[Tuple[str, Tuple[int, ...], Tuple[int, ...]], int] = {}
    cycles = []
    for call, stream in zip(calls, words):
        key = _shape_key(call)
        if key not in known:
            known[key] = transaction_cycles(call[0], hardware.spec(call[0]), stream)
        cycles.append(known[key])
    return cycles


def share_calls(hardware: StepHardware, calls: Calls, cycles: Sequence[int]) -> List[Tuple[str, int, List[int]]]:
    """How a stage's calls go to the PE copies: ``(pe, copy, positions of its calls)`` for every copy that gets
    any, each PE's calls split by :func:`codesign.pe.tt.schedule.assign_calls` on their modelled cycles."""
    shares = []
    for pe in dict.fromkeys(pe for pe, _, _ in calls):
        positions = [position for position, call in enumerate(calls) if call[0] == pe]
        units = assign_calls([cycles[p] for p in positions], hardware.units(pe))
        for unit in range(hardware.units(pe)):
            mine = [p for p, u in zip(positions, units) if u == unit]
            if mine:
                shares.append((pe, unit, mine))
    return shares


def call_output_parts(hardware: StepHardware, call) -> int:
    """32-bit parts one accepted call's output takes in an IP's output buffer (its status word and results)."""
    pe, a, b = call
    return output_parts(int(np.prod(golden.result_shape(pe, a, b))), hardware.spec(pe).stream_bits)


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
    does it: each call's input words packed, its cycles modelled to share the calls among copies, and each
    copy's share laid out as one input buffer before they run, the results read back from output words;
    ``host_seconds`` times that work (the output words themselves, which an IP writes, are made from
    ``runner``'s results and not timed)."""

    def __init__(self, runner) -> None:
        self.runner = runner
        self.host_seconds = 0.0

    def run(self, hardware: StepHardware, calls: Calls) -> List[np.ndarray]:
        started = time.perf_counter()
        words = call_words(hardware, calls)
        for _, _, positions in share_calls(hardware, calls, call_cycles(hardware, calls, words)):
            np.concatenate([words[p] for p in positions])  # the copy's input buffer
        self.host_seconds += time.perf_counter() - started
        answers = self.runner.run(hardware, calls)
        out = np.concatenate([golden.output_words(hardware.spec(pe), z)
                              for (pe, _, _), z in zip(calls, answers)]).astype(np.uint32)
        started = time.perf_counter()
        results = unpack_results(hardware, calls, out)
        self.host_seconds += time.perf_counter() - started
        return results


__all__ = ["AnswerError", "Counting", "Recording", "Replay", "Streamed", "call_cycles", "call_output_parts",
           "call_words", "share_calls", "unpack_results"]
