"""The whole-step model of the FB-float loop (:mod:`codesign.loops.fb`) on an ``fpmac_array`` build.

A step of the loop is a fixed list of layer GEMMs (forward, input and
weight gradients, bias sums) whose shapes depend on the network and batch
only, so one golden step records them (:func:`step_gemms`). The board's
GEMM backend (``codesign.deploy.training.IpGemm``) sends a GEMM as one IP
call per ``max_k`` span of K, each call holding every ``max_m x max_n`` tile
of C as one transaction (the later spans accumulate onto the earlier
result). Each call is a stage (:class:`codesign.design.step_time.Stage`):
its PE cycles by the RTL-exact model
(:func:`codesign.pe.fpmac_array.cycles.transaction_cycles`) and its words.

The host's share: the loop's host work per step (ReLU, softmax, SGD on
container words) measured in a golden step less its GEMMs, plus the words of
every transaction packed by the PE's own encoder
(:func:`codesign.pe.fpmac_array.golden.words`), measured per transaction.
"""

from __future__ import annotations

import functools
import time
from dataclasses import dataclass

import numpy as np

from codesign.boards import Board
from codesign.design.step_time import HostModel, Stage, StepTime, step_time, stream_cycles
from codesign.energy.table import horowitz_45nm
from codesign.loops.fb import FbMlpTrainer, GoldenGemm, HwTrainSetup
from codesign.pe.fpmac_array.contract import Header
from codesign.pe.fpmac_array.cycles import transaction_cycles
from codesign.pe.fpmac_array.golden import words as transaction_words
from codesign.pe.fpmac_array.spec import FpmacArraySpec


@dataclass(frozen=True)
class GemmShape:
    """One layer GEMM of a step: ``C (m x n) = A (m x k) . B (k x n)``, from C_in or not, at run-time ``fb``."""

    m: int
    k: int
    n: int
    accumulate: bool
    fb: int


class _RecordingGemm(GoldenGemm):
    """The golden GEMM, keeping the shape of every call."""

    def __init__(self, spec: FpmacArraySpec) -> None:
        super().__init__(spec)
        self.shapes: list[GemmShape] = []

    def __call__(self, a, b, c=None, *, fb: int, trans_a: bool = False, trans_b: bool = False):
        self.shapes.append(GemmShape(int(a.shape[0]), int(a.shape[1]), int(b.shape[1]), c is not None, fb))
        return super().__call__(a, b, c, fb=fb, trans_a=trans_a, trans_b=trans_b)


def _batch(setup: HwTrainSetup, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = rng.random((setup.batch_size, setup.layers[0]))
    return x, rng.integers(0, setup.layers[-1], setup.batch_size)


def step_gemms(setup: HwTrainSetup, *, seed: int = 0, repeats: int = 1) -> tuple[list[GemmShape], float]:
    """The GEMMs of one training step of ``setup`` (recorded from a golden step on random data) and a step's host
    seconds on this machine (the step less its GEMMs; the least of ``repeats`` steps, as other work on the
    machine only adds)."""
    backend = _RecordingGemm(setup.spec)
    trainer = FbMlpTrainer(setup, backend)
    x, y = _batch(setup, seed)
    shapes, seconds = None, []
    for _ in range(repeats):
        started, gemm_before = time.perf_counter(), backend.seconds
        trainer.train_step(x, y)
        seconds.append(max(0.0, time.perf_counter() - started - (backend.seconds - gemm_before)))
        shapes = shapes or list(backend.shapes)
    return shapes, min(seconds)


def _spans(total: int, step: int) -> list[int]:
    return [min(step, total - start) for start in range(0, total, step)]


@functools.lru_cache(maxsize=65536)
def _transaction(spec: FpmacArraySpec, m: int, k: int, n: int, accumulate: bool, fb: int) -> tuple[int, int, int]:
    header = Header(m=m, n=n, k=k, fb=fb, accumulate=accumulate)
    return (transaction_cycles(spec, header.word()).total, 1 + header.input_words, 1 + m * n)


def gemm_stages(spec: FpmacArraySpec, shape: GemmShape) -> list[tuple[Stage, int]]:
    """The IP calls of one GEMM on ``spec``: each call's stage and its transactions."""
    tiles = [(rows, cols) for rows in _spans(shape.m, spec.max_m) for cols in _spans(shape.n, spec.max_n)]
    out = []
    for index, depth in enumerate(_spans(shape.k, spec.max_k)):
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


def measure_fb_host(setup: HwTrainSetup, *, source: str = "measured on this machine (a board's ARM core is slower)",
                    seed: int = 0, samples: int = 16) -> tuple[HostModel, list[GemmShape]]:
    """:class:`HostModel` of ``setup``: the golden step's host work (the least of three steps) as the fixed part,
    the packing of a transaction's words (the step's first ``samples`` transactions on the set-up's build) per
    call; and the step's GEMMs."""
    shapes, host_s = step_gemms(setup, seed=seed, repeats=3)
    rng = np.random.default_rng(seed)
    spec, packed, seconds = setup.spec, 0, 0.0
    for shape in shapes:
        for rows in _spans(shape.m, spec.max_m)[:1]:
            for cols in _spans(shape.n, spec.max_n)[:1]:
                depth = _spans(shape.k, spec.max_k)[0]
                a = rng.integers(0, 1 << spec.width, (rows, depth), dtype=np.uint64)
                b = rng.integers(0, 1 << spec.width, (depth, cols), dtype=np.uint64)
                c = rng.integers(0, 1 << spec.width, (rows, cols), dtype=np.uint64) if shape.accumulate else None
                started = time.perf_counter()
                transaction_words(spec, a, b, c, fb=shape.fb)
                seconds += time.perf_counter() - started
                packed += 1
        if packed >= samples:
            break
    return HostModel(fixed_s=host_s, per_call_s=seconds / max(packed, 1), source=source), shapes


def fb_step_time(spec: FpmacArraySpec, shapes: list[GemmShape], board: Board, *, clock_mhz: float,
                 host: HostModel) -> StepTime:
    """The whole-step model of the FB loop's GEMMs ``shapes`` on one ``spec`` build on ``board``."""
    stages, totals = fb_stages(spec, shapes)
    return step_time(stages, board, clock_mhz=clock_mhz, host_s=host.seconds(totals["calls"]),
                     host_source=host.source, macs=totals["macs"], array_macs=spec.macs, calls=totals["calls"],
                     stream_cycles=totals["stream_cycles"], mac_energy_pj=fb_mac_energy_pj(spec))


__all__ = ["GemmShape", "fb_mac_energy_pj", "fb_stages", "fb_step_time", "gemm_stages", "measure_fb_host",
           "step_gemms"]
