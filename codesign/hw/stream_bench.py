"""Generic cocotb 2.x bench for stream PEs: replays a transaction file through the DUT and checks every word.

Any PE with the six stream ports ``in_data``, ``in_valid``, ``in_ready``,
``out_data``, ``out_valid``, ``out_ready`` (data 32, 64 or 128 bits wide) (plus ``clk`` and a
synchronous active-high ``rst``) can be verified with it; nothing here knows
what the PE computes. A word moves on a rising edge where ``valid && ready``.

The bench runs no Python per clock cycle. The PE sits inside the HDL harness
``rtl/bench/stream_harness.v`` (built as :func:`codesign.hw.bench_build.harness_build` says). The bench
writes the input words into two ``$readmemh`` files, sets the harness's ports
(seed, thresholds, counts), starts the clock and waits for ``done``.

In the simulator, each cycle the harness drives ``in_valid``/``in_data`` on
the falling edge (the next input word, or a gap with garbage data) and
``out_ready``, both drawn from a seeded xorshift64. It takes the handshakes
on the rising edge and logs each transaction's first input word and every
output word with its cycle. The bench then cuts the output stream into
transactions by the expected word counts and compares every word. The input
words of all transactions are streamed back to back.

Environment (all but the first three optional):

* ``STREAM_VECTORS``: the transaction file (``codesign.hw.vectors.read_transactions``);
* ``STREAM_SUMMARY``: where to write the JSON summary;
* ``STREAM_PE``: the ``pe=`` name the file must declare (the top is the harness, which names no PE);
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
``output_stalls`` cycles with ``out_valid && !out_ready``, ``input_gaps`` the
cycles the harness held an input word back. The patterns are the harness's
generator's, not NumPy's: a seed gives the same run on every simulator.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

import cocotb
import numpy as np
from cocotb.clock import Clock
from cocotb.triggers import FallingEdge, RisingEdge

from codesign.hw.vectors import read_transactions

CLOCK_NS = 10
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
    def from_env() -> StreamBenchConfig:
        config = StreamBenchConfig(
            vectors=Path(os.environ["STREAM_VECTORS"]),
            summary=Path(os.environ["STREAM_SUMMARY"]),
            pe=os.environ["STREAM_PE"],
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


def join_parts(words, parts: int) -> list[int]:
    """Stream words from ``parts`` consecutive 32-bit file words each, least significant first (a short tail is
    padded with 0, so a malformed file shows up as mismatching words rather than being dropped)."""
    values = [int(w) for w in words]
    return [sum(value << (32 * p) for p, value in enumerate(values[k:k + parts])) for k in range(0, len(values), parts)]


def _word(text: str) -> int | None:
    """An output word as the harness logged it in hex; None when a digit is unresolved (x or z)."""
    try:
        return int(text, 16)
    except ValueError:
        return None


def write_inputs(directory: Path, inputs: list[list[int]], word_parts: int) -> tuple[int, int]:
    """The harness's two $readmemh files in ``directory``: every input stream word, in hex, and the index of each
    transaction's first word. Returns (input words, transactions with a first word)."""
    digits = 8 * word_parts
    flat = [w for words in inputs for w in words]
    (directory / "stream_in.hex").write_text("".join(f"{w:0{digits}x}\n" for w in flat) or "0\n")
    first = np.cumsum([0] + [len(words) for words in inputs])[:-1]
    starts = [int(index) for index, words in zip(first, inputs) if words]
    (directory / "stream_starts.hex").write_text("".join(f"{index:08x}\n" for index in starts) or "0\n")
    return len(flat), len(starts)


@dataclass
class _Traffic:
    """What the harness's log says of one run (cycles counted from the first rising edge after reset)."""

    first_input_cycle: list[int]
    sent: int = 0
    gaps: int = 0
    input_stalls: int = 0
    output_stalls: int = 0
    idle: int = 0
    cycles: int = 0


def read_log(path: Path, inputs: list[list[int]], scoreboard: Scoreboard) -> _Traffic:
    """The harness's log (``rtl/bench/stream_harness.v``): the output words into ``scoreboard``, the first input
    cycle of each transaction, the counters of its last line."""
    first = [-1] * len(inputs)
    with_words = [index for index, words in enumerate(inputs) if words]
    started = 0
    traffic = None
    for line in path.read_text().splitlines():
        kind, *fields = line.split()
        if kind == "O":
            scoreboard.observe(int(fields[0]), _word(fields[1]))
        elif kind == "S":
            first[with_words[started]] = int(fields[0])
            started += 1
        elif kind == "E":
            cycles, sent, gaps, input_stalls, output_stalls, idle = map(int, fields)
            traffic = _Traffic(first, sent, gaps, input_stalls, output_stalls, idle, cycles)
    if traffic is None:
        raise RuntimeError(f"{path} has no end line: the harness did not finish")
    return traffic


def _summary(config: StreamBenchConfig, meta: dict, count: int, words_in: int, t: _Traffic,
             scoreboard: Scoreboard) -> dict:
    cycles = [last - first + 1 if first >= 0 and last >= 0 else -1
              for first, last in zip(t.first_input_cycle, scoreboard.last_output_cycle)]
    return {
        "pe": config.pe,
        "meta": meta,
        "transactions": count,
        "words_in": words_in,
        "words_sent": t.sent,
        "words_expected": len(scoreboard.flat),
        "words_checked": min(scoreboard.received, len(scoreboard.flat)),
        "mismatches": scoreboard.mismatches,
        "unresolved_words": scoreboard.unresolved,
        "missing_words": max(0, len(scoreboard.flat) - scoreboard.received),
        "extra_words": max(0, scoreboard.received - len(scoreboard.flat)),
        "timed_out": t.idle >= config.idle_limit,
        "total_cycles": t.cycles,
        "input_gaps": t.gaps,
        "input_stalls": t.input_stalls,
        "output_stalls": t.output_stalls,
        "seed": config.seed,
        "gap_probability": config.gap_probability,
        "backpressure": config.backpressure,
        "cycles": cycles,
        "first_mismatches": scoreboard.first,
    }


def threshold(probability: float) -> int:
    """A probability per cycle as the harness's threshold out of 2^32."""
    return min(WORD_MASK, int(probability * (1 << 32)))


@cocotb.test()
async def stream_transactions(dut) -> None:
    """Every transaction of the file, every output word and the word count, under random gaps and backpressure."""
    config = StreamBenchConfig.from_env()
    transactions, meta = read_transactions(config.vectors, pe=config.pe)
    inputs = [join_parts(words_in, config.word_parts) for words_in, _ in transactions]
    scoreboard = Scoreboard([join_parts(words_out, config.word_parts) for _, words_out in transactions])
    here = Path.cwd()
    words_in, starts = write_inputs(here, inputs, config.word_parts)
    (here / "stream_out.txt").unlink(missing_ok=True)
    dut.seed.value = config.seed
    dut.gap_threshold.value = threshold(config.gap_probability)
    dut.bp_threshold.value = threshold(config.backpressure)
    dut.idle_limit.value = config.idle_limit
    dut.n_in.value = words_in
    dut.n_out.value = len(scoreboard.flat)
    dut.n_starts.value = starts
    dut.start.value = 0
    Clock(dut.clk, CLOCK_NS, unit="ns", impl="gpi").start()
    await FallingEdge(dut.clk)
    dut.start.value = 1  # between two rising edges: the first one after it begins the run on every simulator
    await RisingEdge(dut.done)
    traffic = read_log(here / "stream_out.txt", inputs, scoreboard)
    summary = _summary(config, meta, len(transactions), words_in, traffic, scoreboard)
    config.summary.parent.mkdir(parents=True, exist_ok=True)
    config.summary.write_text(json.dumps(summary, indent=1))

    sent, missing, extra = (summary[key] for key in ("words_sent", "missing_words", "extra_words"))
    assert sent == words_in, f"the PE accepted {sent} of {words_in} input words (idle for {traffic.idle} cycles)"
    assert missing == 0, f"{missing} of {len(scoreboard.flat)} expected output words never came"
    assert extra == 0, f"{extra} output words beyond the expected {len(scoreboard.flat)}"
    assert scoreboard.mismatches == 0, f"{scoreboard.mismatches} mismatching words, first: {scoreboard.first}"
