"""The shell's golden model as the list runner a TT list trainer drives (:mod:`codesign.loops.tt_lists`).

What a board's tt1 and tt2 IPs do to the arena, computed by :func:`codesign.shell.calls.run_list_golden`, with
what the host asked of it counted (lists, calls, words flushed and read) and the seconds it spent computing
kept apart: a trainer step's wall time less them is the host's share, which a board's ARM runs instead.
"""

from __future__ import annotations

import time
from typing import Sequence, Tuple

import numpy as np

from codesign.pe import get_pe
from codesign.pe.tt.spec import Tt1Spec, Tt2Spec
from codesign.shell.calls import run_list_golden
from codesign.step.tt.step_lists import SHARE_PRODUCTS


class GoldenListShell:
    """The golden shell on the PE builds ``spec1`` (tt1) and ``spec2`` (tt2), as ``copies`` IPs of each (lists
    for them are built; it runs them one after the other): ``run_phase``, ``arena``, ``flush`` and
    ``invalidate`` as :class:`codesign.loops.tt_lists.TtListTrainer` calls them. Counts ``lists``, ``calls``,
    ``flushed`` and ``read`` (32-bit words) and ``seconds`` spent in the golden model."""

    def __init__(self, spec1: Tt1Spec, spec2: Tt2Spec, copies: Tuple[int, int] = (1, 1),
                 share_products: int = SHARE_PRODUCTS) -> None:
        self.spec1, self.spec2, self.copies, self.share_products = spec1, spec2, copies, share_products
        self.lists = self.calls = self.flushed = self.read = 0
        self.seconds = 0.0
        self._arenas: dict = {}

    def arena(self, lists, key) -> np.ndarray:
        """The arena ``lists`` run in: one per ``key``, a copy of the lists' image made once (as a board keeps a
        device buffer), so a step's host time does not count copying it."""
        if key not in self._arenas:
            self._arenas[key] = np.array(lists.arena)
        return self._arenas[key]

    def flush(self, arena: np.ndarray, ranges: Sequence[Tuple[int, int]]) -> None:
        self.flushed += sum(words for _, words in ranges)

    def invalidate(self, arena: np.ndarray, ranges: Sequence[Tuple[int, int]]) -> None:
        self.read += sum(words for _, words in ranges)

    def run_phase(self, phase, arena: np.ndarray) -> np.ndarray:
        """A phase's lists, ``(pe, calls)`` each, one after the other (they write disjoint words)."""
        started = time.perf_counter()
        for pe, calls in phase:
            self.lists += 1
            self.calls += len(calls)
            arena = run_list_golden(get_pe(pe), self.spec1 if pe == "tt1" else self.spec2, arena, calls)
        self.seconds += time.perf_counter() - started
        return arena


__all__ = ["GoldenListShell"]
