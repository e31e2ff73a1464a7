"""cocotb benches of the CSB PE's memories (rtl/csb/csb_ram.v, rtl/csb/csb_window.v) against plain Python models.

Loaded by tests/rtl/test_csb_memories.py; the bench picks its test from the
top level (``MEMORY_TOP``) and its seed from ``MEMORY_SEED``. Inputs change on
the falling edge and outputs are sampled there, half a cycle after the rising
edge that registered them.
"""

from __future__ import annotations

import os

import cocotb
import numpy as np
from cocotb.clock import Clock
from cocotb.triggers import FallingEdge

CYCLES = 3000


def _unsigned(signal) -> int:
    value = signal.value
    assert value.is_resolvable, f"{signal._name} is not 0/1: {value}"
    return value.to_unsigned()


def _parameters(dut, *names: str) -> list[int]:
    return [int(getattr(dut, name).value) for name in names]


@cocotb.test(skip=os.environ.get("MEMORY_TOP") != "csb_ram")
async def ram_is_read_first_with_optional_forwarding(dut):
    """Random writes with lane enables and random reads on a few addresses, so reads and writes collide often."""
    lanes, lane_bits, depth, bypass = _parameters(dut, "LANES", "LANE_BITS", "DEPTH", "BYPASS")
    rng = np.random.default_rng(int(os.environ["MEMORY_SEED"]))
    lane_mask = (1 << lane_bits) - 1
    Clock(dut.clk, 10, unit="ns").start()
    dut.we.value = 0
    memory = [[0] * lanes for _ in range(depth)]
    for address in range(depth):  # defined contents first
        await FallingEdge(dut.clk)
        dut.we.value = (1 << lanes) - 1
        dut.waddr.value = address
        dut.wdata.value = 0
    expected = None
    collisions = 0
    for _ in range(CYCLES):
        await FallingEdge(dut.clk)
        if expected is not None:
            got = _unsigned(dut.rdata)
            want = sum(v << (lane_bits * i) for i, v in enumerate(expected))
            assert got == want, f"rdata {got:#x}, expected {want:#x}"
        we = int(rng.integers(0, 1 << lanes))
        waddr, raddr = int(rng.integers(0, depth)), int(rng.integers(0, depth))
        data = [int(rng.integers(0, lane_mask + 1)) for _ in range(lanes)]
        dut.we.value, dut.waddr.value, dut.raddr.value = we, waddr, raddr
        dut.wdata.value = sum(v << (lane_bits * i) for i, v in enumerate(data))
        expected = list(memory[raddr])  # read-first
        for lane in range(lanes):
            if we >> lane & 1:
                memory[waddr][lane] = data[lane]
                if bypass and waddr == raddr:
                    expected[lane] = data[lane]
        collisions += bool(we) and waddr == raddr
    assert collisions > CYCLES // (2 * depth), "too few same-address read/write cycles to test the read mode"


@cocotb.test(skip=os.environ.get("MEMORY_TOP") != "csb_window")
async def window_reads_lanes_bytes_at_every_aligned_address(dut):
    """Fill with random words, then read every LANES-aligned window in a random order, one read per cycle."""
    lanes, words = _parameters(dut, "LANES", "WORDS")
    rng = np.random.default_rng(int(os.environ["MEMORY_SEED"]))
    Clock(dut.clk, 10, unit="ns").start()
    data = [int(w) for w in rng.integers(0, 1 << 32, size=words, dtype=np.uint64)]
    for address, word in enumerate(data):
        await FallingEdge(dut.clk)
        dut.we.value, dut.waddr.value, dut.wdata.value = 1, address, word
    stream = b"".join(word.to_bytes(4, "little") for word in data)
    starts = [int(a) for a in rng.permutation(np.arange(0, 4 * words - lanes + 1, lanes))]
    assert starts, "the buffer holds no whole window"
    pending = None
    for start in [*starts, None]:
        await FallingEdge(dut.clk)
        dut.we.value = 0
        if pending is not None:
            want = int.from_bytes(stream[pending:pending + lanes], "little")
            got = _unsigned(dut.rdata)
            assert got == want, f"bytes {pending}..{pending + lanes - 1}: {got:#x}, expected {want:#x}"
        if start is not None:
            dut.raddr.value = start
        pending = start
