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

Environment: ``ACCEL_LIST`` (the .npz), ``ACCEL_SUMMARY``, ``ACCEL_SEED``,
``ACCEL_PAUSE``, ``ACCEL_TIMEOUT_CYCLES``, ``ACCEL_DATA_BITS`` (the stream word: 32, 64 or 128).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import cocotb
import numpy as np

from cocotb.triggers import ReadOnly, RisingEdge

from codesign.shell.bench import BIT, Harness

ARENA_ADDR = 0x0010_0040
LIST_ADDR = 0x0020_0000
GUARD_WORDS = 64
GUARD = 0xC0DE_5EED
REPORT_LIMIT = 10
LIST_REGISTERS = ("in", "out", "calls", "n_calls")


class CountingHarness(Harness):
    """The harness, counting the register writes the host makes (the figure a list's cost is judged by)."""

    writes = 0

    async def write(self, name: str, value: int, word: int = 0) -> None:
        self.writes += 1
        await super().write(name, value, word)


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
    await bench.reset()
    guard = np.full(GUARD_WORDS, GUARD, dtype="<u4")
    base = ARENA_ADDR - 4 * GUARD_WORDS
    bench.memory.write(base, np.concatenate([guard, arena.astype("<u4"), guard]).tobytes())
    bench.memory.write(LIST_ADDR, descriptors.astype("<u4").tobytes())
    bench.writes = 0
    marks: dict = {}
    cocotb.start_soon(watch_busy(dut, marks))
    # a list needs the arena (in, out), the list (calls, n_calls) and ap_start; the direct call's counts are unread
    cycles, polls = await bench.run({"in": ARENA_ADDR, "out": ARENA_ADDR, "calls": LIST_ADDR,
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
