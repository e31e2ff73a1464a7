"""cocotb 2.x bench of the RTL accelerator shell (``accel_top``) with cocotbext-axi models.

The DUT is the generated ``accel_top`` (:func:`codesign.shell.ip.render_accel_rtl`)
around any stream PE. The bench plays the host and the memory of a Zynq:
an :class:`~cocotbext.axi.AxiLiteMaster` on ``s_axi_control`` and one
:class:`~cocotbext.axi.AxiRam` per m_axi port, both over one shared sparse
memory, with random pauses on every AXI channel of the memories (the
cocotbext-axi pause generators) so that AR/R/AW/W/B each see random
backpressure and latency. Register offsets come from
:func:`codesign.shell.ip.register_map`, never from a second table.

Tests:

* ``control_registers``: reset values, read-back of every argument word
  (and zero from the reserved words), GIE/IER, ISR toggle-on-write and the
  interrupt output, a run with no words (ap_start -> ap_done; ap_done
  clears on the read that returns it; ap_idle back; ap_start cleared);
* ``golden_runs``: all transactions of the golden file in one run
  (n_transactions = all; input buffer three words below a 4 KiB boundary),
  then two back-to-back runs on the two halves of the file at random
  addresses; every output word is compared, and words past ``n_out`` must
  stay untouched. Every AR/AW burst is checked for length (<= the shell's
  MAX_BURST) and for 4 KiB crossings.

Environment: ``ACCEL_VECTORS`` (transaction file), ``ACCEL_SUMMARY`` (JSON
written by ``golden_runs``), ``ACCEL_PE`` (the file's ``pe=``),
``ACCEL_SEED`` (default 1), ``ACCEL_PAUSE`` (chance that a channel is paused
in a cycle, default 0.2), ``ACCEL_TIMEOUT_CYCLES`` (per run, default
2000000), ``ACCEL_DATA_BITS`` (the m_axi data width, the PE's stream word:
32, 64 or 128; default 32). Buffers sit at addresses aligned to a beat.
"""

from __future__ import annotations

import json
import logging
import os
import warnings
from dataclasses import dataclass
from pathlib import Path

import cocotb
import numpy as np
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, FallingEdge, ReadOnly, RisingEdge
from cocotb.utils import get_sim_time
from cocotbext.axi import AxiBus, AxiLiteBus, AxiLiteMaster, AxiRam

from codesign.shell.ip import CTRL_BITS, MAX_BURST, SHELL_ARGS, register_map
from codesign.hw.vectors import read_transactions

CLOCK_NS = 10
RESET_CYCLES = 4
POLL_CYCLES = 16  # cycles between two reads of CTRL while waiting for ap_done
GUARD_WORDS = 64  # words past n_out that must stay untouched
GUARD = 0xC0DE_5EED
MEMORY_BYTES = 1 << 32
REPORT_LIMIT = 10
REGS = register_map()
BIT = {name: 1 << bit for name, bit in CTRL_BITS.items()}
LIST_ARGS = ("calls", "n_calls")


@dataclass(frozen=True)
class AccelBenchConfig:
    vectors: Path
    summary: Path
    pe: str
    seed: int
    pause: float
    timeout_cycles: int
    data_bits: int = 32

    @staticmethod
    def from_env() -> AccelBenchConfig:
        config = AccelBenchConfig(
            vectors=Path(os.environ["ACCEL_VECTORS"]),
            summary=Path(os.environ["ACCEL_SUMMARY"]),
            pe=os.environ["ACCEL_PE"],
            seed=int(os.environ.get("ACCEL_SEED", "1")),
            pause=float(os.environ.get("ACCEL_PAUSE", "0.2")),
            timeout_cycles=int(os.environ.get("ACCEL_TIMEOUT_CYCLES", "2000000")),
            data_bits=int(os.environ.get("ACCEL_DATA_BITS", "32")),
        )
        if config.data_bits not in (32, 64, 128):
            raise ValueError(f"ACCEL_DATA_BITS={config.data_bits} must be 32, 64 or 128")
        if not 0.0 <= config.pause < 1.0:
            raise ValueError(f"ACCEL_PAUSE={config.pause} must be in [0, 1)")
        if config.timeout_cycles < 1:
            raise ValueError(f"ACCEL_TIMEOUT_CYCLES={config.timeout_cycles} must be at least 1")
        return config


def _pauses(rng: np.random.Generator, probability: float):
    """An endless per-cycle pause pattern for a cocotbext-axi channel."""
    while True:
        yield bool(rng.random() < probability)


class Harness:
    """Clock, reset, the control master, the two memories and the burst checker around one DUT."""

    def __init__(self, dut, *, pause: float = 0.0, seed: int = 1, data_bits: int = 32) -> None:
        self.dut = dut
        self.beat_bytes = data_bits // 8
        logging.getLogger(f"cocotb.{dut._name}").setLevel(logging.WARNING)  # the AXI models log every burst
        warnings.filterwarnings("ignore", category=DeprecationWarning, module=r"cocotbext\.axi")
        Clock(dut.ap_clk, CLOCK_NS, unit="ns").start()
        self.control = AxiLiteMaster(AxiLiteBus.from_prefix(dut, "s_axi_control"), dut.ap_clk, dut.ap_rst_n,
                                     reset_active_level=False)
        bundles = list(dict.fromkeys(arg.bundle for arg in SHELL_ARGS if arg.kind == "pointer"))
        first = AxiRam(AxiBus.from_prefix(dut, f"m_axi_{bundles[0]}"), dut.ap_clk, dut.ap_rst_n,
                       reset_active_level=False, size=MEMORY_BYTES)
        self.rams = [first] + [AxiRam(AxiBus.from_prefix(dut, f"m_axi_{bundle}"), dut.ap_clk, dut.ap_rst_n,
                                      reset_active_level=False, size=MEMORY_BYTES, mem=first.mem)
                               for bundle in bundles[1:]]
        self.memory = first
        self.bursts = 0
        self.burst_errors: list[str] = []
        if pause > 0:
            rng = np.random.default_rng(seed)
            for ram in self.rams:
                for channel in (ram.read_if.ar_channel, ram.read_if.r_channel, ram.write_if.aw_channel,
                                ram.write_if.w_channel, ram.write_if.b_channel):
                    channel.set_pause_generator(_pauses(np.random.default_rng(rng.integers(1 << 32)), pause))
        for bundle in bundles:
            cocotb.start_soon(self._watch_bursts(bundle))

    async def reset(self) -> None:
        self.dut.ap_rst_n.value = 0
        await ClockCycles(self.dut.ap_clk, RESET_CYCLES)
        await FallingEdge(self.dut.ap_clk)
        self.dut.ap_rst_n.value = 1
        await ClockCycles(self.dut.ap_clk, 2)

    async def _watch_bursts(self, bundle: str) -> None:
        """Every AR/AW handshake: at most MAX_BURST beats, and no 4 KiB boundary inside the burst."""
        signals = {kind: {name: getattr(self.dut, f"m_axi_{bundle}_{kind}{name}") for name in
                          ("valid", "ready", "addr", "len", "size", "burst")} for kind in ("ar", "aw")}
        while True:
            await RisingEdge(self.dut.ap_clk)
            await ReadOnly()
            for kind, sig in signals.items():
                if sig["valid"].value == 1 and sig["ready"].value == 1:
                    self.bursts += 1
                    addr, beats = int(sig["addr"].value), int(sig["len"].value) + 1
                    size = self.beat_bytes.bit_length() - 1  # AxSIZE: log2 of a beat's bytes
                    if beats > MAX_BURST or (addr & 0xFFF) + self.beat_bytes * beats > 0x1000 \
                            or int(sig["size"].value) != size or int(sig["burst"].value) != 1 \
                            or addr % self.beat_bytes:
                        self.burst_errors.append(f"{bundle} {kind}: addr {addr:#x}, {beats} beats, "
                                                 f"size {int(sig['size'].value)}, burst {int(sig['burst'].value)}")

    async def write(self, name: str, value: int, word: int = 0) -> None:
        await self.control.write_dword(REGS[name] + 4 * word, value & 0xFFFF_FFFF)

    async def read(self, name: str, word: int = 0) -> int:
        return int(await self.control.read_dword(REGS[name] + 4 * word))

    async def set_arguments(self, values: dict[str, int], names=None) -> None:
        """Every argument register, or those ``names``; the call list's (``calls``, ``n_calls``) default to 0, a
        direct call."""
        for arg in SHELL_ARGS:
            if names is not None and arg.name not in names:
                continue
            value = values[arg.name] if arg.name not in LIST_ARGS else values.get(arg.name, 0)
            for word in range(-(-arg.register_bits // 32)):
                await self.write(arg.name, value >> (32 * word), word)

    async def run(self, values: dict[str, int], timeout_cycles: int, names=None) -> tuple[int, int]:
        """The arguments (all, or ``names``), ap_start, then poll CTRL until ap_done; return (cycles to ap_done,
        CTRL reads); -1 cycles on time-out."""
        await self.set_arguments(values, names)
        await self.write("CTRL", BIT["ap_start"])
        started = get_sim_time(unit="ns")
        reads = 0
        while True:
            ctrl = await self.read("CTRL")
            reads += 1
            if ctrl & BIT["ap_done"]:
                return round((get_sim_time(unit="ns") - started) / CLOCK_NS), reads
            if (get_sim_time(unit="ns") - started) / CLOCK_NS > timeout_cycles:
                return -1, reads
            await ClockCycles(self.dut.ap_clk, POLL_CYCLES)


def _words(transactions, index: int) -> np.ndarray:
    return np.concatenate([t[index] for t in transactions]).astype(np.uint32) if transactions else \
        np.zeros(0, np.uint32)


@cocotb.test()
async def control_registers(dut) -> None:
    """Reset values, argument read-back, GIE/IER, ISR toggle and interrupt, and an empty run's ap_* semantics."""
    bench = Harness(dut)
    await bench.reset()
    assert await bench.read("CTRL") == BIT["ap_idle"], "after reset only ap_idle is set"
    for name in ("GIE", "IER", "ISR"):
        assert await bench.read(name) == 0, f"{name} is not 0 after reset"
    assert dut.interrupt.value == 0

    rng = np.random.default_rng(11)
    for arg in SHELL_ARGS:
        words = -(-arg.register_bits // 32)
        pattern = [int(w) for w in rng.integers(0, 1 << 32, size=words)]
        for word, value in enumerate(pattern):
            await bench.write(arg.name, value, word)
        for word, value in enumerate(pattern):
            got = await bench.read(arg.name, word)
            assert got == value, f"{arg.name} word {word}: wrote {value:#x}, read {got:#x}"
        assert await bench.read(arg.name, words) == 0, f"the reserved word after {arg.name} does not read 0"
    # byte strobes: one byte of n_out
    await bench.write("n_out", 0)
    await bench.control.write(REGS["n_out"] + 2, b"\xab")
    assert await bench.read("n_out") == 0x00AB_0000

    await bench.write("GIE", 1)
    await bench.write("IER", 3)
    assert (await bench.read("GIE"), await bench.read("IER")) == (1, 3)
    # ISR: a 1 written toggles the bit; the interrupt follows GIE && ISR
    await bench.write("ISR", 1)
    assert await bench.read("ISR") == 1
    assert dut.interrupt.value == 1
    await bench.write("ISR", 3)
    assert await bench.read("ISR") == 2
    await bench.write("ISR", 0)
    assert await bench.read("ISR") == 2, "a 0 written must leave ISR as it is"
    await bench.write("GIE", 0)
    await ClockCycles(dut.ap_clk, 1)
    assert dut.interrupt.value == 0, "GIE=0 must mask the interrupt"
    await bench.write("ISR", 2)
    assert await bench.read("ISR") == 0

    # an empty run: ap_start -> ap_done (read once, then cleared), ap_idle back, ap_start cleared, ISR bit 0 set
    await bench.write("IER", 1)
    cycles, _ = await bench.run({"in": 0x1000, "out": 0x2000, "n_in": 0, "n_out": 0, "n_transactions": 0}, 1000)
    assert cycles >= 0, "an empty run never reached ap_done"
    ctrl = await bench.read("CTRL")
    assert ctrl & BIT["ap_done"] == 0, "ap_done must clear on the read that returned it"
    assert ctrl & BIT["ap_idle"] and not ctrl & BIT["ap_start"], f"CTRL={ctrl:#x} after the run"
    assert await bench.read("ISR") == 1, "ap_done with IER bit 0 must set ISR bit 0"
    await bench.write("ISR", 1)
    assert await bench.read("ISR") == 0


@cocotb.test()
async def golden_runs(dut) -> None:
    """The golden file in one run, then split into two back-to-back runs; every word compared."""
    config = AccelBenchConfig.from_env()
    transactions, meta = read_transactions(config.vectors, pe=config.pe)
    bench = Harness(dut, pause=config.pause, seed=config.seed, data_bits=config.data_bits)
    await bench.reset()
    rng = np.random.default_rng(config.seed)
    half = (len(transactions) + 1) // 2
    beat = config.data_bits // 8  # buffers at beat-aligned addresses, as the shell reads and writes whole beats
    # (label, transactions, input address, output address, 32-bit words of the output left unwritten)
    runs = [("all", transactions, 0x0010_0000 - 3 * beat, 0x0800_0000 + beat * int(rng.integers(0, 1024)), 0)]
    if len(transactions) > 1:
        runs += [("first half", transactions[:half], 0x0200_0000 + beat * int(rng.integers(0, 2048)),
                  0x0900_0000 + beat * int(rng.integers(0, 2048)), 0),
                 ("second half", transactions[half:], 0x0300_0000 + beat * int(rng.integers(0, 2048)),
                  0x0A00_0000 + beat * int(rng.integers(0, 2048)), 0)]
    if beat > 4:  # a last beat part-written: n_out one word short, so WSTRB must spare the word after it
        runs.append(("all, n_out one word short", transactions, 0x0400_0000 + beat * int(rng.integers(0, 2048)),
                     0x0B00_0000 + beat * int(rng.integers(0, 2048)), 1))
    results, first = [], []
    mismatches = words_checked = 0
    await bench.write("GIE", 1)
    await bench.write("IER", 1)
    for label, part, in_addr, out_addr, short in runs:
        words_in, expected = _words(part, 0), _words(part, 1)
        expected = expected[:expected.size - short]
        bench.memory.write(in_addr, words_in.astype("<u4").tobytes())
        guard = np.full(expected.size + GUARD_WORDS, GUARD, dtype="<u4")
        bench.memory.write(out_addr, guard.tobytes())
        cycles, polls = await bench.run({"in": in_addr, "out": out_addr, "n_in": words_in.size,
                                         "n_out": expected.size, "n_transactions": len(part)}, config.timeout_cycles)
        got = np.frombuffer(bench.memory.read(out_addr, 4 * (expected.size + GUARD_WORDS)), dtype="<u4")
        wrong = np.flatnonzero(got[:expected.size] != expected)
        overwritten = int(np.count_nonzero(got[expected.size:] != GUARD))
        mismatches += int(wrong.size) + overwritten + (cycles < 0)
        words_checked += int(expected.size)
        for index in wrong[:REPORT_LIMIT - len(first)]:
            first.append({"run": label, "word": int(index), "expected": f"{int(expected[index]):08x}",
                          "actual": f"{int(got[index]):08x}"})
        if overwritten:
            first.append({"run": label, "guard_words_overwritten": overwritten})
        if cycles < 0:
            first.append({"run": label, "timed_out_after_cycles": config.timeout_cycles})
        isr = await bench.read("ISR")
        if isr & 1:
            await bench.write("ISR", 1)
        results.append({"run": label, "transactions": len(part), "words_in": int(words_in.size),
                        "words_out": int(expected.size), "mismatches": int(wrong.size), "guard_overwritten":
                        overwritten, "cycles": cycles, "ctrl_polls": polls, "isr_done": bool(isr & 1),
                        "in_addr": in_addr, "out_addr": out_addr})
        ctrl = await bench.read("CTRL")
        assert ctrl & (BIT["ap_done"] | BIT["ap_start"]) == 0 and ctrl & BIT["ap_idle"], f"CTRL={ctrl:#x} after {label}"
        assert isr & 1, f"the {label} run did not set ISR bit 0"
    summary = {"pe": config.pe, "meta": meta, "transactions": len(transactions), "words_checked": words_checked,
               "mismatches": mismatches, "bursts": bench.bursts, "burst_errors": bench.burst_errors[:REPORT_LIMIT],
               "seed": config.seed, "pause": config.pause, "runs": results, "first_mismatches": first[:REPORT_LIMIT]}
    config.summary.parent.mkdir(parents=True, exist_ok=True)
    config.summary.write_text(json.dumps(summary, indent=1))
    assert not bench.burst_errors, f"bursts break the AXI rules: {bench.burst_errors[:3]}"
    assert mismatches == 0, f"{mismatches} mismatching words, first: {first}"
