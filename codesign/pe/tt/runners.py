"""Runners around a runner of PE calls: one that records, one that replays, one that counts.

A layer's forward pass and its training step ask the PEs for the same
forward contractions (the step starts with the forward sweep). Both TT
loops, the torch trainer on PEs (:mod:`codesign.train.hw_golden_tt`) and the
NumPy loop a board runs (:mod:`codesign.loops.tt`), record the forward
pass's calls and replay them in the step, so the PEs compute every
contraction of a step once; :class:`Counting` gives the MACs and seconds.
"""

from __future__ import annotations

import time
from typing import List, Sequence, Tuple

import numpy as np

from codesign.pe.tt.schedule import StepHardware

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


__all__ = ["Counting", "Recording", "Replay"]
