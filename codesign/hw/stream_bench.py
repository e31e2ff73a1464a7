"""Generic cocotb 2.x bench for stream PEs: replays a transaction file through the DUT and checks every word.

Any PE with the six stream ports ``in_data[31:0]``, ``in_valid``, ``in_ready``,
``out_data[31:0]``, ``out_valid``, ``out_ready`` (plus ``clk`` and a
synchronous active-high ``rst``) can be verified with it; nothing here knows
what the PE computes. A word moves on a rising edge where ``valid && ready``.

Each clock cycle the bench, on the falling edge, drives ``in_valid``/``in_data``
(the next input word, or an idle cycle with garbage data) and ``out_ready``;
after ``ReadOnly`` it samples both handshakes, which then hold until the next
rising edge. While the PE neither takes nor offers a word (``in_ready`` and
``out_valid`` both low, e.g. computing) the bench waits for one of them to
rise instead of visiting every cycle; cycle numbers come from simulation time,
so counts are the same either way. The input words of all transactions are
streamed back to back; the output stream is cut into transactions by the
expected word counts.

Environment (all but the first two optional):

* ``STREAM_VECTORS``: the transaction file (``codesign.hw.vectors.read_transactions``);
* ``STREAM_SUMMARY``: where to write the JSON summary;
* ``STREAM_PE``: the ``pe=`` name the file must declare (default: the DUT's name);
* ``STREAM_SEED``: seed of the gap and backpressure patterns (default 1);
* ``STREAM_GAP_PROBABILITY``: chance of an idle input cycle (``in_valid`` low) per cycle (default 0.1);
* ``STREAM_BACKPRESSURE``: chance that ``out_ready`` is low in a cycle (default 0.2);
* ``STREAM_IDLE_LIMIT``: cycles without any handshake before the bench gives up (default 100000);
* ``STREAM_WORD_PARTS``: 32-bit file words per stream word (default 1): a PE with 64- or 128-bit stream
  ports takes 2 or 4 consecutive file words, least significant first, as one word, and each word it sends
  is compared with as many expected file words put together.

With both probabilities at 0 the per-transaction cycle counts in the summary
are the PE's own latency: ``cycles[i]`` counts the clock cycles from the first
input handshake of transaction ``i`` to its last output handshake, both
included. ``input_stalls`` counts cycles with ``in_valid && !in_ready``,
``output_stalls`` cycles with ``out_valid && !out_ready``.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

import cocotb
import numpy as np
from cocotb.clock import Clock
from cocotb.triggers import FallingEdge, First, ReadOnly, RisingEdge, Timer
from cocotb.utils import get_sim_time

from codesign.hw.vectors import read_transactions

CLOCK_NS = 10
RESET_CYCLES = 3
DRAIN_CYCLES = 8  # cycles watched after the last expected word, for extra output words
REPORT_LIMIT = 10  # mismatches kept in the summary
WORD_MASK = 0xFFFF_FFFF


@dataclass(frozen=True)
class StreamBenchConfig:
    """What the bench reads from its environment (probabilities per clock cycle, limits in cycles)."""

    vectors: Path
    summary: Path
    pe: str
    seed: int
    gap_probability: float
    backpressure: float
    idle_limit: int
    word_parts: int = 1

    @staticmethod
    def from_env(default_pe: str) -> StreamBenchConfig:
        config = StreamBenchConfig(
            vectors=Path(os.environ["STREAM_VECTORS"]),
            summary=Path(os.environ["STREAM_SUMMARY"]),
            pe=os.environ.get("STREAM_PE", default_pe),
            seed=int(os.environ.get("STREAM_SEED", "1")),
            gap_probability=float(os.environ.get("STREAM_GAP_PROBABILITY", "0.1")),
            backpressure=float(os.environ.get("STREAM_BACKPRESSURE", "0.2")),
            idle_limit=int(os.environ.get("STREAM_IDLE_LIMIT", "100000")),
            word_parts=int(os.environ.get("STREAM_WORD_PARTS", "1")),
        )
        if config.word_parts not in (1, 2, 4):
            raise ValueError(f"STREAM_WORD_PARTS={config.word_parts} must be 1, 2 or 4")
        for name, value in (("STREAM_GAP_PROBABILITY", config.gap_probability),
                            ("STREAM_BACKPRESSURE", config.backpressure)):
            if not 0.0 <= value < 1.0:
                raise ValueError(f"{name}={value} must be in [0, 1)")
        if config.idle_limit < 1:
            raise ValueError(f"STREAM_IDLE_LIMIT={config.idle_limit} must be at least 1")
        return config


class Scoreboard:
    """Splits the output stream into transactions by their expected counts and compares every word."""

    def __init__(self, expected: list[np.ndarray]) -> None:
        self.expected = [[int(w) for w in words] for words in expected]
        self.boundaries = np.cumsum([len(words) for words in self.expected]).tolist()
        self.flat = [w for words in self.expected for w in words]
        self.received = 0
        self.mismatches = 0
        self.unresolved = 0
        self.first: list[dict] = []
        self.last_output_cycle = [-1] * len(self.expected)

    def transaction_of(self, word_index: int) -> int:
        return int(np.searchsorted(self.boundaries, word_index, side="right"))

    def observe(self, cycle: int, actual: int | None) -> None:
        index = self.received
        self.received += 1
        if index >= len(self.flat):
            self._report({"kind": "unexpected output", "cycle": cycle, "actual": _hex(actual)})
            return
        transaction = self.transaction_of(index)
        start = self.boundaries[transaction] - len(self.expected[transaction])
        self.last_output_cycle[transaction] = cycle
        expected = self.flat[index]
        if actual is None:
            self.unresolved += 1
        if actual != expected:
            self.mismatches += 1
            self._report({"kind": "mismatch", "transaction": transaction, "word": index - start,
                          "cycle": cycle, "expected": _hex(expected), "actual": _hex(actual)})

    @property
    def done(self) -> bool:
        return self.received >= len(self.flat)

    def _report(self, entry: dict) -> None:
        if len(self.first) < REPORT_LIMIT:
            self.first.append(entry)


def _hex(value: int | None) -> str:
    return "X" if value is None else f"{value:08x}"


def _garbage(rng: np.random.Generator, parts: int) -> int:
    """Random data for an idle input cycle (one draw per 32-bit part, the same draw as ever for one part)."""
    if parts == 1:
        return int(rng.integers(0, WORD_MASK + 1))
    return sum(int(rng.integers(0, WORD_MASK + 1)) << (32 * p) for p in range(parts))


def join_parts(words, parts: int) -> list[int]:
    """Stream words from ``parts`` consecutive 32-bit file words each, least significant first (a short tail is
    padded with 0, so a malformed file shows up as mismatching words rather than being dropped)."""
    values = [int(w) for w in words]
    return [sum(value << (32 * p) for p, value in enumerate(values[k:k + parts])) for k in range(0, len(values), parts)]


def _resolved(signal) -> int | None:
    value = signal.value
    return value.to_unsigned() if value.is_resolvable else None


async def reset(dut, cycles: int = RESET_CYCLES) -> None:
    edge = FallingEdge(dut.clk)
    await edge
    dut.rst.value = 1
    dut.in_valid.value = 0
    dut.in_data.value = 0
    dut.out_ready.value = 0
    for _ in range(cycles):
        await edge
    dut.rst.value = 0


class _Traffic:
    """The input side of one bench run and its counters (cycles counted from the first falling edge after reset)."""

    def __init__(self, inputs: list[list[int]]) -> None:
        self.flat_in = [w for words in inputs for w in words]
        first_word = np.cumsum([0] + [len(words) for words in inputs])[:-1].tolist()
        self.starts = {index: number for number, index in enumerate(first_word)}
        self.first_input_cycle = [-1] * len(inputs)
        self.sent = self.idle = self.input_stalls = self.output_stalls = self.gaps = 0
        self.cycle = -1  # the cycle last visited


async def _drive(dut, config: StreamBenchConfig, traffic: _Traffic, scoreboard: Scoreboard,
                 rng: np.random.Generator) -> None:
    """Offer the input words with random gaps and take the output words with random backpressure until every word
    has moved and DRAIN_CYCLES more cycles have passed (or the PE stays idle for ``config.idle_limit`` cycles)."""
    t = traffic
    drain = DRAIN_CYCLES
    edge = FallingEdge(dut.clk)
    await edge
    start_ns = get_sim_time(unit="ns")
    busy = offer = False
    while drain > 0 and t.idle < config.idle_limit:
        if busy:
            # The PE takes nothing and offers nothing: skip to the edge where either handshake signal rises
            # (or the idle limit runs out) instead of stepping the simulator one Python callback per cycle.
            await First(RisingEdge(dut.in_ready), RisingEdge(dut.out_valid),
                        Timer((config.idle_limit - t.idle) * CLOCK_NS, unit="ns"))
        await edge
        now = round((get_sim_time(unit="ns") - start_ns) / CLOCK_NS)
        skipped = now - t.cycle - 1  # whole cycles passed over while busy
        t.idle += skipped
        t.input_stalls += skipped if offer else 0
        t.cycle = now
        offer = t.sent < len(t.flat_in) and rng.random() >= config.gap_probability
        t.gaps += t.sent < len(t.flat_in) and not offer
        dut.in_valid.value = int(offer)
        dut.in_data.value = t.flat_in[t.sent] if offer else _garbage(rng, config.word_parts)
        ready = int(rng.random() >= config.backpressure)
        dut.out_ready.value = ready
        await ReadOnly()
        in_ready, out_valid = dut.in_ready.value == 1, dut.out_valid.value == 1
        busy = not in_ready and not out_valid
        moved = False
        if offer and in_ready:
            if t.sent in t.starts:
                t.first_input_cycle[t.starts[t.sent]] = t.cycle
            t.sent += 1
            moved = True
        elif offer:
            t.input_stalls += 1
        if out_valid and ready:
            scoreboard.observe(t.cycle, _resolved(dut.out_data))
            moved = True
        elif out_valid:
            t.output_stalls += 1
        t.idle = 0 if moved else t.idle + 1
        if scoreboard.done and t.sent == len(t.flat_in):
            drain -= 1
            busy = False  # the drain watches every cycle for extra words
    await edge
    dut.in_valid.value = 0


def _summary(config: StreamBenchConfig, meta: dict, count: int, t: _Traffic, scoreboard: Scoreboard) -> dict:
    cycles = [last - first + 1 if first >= 0 and last >= 0 else -1
              for first, last in zip(t.first_input_cycle, scoreboard.last_output_cycle)]
    return {
        "pe": config.pe,
        "meta": meta,
        "transactions": count,
        "words_in": len(t.flat_in),
        "words_sent": t.sent,
        "words_expected": len(scoreboard.flat),
        "words_checked": min(scoreboard.received, len(scoreboard.flat)),
        "mismatches": scoreboard.mismatches,
        "unresolved_words": scoreboard.unresolved,
        "missing_words": max(0, len(scoreboard.flat) - scoreboard.received),
        "extra_words": max(0, scoreboard.received - len(scoreboard.flat)),
        "timed_out": t.idle >= config.idle_limit,
        "total_cycles": t.cycle + 1,
        "input_gaps": t.gaps,
        "input_stalls": t.input_stalls,
        "output_stalls": t.output_stalls,
        "seed": config.seed,
        "gap_probability": config.gap_probability,
        "backpressure": config.backpressure,
        "cycles": cycles,
        "first_mismatches": scoreboard.first,
    }


@cocotb.test()
async def stream_transactions(dut) -> None:
    """Every transaction of the file, every output word and the word count, under random gaps and backpressure."""
    config = StreamBenchConfig.from_env(default_pe=str(dut._name))
    transactions, meta = read_transactions(config.vectors, pe=config.pe)
    traffic = _Traffic([join_parts(words_in, config.word_parts) for words_in, _ in transactions])
    scoreboard = Scoreboard([join_parts(words_out, config.word_parts) for _, words_out in transactions])
    rng = np.random.default_rng(config.seed)

    Clock(dut.clk, CLOCK_NS, unit="ns").start()
    await reset(dut)
    await _drive(dut, config, traffic, scoreboard, rng)
    summary = _summary(config, meta, len(transactions), traffic, scoreboard)
    config.summary.parent.mkdir(parents=True, exist_ok=True)
    config.summary.write_text(json.dumps(summary, indent=1))

    sent, words_in, missing, extra = (summary[key] for key in ("words_sent", "words_in", "missing_words", "extra_words"))
    assert sent == words_in, f"the PE accepted {sent} of {words_in} input words (idle for {traffic.idle} cycles)"
    assert missing == 0, f"{missing} of {len(scoreboard.flat)} expected output words never came"
    assert extra == 0, f"{extra} output words beyond the expected {len(scoreboard.flat)}"
    assert scoreboard.mismatches == 0, f"{scoreboard.mismatches} mismatching words, first: {scoreboard.first}"
