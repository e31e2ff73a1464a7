"""Paper 003's TT network on our PEs: modelled seconds per batch-64 training step against the paper and the goal.

Paper 003 (Sec. 5, App. B) trains a two-layer FashionMNIST network in 0.09 s
a batch of 64 at 100 MHz on the Ultra96-V2 with 278 DSP slices. Its
factorisations and ranks are not legible in our copy of the paper, so the
modes are ours (:data:`codesign.design.families.tt.PAPER_LAYERS`): the
784 inputs padded to 1024 = 4·8·8·4, 512 hidden = 8·4·4·4, 10 outputs =
1·1·2·5, all inner ranks equal. The cycles come from the step floor
(:func:`codesign.step.tt.cycles.step_cycles`); the DSP counts from Yosys.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from codesign.design.families.tt import PAPER_BATCH, PAPER_LAYERS
from codesign.step.tt.cycles import PARALLEL_HARDWARE, PHASES, step_cycles
from codesign.step.tt.schedule import PE_NAMES, LayerGeometry, StepHardware, StepPlan, plan_step

PAPER_SECONDS = 0.09  # paper 003, Sec. 5: forward and backward of a batch of 64 at 100 MHz
PAPER_DSP = 278  # paper 003, Table 2
GOAL_SECONDS = 0.045  # half the paper's time ...
GOAL_DSP = PAPER_DSP  # ... at no more DSP slices
PAPER_CLOCK_MHZ = 100.0


@dataclass(frozen=True)
class PaperComparison:
    """Seconds per batch-64 training step of the paper's network on our PEs, against the paper and the goal.

    ``hardware`` names the PE copies (:meth:`StepHardware.describe`) and
    ``units`` counts them per PE; ``dsp`` holds the Yosys DSP count of one
    copy of each PE build (None when not measured), the array carrying one
    PE3. ``layer_cycles`` are the layers' scheduled cycles
    (:attr:`StepCycles.makespan`) and ``busy_cycles`` every call's cycles
    added. ``phases`` splits the busy cycles into load, compute and drain
    (load only where it does not run beside the MAC loop, ``Cycles.overlap``;
    the rest are header and status cycles); ``words_in`` and ``words_out``
    are the 32-bit words moved (bytes / 4), ``overlapped_cycles`` and ``stream_cycles`` the
    two bounds of :class:`StepCycles`, all summed over both layers.
    """

    rank: int
    batch: int
    clock_mhz: float
    hardware: str
    units: dict
    array_macs: int
    layer_cycles: tuple[int, ...]
    busy_cycles: int
    macs: int
    dsp: dict | None
    phases: dict
    words_in: int
    words_out: int
    overlapped_cycles: int
    stream_cycles: int
    route: str = "direct"  # the core gradients' route
    outer_pe: str = "tt3"  # the PE that forms dW on the dense route (StepHardware.outer_pe)

    @property
    def cycles(self) -> int:
        return sum(self.layer_cycles)

    def _seconds(self, cycles: int) -> float:
        return cycles / (self.clock_mhz * 1e6)

    @property
    def seconds(self) -> float:
        return self._seconds(self.cycles)

    @property
    def overlapped_seconds(self) -> float:
        """Seconds if every call overlapped loading, computing and sending completely (same schedule of calls)."""
        return self._seconds(self.overlapped_cycles)

    @property
    def stream_seconds(self) -> float:
        """Seconds to move every stage's words through its PEs' stream pairs (one ``stream_bits``-wide word a cycle
        each way), all busy on every cycle.

        No schedule of these calls on these streams can be faster; a faster
        step needs more or wider streams.
        """
        return self._seconds(self.stream_cycles)

    @property
    def dsp_total(self) -> int | None:
        return None if self.dsp is None else sum(count * self.units[pe] for pe, count in self.dsp.items())

    @property
    def mac_utilisation(self) -> float:
        """Useful MACs over what the array's PE1 and PE2 multipliers could do in the scheduled cycles."""
        return self.macs / (self.cycles * self.array_macs)

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


def paper_plans(rank: int, *, batch: int = PAPER_BATCH, hardware: StepHardware = StepHardware(),
                route: str = "direct") -> list[StepPlan]:
    """The schedules of the paper network's two layers; the first is the network input (no input gradient);
    ``route``: the core gradients' (``TTPrecision.core_grad_route``)."""
    plans = []
    for index, (in_modes, out_modes) in enumerate(PAPER_LAYERS):
        ranks = (1, *([rank] * (len(in_modes) - 1)), 1)
        geometry = LayerGeometry(in_modes=in_modes, out_modes=out_modes, ranks=ranks, batch=batch)
        plans.append(plan_step(geometry, need_input_grad=index > 0, hardware=hardware, core_grad_route=route))
    return plans


def paper_comparison(rank: int, *, dsp: Mapping[str, int] | None = None, batch: int = PAPER_BATCH,
                     clock_mhz: float = PAPER_CLOCK_MHZ, hardware: StepHardware = StepHardware(),
                     route: str = "direct") -> PaperComparison:
    """Modelled seconds per step of the paper's network at inner rank ``rank`` (all ranks equal) on ``hardware``.

    ``dsp`` is the DSP count of one copy of each PE build (``tt1``, ``tt2``,
    ``tt3``), as :func:`yosys_dsp` measures it.
    """
    steps = [step_cycles(plan) for plan in paper_plans(rank, batch=batch, hardware=hardware, route=route)]

    def total(field: str) -> int:
        return sum(step.sum_of(field) for step in steps)

    return PaperComparison(rank=rank, batch=batch, clock_mhz=clock_mhz, hardware=hardware.describe(),
                           units={pe: hardware.units(pe) for pe in ("tt1", "tt2", "tt3")},
                           array_macs=hardware.macs(), layer_cycles=tuple(s.makespan for s in steps),
                           busy_cycles=sum(s.total for s in steps), macs=sum(s.macs for s in steps),
                           dsp=None if dsp is None else dict(dsp),
                           phases={phase: total(phase) - (total("overlap") if phase == "load" else 0)
                                   for phase in PHASES}, words_in=total("words_in"),
                           words_out=total("words_out"),
                           overlapped_cycles=sum(s.overlapped_makespan for s in steps),
                           stream_cycles=sum(s.stream_cycles for s in steps), route=route,
                           outer_pe=hardware.outer_pe)


def comparison_table(rows: Sequence[PaperComparison]) -> str:
    """Markdown: one row per hardware and rank, with the paper's figures and the goal, then where the cycles go and
    the bounds."""
    lines = ["| PEs (copies x lanes x rows) | core gradients | rank | cycles (layer 1 + layer 2) | s per batch-64 step "
             "| MAC use | DSP (tt1 + tt2 + tt3) | paper | goal met |", "|---|---|---:|---:|---:|---:|---:|---|---|"]
    for row in rows:
        dsp = "not measured" if row.dsp is None else " + ".join(
            f"{row.units[pe]} x {count}" if row.units[pe] > 1 else str(count) for pe, count in row.dsp.items()) + \
            f" = {row.dsp_total}"
        goal = {None: "unknown (no DSP count)", True: "yes", False: "no"}[row.meets_goal]
        lines.append(f"| {row.hardware} | {_route_text(row)} | {row.rank} | "
                     f"{row.layer_cycles[0]:,} + {row.layer_cycles[1]:,} | "
                     f"{row.seconds:.4f} | {row.mac_utilisation:.1%} | {dsp} | {PAPER_SECONDS} s, {PAPER_DSP} DSP | "
                     f"{goal} |")
    lines += ["", "| PEs | core gradients | rank | load / compute / drain (share of busy cycles) | words in / out | "
              "s, phases overlapped per call | s, streams always busy |", "|---|---|---:|---|---:|---:|---:|"]
    for row in rows:
        shares = " / ".join(f"{row.phases[phase] / row.busy_cycles:.0%}" for phase in PHASES)
        lines.append(f"| {row.hardware} | {_route_text(row)} | {row.rank} | {shares} | "
                     f"{row.words_in:,} / {row.words_out:,} | {row.overlapped_seconds:.4f} | "
                     f"{row.stream_seconds:.4f} |")
    return "\n".join(lines) + "\n"


def _route_text(row: PaperComparison) -> str:
    return "direct" if row.route == "direct" else f"dense, dW on {PE_NAMES[row.outer_pe]}"


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


COMPARISON_RANKS = (2, 4, 8, 16)
COMPARISON_HARDWARE = (StepHardware(), PARALLEL_HARDWARE)
# the core gradients' routes compared: direct, and dense with dW summed over the batch on PE1 (PE3's outer
# products, one product a word back to memory, take several times the whole direct step: docs/tt_pe.md)
COMPARISON_ROUTES = (("direct", "tt3"), ("dense", "tt1"))


def measure_comparison(work_dir: Path, *, ranks: Sequence[int] = COMPARISON_RANKS,
                       hardware: Sequence[StepHardware] = COMPARISON_HARDWARE,
                       routes: Sequence[tuple[str, str]] = COMPARISON_ROUTES, progress=print) -> list[PaperComparison]:
    """The paper comparison for every array, route (with the PE forming dW) and rank, with the DSP counts Yosys
    gives for each array's builds."""
    rows = []
    for array in hardware:
        progress(f"[tt comparison] Yosys (xcup) of {array.describe()} + tt3 ...")
        dsp = yosys_dsp(array, Path(work_dir) / "yosys")
        progress(f"[tt comparison] DSP per build: {dsp}")
        rows += [paper_comparison(rank, dsp=dsp, hardware=dataclasses.replace(array, outer_pe=outer), route=route)
                 for route, outer in routes for rank in ranks]
    return rows


def write_comparison(out_dir: Path, rows: Sequence[PaperComparison]) -> dict[str, Path]:
    """``tt_paper_comparison.json``, ``.md`` (:func:`comparison_table`) and ``.png`` (seconds per step against rank,
    one line per array, with the paper's time and the goal), each written atomically."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from codesign.io.reports import write_figure_png, write_json_atomic, write_text_atomic

    if not rows:
        raise ValueError("no comparison rows to write")
    out_dir = Path(out_dir)
    figure, axis = plt.subplots(figsize=(6.4, 4.2), dpi=120)
    for index, (name, route) in enumerate(dict.fromkeys((row.hardware, _route_text(row)) for row in rows)):
        mine = sorted((row for row in rows if (row.hardware, _route_text(row)) == (name, route)),
                      key=lambda row: row.rank)
        dsp = mine[0].dsp_total
        label = f"{name}, {route} ({'DSP not measured' if dsp is None else f'{dsp} DSP'})"
        axis.plot([row.rank for row in mine], [row.seconds for row in mine], "o-", color=f"C{index}", label=label)
        axis.plot([row.rank for row in mine], [row.stream_seconds for row in mine], ":", color=f"C{index}",
                  label=f"{name}, {route}: stream bound")
    axis.axhline(PAPER_SECONDS, color="black", linestyle="--", label=f"paper 003: {PAPER_SECONDS} s, {PAPER_DSP} DSP")
    axis.axhline(GOAL_SECONDS, color="green", linestyle="--", label=f"goal: {GOAL_SECONDS} s at <= {GOAL_DSP} DSP")
    axis.set_xscale("log", base=2)
    axis.set_yscale("log")
    axis.set_xlabel("inner TT rank (all ranks equal)")
    axis.set_ylabel(f"s per batch-{rows[0].batch} step at {rows[0].clock_mhz:.0f} MHz (model)")
    axis.set_title("TT training step of the paper's two-layer network on the PEs", fontsize=9)
    axis.grid(alpha=0.3, which="both")
    axis.legend(fontsize=7)
    figure.tight_layout()
    return {"json": write_json_atomic(out_dir / "tt_paper_comparison.json", [row.to_dict() for row in rows]),
            "md": write_text_atomic(out_dir / "tt_paper_comparison.md", comparison_table(rows)),
            "png": write_figure_png(figure, out_dir / "tt_paper_comparison.png")}


__all__ = ["COMPARISON_RANKS", "GOAL_DSP", "GOAL_SECONDS", "PAPER_DSP", "PAPER_SECONDS", "PaperComparison",
           "comparison_table", "measure_comparison", "paper_comparison", "paper_plans", "write_comparison",
           "yosys_dsp"]
