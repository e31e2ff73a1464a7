"""An arm of a study (one configuration to train, and the settings it may be tuned over) and dotted settings.

Why dotted settings: a tuning grid, a chosen setting and a committed report
all name a configuration field the same way (``"optim.lr"``,
``"techniques.psg.beta"``), and every setting goes through the
configuration's own validation, so a candidate the configuration refuses is
refused before any run starts.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from codesign.reproduce.protocol import VALIDATION_FRACTION
from codesign.train.config import TrainConfig


@dataclass(frozen=True)
class Arm:
    """One configuration to train; ``seed`` in its config is replaced per seed.

    ``tune`` maps dotted config fields (``"optim.lr"``, ``"techniques.psg.beta"``)
    to candidate values; the trials are their Cartesian product.
    """

    name: str
    config: TrainConfig
    baseline: bool = False
    tune: Mapping[str, Sequence[Any]] = field(default_factory=dict)

    def trials(self) -> list[dict[str, Any]]:
        """Every candidate setting (dotted field -> value), in grid order; one empty setting without a grid."""
        paths = list(self.tune)
        return [dict(zip(paths, values)) for values in itertools.product(*(self.tune[p] for p in paths))] or [{}]


def with_setting(config: TrainConfig, path: str, value: Any) -> TrainConfig:
    """``config`` with the dotted field ``path`` set to ``value`` (validated like any configuration)."""
    head, _, rest = path.partition(".")
    if head == "techniques":
        name, _, leaf = rest.partition(".")
        if name not in config.techniques or not leaf:
            raise ValueError(f"{path}: the configuration has no technique {name!r} to tune")
        techniques = dict(config.techniques)
        techniques[name] = dataclasses.replace(techniques[name], **{leaf: value})
        return config.replace(techniques=techniques)
    if head in ("data", "model", "optim") and rest and "." not in rest:
        return config.replace(**{head: dataclasses.replace(getattr(config, head), **{rest: value})})
    if path == "seed":
        return config.replace(seed=value)
    raise ValueError(f"cannot tune {path!r}: expected data.X, model.X, optim.X or techniques.NAME.X")


def with_settings(config: TrainConfig, settings: Mapping[str, Any]) -> TrainConfig:
    """``config`` with every dotted setting applied in order."""
    for path, value in settings.items():
        config = with_setting(config, path, value)
    return config


def with_validation(config: TrainConfig) -> TrainConfig:
    """``config`` holding out :data:`VALIDATION_FRACTION` of its training split, unless it holds out some already."""
    if config.data.validation_fraction > 0:
        return config
    return config.replace(data=dataclasses.replace(config.data, validation_fraction=VALIDATION_FRACTION))


def with_split(config: TrainConfig, split: int) -> TrainConfig:
    """``config`` on the train/test split drawn by ``split`` (``DataConfig.split_seed``)."""
    return config.replace(data=dataclasses.replace(config.data, split_seed=split))
