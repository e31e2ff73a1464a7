"""What an FB-float step as call lists costs the PL: the list cycle model over the step's two lists.

Why a model of the lists and not of the GEMMs (:mod:`codesign.step.fpmac_array.time`): on lists the host no longer
packs operands, so the step is the shell's fetches, the PE's streams and the records, back to back; the
element-wise calls (ReLU, mask, the update) and the re-streamed partial sums of every chain are part of it.
:func:`codesign.step.list_cycles.list_cycles` counts them cycle by cycle (units: clock cycles of the IP).
"""

from __future__ import annotations

from typing import Dict, Optional, Sequence

from codesign.pe import get_pe
from codesign.pe.fpmac_array.spec import FpmacArraySpec
from codesign.step.fpmac_array.lists import PE, step_arena, step_lists
from codesign.step.list_cycles import DdrTiming, list_cycles


def step_list_cycles(spec: FpmacArraySpec, layers: Sequence[int], batch: int, *, fb: Optional[int] = None,
                     ddr: Optional[DdrTiming] = None) -> Dict[str, object]:
    """Cycles of one full-batch step of ``layers`` on ``spec``: ``forward`` and ``backward`` (each list from
    ``run_start`` to ``ap_done``), ``total``, their ``breakdown`` summed (fetch, pe, stall, record, control),
    ``calls`` and GEMM ``macs``. ``fb`` (default ``max_fb``) changes no cycle; ``ddr``: the list bench's DDR
    model (None: the AXI RAM alone)."""
    arena = step_arena(spec, layers, batch)
    lists = step_lists(arena, batch, spec.max_fb if fb is None else fb, 0)
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
