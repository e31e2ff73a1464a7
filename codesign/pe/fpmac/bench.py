"""cocotb 2.x bench for rtl/fpmac: drives a golden vector file through the DUT and checks every bit.

Ships in the package so an installed wheel verifies RTL: :func:`codesign.hw.flow.run_rtl`
starts it in the simulator. Structure after cocotb's matrix_multiplier
example: a driver, a monitor, a model (the golden ``golden_container_mac``
itself, not a re-implementation) and a scoreboard.

Environment (set by ``run_rtl``):

* ``FPMAC_VECTORS``: the vector file (``codesign.hw.vectors`` format);
* ``FPMAC_SPEC``: JSON ``{"exp_bits", "max_fb", "rounding"}``;
* ``FPMAC_LATENCY``: the documented pipeline latency (clock cycles);
* ``FPMAC_SUMMARY``: where to write the JSON summary;
* ``FPMAC_SEED``: seed of the idle-gap pattern (optional).

Besides the vectors the driver inserts idle cycles (``in_valid`` low, garbage
on the data ports). Halfway through it sends ``LATENCY - 1`` garbage
operations and then holds reset for one cycle with ``in_valid`` high, so that
every pipeline register holds a garbage operation at the reset edge: none may
come out, which catches a stage whose valid bit is not reset. Every output
must appear exactly ``LATENCY`` cycles after its operation.
"""

from __future__ import annotations

import json
import os
from collections import deque
from dataclasses import dataclass
from pathlib import Path

import cocotb
import numpy as np
from cocotb.clock import Clock
from cocotb.simtime import get_sim_time
from cocotb.triggers import FallingEdge

from codesign.hw.vectors import read_vectors
from codesign.pe.fpmac.golden import golden_container_mac
from codesign.pe.fpmac.stimulus import COLUMNS

CLOCK_NS = 10
RESET_CYCLES = 3
GAP_PROBABILITY = 1 / 64  # chance of an idle gap before an operation
MAX_GAP = 4  # idle cycles per gap, at most
REPORT_LIMIT = 10  # mismatches kept in the summary

OP, IDLE, FLUSH, RESET = range(4)


@dataclass(frozen=True)
class BenchConfig:
    """What the bench needs from its environment."""

    vectors: Path
    summary: Path
    exp_bits: int
    max_fb: int
    rounding: str
    latency: int
    seed: int

    @staticmethod
    def from_env() -> BenchConfig:
        spec = json.loads(os.environ["FPMAC_SPEC"])
        return BenchConfig(
            vectors=Path(os.environ["FPMAC_VECTORS"]),
            summary=Path(os.environ["FPMAC_SUMMARY"]),
            exp_bits=int(spec["exp_bits"]),
            max_fb=int(spec["max_fb"]),
            rounding=str(spec["rounding"]),
            latency=int(os.environ["FPMAC_LATENCY"]),
            seed=int(os.environ.get("FPMAC_SEED", "1")),
        )


class FpmacModel:
    """Transaction-level model: the golden container MAC, evaluated on whole columns at once."""

    def __init__(self, config: BenchConfig) -> None:
        self.config = config

    def predict(self, a: np.ndarray, b: np.ndarray, c: np.ndarray, fb: np.ndarray) -> np.ndarray:
        return golden_container_mac(
            a, b, c, fb, exp_bits=self.config.exp_bits, max_fb=self.config.max_fb, rounding=self.config.rounding
        )


def cycle_now() -> int:
    """Index of the current clock cycle (the clock starts at time 0)."""
    return int(get_sim_time("ns")) // CLOCK_NS


class Scoreboard:
    """In-order checker: expected results queue up as the driver issues operations."""

    def __init__(self, latency: int) -> None:
        self.latency = latency
        self.pending: deque[tuple[int, int, tuple[int, int, int, int], int]] = deque()
        self.issued = 0
        self.outputs = 0
        self.mismatches = 0
        self.latency_errors = 0
        self.unexpected = 0
        self.first: list[dict] = []

    def expect(self, index: int, cycle: int, operands: tuple[int, int, int, int], expected: int) -> None:
        self.issued += 1
        self.pending.append((index, cycle, operands, expected))

    def observe(self, cycle: int, actual: int | None) -> None:
        self.outputs += 1
        if not self.pending:
            self.unexpected += 1
            self._report({"kind": "unexpected output", "cycle": cycle, "actual": _hex(actual)})
            return
        index, issued_at, (a, b, c, fb), expected = self.pending.popleft()
        if cycle - issued_at != self.latency:
            self.latency_errors += 1
            self._report({"kind": "latency", "index": index, "cycles": cycle - issued_at, "expected": self.latency})
        if actual != expected:
            self.mismatches += 1
            self._report({"kind": "mismatch", "index": index, "a": _hex(a), "b": _hex(b), "c": _hex(c), "fb": fb,
                          "expected": _hex(expected), "actual": _hex(actual)})

    def _report(self, entry: dict) -> None:
        if len(self.first) < REPORT_LIMIT:
            self.first.append(entry)


def _hex(value: int | None) -> str:
    return "X" if value is None else f"{value:x}"


class Monitor:
    """Samples out_valid/result on every falling edge (outputs are registered on the rising edge).

    out_valid alone says whether result holds an output: the DUT clears it on
    reset, and rst is not consulted here because the driver may be changing it
    at the same falling edge.
    """

    def __init__(self, dut, scoreboard: Scoreboard) -> None:
        self.dut = dut
        self.scoreboard = scoreboard
        self._task = None

    def start(self) -> None:
        self._task = cocotb.start_soon(self._run())

    def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            self._task = None

    async def _run(self) -> None:
        valid, result = self.dut.out_valid, self.dut.result
        edge = FallingEdge(self.dut.clk)
        while True:
            await edge
            if valid.value != 1:
                continue
            value = result.value
            self.scoreboard.observe(cycle_now(), value.to_unsigned() if value.is_resolvable else None)


class Driver:
    """Applies one beat per clock cycle on the falling edge: an operation, an idle cycle, a flushed operation or reset."""

    def __init__(self, dut, columns: dict[str, np.ndarray], expected: np.ndarray, scoreboard: Scoreboard,
                 rng: np.random.Generator, width: int, fb_bits: int, latency: int) -> None:
        self.dut = dut
        self.rows = [tuple(int(v) for v in row) for row in zip(*(columns[n] for n in ("a", "b", "c", "fb")))]
        self.expected = [int(v) for v in expected]
        self.scoreboard = scoreboard
        self.rng = rng
        self.width = width
        self.fb_bits = fb_bits
        self.flush_ops = latency - 1
        self.idle_cycles = 0
        self.flushed = 0

    def schedule(self) -> list[tuple[int, int]]:
        """(kind, vector index) per cycle: gaps before some operations, a flushing reset halfway."""
        beats: list[tuple[int, int]] = []
        gaps = self.rng.random(len(self.rows)) < GAP_PROBABILITY
        lengths = self.rng.integers(1, MAX_GAP + 1, len(self.rows))
        middle = len(self.rows) // 2
        for index in range(len(self.rows)):
            if index == middle:
                beats += [(FLUSH, -1)] * self.flush_ops + [(RESET, -1), (IDLE, -1)]
            if gaps[index]:
                beats += [(IDLE, -1)] * int(lengths[index])
            beats.append((OP, index))
        return beats

    def _garbage(self) -> tuple[int, int, int, int]:
        words = self.rng.integers(0, 1 << self.width, 3, dtype=np.uint64)
        return int(words[0]), int(words[1]), int(words[2]), int(self.rng.integers(0, 1 << self.fb_bits))

    async def run(self, beats: list[tuple[int, int]]) -> None:
        dut = self.dut
        a, b, c, fb, valid, rst = dut.a, dut.b, dut.c, dut.fb, dut.in_valid, dut.rst
        edge = FallingEdge(dut.clk)
        for kind, index in beats:
            await edge
            if kind == OP:
                operands = self.rows[index]
                a.value, b.value, c.value, fb.value = operands
                valid.value = 1
                rst.value = 0
                self.scoreboard.expect(index, cycle_now(), operands, self.expected[index])
                continue
            a.value, b.value, c.value, fb.value = self._garbage()
            valid.value = 0 if kind == IDLE else 1
            rst.value = 1 if kind == RESET else 0
            self.idle_cycles += kind == IDLE
            self.flushed += kind == FLUSH
        await edge
        valid.value = 0


async def reset(dut, cycles: int = RESET_CYCLES) -> None:
    edge = FallingEdge(dut.clk)
    await edge
    dut.rst.value = 1
    dut.in_valid.value = 0
    for name in ("a", "b", "c", "fb"):
        getattr(dut, name).value = 0
    for _ in range(cycles):
        await edge
    dut.rst.value = 0


def check_parameters(dut, config: BenchConfig) -> list[str]:
    """DUT parameters that differ from the spec (skipped where the simulator hides parameters)."""
    rounding_code = {"nearest_even": 0, "nearest_away": 1, "toward_zero": 2}[config.rounding]
    problems = []
    for name, wanted in (("EXP_BITS", config.exp_bits), ("MAX_FB", config.max_fb), ("ROUNDING", rounding_code),
                         ("LATENCY", config.latency)):
        try:
            found = int(getattr(dut, name).value)
        except AttributeError:
            continue
        if found != wanted:
            problems.append(f"{name}={found}, expected {wanted}")
    return problems


@cocotb.test()
async def fpmac_vectors(dut) -> None:
    """Every vector of the file, bit for bit, at fixed latency, with idle gaps and a flushing reset."""
    config = BenchConfig.from_env()
    columns, _ = read_vectors(config.vectors, pe="fpmac", columns=COLUMNS)
    width = 1 + config.exp_bits + config.max_fb
    fb_bits = config.max_fb.bit_length()
    model = FpmacModel(config)
    expected = model.predict(columns["a"], columns["b"], columns["c"], columns["fb"])
    stale = np.flatnonzero(expected != columns["expected"])
    parameter_problems = check_parameters(dut, config)

    scoreboard = Scoreboard(config.latency)
    driver = Driver(dut, columns, expected, scoreboard, np.random.default_rng(config.seed), width, fb_bits,
                    config.latency)
    monitor = Monitor(dut, scoreboard)
    beats = driver.schedule()

    Clock(dut.clk, CLOCK_NS, unit="ns").start()
    await reset(dut)
    monitor.start()
    await driver.run(beats)
    for _ in range(config.latency + 4):
        await FallingEdge(dut.clk)
    monitor.stop()

    summary = {
        "vectors": len(driver.rows),
        "issued": scoreboard.issued,
        "outputs": scoreboard.outputs,
        "mismatches": scoreboard.mismatches,
        "latency_errors": scoreboard.latency_errors,
        "unexpected_outputs": scoreboard.unexpected,
        "missing_outputs": len(scoreboard.pending),
        "stale_rows": int(stale.size),
        "first_stale": [int(i) for i in stale[:REPORT_LIMIT]],
        "parameter_problems": parameter_problems,
        "idle_cycles": driver.idle_cycles,
        "flushed_ops": driver.flushed,
        "cycles": len(beats),
        "first_mismatches": scoreboard.first,
    }
    config.summary.parent.mkdir(parents=True, exist_ok=True)
    config.summary.write_text(json.dumps(summary, indent=1))

    assert not parameter_problems, f"DUT parameters differ from the spec: {parameter_problems}"
    assert stale.size == 0, f"{stale.size} rows of {config.vectors} disagree with the golden model (stale file)"
    assert scoreboard.outputs == scoreboard.issued == len(driver.rows), (
        f"{scoreboard.issued} operations issued, {scoreboard.outputs} results seen, {len(driver.rows)} vectors"
    )
    assert scoreboard.latency_errors == 0, f"{scoreboard.latency_errors} results not at latency {config.latency}"
    assert scoreboard.mismatches == 0, f"{scoreboard.mismatches} mismatches, first: {scoreboard.first}"
