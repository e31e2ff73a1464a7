"""The TT loop's host work per training step, against the replayed-forward step in the same process.

Paper 003's two-layer network (:func:`codesign.design.families.tt.paper_setup`,
the precision of examples/digits_tt.toml) at ranks 8 and 16, batch 64.
Two golden trainers of the same set-up take the same batches, one step of
each in turn, so both see the same machine load:

- ``loop``: :class:`codesign.loops.tt.TtMlpTrainer` as it is (the backward
  step starts from the forward sweep);
- ``reference``: the same trainer stepping as the loop did before, the
  forward's PE calls recorded and the backward step sweeping the forward
  again, its calls answered from the record once every operand code is
  compared (:mod:`codesign.step.tt.runners`; the torch trainer on PEs still
  steps so).

The host's seconds of a step are its wall time less its PE calls' (the
golden kernels, which a board runs on its IPs), the rule of
:func:`codesign.loops.host_share.measure_tt_host_seconds`; the CPU seconds
are given too, as the wall time of a shared machine carries other work.
Figures are the least over the timed steps. After the steps the two
trainers' states (cores, biases, Adam's moments, scale trackers, ranks) are
compared word for word: a mismatch fails the run. ``--host-model`` adds
:func:`codesign.loops.host_share.measure_tt_host`, the fit the explorer
prices the host with. Writes ``tt_host.json``.

Run: .venv/bin/python benchmarks/bench_tt_host.py [--ranks 8,16] [--steps 6] [--host-model] [--out reports/bench]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

from codesign.design import load_design
from codesign.design.families.tt import paper_setup
from codesign.design.families.tt import tt_setup_of
from codesign.io.reports import write_json_atomic
from codesign.loops.common import softmax_cross_entropy
from codesign.loops.host_share import measure_tt_host
from codesign.loops.tt import TtMlpTrainer
from codesign.step.tt.runners import Recording, Replay
from codesign.step.tt.step import GoldenRunner, check_input, forward_sweep, pe_step, step_plan

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


class CpuRunner:
    """The golden kernels, counting the CPU seconds of their calls (the PE share of a step's CPU time)."""

    def __init__(self) -> None:
        self.golden = GoldenRunner()
        self.cpu_s = 0.0

    def run(self, hardware, calls):
        started = time.process_time()
        results = self.golden.run(hardware, calls)
        self.cpu_s += time.process_time() - started
        return results


class ReplayTrainer(TtMlpTrainer):
    """The loop stepping the replayed-forward way: forward calls recorded, the backward step sweeps again."""

    def train_step(self, x, y, *, next_x=None) -> float:  # next_x: as the loop takes it, unused
        x, y = self._features(x), np.asarray(y, np.int64)
        inputs, records = [], []
        for index in range(len(self.cores)):
            state = self.layer_state(index)
            x = check_input(state, x)
            recording = Recording(self.runner)
            sweep = forward_sweep(state, x, step_plan(state, x.shape[0], self.hardware), recording)
            self.trackers[index] = {name: tuple(values) for name, values in sweep.trackers.items()}
            inputs.append(x)
            records.append(recording.recorded)
            y_layer = sweep.y.astype(state.hand_off_dtype)  # as the loop passes it on
            x = y_layer if index == len(self.cores) - 1 else np.maximum(y_layer, y_layer.dtype.type(0))
        loss, grad = softmax_cross_entropy(x.astype(np.float64), y)
        grad = grad.astype(x.dtype)
        steps = []
        for index in range(len(self.cores) - 1, -1, -1):
            replay = Replay(self.runner, records[index])
            step = pe_step(self.layer_state(index), inputs[index], grad, replay, self.hardware)
            self.replayed += replay.replayed
            self.replay_misses += replay.misses
            steps.append((index, step))
            if index:
                grad = step.grad_x * (inputs[index] > 0)
        self._update(steps)
        self.step += 1
        return loss


def timed_step(trainer: TtMlpTrainer, cpu: CpuRunner, x, y) -> tuple[float, float]:
    """(host wall seconds, host CPU seconds) of one step: the step's less its PE calls'."""
    wall, pe_wall, cpu_start, pe_cpu = time.perf_counter(), trainer.runner.seconds, time.process_time(), cpu.cpu_s
    trainer.train_step(x, y)
    return (time.perf_counter() - wall - (trainer.runner.seconds - pe_wall),
            time.process_time() - cpu_start - (cpu.cpu_s - pe_cpu))


def state_words(trainer: TtMlpTrainer) -> list[np.ndarray]:
    weights = trainer.read_weights()
    return [np.asarray(a) for key in ("cores", "biases", "moments", "trackers", "ranks") for a in weights[key]]


def compare(rank: int, steps: int, precision) -> dict:
    setup = paper_setup(rank, precision)
    runners = {"loop": CpuRunner(), "reference": CpuRunner()}
    trainers = {"loop": TtMlpTrainer(setup, runners["loop"]), "reference": ReplayTrainer(setup, runners["reference"])}
    rng = np.random.default_rng(rank)
    times: dict[str, list[tuple[float, float]]] = {name: [] for name in trainers}
    for step in range(steps + 1):  # the first step aims every scale: not timed
        x = rng.random((setup.batch_size, setup.layers[0]["in_features"])).astype(np.float32)
        y = rng.integers(0, setup.layers[-1]["out_features"], setup.batch_size)
        for name in (("loop", "reference") if step % 2 else ("reference", "loop")):
            figures = timed_step(trainers[name], runners[name], x, y)
            if step:
                times[name].append(figures)
    words = [state_words(trainers[name]) for name in ("loop", "reference")]
    if len(words[0]) != len(words[1]):
        raise SystemExit(f"rank {rank}: the states have {len(words[0])} and {len(words[1])} arrays")
    mismatches = sum(int(np.count_nonzero(np.asarray(a).view(np.uint8) != np.asarray(b).view(np.uint8)))
                     if a.shape == b.shape and a.dtype == b.dtype else a.size + b.size for a, b in zip(*words))
    compared = sum(a.size for a in words[0])
    best = {name: (min(t[0] for t in rows), min(t[1] for t in rows)) for name, rows in times.items()}
    pe_calls = trainers["loop"].runner.transactions // (steps + 1)
    return {"rank": rank, "batch": setup.batch_size, "steps_timed": steps, "pe_calls_per_step": pe_calls,
            "loop_host_ms": 1e3 * best["loop"][0], "loop_host_cpu_ms": 1e3 * best["loop"][1],
            "reference_host_ms": 1e3 * best["reference"][0], "reference_host_cpu_ms": 1e3 * best["reference"][1],
            "ratio": best["reference"][0] / best["loop"][0], "ratio_cpu": best["reference"][1] / best["loop"][1],
            "words_compared": compared, "mismatched_bytes": mismatches}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=lambda s: [int(v) for v in s.split(",")], default=[8, 16])
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--host-model", action="store_true")
    parser.add_argument("--out", default="reports/bench")
    args = parser.parse_args()
    if args.steps < 1 or any(rank < 1 for rank in args.ranks):
        parser.error("--steps and every rank must be >= 1")
    precision = tt_setup_of(load_design(EXAMPLES / "digits_tt.toml")).precision
    rows = []
    for rank in args.ranks:
        row = compare(rank, args.steps, precision)
        if args.host_model:
            model = measure_tt_host(paper_setup(rank, precision))
            row["host_model"] = {"fixed_ms": 1e3 * model.fixed_s, "per_call_us": 1e6 * model.per_call_s,
                                 "step_ms": 1e3 * model.seconds(row["pe_calls_per_step"])}
        rows.append(row)
        print(f"rank {rank:2d}: host {row['loop_host_ms']:6.1f} ms (CPU {row['loop_host_cpu_ms']:5.1f}) against "
              f"{row['reference_host_ms']:6.1f} ms (CPU {row['reference_host_cpu_ms']:5.1f}) replayed: "
              f"{row['ratio']:4.2f}x wall, {row['ratio_cpu']:4.2f}x CPU; {row['words_compared']} words compared, "
              f"{row['mismatched_bytes']} bytes differ" + (f"; measure_tt_host {row['host_model']['step_ms']:.1f} ms"
                                                          if "host_model" in row else ""), flush=True)
    identical = all(row["mismatched_bytes"] == 0 for row in rows)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    write_json_atomic(out / "tt_host.json", {"rows": rows, "bit_identical": identical})
    if not identical:
        print("the two steps' states differ", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
