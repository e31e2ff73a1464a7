"""Choosing each arm's setting on the validation split: the shared choice rule, grid widening, pinned choices.

The protocol (:func:`tune_arms`): every arm, baseline included, gets the same
number of trials (its ``Arm.tune`` grid), each trained at the three
:data:`~codesign.reproduce.protocol.TUNING_SEEDS` (seeds no evaluation uses)
on the first split with the full epoch budget; the trial with the highest
*mean* final validation accuracy wins (:func:`best_mean`, ties: the first
listed): one seed on a few hundred validation images picks noise. The test
split is never read.

**Widening.** When the choice lies on the edge of a numeric grid, the grid
is continued one step beyond that edge (:func:`widened_value`) and the arm's
new trials run; at most :data:`~codesign.reproduce.protocol.MAX_WIDENINGS`
times per arm. Every widening is recorded, and an arm still on an edge after
the last one says so (``"edge"``). ``abvs`` widens its schedule grid by the
same step rule.
"""

from __future__ import annotations

import contextlib
import contextvars
import statistics
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from codesign.reproduce.arms import Arm, with_settings, with_split, with_validation
from codesign.reproduce.common import Execution, config_task, task_key, train_groups
from codesign.reproduce.protocol import MAX_WIDENINGS, SPLIT_SEEDS, TUNING_SEEDS

GEOMETRIC_TOLERANCE = 0.15  # consecutive ratios within 15 % of each other: the grid's step is geometric
_PINNED_CHOICES: contextvars.ContextVar[Mapping[str, Mapping[str, Any]] | None] = contextvars.ContextVar(
    "pinned_tuning_choices", default=None)


class UnpinnedArms(ValueError):
    """Within :func:`pinned_tuning`, the run planned arms the pinned choices do not name (a reproduction whose own
    selections, such as abvs's least sufficient FB, chose differently from the committed run)."""

    def __init__(self, arms: list[str]) -> None:
        super().__init__(f"no recorded tuning choice for arm(s) {', '.join(arms)}")
        self.arms = arms


@contextlib.contextmanager
def pinned_tuning(choices: Mapping[str, Mapping[str, Any]]):
    """Within the block, :func:`tune_arms` runs no trial and returns ``choices`` (arm name -> chosen setting).

    ``codesign reproduce check`` reruns a reproduction with the committed tuning choices: re-tuning on
    another machine could pick another setting, and then nothing would be compared like for like.
    """
    token = _PINNED_CHOICES.set(dict(choices))
    try:
        yield
    finally:
        _PINNED_CHOICES.reset(token)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def widened_value(grid: Sequence[Any], chosen: Any) -> Any | None:
    """The next value beyond the edge of ``grid`` that ``chosen`` lies on, or None (not on an edge, not numeric).

    The grid's own step is continued from its two outermost values on that side: geometric (``edge * edge /
    neighbour``) when every value is positive and the consecutive ratios agree within
    :data:`GEOMETRIC_TOLERANCE`, else arithmetic (``edge + (edge - neighbour)``). An integer grid stays
    integer; a step that rounds onto the edge itself gives None.
    """
    values = list(grid)
    if len(values) < 2 or not all(_is_number(v) for v in values) or len(set(values)) != len(values):
        return None
    if chosen == values[0]:
        edge, neighbour = values[0], values[1]
    elif chosen == values[-1]:
        edge, neighbour = values[-1], values[-2]
    else:
        return None
    ratios = [b / a for a, b in zip(values, values[1:])] if all(v > 0 for v in values) else []
    geometric = bool(ratios) and max(ratios) <= min(ratios) * (1 + GEOMETRIC_TOLERANCE) and \
        (all(r > 1 for r in ratios) or all(r < 1 for r in ratios))
    new = edge * (edge / neighbour) if geometric else edge + (edge - neighbour)
    if all(isinstance(v, int) for v in values):
        new = int(round(new))
    else:
        new = float(f"{new:.6g}")  # 0.1 * 2 stays 0.2, not 0.20000000000000001
    return None if new == edge or new in values else new


def best_mean(trials: Sequence[Mapping[str, Any]], key: str = "validation_accuracy") -> int:
    """The shared choice rule: the index of the trial with the highest ``key`` (a mean over tuning seeds, %);
    ties go to the first listed."""
    return max(range(len(trials)), key=lambda index: (trials[index][key], -index))


def tuning_key(arm: str, number: int, seed: int) -> str:
    """The cache key of trial ``number`` of ``arm`` at a tuning seed.

    The first tuning seed keeps the name (and description) runs had before tuning crossed seeds, so a cached
    trial stays valid.
    """
    return task_key("tune", arm, str(number)) if seed == TUNING_SEEDS[0] else \
        task_key("tune", arm, str(number), f"seed={seed}")


def _run_trials(pending: list[tuple[Arm, int, dict[str, Any]]], task_dir: Path, execution: Execution
                ) -> dict[tuple[str, int], list[float]]:
    """Train each (arm, trial number, setting) at every tuning seed; its validation accuracies (%), seed order."""
    groups = {}
    for arm, number, trial in pending:
        config = with_split(with_settings(with_validation(arm.config), trial), SPLIT_SEEDS[0])
        groups[(arm.name, number)] = [
            config_task(tuning_key(arm.name, number, seed), config.replace(seed=seed),
                        f"tune {arm.name} {trial}" + ("" if seed == TUNING_SEEDS[0] else f" seed {seed}"))
            for seed in TUNING_SEEDS]
    trained = train_groups(groups, task_dir, execution).groups
    return {group: [result["validation_accuracy"] for result in results] for group, results in trained.items()}


def _widen(entry: dict[str, Any], arm: Arm, round_number: int) -> list[dict[str, Any]]:
    """Continue each grid of ``entry`` whose chosen value lies on its edge; the settings of the new trials.

    Past the last round, or where the configuration refuses the continued value, the field is recorded as still
    on its edge instead.
    """
    chosen, added = entry["chosen"], []
    entry["edge"] = []
    for path, grid in entry["grid"].items():
        new = widened_value(grid, chosen[path])
        if new is None:
            continue
        if round_number == MAX_WIDENINGS:
            entry["edge"].append(path)
            continue
        setting = {**chosen, path: new}
        widening = {"path": path, "edge": chosen[path], "added": new, "round": round_number + 1}
        try:
            with_settings(arm.config, setting)
        except ValueError as error:  # the continued grid leaves what the configuration accepts
            entry["edge"].append(path)
            entry["widenings"].append({**widening, "refused": str(error)})
            continue
        entry["grid"][path] = [new] + grid if chosen[path] == grid[0] else grid + [new]
        entry["widenings"].append(widening)
        added.append(setting)
    return added


def _untuned(arms: Sequence[Arm]) -> dict[str, dict[str, Any]] | None:
    """The tuning record when no trial runs: the pinned choices, or each arm's single candidate; else None."""
    pinned = _PINNED_CHOICES.get()
    if pinned is not None:
        missing = [arm.name for arm in arms if arm.name not in pinned]
        if missing:
            raise UnpinnedArms(missing)
        return {arm.name: {"trials": [], "chosen": dict(pinned[arm.name]), "pinned": True} for arm in arms}
    budgets = {arm.name: len(arm.trials()) for arm in arms}
    if len(set(budgets.values())) != 1:
        raise ValueError(f"every arm must get the same tuning budget (number of trials), got {budgets}")
    if budgets[arms[0].name] == 1:  # one candidate each: nothing to choose, no trial runs
        return {arm.name: {"trials": [], "chosen": arm.trials()[0]} for arm in arms}
    return None


def tune_arms(arms: Sequence[Arm], task_dir: Path, execution: Execution) -> dict[str, dict[str, Any]]:
    """Trials of every arm's candidates on the validation split, each at every tuning seed; widened at an edge.

    Returns, per arm: ``trials`` (setting, mean validation accuracy, the per-seed accuracies, the widening round
    that added it: 0 for the arm's own grid), ``chosen``, ``grid`` (each tuned field's values as finally tried),
    ``widenings`` (field, edge value, value added, round) and ``edge`` (fields whose choice is still on an edge
    after :data:`MAX_WIDENINGS` rounds, or where the grid could not be continued).
    """
    untuned = _untuned(arms)
    if untuned is not None:
        return untuned
    tuning: dict[str, dict[str, Any]] = {
        arm.name: {"trials": [], "chosen": {}, "grid": {path: list(values) for path, values in arm.tune.items()},
                   "widenings": [], "edge": []} for arm in arms}
    pending = [(arm, number, trial) for arm in arms for number, trial in enumerate(arm.trials())]
    for round_number in range(MAX_WIDENINGS + 1):
        accuracies = _run_trials(pending, task_dir, execution)
        for arm, number, trial in pending:
            values = accuracies[(arm.name, number)]
            tuning[arm.name]["trials"].append({"setting": trial, "validation_accuracy": statistics.fmean(values),
                                               "validation_accuracies": values, "tuning_seeds": list(TUNING_SEEDS),
                                               "widening": round_number})
        pending = []
        for arm in arms:
            entry = tuning[arm.name]
            entry["chosen"] = entry["trials"][best_mean(entry["trials"])]["setting"]
            added = _widen(entry, arm, round_number)
            pending += [(arm, len(entry["trials"]) + offset, setting) for offset, setting in enumerate(added)]
        if not pending:
            break
    return tuning
