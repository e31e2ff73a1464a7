"""A board host's stream work for one TT training step, against packing every PE call on its own, in one process.

Paper 003's two-layer network (:func:`codesign.design.families.tt.paper_setup`,
the precision of examples/digits_tt.toml) at rank 8, batch 64, on the
explorer's 128-bit rank-8 point (2 x tt1 8x8 + 4 x tt2 8x4). One golden step
records every stage's PE calls; then, interleaved over the repetitions:

- ``stages``: :func:`codesign.step.tt.runners.stage_buffers` on each stage's
  calls, what :class:`codesign.deploy.tt_training.IpRunner` does: the calls
  shared among the copies (:func:`~codesign.step.tt.runners.stage_layout`,
  worked out once per distinct stage) and packed straight into each copy's
  input buffer, a contraction's equal calls in one pass;
- ``per_call``: :func:`codesign.pe.tt.golden.words` on every call alone,
  then each copy's calls joined into its buffer.

Both must give the same buffers (compared word for word; a difference fails
the run). Also times :func:`~codesign.step.tt.runners.unpack_results`
(reading every result back from the golden output words), the rest of the
stream work. Target: the stage packing at least 1.5x faster than per-call
packing. Medians over the repetitions. Writes ``tt_stream.json`` (``met``: the target held); fails only when the words differ.

Run: .venv/bin/python benchmarks/bench_tt_stream.py [--repeats 7] [--out reports/bench]
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import sys
import time
from pathlib import Path

import numpy as np

from codesign.design import load_design
from codesign.design.families.tt import paper_setup
from codesign.design.families.tt import tt_setup_of
from codesign.io.reports import write_json_atomic
from codesign.loops.tt import TtMlpTrainer
from codesign.pe.tt import golden
from codesign.step.tt.runners import stage_buffers, stage_layout, unpack_results
from codesign.step.tt.schedule import StepHardware
from codesign.step.tt.step import GoldenRunner

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
TARGET_RATIO = 1.5


class StageRecorder:
    """The golden kernels, keeping every stage's calls and their output words (what the IPs would write)."""

    def __init__(self) -> None:
        self.golden = GoldenRunner()
        self.stages: list[tuple[list, np.ndarray]] = []

    def run(self, hardware, calls):
        results = self.golden.run(hardware, calls)
        out = np.concatenate([golden.output_words(hardware.spec(pe), z)
                              for (pe, _, _), z in zip(calls, results)]).astype(np.uint32)
        self.stages.append(([(pe, np.copy(a), np.copy(b)) for pe, a, b in calls], out))
        return results


def hardware() -> StepHardware:
    base = StepHardware()
    return StepHardware(pe1=dataclasses.replace(base.pe1, lanes=8, rows=8, stream_bits=128),
                        pe2=dataclasses.replace(base.pe2, lanes=8, rows=4, stream_bits=128), pe1_units=2, pe2_units=4)


def seconds(fn) -> float:
    started = time.perf_counter()
    fn()
    return time.perf_counter() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--out", default="reports/bench")
    args = parser.parse_args()
    if args.repeats < 1:
        parser.error("--repeats must be >= 1")
    setup = paper_setup(8, tt_setup_of(load_design(EXAMPLES / "digits_tt.toml")).precision)
    hw = hardware()
    recorder = StageRecorder()
    trainer = TtMlpTrainer(setup, recorder)
    trainer.hardware = hw
    rng = np.random.default_rng(0)
    trainer.train_step(rng.random((setup.batch_size, setup.layers[0]["in_features"])).astype(np.float32),
                       rng.integers(0, setup.layers[-1]["out_features"], setup.batch_size))
    stages = recorder.stages
    calls = sum(len(c) for c, _ in stages)

    def per_call():
        buffers = []
        for c, _ in stages:
            single = [golden.words(hw.spec(pe), a, b).astype(np.uint32) for pe, a, b in c]
            buffers.append([np.concatenate([single[p] for p in copy.positions])
                            for copy in stage_layout(hw, c).copies])
        return buffers

    def staged():
        return [stage_buffers(hw, c) for c, _ in stages]

    differing = sum(int(np.count_nonzero(x != y)) if x.shape == y.shape else x.size + y.size
                    for s, p in zip(staged(), per_call()) for x, y in zip(s, p))
    words = sum(x.size for s in staged() for x in s)

    times: dict[str, list[float]] = {"stages": [], "per_call": [], "unpack": []}
    for repeat in range(args.repeats):
        order = ("stages", "per_call") if repeat % 2 else ("per_call", "stages")
        for name in order:
            times[name].append(seconds(staged if name == "stages" else per_call))
        times["unpack"].append(seconds(lambda: [unpack_results(hw, c, out) for c, out in stages]))
    median = {name: statistics.median(values) for name, values in times.items()}
    ratio = median["per_call"] / median["stages"]
    row = {"rank": 8, "batch": setup.batch_size, "hardware": hw.describe(), "stages": len(stages), "calls": calls,
           "words_in_32bit": words, "differing_words": differing, "repeats": args.repeats,
           **{f"{name}_ms": 1e3 * value for name, value in median.items()}, "ratio": ratio,
           "target_ratio": TARGET_RATIO, "met": bool(ratio >= TARGET_RATIO and differing == 0)}
    print(f"rank 8 step: {len(stages)} stages, {calls} calls, {words} words in; packing by stage "
          f"{row['stages_ms']:.1f} ms against per call {row['per_call_ms']:.1f} ms: {ratio:.2f}x "
          f"(target {TARGET_RATIO}x), {differing} words differ; reading results {row['unpack_ms']:.1f} ms", flush=True)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    write_json_atomic(out / "tt_stream.json", row)
    if differing:
        print("the two packings differ", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
