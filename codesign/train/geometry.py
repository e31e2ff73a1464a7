"""What a model and a design need to know of the data before any of it is loaded: one sample's shape, the classes
and how many samples there are. The layer sizes of an MLP, the TT modes, the PEs' first layer and the memory
estimate all start here. Built-in and npm sets are known by name; a user's file is read once (and kept while it
does not change)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from codesign.loops.npm_data import NPM_DATASETS, SIDE

BUILT_IN_SHAPE = (1, 8, 8)  # the 8 x 8 digits, and the synthetic set made like them
DIGITS_SAMPLES = 1797  # scikit-learn's digits
BUILT_IN_CLASSES = 10


@dataclass(frozen=True, kw_only=True)
class DataGeometry:
    """``sample_shape``: one sample as a model takes it (channels x height x width, or features); ``classes``;
    ``samples``: in all splits."""

    sample_shape: tuple[int, ...]
    classes: int
    samples: int

    @property
    def features(self) -> int:
        """Values in one sample: an MLP's or a TT network's inputs."""
        return math.prod(self.sample_shape)


def data_geometry(data) -> DataGeometry:
    """The :class:`DataGeometry` of a :class:`~codesign.train.config.DataConfig`."""
    if data.name in ("digits", "synthetic"):
        samples = DIGITS_SAMPLES if data.name == "digits" else data.synthetic_samples
        return DataGeometry(sample_shape=BUILT_IN_SHAPE, classes=BUILT_IN_CLASSES, samples=samples)
    if data.name in NPM_DATASETS:
        side = data.pad_to or SIDE
        return DataGeometry(sample_shape=(1, side, side), classes=10, samples=NPM_DATASETS[data.name].images)
    path = Path(data.path)
    stamp = path.stat() if path.is_file() else None
    return _file_geometry(str(path), stamp and (stamp.st_mtime_ns, stamp.st_size), data.pad_to)


def mlp_layers(training) -> tuple[int, ...]:
    """The layer sizes of ``training``'s MLP: the data's features, ``model.hidden``, the data's classes."""
    geometry = data_geometry(training.data)
    return (geometry.features, *training.model.hidden, geometry.classes)


@lru_cache(maxsize=8)
def _file_geometry(path: str, stamp, pad_to: int) -> DataGeometry:
    from codesign.loops.data_sources import file_arrays

    # the split does not change shapes or classes: any valid fractions do
    arrays = file_arrays(Path(path), test_fraction=0.25, split_seed=0, validation_fraction=0.0, pad_to=pad_to)
    samples = arrays.train_size + int(arrays.test_y.size) + (int(arrays.validation_y.size)
                                                             if arrays.has_validation else 0)
    return DataGeometry(sample_shape=tuple(int(n) for n in arrays.train_x.shape[1:]), classes=arrays.classes,
                        samples=samples)


__all__ = ["BUILT_IN_SHAPE", "DIGITS_SAMPLES", "DataGeometry", "data_geometry", "mlp_layers"]
