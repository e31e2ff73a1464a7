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
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from codesign.io.jsonfile import check_regular_file
from codesign.numerics.inputs import SEED_RANGE  # numpy and torch both take these seeds
from codesign.train.models import RESNET_DEPTHS

MODELS = ("resnet", "mlp", "convnet")
DATASETS = ("digits", "synthetic", "fashion-mnist", "mnist", "file")  # "file": data.path
FIXED_SPLITS = ("fashion-mnist", "mnist")  # one documented test split each (codesign.loops.npm_data)
MAX_PAD = 1024
SCHEDULES = ("cosine", "constant")
MAX_INT = 2**31 - 1  # no count, width or size of a configuration is larger; a TOML int up to 2**63 is refused
MAX_EPOCHS = 100_000
MAX_BATCH_SIZE = 65_536
MAX_SAMPLES = 1_000_000
MAX_HIDDEN = 65_536


class ConfigError(ValueError):
    """A configuration field is invalid; the message starts with the field's dotted name."""


def require(condition: bool, name: str, message: str) -> None:
    if not condition:
        raise ConfigError(f"{name}: {message}")


def is_number(value: Any) -> bool:
    """A finite real number given as int or float (bool excluded: True is not a learning rate)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def is_int(value: Any) -> bool:
    """An int that is not a bool (``epochs = true`` is not one epoch)."""
    return isinstance(value, int) and not isinstance(value, bool)


def check_seed(value: Any, name: str) -> None:
    """A seed: an int in :data:`SEED_RANGE` (a negative seed is refused, not wrapped around)."""
    low, high = SEED_RANGE
    require(is_int(value) and low <= value <= high, name, f"must be an int in [{low}, {high}], got {value!r}")


def _shown(value: Any) -> str:
    kind = {bool: "a bool", str: "a string", list: "a list", dict: "a table", float: "a float", int: "an int"}
    return f"{value!r} ({kind.get(type(value), type(value).__name__)})"


def _type_rule(annotation: Any):
    """(test, description) for a field's type annotation, or None when the field's own validation decides."""
    if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union:
        args = typing.get_args(annotation)
        others = [arg for arg in args if arg is not type(None)]
        rule = _type_rule(others[0]) if len(others) == 1 else None
        if rule is None or len(others) == len(args):
            return rule
        test, described = rule  # Optional: None (the default, from a dict; TOML has no null) is the unset value
        return (lambda v: v is None or test(v)), described
    if annotation is bool:
        return (lambda v: isinstance(v, bool)), "a bool (true or false)"
    if annotation is int:
        return (lambda v: is_int(v) and abs(v) <= MAX_INT), f"an int (|value| <= {MAX_INT})"
    if annotation is float:
        return is_number, "a finite number"
    if annotation is str:
        return (lambda v: isinstance(v, str)), "a string"
    if typing.get_origin(annotation) is tuple:
        args = typing.get_args(annotation)
        if len(args) == 2 and args[1] is Ellipsis:
            inner = _type_rule(args[0])
            if inner is not None:
                test, described = inner
                return ((lambda v: isinstance(v, (list, tuple)) and all(test(item) for item in v)),
                        f"a list, each item {described}")
    return None


def check_field_types(cls: type, raw: dict, prefix: str) -> None:
    """Each value of ``raw`` has the type its field of dataclass ``cls`` declares (bool is not int, a list is not
    a number); a nested dataclass or an unusual annotation is left to the class's own validation."""
    try:
        hints = typing.get_type_hints(cls)
    except Exception:  # an annotation that cannot be resolved: the class's validate() still checks the value
        return
    for key, value in raw.items():
        hint = hints.get(key)
        if dataclasses.is_dataclass(hint) and isinstance(value, dict):  # a nested table, e.g. techniques.tt.precision
            check_field_types(hint, value, f"{prefix}.{key}")
            continue
        rule = _type_rule(hint)
        if rule is not None:
            test, described = rule
            require(test(value), f"{prefix}.{key}", f"must be {described}, got {_shown(value)}")


@dataclass(frozen=True, kw_only=True)
class DataConfig:
    """Where the samples come from: a built-in set (``digits``, ``synthetic``), paper 003's ``fashion-mnist`` and
    ``mnist`` (fetched at set-up; each with its fixed test split, so ``test_fraction`` does not apply), or
    ``file``: the user's ``.npz`` or ``.csv`` at ``path`` (see :mod:`codesign.loops.data_sources`). ``pad_to``
    zero-pads images to a square of that side (0: as they are)."""

    name: str = "digits"
    test_fraction: float = 0.25
    split_seed: int = 0
    synthetic_samples: int = 600
    validation_fraction: float = 0.0  # share of the training split held out for every choice (0: none)
    # added later: left out of plain() at their defaults, so a run's recorded configuration and its cache key stay
    # what they were before these fields existed
    path: str = field(default="", metadata={"omit_default": True})
    pad_to: int = field(default=0, metadata={"omit_default": True})

    def validate(self, prefix: str = "data") -> None:
        require(isinstance(self.name, str) and self.name in DATASETS, f"{prefix}.name", f"unknown dataset {self.name!r}; expected one of {DATASETS}")
        require(is_number(self.test_fraction) and 0 < self.test_fraction < 1, f"{prefix}.test_fraction", "must be in (0, 1)")
        check_seed(self.split_seed, f"{prefix}.split_seed")
        require(is_int(self.synthetic_samples) and 20 <= self.synthetic_samples <= MAX_SAMPLES,
                f"{prefix}.synthetic_samples", f"must be an int in [20, {MAX_SAMPLES}], got {self.synthetic_samples!r}")
        require(is_number(self.validation_fraction) and 0 <= self.validation_fraction <= 0.5,
                f"{prefix}.validation_fraction", f"must be in [0, 0.5], got {self.validation_fraction!r}")
        require(isinstance(self.path, str), f"{prefix}.path", f"must be a string, got {_shown(self.path)}")
        require((self.name == "file") == bool(self.path), f"{prefix}.path",
                f"is given with {prefix}.name = {self.name!r}; a path is data of its own (name = 'file')"
                if self.path else f"{prefix}.name = 'file' needs {prefix}.path (a .npz or .csv file)")
        require(is_int(self.pad_to) and 0 <= self.pad_to <= MAX_PAD, f"{prefix}.pad_to",
                f"must be an int in [0, {MAX_PAD}] (0: no padding), got {self.pad_to!r}")
        require(not self.pad_to or self.name not in ("digits", "synthetic"), f"{prefix}.pad_to",
                f"pads {', '.join(FIXED_SPLITS)} or a file's images; {self.name} keeps its 8 x 8")


@dataclass(frozen=True, kw_only=True)
class ModelConfig:
    name: str = "resnet"
    depth: int = 8
    width: int = 16
    hidden: tuple[int, ...] = (128, 64)
    # convnet: each 3 x 3 conv's outputs and stride (1 or 2); added later, so left out of plain() at their defaults
    channels: tuple[int, ...] = field(default=(16, 16, 32, 32), metadata={"omit_default": True})
    strides: tuple[int, ...] = field(default=(1, 1, 2, 1), metadata={"omit_default": True})
    # convnet: residual blocks after the convs (no batch norm), each block's outputs and stride
    block_channels: tuple[int, ...] = field(default=(), metadata={"omit_default": True})
    block_strides: tuple[int, ...] = field(default=(), metadata={"omit_default": True})

    @property
    def blocks(self) -> tuple[tuple[int, int], ...]:
        """The convnet's residual blocks as ``(outputs, stride)`` pairs."""
        return tuple(zip(self.block_channels, self.block_strides))

    def validate(self, prefix: str = "model") -> None:
        require(isinstance(self.name, str) and self.name in MODELS, f"{prefix}.name", f"unknown model {self.name!r}; expected one of {MODELS}")
        require(is_int(self.depth) and self.depth in RESNET_DEPTHS, f"{prefix}.depth", f"must be one of {RESNET_DEPTHS}, got {self.depth!r}")
        require(is_int(self.width) and 4 <= self.width <= 256, f"{prefix}.width", f"must be an int in [4, 256], got {self.width!r}")
        require(isinstance(self.hidden, tuple) and all(is_int(h) and 1 <= h <= MAX_HIDDEN for h in self.hidden),
                f"{prefix}.hidden", f"must be a list of ints in [1, {MAX_HIDDEN}], got {self.hidden!r}")
        require(isinstance(self.channels, tuple) and len(self.channels) >= 1
                and all(is_int(c) and 1 <= c <= MAX_HIDDEN for c in self.channels),
                f"{prefix}.channels", f"must be a non-empty list of ints in [1, {MAX_HIDDEN}], got {self.channels!r}")
        require(isinstance(self.strides, tuple) and all(is_int(s) and s in (1, 2) for s in self.strides)
                and len(self.strides) == len(self.channels), f"{prefix}.strides",
                f"must be a list of 1s and 2s, one per entry of {prefix}.channels ({len(self.channels)}), "
                f"got {self.strides!r}")
        require(isinstance(self.block_channels, tuple) and all(is_int(c) and 1 <= c <= MAX_HIDDEN
                                                               for c in self.block_channels),
                f"{prefix}.block_channels", f"must be a list of ints in [1, {MAX_HIDDEN}], got {self.block_channels!r}")
        require(isinstance(self.block_strides, tuple) and all(is_int(s) and s in (1, 2) for s in self.block_strides)
                and len(self.block_strides) == len(self.block_channels), f"{prefix}.block_strides",
                f"must be a list of 1s and 2s, one per entry of {prefix}.block_channels ({len(self.block_channels)}), "
                f"got {self.block_strides!r}")
        require(not self.block_channels or self.name == "convnet", f"{prefix}.block_channels",
                f"are residual blocks of model 'convnet' (model 'resnet' has its own, with batch norm), not of "
                f"{self.name!r}")


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
        require(is_int(self.epochs) and 1 <= self.epochs <= MAX_EPOCHS, f"{prefix}.epochs",
                f"must be an int in [1, {MAX_EPOCHS}], got {self.epochs!r}")
        require(is_int(self.batch_size) and 1 <= self.batch_size <= MAX_BATCH_SIZE, f"{prefix}.batch_size",
                f"must be an int in [1, {MAX_BATCH_SIZE}], got {self.batch_size!r}")
        require(is_number(self.lr) and self.lr > 0, f"{prefix}.lr", f"must be > 0, got {self.lr!r}")
        require(is_number(self.momentum) and 0 <= self.momentum < 1, f"{prefix}.momentum", "must be in [0, 1)")
        require(is_number(self.weight_decay) and self.weight_decay >= 0, f"{prefix}.weight_decay", "must be >= 0")
        require(isinstance(self.schedule, str) and self.schedule in SCHEDULES, f"{prefix}.schedule",
                f"must be one of {SCHEDULES}, got {self.schedule!r}")


@dataclass(frozen=True, kw_only=True)
class TrainConfig:
    """One training run. ``techniques`` maps a technique name to its config (see codesign.train.techniques)."""

    seed: int = 0
    data: DataConfig = field(default_factory=DataConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    optim: OptimConfig = field(default_factory=OptimConfig)
    techniques: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        check_seed(self.seed, "seed")
        for name, expected in (("data", DataConfig), ("model", ModelConfig), ("optim", OptimConfig)):
            table = getattr(self, name)
            require(isinstance(table, expected), name, f"expected a {expected.__name__}, got {type(table).__name__}")
        require(isinstance(self.techniques, dict), "techniques",
                f"must map technique names to their configs, got {_shown(self.techniques)}")
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
        return {"seed": self.seed, "data": plain(self.data), "model": plain(self.model),
                "optim": dataclasses.asdict(self.optim),
                "techniques": {name: dataclasses.asdict(cfg) for name, cfg in self.techniques.items()}}

    def replace(self, **changes) -> TrainConfig:
        return dataclasses.replace(self, **changes)


def plain(value: Any) -> Any:
    """``dataclasses.asdict`` of ``value``, nested dataclasses and containers included, less every field marked
    ``omit_default`` that holds its default: fields added after runs were recorded and cached, which must keep
    the keys and records those runs have."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: plain(getattr(value, f.name)) for f in dataclasses.fields(value)
                if not (f.metadata.get("omit_default") and getattr(value, f.name) == f.default)}
    if isinstance(value, (list, tuple)):
        return type(value)(plain(item) for item in value)
    if isinstance(value, dict):
        return {key: plain(item) for key, item in value.items()}
    return value


def _section(cls, raw: Any, prefix: str, typed: list | None = None):
    """``cls`` built from table ``raw``; its fields' types are checked now, or, given ``typed``, queued there to be
    checked after the whole configuration's own validation (whose messages say more than "must be an int")."""
    require(isinstance(raw, dict), prefix, f"must be a table ([{prefix}] and its fields), got {_shown(raw)}")
    known = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(raw) - known)
    require(not unknown, f"{prefix}.{unknown[0]}" if unknown else prefix, f"unknown field (known: {', '.join(sorted(known))})")
    values = {key: tuple(value) if isinstance(value, list) else value for key, value in raw.items()}
    try:
        section = cls(**values)
    except (TypeError, ValueError) as error:
        if isinstance(error, ConfigError):  # the class's own validation, naming the field
            raise
        check_field_types(cls, raw, prefix)  # a wrong type the class tripped over: name the field
        raise ConfigError(f"{prefix}: {error}") from None
    if typed is None:
        check_field_types(cls, raw, prefix)  # what the class's validation lets through: true for an int, 1 for a string
    else:
        typed.append((cls, raw, prefix))
    return section


def _data_table(data: Any) -> Any:
    """A ``[data]`` table that gives a ``path`` and no ``name`` names a file (``name = "file"``); a fixed split's
    data set refuses a ``test_fraction`` other than the default (which a recorded configuration holds), as it
    would not use it."""
    if not isinstance(data, dict):
        return data
    if "path" in data and "name" not in data:
        data = {**data, "name": "file"}
    fraction = data.get("test_fraction", DataConfig.test_fraction)
    require(data.get("name") not in FIXED_SPLITS or fraction == DataConfig.test_fraction, "data.test_fraction",
            f"{data.get('name')} has a fixed test split (docs/data.md); leave test_fraction out")
    return data


def config_from_dict(raw: dict) -> TrainConfig:
    """Build a :class:`TrainConfig` from plain data (as read from TOML); errors name the field."""
    from codesign.train.techniques import TECHNIQUES, technique_config_class

    require(isinstance(raw, dict), "configuration", f"must be a table of fields, got {_shown(raw)}")
    top = {"seed", "data", "model", "optim", "techniques"}
    unknown = sorted(set(raw) - top)
    require(not unknown, unknown[0] if unknown else "", f"unknown field (known: {', '.join(sorted(top))})")
    check_seed(raw.get("seed", 0), "seed")
    sections = raw.get("techniques", {})
    require(isinstance(sections, dict), "techniques",
            f"must be a table of technique tables, e.g. [techniques.smd] (techniques: {', '.join(TECHNIQUES)}); "
            f"got {_shown(sections)}")
    techniques = {}
    typed: list = []
    for name, section in sections.items():
        try:
            cls = technique_config_class(name)
        except ValueError as error:
            raise ConfigError(f"techniques.{name}: {error}") from None
        techniques[name] = _section(cls, section, f"techniques.{name}", typed)
    raw = {**raw, "data": _data_table(raw.get("data", {}))}
    tables = {name: _section(cls, raw.get(name, {}), name, typed)
              for name, cls in (("data", DataConfig), ("model", ModelConfig), ("optim", OptimConfig))}
    try:
        config = TrainConfig(seed=raw.get("seed", 0), techniques=techniques, **tables)
    except (TypeError, ValueError) as error:
        if isinstance(error, ConfigError):
            raise
        for check in typed:  # a wrong type some validation tripped over: name its field
            check_field_types(*check)
        raise ConfigError(f"configuration: {error}") from None
    for check in typed:  # what the validation lets through: true for an int, 1 for a string
        check_field_types(*check)
    return config


def read_toml(path: Path, *, error: type[ValueError] = ConfigError, what: str = "config file") -> dict:
    """The tables of a TOML file; a missing file, bytes that are not UTF-8 or bad TOML raise ``error`` naming the file."""
    path = Path(path)
    if not path.exists() and not path.is_symlink():
        raise error(f"{what} {path} does not exist")
    check_regular_file(path, what=what, error=error)  # a folder, /dev/null, a FIFO or a link loop, said so
    data = path.read_bytes()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as problem:
        raise error(f"{path}: not UTF-8 text (byte {data[problem.start]:#04x} at offset {problem.start}); "
                    f"a {what} is a UTF-8 TOML file") from None
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as problem:
        raise error(f"{path}: not valid TOML: {problem}") from None


REQUIRED_TABLES = ("model",)  # a configuration file names at least its model; everything else has a default


def require_tables(raw: dict, path: Path, *, error: type[ValueError] = ConfigError, what: str = "config file") -> None:
    """A configuration file that leaves out a :data:`REQUIRED_TABLES` table (an empty file, say) is refused, naming
    the file and the table: it would otherwise train, or send to Yosys, the defaults nobody chose."""
    for name in REQUIRED_TABLES:
        if name not in raw:
            raise error(f"{path}: {name}: missing; a {what} names at least its [{name}] table"
                        + (f' (e.g. [model] name = "mlp"; models: {", ".join(MODELS)})' if name == "model" else ""))


def resolve_data_path(raw: dict, path: Path) -> dict:
    """``raw`` with a relative ``data.path`` made relative to the configuration file's folder (as a build's
    sources are), so the run reads the same file from any working folder."""
    data = raw.get("data")
    if isinstance(data, dict) and isinstance(data.get("path"), str) and data["path"]:
        where = Path(data["path"]).expanduser()
        if not where.is_absolute():
            return {**raw, "data": {**data, "path": str(Path(path).resolve().parent / where)}}
    return raw


def load_config(path: Path) -> TrainConfig:
    raw = resolve_data_path(read_toml(path), path)
    raw.pop("design", None)  # the hardware of a design point (codesign.design), not a training setting
    config = config_from_dict(raw)  # a field's own error first, then what the file leaves out
    require_tables(raw, path)
    return config
