"""What a CSB step as call lists costs the PL: the list cycle model over the step's two lists.

Why a model of the lists and not of the block schedule (:mod:`codesign.step.csb.time`): on lists the host no
longer encodes blocks or repacks operands, so the step is the shell's fetches, the PE's streams and the records,
back to back, the ReLU and mask (SELECT), UPD and the new weights (SHR) included.
:func:`codesign.step.list_cycles.list_cycles` counts them cycle by cycle (units: clock cycles of the IP).
"""

from __future__ import annotations

from typing import Dict, Optional, Sequence

from codesign.pe import get_pe
from codesign.pe.csb.spec import CsbSpec
from codesign.step.csb.lists import PE, CsbStepScales, step_arena, step_lists
from codesign.step.list_cycles import DdrTiming, list_cycles


def step_list_cycles(spec: CsbSpec, layers: Sequence[int], batch: int, structures, *,
                     ddr: Optional[DdrTiming] = None) -> Dict[str, object]:
    """Cycles of one full-batch step of ``layers`` with the stored ``structures`` on ``spec``: ``forward`` and
    ``backward`` (each list from ``run_start`` to ``ap_done``), ``total``, their ``breakdown`` summed (fetch, pe,
    stall, record, control), ``calls`` and ``macs``. Scales and UPD shifts change no cycle (they are header and
    descriptor fields, not lengths); ``ddr``: the list bench's DDR model (None: the AXI RAM alone)."""
    arena = step_arena(spec, layers, batch, structures)
    count = len(layers) - 1
    scales = CsbStepScales(relu=(0,) * (count - 1), mask=(0,) * count, upd=((0, False),) * count)
    lists = step_lists(arena, batch, scales, 0)
    pe = get_pe(PE)
    runs = {name: list_cycles(pe, spec, calls, arena.image, ddr=ddr)
            for name, calls in (("forward", lists.forward), ("backward", lists.backward))}
    breakdown: Dict[str, int] = {}
    for run in runs.values():
        for key, value in run.breakdown().items():
            breakdown[key] = breakdown.get(key, 0) + value
    return {"forward": runs["forward"].total, "backward": runs["backward"].total,
            "total": sum(run.total for run in runs.values()), "breakdown": breakdown,
            "calls": len(lists.forward) + len(lists.backward), "macs": lists.macs}


__all__ = ["step_list_cycles"]
