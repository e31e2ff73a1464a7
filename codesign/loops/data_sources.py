"""Where a run's samples come from, beyond the desktop's built-in sets: paper 003's npm data sets (from the cache,
:mod:`codesign.loops.npm_data`) and the user's own file (``.npz`` or ``.csv``), checked field by field and split
into an :class:`~codesign.loops.data.ArrayDataset`. NumPy only, so a board could read the same files.

A user's ``.npz`` holds either

* ``x`` (samples first) and ``y`` (integer labels), and optionally ``split`` (one entry per sample: ``"train"``,
  ``"validation"``, ``"test"``, or 0 / 1 / 2), or
* the splits themselves: ``train_x``, ``train_y``, ``test_x``, ``test_y`` and optionally ``validation_x`` and
  ``validation_y`` (what ``codesign bundle`` writes);

and optionally ``classes`` (else the largest label + 1). A ``.csv`` has a header row naming its columns, one
called ``label`` (integer labels) and the others numeric features. Images are ``x`` of shape N x H x W or
N x C x H x W; anything else with two axes is a row of features. ``uint8`` images are grey levels (divided by
255); float features are taken as they are and must be finite. Without a ``split``, the test and validation
splits are cut, stratified, by the configuration's ``test_fraction``, ``validation_fraction`` and ``split_seed``.
"""

from __future__ import annotations

import zipfile
from pathlib import Path
from typing import Dict, Optional, Tuple

import numpy as np

from codesign.loops.data import SPLITS, ArrayDataset, DataFileError, from_levels, split_arrays, stratified_split
from codesign.loops.npm_data import fixed_split, load_npm_dataset

MAX_SAMPLES = 1_000_000  # as a configuration's synthetic_samples
MAX_FEATURES = 1 << 20  # values in one sample
MAX_CLASSES = 4096
MAX_SIDE = 1024  # pad_to's bound
FILE_KINDS = (".npz", ".csv")


def as_images(x: np.ndarray) -> np.ndarray:
    """Samples as float32: ``uint8`` grey levels divided by 255, an N x H x W stack given its channel axis."""
    values = from_levels(x) if x.dtype == np.uint8 else x.astype(np.float32)
    return values[:, None] if values.ndim == 3 else values


def pad_images(x: np.ndarray, pad_to: int, where: str) -> np.ndarray:
    """Images ``x`` (N x C x H x W) zero-padded about their centre to ``pad_to`` x ``pad_to`` (paper 003 pads
    28 x 28 to 32 x 32: a 1024-input layer); ``pad_to`` = 0 leaves them."""
    if not pad_to:
        return x
    if x.ndim != 4:
        raise DataFileError(f"{where}: data.pad_to = {pad_to} pads images, but the samples are rows of "
                            f"{x.shape[1:]} features")
    height, width = x.shape[2:]
    if height > pad_to or width > pad_to:
        raise DataFileError(f"{where}: data.pad_to = {pad_to} is smaller than the {height} x {width} images")
    top, left = (pad_to - height) // 2, (pad_to - width) // 2
    padding = ((0, 0), (0, 0), (top, pad_to - height - top), (left, pad_to - width - left))
    return np.pad(x, padding)


def npm_arrays(name: str, *, split_seed: int, validation_fraction: float, pad_to: int = 0,
               cache: Optional[Path] = None) -> ArrayDataset:
    """Data set ``name`` of :data:`NPM_DATASETS` from the cache, at its fixed test split, with a validation split
    by ``split_seed``; images float32 N x 1 x 28 x 28 (or ``pad_to``) in [0, 1]."""
    levels, labels, _ = load_npm_dataset(name, cache)
    train, test = fixed_split(name, labels)
    images = pad_images(as_images(levels), pad_to, name)
    return split_arrays(images, labels, 10, train, test, validation_fraction, split_seed)


def _read_npz(path: Path) -> Dict[str, np.ndarray]:
    try:
        with np.load(str(path), allow_pickle=False) as stored:
            return {key: stored[key] for key in stored.files}
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as error:
        raise DataFileError(f"{path}: not a readable .npz file ({error})") from None


def _read_csv(path: Path) -> Dict[str, np.ndarray]:
    try:
        with open(path, encoding="utf-8") as stream:
            header = [name.strip() for name in stream.readline().rstrip("\r\n").split(",")]
    except (OSError, UnicodeDecodeError) as error:
        raise DataFileError(f"{path}: not a readable UTF-8 CSV file ({error})") from None
    if header.count("label") != 1 or len(header) < 2:
        raise DataFileError(f"{path}: the header row must name one 'label' column and at least one feature "
                            f"column, got {header[:8]}")
    try:
        table = np.loadtxt(str(path), delimiter=",", skiprows=1, dtype=np.float64, ndmin=2)
    except ValueError as error:
        raise DataFileError(f"{path}: {error}") from None
    if table.shape[1] != len(header):
        raise DataFileError(f"{path}: rows of {table.shape[1]} values under a header of {len(header)} columns")
    column = header.index("label")
    labels = table[:, column]
    if not np.all(np.isfinite(labels)) or np.any(labels != np.rint(labels)):
        raise DataFileError(f"{path}: label: holds values that are not integers")
    return {"x": np.delete(table, column, axis=1), "y": labels.astype(np.int64)}


def read_user_file(path: Path) -> Dict[str, np.ndarray]:
    """The arrays of a user's data file (``.npz`` or ``.csv``), unchecked beyond being readable."""
    path = Path(path)
    if path.suffix.lower() not in FILE_KINDS:
        raise DataFileError(f"{path}: data.path must name a {' or '.join(FILE_KINDS)} file")
    if not path.exists():
        raise DataFileError(f"{path}: no such data file")
    if not path.is_file():
        raise DataFileError(f"{path}: not a regular file (a folder, a device or a pipe)")
    return _read_npz(path) if path.suffix.lower() == ".npz" else _read_csv(path)


def _check_samples(path: Path, name: str, x, y) -> None:
    """``x`` and ``y`` of one split: arrays of numbers, one integer label per sample, finite features."""
    if not isinstance(x, np.ndarray) or x.dtype.kind not in "fiu" or x.ndim not in (2, 3, 4):
        kind = getattr(x, "dtype", type(x))
        raise DataFileError(f"{path}: {name}x: must be numbers, samples first, with 1 to 3 axes per sample "
                            f"(got {kind} of shape {getattr(x, 'shape', None)})")
    if x.dtype.kind in "iu" and x.dtype != np.uint8:
        raise DataFileError(f"{path}: {name}x: integer features other than uint8 grey levels are ambiguous "
                            f"(got {x.dtype}); give floats")
    if x.dtype.kind == "f" and not np.all(np.isfinite(x)):
        raise DataFileError(f"{path}: {name}x: holds values that are not finite")
    if not isinstance(y, np.ndarray) or y.dtype.kind not in "iu":
        raise DataFileError(f"{path}: {name}y: labels must be integers, got {getattr(y, 'dtype', type(y))} "
                            "(cast them, e.g. y.astype(int))")
    if y.shape != x.shape[:1]:
        raise DataFileError(f"{path}: {name}y: one label per sample expected: {y.shape} labels for "
                            f"{x.shape[0]} samples")
    if not 0 < x.shape[0] <= MAX_SAMPLES or int(np.prod(x.shape[1:])) > MAX_FEATURES:
        raise DataFileError(f"{path}: {name}x: {x.shape[0]} samples of {int(np.prod(x.shape[1:]))} values; "
                            f"1 to {MAX_SAMPLES} samples of at most {MAX_FEATURES} values")
    if y.min() < 0:
        raise DataFileError(f"{path}: {name}y: holds the negative label {int(y.min())}")


def _classes(path: Path, arrays: Dict[str, np.ndarray], labels) -> int:
    top = max(int(y.max()) for y in labels) + 1
    if "classes" not in arrays:
        classes = top
    else:
        given = arrays["classes"]
        if given.shape != () or given.dtype.kind not in "iu" or not top <= int(given) <= MAX_CLASSES:
            raise DataFileError(f"{path}: classes: must be one integer in [{top}, {MAX_CLASSES}] (labels reach "
                                f"{top - 1}), got {given!r}")
        classes = int(given)
    if not 2 <= classes <= MAX_CLASSES:
        raise DataFileError(f"{path}: y: {classes} classes; a classifier needs 2 to {MAX_CLASSES}")
    return classes


def _split_of(path: Path, split, count: int) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(train, validation, test) indices from a ``split`` array of names or 0 / 1 / 2."""
    if not isinstance(split, np.ndarray) or split.shape != (count,) or split.dtype.kind not in "iuU":
        raise DataFileError(f"{path}: split: one entry per sample expected ({count}), as names "
                            f"{'/'.join(SPLITS)} or 0/1/2; got {getattr(split, 'dtype', type(split))} "
                            f"of shape {getattr(split, 'shape', None)}")
    codes = split if split.dtype.kind in "iu" else np.array([SPLITS.index(s) if s in SPLITS else -1 for s in split])
    bad = np.flatnonzero((codes < 0) | (codes > 2))
    if bad.size:
        raise DataFileError(f"{path}: split: entry {int(bad[0])} is {split[bad[0]]!r}, not one of "
                            f"{'/'.join(SPLITS)} or 0/1/2")
    return tuple(np.flatnonzero(codes == code) for code in range(3))


def file_arrays(path: Path, *, test_fraction: float, split_seed: int, validation_fraction: float,
                pad_to: int = 0) -> ArrayDataset:
    """The user's data file as an :class:`ArrayDataset` (see the module's docstring for its layouts); every
    refusal names the file and the field."""
    path = Path(path)
    arrays = read_user_file(path)
    if "x" in arrays or "y" in arrays:
        _check_samples(path, "", arrays.get("x"), arrays.get("y"))
        x, y = arrays["x"], arrays["y"].astype(np.int64)
        classes = _classes(path, arrays, [y])
        if "split" in arrays:
            train, validation, test = _split_of(path, arrays["split"], y.size)
            parts = {"train": train, "validation": validation, "test": test}
        else:
            train, test = stratified_split(y, test_fraction, split_seed)
            parts = None
    elif "train_x" in arrays:
        for split in SPLITS:
            if split != "validation" or f"{split}_x" in arrays or f"{split}_y" in arrays:
                _check_samples(path, f"{split}_", arrays.get(f"{split}_x"), arrays.get(f"{split}_y"))
        shapes = {arrays[f"{split}_x"].shape[1:] for split in SPLITS if f"{split}_x" in arrays}
        if len(shapes) != 1:
            raise DataFileError(f"{path}: the splits' samples differ in shape: {sorted(shapes)}")
        named = [split for split in SPLITS if f"{split}_x" in arrays]
        x = np.concatenate([arrays[f"{split}_x"] for split in named])
        y = np.concatenate([arrays[f"{split}_y"] for split in named]).astype(np.int64)
        classes = _classes(path, arrays, [y])
        edges = np.cumsum([0] + [arrays[f"{split}_y"].size for split in named])
        parts = {split: np.arange(edges[k], edges[k + 1]) for k, split in enumerate(named)}
    else:
        raise DataFileError(f"{path}: holds neither x and y nor train_x, train_y, test_x and test_y "
                            f"(found {', '.join(sorted(arrays)) or 'nothing'})")
    x = pad_images(as_images(x), pad_to, str(path))
    if parts is None:
        data = split_arrays(x, y, classes, train, test, validation_fraction, split_seed)
    else:
        data = _given_splits(path, x, y, classes, parts)
    _check_train_classes(path, data)
    return data


def _given_splits(path: Path, x: np.ndarray, y: np.ndarray, classes: int, parts: Dict[str, np.ndarray]
                  ) -> ArrayDataset:
    for split in ("train", "test"):
        if parts.get(split) is None or parts[split].size == 0:
            raise DataFileError(f"{path}: the {split} split is empty")
    held = parts.get("validation")
    extra = {} if held is None or held.size == 0 else {"validation_x": x[held], "validation_y": y[held]}
    return ArrayDataset(train_x=x[parts["train"]], train_y=y[parts["train"]], test_x=x[parts["test"]],
                        test_y=y[parts["test"]], classes=classes, **extra)


def _check_train_classes(path: Path, data: ArrayDataset) -> None:
    """Every class has a training sample: a class the run never sees cannot be learnt, and says the labels are
    wrong (1-based, say) more often than not."""
    counts = np.bincount(data.train_y, minlength=data.classes)
    missing = np.flatnonzero(counts == 0)
    if missing.size:
        shown = ", ".join(str(int(label)) for label in missing[:8])
        raise DataFileError(f"{path}: y: class(es) {shown} of 0..{data.classes - 1} have no training sample "
                            f"({data.train_size} training samples)")


__all__ = ["FILE_KINDS", "as_images", "file_arrays", "npm_arrays", "pad_images", "read_user_file"]
