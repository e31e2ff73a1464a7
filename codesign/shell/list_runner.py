"""The shell's golden model as the list runner a list trainer drives (:mod:`codesign.loops.tt_lists`,
:mod:`codesign.loops.fb_lists`).

What a board's IPs (tt1 and tt2, or fpmac_array) do to the arena, computed by
:func:`codesign.shell.calls.run_list_golden` on each PE's fastest golden, with
what the host asked of it counted (lists, calls, words flushed and read) and the seconds it spent computing
kept apart: a trainer step's wall time less them is the host's share, which a board's ARM runs instead.
"""

from __future__ import annotations

import inspect
import time
from typing import Any, Callable, Mapping, Sequence, Tuple

import numpy as np

from codesign.contracts.calls import RECORD_WORDS
from codesign.pe import get_pe
from codesign.shell.calls import run_list_golden
from codesign.shell.ip import held_by_default
from codesign.step.tt.step_lists import SHARE_PRODUCTS


class GoldenListShell:
    """The golden shell on the PE builds ``specs`` (``{pe: spec}``: tt1 and tt2 for a TT trainer, as
    ``spec1``/``spec2``; fpmac_array for an FB-float one), as ``copies`` IPs of the TT PEs and ``units`` of the
    others (``{pe: count}``, 1 where absent; lists for them are built; it runs them one after the other):
    ``run_phase``, ``arena``, ``flush`` and ``invalidate`` as the list trainers call them; ``held_sums``
    (``{pe: bool}``; where absent, as the design flow builds that PE's IPs,
    :func:`codesign.shell.ip.held_by_default`): whether that PE's IPs keep the accumulation buffer
    (:func:`codesign.shell.ip.render_accel_rtl`). Counts ``lists``, ``calls``, ``flushed``
    and ``read`` (32-bit words), the ``ranges`` flushed or read (one cache maintenance call each on a board) and
    ``seconds`` spent in the golden model."""

    def __init__(self, specs: Mapping[str, Any], copies: Tuple[int, int] = (1, 1),
                 share_products: int = SHARE_PRODUCTS, held_sums: Mapping[str, bool] | None = None,
                 units: Mapping[str, int] | None = None) -> None:
        self.specs = dict(specs)
        for pe, spec in self.specs.items():
            get_pe(pe).check_spec(spec)
        self.units = {pe: int((units or {}).get(pe, 1)) for pe in self.specs}
        if any(count < 1 for count in self.units.values()) or set(units or {}) - set(self.specs):
            raise ValueError(f"units={units!r}: a positive count of IPs for PEs among {sorted(self.specs)}")
        self.held_sums = {pe: bool((held_sums or {}).get(pe, held_by_default(get_pe(pe)))) for pe in self.specs}
        self.copies, self.share_products = copies, share_products
        self.lists = self.calls = self.flushed = self.read = self.ranges = 0
        self.seconds = 0.0
        self._arenas: dict = {}
        # replay: a phase run before (while replaying) hands back the words it wrote then (an IP that finishes at
        # once: its results and records, no other word), so a host measurement sees the host's own work with the
        # caches as the host's work leaves them, not as the golden model's millions of NumPy operations do (a
        # board's IP computes beside its ARM)
        self.replay = False
        self._replies: dict = {}
        self.phase_times: list = []  # perf_counter at each phase's start and end while replaying (host gaps)

    def arena(self, lists, key) -> np.ndarray:
        """The arena ``lists`` run in: one per ``key``, a copy of the lists' image made once (as a board keeps a
        device buffer), so a step's host time does not count copying it."""
        if key not in self._arenas:
            self._arenas[key] = np.array(lists.arena)
        return self._arenas[key]

    def ip_count(self, pe: str) -> int:
        """The IPs of ``pe`` a trainer shares a phase's lists among (``units``; the TT PEs': ``copies``)."""
        return {"tt1": self.copies[0], "tt2": self.copies[1]}.get(pe, self.units.get(pe, 1))

    @property
    def spec1(self):
        return self.specs["tt1"]

    @property
    def spec2(self):
        return self.specs["tt2"]

    def flush(self, arena: np.ndarray, ranges: Sequence[Tuple[int, int]]) -> None:
        self.flushed += sum(words for _, words in ranges)
        self.ranges += len(ranges)

    def invalidate(self, arena: np.ndarray, ranges: Sequence[Tuple[int, int]]) -> None:
        self.read += sum(words for _, words in ranges)
        self.ranges += len(ranges)

    def run_phase(self, phase, arena: np.ndarray, beside: Callable[[], None] | None = None) -> np.ndarray:
        """A phase's lists, ``(pe, calls)`` each, one after the other (they write disjoint words), after
        ``beside``, the host's work while the IPs compute (on a board, between their starts and the wait; its time
        is the host's, not the shell's). ``beside`` runs first, on the arena the lists then start from: a list
        that read words the host writes beside would compute with them, and so differ from the loop it must
        equal. Should ``beside`` fail, the lists still run and write ``arena`` in place, as a board's IPs, started
        before it, write the device, and its error is raised after them."""
        timing = self.replay  # a host measurement: each phase's start and end kept for the gaps between them
        if timing:
            self.phase_times.append(time.perf_counter())
        failed = None
        if beside is not None:
            try:
                beside()
            except BaseException as error:
                failed = error
        try:
            result = self._run_lists(phase, arena)
        except BaseException as error:
            raise failed or error
        finally:
            if timing:
                self.phase_times.append(time.perf_counter())
        if failed is not None:
            arena[...] = result
            raise failed
        return result

    def _run_lists(self, phase, arena: np.ndarray) -> np.ndarray:
        started = time.perf_counter()
        lists = tuple(calls for _, calls in phase)  # built once and kept by the trainer: their identity is the key
        key = tuple(map(id, lists))
        reply = self._replies.get(key) if self.replay else None
        if reply is not None and not all(a is b for a, b in zip(reply[0], lists)):
            reply = None
        for pe, calls in phase:
            self.lists += 1
            self.calls += len(calls)
            if reply is None:
                arena = run_list_golden(get_pe(pe), self.specs[pe], arena, calls, fast=True,
                                        held_sums=self.held_sums[pe])
        if reply is not None:
            arena[reply[1]] = reply[2]
        elif self.replay:
            written = _written_words(lists)
            self._replies[key] = (lists, written, arena[written])
        self.seconds += time.perf_counter() - started
        return arena


def _written_words(lists) -> np.ndarray:
    """The arena words (indices) the calls of ``lists`` write: every result row and every record."""
    parts = [np.zeros(0, np.int64)]
    for calls in lists:
        for call in calls:
            parts += [call.record // 4 + np.arange(RECORD_WORDS), call.out.word_indices()]
    return np.unique(np.concatenate(parts))


# list steps timed for a host figure, the least taken: early steps run colder, so three left the shipped CSB
# MLP's at 71-90 us where twenty give 42-45 us (the benchmark's own count)
HOST_REPEATS = 20


def host_per_list_step(trainer, shell: "GoldenListShell", batches, *, warm_steps: int) -> dict:
    """The host's seconds per list step of ``trainer`` on ``shell``: the wall time of a step less the seconds the
    shell spent standing in for the IPs, the least over ``batches`` after the first ``warm_steps`` (which aim
    scales and build the lists; other work on the machine only adds); and the bytes the host flushed and read and
    the lists it started in that step; ``median_seconds`` too, as the least is a step at settled scales and
    early steps move some (a TT step's lists re-aimed, :func:`codesign.step.tt.step_lists.reshift`). The timed
    steps replay the words each phase wrote in its last golden run
    (``GoldenListShell.replay``; a phase not run before runs golden): the host's work does not depend on the
    values, and an IP computes beside the ARM, not in its caches.

    ``gaps_seconds``: the host's seconds between the phases, the step's start before the first and its end after
    the last, each the least over the timed steps of the least step's phase count (where the host waits on the
    IPs; a gap's least, not the least step's, so they sum below ``seconds`` less ``beside``).

    ``beside``: of the least step's seconds, those the host worked while a phase's lists computed, ``(layer,
    phase, seconds)`` each (a trainer's ``beside_seconds``; none for a trainer that does all its work between
    phases): a step model hides them behind that phase's cycles, as far as they reach. A trainer whose
    ``train_step`` takes ``next_x`` (a TT one, which stages the next batch beside its lists) is given it, as
    its epoch loop gives it, and the last step the first batch's (every step timed stages one, as a step in an
    epoch's midst does)."""
    shell.replay = True
    following = [x for x, _ in batches[1:]] + [batches[0][0] if batches else None]
    takes_next = "next_x" in inspect.signature(trainer.train_step).parameters

    def step(x, y, next_x) -> None:
        trainer.train_step(x, y, **({"next_x": next_x} if takes_next else {}))
    for (x, y), next_x in zip(batches[:warm_steps], following):
        step(x, y, next_x)
    seconds, besides, counts, gaps = [], [], [], []
    for (x, y), next_x in zip(batches[warm_steps:], following[warm_steps:]):
        before = (shell.seconds, shell.flushed, shell.read, shell.lists)
        shell.phase_times = []
        started = time.perf_counter()
        step(x, y, next_x)
        ended = time.perf_counter()
        seconds.append(ended - started - (shell.seconds - before[0]))
        marks = [started, *shell.phase_times, ended]
        gaps.append(tuple(later - earlier for earlier, later in zip(marks[0::2], marks[1::2])))
        besides.append(dict(getattr(trainer, "beside_seconds", {})))
        counts.append({"flushed_bytes": 4 * (shell.flushed - before[1]), "read_bytes": 4 * (shell.read - before[2]),
                       "lists": shell.lists - before[3]})
    shell.replay, shell._replies = False, {}
    if not seconds:
        raise ValueError(f"{len(batches)} batches leave no step to time after {warm_steps} warm steps")
    least = int(np.argmin(seconds))
    beside = [(layer, phase, seconds) for (layer, phase), seconds in sorted(besides[least].items())]
    alike = [g for g in gaps if len(g) == len(gaps[least])]  # (a step the loop ran on the host has none)
    return {"seconds": seconds[least], "median_seconds": float(np.median(seconds)), "beside": beside,
            "gaps_seconds": [float(v) for v in np.min(alike, axis=0)], **counts[least]}


def gaps_text(gaps_us) -> str:
    """A :func:`host_per_list_step` figure's ``gaps_seconds`` (given in microseconds) as a line of text."""
    inner = ", ".join(f"{us:.0f}" for us in gaps_us[1:-1])
    return (f"host between the phases, the least of each gap: start {gaps_us[0]:.0f} us, then {inner}, end "
            f"{gaps_us[-1]:.0f} us (sum {sum(gaps_us):.0f} us)")


def beside_seconds(measured: dict) -> float:
    """Of a :func:`host_per_list_step` figure, the seconds the host worked beside the phases."""
    return float(sum(seconds for _, _, seconds in measured.get("beside", ())))


__all__ = ["GoldenListShell", "beside_seconds", "gaps_text", "host_per_list_step"]
