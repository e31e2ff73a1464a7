"""Sweep scale-out: the same grid of training runs on a local Dask cluster of 1 and of 2 workers.

Runs ``--tasks`` independent training runs (ResNet-8 on the shipped digits
data, twelve epochs of width 16, seeds 0..N-1: the kind of task every reproduction sweeps)
through :func:`codesign.sweep.run_sweep`, first on one worker process, then on
two, each into a fresh result folder, and prints the wall times and the
speed-up (target: at least 1.5x on a machine with two idle cores). The
one-worker run is the reference, measured in the same process just before.
It also checks that both runs stored the same results, timing fields aside:
where a task ran must not change what it computed.

Run: .venv/bin/python benchmarks/bench_sweep_workers.py [--tasks 8] [--out reports/bench]
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

from codesign.io.reports import write_json_atomic
from codesign.sweep import SweepTask, read_result, run_sweep
from codesign.train.config import DataConfig, ModelConfig, OptimConfig, TrainConfig

TARGET_SPEEDUP = 1.5


def tasks(count: int, epochs: int) -> list[SweepTask]:
    out = []
    for seed in range(count):
        config = TrainConfig(data=DataConfig(), model=ModelConfig(name="resnet", depth=8, width=16),
                             optim=OptimConfig(epochs=epochs), seed=seed)
        out.append(SweepTask(key=f"seed={seed}", function="codesign.reproduce.common:train_task",
                             kwargs={"config": config.to_dict(), "description": f"seed {seed}"}))
    return out


def without_timing(value):
    """``value`` with every field whose name mentions seconds removed (wall times differ between runs)."""
    if isinstance(value, dict):
        return {k: without_timing(v) for k, v in value.items() if "second" not in k}
    if isinstance(value, list):
        return [without_timing(v) for v in value]
    return value


def timed_sweep(grid: list[SweepTask], workers: int, root: Path) -> tuple[float, dict]:
    out_dir = root / f"workers={workers}"
    start = time.perf_counter()
    report = run_sweep(grid, out_dir, workers=workers, retries=0, progress=True)
    seconds = time.perf_counter() - start
    if report.failed:
        raise SystemExit(f"{workers} worker(s): tasks failed:\n{report.summary()}")
    return seconds, {task.key: without_timing(read_result(out_dir, task)) for task in grid}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=8)
    parser.add_argument("--epochs", type=int, default=12)
    parser.add_argument("--out", default="reports/bench")
    args = parser.parse_args()
    if args.tasks < 2 or args.epochs < 1:
        parser.error("--tasks must be >= 2 and --epochs >= 1")

    grid = tasks(args.tasks, args.epochs)
    with tempfile.TemporaryDirectory(prefix="codesign_bench_sweep_") as tmp:
        one_s, one = timed_sweep(grid, 1, Path(tmp))
        two_s, two = timed_sweep(grid, 2, Path(tmp))
    identical = json.dumps(one, sort_keys=True) == json.dumps(two, sort_keys=True)
    speedup = one_s / two_s
    summary = {"tasks": args.tasks, "epochs": args.epochs, "cpu_count": os.cpu_count(),
               "load_average_after": os.getloadavg(), "one_worker_s": one_s, "two_workers_s": two_s,
               "speedup": speedup, "target_speedup": TARGET_SPEEDUP, "identical_results": identical}
    print(f"{args.tasks} training runs: 1 worker {one_s:.1f} s, 2 workers {two_s:.1f} s, speed-up {speedup:.2f}x "
          f"(target {TARGET_SPEEDUP}x); results identical: {identical}")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    write_json_atomic(out / "sweep_workers.json", summary)
    return 0 if identical and speedup >= TARGET_SPEEDUP else 1


if __name__ == "__main__":
    raise SystemExit(main())
