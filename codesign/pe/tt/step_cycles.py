"""Cycles of a TT layer's training step on the PEs, checked against the RTL, and the paper's seconds per batch.

The model adds the per-transaction cycle models of :mod:`codesign.pe.tt.cycles`
(exact against the RTL, transaction by transaction) over the calls of a
:class:`codesign.pe.tt.schedule.StepPlan`. The calls run one after another
(the PEs' RTL does not overlap loading with computing, and the schedule
issues one call at a time), so the step's cycles are their sum; the host's
work between calls (scales, rounding, the permutation of the core-gradient
operands) and DRAM traffic are not counted.

:func:`rtl_check` runs every call of one small step through the RTL of the
PEs under cocotb (the stream bench, no gaps, no backpressure), checks every
output word against the golden kernels and compares the summed RTL cycles
with the model. :func:`paper_comparison` gives seconds per batch-64 step at
100 MHz for paper 003's two-layer FashionMNIST network (Sec. 5, App. B: 0.09 s
on Ultra96-V2, 278 DSP); its factorisations and ranks are not legible in our
copy of the paper, so the modes below are ours: the 784 inputs padded to
1024 = 4·8·8·4, 512 hidden = 8·4·4·4, 10 outputs = 1·1·2·5, all inner ranks
equal.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from codesign.pe.tt import golden
from codesign.pe.tt.contract import header_word
from codesign.pe.tt.cycles import stream_words, transaction_cycles
from codesign.pe.tt.schedule import LayerGeometry, StepHardware, StepPlan, plan_step

PAPER_SECONDS = 0.09  # paper 003, Sec. 5: forward and backward of a batch of 64 at 100 MHz
PAPER_DSP = 278  # paper 003, Table 2
GOAL_SECONDS = 0.045  # half the paper's time ...
GOAL_DSP = PAPER_DSP  # ... at no more DSP slices
PAPER_CLOCK_MHZ = 100.0
PAPER_BATCH = 64
PAPER_LAYERS = (((4, 8, 8, 4), (8, 4, 4, 4)), ((8, 4, 4, 4), (1, 1, 2, 5)))  # (in_modes, out_modes); ours
CLEAN_BENCH = {"STREAM_GAP_PROBABILITY": "0", "STREAM_BACKPRESSURE": "0"}


@dataclass(frozen=True)
class ContractionCycles:
    """One contraction of a step: its PE, calls, useful MACs, modelled cycles (clock cycles), and what bounds them.

    ``load``, ``compute`` and ``drain`` split ``cycles`` by phase (the
    header and status cycles make up the rest). ``words_in`` and
    ``words_out`` are the 32-bit stream words its calls move, and
    ``overlapped`` is the sum over its calls of max(words in, compute
    cycles, words out): what a PE with the same streams and MAC array would
    take if it overlapped loading, computing and sending completely (the
    paper's ping-pong buffers).
    """

    name: str
    pe: str
    calls: int
    macs: int
    cycles: int
    load: int
    compute: int
    drain: int
    words_in: int
    words_out: int
    overlapped: int


PHASES = ("load", "compute", "drain")


@dataclass(frozen=True)
class StepCycles:
    """Modelled cycles of one layer step, per contraction; ``total`` is their sum (calls run one at a time)."""

    contractions: tuple[ContractionCycles, ...]

    @property
    def total(self) -> int:
        return sum(c.cycles for c in self.contractions)

    @property
    def macs(self) -> int:
        return sum(c.macs for c in self.contractions)

    def per_pe(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for c in self.contractions:
            out[c.pe] = out.get(c.pe, 0) + c.cycles
        return out

    def sum_of(self, field: str) -> int:
        """``field`` of :class:`ContractionCycles` summed over the contractions."""
        return sum(getattr(c, field) for c in self.contractions)


def step_cycles(plan: StepPlan) -> StepCycles:
    """The cycle model of one step: per contraction, the sums over its calls (cycles, phases, words, overlap bound)."""
    sums = [dict.fromkeys(("calls", "cycles", *PHASES, "words_in", "words_out", "overlapped"), 0)
            for _ in plan.contractions]
    for call in plan.calls:
        spec, header = plan.hardware.spec(call.pe), header_word(*call.dims)
        cycles, (words_in, words_out) = transaction_cycles(spec, header), stream_words(spec, header)
        row = sums[call.index]
        for key, value in (("calls", 1), ("cycles", cycles.total), ("load", cycles.load),
                           ("compute", cycles.compute), ("drain", cycles.drain), ("words_in", words_in),
                           ("words_out", words_out), ("overlapped", max(words_in, cycles.compute, words_out))):
            row[key] += value
    return StepCycles(tuple(ContractionCycles(name=item.name, pe=item.pe, macs=item.macs, **row)
                            for item, row in zip(plan.contractions, sums)))


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
    """A step's calls on RTL: transactions and mismatching ones, summed RTL and model cycles, RTL wall time (s)."""

    calls: int
    mismatches: int
    rtl_cycles: int
    model_cycles: int
    seconds: float
    per_pe: dict

    @property
    def deviation(self) -> float:
        """(model - RTL) / RTL."""
        return (self.model_cycles - self.rtl_cycles) / self.rtl_cycles if self.rtl_cycles else float("inf")

    def to_dict(self) -> dict:
        return {**asdict(self), "deviation": self.deviation}


def rtl_check(layer, x, grad_y, work_dir: Path, *, hardware: StepHardware = StepHardware(),
              simulator: str = "icarus") -> RtlStepCheck:
    """Run the calls of ``layer``'s step on ``(x, grad_y)`` through ``rtl/tt`` and compare with the cycle model.

    Each PE's calls become one vector file (input words and the golden
    kernels' output words); the stream bench runs them without input gaps or
    backpressure, so its per-transaction cycle counts are what the model
    predicts.
    """
    from codesign.hw.flow import run_rtl
    from codesign.pe import get_pe
    from codesign.pe.tt.step import pe_step

    recorder = RecordingRunner()
    pe_step(layer, x, grad_y, recorder, hardware)  # also checks the layer and the batch before anything runs
    calls = mismatches = rtl_total = model_total = 0
    seconds = 0.0
    per_pe = {}
    for name in ("tt1", "tt2", "tt3"):
        mine = [(a, b) for pe, a, b in recorder.log if pe == name]
        if not mine:
            continue
        pe, spec = get_pe(name), hardware.spec(name)
        stimulus = [(golden.words(spec, a, b), golden.output(spec, a, b)) for a, b in mine]
        vectors = pe.write_vectors(spec, stimulus, Path(work_dir) / f"{name}_step_vectors.txt")
        result = run_rtl(pe, spec, vectors, Path(work_dir) / "rtl", simulator=simulator, bench_env=CLEAN_BENCH)
        model = sum(transaction_cycles(spec, int(words[0])).total for words, _ in stimulus)
        calls += result.vectors
        mismatches += result.mismatches
        rtl_total += sum(result.cycles)
        model_total += model
        seconds += result.seconds
        per_pe[name] = {"calls": result.vectors, "mismatches": result.mismatches, "rtl_cycles": sum(result.cycles),
                        "model_cycles": model}
    return RtlStepCheck(calls, mismatches, rtl_total, model_total, seconds, per_pe)


# ---------------------------------------------------------------------------- the paper's comparison
@dataclass(frozen=True)
class PaperComparison:
    """Seconds per batch-64 training step of the paper's network on our PEs, against the paper and the goal.

    ``dsp`` holds the Yosys DSP count of each PE build (None when not
    measured); the array has one PE of each kind. ``phases`` splits the
    modelled cycles into load, compute and drain (the rest are header and
    status cycles); ``words_in``, ``words_out`` and ``overlapped_cycles``
    are the sums of :class:`ContractionCycles`' fields over both layers.
    """

    rank: int
    batch: int
    clock_mhz: float
    layer_cycles: tuple[int, ...]
    macs: int
    dsp: dict | None
    phases: dict
    words_in: int
    words_out: int
    overlapped_cycles: int

    @property
    def cycles(self) -> int:
        return sum(self.layer_cycles)

    @property
    def seconds(self) -> float:
        return self.cycles / (self.clock_mhz * 1e6)

    @property
    def overlapped_seconds(self) -> float:
        """Seconds if every call overlapped loading, computing and sending completely (calls still one at a time)."""
        return self.overlapped_cycles / (self.clock_mhz * 1e6)

    @property
    def stream_seconds(self) -> float:
        """Seconds to move the step's words through one 32-bit input and one 32-bit output stream, both always busy.

        No schedule of these calls on PEs with one such stream pair can be
        faster; a faster step needs wider streams.
        """
        return max(self.words_in, self.words_out) / (self.clock_mhz * 1e6)

    @property
    def dsp_total(self) -> int | None:
        return None if self.dsp is None else sum(self.dsp.values())

    @property
    def mac_utilisation(self) -> float:
        """Useful MACs over what one 128-MAC PE does in the modelled cycles (one call runs at a time)."""
        return self.macs / (self.cycles * 128)

    @property
    def meets_goal(self) -> bool | None:
        if self.dsp_total is None:
            return None
        return self.seconds <= GOAL_SECONDS and self.dsp_total <= GOAL_DSP

    def to_dict(self) -> dict:
        return {**asdict(self), "cycles": self.cycles, "seconds": self.seconds, "dsp_total": self.dsp_total,
                "mac_utilisation": self.mac_utilisation, "meets_goal": self.meets_goal,
                "overlapped_seconds": self.overlapped_seconds, "stream_seconds": self.stream_seconds,
                "paper_seconds": PAPER_SECONDS, "paper_dsp": PAPER_DSP, "goal_seconds": GOAL_SECONDS,
                "goal_dsp": GOAL_DSP}


def paper_plans(rank: int, *, batch: int = PAPER_BATCH, hardware: StepHardware = StepHardware()) -> list[StepPlan]:
    """The schedules of the paper network's two layers; the first is the network input (no input gradient)."""
    plans = []
    for index, (in_modes, out_modes) in enumerate(PAPER_LAYERS):
        ranks = (1, *([rank] * (len(in_modes) - 1)), 1)
        geometry = LayerGeometry(in_modes=in_modes, out_modes=out_modes, ranks=ranks, batch=batch)
        plans.append(plan_step(geometry, need_input_grad=index > 0, hardware=hardware))
    return plans


def paper_comparison(rank: int, *, dsp: Mapping[str, int] | None = None, batch: int = PAPER_BATCH,
                     clock_mhz: float = PAPER_CLOCK_MHZ, hardware: StepHardware = StepHardware()) -> PaperComparison:
    """Modelled seconds per step of the paper's network at inner rank ``rank`` (all ranks equal)."""
    steps = [step_cycles(plan) for plan in paper_plans(rank, batch=batch, hardware=hardware)]

    def total(field: str) -> int:
        return sum(step.sum_of(field) for step in steps)

    return PaperComparison(rank=rank, batch=batch, clock_mhz=clock_mhz, layer_cycles=tuple(s.total for s in steps),
                           macs=sum(s.macs for s in steps), dsp=None if dsp is None else dict(dsp),
                           phases={phase: total(phase) for phase in PHASES}, words_in=total("words_in"),
                           words_out=total("words_out"), overlapped_cycles=total("overlapped"))


def comparison_table(rows: Sequence[PaperComparison]) -> str:
    """Markdown: one row per rank, with the paper's figures and the goal, then where the cycles go and the bounds."""
    lines = ["| rank | cycles (layer 1 + layer 2) | s per batch-64 step | MAC use | DSP (tt1 + tt2 + tt3) | "
             "paper | goal met |", "|---:|---:|---:|---:|---:|---|---|"]
    for row in rows:
        dsp = "not measured" if row.dsp is None else " + ".join(str(v) for v in row.dsp.values()) + \
            f" = {row.dsp_total}"
        goal = {None: "unknown (no DSP count)", True: "yes", False: "no"}[row.meets_goal]
        lines.append(f"| {row.rank} | {row.layer_cycles[0]:,} + {row.layer_cycles[1]:,} | {row.seconds:.4f} | "
                     f"{row.mac_utilisation:.1%} | {dsp} | {PAPER_SECONDS} s, {PAPER_DSP} DSP | {goal} |")
    lines += ["", "| rank | load / compute / drain (share of cycles) | words in / out | s, phases overlapped per call | "
              "s, 32-bit streams always busy |", "|---:|---|---:|---:|---:|"]
    for row in rows:
        shares = " / ".join(f"{row.phases[phase] / row.cycles:.0%}" for phase in PHASES)
        lines.append(f"| {row.rank} | {shares} | {row.words_in:,} / {row.words_out:,} | "
                     f"{row.overlapped_seconds:.4f} | {row.stream_seconds:.4f} |")
    return "\n".join(lines) + "\n"


def yosys_dsp(hardware: StepHardware, work_dir: Path, *, family: str = "xcup") -> dict[str, int]:
    """DSP slices of the three PE builds from Yosys (``synth_xilinx -family <family>``); minutes per PE."""
    from codesign.hw import yosys as ys
    from codesign.pe import get_pe

    out = {}
    for name in ("tt1", "tt2", "tt3"):
        pe = get_pe(name)
        job = ys.SynthJob(sources=tuple(pe.rtl_sources()), top=pe.rtl_top, family=family,
                          params=pe.rtl_parameters(hardware.spec(name)))
        out[name] = int(ys.synthesize(job, Path(work_dir) / job.slug).counts.dsp)
    return out
