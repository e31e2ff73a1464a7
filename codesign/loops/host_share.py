"""The host's share of a training step: the loop's NumPy work between PE calls, measured where it runs.

A whole-step model (:mod:`codesign.step.time`) prices the PEs and
DDR from exact models, but the host's work (scales, rounding, partial sums,
the optimiser, packing each PE call's words) can only be measured: on the
machine that runs the loop. A desktop measures its own CPU, which is faster
than a board's ARM core, so its figure is a lower bound. On a board, the
same functions measure the board itself (``python -m
codesign.deploy.host_share``), and the report they write
(:func:`write_host_report`) lets the desktop's explorer price the host with
the board's figure (``codesign explore --host FILE``). Everything here runs
on a board: NumPy and the loops only.

A report belongs to one loop: its family and set-up
(:func:`codesign.design.families.loop_entry`, design.json's ``loop``), whose
digest it records, so a report measured for another set-up is refused.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
import platform
import time
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from codesign.io.jsonfile import JsonFileError, load_json
from codesign.io.atomic import write_json_atomic
from codesign.loops.csb import CsbMlpTrainer, CsbTrainSetup
from codesign.loops.fb import FbMlpTrainer, GoldenGemm, HwTrainSetup
from codesign.loops.tt import TtMlpTrainer, TtTrainSetup
from codesign.pe.csb.stream import Op, encode_transaction
from codesign.pe.fpmac_array.golden import words as transaction_words
from codesign.pe.fpmac_array.spec import FpmacArraySpec
from codesign.step.tt.runners import Streamed
from codesign.step.tt.schedule import StepHardware
from codesign.step.host import GemmShape, HostModel, spans
from codesign.step.tt.step import GoldenRunner

HOST_REPORT_FORMAT = "codesign-host-share"
HOST_REPORT_VERSION = 1
HOST_REPORT_FILE = "host_model.json"
THIS_MACHINE = "measured on this machine (a board's ARM core is slower)"


# ---------------------------------------------------------------------------- TT


class _TtHostTimer:
    """A TT trainer on the golden kernels whose steps are timed for their host share (the first step, which aims
    every scale, is taken here and not timed)."""

    def __init__(self, setup: TtTrainSetup, hardware: Optional[StepHardware], seed: int) -> None:
        self.streamed = Streamed(GoldenRunner())
        self.trainer = TtMlpTrainer(setup, runner=self.streamed)
        if hardware is not None:
            self.trainer.hardware = hardware
        rng = np.random.default_rng(seed)
        features, classes = setup.layers[0]["in_features"], setup.layers[-1]["out_features"]
        self.x = rng.random((setup.batch_size, features)).astype(np.float32)
        self.y = rng.integers(0, classes, setup.batch_size)
        self.trainer.train_step(self.x, self.y)

    def step(self) -> Tuple[float, int]:
        """One step's host seconds (its wall time less its PE calls', plus the stream work) and PE calls."""
        runner = self.trainer.runner
        started, pe_before, calls_before = time.perf_counter(), runner.seconds, runner.transactions
        stream_before = self.streamed.host_seconds
        self.trainer.train_step(self.x, self.y)
        return (time.perf_counter() - started - (runner.seconds - pe_before)
                + (self.streamed.host_seconds - stream_before)), runner.transactions - calls_before


def _least(steps: List[Tuple[float, int]]) -> Tuple[float, int]:
    return max(0.0, min(seconds for seconds, _ in steps)), steps[-1][1]


def measure_tt_host_seconds(setup: TtTrainSetup, hardware: Optional[StepHardware] = None, *, repeats: int = 3,
                            seed: int = 0) -> Tuple[float, int]:
    """Seconds of the TT loop's host work per step on this machine, and the PE calls per step, for ``hardware``
    (default: the set-up's).

    The host's work is a golden step less its PE calls' seconds, plus what a board's host does around each
    call: packing its operands into stream words and reading its results out of the output words
    (:class:`codesign.step.tt.runners.Streamed`, the board runner's own functions). The least of ``repeats``
    steps, as other work on the machine only adds."""
    timer = _TtHostTimer(setup, hardware, seed)
    return _least([timer.step() for _ in range(repeats)])


def measure_tt_hosts(points: Sequence[Tuple[TtTrainSetup, Optional[StepHardware]]], *, repeats: int = 5
                     ) -> List[Tuple[float, int]]:
    """:func:`measure_tt_host_seconds` of several ``(setup, hardware)`` points at once: their steps alternate, so
    that every point sees the same load on the machine, and each keeps its least of ``repeats``."""
    timers = [_TtHostTimer(setup, hardware, 0) for setup, hardware in points]
    steps: List[List[Tuple[float, int]]] = [[] for _ in timers]
    for _ in range(repeats):
        for timer, taken in zip(timers, steps):
            taken.append(timer.step())
    return [_least(taken) for taken in steps]


def measure_tt_host(setup: TtTrainSetup, *, source: str = THIS_MACHINE, repeats: int = 5) -> HostModel:
    """:class:`HostModel` of ``setup`` from two schedules: the default builds (many calls) and builds with
    longer buffers (fewer calls), measured side by side (:func:`measure_tt_hosts`)."""
    many = StepHardware()
    few = StepHardware(pe1=dataclasses.replace(many.pe1, max_j=32, max_l=64),
                       pe2=dataclasses.replace(many.pe2, max_j=128, max_k=128, max_l=64))
    measured_many, measured_few = measure_tt_hosts([(setup, many), (setup, few)], repeats=repeats)
    return HostModel.fit(measured_many, measured_few, source=source)


# ---------------------------------------------------------------------------- FB-float


class _RecordingGemm(GoldenGemm):
    """The golden GEMM, keeping the shape of every call."""

    def __init__(self, spec: FpmacArraySpec) -> None:
        super().__init__(spec)
        self.shapes: List[GemmShape] = []

    def __call__(self, a, b, c=None, *, fb: int, trans_a: bool = False, trans_b: bool = False):
        self.shapes.append(GemmShape(int(a.shape[0]), int(a.shape[1]), int(b.shape[1]), c is not None, fb))
        return super().__call__(a, b, c, fb=fb, trans_a=trans_a, trans_b=trans_b)


def step_gemms(setup: HwTrainSetup, *, seed: int = 0, repeats: int = 1) -> Tuple[List[GemmShape], float]:
    """The GEMMs of one training step of ``setup`` (recorded from a golden step on random data) and a step's host
    seconds on this machine (the step less its GEMMs; the least of ``repeats`` steps, as other work on the
    machine only adds)."""
    backend = _RecordingGemm(setup.spec)
    trainer = FbMlpTrainer(setup, backend)
    rng = np.random.default_rng(seed)
    x = rng.random((setup.batch_size, setup.layers[0]))
    y = rng.integers(0, setup.layers[-1], setup.batch_size)
    shapes, seconds = None, []
    for _ in range(repeats):
        started, gemm_before = time.perf_counter(), backend.seconds
        trainer.train_step(x, y)
        seconds.append(max(0.0, time.perf_counter() - started - (backend.seconds - gemm_before)))
        shapes = shapes or list(backend.shapes)
    return shapes, min(seconds)


def measure_fb_host(setup: HwTrainSetup, *, source: str = THIS_MACHINE, seed: int = 0,
                    samples: int = 16) -> Tuple[HostModel, List[GemmShape]]:
    """:class:`HostModel` of ``setup``: the golden step's host work (the least of three steps) as the fixed part,
    the packing of a transaction's words (the step's first ``samples`` transactions on the set-up's build) per
    call; and the step's GEMMs."""
    shapes, host_s = step_gemms(setup, seed=seed, repeats=3)
    rng = np.random.default_rng(seed)
    spec, packed, seconds = setup.spec, 0, 0.0
    for shape in shapes:
        for rows in spans(shape.m, spec.max_m)[:1]:
            for cols in spans(shape.n, spec.max_n)[:1]:
                depth = spans(shape.k, spec.max_k)[0]
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


# ---------------------------------------------------------------------------- CSB


def compressed_masks(setup: CsbTrainSetup, data, *, max_steps: Optional[int] = None) -> CsbMlpTrainer:
    """The golden loop of ``setup`` after its warm-up epochs and pruning search (``max_steps`` shortens each
    warm-up epoch): its ``masks`` are the kept weights every fixed-point step works on."""
    trainer = CsbMlpTrainer(setup)
    trainer.fit(data, epochs=setup.warmup_epochs, progress=False, max_steps=max_steps)
    return trainer


def measure_csb_host(trainer: CsbMlpTrainer, *, source: str = THIS_MACHINE, seed: int = 0, samples: int = 16,
                     repeats: int = 3) -> HostModel:
    """:class:`HostModel` of a golden loop past its pruning (:func:`compressed_masks`): a fixed-point step's host
    work (the least of ``repeats`` steps) as the fixed part, the encoding of an FP transaction on a non-empty
    block of the first layer per call (the first ``samples`` blocks)."""
    setup, spec = trainer.setup, trainer.spec
    rng = np.random.default_rng(seed)
    x = rng.random((setup.batch_size, setup.layers[0]))
    y = rng.integers(0, setup.layers[-1], setup.batch_size)
    seconds = []
    for _ in range(repeats):  # the least of a few steps: other work on the machine only adds
        pe_before, started = trainer.backend.seconds, time.perf_counter()
        trainer.train_step(x, y)
        seconds.append(max(0.0, time.perf_counter() - started - (trainer.backend.seconds - pe_before)))
    blocks = [block for block in trainer.matrix(0).blocks() if block.nnz][:samples]
    return HostModel(fixed_s=min(seconds), per_call_s=csb_encoding_seconds(spec, blocks), source=source)


def csb_encoding_seconds(spec, blocks) -> float:
    """Mean seconds the PE's own encoder takes for one FP transaction on each of ``blocks`` (zero operands of the
    build's tile and lanes): the host's packing of a PE call."""
    x = np.zeros((spec.block_cols, spec.in_h, spec.in_w, spec.batch), np.int64)
    acc = np.zeros((spec.block_rows, spec.out_h, spec.out_w, spec.batch), np.int64)
    seconds = 0.0
    for block in blocks:
        started = time.perf_counter()
        encode_transaction(spec, Op.FP, index=block.index, weights=block.values, x=x, acc=acc)
        seconds += time.perf_counter() - started
    return seconds / max(len(blocks), 1)


# ---------------------------------------------------------------------------- the report


class HostReportError(ValueError):
    """A host report is missing, unreadable, or measured for another loop; the message names the file."""


def loop_digest(loop: Mapping[str, Any]) -> str:
    """SHA-256 of a loop entry (family and set-up) in canonical JSON: what a host report was measured for."""
    return hashlib.sha256(json.dumps(loop, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def machine_record() -> Dict[str, str]:
    """Where a host report was measured: the PYNQ image's ``BOARD`` (empty off a board), CPU, Python, NumPy."""
    return {"board": os.environ.get("BOARD", ""), "machine": platform.machine(),
            "processor": platform.processor() or platform.machine(), "python": platform.python_version(),
            "numpy": np.__version__}


def write_host_report(path: Path, loop: Mapping[str, Any], host: HostModel,
                      machine: Optional[Mapping[str, str]] = None) -> Path:
    """Write ``host`` (measured for ``loop``) as a host report, atomically."""
    return write_json_atomic(Path(path), {
        "format": HOST_REPORT_FORMAT, "version": HOST_REPORT_VERSION, "family": loop.get("family"),
        "loop_digest": loop_digest(loop), "fixed_s": host.fixed_s, "per_call_s": host.per_call_s,
        "source": host.source, "list_step": host.list_step, "beside_s": host.beside_s,
        "machine": dict(machine or machine_record()),
        "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())})


MAX_FIXED_S = 60.0  # a step's host work on a board's ARM: seconds at most; more is a slip of units
MAX_PER_CALL_S = 1.0  # a host's work around one IP call


def read_host_report(path: Path, loop: Mapping[str, Any]) -> HostModel:
    """The :class:`HostModel` of a host report, refused unless it was measured for ``loop``."""
    try:
        raw = load_json(Path(path), what="host report",
                        required={"format": str, "version": int, "family": str, "loop_digest": str,
                                  "fixed_s": float, "per_call_s": float, "source": str})
    except JsonFileError as error:
        raise HostReportError(str(error)) from None
    if raw["format"] != HOST_REPORT_FORMAT or raw["version"] != HOST_REPORT_VERSION:
        raise HostReportError(f"{path}: not a codesign host report (format {raw['format']!r} version "
                              f"{raw['version']!r}, want {HOST_REPORT_FORMAT!r} version {HOST_REPORT_VERSION})")
    if raw["loop_digest"] != loop_digest(loop):
        raise HostReportError(f"{path}: measured for another loop ({raw['family']}, set-up {raw['loop_digest'][:12]}) "
                              f"than this design's ({loop.get('family')}, {loop_digest(loop)[:12]}); measure it "
                              "again with this design's bundle (python -m codesign.deploy.host_share)")
    list_step = raw.get("list_step", False)  # absent in reports written before list steps were timed on the IPs
    if not isinstance(list_step, bool):
        raise HostReportError(f"{path}: list_step must be true or false, not {list_step!r}")
    # absent in reports written before a list step's work beside the phases was told apart (their fixed_s holds it)
    beside = raw.get("beside_s", 0.0)
    if isinstance(beside, bool) or not isinstance(beside, (int, float)) or not math.isfinite(beside) or not (
            0 <= beside <= MAX_FIXED_S) or (beside and not list_step):
        raise HostReportError(f"{path}: beside_s={beside!r} is no host measurement: seconds in [0, {MAX_FIXED_S:g}] "
                              "a step, and 0 unless list_step (only a list step's host works beside the IPs)")
    fixed, per_call = raw["fixed_s"], raw["per_call_s"]
    if not (math.isfinite(fixed) and math.isfinite(per_call) and 0 <= fixed <= MAX_FIXED_S
            and 0 <= per_call <= MAX_PER_CALL_S and fixed + per_call + beside > 0):
        raise HostReportError(f"{path}: fixed_s={fixed!r} and per_call_s={per_call!r} are no host measurement: each "
                              f"must be finite, fixed_s in [0, {MAX_FIXED_S:g}] s a step and per_call_s in [0, "
                              f"{MAX_PER_CALL_S:g}] s a call, not both 0 (milliseconds written as seconds?)")
    return HostModel(fixed_s=float(fixed), per_call_s=float(per_call), source=raw["source"], list_step=list_step,
                     beside_s=float(beside))


__all__ = ["HOST_REPORT_FILE", "HostReportError", "THIS_MACHINE", "compressed_masks",
           "csb_encoding_seconds", "loop_digest", "machine_record", "measure_csb_host", "measure_fb_host",
           "measure_tt_host", "measure_tt_host_seconds", "measure_tt_hosts", "read_host_report", "step_gemms",
           "write_host_report"]
