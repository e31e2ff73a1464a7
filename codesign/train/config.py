"""Validated training configuration, from keyword arguments or a TOML file.

Every field is checked before training starts; errors name the field, e.g.
``techniques.smd.p: must be in [0, 1), got -0.1``.

TOML shape::

    seed = 0
    [data]
    name = "digits"
    [model]
    name = "resnet"
    depth = 8
    [optim]
    epochs = 30
    lr = 0.1
    [techniques.smd]
    p = 0.5
"""

from __future__ import annotations

import dataclasses
import math
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from codesign.train.models import RESNET_DEPTHS

MODELS = ("resnet", "mlp")
DATASETS = ("digits", "synthetic")
SCHEDULES = ("cosine", "constant")


class ConfigError(ValueError):
    """A configuration field is invalid; the message starts with the field's dotted name."""


def require(condition: bool, name: str, message: str) -> None:
    if not condition:
        raise ConfigError(f"{name}: {message}")


def is_number(value: Any) -> bool:
    """A finite real number given as int or float (bool excluded: True is not a learning rate)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


@dataclass(frozen=True, kw_only=True)
class DataConfig:
    name: str = "digits"
    test_fraction: float = 0.25
    split_seed: int = 0
    synthetic_samples: int = 600
    validation_fraction: float = 0.0  # share of the training split held out for every choice (0: none)

    def validate(self, prefix: str = "data") -> None:
        require(self.name in DATASETS, f"{prefix}.name", f"unknown dataset {self.name!r}; expected one of {DATASETS}")
        require(is_number(self.test_fraction) and 0 < self.test_fraction < 1, f"{prefix}.test_fraction", "must be in (0, 1)")
        require(isinstance(self.synthetic_samples, int) and self.synthetic_samples >= 20, f"{prefix}.synthetic_samples", "must be an int >= 20")
        require(is_number(self.validation_fraction) and 0 <= self.validation_fraction <= 0.5,
                f"{prefix}.validation_fraction", f"must be in [0, 0.5], got {self.validation_fraction!r}")


@dataclass(frozen=True, kw_only=True)
class ModelConfig:
    name: str = "resnet"
    depth: int = 8
    width: int = 16
    hidden: tuple[int, ...] = (128, 64)

    def validate(self, prefix: str = "model") -> None:
        require(self.name in MODELS, f"{prefix}.name", f"unknown model {self.name!r}; expected one of {MODELS}")
        require(self.depth in RESNET_DEPTHS, f"{prefix}.depth", f"must be one of {RESNET_DEPTHS}, got {self.depth!r}")
        require(isinstance(self.width, int) and 4 <= self.width <= 256, f"{prefix}.width", "must be an int in [4, 256]")
        require(all(isinstance(h, int) and h > 0 for h in self.hidden), f"{prefix}.hidden", "must be positive ints")


@dataclass(frozen=True, kw_only=True)
class OptimConfig:
    """SGD with momentum; ``epochs`` is the budget every compared run shares."""

    epochs: int = 30
    batch_size: int = 64
    lr: float = 0.1
    momentum: float = 0.9
    weight_decay: float = 5e-4
    schedule: str = "cosine"

    def validate(self, prefix: str = "optim") -> None:
        require(isinstance(self.epochs, int) and self.epochs >= 1, f"{prefix}.epochs", f"must be an int >= 1, got {self.epochs!r}")
        require(isinstance(self.batch_size, int) and self.batch_size >= 1, f"{prefix}.batch_size", "must be an int >= 1")
        require(is_number(self.lr) and self.lr > 0, f"{prefix}.lr", f"must be > 0, got {self.lr!r}")
        require(is_number(self.momentum) and 0 <= self.momentum < 1, f"{prefix}.momentum", "must be in [0, 1)")
        require(is_number(self.weight_decay) and self.weight_decay >= 0, f"{prefix}.weight_decay", "must be >= 0")
        require(self.schedule in SCHEDULES, f"{prefix}.schedule", f"must be one of {SCHEDULES}")


@dataclass(frozen=True, kw_only=True)
class TrainConfig:
    """One training run. ``techniques`` maps a technique name to its config (see codesign.train.techniques)."""

    seed: int = 0
    data: DataConfig = field(default_factory=DataConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    optim: OptimConfig = field(default_factory=OptimConfig)
    techniques: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        require(isinstance(self.seed, int) and not isinstance(self.seed, bool), "seed", "must be an int")
        self.data.validate()
        self.model.validate()
        self.optim.validate()
        from codesign.train.techniques import technique_config_class

        for name, technique_config in self.techniques.items():
            expected = technique_config_class(name)
            require(isinstance(technique_config, expected), f"techniques.{name}",
                    f"expected a {expected.__name__}, got {type(technique_config).__name__}")
            technique_config.validate(f"techniques.{name}")

    def to_dict(self) -> dict:
        return {"seed": self.seed, "data": dataclasses.asdict(self.data), "model": dataclasses.asdict(self.model),
                "optim": dataclasses.asdict(self.optim),
                "techniques": {name: dataclasses.asdict(cfg) for name, cfg in self.techniques.items()}}

    def replace(self, **changes) -> TrainConfig:
        return dataclasses.replace(self, **changes)


def _section(cls, raw: Any, prefix: str):
    require(isinstance(raw, dict), prefix, "must be a table")
    known = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(raw) - known)
    require(not unknown, f"{prefix}.{unknown[0]}" if unknown else prefix, f"unknown field (known: {', '.join(sorted(known))})")
    values = {key: tuple(value) if isinstance(value, list) else value for key, value in raw.items()}
    try:
        return cls(**values)
    except (TypeError, ValueError) as error:
        if isinstance(error, ConfigError):
            raise
        raise ConfigError(f"{prefix}: {error}") from None


def config_from_dict(raw: dict) -> TrainConfig:
    """Build a :class:`TrainConfig` from plain data (as read from TOML); errors name the field."""
    from codesign.train.techniques import technique_config_class

    top = {"seed", "data", "model", "optim", "techniques"}
    unknown = sorted(set(raw) - top)
    require(not unknown, unknown[0] if unknown else "", f"unknown field (known: {', '.join(sorted(top))})")
    techniques = {}
    for name, section in raw.get("techniques", {}).items():
        try:
            cls = technique_config_class(name)
        except ValueError as error:
            raise ConfigError(f"techniques.{name}: {error}") from None
        techniques[name] = _section(cls, section, f"techniques.{name}")
    return TrainConfig(
        seed=raw.get("seed", 0),
        data=_section(DataConfig, raw.get("data", {}), "data"),
        model=_section(ModelConfig, raw.get("model", {}), "model"),
        optim=_section(OptimConfig, raw.get("optim", {}), "optim"),
        techniques=techniques,
    )


def read_toml(path: Path, *, error: type[ValueError] = ConfigError, what: str = "config file") -> dict:
    """The tables of a TOML file; a missing file or bad TOML raises ``error`` naming the file."""
    path = Path(path)
    if not path.is_file():
        raise error(f"{what} {path} does not exist")
    with path.open("rb") as handle:
        try:
            return tomllib.load(handle)
        except tomllib.TOMLDecodeError as problem:
            raise error(f"{path}: not valid TOML: {problem}") from None


def load_config(path: Path) -> TrainConfig:
    raw = read_toml(path)
    raw.pop("design", None)  # the hardware of a design point (codesign.design), not a training setting
    return config_from_dict(raw)
