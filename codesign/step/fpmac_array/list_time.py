"""What an FB-float step as call lists costs the PL: the list cycle model over the step's lists, phase by phase.

Why a model of the lists and not of the GEMMs (:mod:`codesign.step.fpmac_array.time`): on lists the host no longer
packs operands, so the step is the shell's fetches, the PE's streams and the records, back to back; the
element-wise calls (the mask, the update) and the re-streamed partial sums of every chain are part of it.
:func:`codesign.step.list_cycles.list_cycles` counts them cycle by cycle (units: clock cycles of the IP).
"""

from __future__ import annotations

from typing import Dict, Optional, Sequence

from codesign.boards import Board
from codesign.pe.fpmac_array.spec import FpmacArraySpec
from codesign.step.fpmac_array.lists import PE, step_arena, step_lists
from codesign.step.fpmac_array.time import fb_mac_energy_pj
from codesign.step.list_cycles import DdrTiming
from codesign.step.share import phased_step_cycles
from codesign.step.time import StepTime, list_step_time


def step_list_cycles(spec: FpmacArraySpec, layers: Sequence[int], batch: int, *, fb: Optional[int] = None,
                     ddr: Optional[DdrTiming] = None, fast: bool = False, copies: int = 1) -> Dict[str, object]:
    """Cycles of one full-batch step of ``layers`` on ``copies`` IPs of ``spec``, phase by phase as
    :func:`codesign.step.share.phased_step_cycles` gives them (``forward`` and ``backward`` on one IP), and the GEMM
    ``macs``. ``fb`` (default ``max_fb``) changes no cycle; ``ddr``: the list bench's DDR model (None: the AXI
    RAM alone). ``fast``: the same figure, each list simulated once per shape and re-priced by the array's
    compute cycles (for the explorer)."""
    arena = step_arena(spec, layers, batch, copies)
    lists = step_lists(arena, batch, spec.max_fb if fb is None else fb, 0, copies)
    return {**phased_step_cycles(PE, spec, lists, arena.image, ddr=ddr, fast=fast), "macs": lists.macs}


def fb_list_step(spec: FpmacArraySpec, layers: Sequence[int], batch: int, board: Board, *, clock_mhz: float,
                 host_s: float, host_source: str, ddr: Optional[DdrTiming] = None, copies: int = 1,
                 priced: Optional[Dict[str, object]] = None, beside: Optional[Dict[int, float]] = None,
                 hp_ports: int = 1) -> StepTime:
    """The whole list step of an MLP ``layers`` at ``batch`` rows on ``copies`` IPs of the ``spec`` build on
    ``board`` at ``clock_mhz``: a stage a phase (``priced``: as :func:`step_list_cycles` gave them, else priced
    here under ``ddr``, the board's HP-port timing where None is not wanted; words over the port), the host's
    ``host_s`` measured where it runs, of which ``beside`` (phase index -> seconds: the next batch written beside
    the last phase) is hidden as far as its phase reaches; the IPs over ``hp_ports`` high-performance ports."""
    if priced is None:
        priced = step_list_cycles(spec, layers, batch, ddr=ddr, copies=copies)
    return list_step_time(priced, board, clock_mhz=clock_mhz, host_s=host_s, host_source=host_source,
                          array_macs=copies * spec.macs, mac_energy_pj=fb_mac_energy_pj(spec), beside=beside,
                          hp_ports=hp_ports)


__all__ = ["fb_list_step", "step_list_cycles"]
