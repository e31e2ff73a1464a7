"""cocotb bench of the shell's data movers on their own, at a wide data bus: what a last, part-used beat carries.

``MOVER_TOP`` is ``accel_mm2s`` or ``accel_s2mm`` (``DATA_BITS`` a parameter
of the build). For every count ``n`` of 32-bit words from 1 to three beats
and a half, at a beat-aligned address:

* ``accel_mm2s`` over a cocotbext-axi ``AxiRamRead`` filled with distinct
  non-zero words: the PE side receives ceil(n / parts) beats, the words
  in place, and the parts of the last beat past ``n`` as 0 (the memory there
  is not 0);
* ``accel_s2mm`` into an ``AxiRamWrite`` filled with a guard word: it takes
  exactly ceil(n / parts) PE words, writes their first ``n`` parts and leaves
  every word after them as it was (WSTRB).

Random input gaps and backpressure on the PE side; ``busy`` must fall.
"""

from __future__ import annotations

import logging
import os

import cocotb
import numpy as np
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, FallingEdge, RisingEdge
from cocotbext.axi import AxiRamRead, AxiRamWrite, AxiReadBus, AxiWriteBus

GUARD = 0xC0DE_5EED
MEMORY_BYTES = 1 << 16
BASE = 0x1000


def _setup(dut):
    logging.getLogger(f"cocotb.{dut._name}").setLevel(logging.WARNING)
    Clock(dut.clk, 10, unit="ns").start()
    return int(os.environ["MOVER_DATA_BITS"]) // 32, np.random.default_rng(int(os.environ.get("MOVER_SEED", "1")))


async def _start(dut, n: int) -> None:
    await FallingEdge(dut.clk)
    dut.addr.value, dut.n.value, dut.start.value = BASE, n, 1
    await FallingEdge(dut.clk)
    dut.start.value = 0


@cocotb.test()
async def last_beat(dut) -> None:
    parts, rng = _setup(dut)
    reader = os.environ["MOVER_TOP"] == "accel_mm2s"
    if reader:
        ram = AxiRamRead(AxiReadBus.from_prefix(dut, "m_axi"), dut.clk, dut.rst, size=MEMORY_BYTES)
        words = np.arange(1, 4 * parts + 1, dtype=np.uint32) * np.uint32(0x0101_0101)
        ram.write(BASE, words.astype("<u4").tobytes())
        dut.in_ready.value = 0
    else:
        ram = AxiRamWrite(AxiWriteBus.from_prefix(dut, "m_axi"), dut.clk, dut.rst, size=MEMORY_BYTES)
        dut.out_valid.value, dut.out_data.value = 0, 0
    dut.rst.value, dut.start.value = 1, 0
    await ClockCycles(dut.clk, 3)
    dut.rst.value = 0
    for n in range(1, 3 * parts + parts // 2 + 2):
        beats = -(-n // parts)
        if reader:
            got = await _read(dut, n, beats, rng)
            expected = [int.from_bytes(words[b * parts:(b + 1) * parts].astype("<u4").tobytes(), "little")
                        & ((1 << (32 * min(parts, n - b * parts))) - 1) for b in range(beats)]
            assert got == expected, f"n={n}: the PE got {[hex(v) for v in got]}, expected {[hex(v) for v in expected]}"
        else:
            ram.write(BASE, np.full(4 * parts + 4, GUARD, dtype="<u4").tobytes())
            sent = [sum(int(rng.integers(0, 1 << 32)) << (32 * p) for p in range(parts)) for _ in range(beats + 1)]
            taken = await _write(dut, n, sent, rng)
            assert taken == beats, f"n={n}: took {taken} PE words, expected {beats}"
            flat = [(word >> (32 * p)) & 0xFFFF_FFFF for word in sent[:beats] for p in range(parts)]
            memory = np.frombuffer(ram.read(BASE, 4 * (4 * parts + 4)), dtype="<u4")
            assert [int(v) for v in memory[:n]] == flat[:n], f"n={n}: words written wrong"
            assert all(int(v) == GUARD for v in memory[n:]), f"n={n}: a word past n_out was written"


async def _read(dut, n: int, beats: int, rng) -> list[int]:
    await _start(dut, n)
    got = []
    while dut.busy.value == 1 or not got:
        dut.in_ready.value = int(rng.random() < 0.7)
        await RisingEdge(dut.clk)  # the values the edge samples (before its register updates)
        if dut.in_valid.value == 1 and dut.in_ready.value == 1:
            got.append(int(dut.in_data.value))
        await FallingEdge(dut.clk)
        assert len(got) <= beats
    dut.in_ready.value = 0
    return got


async def _write(dut, n: int, sent: list[int], rng) -> int:
    await _start(dut, n)
    taken = 0
    while dut.busy.value == 1:
        valid = rng.random() < 0.7
        dut.out_valid.value, dut.out_data.value = int(valid), sent[taken]
        await RisingEdge(dut.clk)  # the values the edge samples (before its register updates)
        taken += int(valid and dut.out_ready.value == 1)
        await FallingEdge(dut.clk)
    dut.out_valid.value = 0
    return taken
