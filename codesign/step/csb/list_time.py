"""What a CSB step as call lists costs the PL: the list cycle model over the step's lists, phase by phase.

Why a model of the lists and not of the block schedule (:mod:`codesign.step.csb.time`): on lists the host no
longer encodes blocks or repacks operands, so the step is the shell's fetches, the PE's streams and the records,
back to back, the ReLU (RELU) and mask (SELECT), UPD and the new weights (SHR) included, and on a build with the
LOSS unit the loss gradient (LOSS); on copies of the IP a
phase's lists run side by side, so a phase costs its longest list.
:func:`codesign.step.list_cycles.list_cycles` counts them cycle by cycle (units: clock cycles of the IP).
"""

from __future__ import annotations

from typing import Dict, Optional, Sequence

from codesign.boards import Board
from codesign.pe.csb.spec import CsbSpec
from codesign.step.csb.lists import PE, CsbStepScales, step_arena, step_lists
from codesign.step.csb.time import csb_mac_energy_pj
from codesign.step.list_cycles import DdrTiming
from codesign.step.share import phased_step_cycles
from codesign.step.time import StepTime, list_step_time


def step_list_cycles(spec: CsbSpec, layers: Sequence[int], batch: int, structures, *,
                     ddr: Optional[DdrTiming] = None, fast: bool = False, copies: int = 1) -> Dict[str, object]:
    """Cycles of one full-batch step of ``layers`` with the stored ``structures`` on ``copies`` IPs of ``spec``, as
    :func:`codesign.step.share.phased_step_cycles` gives them, and the step's ``macs``."""
    arena = step_arena(spec, layers, batch, structures)
    count = len(layers) - 1
    scales = CsbStepScales(relu=(0,) * (count - 1), mask=(0,) * count, upd=((0, False),) * count,
                           loss=(layers[-1], 0) if arena.loss_in else ())  # LOSS where the build runs it
    lists = step_lists(arena, batch, scales, 0, copies=copies)
    return {**phased_step_cycles(PE, spec, lists, arena.image, ddr=ddr, fast=fast), "macs": lists.macs}


def csb_list_step(spec: CsbSpec, layers: Sequence[int], batch: int, structures, board: Board, *, clock_mhz: float,
                  host_s: float, host_source: str, ddr: Optional[DdrTiming] = None, copies: int = 1,
                  fast: bool = False, priced: Optional[Dict[str, object]] = None,
                  beside: Optional[Dict[int, float]] = None, hp_ports: int = 1) -> StepTime:
    """The whole fixed-point list step of ``layers`` with the stored ``structures`` on ``copies`` IPs of the
    ``spec`` build on ``board`` at ``clock_mhz``: a stage a phase (``priced``: their cycles as
    :func:`step_list_cycles` gave them, else priced here under ``ddr``; words over the port), the host's
    ``host_s`` measured where it runs, of which ``beside`` (phase index -> seconds: the next batch written
    beside the last phase) is hidden as far as its phase reaches; ``dense_macs`` the step's MACs were nothing
    pruned; the IPs over ``hp_ports`` high-performance ports."""
    weights = [i * o for i, o in zip(layers[:-1], layers[1:])]
    dense = batch * (2 * sum(weights) + sum(weights[1:]))  # FP and WG of every weight, EB past the first layer
    if priced is None:
        priced = step_list_cycles(spec, layers, batch, structures, ddr=ddr, fast=fast, copies=copies)
    return list_step_time(priced, board, clock_mhz=clock_mhz,
                          host_s=host_s, host_source=host_source, array_macs=copies * spec.batch * spec.parallel,
                          mac_energy_pj=csb_mac_energy_pj(spec), dense_macs=dense, beside=beside,
                          hp_ports=hp_ports)


__all__ = ["csb_list_step", "step_list_cycles"]
