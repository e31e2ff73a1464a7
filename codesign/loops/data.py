"""A data set as NumPy arrays, saved to and read from one ``.npz`` file: what a board trains on.

The desktop builds its data sets in :mod:`codesign.train.data` (torch tensors,
scikit-learn's digits); a board has neither, so the bundle for a board
(``codesign bundle``) writes the same splits with :func:`save_npz` and the
board reads them with :func:`load_npz`. Arrays keep their dtypes: images
float32 (N, 1, 8, 8) in [0, 1], labels int64.
"""

from __future__ import annotations

import os
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Tuple

import numpy as np

SPLITS = ("train", "validation", "test")
NPZ_FORMAT = 1


class DataFileError(ValueError):
    """A data file is missing, unreadable or not a codesign data set; the message names the file."""


@dataclass(frozen=True)
class ArrayDataset:
    """Train, test and optional validation splits as NumPy arrays (``x`` images or feature rows, ``y`` labels)."""

    train_x: np.ndarray
    train_y: np.ndarray
    test_x: np.ndarray
    test_y: np.ndarray
    classes: int
    validation_x: Optional[np.ndarray] = None
    validation_y: Optional[np.ndarray] = None

    def __post_init__(self) -> None:
        for split in SPLITS:
            x, y = getattr(self, f"{split}_x"), getattr(self, f"{split}_y")
            if split == "validation" and x is None and y is None:
                continue
            if not isinstance(x, np.ndarray) or not isinstance(y, np.ndarray):
                raise DataFileError(f"{split}: x and y must be numpy arrays")
            if y.ndim != 1 or x.shape[:1] != y.shape or not np.issubdtype(y.dtype, np.integer):
                raise DataFileError(f"{split}: x {x.shape} and y {y.shape} {y.dtype} must hold one integer label "
                                    "per sample")
            if y.size and (y.min() < 0 or y.max() >= self.classes):
                raise DataFileError(f"{split}: labels must lie in 0..{self.classes - 1}")
            if np.issubdtype(x.dtype, np.floating) and not np.all(np.isfinite(x)):
                raise DataFileError(f"{split}: x holds values that are not finite")

    @property
    def train_size(self) -> int:
        return int(self.train_y.size)

    @property
    def has_validation(self) -> bool:
        return self.validation_y is not None and int(self.validation_y.size) > 0


def as_arrays(data) -> ArrayDataset:
    """``data`` (any object with the split attributes, torch tensors or arrays) as an :class:`ArrayDataset`."""
    def array(values):
        return None if values is None else np.asarray(values.numpy() if hasattr(values, "numpy") else values)

    return ArrayDataset(**{f"{split}_{axis}": array(getattr(data, f"{split}_{axis}", None))
                           for split in SPLITS for axis in "xy"}, classes=int(data.classes))


def grey_levels(x: np.ndarray) -> Optional[np.ndarray]:
    """``x`` as uint8 grey levels when every float32 value is exactly ``level / 255`` (an image set read from
    bytes, as the npm data sets are), else None: a data file then holds the bytes, and :func:`from_levels` gives
    the same float32 values back."""
    if not isinstance(x, np.ndarray) or x.dtype != np.float32 or x.size == 0:
        return None
    levels = np.rint(x.astype(np.float64) * 255.0)
    if levels.min() < 0 or levels.max() > 255:
        return None
    levels = levels.astype(np.uint8)
    return levels if np.array_equal(from_levels(levels), x) else None


def from_levels(levels: np.ndarray) -> np.ndarray:
    """uint8 grey levels as the float32 samples a loop takes (``level / 255``, as the loaders compute them)."""
    return levels.astype(np.float32) / np.float32(255.0)


def save_npz(data, path: Path) -> Path:
    """Write ``data`` to ``path`` (``.npz``, uncompressed) atomically; returns the path. Images of grey levels are
    stored as bytes (:func:`grey_levels`)."""
    arrays = as_arrays(data)
    path = Path(path)
    payload = {"format": np.array(NPZ_FORMAT), "classes": np.array(arrays.classes)}
    for split in SPLITS:
        if getattr(arrays, f"{split}_y") is not None:
            x = getattr(arrays, f"{split}_x")
            levels = grey_levels(x)
            payload[f"{split}_x"] = x if levels is None else levels  # a quarter of the bytes, read back exactly
            payload[f"{split}_y"] = getattr(arrays, f"{split}_y")
    return savez_atomic(payload, path)


def savez_atomic(arrays: dict, path: Path) -> Path:
    """``arrays`` written to ``path`` (``.npz``, uncompressed) atomically: a reader never sees half a file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, partial = tempfile.mkstemp(dir=str(path.parent), prefix=f".{path.name}.", suffix=".npz")
    os.close(handle)
    try:
        np.savez(partial, **arrays)
        os.replace(partial, str(path))
    finally:
        if os.path.exists(partial):
            os.unlink(partial)
    return path


def load_npz(path: Path) -> ArrayDataset:
    """The data set in ``path``, written by :func:`save_npz`; a clear :class:`DataFileError` naming the file."""
    path = Path(path)
    if path.is_dir():
        raise DataFileError(f"{path}: a folder, not a .npz data file (codesign bundle writes one in its data/)")
    if not path.is_file():
        raise DataFileError(f"{path}: no such data file")
    try:
        stored = np.load(path, allow_pickle=False)
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as error:
        raise DataFileError(f"{path}: not a readable .npz file ({error})") from None
    if not isinstance(stored, np.lib.npyio.NpzFile):  # a .npy holds one array, not a data set's splits
        raise DataFileError(f"{path}: one {getattr(stored, 'shape', '')} array (.npy), not a .npz data set of "
                            "train, test and validation splits (codesign bundle writes one)")
    try:
        with stored:
            contents = {name: stored[name] for name in stored.files}
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as error:
        raise DataFileError(f"{path}: not a readable .npz file ({error})") from None
    if contents.get("format") is None or int(contents["format"]) != NPZ_FORMAT:
        raise DataFileError(f"{path}: not a codesign data set (format {NPZ_FORMAT} expected)")
    missing = [name for name in ("classes", "train_x", "train_y", "test_x", "test_y") if name not in contents]
    if missing:
        raise DataFileError(f"{path}: lacks {', '.join(missing)}")
    for split in SPLITS:  # grey levels stored as bytes: the float32 samples they stand for
        if contents.get(f"{split}_x") is not None and contents[f"{split}_x"].dtype == np.uint8:
            contents[f"{split}_x"] = from_levels(contents[f"{split}_x"])
    try:
        return ArrayDataset(classes=int(contents["classes"]),
                            **{name: contents.get(name) for name in (f"{s}_{a}" for s in SPLITS for a in "xy")})
    except DataFileError as error:
        raise DataFileError(f"{path}: {error}") from None


def stratified_split(labels: np.ndarray, test_fraction: float, seed: int) -> Tuple[np.ndarray, np.ndarray]:
    """Indices of a per-class split: ``round(test_fraction * n_c)`` test samples from each class."""
    rng = np.random.default_rng(seed)
    train, test = [], []
    for label in np.unique(labels):
        members = rng.permutation(np.flatnonzero(labels == label))
        cut = int(round(test_fraction * members.size))
        test.append(members[:cut])
        train.append(members[cut:])
    return np.sort(np.concatenate(train)), np.sort(np.concatenate(test))


def split_arrays(x: np.ndarray, y: np.ndarray, classes: int, train: np.ndarray, test: np.ndarray,
                 validation_fraction: float, seed: int) -> ArrayDataset:
    """The :class:`ArrayDataset` of samples ``x``/``y`` cut at index sets ``train`` and ``test``; with
    ``validation_fraction`` > 0 a stratified validation split (seed ``seed + 1``) is carved from ``train``. The test
    split is cut first, so it does not depend on the validation share."""
    if validation_fraction <= 0:
        return ArrayDataset(train_x=x[train], train_y=y[train], test_x=x[test], test_y=y[test], classes=classes)
    kept, held = stratified_split(y[train], validation_fraction, seed + 1)
    train, validation = train[kept], train[held]
    return ArrayDataset(train_x=x[train], train_y=y[train], test_x=x[test], test_y=y[test], classes=classes,
                        validation_x=x[validation], validation_y=y[validation])
