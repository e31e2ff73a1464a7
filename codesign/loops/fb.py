"""Golden training of a design point: an FB-float MLP whose every layer GEMM is the FP-MAC array's.

The training model of :mod:`codesign.train.trainer` emulates ABVS in torch
(float32 sums, rounding after each layer). This loop is instead exactly what
a design point with an ``fpmac_array`` IP computes, so a run on the board,
or on the emulated board, can be compared with it *bit for bit*:

- **State** (weights, biases, SGD momentum) is stored as FB-float
  *container words*: ``1 + exp_bits + max_fb`` bits, a code of the current
  format ``(exp_bits, fb)`` shifted left by ``max_fb - fb``
  (docs/numerics.md, "Run-time fraction width"). Raising the FB keeps every
  stored value.
- **Layer GEMMs** go through a :class:`GemmBackend`: forward
  ``Z = b + X . W`` (the bias is the accumulator's start value), input
  gradient ``dX = dZ . W^T``, weight gradient ``dW = X^T . dZ`` and bias
  gradient ``db = 1^T . dZ``. :class:`GoldenGemm` calls
  :func:`codesign.pe.fpmac_array.golden.gemm`; the board's backend
  (:class:`codesign.deploy.training.IpGemm`) sends the same GEMMs to the IP.
- **Host arithmetic, in a documented precision:** ReLU and its derivative
  are selections on container words (exact). Softmax cross-entropy is
  computed in float64 on the decoded logits; its gradient
  ``(softmax - onehot) / batch`` is rounded once to ``(exp_bits, fb)``. The
  SGD step (weight decay, momentum, learning rate, as in the training
  configuration, cosine or constant schedule over all steps) is three
  :func:`codesign.numerics.fp_mac` per parameter in ``(exp_bits, fb)``:
  ``g = wd*w + dw``, ``v = mu*v + g``, ``w = (-lr)*v + w``, with ``wd``,
  ``mu`` and ``lr`` rounded to the format. Inputs are rounded to the format
  once per batch.
- **FB schedule:** :class:`codesign.loops.fb_rule.FbController` (the
  ABVS rule, driven by validation accuracy after each epoch: the data must
  hold a validation split when the FB can change); FP32 training
  (no ABVS) runs at ``fb = max_fb`` (23) throughout.

Everything is seeded: weights from ``seed``, the sample order of epoch ``e``
from ``(seed, e)``.
"""

from __future__ import annotations

import functools
import math
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from codesign.loops.common import (HwTrainError, LoopSetup, check_fit_data, epoch_batches, ScheduledLoop, progress_bar,
                                   softmax_cross_entropy)
from codesign.loops.fb_rule import FbController
from codesign.numerics import FloatFormat, fp_mac
from codesign.pe.fpmac.container_codec import ContainerCodec
from codesign.pe.fpmac.golden import from_container, to_container
from codesign.pe.fpmac_array.golden import gemm
from codesign.pe.fpmac_array.spec import FpmacArraySpec

# ---------------------------------------------------------------------------- set-up


@dataclass(frozen=True)
class HwTrainSetup(LoopSetup):
    """What the loop needs: the IP's spec, layer widths, optimiser (lr, momentum, weight decay) and FB rule."""

    spec_class = FpmacArraySpec

    spec: FpmacArraySpec
    layers: tuple[int, ...]  # features: input, hidden..., classes
    batch_size: int
    epochs: int
    lr: float
    momentum: float
    weight_decay: float
    schedule: str
    seed: int
    fb_min: int
    fb_max: int
    alpha: float = 2.0
    epsilon: float = 0.005

    def __post_init__(self) -> None:
        self.check_shared()
        fbs = (self.fb_min, self.fb_max)
        if not (all(isinstance(fb, int) and not isinstance(fb, bool) for fb in fbs)
                and 1 <= self.fb_min <= self.fb_max <= self.spec.max_fb):
            raise HwTrainError(f"FB range {self.fb_min!r}..{self.fb_max!r} must be ints within 1..max_fb="
                               f"{self.spec.max_fb}")
        for name in ("alpha", "epsilon"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
                    or value < 0:
                raise HwTrainError(f"{name} must be a finite number >= 0, got {value!r}")


# ---------------------------------------------------------------------------- GEMM backends


class GemmBackend(Protocol):
    """``C = A . B (+ C_in)`` on container words at run-time ``fb``; ``a`` is (M, K), ``b`` (K, N) as computed.

    ``trans_a``/``trans_b`` say the operand is the transpose of a stored
    matrix, so a backend that streams operands may send the stored layout.
    """

    macs: Counter

    def __call__(self, a: np.ndarray, b: np.ndarray, c: np.ndarray | None = None, *, fb: int,
                 trans_a: bool = False, trans_b: bool = False) -> np.ndarray: ...


class GoldenGemm:
    """The golden FP-MAC GEMM (:func:`codesign.pe.fpmac_array.golden.spec_gemm`), counting MACs per FB."""

    def __init__(self, spec: FpmacArraySpec) -> None:
        self.spec = spec
        self.macs: Counter = Counter()
        self.calls, self.seconds = 0, 0.0

    def __call__(self, a, b, c=None, *, fb: int, trans_a: bool = False, trans_b: bool = False) -> np.ndarray:
        started = time.perf_counter()
        out = gemm(a, b, c, fb=fb, exp_bits=self.spec.exp_bits, max_fb=self.spec.max_fb, rounding=self.spec.rounding)
        self.seconds += time.perf_counter() - started
        self.calls += 1
        self.macs[fb] += a.shape[0] * a.shape[1] * b.shape[1]
        return out


# ---------------------------------------------------------------------------- the loop


@functools.lru_cache(maxsize=64)
def _codec(exp_bits: int, fb: int, rounding: str, max_fb: int) -> ContainerCodec:
    """The container codec of one FB (built once: a step encodes and decodes at it several times)."""
    return ContainerCodec(FloatFormat(exp_bits=exp_bits, frac_bits=fb, rounding=rounding), max_fb=max_fb)


class FbMlpTrainer(ScheduledLoop):
    """FB-float MLP training with every layer GEMM on ``gemm`` (golden by default) and the rest on the host."""

    def __init__(self, setup: HwTrainSetup, gemm_backend: GemmBackend | None = None) -> None:
        self.setup = setup
        self.spec = setup.spec
        self.gemm = gemm_backend if gemm_backend is not None else GoldenGemm(setup.spec)
        self.controller = FbController(fb_min=setup.fb_min, fb_max=setup.fb_max, alpha=setup.alpha,
                                       epsilon=setup.epsilon, total_epochs=setup.epochs)
        self.step, self.epoch = 0, 0
        self.history: list[dict[str, Any]] = []
        self.steps_per_epoch: int | None = None
        self._init_weights()

    # -- numbers

    @property
    def fb(self) -> int:
        return self.controller.fb

    @property
    def fmt(self) -> FloatFormat:
        return FloatFormat(exp_bits=self.spec.exp_bits, frac_bits=self.fb, rounding=self.spec.rounding)

    def to_words(self, values) -> np.ndarray:
        """float values -> container words at the current FB (rounded once, the format's rounding)."""
        return _codec(self.spec.exp_bits, self.fb, self.spec.rounding, self.spec.max_fb).words(values)

    def to_values(self, words) -> np.ndarray:
        """container words -> exact float64 values at the current FB."""
        return _codec(self.spec.exp_bits, self.fb, self.spec.rounding, self.spec.max_fb).values(words)

    def _positive(self, words: np.ndarray) -> np.ndarray:
        sign = np.uint64(1) << np.uint64(self.spec.width - 1)
        return ((words & sign) == 0) & (words != 0)

    def _mac(self, a, b, acc) -> np.ndarray:
        """``round(a*b) + acc`` per element in ``(exp_bits, fb)`` on container words (the SGD arithmetic)."""
        codes = [from_container(np.broadcast_to(np.asarray(v, dtype=np.uint64), np.shape(acc)), self.fb,
                                max_fb=self.spec.max_fb) for v in (a, b, acc)]
        return to_container(fp_mac(*codes, self.fmt), self.fb, max_fb=self.spec.max_fb)

    # -- state

    def _init_weights(self) -> None:
        rng = np.random.default_rng(self.setup.seed)
        self.weights: list[np.ndarray] = []
        self.biases: list[np.ndarray] = []
        for fan_in, fan_out in zip(self.setup.layers[:-1], self.setup.layers[1:]):
            bound = 1.0 / math.sqrt(fan_in)
            self.weights.append(self.to_words(rng.uniform(-bound, bound, (fan_in, fan_out))))
            self.biases.append(self.to_words(rng.uniform(-bound, bound, (1, fan_out))))
        self.velocity = [np.zeros_like(p) for p in (*self.weights, *self.biases)]

    def read_weights(self) -> dict[str, Any]:
        """Weights, biases and momentum as container words (uint64 copies), with the FB they are read at."""
        return {"fb": self.fb, "weights": [w.copy() for w in self.weights], "biases": [b.copy() for b in self.biases],
                "velocity": [v.copy() for v in self.velocity]}

    def float_weights(self) -> list[dict[str, Any]]:
        """Each layer's ``weight`` (outputs x inputs, as a float layer holds it) and ``bias`` as float32: the
        container words' exact values at the current FB (what a float model or a torch state_dict takes)."""
        return [{"weight": self.to_values(w).T.astype(np.float32),
                 "bias": self.to_values(b).reshape(-1).astype(np.float32)} for w, b in zip(self.weights, self.biases)]

    def load_weights(self, state: dict[str, Any]) -> None:
        """Replace weights and biases (and momentum, when given) by container words of the same shapes."""
        width = self.spec.width
        for key, mine in (("weights", self.weights), ("biases", self.biases), ("velocity", self.velocity)):
            if key not in state:
                if key == "velocity":
                    continue
                raise HwTrainError(f"load_weights: state lacks {key!r}")
            given = state[key]
            if len(given) != len(mine):
                raise HwTrainError(f"load_weights: {len(given)} {key}, the model has {len(mine)}")
            checked = []
            for index, (new, old) in enumerate(zip(given, mine)):
                new = np.asarray(new)
                if new.shape != old.shape or not np.issubdtype(new.dtype, np.integer):
                    raise HwTrainError(f"load_weights: {key}[{index}] must be integer words of shape {old.shape}, "
                                       f"got {new.dtype} {new.shape}")
                if new.size and (new.min() < 0 or np.any(new.astype(np.uint64) >> np.uint64(width))):
                    raise HwTrainError(f"load_weights: {key}[{index}] has words outside the {width}-bit container")
                checked.append(new.astype(np.uint64))
            mine[:] = checked  # all checked before any is replaced

    # -- forward and backward

    def _forward(self, x_words: np.ndarray) -> tuple[list[np.ndarray], list[np.ndarray]]:
        inputs, pre = [], []
        a = x_words
        for index, (w, b) in enumerate(zip(self.weights, self.biases)):
            inputs.append(a)
            z = self.gemm(a, w, np.broadcast_to(b, (a.shape[0], b.shape[1])), fb=self.fb)
            pre.append(z)
            a = np.where(self._positive(z), z, np.uint64(0)) if index < len(self.weights) - 1 else z
        return inputs, pre

    def logits(self, x) -> np.ndarray:
        """float64 logits of images or feature rows ``x`` (each rounded to the current FB first)."""
        return self.to_values(self._forward(self.to_words(self._features(x)))[1][-1])

    def predict(self, x) -> np.ndarray:
        """Predicted class per sample (the forward GEMMs run on the backend)."""
        return np.argmax(self.logits(x), axis=1)

    def evaluate(self, x, y) -> float:
        """Accuracy in [0, 1]."""
        return float(np.mean(self.predict(x) == np.asarray(y)))

    @staticmethod
    def _features(x) -> np.ndarray:
        x = np.asarray(x.numpy() if hasattr(x, "numpy") else x, dtype=np.float64)
        return x.reshape(x.shape[0], -1)

    def _batch(self, x, y, max_batch: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        """A training batch as finite float64 feature rows and int64 labels of the model's classes, or an error
        naming what is wrong, raised before anything is written (a list trainer's state is on the device)."""
        x = self._features(x)
        y = np.asarray(y.numpy() if hasattr(y, "numpy") else y, dtype=np.int64)
        features, classes, n = self.setup.layers[0], self.setup.layers[-1], x.shape[0]
        if y.shape != (n,) or x.shape[1] != features or n < 1 or (max_batch is not None and n > max_batch):
            bound = "n >= 1" if max_batch is None else f"1 <= n <= {max_batch}"
            raise HwTrainError(f"batch x {x.shape}, y {y.shape}: need (n, {features}) and (n,) with {bound}")
        if y.min() < 0 or y.max() >= classes:
            raise HwTrainError(f"labels y hold {int(y.min())}..{int(y.max())}: need classes in 0..{classes - 1}")
        if not np.isfinite(x).all():
            raise HwTrainError(f"batch x holds {int(x.size - np.isfinite(x).sum())} non-finite values")
        return x, y

    def train_step(self, x, y, *, next_x=None) -> float:
        """One SGD step on a batch; returns the batch's mean cross-entropy (float64). ``next_x``, the batch the next
        call takes, is for the list trainer, which writes it beside its lists."""
        x, y = self._batch(x, y)
        n = x.shape[0]
        inputs, pre = self._forward(self.to_words(x))
        logits = self.to_values(pre[-1])
        loss, dz = softmax_cross_entropy(logits, y)
        dz = self.to_words(dz)
        ones = self.to_words(np.ones((1, n)))
        grads_w, grads_b = [None] * len(self.weights), [None] * len(self.weights)
        for index in reversed(range(len(self.weights))):
            grads_w[index] = self.gemm(inputs[index].T, dz, fb=self.fb, trans_a=True)
            grads_b[index] = self.gemm(ones, dz, fb=self.fb)
            if index:
                dx = self.gemm(dz, self.weights[index].T, fb=self.fb, trans_b=True)
                dz = np.where(self._positive(pre[index - 1]), dx, np.uint64(0))
        self._sgd(grads_w + grads_b)
        self.step += 1
        return loss

    def _sgd(self, grads: Sequence[np.ndarray]) -> None:
        params = self.weights + self.biases
        decay, momentum = self.to_words(self.setup.weight_decay), self.to_words(self.setup.momentum)
        step = self.to_words(-self.learning_rate())
        for index, (param, grad) in enumerate(zip(params, grads)):
            g = self._mac(decay, param, grad)
            self.velocity[index] = self._mac(momentum, self.velocity[index], g)
            params[index] = self._mac(step, self.velocity[index], param)
        count = len(self.weights)
        self.weights, self.biases = params[:count], params[count:]

    # -- epochs

    def fit(self, data, epochs: int | None = None, *, progress: bool = True, max_steps: int | None = None,
            on_epoch: Callable[[dict[str, Any]], None] | None = None) -> list[dict[str, Any]]:
        """Train ``epochs`` epochs (default: the set-up's) on ``data`` (a :class:`~codesign.train.data.Dataset`).

        After each epoch the validation accuracy drives the FB rule (the data
        must have a validation split unless the FB is fixed); one history row
        per epoch (epoch, fb, loss, test accuracy, validation accuracy when
        there is a split, MACs by FB, seconds).
        ``max_steps`` shortens every epoch to that many steps (quick runs;
        the cosine schedule then spans the shortened epochs).
        """
        adaptive = self.setup.fb_min < self.setup.fb_max
        if adaptive and not data.has_validation:
            raise HwTrainError("the ABVS FB rule reads validation accuracy: give data with a validation split "
                               "(validation_fraction > 0), or fix the FB (fb_min = fb_max)")
        check_fit_data(data, features=self.setup.layers[0], classes=self.setup.layers[-1], needs_validation=adaptive)
        train_x, train_y = self._features(data.train_x), np.asarray(data.train_y)
        batch = self.setup.batch_size
        self.steps_per_epoch = -(-train_x.shape[0] // batch)
        if max_steps is not None:
            self.steps_per_epoch = min(self.steps_per_epoch, max_steps)
        for _ in range(self.setup.epochs if epochs is None else epochs):
            started, macs_before = time.perf_counter(), Counter(self.gemm.macs)
            order = self.epoch_order(self.epoch, train_x.shape[0])
            fb = self.fb
            losses = []
            steps = progress_bar(epoch_batches(train_x, order, batch, self.steps_per_epoch), progress,
                                 total=self.steps_per_epoch, desc=f"epoch {self.epoch} (fb {fb})", leave=False)
            for rows, x, following in steps:
                losses.append(self.train_step(x, train_y[rows], next_x=following))
            accuracy = self.evaluate(data.test_x, data.test_y)
            row = {"epoch": self.epoch, "fb": fb, "loss": float(np.mean(losses)), "accuracy": accuracy,
                   "macs": dict(Counter(self.gemm.macs) - macs_before), "seconds": time.perf_counter() - started}
            if data.has_validation:
                row["validation_accuracy"] = self.evaluate(data.validation_x, data.validation_y)
            self.controller.end_epoch(self.epoch, row.get("validation_accuracy", accuracy))
            self.history.append(row)
            self.epoch += 1
            if on_epoch is not None:
                on_epoch(row)
        return self.history

    def throughput(self) -> dict[str, float]:
        """MACs run by the GEMM backend, its busy seconds, and MACs per second."""
        macs = sum(self.gemm.macs.values())
        seconds = getattr(self.gemm, "seconds", 0.0)
        return {"macs": macs, "gemm_calls": getattr(self.gemm, "calls", 0), "seconds": seconds,
                "macs_per_s": macs / seconds if seconds else 0.0}
