"""A whole training step's time on a board: PE cycles, DDR traffic and host work, with the bottleneck named.

The step is its *stages*, each charged by the rule of
:mod:`codesign.step.model` (the longer of its PE cycles and its words
through the port and DDR; the board runtime reports the same model beside
its wall time). The host's share is measured: the loop's NumPy host work per
step on the machine that runs the model, or on a board through a host
report, fitted per PE call (:class:`codesign.step.host.HostModel`);
a board's ARM core is slower, so on a desktop this is a lower bound
(``host_source`` says where it was measured).

Three bounds go beside the figure: every PE stream busy on every cycle,
DDR at its peak, every MAC busy on every cycle. Energy per step is the
PE MACs at their operand widths plus the DDR bytes, from the same 45 nm
table as the training ledger (:mod:`codesign.energy.table`); static power
is not counted.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from codesign.boards import Board
from codesign.contracts.calls import Call
from codesign.energy.table import horowitz_45nm
from codesign.step.list_cycles import list_words
from codesign.step.model import WORD_BYTES, busiest_port, check_hp_ports, hp_port_of
from codesign.step.model import port_bytes_per_s as port_bytes
from codesign.step.model import stage_seconds as stage_model

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


def list_stage(cycles: int, calls: Sequence[Call]) -> Stage:
    """A call list as one stage: ``cycles`` from its start to its done (the list cycle model's figure, which holds
    the sequencer, its DMA and the PE; :func:`codesign.step.list_cycles.list_cycles`), and the words it moves over
    the port (:func:`codesign.step.list_cycles.list_words`). The stage model then charges the port and DDR where
    the board's are slower than the model's memory."""
    if isinstance(cycles, bool) or not isinstance(cycles, int) or cycles < 0:
        raise ValueError(f"cycles={cycles!r} must be a non-negative int")
    words_in, words_out = list_words(calls)
    return Stage(cycles=cycles, words_in=words_in, words_out=words_out)


def list_step_time(priced, board: Board, *, clock_mhz: float, host_s: float, host_source: str, array_macs: int,
                   mac_energy_pj: float, dense_macs: int = 0, beside: Mapping[int, float] | None = None,
                   hp_ports: int = 1) -> StepTime:
    """The whole step of a family's lists, ``priced`` as :func:`codesign.step.list_cycles.step_cycles` gives them
    (a list after another on one IP) or by phase (:func:`codesign.step.share.phased_step_cycles`: lists side by
    side on copies), plus the step's ``macs``: a stage a list or phase, its cycles and words; the host's ``host_s``
    measured where it runs, of which ``beside`` (stage index -> seconds) ran while that stage's lists computed
    and is hidden as far as they reach (:func:`hidden_seconds`); the IPs over ``hp_ports`` ports
    (:func:`list_stages`)."""
    stages = list_stages(priced, hp_ports)
    beside = beside or {}
    if sum(beside.values()) > host_s:
        raise ValueError(f"host_s={host_s} s is less than the {sum(beside.values())} s of it run beside the stages")
    hidden = hidden_seconds(beside, stages, board, clock_mhz)
    return step_time(stages, board, clock_mhz=clock_mhz, host_s=host_s - hidden, host_source=host_source,
                     macs=priced["macs"], array_macs=array_macs, calls=priced["calls"],
                     stream_cycles=stream_cycles(stages), mac_energy_pj=mac_energy_pj, dense_macs=dense_macs)


def hidden_seconds(beside: Mapping[int, float], stages: Sequence[Stage], board: Board, clock_mhz: float) -> float:
    """Seconds of ``beside`` (stage index -> the host's seconds of work while that stage's lists computed) the
    stages hide: each as far as its stage's PE and data-movement seconds reach; the rest still adds to the step."""
    hidden = 0.0
    for index, seconds in beside.items():
        if not 0 <= index < len(stages):
            raise ValueError(f"host work beside stage {index}: the step has {len(stages)} stages")
        if seconds < 0:
            raise ValueError(f"host work beside stage {index}: {seconds} s is negative")
        hidden += min(seconds, sum(stage_seconds(stages[index], board, clock_mhz)))
    return hidden


def list_stages(priced, hp_ports: int = 1) -> list[Stage]:
    """A step's lists as ``priced`` by :func:`codesign.step.list_cycles.step_cycles`, a stage a list (or by
    phase, :func:`codesign.step.share.phased_step_cycles`: a phase's ``k``-th list on the PE's ``k``-th IP): its
    cycles and its words, and those of its busiest port where the IPs of one PE, listed one after another, are
    spread over ``hp_ports`` ports (:func:`codesign.step.model.hp_port_of`)."""
    check_hp_ports(hp_ports)
    stages = []
    for name, words in priced["words"].items():
        lists = priced.get("list_words", {}).get(name, [words])
        port_in, port_out = busiest_port(lists, [hp_port_of(index, hp_ports) for index in range(len(lists))])
        stages.append(Stage(cycles=priced[name], words_in=words[0], words_out=words[1], port_in=port_in,
                            port_out=port_out))
    return stages


def stream_cycles(stages: Sequence[Stage]) -> int:
    """Cycles of ``stages`` with the PE's input and output streams busy on every cycle (one 32-bit word each a
    cycle): the bound of a PE that loads, computes and drains one after the other."""
    return sum(max(stage.words_in, stage.words_out) for stage in stages)


__all__ = ["Stage", "StepTime", "hidden_seconds", "list_stage", "list_stages", "list_step_time", "port_bytes_per_s",
           "stage_seconds", "step_time", "stream_cycles"]
