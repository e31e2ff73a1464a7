"""What the golden training loops share: their error, the loss, and progress bars when available."""

from __future__ import annotations

from dataclasses import fields
from typing import Any, ClassVar, Dict, Mapping, Tuple

import math

import numpy as np


class HwTrainError(ValueError):
    """The configuration cannot be trained by a design-point loop (model, technique, shapes)."""


def progress_bar(iterable, enabled: bool, **kwargs):
    """``iterable`` with a tqdm bar when ``enabled`` and tqdm is installed (a board image may lack it)."""
    if not enabled:
        return iterable
    try:
        from tqdm.auto import tqdm
    except ImportError:
        return iterable
    return tqdm(iterable, **kwargs)


def softmax_cross_entropy(logits: np.ndarray, y: np.ndarray) -> Tuple[float, np.ndarray]:
    """Mean cross-entropy (float64) and its gradient ``(softmax - onehot) / n`` with respect to the logits."""
    n = logits.shape[0]
    shifted = logits - logits.max(axis=1, keepdims=True)
    probs = np.exp(shifted) / np.exp(shifted).sum(axis=1, keepdims=True)
    loss = float(-np.mean(np.log(np.maximum(probs[np.arange(n), y], np.finfo(np.float64).tiny))))
    probs[np.arange(n), y] -= 1.0
    return loss, probs / n


class LoopSetup:
    """What every loop's set-up dataclass shares: a PE spec, layer widths, and the plain data design.json holds.

    A board has no training configuration to derive a set-up from; it
    rebuilds it from design.json's ``loop`` with :meth:`from_dict`.
    """

    spec_class: ClassVar[type]  # the PE spec the loop's IP is built with

    def to_dict(self) -> Dict[str, Any]:
        values = {f.name: getattr(self, f.name) for f in fields(self)}
        values["spec"] = self.spec.to_dict()
        values["layers"] = list(self.layers)
        return values

    @classmethod
    def from_dict(cls, values: Mapping[str, Any]):
        return cls(**{**values, "spec": cls.spec_class(**values["spec"]), "layers": tuple(values["layers"])})


class ScheduledLoop:
    """What every loop's trainer shares: the learning-rate schedule and the seeded sample order.

    Needs ``self.setup`` (``lr``, ``schedule``, ``epochs``, ``seed``),
    ``self.step`` and ``self.steps_per_epoch`` (None before a fit).
    """

    def learning_rate(self) -> float:
        """The set-up's rate at this step: cosine over all steps of ``fit`` (the base rate before a fit)."""
        if self.setup.schedule == "constant" or self.steps_per_epoch is None:
            return self.setup.lr
        total = self.setup.epochs * self.steps_per_epoch
        return 0.5 * self.setup.lr * (1 + math.cos(math.pi * min(self.step, total) / total))

    def epoch_order(self, epoch: int, samples: int) -> np.ndarray:
        """The sample order of epoch ``epoch``, drawn from ``(seed, epoch)``."""
        return np.random.default_rng((self.setup.seed, epoch)).permutation(samples)

