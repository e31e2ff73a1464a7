"""A TT training step's whole-step model (:mod:`codesign.step.time`): every layer's step plan on the hardware, at
the layers' initial ranks, staged and priced; and what keeping data on chip would save.

The layers come from a loop's set-up (:class:`codesign.loops.tt.TtTrainSetup`), read through
:class:`TtLayers`, so that this floor does not import the loops above it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

import numpy as np

from codesign.boards import Board
from codesign.energy.table import horowitz_45nm
from codesign.step.host import HostModel
from codesign.step.time import Stage, StepTime, step_time
from codesign.step.tt.cycles import step_cycles
from codesign.step.tt.layer_state import TtLayerState
from codesign.step.tt.reuse import ReuseBudget, reuse_budget
from codesign.step.tt.schedule import StepHardware, StepPlan
from codesign.step.tt.step import step_plan


class TtLayers(Protocol):
    """What the step model reads of a TT loop's set-up: its layers, batch, precision (bits per tensor), and each
    layer's state at its initial cores."""

    layers: Sequence[Mapping[str, Any]]
    batch_size: int
    precision: Mapping[str, Any]

    def initial_cores(self, index: int) -> list[np.ndarray]: ...

    def layer_state(self, index: int, cores: Sequence[np.ndarray]) -> TtLayerState: ...


def tt_plans(setup: TtLayers, hardware: StepHardware) -> list[StepPlan]:
    """The step plan of every layer of the TT loop on ``hardware``, at their initial ranks."""
    return [step_plan(setup.layer_state(index, setup.initial_cores(index)), setup.batch_size, hardware)
            for index in range(len(setup.layers))]


def tt_stages(setup: TtLayers, hardware: StepHardware, *, hp_ports: int = 1) -> tuple[list[Stage], dict[str, int]]:
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


def tt_reuse(setup: TtLayers, hardware: StepHardware, *, bram_bytes: int) -> ReuseBudget:
    """What keeping the step's intermediate states and held cores on chip would save the TT loop on ``hardware``,
    within ``bram_bytes`` of BRAM (:func:`codesign.step.tt.reuse.reuse_budget`)."""
    plans = tt_plans(setup, hardware)
    return reuse_budget(plans, [step_cycles(plan).schedule.units for plan in plans], bram_bytes=bram_bytes)


def tt_mac_energy_pj(setup: TtLayers) -> float:
    """Energy of one PE MAC (pJ): the widest operand pair of the step (16-bit gradients by 8-bit activations)."""
    precision = setup.precision
    bits = sorted((precision["grad_bits"], precision["activation_bits"], precision["core_bits"]), reverse=True)
    return horowitz_45nm().int_mac(bits[0], bits[1], 32)


def tt_step_time(setup: TtLayers, hardware: StepHardware, board: Board, *, clock_mhz: float,
                 host: HostModel, hp_ports: int = 1) -> StepTime:
    """The whole-step model of the TT loop ``setup`` on ``hardware`` and ``board``, its IPs over ``hp_ports`` of the
    board's high-performance ports; ``host`` prices its calls."""
    stages, totals = tt_stages(setup, hardware, hp_ports=hp_ports)
    return step_time(stages, board, clock_mhz=clock_mhz, host_s=host.seconds(totals["calls"]), host_source=host.source,
                     macs=totals["macs"], array_macs=hardware.macs(), calls=totals["calls"],
                     stream_cycles=totals["stream_cycles"], mac_energy_pj=tt_mac_energy_pj(setup))


__all__ = ["TtLayers", "tt_mac_energy_pj", "tt_plans", "tt_reuse", "tt_stages", "tt_step_time"]
