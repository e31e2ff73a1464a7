"""What every reproduction fixes before it trains: the validation hold-out, the tuning seeds, the splits, the seeds.

Why one place: a study's runs are paired per (seed, split) and its choices
read the validation split only, so the seeds a choice may use, the seeds a
claim is evaluated at and the train/test splits must never overlap or drift
between reproductions. Every figure here is a count or a seed, no unit.
"""

from __future__ import annotations

from collections.abc import Sequence

VALIDATION_FRACTION = 0.2  # of the training split, stratified
TUNING_SEED = 1000  # trial runs use seeds no evaluation uses, so the evaluated seeds are not the selected ones
TUNING_SEEDS = (TUNING_SEED, TUNING_SEED + 1, TUNING_SEED + 2)  # every trial at each; the mean validation accuracy decides
SPLIT_SEEDS = (0, 1, 2)  # resampled train/test splits (DataConfig.split_seed)
CLAIM_SEEDS = (0, 1, 2)  # the default evaluation seeds of a full run: x SPLIT_SEEDS = 9 paired runs per arm
MAX_WIDENINGS = 2  # how many times an arm's grid is continued past the edge its choice landed on


def study_seeds(seeds: Sequence[int] | None, smoke: bool, default: Sequence[int] = CLAIM_SEEDS) -> list[int]:
    """The evaluation seeds of a reproduction: those given, else seed 0 for a smoke run and ``default`` (the
    reproduction's claim seeds, :data:`CLAIM_SEEDS` unless it has its own) for a claim.

    An empty list is refused, never taken as "the default".
    """
    if seeds is None:
        return [0] if smoke else list(default)
    if not seeds:
        raise ValueError("seeds: give at least one seed, or none for the default")
    return list(seeds)


def check_seeds(seeds: Sequence[int], reserved: Sequence[int] = TUNING_SEEDS) -> list[int]:
    """``seeds`` as a list, refused when empty, repeated or holding a seed the tuning runs use."""
    seeds = list(seeds)
    if not seeds or len(set(seeds)) != len(seeds):
        raise ValueError(f"seeds must be a non-empty list without repeats, got {seeds}")
    if set(reserved) & set(seeds):
        raise ValueError(f"seeds {list(reserved)} are reserved for tuning runs")
    return seeds


def study_splits(seeds: Sequence[int]) -> list[int]:
    """The train/test splits crossed with ``seeds``: all of :data:`SPLIT_SEEDS`, or the first alone for one seed.

    One seed is a smoke run or a spot check (``codesign reproduce check --seeds 1``), not a claim.
    """
    return list(SPLIT_SEEDS) if len(seeds) > 1 else [SPLIT_SEEDS[0]]


def crossed_pairs(seeds: Sequence[int], splits: Sequence[int]) -> list[tuple[int, int]]:
    """(seed, split) of every evaluation run when every seed trains on every split: splits outer, seeds inner."""
    return [(seed, split) for split in splits for seed in seeds]


def split_of(seed: int) -> int:
    """The split a seed trains on when splits are nested in the seeds (``tt``): ``SPLIT_SEEDS[seed % 3]``."""
    return SPLIT_SEEDS[seed % len(SPLIT_SEEDS)]


def nested_pairs(seeds: Sequence[int]) -> list[tuple[int, int]]:
    """(seed, split) of every evaluation run when each seed trains on one split (:func:`split_of`), seed order."""
    return [(seed, split_of(seed)) for seed in seeds]
