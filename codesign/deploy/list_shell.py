"""A list trainer's shell on a board: call lists run on the overlay's IPs, the arena in one device buffer.

Every list trainer (:mod:`codesign.loops.tt_lists`, :mod:`codesign.loops.fb_lists`) drives a *shell*:
``arena(lists, key)``, ``flush``, ``invalidate`` and ``run_phase``. :class:`ListShell` is that shell on the
overlay's IPs of the PEs it is given, through each driver's :meth:`~codesign.deploy.driver.AccelIP.start_list`:
one start and one done per list. A list's descriptors are encoded once and kept (a step runs the same lists
every time, and encoding them is host time), then copied into the IP's descriptor buffer before each start,
which flushes them. A family's shell adds what its trainer reads (the TT builds, the FP-MAC array's).
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any, Dict, Mapping

import numpy as np

from codesign.contracts.calls import encode_list
from codesign.deploy.driver import flush_words, invalidate_words
from codesign.deploy.manifest import DeployError

KEPT_ENCODINGS = 64  # lists whose descriptor words are kept (a step's lists at a few shapes and widths)
KEPT_ARENAS = 16  # arenas kept before the oldest are freed (lists rebuilt at new scales or shapes)


class ListShell:
    """Lists on the overlay's IPs of each PE in ``specs`` (``{pe: build}``, in the manifest's order of IPs: a
    phase's lists for one PE go to its copies in turn). Counts ``lists`` and ``calls``."""

    def __init__(self, overlay, specs: Mapping[str, Any]) -> None:
        self.overlay, self.specs = overlay, dict(specs)
        names: Dict[str, list] = {pe: [] for pe in self.specs}
        for ip in overlay.manifest["ips"]:
            if ip["pe"] in names:
                names[ip["pe"]].append(ip["name"])
        missing = [pe for pe in self.specs if not names[pe]]
        if missing:
            raise DeployError(f"design {overlay.manifest['design']!r} has no {' or '.join(missing)} IP")
        self.ips = {pe: [overlay.accelerator(name) for name in names[pe]] for pe in self.specs}
        self._buffers: Dict[tuple, Any] = {}
        self._descriptors: Dict[str, Any] = {}
        self._encoded: "OrderedDict[int, tuple]" = OrderedDict()  # id(calls) -> (calls, words): calls kept alive
        self.lists = self.calls = 0

    def _buffer(self, name: str, words: int):
        from pynq import allocate

        key = (name, words)
        if key not in self._buffers:
            self._buffers[key] = allocate(shape=(words,), dtype=np.uint32, target=self.overlay.device)
        return self._buffers[key]

    def arena(self, lists, key) -> Any:
        """The device buffer ``lists`` (anything with an ``arena`` image) runs in: one per ``key``, its image
        written and flushed once; lists of the same key lay their tensors out alike."""
        key = ("arena", key)
        if key in self._buffers and self._buffers[key].size != lists.arena.size:
            raise DeployError(f"arena {key[1]}: lists of {lists.arena.size} words meet a buffer of "
                              f"{self._buffers[key].size}")
        if key not in self._buffers:
            if len(self._buffers) > KEPT_ARENAS:
                for stale in [k for k in self._buffers if k[0] == "arena"][:KEPT_ARENAS // 2]:
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

    def encoded(self, calls) -> np.ndarray:
        """The descriptor words of ``calls``, encoded once per list."""
        known = self._encoded.get(id(calls))
        if known is None or known[0] is not calls:
            known = self._encoded[id(calls)] = (calls, encode_list(calls))
            if len(self._encoded) > KEPT_ENCODINGS:
                self._encoded.popitem(last=False)
        return known[1]

    def run_phase(self, phase, arena) -> Any:
        """A phase's lists (``(pe, calls)`` each, on different IPs, writing disjoint words) run in place over the
        device buffer ``arena`` (:meth:`arena`) side by side: every IP started, then each waited for."""
        started = []
        for pe, calls in phase:
            ip = self.ips[pe][sum(other == pe for other, _ in phase[:len(started)])]  # a PE's lists on its copies
            words = self.encoded(calls)
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


__all__ = ["ListShell"]
