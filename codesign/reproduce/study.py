"""The shared study: tune every arm on the validation split, then train each choice at every (seed, split).

A reproduction trains a baseline arm and one or more technique arms on the
same data, model, epochs and seeds (:func:`run_study`):

1. **Validation split.** Every arm trains with ``data.validation_fraction``
   (:data:`~codesign.reproduce.protocol.VALIDATION_FRACTION` unless the arm
   sets one) held out of the training split; every choice reads it, never
   the test split.
2. **Tuning**, the same budget for every arm (:func:`codesign.reproduce.tuning.tune_arms`).
3. **Evaluation.** The chosen setting of each arm is trained at every seed
   crossed with every resampled train/test split (``CLAIM_SEEDS x
   SPLIT_SEEDS``: n = 9 paired runs per arm) and tested once; each run
   records its split seed.
4. **Paired comparison** (:mod:`codesign.reproduce.summary`).

Every run goes through :func:`codesign.reproduce.common.train_groups`, the
one path to cached tasks; ``tt`` plans its own trials and pairs on the same
path (its runs measure a TT model's memory too).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from codesign.reproduce.arms import Arm, with_settings, with_split, with_validation
from codesign.reproduce.common import Execution, config_task, task_key, train_groups
from codesign.reproduce.protocol import SPLIT_SEEDS, check_seeds, crossed_pairs, study_splits
from codesign.reproduce.tuning import tune_arms
from codesign.train.trainer import TrainResult


def evaluation_key(arm: str, seed: int, split: int) -> str:
    """The cache key of an evaluation run; split 0 keeps the name (and description) runs had before splits were
    resampled, so a cached run stays valid."""
    return task_key("eval", arm, f"seed={seed}") if split == SPLIT_SEEDS[0] else \
        task_key("eval", arm, f"seed={seed}", f"split={split}")


def _checked(arms: Sequence[Arm], seeds: Sequence[int], splits: Sequence[int] | None
             ) -> tuple[list[int], list[int]]:
    """The study's seeds and splits, after refusing a study that cannot be paired or tuned (before any task)."""
    if sum(arm.baseline for arm in arms) != 1:
        raise ValueError("exactly one arm must be the baseline")
    names = [arm.name for arm in arms]
    if len(set(names)) != len(names):
        raise ValueError(f"arm names must be unique, got {names}")
    seeds = check_seeds(seeds)
    splits = study_splits(seeds) if splits is None else list(splits)
    if not splits or len(set(splits)) != len(splits):
        raise ValueError(f"splits must be a non-empty list without repeats, got {splits}")
    for arm in arms:  # every candidate is a valid configuration before any task runs
        for trial in arm.trials():
            with_settings(arm.config, trial)
    return seeds, splits


def run_study(arms: list[Arm], seeds: Sequence[int], out_dir: Path, *, execution: Execution = Execution(),
              splits: Sequence[int] | None = None
              ) -> tuple[dict[str, list[TrainResult]], dict[str, dict[str, Any]]]:
    """Tune every arm (same budget, validation split), then train its choice at every (split, seed).

    Returns the evaluation runs (arm name -> one :class:`TrainResult` per (split, seed), splits outer and
    seeds inner, the same order for every arm: the pairing) and the tuning record (arm name -> trials,
    chosen, widenings). ``splits`` defaults to :func:`~codesign.reproduce.protocol.study_splits`.
    """
    seeds, splits = _checked(arms, seeds, splits)
    task_dir = Path(out_dir) / "tasks"
    tuning = tune_arms(arms, task_dir, execution)
    groups = {}
    for arm in arms:
        config = with_settings(with_validation(arm.config), tuning[arm.name]["chosen"])
        groups[arm.name] = [
            config_task(evaluation_key(arm.name, seed, split), with_split(config, split).replace(seed=seed),
                        f"{arm.name} seed {seed}" + ("" if split == SPLIT_SEEDS[0] else f" split {split}"))
            for seed, split in crossed_pairs(seeds, splits)]
    trained = train_groups(groups, task_dir, execution)
    return {name: [TrainResult(**result) for result in results] for name, results in trained.groups.items()}, tuning
