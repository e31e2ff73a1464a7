"""Data that ships with our dependencies: scikit-learn's 8x8 digits, plus a synthetic generator for tests.

Nothing is fetched at run time. The digits split is fixed and stratified,
so every run and every baseline sees the same train and test sets. A
*validation* split (``validation_fraction`` > 0) is carved, stratified, from
the training split; it is held out from training, and every choice a run or a
reproduction makes (learning rates, thresholds, the FB controller, pruning
budgets) reads it. The test split is only ever reported.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from codesign.loops.data import ArrayDataset, split_arrays, stratified_split


@dataclass(frozen=True)
class Dataset:
    """Images as float32 (N, 1, 8, 8) scaled to [0, 1]; labels as int64 (N,)."""

    train_x: torch.Tensor
    train_y: torch.Tensor
    test_x: torch.Tensor
    test_y: torch.Tensor
    classes: int
    validation_x: torch.Tensor | None = None
    validation_y: torch.Tensor | None = None

    @property
    def train_size(self) -> int:
        return int(self.train_y.numel())

    @property
    def has_validation(self) -> bool:
        return self.validation_y is not None and int(self.validation_y.numel()) > 0


def torch_dataset(arrays: ArrayDataset) -> Dataset:
    """``arrays`` as torch tensors: images float32, labels int64."""
    def tensor(values: np.ndarray | None, dtype) -> torch.Tensor | None:
        return None if values is None else torch.from_numpy(np.ascontiguousarray(values.astype(dtype)))

    return Dataset(tensor(arrays.train_x, np.float32), tensor(arrays.train_y, np.int64),
                   tensor(arrays.test_x, np.float32), tensor(arrays.test_y, np.int64), arrays.classes,
                   tensor(arrays.validation_x, np.float32), tensor(arrays.validation_y, np.int64))


def _as_dataset(images: np.ndarray, labels: np.ndarray, test_fraction: float, seed: int, classes: int,
                validation_fraction: float = 0.0) -> Dataset:
    """Test split first (so it does not depend on ``validation_fraction``), then validation out of the rest."""
    train, test = stratified_split(labels, test_fraction, seed)
    return torch_dataset(split_arrays(images.astype(np.float32), labels.astype(np.int64), classes, train, test,
                                      validation_fraction, seed))


def load_digits_dataset(*, test_fraction: float = 0.25, split_seed: int = 0, validation_fraction: float = 0.0) -> Dataset:
    """The 1797 digits of scikit-learn (8x8, 16 grey levels), split once and for all by ``split_seed``."""
    from sklearn.datasets import load_digits

    digits = load_digits()
    images = (digits.images / 16.0).reshape(-1, 1, 8, 8)
    return _as_dataset(images, digits.target, test_fraction, split_seed, 10, validation_fraction)


def synthetic_dataset(*, samples: int = 600, classes: int = 10, noise: float = 0.35, seed: int = 0,
                      test_fraction: float = 0.25, validation_fraction: float = 0.0) -> Dataset:
    """Class prototypes (random 8x8 patterns) plus Gaussian noise: learnable, tiny and fully seeded."""
    rng = np.random.default_rng(seed)
    prototypes = rng.random((classes, 1, 8, 8))
    labels = np.arange(samples) % classes
    images = np.clip(prototypes[labels] + noise * rng.standard_normal((samples, 1, 8, 8)), 0, 1)
    return _as_dataset(images, labels, test_fraction, seed, classes, validation_fraction)
