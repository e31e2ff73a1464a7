"""cocotb bench of ``rtl/accel/accel_round.v`` on its own: every run of a transaction file, word for word.

The file (``ROUND_VECTORS``; the format of tests/rtl/accel_round_check.cpp: input = two descriptor words then the
accumulators, expected = the words sent then sum_abs low/high, saturated) is what the golden model wrote.
Each transaction is one ``start`` with its own configuration and ``count``. A driver and a monitor share one loop
a cycle: input gaps (nothing offered) with probability ``ROUND_PAUSE_IN``, otherwise the next ``min(PARTS, left)``
accumulators offered, or with probability ``ROUND_PAUSE_IN`` a random smaller number of them (a source that holds
fewer); on the output, every word offered taken, or with probability ``ROUND_PAUSE_OUT`` a random smaller number
(0: a stall) (seed ``ROUND_SEED``); ``PARTS`` junk parts stay offered once ``count`` accumulators have gone in, so
one taken too many is seen. After ``busy`` falls the words and the statistics are compared with the file, and nothing may be valid
or ready any more.

Transactions of at most ``ROUND_TIMED_MAX`` accumulators and whole rows run a second time with no gaps, every
cycle ``min(PARTS, left)`` offered and every word offered taken, and ``busy`` must stay high exactly ``latency_cycles`` cycles (the latency the RTL's header states).
A JSON summary (values, mismatched words, latency runs) goes to ``ROUND_RESULT``, then the test fails if any
word differed.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

import cocotb
import numpy as np
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, FallingEdge, RisingEdge

from codesign.hw.vectors import read_transactions
from codesign.numerics.round_stage import RoundStageConfig, latency_cycles

DESCRIPTOR_WORDS, STATS_WORDS = 2, 3
JUNK = 0xDEAD_BEEF
CYCLE_LIMIT_PER_WORD = 64  # a run longer than this many cycles per word (plus slack) has hung


def decode(desc0: int, desc1: int) -> dict[str, int]:
    """The descriptor words of a transaction as the module's input ports."""
    shift = (desc0 >> 1) & 0x7F
    return {"enable": desc0 & 1, "shift": shift - 128 if shift & 0x40 else shift, "bits": (desc0 >> 8) & 0x1F,
            "lanes": (desc0 >> 13) & 0x1F, "group_words": (desc0 >> 18) & 0x7, "row_values": desc1 & 0xFFFF,
            "field_bits": (desc0 >> 21) & 0x1F}


def offer(acc: list[int], sent: int, parts: int, width: int, rng, pause_in: float) -> tuple[int, int]:
    """(in_avail, in_data) of a cycle: a gap, the next min(parts, left) accumulators, or fewer of them; junk parts
    past ``count``."""
    left = len(acc) - sent
    if left <= 0:
        avail, values = parts, [JUNK] * parts
    else:
        avail = min(parts, left)
        if rng.random() < pause_in:
            avail = int(rng.integers(0, avail)) if avail > 1 else 0
        values = acc[sent:sent + parts] + [JUNK] * (parts - len(acc[sent:sent + parts]))
    mask = (1 << width) - 1  # a 32-bit word is a signed accumulator: sign-extended to a wider stage's W bits
    return avail, sum(((v - (1 << 32) if v >= 1 << 31 else v) & mask) << (width * i) for i, v in enumerate(values))


async def one_run(dut, ports: dict[str, int], acc: list[int], rng, pause_in: float, pause_out: float):
    """One start; returns (words sent, statistics, busy cycles, junk words taken)."""
    await FallingEdge(dut.clk)
    for name, value in ports.items():
        getattr(dut, name).value = value & 0x7F if name == "shift" else value  # the port's two's complement
    dut.count.value, dut.start.value, dut.raw64.value = len(acc), 1, 0
    dut.in_avail.value, dut.out_taken.value = 0, 0
    parts, width = int(dut.PARTS.value), int(dut.W.value)
    await RisingEdge(dut.clk)
    await FallingEdge(dut.clk)
    dut.start.value = 0
    sent, got, cycles, over = 0, [], 0, 0
    limit = CYCLE_LIMIT_PER_WORD * (len(acc) * 4 + 16)
    while dut.busy.value == 1:
        cycles += 1
        assert cycles < limit, f"busy for {cycles} cycles: the stage hung"
        feeding = sent < len(acc)
        dut.in_avail.value, dut.in_data.value = offer(acc, sent, parts, width, rng, pause_in)
        avail = int(dut.out_avail.value)
        take = avail if rng.random() >= pause_out else int(rng.integers(0, avail)) if avail else 0
        dut.out_taken.value = take
        await RisingEdge(dut.clk)  # the values this edge samples (before its registers update)
        taken = int(dut.in_taken.value)
        if feeding:
            sent += taken
        else:
            over += taken
        if take:
            words = int(dut.out_data.value)
            got += [(words >> (32 * j)) & 0xFFFF_FFFF for j in range(take)]
        await FallingEdge(dut.clk)
    dut.in_avail.value, dut.out_taken.value = parts, 0
    await ClockCycles(dut.clk, 2, rising=False)
    assert dut.in_taken.value == 0 and dut.out_avail.value == 0, "offering or taking after busy fell"
    dut.in_avail.value = 0
    stats = [int(dut.sum_abs.value) & 0xFFFF_FFFF, int(dut.sum_abs.value) >> 32, int(dut.saturated.value)]
    assert sent == len(acc), f"took {sent} of {len(acc)} accumulators"
    return got, stats, cycles, over


def count_mismatches(got: list[int], want: list[int]) -> int:
    """Wrong words, or the difference in number when the counts differ (as the C-sim checker counts)."""
    if len(got) != len(want):
        return abs(len(got) - len(want))
    return sum(int(a != b) for a, b in zip(got, want))


def timed_latency(ports: dict[str, int], count: int, timed_max: int, parts: int) -> int | None:
    """The stated latency of a whole-row run small enough to time, else None."""
    if count > timed_max:
        return None
    cfg = RoundStageConfig(enable=bool(ports["enable"]), **{k: v for k, v in ports.items() if k != "enable"})
    if cfg.enable and count % cfg.row_values:
        return None
    return latency_cycles(cfg, count, parts)


@cocotb.test()
async def transaction_file(dut) -> None:
    logging.getLogger(f"cocotb.{dut._name}").setLevel(logging.WARNING)
    Clock(dut.clk, 10, unit="ns").start()
    rng = np.random.default_rng(int(os.environ.get("ROUND_SEED", "1")))
    pause_in, pause_out = float(os.environ["ROUND_PAUSE_IN"]), float(os.environ["ROUND_PAUSE_OUT"])
    timed_max = int(os.environ.get("ROUND_TIMED_MAX", "4096"))
    transactions, _ = read_transactions(Path(os.environ["ROUND_VECTORS"]), pe="accel_round")
    dut.rst.value, dut.start.value, dut.in_avail.value, dut.out_taken.value = 1, 0, 0, 0
    await ClockCycles(dut.clk, 3)
    dut.rst.value = 0
    summary = {"values": 0, "mismatches": 0, "over_reads": 0, "timed_runs": 0, "latency_errors": [], "first": []}
    for index, (words_in, words_out) in enumerate(transactions):
        ports = decode(int(words_in[0]), int(words_in[1]))
        acc = [int(v) for v in words_in[DESCRIPTOR_WORDS:]]
        want = [int(v) for v in words_out]
        got, stats, _, over = await one_run(dut, ports, acc, rng, pause_in, pause_out)
        bad = count_mismatches(got + stats, want)
        summary["values"] += len(acc)
        summary["mismatches"] += bad
        summary["over_reads"] += over
        if bad and len(summary["first"]) < 5:
            summary["first"].append({"transaction": index, "ports": ports, "words": len(got),
                                     "expected_words": len(want) - STATS_WORDS, "stats": stats,
                                     "expected_stats": want[-STATS_WORDS:]})
        stated = timed_latency(ports, len(acc), timed_max, int(dut.PARTS.value))
        if stated is not None:
            got2, stats2, cycles, over2 = await one_run(dut, ports, acc, rng, 0.0, 0.0)
            summary["mismatches"] += count_mismatches(got2 + stats2, want)
            summary["over_reads"] += over2
            summary["timed_runs"] += 1
            if cycles != stated:
                summary["latency_errors"].append({"transaction": index, "ports": ports, "count": len(acc),
                                                  "busy_cycles": cycles, "stated": stated})
    Path(os.environ["ROUND_RESULT"]).write_text(json.dumps(summary, indent=1))
    assert summary["mismatches"] == 0, f"{summary['mismatches']} words differ: {summary['first']}"
    assert summary["over_reads"] == 0, f"{summary['over_reads']} words taken past count"
    assert not summary["latency_errors"], f"latency differs from the stated one: {summary['latency_errors'][:5]}"
