"""The one path from training runs to cached sweep tasks, shared by every reproduction.

Every training run of every reproduction (a tuning trial, a preliminary
search run of ``abvs``, an evaluation run, a TT run of ``tt``) is an
independent task of :func:`codesign.sweep.run_sweep` (Dask: a local cluster,
an existing one, or this process), cached under ``<report dir>/tasks/``: a
re-run skips what is done. The path has three parts:

1. **Measurement**: the task function that trains one run and returns what
   is measured, as plain data. :func:`train_task` trains a
   :class:`~codesign.train.config.TrainConfig` and returns its
   :class:`~codesign.train.trainer.TrainResult`; a reproduction that measures
   something a configuration cannot carry brings its own
   (``codesign.reproduce.tt:train_task`` also returns the trained TT model's
   parameter bits).
2. **Tasks**: :func:`config_task` (or a reproduction's own builder) names
   the run by a cache key and fixes its arguments.
3. **Running**: :func:`train_groups` runs groups of tasks (a trial's tuning
   seeds, an arm's evaluation runs) as one sweep and returns each group's
   results in order; the choice rules (:mod:`codesign.reproduce.tuning`, a
   reproduction's own) read them.

The module keeps its name because cached tasks name their function
``codesign.reproduce.common:train_task``: renaming it would invalidate every
task cache.
"""

from __future__ import annotations

import re
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from codesign.reproduce.machine import TRAINING_THREADS
from codesign.sweep import SweepTask
from codesign.train.config import TrainConfig, config_from_dict

TRAIN_TASK = "codesign.reproduce.common:train_task"  # the measurement of every TrainConfig run; part of cache keys


@dataclass(frozen=True, kw_only=True)
class Execution:
    """Where the training tasks run: ``workers`` Dask worker processes (0: in this process) or ``scheduler``."""

    workers: int = 0
    scheduler: str | None = None
    retries: int = 1  # attempts after a task's first failure
    progress: bool = True

    def __post_init__(self) -> None:
        for name in ("workers", "retries"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"{name} must be an int >= 0, got {value!r}")


@dataclass(frozen=True, kw_only=True)
class Trained:
    """What :func:`train_groups` gave: each group's task results (plain data, task order), and how many tasks
    trained now or were found in the cache."""

    groups: dict[Any, list[dict]]
    trained: int
    cached: int

    def counts(self) -> dict[str, int]:
        """How many tasks trained now and how many were cached, as a report records it."""
        return {"trained": self.trained, "cached": self.cached}


def train_task(*, config: dict, description: str = "train") -> dict:
    """One training run (a sweep task): the configuration as plain data in, the :class:`TrainResult` as data out.

    Torch runs on one thread: float32 sums can differ in their last bits with
    the thread count, and results must not depend on where a task ran.
    """
    import torch

    from codesign.train.trainer import Trainer

    torch.set_num_threads(TRAINING_THREADS)
    result = Trainer(config_from_dict(config), progress=False, description=description).fit()
    return asdict(result)


def task_key(*parts: str) -> str:
    """A cache key from its parts, each made file-name safe (``tune,fp32,0`` or ``eval,smd_x4_3,seed=1``)."""
    return ",".join(re.sub(r"[^A-Za-z0-9._=+-]", "_", part) for part in parts)


def config_task(key: str, config: TrainConfig, description: str) -> SweepTask:
    """The cached task that trains ``config`` with :func:`train_task`; ``description`` labels its progress."""
    return SweepTask(key=key, function=TRAIN_TASK, kwargs={"config": config.to_dict(), "description": description})


def config_tasks(configs: Mapping[str, TrainConfig]) -> list[SweepTask]:
    """One :func:`config_task` per ``key -> configuration``, the key labelling the run too."""
    return [config_task(key, config, key) for key, config in configs.items()]


def _set_aside_superseded(tasks: Sequence[SweepTask], task_dir: Path) -> None:
    """Move a cached result that another task wrote under the same key to ``<key>.superseded.json``.

    A reproduction's cache outlives its choices: when re-tuning picks another setting, the evaluation run
    ``eval,<arm>,seed=<s>`` of the old choice sits under the key of the new one. The sweep refuses to read it (it
    is another task); here it is kept aside, never read as this task's result, and the task runs again.
    """
    from codesign.io.jsonfile import load_json
    from codesign.sweep import result_path

    for task in tasks:
        path = result_path(task_dir, task.key)
        if path.is_file() and load_json(path, what="sweep result").get("task") != task.to_dict():
            path.replace(path.with_name(f"{task.key}.superseded.json"))


def train_groups(groups: Mapping[Hashable, Sequence[SweepTask]], task_dir: Path, execution: Execution) -> Trained:
    """Run every group's tasks as one cached sweep under ``task_dir``; each group's results in task order.

    A failed task stops the reproduction (a re-run retries it; what finished stays cached). No task: nothing runs.
    """
    from codesign.sweep import read_result, run_sweep

    tasks = [task for group in groups.values() for task in group]
    if not tasks:
        return Trained(groups={name: [] for name in groups}, trained=0, cached=0)
    _set_aside_superseded(tasks, task_dir)
    report = run_sweep(tasks, task_dir, scheduler=execution.scheduler, workers=execution.workers,
                       retries=execution.retries, progress=execution.progress)
    if report.failed:
        raise RuntimeError("training tasks failed (a re-run retries them):\n" + report.summary())
    results = {name: [read_result(task_dir, task) for task in group] for name, group in groups.items()}
    return Trained(groups=results, trained=len(report.done), cached=len(report.skipped))
