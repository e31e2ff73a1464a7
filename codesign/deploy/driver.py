"""The PYNQ driver of one accelerator IP: ``run(words_in, n_out, n_transactions) -> words_out``.

Every codesign IP is a stream PE inside the same accelerator shell
(:mod:`codesign.shell.ip`), so one driver class serves them all; what
differs per IP (its VLNV, register offsets, buffer sizes) comes from its
design.json entry. :func:`driver_class` makes the subclass PYNQ binds to the
IP's VLNV (``bindto``), before the overlay is opened.

One call: copy the words into the input buffer and flush those words, write
the two buffer addresses and three counts, set ``ap_start``, poll ``CTRL``
until ``ap_done`` (or raise :class:`AccelTimeout`), invalidate the output
words and return a copy of the first ``n_out``. Cache maintenance covers the
words a call uses, never the whole buffer. The two buffers come from
:func:`pynq.allocate` once, sized by the manifest, and are reused; they grow
(one new allocation) only for a call larger than any before.
"""

from __future__ import annotations

import time
from typing import ClassVar

import numpy as np
from pynq import DefaultIP, allocate

from codesign.deploy.manifest import DeployError
from codesign.contracts import shell
from codesign.contracts.calls import DESCRIPTOR_WORDS

WORD = np.dtype(np.uint32)
MAX_COUNT = (1 << 32) - 1  # the count registers are 32 bits
DEFAULT_TIMEOUT_S = 10.0
MIN_BUFFER_WORDS = 1024
BUSY_POLLS = 1000  # register reads before the poll loop starts sleeping
POLL_SLEEP_S = 1e-4
CTRL_BIT = {name: 1 << bit for name, bit in shell.CTRL_BITS.items()}
CHECKED_LISTS = 16  # distinct lists an IP keeps decoded and checked (a step's lists, with room)


def flush_words(buffer, words: int, start: int = 0) -> None:
    """Flush only words ``[start, start + words)`` of ``buffer`` to DDR: a slice of a ``PynqBuffer`` carries its own
    offset and length, so the cache maintenance costs what the call uses, not the whole buffer."""
    if words:
        buffer[start:start + words].flush()


def invalidate_words(buffer, words: int, start: int = 0) -> None:
    """Invalidate only words ``[start, start + words)`` of ``buffer`` (see :func:`flush_words`)."""
    if words:
        buffer[start:start + words].invalidate()


def clear_list_ends(arena, lists) -> None:
    """Zero the ``done`` word of each list's last record and flush it (``lists``: their calls), before any of them
    starts: a record an earlier list left in that slot would read as the list's end, so a list that stopped at a
    refused call would pass for finished. All at once, while no IP runs: writing back a cache line can cover a
    neighbouring record another IP is writing."""
    from codesign.contracts.calls import RECORD

    ends = [calls[-1].record // 4 + RECORD["done"] if calls else -1 for calls in lists]
    if any(not 0 <= end < arena.size for end in ends):
        raise AccelInputError(f"a list's last record lies outside the arena of {arena.size} words, or a list is empty")
    for end in ends:
        arena[end] = 0
        flush_words(arena, 1, end)


def read_records(arena, offsets) -> list:
    """The records of calls whose record offsets (bytes into ``arena``) are ``offsets``: each invalidated (eight
    words, nothing more) and decoded (:func:`codesign.contracts.calls.decode_record`)."""
    from codesign.contracts.calls import RECORD_WORDS, decode_record

    records = []
    for offset in offsets:
        invalidate_words(arena, RECORD_WORDS, int(offset) // 4)
        records.append(decode_record(arena[int(offset) // 4:int(offset) // 4 + RECORD_WORDS]))
    return records


class AccelTimeout(DeployError):
    """``ap_done`` did not rise within the time-out after ``ap_start``."""


class AccelInputError(DeployError, ValueError):
    """The words or counts handed to :meth:`AccelIP.run` are not what the IP takes (nothing was written)."""


def _count(name: str, value: object, low: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or not low <= int(value) <= MAX_COUNT:
        raise AccelInputError(f"{name}={value!r} must be an integer in [{low}, {MAX_COUNT}]")
    return int(value)


class AccelIP(DefaultIP):
    """Driver of one codesign accelerator IP (subclassed per VLNV by :func:`driver_class`)."""

    manifest_entry: ClassVar[dict] = {}
    timeout_s: float = DEFAULT_TIMEOUT_S

    def __init__(self, description: dict) -> None:
        super().__init__(description)
        entry = self.manifest_entry
        if not entry:
            raise DeployError("AccelIP is bound through driver_class(manifest IP entry), not used directly")
        self.ip_name, self.pe = entry["name"], entry["pe"]
        self.offsets = dict(entry["registers"])
        self._capacity = {name: int(buffer.get("max_words", 0)) for name, buffer in entry.get("buffers", {}).items()}
        self._buffers: dict[str, np.ndarray] = {}
        # calls made; seconds from ap_start until the host saw ap_done, over all calls (a host that works beside a
        # started list sees it when its work is done: an upper bound on the IP's own)
        self.calls, self.busy_s = 0, 0.0
        self._pending: tuple[float, int] | None = None  # (ap_start time, output words) of a started call
        self._pending_list: tuple | None = None  # (ap_start time, arena, calls) of a started list
        self._checked_lists: dict = {}  # (descriptor bytes, arena bytes) -> the calls, decoded and checked
        self._list_armed = True  # n_calls may be non-zero (run_list, or a process before this one): clear it once
        self._held: dict[tuple, int] = {}  # (register, word) -> what this driver last wrote there (it persists)
        self.stream_bits = int(entry.get("spec", {}).get("stream_bits", 32))  # the PE's stream word (bits)
        # its shell keeps the accumulation buffer (a bool: the manifest check refuses anything else)
        self.held_sums = bool(entry.get("held_sums", True))

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.ip_name} ({self.pe}) at {self.mmio.base_addr:#x}>"

    # -- buffers

    def buffer(self, name: str, words: int) -> np.ndarray:
        """The ``in``/``out`` buffer holding at least ``words`` words (allocated once, grown only when needed)."""
        current = self._buffers.get(name)
        if current is not None and current.size >= words:
            return current
        size = max(words, self._capacity.get(name, 0), MIN_BUFFER_WORDS)
        if current is not None:
            size = max(size, 2 * current.size)
            current.freebuffer()
        self._buffers[name] = allocate(shape=(size,), dtype=WORD, target=self.device)
        return self._buffers[name]

    # -- registers

    def _write_register(self, name: str, value: int, words: int = 1, *, unless_held: bool = False) -> None:
        """Write an argument register (``words`` 32-bit words). ``unless_held``: skip each word it already holds
        from this driver's last write: the shell's argument registers keep their values between
        calls (only a reset clears them, and a reset comes with a new overlay and new drivers), so a step's lists
        over the same arena write only what changes."""
        for i in range(words):  # word by word: a pointer's high word seldom changes (below 4 GiB, never)
            word = (value >> (32 * i)) & 0xFFFF_FFFF
            if not (unless_held and self._held.get((name, i)) == word):
                self.mmio.write(self.offsets[name] + 4 * i, word)
                self._held[(name, i)] = word

    def _status(self) -> int:
        return self.mmio.read(self.offsets["CTRL"])

    @staticmethod
    def describe_ctrl(ctrl: int) -> str:
        return ", ".join(f"{name}={ctrl >> bit & 1}" for name, bit in shell.CTRL_BITS.items())

    # -- the call

    def run(self, words_in: np.ndarray, n_out: int, n_transactions: int, *,
            timeout_s: float | None = None) -> np.ndarray:
        """Run ``n_transactions`` transactions on ``words_in`` (1-D uint32); return the ``n_out`` output words."""
        self.start(words_in, n_out, n_transactions)
        return self.finish(timeout_s=timeout_s)

    def start(self, words_in: np.ndarray, n_out: int, n_transactions: int) -> None:
        """Start a call (as :meth:`run`) and return at once, so that several IPs can work side by side;
        :meth:`finish` waits for it."""
        if not isinstance(words_in, np.ndarray) or words_in.dtype != WORD or words_in.ndim != 1:
            shape = getattr(words_in, "shape", None)
            dtype = getattr(words_in, "dtype", type(words_in).__name__)
            raise AccelInputError(f"IP {self.ip_name}: words_in must be a 1-D numpy uint32 array, "
                                  f"got {dtype} of shape {shape}")
        _count("n_out", n_out, 0)
        _count("n_transactions", n_transactions, 1)  # both checked before anything is written
        self.input_words(words_in.size)[:] = words_in
        self.start_filled(words_in.size, n_out, n_transactions)

    def input_words(self, n_in: int) -> np.ndarray:
        """The first ``n_in`` words of the input buffer, for a host to write a call into in place (then
        :meth:`start_filled`): a stage's words go straight into the DMA buffer, with no copy on the way."""
        n_in = _count("n_in", n_in, 0)
        self._check_free()
        return self.buffer("in", n_in)[:n_in]

    def start_filled(self, n_in: int, n_out: int, n_transactions: int) -> None:
        """Start a call whose ``n_in`` input words the host has written into :meth:`input_words` (as :meth:`start`)."""
        n_in = _count("n_in", n_in, 0)
        n_out = _count("n_out", n_out, 0)
        n_transactions = _count("n_transactions", n_transactions, 1)
        self._check_free()
        in_buffer = self._buffers.get("in")
        if in_buffer is None or in_buffer.size < n_in:
            raise DeployError(f"IP {self.ip_name}: start_filled of {n_in} words without input_words({n_in}) first")
        out_buffer = self.buffer("out", n_out)
        flush_words(in_buffer, n_in)
        flush_words(out_buffer, n_out)  # no dirty line of ours may land on the IP's output later
        self._write_register("in", in_buffer.physical_address, shell.POINTER_BITS // 32)
        self._write_register("out", out_buffer.physical_address, shell.POINTER_BITS // 32)
        self._write_register("n_in", n_in)
        self._write_register("n_out", n_out)
        self._write_register("n_transactions", n_transactions)
        if self._list_armed:
            self._write_register("n_calls", 0)
            self._list_armed = False
        self._pending = (time.perf_counter(), n_out)
        self.mmio.write(self.offsets["CTRL"], CTRL_BIT["ap_start"])

    def run_list(self, arena, descriptors, n_calls: int, *, timeout_s: float | None = None) -> int:
        """Run a call list (:mod:`codesign.contracts.calls`): ``n_calls`` descriptors at the start of the
        ``descriptors`` buffer, every block an offset into the ``arena`` buffer (both :func:`pynq.allocate`
        uint32 buffers; the caller has flushed the arena words it wrote). Every descriptor is decoded and
        checked to stay inside the arena, in whole beats, before a register is written; the descriptors are
        flushed here. At most eight register writes: the arena's address as ``in`` and ``out``, the list's
        as ``calls``, ``n_calls`` (each only when it differs from what this driver last wrote there), and
        ap_start. After ap_done the last call's record is read (eight words): a list that
        stopped at a refused call raises, naming it. Returns the calls run. The caller invalidates the words it
        reads back (:func:`invalidate_words`; :func:`read_records`)."""
        self.start_list(arena, descriptors, n_calls)
        return self.finish_list(timeout_s=timeout_s)

    def start_list(self, arena, descriptors, n_calls: int, *, flush: bool = True, clear_end: bool = True) -> None:
        """Start a call list (as :meth:`run_list`) and return at once, so that several IPs run their lists side by
        side on one arena (lists that write disjoint words); :meth:`finish_list` waits for it. ``flush=False``:
        the caller flushed the descriptors when it wrote them and has not written them since (a list kept in a
        buffer of its own, run every step). ``clear_end=False``: the caller cleared the last record's ``done``
        word (:func:`clear_list_ends`: lists side by side clear theirs before the first starts)."""
        calls = self._checked_list(arena, descriptors, n_calls)
        self._check_free()
        if clear_end:
            clear_list_ends(arena, [calls])
        if flush:
            flush_words(descriptors, len(calls) * DESCRIPTOR_WORDS)
        for name, value in (("in", arena.physical_address), ("out", arena.physical_address),
                            ("calls", descriptors.physical_address)):
            self._write_register(name, value, shell.POINTER_BITS // 32, unless_held=True)
        self._write_register("n_calls", len(calls), unless_held=True)
        self._pending_list = (time.perf_counter(), arena, calls)
        self.mmio.write(self.offsets["CTRL"], CTRL_BIT["ap_start"])
        self._list_armed = True  # the next direct call clears n_calls first

    def finish_list(self, *, timeout_s: float | None = None) -> int:
        """Wait for the list :meth:`start_list` began (``timeout_s`` from its ``ap_start``); the calls it ran (see
        :meth:`run_list`)."""
        if self._pending_list is None:
            raise DeployError(f"IP {self.ip_name}: finish_list() without a started list")
        (started, arena, calls), self._pending_list = self._pending_list, None
        self._wait_done(started, self.timeout_s if timeout_s is None else float(timeout_s))
        self.busy_s += time.perf_counter() - started
        ran = self._list_outcome(arena, calls)
        self.calls += ran
        return ran

    def _checked_list(self, arena, descriptors, n_calls: int) -> list:
        """The decoded calls of a list this IP can run as written, or an :class:`AccelInputError`."""
        from codesign.contracts.calls import CallListError, check_list, decode_list

        hls_export = self.manifest_entry.get("ip_route", "hls") == "hls"  # no route recorded: an HLS-route build
        if hls_export and not getattr(self.device, "runs_generated_cpp", False):
            raise AccelInputError(f"IP {self.ip_name} is the Vitis HLS export, whose call lists run in C "
                                  "simulation only: build the RTL route (codesign build --ip-route rtl) to run lists")
        beat = self.stream_bits // 8
        for name, buffer in (("arena", arena), ("descriptors", descriptors)):
            if getattr(buffer, "physical_address", None) is None or buffer.dtype != WORD or buffer.ndim != 1:
                raise AccelInputError(f"IP {self.ip_name}: {name} must be a 1-D uint32 buffer from pynq.allocate")
            if buffer.physical_address % beat:
                raise AccelInputError(f"IP {self.ip_name}: {name} at {buffer.physical_address:#x} is not aligned "
                                      f"to the {beat}-byte beat the movers read")
        n_calls = _count("n_calls", n_calls, 1)
        lists = (descriptors.physical_address, descriptors.physical_address + n_calls * DESCRIPTOR_WORDS * 4)
        if lists[0] < arena.physical_address + arena.nbytes and arena.physical_address < lists[1]:
            raise AccelInputError(f"IP {self.ip_name}: the descriptors lie inside the arena, where calls may "
                                  "write over them")
        # a step runs the same lists every time: decoded and checked once per distinct list and arena size
        key = (np.asarray(descriptors[:n_calls * DESCRIPTOR_WORDS]).tobytes(), arena.nbytes)
        if key not in self._checked_lists:
            try:
                calls = decode_list(descriptors, n_calls)
                check_list(calls, arena.nbytes, self.stream_bits, held_sums=self.held_sums)
            except CallListError as error:
                raise AccelInputError(f"IP {self.ip_name}: call list: {error}") from None
            if len(self._checked_lists) >= CHECKED_LISTS:
                self._checked_lists.pop(next(iter(self._checked_lists)))
            self._checked_lists[key] = calls
        return self._checked_lists[key]

    def _list_outcome(self, arena, calls: list) -> int:
        """Calls the list ran: all of them when the last call's record is done with status 0; else the list
        stopped at a refused call, named in the error (the IP must then be reset)."""
        from codesign.contracts.calls import RECORD_DONE

        last = read_records(arena, [calls[-1].record])[0]
        if last["done"] == RECORD_DONE and last["status"] == 0:
            return len(calls)
        for index, record in enumerate(read_records(arena, [call.record for call in calls])):
            if record["done"] == RECORD_DONE and record["status"] != 0:
                raise DeployError(f"IP {self.ip_name}: call {index} of the list was refused (status "
                                  f"{record['status']}); the list stopped there and the IP must be reset (reload "
                                  "the overlay)")
        raise DeployError(f"IP {self.ip_name}: the list's last record was not written, and no call reports a refusal")

    def _check_free(self) -> None:
        """Refuse to touch the buffers of a call still pending, or of an IP the PL left busy."""
        if self._pending is not None:
            raise DeployError(f"IP {self.ip_name} was started and not finished: call finish() first")
        if self._pending_list is not None:
            raise DeployError(f"IP {self.ip_name} was started on a list and not finished: call finish_list() first")
        ctrl = self._status()
        if not ctrl & CTRL_BIT["ap_idle"]:
            raise DeployError(f"IP {self.ip_name} is busy ({self.describe_ctrl(ctrl)}): an earlier call never "
                              "finished; reload the overlay to reset the PL")

    def finish(self, *, timeout_s: float | None = None) -> np.ndarray:
        """Wait for the call :meth:`start` began (``timeout_s`` from its ``ap_start``); return its output words."""
        if self._pending is None:
            raise DeployError(f"IP {self.ip_name}: finish() without a started call")
        (started, n_out), self._pending = self._pending, None
        self._wait_done(started, self.timeout_s if timeout_s is None else float(timeout_s))
        self.busy_s += time.perf_counter() - started
        self.calls += 1
        out_buffer = self._buffers["out"]
        invalidate_words(out_buffer, n_out)
        return np.array(out_buffer[:n_out], dtype=WORD)

    def _wait_done(self, started: float, timeout_s: float) -> None:
        polls = 0
        while True:
            ctrl = self._status()
            if ctrl & CTRL_BIT["ap_done"]:
                return
            # an emulated board knows when a run will never finish (its kernel stalled, hung or crashed): no wait
            reason = getattr(self.device, "stall_reason", lambda name: None)(self.ip_name)
            if reason:
                raise AccelTimeout(f"IP {self.ip_name}: ap_done will not rise ({self.describe_ctrl(ctrl)}): {reason}")
            if time.perf_counter() - started > timeout_s:
                raise AccelTimeout(f"IP {self.ip_name}: ap_done did not rise within {timeout_s:g} s of ap_start "
                                   f"({self.describe_ctrl(ctrl)}); the kernel is stuck, or waits for input words "
                                   "the call did not send")
            polls += 1
            if polls > BUSY_POLLS:
                time.sleep(POLL_SLEEP_S)


def driver_class(entry: dict) -> type[AccelIP]:
    """A new :class:`AccelIP` subclass bound to ``entry['vlnv']``; PYNQ registers it on creation (the latest wins)."""
    name = "".join(part.capitalize() for part in entry["top"].split("_")) + "Driver"
    cls = type(name, (AccelIP,), {"bindto": [entry["vlnv"]], "manifest_entry": dict(entry),
                                  "__doc__": f"Driver of IP {entry['name']} ({entry['pe']}), {entry['vlnv']}."})
    return cls
