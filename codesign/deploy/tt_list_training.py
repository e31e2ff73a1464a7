"""The TT loop with every layer step as call lists on a board's tt1 and tt2 IPs (paper 003: the step on the PL).

:class:`IpShell` runs a list (:class:`~codesign.contracts.calls.Call`) on the
overlay's first tt1 or tt2 IP through its driver (:meth:`AccelIP.run_list`):
one start and one done per list, the arena in one device buffer per size.
:class:`TtListBoardTrainer` is :class:`codesign.loops.tt_lists.TtListTrainer`
on that shell, with the set-up design.json records, so a board trains with
numpy and pynq alone and ends with the golden loop's state bit for bit.

Data stay in place: each built set of lists runs in its own device buffer,
written and flushed whole once; on every step the host flushes only the words
it writes (the input and core codes, the output gradient) and invalidates
only those it reads (the output, the input and core gradients, the records
whose sums move the scales).
"""

from __future__ import annotations

from typing import Any, Dict

import numpy as np

from codesign.contracts.calls import encode_list
from codesign.deploy.board import OnBoard
from codesign.deploy.driver import flush_words, invalidate_words
from codesign.deploy.manifest import DeployError
from codesign.deploy.tt_training import step_hardware
from codesign.loops.tt import TtTrainSetup
from codesign.loops.tt_lists import TtListTrainer
from codesign.step.tt.step_lists import SHARE_PRODUCTS


class IpShell:
    """Lists on the overlay's ``tt1`` and ``tt2`` IPs (``spec1``/``spec2``: their builds; ``copies``: how many of
    each, among which a phase's lists are shared, in the manifest's order)."""

    def __init__(self, overlay) -> None:
        self.overlay = overlay
        names: Dict[str, list] = {"tt1": [], "tt2": []}
        for ip in overlay.manifest["ips"]:
            names.setdefault(ip["pe"], []).append(ip["name"])
        missing = [pe for pe in ("tt1", "tt2") if not names[pe]]
        if missing:
            raise DeployError(f"design {overlay.manifest['design']!r} has no {' or '.join(missing)} IP")
        self.ips = {pe: [overlay.accelerator(name) for name in names[pe]] for pe in ("tt1", "tt2")}
        self.copies = (len(self.ips["tt1"]), len(self.ips["tt2"]))
        self.share_products = SHARE_PRODUCTS  # the fewest products a shared list takes (step_lists.share)
        hardware = step_hardware(overlay.manifest)
        self.spec1, self.spec2 = hardware.pe1, hardware.pe2
        self._buffers: Dict[tuple, Any] = {}
        self._descriptors: Dict[str, Any] = {}
        self.lists = self.calls = 0

    def _buffer(self, name: str, words: int):
        from pynq import allocate

        key = (name, words)
        if key not in self._buffers:
            self._buffers[key] = allocate(shape=(words,), dtype=np.uint32, target=self.overlay.device)
        return self._buffers[key]

    def arena(self, lists, key) -> Any:
        """The device buffer ``lists`` runs in: one per ``key`` (a layer at its shapes), its image written and
        flushed once; lists of the same key lay their tensors out alike."""
        key = ("arena", key)
        if key in self._buffers and self._buffers[key].size != lists.arena.size:
            raise DeployError(f"arena {key[1]}: lists of {lists.arena.size} words meet a buffer of "
                              f"{self._buffers[key].size}")
        if key not in self._buffers:
            if len(self._buffers) > 16:  # lists rebuilt at new scales or shapes: drop the oldest arenas
                for stale in [k for k in self._buffers if k[0] == "arena"][:8]:
                    self._buffers.pop(stale).freebuffer()
            from pynq import allocate

            buffer = allocate(shape=(lists.arena.size,), dtype=np.uint32, target=self.overlay.device)
            buffer[:] = lists.arena
            flush_words(buffer, buffer.size)
            self._buffers[key] = buffer
        return self._buffers[key]

    def flush(self, arena, ranges) -> None:
        for start, words in ranges:
            flush_words(arena, words, start)

    def invalidate(self, arena, ranges) -> None:
        for start, words in ranges:
            invalidate_words(arena, words, start)

    def run_phase(self, phase, arena) -> Any:
        """A phase's lists (``(pe, calls)`` each, on different IPs, writing disjoint words) run in place over the
        device buffer ``arena`` (:meth:`arena`) side by side: every IP started, then each waited for."""
        started = []
        for pe, calls in phase:
            ip = self.ips[pe][sum(other == pe for other, _ in phase[:len(started)])]  # a PE's lists on its copies
            words = encode_list(calls)
            descriptors = self._descriptors.get(ip.ip_name)  # one buffer an IP: its calls register keeps the address
            if descriptors is None or descriptors.size < words.size:
                descriptors = self._descriptors[ip.ip_name] = self._buffer(f"calls {ip.ip_name}",
                                                                          max(words.size, 1 << 12))
            descriptors[:words.size] = words
            ip.start_list(arena, descriptors, len(calls))
            started.append(ip)
            self.lists += 1
            self.calls += len(calls)
        for ip in started:
            ip.finish_list()
        return arena


class TtListBoardTrainer(OnBoard, TtListTrainer):
    """The design's NumPy TT loop with every layer step as call lists on the overlay's TT IPs."""

    def __init__(self, overlay, design=None, **setup_changes) -> None:
        self.bind(overlay, design)
        setup = self.loop_setup("tt", TtTrainSetup, setup_changes)
        self.shell = IpShell(overlay)
        super().__init__(setup, self.shell)


__all__ = ["IpShell", "TtListBoardTrainer"]
