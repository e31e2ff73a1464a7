"""The exact golden TT training step computed whole, against the step on PE calls and a float32 PyTorch step.

Paper 003's two-layer network (:func:`codesign.design.families.tt.paper_setup`,
the precision of examples/digits_tt.toml) at ranks 8 and 16, batch 64, in
one process, one step of each in turn on the same batches (so all see the
same machine load), after one warm-up step that is not timed:

- ``fast``: :class:`codesign.loops.tt.TtMlpTrainer` as it comes, every
  contraction whole where that is provably exact
  (:class:`codesign.step.tt.whole.WholeRunner`);
- ``per_call``: the same trainer on :class:`~codesign.step.tt.step.GoldenRunner`,
  every PE call of the schedule on the golden kernels (the reference the
  hardware is checked against);
- ``torch_f32``: a plain float32 PyTorch step of the same TT layers (the
  same initial cores and biases; ``tt_forward``, ReLU, cross-entropy,
  backward, ``torch.optim.Adam``) on one thread;
- ``torch_lowp``: the torch trainer's low-precision
  :class:`codesign.train.tt.layer.TTLinear` step (what ``codesign train``
  and the TT reproduction run), same cores, forward, backward and Adam.

Figures are milliseconds per step, the least over the timed steps (NumPy's
BLAS and torch each on one thread). After the steps the fast and per-call
trainers' states (cores, biases, Adam's moments, scale trackers, ranks) are
compared word for word: a mismatch fails the run (exit 1). Writes
``tt_golden.json``.

Run: .venv/bin/python benchmarks/bench_tt_golden.py [--ranks 8,16] [--steps 5] [--out reports/bench]
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from pathlib import Path

import numpy as np

from codesign.design import load_design
from codesign.design.families.tt import paper_setup, tt_setup_of
from codesign.io.reports import write_json_atomic
from codesign.loops.tt import TtMlpTrainer
from codesign.step.tt.step import GoldenRunner
from codesign.step.tt.whole import WholeRunner

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def torch_f32_step(setup, cores, biases):
    """A float32 PyTorch step of the set-up's TT network from these cores and biases: ``step(x, y)``."""
    import torch

    from codesign.train.tt.ttm import tt_forward

    params = [[torch.tensor(core, dtype=torch.float32, requires_grad=True) for core in layer] for layer in cores]
    bias = [torch.tensor(b, dtype=torch.float32, requires_grad=True) for b in biases]
    optimizer = torch.optim.Adam([p for layer in params for p in layer] + bias, lr=setup.lr)

    def step(x, y):
        h = torch.from_numpy(x)
        for index, (layer, b) in enumerate(zip(params, bias)):
            h = tt_forward(h, layer)[0] + b
            if index < len(params) - 1:
                h = torch.relu(h)
        loss = torch.nn.functional.cross_entropy(h, torch.from_numpy(y))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return step


def torch_lowp_step(setup, cores, biases):
    """The torch trainer's low-precision ``TTLinear`` step of the same layers (precision of the set-up):
    ``step(x, y)``."""
    import torch

    from codesign.train.tt.layer import TTLinear
    from codesign.train.tt.precision import TTPrecision
    from codesign.train.tt.ttm import TTMatrix

    names = {field.name for field in dataclasses.fields(TTPrecision)}
    precision = TTPrecision(**{k: v for k, v in setup.precision.items() if k in names})
    layers = []
    for index, (layer, b) in enumerate(zip(cores, biases)):
        spec = setup.layers[index]
        ttm = TTMatrix(cores=[core.astype(np.float64) for core in layer],
                       in_modes=tuple(s[2] for s in spec["core_shapes"]),
                       out_modes=tuple(s[1] for s in spec["core_shapes"]))
        tt = TTLinear.from_ttm(ttm, bias=b.astype(np.float64), precision=precision)
        tt.is_network_input = index == 0
        layers.append(tt)
    model = torch.nn.Sequential(*[m for tt in layers[:-1] for m in (tt, torch.nn.ReLU())], layers[-1]).train()
    optimizer = torch.optim.Adam(model.parameters(), lr=setup.lr)

    def step(x, y):
        loss = torch.nn.functional.cross_entropy(model(torch.from_numpy(x)), torch.from_numpy(y))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return step


def state_words(trainer: TtMlpTrainer) -> list:
    weights = trainer.read_weights()
    return [np.asarray(a) for key in ("cores", "biases", "moments", "trackers", "ranks") for a in weights[key]]


def compare_states(a: TtMlpTrainer, b: TtMlpTrainer) -> tuple[int, int]:
    """(words compared, words that differ) over two trainers' state arrays (a dtype or shape mismatch: all)."""
    compared = differ = 0
    words_a, words_b = state_words(a), state_words(b)
    if len(words_a) != len(words_b):
        return sum(w.size for w in words_a), sum(w.size for w in words_a) + sum(w.size for w in words_b)
    for x, y in zip(words_a, words_b):
        compared += x.size
        if x.shape != y.shape or x.dtype != y.dtype:
            differ += max(x.size, y.size)
        elif x.size:  # a word differs where any of its bytes does
            bytes_x = np.ascontiguousarray(x).view(np.uint8).reshape(x.size, -1)
            bytes_y = np.ascontiguousarray(y).view(np.uint8).reshape(y.size, -1)
            differ += int(np.count_nonzero((bytes_x != bytes_y).any(axis=1)))
    return compared, differ


def measure(rank: int, steps: int, precision) -> dict:
    """One row: the four steps' least milliseconds at ``rank``, their ratios, and the state comparison."""
    setup = paper_setup(rank, precision)
    fast, per_call = TtMlpTrainer(setup), TtMlpTrainer(setup, GoldenRunner())
    if not isinstance(fast.runner.runner, WholeRunner):
        raise SystemExit(f"TtMlpTrainer's default runner is a {type(fast.runner.runner).__name__}, not a WholeRunner")
    cores = [[core.copy() for core in layer] for layer in fast.cores]
    biases = [b.copy() for b in fast.biases]
    steppers = {"fast": fast.train_step, "per_call": per_call.train_step,
                "torch_f32": torch_f32_step(setup, cores, biases)}
    try:
        steppers["torch_lowp"] = torch_lowp_step(setup, cores, biases)
    except (TypeError, ValueError) as error:  # a precision the torch layer does not take: left out, said why
        print(f"rank {rank}: no torch TTLinear step ({error})", file=sys.stderr)
    rng = np.random.default_rng(rank)
    times: dict = {name: [] for name in steppers}
    order = list(steppers)
    for step in range(steps + 1):  # the first step aims every scale and warms caches: not timed
        x = rng.random((setup.batch_size, setup.layers[0]["in_features"])).astype(np.float32)
        y = rng.integers(0, setup.layers[-1]["out_features"], setup.batch_size)
        for name in order[step % len(order):] + order[:step % len(order)]:  # each leads in turn
            started = time.perf_counter()
            steppers[name](x, y)
            if step:
                times[name].append(time.perf_counter() - started)
    compared, differ = compare_states(fast, per_call)
    best = {name: 1e3 * min(values) for name, values in times.items()}
    runner = fast.runner.runner
    row = {"rank": rank, "ranks": [list(r) for r in fast.ranks()], "batch": setup.batch_size, "steps_timed": steps,
           "pe_calls_per_step": fast.runner.transactions // (steps + 1),
           **{f"{name}_ms": value for name, value in best.items()},
           "fast_over_torch_f32": best["fast"] / best["torch_f32"],
           "per_call_over_fast": best["per_call"] / best["fast"],
           "words_compared": compared, "mismatched_words": differ, "fallbacks": runner.fallbacks,
           "arithmetic": dict(runner.arithmetic),
           "calls_equal": (fast.runner.transactions, fast.runner.macs) == (per_call.runner.transactions,
                                                                         per_call.runner.macs)}
    if "torch_lowp" in best:
        row["fast_over_torch_lowp"] = best["fast"] / best["torch_lowp"]
    return row


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=lambda s: [int(v) for v in s.split(",")], default=[8, 16])
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--out", default="reports/bench")
    args = parser.parse_args()
    if args.steps < 1 or any(rank < 1 for rank in args.ranks):
        parser.error("--steps and every rank must be >= 1")
    import torch

    torch.set_num_threads(1)
    blas = "as the environment sets it (threadpoolctl missing)"
    try:
        from threadpoolctl import threadpool_limits

        threadpool_limits(1)
        blas = "1 thread (threadpoolctl)"
    except ImportError:
        pass
    precision = tt_setup_of(load_design(EXAMPLES / "digits_tt.toml")).precision
    rows = []
    for rank in args.ranks:
        row = measure(rank, args.steps, precision)
        rows.append(row)
        lowp = f", torch TTLinear {row['torch_lowp_ms']:6.1f} ms" if "torch_lowp_ms" in row else ""
        print(f"rank {rank:2d}: fast {row['fast_ms']:6.1f} ms, per call {row['per_call_ms']:7.1f} ms, torch float32 "
              f"{row['torch_f32_ms']:5.1f} ms{lowp}; fast/torch f32 {row['fast_over_torch_f32']:.2f}, per call/fast "
              f"{row['per_call_over_fast']:.1f}; {row['words_compared']} words compared, {row['mismatched_words']} "
              f"differ; {row['pe_calls_per_step']} PE calls a step, fallbacks {row['fallbacks']}", flush=True)
    identical = all(row["mismatched_words"] == 0 and row["calls_equal"] for row in rows)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    write_json_atomic(out / "tt_golden.json", {"rows": rows, "bit_identical": identical, "blas_threads": blas,
                                               "torch_threads": torch.get_num_threads()})
    print(f"wrote {out / 'tt_golden.json'}")
    if not identical:
        print("the fast and per-call steps' states (or their PE call counts) differ", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
