"""Cycles of a TT layer's training step on the PEs, checked against the RTL.

The model takes the per-transaction cycle models of :mod:`codesign.pe.tt.cycles`
(exact against the RTL, transaction by transaction) for the calls of a
:class:`codesign.step.tt.schedule.StepPlan` and schedules them on the PE
copies of its :class:`~codesign.step.tt.schedule.StepHardware`
(:func:`list_schedule`): a step is a sequence of *stages*
(:func:`codesign.step.tt.schedule.stages`), each forward contraction one
stage and each core gradient together with the input gradient of the same
core one stage (PE1 copies take the one, PE2 copies the other); within a stage every copy runs its calls one after
another, and a stage ends when its last call does. The host's work between
stages (scales, rounding, the permutation of the core-gradient operands)
and DRAM traffic are not counted.

Units of the word counts: a PE built with ``stream_bits`` of 32, 64 or 128
moves one ``stream_bits``-wide word per cycle on each stream, so the cycle
figures and bounds (``overlapped``, ``stream_cycles``) count words at each
PE's width. The traffic figures (``words_in``, ``words_out``,
``stage_words``, :func:`stage_loads`) count *32-bit words*, the bytes moved
divided by 4 (:data:`codesign.step.model.WORD_BYTES`), whatever the
width: a 128-bit word is four of them, its padding included. They are what
the host's DMA buffers hold and what crosses DDR, so the whole-step model
(:mod:`codesign.step.time`) prices them the same at every width.

:func:`rtl_check` runs every call of one small step through the RTL of the
PEs under cocotb (the stream bench, no gaps, no backpressure), checks every
output word against the golden kernels and compares the summed RTL cycles
with the model. Paper 003's network on these models is a reproduction
(:mod:`codesign.reproduce.tt_step_paper`).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from codesign.step.model import hp_port_of
from codesign.numerics.formats import _check_int
from codesign.pe.tt import golden
from codesign.pe.tt.contract import WORD_BITS
from codesign.pe.tt.cycles import stream_words, transaction_cycles
from codesign.step.tt.layer_state import TtLayerState
from codesign.step.tt.schedule import (MAX_UNITS, StepHardware, StepPlan,
                                     copy_totals, stage_numbers, stages)
from codesign.pe.tt.spec import Tt1Spec, Tt2Spec

# Smaller PE copies side by side: 2 x 32 + 4 x 32 = 192 MACs, six stream pairs instead of two (docs/tt_pe.md)
PARALLEL_HARDWARE = StepHardware(pe1=Tt1Spec(a_bits=16, b_bits=8, rows=2), pe1_units=2,
                                 pe2=Tt2Spec(a_bits=16, b_bits=4, max_j=128, max_l=64, rows=2), pe2_units=4)
CLEAN_BENCH = {"STREAM_GAP_PROBABILITY": "0", "STREAM_BACKPRESSURE": "0"}


@dataclass(frozen=True)
class ContractionCycles:
    """One contraction of a step: its PE, calls, useful MACs, modelled cycles (clock cycles), and what bounds them.

    ``load``, ``compute`` and ``drain`` split ``cycles`` by phase (the
    header and status cycles make up the rest), less ``overlap``: the load
    cycles PE1 and PE2 spend beside their MAC loops and results (docs/tt_pe.md,
    "Overlap") and PE2's results sent beside its MAC loop ("Results beside the
    MAC loop"). ``words_in`` and
    ``words_out`` are the bytes its calls move in and out divided by 4
    (32-bit words, whatever the PE's stream width); ``stream_in`` and
    ``stream_out`` the same traffic in words of the PE's ``stream_bits``
    (one a cycle on each stream). ``overlapped`` is the sum over its calls
    of max(stream words in, compute cycles, stream words out): what a PE
    with the same streams and MAC array would take if it overlapped
    loading, computing and sending completely (the paper's ping-pong
    buffers).
    """

    name: str
    pe: str
    calls: int
    macs: int
    cycles: int
    load: int
    compute: int
    drain: int
    overlap: int
    words_in: int
    words_out: int
    overlapped: int
    stream_in: int
    stream_out: int

    @property
    def bytes(self) -> int:
        """Bytes the calls move in and out together."""
        return (self.words_in + self.words_out) * WORD_BITS // 8


PHASES = ("load", "compute", "drain")


@dataclass(frozen=True)
class StepSchedule:
    """Which copy of its PE runs each call of a plan (``units``, in call order) and the cycles of each stage."""

    units: tuple[int, ...]
    stage_cycles: tuple[int, ...]

    @property
    def total(self) -> int:
        """Cycles of the step: its stages one after another."""
        return sum(self.stage_cycles)


def list_schedule(plan: StepPlan, call_cycles: Sequence[int]) -> StepSchedule:
    """The step's calls on the hardware's PE copies, given the cycles of every call (clock cycles, in call order).

    Within a stage (:func:`codesign.step.tt.schedule.stages`) the calls of each
    PE kind are taken in the plan's order, each by the copy that falls free first (the lowest
    numbered on a tie), which is what a host that starts the next call on
    whichever copy finishes does. With one copy of each PE a stage takes the
    longer of its PE1 and PE2 work.
    """
    if len(call_cycles) != len(plan.calls):
        raise ValueError(f"{len(call_cycles)} call cycle counts for a plan of {len(plan.calls)} calls")
    units = [0] * len(plan.calls)
    stage_cycles = []
    for stage in stages(plan):
        busy = [0]
        for pe in dict.fromkeys(call.pe for call in plan.calls if call.index in stage):
            positions = [p for p, call in enumerate(plan.calls) if call.index in stage and call.pe == pe]
            assigned, per_copy = copy_totals([call_cycles[p] for p in positions], plan.hardware.units(pe))
            for position, unit in zip(positions, assigned):
                units[position] = unit
            busy.append(max(per_copy))
        stage_cycles.append(max(busy))
    return StepSchedule(tuple(units), tuple(stage_cycles))


def call_traffic(spec, header: int) -> tuple[int, int, int, int]:
    """One call's traffic: 32-bit words in and out (bytes / 4), then ``spec.stream_bits``-wide words in and out.

    The stream words come from :func:`codesign.pe.tt.cycles.stream_words`
    (header, operand chunks at the width, status, results packed
    ``stream_bits / 32`` to a word); each is ``spec.parts`` 32-bit words in
    memory, padding included.
    """
    stream_in, stream_out = stream_words(spec, header)
    return stream_in * spec.parts, stream_out * spec.parts, stream_in, stream_out


def stage_loads(plan: StepPlan, pe: str) -> list[tuple[int, int, int]]:
    """Per stage of ``plan``: the cycles ``pe``'s copies take for its calls there (the busiest copy, calls assigned as
    :func:`list_schedule` assigns them), and the 32-bit words (bytes / 4, at any stream width) into and out of them.

    Without ``forward_split``, ``pe``'s calls depend on its own build only, so a design space can price
    every build of one PE apart and combine them: a stage takes the longer
    of its PE1 and PE2 loads.
    """
    return [(int(cycles.max()), int(words[:, 0].sum()), int(words[:, 1].sum()))
            for cycles, words in copy_loads(plan, pe)]


def copy_loads(plan: StepPlan, pe: str) -> list[tuple[np.ndarray, np.ndarray]]:
    """Per stage: each copy of ``pe``'s cycles (copies,) and 32-bit words in and out (copies, 2), calls assigned as
    :func:`list_schedule` assigns them (what a design space needs to spread the copies over HP ports)."""
    spec, copies = plan.hardware.spec(pe), plan.hardware.units(pe)
    loads = []
    for stage in stages(plan):
        headers = [call.header for call in plan.calls if call.index in stage and call.pe == pe]
        cycles = [transaction_cycles(spec, header).total for header in headers]
        units, per_copy = copy_totals(cycles, copies)
        words = np.zeros((copies, 2), dtype=np.int64)
        for unit, header in zip(units, headers):
            words[unit] += call_traffic(spec, header)[:2]
        loads.append((np.array(per_copy, dtype=np.int64), words))
    return loads


@dataclass(frozen=True)
class StepCycles:
    """Modelled cycles of one layer step, per contraction, and the step scheduled on the PE copies.

    ``total`` adds every call's cycles (all calls one after another, the
    figure the RTL check sums); ``makespan`` is the step's cycles under
    :func:`list_schedule`. ``overlapped_makespan`` schedules each call's
    overlap bound instead (``ContractionCycles.overlapped``), and
    ``stream_cycles`` is the fewest cycles in which each stage's words
    could pass through its PEs' stream pairs (one ``stream_bits``-wide word
    a cycle each way), spread evenly over the copies: no schedule of these
    calls on these streams is faster. ``stage_words`` gives each stage's
    32-bit words in and out (bytes / 4, at any stream width: what crosses
    DDR), ``stage_port_words`` those of its busiest high-performance port
    in each direction when the design spreads its IPs over ``hp_ports``
    ports (:meth:`StepHardware.ip_index`, :func:`codesign.shell.vivado.hp_port_of`).
    """

    contractions: tuple[ContractionCycles, ...]
    schedule: StepSchedule
    overlapped_makespan: int
    stream_cycles: int
    stage_words: tuple[tuple[int, int], ...] = ()  # per stage: the 32-bit words (bytes / 4) into and out of its PEs
    stage_port_words: tuple[tuple[int, int], ...] = ()  # per stage: the same through its busiest port
    pe_sums: tuple[tuple[str, tuple[int, int, int]], ...] = ()  # per PE that runs the calls: cycles, stream in, out

    @property
    def total(self) -> int:
        return sum(c.cycles for c in self.contractions)

    @property
    def makespan(self) -> int:
        return self.schedule.total

    @property
    def macs(self) -> int:
        return sum(c.macs for c in self.contractions)

    @property
    def bytes(self) -> int:
        """Bytes into and out of the PEs over the step (every stage's words times 4)."""
        return sum(w_in + w_out for w_in, w_out in self.stage_words) * WORD_BITS // 8

    def per_pe(self) -> dict[str, int]:
        """Cycles per PE, every call's counted for the PE that runs it (a swapped forward call's for PE1)."""
        return {pe: sums[0] for pe, sums in self.pe_sums}

    def per_pe_stream_words(self) -> dict[str, tuple[int, int]]:
        """Stream words in and out per PE (at its width), counted as :meth:`per_pe` counts cycles."""
        return {pe: sums[1:] for pe, sums in self.pe_sums}

    def sum_of(self, field: str) -> int:
        """``field`` of :class:`ContractionCycles` summed over the contractions."""
        return sum(getattr(c, field) for c in self.contractions)


def step_cycles(plan: StepPlan, *, hp_ports: int = 1) -> StepCycles:
    """The cycle model of one step: per contraction, the sums over its calls (cycles, phases, words, overlap
    bound), and the step scheduled on the PE copies, whose IPs send their data through ``hp_ports`` ports."""
    traffic = ("words_in", "words_out", "stream_in", "stream_out")
    sums = [dict.fromkeys(("calls", "cycles", *PHASES, "overlap", *traffic, "overlapped"), 0)
            for _ in plan.contractions]
    per_call, per_call_overlapped, per_call_words = [], [], []
    stage_of = stage_numbers(plan)
    stage_traffic: list[dict[tuple[str, str], int]] = [{} for _ in stages(plan)]  # (PE, field) -> words
    pe_sums: dict[str, tuple[int, int, int]] = {}
    for call in plan.calls:
        spec, header = plan.hardware.spec(call.pe), call.header
        cycles, moved = transaction_cycles(spec, header), call_traffic(spec, header)
        overlapped = max(moved[2], cycles.compute, moved[3])
        per_call.append(cycles.total)
        before = pe_sums.get(call.pe, (0, 0, 0))
        pe_sums[call.pe] = (before[0] + cycles.total, before[1] + moved[2], before[2] + moved[3])
        per_call_words.append(moved[:2])
        per_call_overlapped.append(overlapped)
        row = sums[call.index]
        for key, value in (("calls", 1), ("cycles", cycles.total), ("load", cycles.load),
                           ("compute", cycles.compute), ("drain", cycles.drain),
                           ("overlap", cycles.overlap + cycles.drain_overlap),
                           *zip(traffic, moved),
                           ("overlapped", overlapped)):
            row[key] += value
        words = stage_traffic[stage_of[call.index]]
        for field, value in zip(traffic, moved):  # by the PE that runs the call (a swapped call: PE1)
            words[call.pe, field] = words.get((call.pe, field), 0) + value
    stream, stage_words = 0, []
    for words in stage_traffic:
        stream += max(-(-count // plan.hardware.units(pe)) for (pe, field), count in words.items()
                      if field.startswith("stream"))  # at each PE's width: one word a cycle per stream
        stage_words.append(tuple(sum(count for (_, f), count in words.items() if f == field)
                                 for field in traffic[:2]))
    schedule = list_schedule(plan, per_call)
    return StepCycles(tuple(ContractionCycles(name=item.name, pe=item.pe, macs=item.macs, **row)
                            for item, row in zip(plan.contractions, sums)),
                      schedule=schedule,
                      overlapped_makespan=list_schedule(plan, per_call_overlapped).total, stream_cycles=stream,
                      stage_words=tuple(stage_words),
                      stage_port_words=port_words(plan, schedule.units, per_call_words, hp_ports),
                      pe_sums=tuple(pe_sums.items()))


def port_words(plan: StepPlan, units: Sequence[int], call_words: Sequence[tuple[int, int]],
               hp_ports: int) -> tuple[tuple[int, int], ...]:
    """Per stage: the 32-bit words into and out of its busiest high-performance port (each busiest on its own),
    with copy ``units[p]`` of each call's PE on port :func:`~codesign.shell.vivado.hp_port_of` of its IP's index."""
    _check_int("hp_ports", hp_ports, 1, MAX_UNITS)
    stage_of = stage_numbers(plan)
    words = np.zeros((max(stage_of) + 1, hp_ports, 2), dtype=np.int64)
    for call, unit, moved in zip(plan.calls, units, call_words):
        words[stage_of[call.index], hp_port_of(plan.hardware.ip_index(call.pe, unit), hp_ports)] += moved
    return tuple((int(w_in), int(w_out)) for w_in, w_out in words.max(axis=1))


# ---------------------------------------------------------------------------- RTL check
class RecordingRunner:
    """The golden kernels, keeping every call's operands so the same transactions can be replayed on RTL."""

    name = "golden"

    def __init__(self) -> None:
        self.log: list[tuple[str, np.ndarray, np.ndarray]] = []

    @property
    def calls(self) -> int:
        return len(self.log)

    def run(self, hardware: StepHardware, calls):
        self.log.extend((pe, np.array(a), np.array(b)) for pe, a, b in calls)
        return [golden.kernel(hardware.spec(pe), a, b) for pe, a, b in calls]


@dataclass(frozen=True)
class RtlStepCheck:
    """A step's calls on RTL: transactions and mismatching ones, summed RTL and model cycles, RTL wall time (s).

    ``rtl_makespan`` and ``model_makespan`` are the step's cycles on the
    hardware's PE copies (:func:`list_schedule`) from the RTL's and the
    model's per-call cycles. ``rtl_words`` are the 32-bit words (bytes / 4)
    the RTL took in and sent out, counted by the stream bench in words of
    each PE's width, and ``model_words`` the same from the model
    (:attr:`StepCycles.stage_words` summed).
    """

    calls: int
    mismatches: int
    rtl_cycles: int
    model_cycles: int
    seconds: float
    per_pe: dict
    rtl_makespan: int
    model_makespan: int
    rtl_words: tuple[int, int] = (0, 0)
    model_words: tuple[int, int] = (0, 0)

    @property
    def deviation(self) -> float:
        """(model - RTL) / RTL."""
        return (self.model_cycles - self.rtl_cycles) / self.rtl_cycles if self.rtl_cycles else float("inf")

    def to_dict(self) -> dict:
        return {**asdict(self), "deviation": self.deviation}


def rtl_check(layer: TtLayerState, x, grad_y, work_dir: Path, *, hardware: StepHardware = StepHardware(),
              simulator: str = "icarus") -> RtlStepCheck:
    """Run the calls of ``layer``'s step on ``(x, grad_y)`` through ``rtl/tt`` and compare with the cycle model.

    Each PE's calls become one vector file (input words and the golden
    kernels' output words); the stream bench runs them without input gaps or
    backpressure, so its per-transaction cycle counts are what the model
    predicts.
    """
    from codesign.hw.flow import run_rtl
    from codesign.hw.rtlsim import read_bench_summary
    from codesign.pe import get_pe
    from codesign.step.tt.step import pe_step, step_plan

    recorder = RecordingRunner()
    pe_step(layer, x, grad_y, recorder, hardware)  # also checks the layer and the batch before anything runs
    plan = step_plan(layer, len(x), hardware)
    if [pe for pe, _, _ in recorder.log] != [call.pe for call in plan.calls]:
        raise RuntimeError("the step's calls differ from its plan's")
    calls = mismatches = rtl_total = model_total = 0
    seconds = 0.0
    per_pe = {}
    rtl_words = [0, 0]
    rtl_call_cycles: dict[str, Iterator[int]] = {}
    for name in ("tt1", "tt2", "tt3"):
        mine = [(a, b) for pe, a, b in recorder.log if pe == name]
        if not mine:
            continue
        pe, spec = get_pe(name), hardware.spec(name)
        stimulus = [(golden.words(spec, a, b), golden.output(spec, a, b)) for a, b in mine]
        vectors = pe.write_vectors(spec, stimulus, Path(work_dir) / f"{name}_step_vectors.txt")
        result = run_rtl(pe, spec, vectors, Path(work_dir) / "rtl", simulator=simulator, bench_env=CLEAN_BENCH)
        model = sum(transaction_cycles(spec, int(words[0])).total for words, _ in stimulus)
        moved = _bench_words(read_bench_summary(result.build_dir / "summary.json"))  # words at spec's width
        rtl_words = [total + count * spec.parts for total, count in zip(rtl_words, moved)]
        calls += result.vectors
        mismatches += result.mismatches
        rtl_total += sum(result.cycles)
        model_total += model
        seconds += result.seconds
        per_pe[name] = {"calls": result.vectors, "mismatches": result.mismatches, "rtl_cycles": sum(result.cycles),
                        "model_cycles": model, "rtl_stream_words": moved}
        rtl_call_cycles[name] = iter(result.cycles)
    in_plan_order = [next(rtl_call_cycles[call.pe]) for call in plan.calls]
    model_step = step_cycles(plan)
    return RtlStepCheck(calls, mismatches, rtl_total, model_total, seconds, per_pe,
                        rtl_makespan=list_schedule(plan, in_plan_order).total, model_makespan=model_step.makespan,
                        rtl_words=tuple(rtl_words),
                        model_words=tuple(sum(words[d] for words in model_step.stage_words) for d in (0, 1)))


def _bench_words(summary: Mapping) -> tuple[int, int]:
    """Stream words (at the PE's width) the RTL took in and sent out, from the stream bench's summary."""
    received = summary["words_expected"] - summary["missing_words"] + summary["extra_words"]
    return int(summary["words_sent"]), int(received)


