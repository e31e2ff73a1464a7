"""cocotb 2.x bench of the RTL shell running a call list (``accel_top`` in list mode).

The arena, the list and the golden arena after it come from an ``.npz``
(:func:`codesign.shell.list_sim.run_list_rtl` writes it from a
:class:`codesign.shell.calls.ListCase`). The bench writes the arena at an
address that is not page aligned and the list elsewhere, sets ``in`` and
``out`` to the arena, ``calls`` and ``n_calls`` to the list, starts the IP
once and polls for ap_done, then compares the *whole* arena, plus guard words
on both sides of it, with the golden arena. The memories are the harness's
cocotbext-axi AxiRams (random pauses on every channel when ``ACCEL_PAUSE`` >
0; ``ACCEL_PAUSE`` = 0 gives the fixed-latency memory the cycle model reads).
The register writes of the list are counted and reported, and so is the
sequencer's exact busy time: ``busy_cycles`` = the cycle ``u_ctrl.ap_done``
is high minus the cycle ``u_ctrl.run_start`` is high (sampled at every rising
edge), free of the host's polling grid (the figure
:func:`codesign.step.list_cycles.list_cycles` models).

With ``ACCEL_DDR`` (a JSON object of :class:`codesign.step.list_cycles.DdrTiming`'s
fields) the memories get a deterministic DDR latency and bandwidth model
instead: a :class:`DdrPacer` per AxiRam watches its channels at every edge and
pauses its R and B sources and its W sink (cocotbext-axi's ``pause``
attribute, no code of the library changed) so that a burst's first R beat
comes ``read_latency`` edges after its AR at the earliest, at most
``read_beats`` R beats come in any ``read_window`` edges, a burst's B comes
``write_latency`` edges after its last W beat at the earliest, and W beats are
throttled to about ``write_beats`` in ``write_window`` edges.

Environment: ``ACCEL_LIST`` (the .npz), ``ACCEL_SUMMARY``, ``ACCEL_SEED``,
``ACCEL_PAUSE``, ``ACCEL_TIMEOUT_CYCLES``, ``ACCEL_DATA_BITS`` (the stream word: 32, 64 or 128),
``ACCEL_DDR`` (optional; not with ``ACCEL_PAUSE`` > 0).
"""

from __future__ import annotations

import json
import os
from collections import deque
from pathlib import Path

import cocotb
import numpy as np

from cocotb.triggers import ReadOnly, RisingEdge

from codesign.shell.bench import BIT, Harness
from codesign.shell.ip import SHELL_ARGS
from codesign.step.list_cycles import DdrTiming

ARENA_ADDR = 0x0010_0040
LIST_ADDR = 0x0020_0000  # the list's address, or the first 4 KiB page past the arena and its guards
GUARD_WORDS = 64
GUARD = 0xC0DE_5EED
REPORT_LIMIT = 10
LIST_REGISTERS = ("in", "out", "calls", "n_calls")


def list_address(arena_words: int) -> int:
    """Where the bench puts the descriptors: at :data:`LIST_ADDR`, or past an arena that reaches it (a list never
    lies in its arena, which the driver refuses and the golden arena would not show)."""
    end = ARENA_ADDR + 4 * (arena_words + GUARD_WORDS)
    return max(LIST_ADDR, -(-end // 4096) * 4096)


class CountingHarness(Harness):
    """The harness, counting the register writes the host makes (the figure a list's cost is judged by)."""

    writes = 0

    async def write(self, name: str, value: int, word: int = 0) -> None:
        self.writes += 1
        await super().write(name, value, word)


class DdrPacer:
    """The DDR timing of one AxiRam, kept by pausing its R and B sources (a source reads ``pause`` at the edge
    where it would drive its next item; a paused source keeps its queue and drives nothing new).

    :meth:`step` is called after every edge ``edge`` with the channel signals of the cycle that follows it (so a
    handshake seen is taken at edge ``edge + 1``) and returns the pauses for edge ``edge + 1``. Beats are counted
    as the source drives them: the beats driven so far are the beats handshaken plus the one on the bus."""

    def __init__(self, timing: DdrTiming) -> None:
        self.timing = timing
        self.requested = self.r_moved = self.r_driven = self.b_moved = self.b_driven = 0
        self.r_taken = self.b_taken = False
        self.firsts: deque = deque()  # (first beat's index, earliest edge to drive it) per AR taken
        self.drives: deque = deque()  # edges that drove an R beat, the last window's
        self.b_due: deque = deque()  # earliest edge of each B response not yet driven
        self.takes: deque = deque()  # edges that took a W beat, the last window's

    def step(self, edge: int, ar: tuple, r: tuple, w: tuple, bvalid: bool) -> tuple:
        """(R paused, B paused, W paused) at edge ``edge + 1``; ``ar`` = (ARVALID & ARREADY, ARLEN), ``r`` =
        (RVALID, RREADY), ``w`` = (a W beat handshaken, it is the last), all in the cycle after ``edge``. The W
        sink reads its pause later than the sources (see :class:`codesign.step.list_cycles.DdrTiming`)."""
        t = self.timing
        self.r_moved += self.r_taken
        driven = self.r_moved + r[0]
        if driven > self.r_driven:
            self.drives.append(edge)
            self.r_driven = driven
        if ar[0]:
            self.firsts.append((self.requested, edge + 1 + t.read_latency))
            self.requested += ar[1] + 1
        self.r_taken = bool(r[0] and r[1])
        while self.drives and self.drives[0] <= edge + 1 - t.read_window:
            self.drives.popleft()
        while self.firsts and self.firsts[0][0] < driven:
            self.firsts.popleft()
        r_pause = len(self.drives) >= t.read_beats or bool(
            self.firsts and self.firsts[0][0] == driven and edge + 1 < self.firsts[0][1])
        # B: BREADY is always high, so a B on the bus at an edge is taken there
        self.b_moved += self.b_taken
        if w[0] and w[1]:
            self.b_due.append(edge + 1 + t.write_latency)
        if self.b_moved + bvalid > self.b_driven:
            self.b_due.popleft()
            self.b_driven += 1
        self.b_taken = bool(bvalid)
        if w[0]:
            self.takes.append(edge + 1)
        while self.takes and self.takes[0] <= edge + 2 - t.write_window:
            self.takes.popleft()
        w_pause = t.write_beats < t.write_window and len(self.takes) >= t.write_beats
        return r_pause, bool(self.b_due) and edge + 1 < self.b_due[0], w_pause


async def pace_ddr(dut, bundle: str, ram, timing: DdrTiming) -> None:
    """Run a :class:`DdrPacer` on the AxiRam ``ram`` of m_axi port ``bundle`` from the next edge on."""
    sig = {name: getattr(dut, f"m_axi_{bundle}_{name}") for name in
           ("arvalid", "arready", "arlen", "rvalid", "rready", "wvalid", "wready", "wlast", "bvalid")}
    pacer, edge = DdrPacer(timing), 0
    r_source, b_source, w_sink = ram.read_if.r_channel, ram.write_if.b_channel, ram.write_if.w_channel
    while True:
        await RisingEdge(dut.ap_clk)
        await ReadOnly()
        edge += 1
        v = {name: int(s.value) for name, s in sig.items()}
        r_source.pause, b_source.pause, w_sink.pause = pacer.step(
            edge, (v["arvalid"] and v["arready"], v["arlen"]), (v["rvalid"], v["rready"]),
            (bool(v["wvalid"] and v["wready"]), bool(v["wlast"])), bool(v["bvalid"]))


def ddr_from_env() -> "DdrTiming | None":
    text = os.environ.get("ACCEL_DDR", "")
    return DdrTiming(**json.loads(text)) if text else None


async def watch_busy(dut, marks: dict) -> None:
    """Clock edges (counted from the watcher's start) at which run_start and then ap_done are first seen high."""
    edge = 0
    while "done" not in marks:
        await RisingEdge(dut.ap_clk)
        await ReadOnly()
        edge += 1
        if "start" not in marks and dut.u_ctrl.run_start.value == 1:
            marks["start"] = edge
        elif "start" in marks and dut.u_ctrl.ap_done.value == 1:
            marks["done"] = edge


@cocotb.test()
async def call_list(dut) -> None:
    """One list, one start, one done; the whole arena and its guards compared with the golden arena."""
    case = np.load(os.environ["ACCEL_LIST"])
    summary_path = Path(os.environ["ACCEL_SUMMARY"])
    arena, expected, descriptors = case["arena"], case["expected"], case["descriptors"]
    bench = CountingHarness(dut, pause=float(os.environ.get("ACCEL_PAUSE", "0")),
                            seed=int(os.environ.get("ACCEL_SEED", "1")),
                            data_bits=int(os.environ.get("ACCEL_DATA_BITS", "32")))
    ddr = ddr_from_env()
    if ddr is not None:
        assert float(os.environ.get("ACCEL_PAUSE", "0")) == 0, "ACCEL_DDR and random pauses exclude each other"
        bundles = list(dict.fromkeys(arg.bundle for arg in SHELL_ARGS if arg.kind == "pointer"))
        for bundle, ram in zip(bundles, bench.rams):
            for channel in (ram.read_if.ar_channel, ram.read_if.r_channel, ram.write_if.aw_channel,
                            ram.write_if.w_channel, ram.write_if.b_channel):
                channel.queue_occupancy_limit = ddr.queue_limit  # the port's acceptance and buffering
            cocotb.start_soon(pace_ddr(dut, bundle, ram, ddr))
    await bench.reset()
    guard = np.full(GUARD_WORDS, GUARD, dtype="<u4")
    base = ARENA_ADDR - 4 * GUARD_WORDS
    bench.memory.write(base, np.concatenate([guard, arena.astype("<u4"), guard]).tobytes())
    list_addr = list_address(arena.size)
    bench.memory.write(list_addr, descriptors.astype("<u4").tobytes())
    bench.writes = 0
    marks: dict = {}
    cocotb.start_soon(watch_busy(dut, marks))
    # a list needs the arena (in, out), the list (calls, n_calls) and ap_start; the direct call's counts are unread
    cycles, polls = await bench.run({"in": ARENA_ADDR, "out": ARENA_ADDR, "calls": list_addr,
                                     "n_calls": int(case["n_calls"])},
                                    int(os.environ.get("ACCEL_TIMEOUT_CYCLES", "2000000")), names=LIST_REGISTERS)
    got = np.frombuffer(bench.memory.read(base, 4 * (arena.size + 2 * GUARD_WORDS)), dtype="<u4")
    want = np.concatenate([guard, expected.astype("<u4"), guard])
    wrong = np.flatnonzero(got != want)
    first = [{"word": int(index) - GUARD_WORDS, "expected": f"{int(want[index]):08x}",
              "actual": f"{int(got[index]):08x}"} for index in wrong[:REPORT_LIMIT]]
    ctrl = await bench.read("CTRL")
    busy = marks["done"] - marks["start"] if "done" in marks else -1
    summary = {"words_checked": int(want.size), "mismatches": int(wrong.size) + (cycles < 0), "cycles": cycles,
               "busy_cycles": busy,
               "ctrl_polls": polls, "register_writes": bench.writes, "bursts": bench.bursts,
               "burst_errors": bench.burst_errors[:REPORT_LIMIT], "first_mismatches": first,
               "idle_after": bool(ctrl & BIT["ap_idle"])}
    summary_path.parent.mkdir(parents=True, exist_ok=True)
    summary_path.write_text(json.dumps(summary, indent=1))
    assert cycles >= 0, "the list never reached ap_done"
    assert not bench.burst_errors, f"bursts break the AXI rules: {bench.burst_errors[:3]}"
    assert wrong.size == 0, f"{wrong.size} arena words differ from the golden arena, first: {first}"
