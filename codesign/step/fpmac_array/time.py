"""The whole-step model of the FB-float loop (:mod:`codesign.loops.fb`) on an ``fpmac_array`` build.

A step of the loop is a fixed list of layer GEMMs (forward, input and
weight gradients, bias sums) whose shapes depend on the network and batch
only, so one golden step records them (:func:`step_gemms`). The board's
GEMM backend (``codesign.deploy.training.IpGemm``) sends a GEMM as one IP
call per ``max_k`` span of K, each call holding every ``max_m x max_n`` tile
of C as one transaction (the later spans accumulate onto the earlier
result). Each call is a stage (:class:`codesign.step.time.Stage`):
its PE cycles by the RTL-exact model
(:func:`codesign.pe.fpmac_array.cycles.transaction_cycles`) and its words.

The host's share: the loop's host work per step (ReLU, softmax, SGD on
container words) measured in a golden step less its GEMMs, plus the words of
every transaction packed by the PE's own encoder
(:func:`codesign.pe.fpmac_array.golden.words`), measured per transaction.
"""

from __future__ import annotations

import functools

from codesign.boards import Board
from codesign.step.time import Stage, StepTime, step_time, stream_cycles
from codesign.energy.table import horowitz_45nm
from codesign.step.host import GemmShape, HostModel, spans
from codesign.pe.fpmac_array.contract import Header
from codesign.pe.fpmac_array.cycles import transaction_cycles
from codesign.pe.fpmac_array.spec import FpmacArraySpec


@functools.lru_cache(maxsize=65536)
def _transaction(spec: FpmacArraySpec, m: int, k: int, n: int, accumulate: bool, fb: int) -> tuple[int, int, int]:
    header = Header(m=m, n=n, k=k, fb=fb, accumulate=accumulate)
    return (transaction_cycles(spec, header.word()).total, 1 + header.input_words, 1 + m * n)


def gemm_stages(spec: FpmacArraySpec, shape: GemmShape) -> list[tuple[Stage, int]]:
    """The IP calls of one GEMM on ``spec``: each call's stage and its transactions."""
    tiles = [(rows, cols) for rows in spans(shape.m, spec.max_m) for cols in spans(shape.n, spec.max_n)]
    out = []
    for index, depth in enumerate(spans(shape.k, spec.max_k)):
        accumulate = shape.accumulate or index > 0
        parts = [_transaction(spec, rows, depth, cols, accumulate, shape.fb) for rows, cols in tiles]
        out.append((Stage(cycles=sum(p[0] for p in parts), words_in=sum(p[1] for p in parts),
                          words_out=sum(p[2] for p in parts)), len(parts)))
    return out


def fb_stages(spec: FpmacArraySpec, shapes: list[GemmShape]) -> tuple[list[Stage], dict[str, int]]:
    """Every stage of a step of GEMMs ``shapes`` on ``spec``, and the step's MACs, transactions and stream cycles."""
    stages, transactions = [], 0
    for shape in shapes:
        for stage, count in gemm_stages(spec, shape):
            stages.append(stage)
            transactions += count
    return stages, {"macs": sum(s.m * s.k * s.n for s in shapes), "calls": transactions,
                    "stream_cycles": stream_cycles(stages)}


def fb_mac_energy_pj(spec: FpmacArraySpec) -> float:
    """Energy of one FP-MAC (pJ): the significands' product and a container-wide add (45 nm table)."""
    return horowitz_45nm().int_mac(spec.max_fb + 1, spec.max_fb + 1, spec.width)


def fb_step_time(spec: FpmacArraySpec, shapes: list[GemmShape], board: Board, *, clock_mhz: float,
                 host: HostModel) -> StepTime:
    """The whole-step model of the FB loop's GEMMs ``shapes`` on one ``spec`` build on ``board``."""
    stages, totals = fb_stages(spec, shapes)
    return step_time(stages, board, clock_mhz=clock_mhz, host_s=host.seconds(totals["calls"]),
                     host_source=host.source, macs=totals["macs"], array_macs=spec.macs, calls=totals["calls"],
                     stream_cycles=totals["stream_cycles"], mac_energy_pj=fb_mac_energy_pj(spec))


__all__ = ["fb_mac_energy_pj", "fb_stages", "fb_step_time", "gemm_stages"]
