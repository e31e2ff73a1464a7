"""A whole training step's time on a board: PE cycles, DDR traffic and host work, with the bottleneck named.

The step is its *stages*, each charged by the rule of
:mod:`codesign.hw.step_model` (the longer of its PE cycles and its words
through the port and DDR; the board runtime reports the same model beside
its wall time). The host's share is measured: the loop's NumPy host work per
step on the machine that runs the model, or on a board through a host
report, fitted per PE call (:class:`codesign.loops.host_share.HostModel`);
a board's ARM core is slower, so on a desktop this is a lower bound
(``host_source`` says where it was measured).

Three bounds go beside the figure: every PE stream busy on every cycle,
DDR at its peak, every MAC busy on every cycle. Energy per step is the
PE MACs at their operand widths plus the DDR bytes, from the same 45 nm
table as the training ledger (:mod:`codesign.energy.table`); static power
is not counted.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from codesign.boards import Board
from codesign.energy.table import horowitz_45nm
from codesign.hw.step_model import WORD_BYTES
from codesign.hw.step_model import port_bytes_per_s as port_bytes
from codesign.hw.step_model import stage_seconds as stage_model
from codesign.loops.host_share import HostModel
from codesign.loops.tt import TtTrainSetup
from codesign.pe.tt.reuse import ReuseBudget, reuse_budget
from codesign.pe.tt.schedule import StepHardware, StepPlan
from codesign.pe.tt.step import step_plan
from codesign.pe.tt.step_cycles import step_cycles

BOTTLENECKS = ("pe", "memory", "host")


@dataclass(frozen=True, kw_only=True)
class Stage:
    """Work that runs at once: its scheduled PE cycles (clock cycles) and the 32-bit words into and out of its PEs;
    ``port_in``/``port_out`` those of its busiest high-performance port (None: all through one)."""

    cycles: int
    words_in: int
    words_out: int
    port_in: int | None = None
    port_out: int | None = None


@dataclass(frozen=True, kw_only=True)
class StepTime:
    """Seconds of one training step on a board, split by what bounds each stage, and the bounds beside it.

    ``pe_s`` is the scheduled PE time; ``memory_s`` what data movement adds
    where a stage waits on DDR or the port; ``host_s`` the host's work.
    ``total_s`` is their sum. ``bounds`` gives the fastest any schedule could
    be with every stream busy (``streams_s``), DDR at its peak
    (``ddr_peak_s``) and every MAC busy (``macs_s``). ``energy_pj`` is the
    MACs' and DDR's dynamic energy per step. ``dense_macs`` are the MACs of
    the step were nothing pruned (0: as ``macs``), whose rate is the
    "equivalent" throughput sparse accelerators quote (paper 002's 641 GOP/s).
    """

    board: str
    clock_mhz: float
    pe_s: float
    memory_s: float
    host_s: float
    host_source: str
    bytes: int
    macs: int
    calls: int
    stages: int
    energy_pj: float
    bounds: dict[str, float] = field(default_factory=dict)
    dense_macs: int = 0

    @property
    def total_s(self) -> float:
        return self.pe_s + self.memory_s + self.host_s

    @property
    def bottleneck(self) -> str:
        """What most of the step waits on: the PEs, data movement, or the host."""
        shares = {"pe": self.pe_s, "memory": self.memory_s, "host": self.host_s}
        return max(BOTTLENECKS, key=lambda name: shares[name])

    def throughput(self, dsp: float) -> dict[str, float]:
        """Operations (2 per MAC) a second, in GOP/s, over the PEs' time and over the whole step, counting the
        MACs done (``useful``) and, for a pruned step, the dense MACs they stand for (``equivalent``); and the
        equivalent operations per DSP slice and clock cycle over the PEs' time (``dsp`` slices)."""
        dense = self.dense_macs or self.macs
        return {"useful_gops_pe": 2 * self.macs / self.pe_s / 1e9, "equivalent_gops_pe": 2 * dense / self.pe_s / 1e9,
                "equivalent_gops_step": 2 * dense / self.total_s / 1e9,
                "equivalent_ops_per_dsp_cycle": 2 * dense / (self.pe_s * self.clock_mhz * 1e6 * dsp)}

    def to_dict(self) -> dict[str, Any]:
        return {"board": self.board, "clock_mhz": self.clock_mhz, "total_s": self.total_s, "pe_s": self.pe_s,
                "memory_s": self.memory_s, "host_s": self.host_s, "host_source": self.host_source,
                "bottleneck": self.bottleneck, "bytes": self.bytes, "macs": self.macs,
                "dense_macs": self.dense_macs or self.macs, "calls": self.calls, "stages": self.stages,
                "energy_pj": self.energy_pj, "bounds": dict(self.bounds)}


def port_bytes_per_s(board: Board) -> float:
    """Bytes a second through the high-performance port in one direction: its width at the PL clock."""
    return port_bytes(board.hp_port_bits, board.fclk_mhz)


def stage_seconds(stage: Stage, board: Board, clock_mhz: float) -> tuple[float, float]:
    """(PE seconds, seconds the stage's data movement adds beyond them) of one stage on ``board``."""
    return stage_model(stage.cycles, stage.words_in, stage.words_out, clock_mhz=clock_mhz,
                       port_bytes=port_bytes_per_s(board), ddr_bytes=board.ddr_peak_gbps * 1e9,
                       port_in=stage.port_in, port_out=stage.port_out)


def step_time(stages: Sequence[Stage], board: Board, *, clock_mhz: float, host_s: float, host_source: str,
              macs: int, array_macs: int, calls: int, stream_cycles: int, mac_energy_pj: float,
              dense_macs: int = 0) -> StepTime:
    """The whole-step model of ``stages`` on ``board`` (see the module's docstring); ``mac_energy_pj`` per MAC."""
    pe_s = memory_s = 0.0
    for stage in stages:
        pe, extra = stage_seconds(stage, board, clock_mhz)
        pe_s += pe
        memory_s += extra
    total_bytes = sum(s.words_in + s.words_out for s in stages) * WORD_BYTES
    table = horowitz_45nm()
    energy = macs * mac_energy_pj + table.memory(total_bytes * 8, dram=True)
    hz = clock_mhz * 1e6
    bounds = {"streams_s": stream_cycles / hz, "ddr_peak_s": total_bytes / (board.ddr_peak_gbps * 1e9),
              "macs_s": macs / (array_macs * hz)}
    return StepTime(board=board.name, clock_mhz=clock_mhz, pe_s=pe_s, memory_s=memory_s, host_s=host_s,
                    host_source=host_source, bytes=total_bytes, macs=macs, calls=calls, stages=len(stages),
                    energy_pj=energy, bounds=bounds, dense_macs=dense_macs)


def stream_cycles(stages: Sequence[Stage]) -> int:
    """Cycles of ``stages`` with the PE's input and output streams busy on every cycle (one 32-bit word each a
    cycle): the bound of a PE that loads, computes and drains one after the other."""
    return sum(max(stage.words_in, stage.words_out) for stage in stages)


# ---------------------------------------------------------------------------- the TT loop's step


def tt_plans(setup: TtTrainSetup, hardware: StepHardware) -> list[StepPlan]:
    """The step plan of every layer of the TT loop on ``hardware``, at their initial ranks."""
    return [step_plan(setup.layer_state(index, setup.initial_cores(index)), setup.batch_size, hardware)
            for index in range(len(setup.layers))]


def tt_stages(setup: TtTrainSetup, hardware: StepHardware, *, hp_ports: int = 1) -> tuple[list[Stage], dict[str, int]]:
    """Every stage of one training step of the TT loop's layers on ``hardware`` (at their initial ranks), its IPs
    spread over ``hp_ports`` high-performance ports, and the step's MACs, PE calls and stream-bound cycles."""
    stages: list[Stage] = []
    totals = {"macs": 0, "calls": 0, "stream_cycles": 0}
    for plan in tt_plans(setup, hardware):
        cycles = step_cycles(plan, hp_ports=hp_ports)
        stages += [Stage(cycles=c, words_in=w_in, words_out=w_out, port_in=p_in, port_out=p_out)
                   for c, (w_in, w_out), (p_in, p_out) in zip(cycles.schedule.stage_cycles, cycles.stage_words,
                                                              cycles.stage_port_words)]
        totals["macs"] += cycles.macs
        totals["calls"] += len(plan.calls)
        totals["stream_cycles"] += cycles.stream_cycles
    return stages, totals


def tt_reuse(setup: TtTrainSetup, hardware: StepHardware, *, bram_bytes: int) -> ReuseBudget:
    """What keeping the step's intermediate states and held cores on chip would save the TT loop on ``hardware``,
    within ``bram_bytes`` of BRAM (:func:`codesign.pe.tt.reuse.reuse_budget`)."""
    plans = tt_plans(setup, hardware)
    return reuse_budget(plans, [step_cycles(plan).schedule.units for plan in plans], bram_bytes=bram_bytes)


def tt_mac_energy_pj(setup: TtTrainSetup) -> float:
    """Energy of one PE MAC (pJ): the widest operand pair of the step (16-bit gradients by 8-bit activations)."""
    precision = setup.precision
    bits = sorted((precision["grad_bits"], precision["activation_bits"], precision["core_bits"]), reverse=True)
    return horowitz_45nm().int_mac(bits[0], bits[1], 32)


def tt_step_time(setup: TtTrainSetup, hardware: StepHardware, board: Board, *, clock_mhz: float,
                 host: HostModel, hp_ports: int = 1) -> StepTime:
    """The whole-step model of the TT loop ``setup`` on ``hardware`` and ``board``, its IPs over ``hp_ports`` of the
    board's high-performance ports; ``host`` prices its calls."""
    stages, totals = tt_stages(setup, hardware, hp_ports=hp_ports)
    return step_time(stages, board, clock_mhz=clock_mhz, host_s=host.seconds(totals["calls"]), host_source=host.source,
                     macs=totals["macs"], array_macs=hardware.macs(), calls=totals["calls"],
                     stream_cycles=totals["stream_cycles"], mac_energy_pj=tt_mac_energy_pj(setup))


__all__ = ["Stage", "StepTime", "port_bytes_per_s", "stage_seconds", "step_time", "stream_cycles", "tt_mac_energy_pj",
           "tt_plans", "tt_reuse", "tt_stages", "tt_step_time"]
