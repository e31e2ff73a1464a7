"""A list trainer's shell on a board: call lists run on the overlay's IPs, the arena in one device buffer.

Every list trainer (:mod:`codesign.loops.tt_lists`, :mod:`codesign.loops.fb_lists`) drives a *shell*:
``arena(lists, key)``, ``flush``, ``invalidate`` and ``run_phase``. :class:`ListShell` is that shell on the
overlay's IPs of the PEs it is given, through each driver's :meth:`~codesign.deploy.driver.AccelIP.start_list`:
one start and one done per list. A list's descriptors are encoded, written into a device buffer of their own and
flushed once (a step runs the same lists every time, and encoding and flushing them is host time and traffic), so
a start flushes nothing but what the trainer wrote. A family's shell adds what its trainer reads (the TT builds).
"""

from __future__ import annotations

import time
from collections import OrderedDict
from typing import Any, Callable, Dict, List, Mapping, Tuple

import numpy as np

from dataclasses import replace

from codesign.contracts.calls import DESCRIPTOR_WORDS, FIELD, encode_list, round_field
from codesign.deploy.board import OnBoard
from codesign.deploy.driver import clear_list_ends, flush_words, invalidate_words
from codesign.deploy.manifest import DeployError
from codesign.step.list_cycles import BOARD_DDR, phase_cycles, phase_port_words
from codesign.step.model import StageLog, model_figures

KEPT_ENCODINGS = 64  # lists whose descriptor words are kept (a step's lists at a few shapes and widths)
KEPT_ARENAS = 16  # arenas kept before the oldest are freed (lists rebuilt at new scales or shapes)
KEPT_RUNS = 256  # distinct phases whose runs are counted before the oldest are priced (in a step) and let go


def _only_shift_moved(was, now) -> bool:
    """Whether call ``now`` is call ``was`` with another rounding shift (and nothing else changed)."""
    return now.rounding.enable and replace(now, rounding=replace(now.rounding, shift=was.rounding.shift)) == was


def runs_lists(overlay, pe: str) -> bool:
    """Whether ``overlay``'s IPs of ``pe`` run call lists: every one built by the RTL route, or a device that runs
    the generated C++ (the emulated board). A Vitis HLS export runs lists in C simulation only
    (:meth:`codesign.deploy.driver.AccelIP.start_list` refuses them), so a family trains it one call at a time."""
    if getattr(overlay.device, "runs_generated_cpp", False):
        return True
    ips = [ip for ip in overlay.manifest["ips"] if ip["pe"] == pe]
    return bool(ips) and all(ip.get("ip_route", "hls") == "rtl" for ip in ips)


def one_ip_route(overlay, pe: str, why: str) -> None:
    """Refuse an overlay with copies of ``pe`` for a route that drives one IP (a call at a time): only call lists
    share a step among copies; ``why``: why these IPs do not run lists."""
    copies = sum(ip["pe"] == pe for ip in overlay.manifest["ips"])
    if copies > 1:
        raise DeployError(f"design {overlay.manifest.get('design')!r}: {copies} {pe} IPs share a step as call lists "
                          f"only, and these do not run them ({why})")


def coalesced(ranges) -> List[Tuple[int, int]]:
    """``(start, words)`` ranges with those that touch or overlap merged: one cache maintenance call a run of
    neighbouring maps (a step's lane chunks lie back to back), the same words in all."""
    merged: List[List[int]] = []
    for start, words in sorted((int(start), int(words)) for start, words in ranges if words):
        if merged and start <= merged[-1][0] + merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], start + words - merged[-1][0])
        else:
            merged.append([start, words])
    return [(start, words) for start, words in merged]


class ListShell:
    """Lists on the overlay's IPs of each PE in ``specs`` (``{pe: build}``, in the manifest's order of IPs: a
    phase's lists for one PE go to its copies in turn). Counts ``lists``, ``calls`` and ``busy_s``."""

    def __init__(self, overlay, specs: Mapping[str, Any]) -> None:
        self.overlay, self.specs = overlay, dict(specs)
        names: Dict[str, list] = {pe: [] for pe in self.specs}
        for ip in overlay.manifest["ips"]:
            if ip["pe"] in names:
                names[ip["pe"]].append(ip["name"])
        missing = [pe for pe in self.specs if not names[pe]]
        if missing:
            raise DeployError(f"design {overlay.manifest['design']!r} has no {' or '.join(missing)} IP")
        for ip in overlay.manifest["ips"]:  # the lists are built for the set-up's build: it must be the IP's
            wanted = self.specs.get(ip["pe"])
            if wanted is not None and wanted.to_dict() != ip["spec"]:
                differ = sorted(key for key in set(wanted.to_dict()) | set(ip["spec"])
                                if wanted.to_dict().get(key) != ip["spec"].get(key))
                raise DeployError(f"design {overlay.manifest['design']!r}: design.json's loop.setup.spec differs from "
                                  f"IP {ip['name']}'s spec in {differ}: the lists would not fit the IP")
        self.ips = {pe: [overlay.accelerator(name) for name in names[pe]] for pe in self.specs}
        # each IP's high-performance port, from design.json (the manifest check refuses one the design lacks)
        self.ports = {pe: [ip.get("hp_port", 0) for ip in overlay.manifest["ips"] if ip["pe"] == pe]
                      for pe in self.specs}
        # whether every IP of a PE keeps the accumulation buffer (a list trainer refuses lists that need it)
        self.held_sums = {pe: all(ip.get("held_sums", True) for ip in overlay.manifest["ips"] if ip["pe"] == pe)
                          for pe in self.specs}  # the manifest check refuses a value that is not a bool
        self._buffers: "OrderedDict[tuple, Any]" = OrderedDict()  # arenas, the least recently used first
        self._encoded: "OrderedDict[int, tuple]" = OrderedDict()  # id(calls) -> (calls, descriptors): calls kept
        self._to_free: list = []  # descriptor buffers let go during a phase
        self.lists = self.calls = 0
        self.encoded = self.reaimed = 0  # lists encoded whole; lists re-aimed in a kept buffer (rounding words)
        # phases run, by the ids of their lists: [phase, arena image, runs, price once known]; the phase kept, so an
        # id is not reused
        self._runs: "OrderedDict[tuple, list]" = OrderedDict()
        self._images: Dict[int, Any] = {}  # id(device buffer) -> the image of the lists it was made for
        self._priced = StageLog()  # the runs of phases let go, priced when they were
        self.pricing_s = 0.0  # seconds those prices took inside steps (a step's measured time leaves them out)
        # seconds the phases kept the host waiting: from a phase's last start (and the host's work beside it) to its
        # last done
        self.busy_s = 0.0

    def arena(self, lists, key) -> Any:
        """The device buffer ``lists`` (anything with an ``arena`` image) runs in: one per ``key``, its image
        written and flushed once; lists of the same key lay their tensors out alike."""
        key = ("arena", key)
        if key in self._buffers:  # in use: the last to be let go (a TT step holds one a layer until its backward)
            self._buffers.move_to_end(key)
        if key in self._buffers and self._buffers[key].size != lists.arena.size:
            raise DeployError(f"arena {key[1]}: lists of {lists.arena.size} words meet a buffer of "
                              f"{self._buffers[key].size}")
        if key not in self._buffers:
            if len(self._buffers) > KEPT_ARENAS:
                for stale in [k for k in self._buffers if k[0] == "arena"][:KEPT_ARENAS // 2]:
                    freed = self._buffers.pop(stale)
                    self._images.pop(id(freed), None)
                    freed.freebuffer()
            from pynq import allocate

            buffer = allocate(shape=(lists.arena.size,), dtype=np.uint32, target=self.overlay.device)
            buffer[:] = lists.arena
            flush_words(buffer, buffer.size)
            self._buffers[key] = buffer
            self._images[id(buffer)] = lists.arena  # what the cycle model reads (inline headers), never freed memory
        return self._buffers[key]

    def flush(self, arena, ranges) -> None:
        for start, words in coalesced(ranges):
            flush_words(arena, words, start)

    def invalidate(self, arena, ranges) -> None:
        for start, words in coalesced(ranges):
            invalidate_words(arena, words, start)

    def descriptors(self, calls) -> Any:
        """The device buffer holding ``calls``' descriptors: encoded, written and flushed once per list (a step
        runs the same lists every time, and encoding and flushing them is host time and traffic), so a start
        flushes nothing of them. The :data:`KEPT_ENCODINGS` latest lists keep theirs."""
        known = self._encoded.get(id(calls))
        if known is not None and known[0] is calls:
            self._encoded.move_to_end(id(calls))
        elif (known := self._reaim(calls)) is None:
            from pynq import allocate

            words = encode_list(calls)
            buffer = allocate(shape=(max(words.size, 1),), dtype=np.uint32, target=self.overlay.device)
            buffer[:words.size] = words
            flush_words(buffer, words.size)
            known = self._encoded[id(calls)] = (calls, buffer)
            self.encoded += 1
            if len(self._encoded) > KEPT_ENCODINGS:  # freed once the phase's IPs are done: one may read it now
                self._to_free.append(self._encoded.popitem(last=False)[1][1])
        return known[1]

    def _reaim(self, calls):
        """The kept encoding ``calls`` re-aim, as :func:`codesign.step.tt.step_lists.reshift` makes them when a
        tracked scale moves (the same calls, some with another rounding shift): its rounding words rewritten and
        flushed in place, and kept under ``calls`` from now on (lists a trainer runs again, back at scales it kept
        them for, are re-aimed so in turn). ``None`` when no kept list matches."""
        for key, (old, buffer) in reversed(self._encoded.items()):
            if len(old) != len(calls) or old[0].record != calls[0].record or old[-1].record != calls[-1].record:
                continue
            moved = [i for i, (was, now) in enumerate(zip(old, calls)) if was is not now]
            if not all(_only_shift_moved(old[i], calls[i]) for i in moved):
                continue
            words = [i * DESCRIPTOR_WORDS + FIELD["round"] for i in moved]
            if words:
                buffer[words] = [round_field(calls[i].rounding) for i in moved]
                flush_words(buffer, words[-1] + 1 - words[0], words[0])
            del self._encoded[key]
            self._encoded[id(calls)] = (calls, buffer)
            self.reaimed += 1
            return calls, buffer
        return None

    def ip_count(self, pe: str) -> int:
        """The overlay's IPs of ``pe``: a phase's lists for that PE go to them in turn."""
        return len(self.ips[pe])

    def run_phase(self, phase, arena, beside: Callable[[], None] | None = None) -> Any:
        """A phase's lists (``(pe, calls)`` each, on different IPs, writing disjoint words) run in place over the
        device buffer ``arena`` (:meth:`arena`) side by side: every IP started, ``beside`` run (the host's work
        while they compute), then each waited for."""
        started, failed = [], None
        try:
            clear_list_ends(arena, [calls for _, calls in phase])
            for pe, calls in phase:
                ip = self.ips[pe][sum(other == pe for other, _ in phase[:len(started)])]  # a PE's lists on its copies
                ip.start_list(arena, self.descriptors(calls), len(calls), flush=False, clear_end=False)
                started.append(ip)
                self.lists += 1
                self.calls += len(calls)
            if beside is not None:
                beside()
        except BaseException as error:  # every IP started is still waited for: none is left running
            failed = error
        waiting = time.perf_counter()  # from the last start (and the host's work) to the last done
        for ip in started:
            try:
                ip.finish_list()
            except BaseException as error:
                failed = failed or error
        self.busy_s += time.perf_counter() - waiting
        if failed is not None:
            raise failed
        for buffer in self._to_free:
            buffer.freebuffer()
        self._to_free.clear()
        key = tuple((pe, id(calls)) for pe, calls in phase)
        run = self._runs.get(key)
        if run is None:
            run = self._runs[key] = [tuple(phase), self._images.get(id(arena), arena), 0, None]
            if len(self._runs) > KEPT_RUNS:
                pricing = time.perf_counter()
                self._price(*self._runs.popitem(last=False)[1], log=self._priced)
                self.pricing_s += time.perf_counter() - pricing
        run[2] += 1
        return arena

    def _price(self, phase, arena, runs: int, priced=None, *, log: StageLog) -> tuple:
        """Add ``runs`` runs of ``phase`` to ``log``; its ``(cycles, words in, words out, busiest port's words in,
        out)``, priced unless given (each IP's words through its port, as the desktop's list step models count
        them)."""
        priced = priced or (*phase_cycles(phase, self.specs, np.asarray(arena), ddr=BOARD_DDR),
                            *phase_port_words(phase, self.ports))
        for _ in range(runs):
            log.add(*priced)
        return priced

    def stage_log(self) -> StageLog:
        """Every phase run so far as a stage of the list cycle model under :data:`BOARD_DDR` (a phase's lists side
        by side: the longest one's cycles, the words of all and of its busiest port). Priced when asked, each
        distinct phase once: the model is Python, cycle by cycle, and has no place inside a step a board times."""
        log = StageLog()
        log.stages.extend(self._priced.stages)
        for run in self._runs.values():
            run[3] = self._price(*run, log=log)
        return log


class ListOnBoard(OnBoard):
    """Mixin of a list trainer on a board (``self.shell``: a :class:`ListShell`; ``self.list_steps``: the steps
    that ran as lists). Its figures: the shell's lists and calls, the IPs' busy seconds, and per list step the
    model's PE and memory seconds of the phases that ran (:meth:`ListShell.stage_log`), beside the measured wall
    seconds and the host's share of them (wall less the time the phases kept it waiting, :attr:`ListShell.busy_s`:
    all the host's work, that done beside the IPs too)."""

    shell: ListShell
    list_wall_s = 0.0  # wall seconds of the steps that ran as lists (a TT loop's first steps run on the host)

    def train_step(self, *args, **kwargs):
        before, pricing, started = self.list_steps, self.shell.pricing_s, time.perf_counter()
        loss = super().train_step(*args, **kwargs)
        if self.list_steps > before:
            self.list_wall_s += time.perf_counter() - started - (self.shell.pricing_s - pricing)
        return loss

    def throughput(self) -> Dict[str, Any]:
        shell, steps = self.shell, self.list_steps
        drivers = [ip for copies in shell.ips.values() for ip in copies]
        log = shell.stage_log()
        figures = self.ip_figures(drivers, sum(stage[0] for stage in log.stages), log)
        model = model_figures(log, self.overlay.manifest, steps)
        if model is not None:
            model["evaluation_included"] = False  # evaluations run on the host, from parameters read back
        busy, wall = shell.busy_s, self.list_wall_s
        figures.update(model=model, lists=shell.lists, calls=shell.calls, list_steps=steps,
                       seconds_per_step=wall / steps if steps else None,
                       host_s_per_step=(wall - busy) / steps if steps else None)
        return {**super().throughput(), **figures}


__all__ = ["BOARD_DDR", "ListOnBoard", "ListShell", "runs_lists"]
