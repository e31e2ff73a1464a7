"""The emulated board's watchdog: each IP's generated C++ runs in a worker process the board can kill.

A generated kernel is compiled C++ (:class:`codesign.hw.bridge.AccelBridge`). Run inside the Python process, a
kernel that never returns hangs the notebook for good, and one that crashes (a wild pointer, an abort) takes
Python with it, without a word. So the emulated board runs every ``ap_start`` in a worker forked from the board's
process: the worker inherits the loaded kernel libraries and the emulated DDR, which is one shared anonymous
mapping (:class:`SharedDdr`), so a kernel reads and writes DDR at the very addresses the board gave out. When a
call does not answer within ``timeout_s`` the worker is killed; when the worker dies the signal is named; either
way :class:`KernelFailed` says so, and the next call starts a fresh worker.

Argument words that do not point into the shared DDR (a private copy the board made) are sent by value and
copied into the worker; only DDR is written back, as on the PL. One call at a time; a pipe round trip costs tens
of microseconds, the fork (once, and after a failure) a few milliseconds.

Python 3.8 (the board images'): no newer syntax or library calls.
"""

from __future__ import annotations

import ctypes
import faulthandler
import mmap
import os
import pickle
import select
import signal
import struct
import sys
import tempfile
import time
import weakref
from typing import Any, Callable, Dict, List, Optional, Sequence

import numpy as np

HEADER = struct.Struct("<Q")  # bytes of the pickled message that follows
PR_SET_PDEATHSIG = 1  # prctl(2): the worker gets SIGKILL when the board's process ends
_LIBC = ctypes.CDLL(None)


class KernelFailed(RuntimeError):
    """A kernel call did not return in time, or its process died; the message says which and how."""


class SharedDdr:
    """``size`` bytes of memory shared with every worker forked later: an anonymous ``MAP_SHARED`` mapping, whose
    pages the kernel provides on first touch (a large window costs only what is used)."""

    def __init__(self, size: int) -> None:
        self._map = mmap.mmap(-1, int(size))  # anonymous, MAP_SHARED (the default)
        self.bytes = np.frombuffer(self._map, dtype=np.uint8)
        self.address = self.bytes.ctypes.data

    def holds(self, array: np.ndarray) -> bool:
        """Whether all of ``array``'s bytes lie in the shared mapping."""
        start = array.ctypes.data
        return self.address <= start and start + array.nbytes <= self.address + self.bytes.size


def _read_exact(fd: int, count: int) -> bytes:
    """``count`` bytes from ``fd``, or fewer when it reaches end of file."""
    parts, left = [], count
    while left:
        chunk = os.read(fd, left)
        if not chunk:
            break
        parts.append(chunk)
        left -= len(chunk)
    return b"".join(parts)


def _send(fd: int, message: Any) -> None:
    body = pickle.dumps(message, protocol=4)
    view = memoryview(HEADER.pack(len(body)) + body)
    while view:
        view = view[os.write(fd, view):]


def _captured(call: Callable[[], None], sink: int) -> str:
    """Run ``call()`` with file descriptor 1 sent to the file ``sink`` (emptied first); what it printed (C stdio
    included). The file is opened by the board before the fork: the worker takes no lock a thread of the board's
    process might have held at the fork (``tempfile``'s, ``sys.stdout``'s)."""
    os.ftruncate(sink, 0)
    os.lseek(sink, 0, os.SEEK_SET)
    saved = os.dup(1)
    os.dup2(sink, 1)
    try:
        call()
    finally:
        _LIBC.fflush(None)
        os.dup2(saved, 1)
        os.close(saved)
    os.lseek(sink, 0, os.SEEK_SET)
    chunks = []
    while True:
        chunk = os.read(sink, 1 << 16)
        if not chunk:
            return b"".join(chunks).decode(errors="replace")
        chunks.append(chunk)


def _serve(entries: Dict[str, Callable], requests: int, replies: int, sink: int, parent: int) -> None:
    """The worker's loop: run each requested call, answer with what it printed; end when the board's pipe closes."""
    faulthandler.disable()  # a crash is the board's to report, in one line, not a dump of the worker's stack
    prctl = getattr(_LIBC, "prctl", None)
    if prctl is not None:
        prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:  # the board ended before prctl took effect
        return
    while True:
        header = _read_exact(requests, HEADER.size)
        if len(header) < HEADER.size:
            return
        name, args = pickle.loads(_read_exact(requests, HEADER.unpack(header)[0]))
        copies: List[Any] = []  # arguments sent by value: kept alive through the call
        values = []
        for arg in args:
            if isinstance(arg, bytes):
                copies.append(ctypes.create_string_buffer(arg, max(len(arg), 1)))
                values.append(ctypes.addressof(copies[-1]))
            else:
                values.append(arg)
        _send(replies, _captured(lambda: entries[name](*values), sink))


class KernelWorker:
    """Runs ``entries[name](*args)`` (ctypes functions of the kernel libraries) in a worker process, ``timeout_s``
    seconds at most a call. Array arguments in ``ddr`` pass as addresses, other arrays by value; ``None`` and
    integers as they are."""

    def __init__(self, entries: Dict[str, Callable], ddr: SharedDdr, *, timeout_s: float) -> None:
        if isinstance(timeout_s, bool) or not isinstance(timeout_s, (int, float)) or not timeout_s > 0:
            raise ValueError(f"timeout_s={timeout_s!r} must be a positive number of seconds")
        self.entries, self.ddr, self.timeout_s = dict(entries), ddr, float(timeout_s)
        self.pid: Optional[int] = None
        self.starts = 0  # workers forked so far
        self._pipes = (-1, -1)  # (requests write end, replies read end)
        self._sink: Any = None  # the file the worker's standard output goes to
        self._finalizer: Optional[weakref.finalize] = None

    def _start(self) -> None:
        requests_r, requests_w = os.pipe()
        replies_r, replies_w = os.pipe()
        if self._sink is None:
            self._sink = tempfile.TemporaryFile()
        sys.stdout.flush()
        sys.stderr.flush()
        _LIBC.fflush(None)  # nothing of the board's buffered output may be written again by the worker
        parent = os.getpid()
        pid = os.fork()
        if pid == 0:  # the worker: never returns into the board's code
            status = 0
            try:
                os.close(requests_w)
                os.close(replies_r)
                _serve(self.entries, requests_r, replies_w, self._sink.fileno(), parent)
            except BaseException:  # noqa: BLE001 - the worker reports by ending; the board names it
                status = 70
            finally:
                os._exit(status)
        os.close(requests_r)
        os.close(replies_w)
        self.pid, self._pipes, self.starts = pid, (requests_w, replies_r), self.starts + 1
        self._finalizer = weakref.finalize(self, _end, pid, requests_w, replies_r)

    def call(self, name: str, args: Sequence[Any]) -> str:
        """Run one call; what it printed. :class:`KernelFailed` when it hangs past ``timeout_s`` or dies."""
        if name not in self.entries:
            raise KeyError(f"no kernel {name!r}")
        message = (name, [self._argument(arg) for arg in args])
        if self.pid is None:
            self._start()
        try:
            _send(self._pipes[0], message)
        except BrokenPipeError:
            raise self._failure(name, "ended before the call") from None
        return self._reply(name)

    def _argument(self, arg: Any) -> Any:
        if isinstance(arg, np.ndarray):
            return arg.ctypes.data if self.ddr.holds(arg) else np.ascontiguousarray(arg).tobytes()
        return arg

    def _reply(self, name: str) -> str:
        deadline = time.monotonic() + self.timeout_s
        replies = self._pipes[1]
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                self._stop(signal.SIGKILL)
                raise KernelFailed(f"did not return within {self.timeout_s:g} s; its worker process was killed")
            ready, _, _ = select.select([replies], [], [], left)
            if ready:
                break
        header = _read_exact(replies, HEADER.size)
        if len(header) < HEADER.size:
            raise self._failure(name, "died during the call")
        return pickle.loads(_read_exact(replies, HEADER.unpack(header)[0]))

    def _failure(self, name: str, what: str) -> KernelFailed:
        """The worker ended on its own: reap it and name how."""
        status = self._stop(None)
        if status is not None and os.WIFSIGNALED(status):
            number = os.WTERMSIG(status)
            how = f"killed by signal {number} ({signal.Signals(number).name})"
        elif status is not None and os.WIFEXITED(status):
            how = f"exited with status {os.WEXITSTATUS(status)}"
        else:
            how = "ended"
        return KernelFailed(f"crashed: its process {what}, {how}")

    def _stop(self, sig: Optional[int]) -> Optional[int]:
        """Signal the worker (unless ``sig`` is None), reap it, close the pipes; its wait status."""
        pid, self.pid = self.pid, None
        if self._finalizer is not None:
            self._finalizer.detach()
        for fd in self._pipes:
            os.close(fd)
        self._pipes = (-1, -1)
        if pid is None:
            return None
        if sig is not None:
            os.kill(pid, sig)
        return os.waitpid(pid, 0)[1]

    def close(self) -> None:
        """End the worker (killed: it holds no state of its own) and close its output file."""
        if self.pid is not None:
            self._stop(signal.SIGKILL)
        if self._sink is not None:
            self._sink.close()
            self._sink = None


def _end(pid: int, requests: int, replies: int) -> None:
    """A garbage-collected worker's end: kill and reap it, close its pipes."""
    for fd in (requests, replies):
        try:
            os.close(fd)
        except OSError:
            pass
    try:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    except OSError:
        pass


__all__ = ["KernelFailed", "KernelWorker", "SharedDdr"]
