"""Golden compressed training of a design point: a pruned MLP whose every layer product is a CSB PE operation.

The torch technique :mod:`codesign.train.techniques.compress` emulates
compressed training with float tensors. This loop is instead exactly what a
design point with a ``csb`` IP computes (docs/csb.md), so a run through the
PYNQ driver -- on a board or on the emulated board -- can be compared with it
*bit for bit*. It follows the technique's three phases:

1. **FP32 warm-up** (``warmup_epochs``), on the host in float64 NumPy:
   bias-free MLP, ReLU, softmax cross-entropy, plain SGD. During the last
   warm-up epoch it measures max|.| of every layer's input activations,
   weights and output errors (training steps only).
2. **Pruning and scales** at the end of the warm-up. Every layer is an FC
   layer on the PE, so a *kernel* is one weight (a 1x1 kernel, L2 norm =
   |w|); the torch technique leaves FC layers dense, here all are pruned.
   The search is the technique's: layer by layer (``largest_first`` or
   ``network`` order), masks of ``step_percent``, ``2 step_percent``, ...
   of the smallest weights (ties to the lower flat index ``out * in + in``),
   keeping the largest share whose accuracy drop on the validation slice
   stays within the cumulative ``drop_budget`` points. Validation slice:
   ``data.validation_x`` when the data set has one, else a stratified
   ``validation_fraction`` of the training set (seed ``split_seed``), which
   stays in the training set. Scales are frozen as power-of-two fraction bits
   (:func:`codesign.train.precision.power_of_two_frac_bits`, 8-bit codes):
   ``fa`` (activations), ``fw`` (weights), ``fe`` (errors) per layer.
3. **Fixed-point training on the PE** for the remaining epochs.

State of phase 3, per layer: the kernel mask (fixed after pruning: it *is*
the CSB structure, ``block_rows x block_cols`` blocks of the PE) and one
signed 24-bit weight-buffer word per stored entry, with ``fw + 16`` fraction
bits. The PE sees the buffer's top 8 bits (arithmetic shift right by 16:
truncation, the wired MSBs) as the CSB matrix's values.

One step, every product through a :class:`CsbBackend` (:class:`GoldenCsb`
calls :mod:`codesign.pe.csb.golden`; :class:`codesign.deploy.csb_training.IpCsb`
sends the same block operations to the IP):

- inputs -> 8-bit codes at ``fa_0`` (round to nearest, ties to even,
  saturate; every float -> code rounding below is this one);
- **FP** per layer: 32-bit saturating accumulators ``z`` at ``fw + fa``
  fraction bits; hidden layers: ReLU (a selection), then the host shifts
  to the next layer's ``fa`` (``rne`` right shift or left shift, saturated
  to 8 bits: :func:`rescale`);
- loss: float64 softmax cross-entropy of the logits ``z * 2^-(fw + fa)``
  (exact); its gradient ``(softmax - onehot) / batch`` rounded once to
  8-bit codes at the last layer's ``fe``;
- **WG** per layer: the gradient of every stored entry, 32-bit saturating,
  at ``fa + fe`` fraction bits (result-sparse: pruned weights get none);
- **EB** for every layer but the first: ``W^T dz`` at ``fw + fe``, masked by
  the ReLU derivative (pre-activation > 0), shifted to the previous layer's
  ``fe`` and saturated to 8 bits;
- **UPD** per layer after all products of the step: plain SGD
  ``B' = sat24(rne(B - lr * G))`` on the buffer grid. The learning rate is
  the configuration's (cosine or constant over every step of :meth:`fit`,
  the warm-up included) rounded to a power of two ``2^-m`` (``m =
  round(-log2 lr)``, ties to even), since the PE only shifts. UPD's shift is
  ``s = fa + fe + m - (fw + 16)``; where ``s < 0`` the host shifts the
  gradient words left by ``-s`` first (exact, saturated to 32 bits) and UPD
  runs with ``s = 0``; ``m`` is capped so that ``s <= 31``.

Differences from the torch technique, by design of the PE: no biases (the
PE's FC layer is ``y = W x``), no momentum and no weight decay (UPD is plain
SGD; the set-up refuses a configuration asking for them), weight gradients
keep the WG accumulator's precision instead of being rounded to 8 bits
(UPD takes 32-bit gradient words), and the warm-up runs in float64.

Everything is seeded: weights from ``seed``, the sample order of epoch
``e`` from ``(seed, e)``.
"""

from __future__ import annotations

import math
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from codesign.loops.csb_backend import CsbBackend, GoldenCsb
from codesign.loops.common import (HwTrainError, LoopSetup, check_fit_data, epoch_batches, ScheduledLoop, progress_bar,
                                   softmax_cross_entropy)
from codesign.loops.data import stratified_split
from codesign.loops.loss_codes import check_loss_fractions, gradient_codes, loss_of
from codesign.loops.pruning import ORDERS, search_masks
from codesign.numerics.fixed_quant import to_values
from codesign.numerics.scales import power_of_two_frac_bits
from codesign.pe.csb import golden
from codesign.pe.csb.format import CSBMatrix, encode
from codesign.contracts.constants import WORD_BITS
from codesign.pe.csb.spec import BUFFER_BITS, DATA_BITS, CsbSpec

BUFFER_EXTRA_BITS = BUFFER_BITS - DATA_BITS  # the buffer's fraction bits below the 8-bit compute part (16)
PHASES = ("warmup", "fixed")
SCALE_BLOBS = ("activation", "weight", "error")


# ---------------------------------------------------------------------------- fixed-point helpers


def quantize(values, frac_bits: int, bits: int = DATA_BITS) -> np.ndarray:
    """Finite float64 values -> signed ``bits``-bit codes at ``frac_bits`` fraction bits: rne once, then saturate
    (int64). The same as :func:`golden.round_into_buffer` on the exact value, in a few float passes over one copy (a
    step's host rounds every batch this way): scaling by a power of two is exact but where it overflows to +-inf,
    which saturates as the exact value would, or underflows, which only touches magnitudes far below one half
    (they round to 0 anyway); ``rint`` rounds ties to even. A product by the power (where it is a normal float64)
    is ldexp's value in a fifth of the time."""
    scaled = np.array(values, dtype=np.float64)
    with np.errstate(over="ignore"):  # +-inf, which saturates
        if abs(frac_bits) <= 1000:
            scaled *= 2.0 ** frac_bits
        else:
            scaled = np.ldexp(scaled, frac_bits)
    return _round_scaled(scaled, bits)


def _round_scaled(scaled: np.ndarray, bits: int) -> np.ndarray:
    """Scaled float64 values (overwritten) to ``bits``-bit codes: to nearest, ties to even, saturated."""
    top = float(1 << (bits - 1))
    np.rint(scaled, out=scaled)
    np.minimum(scaled, top - 1, out=scaled)  # clipped as np.clip does, in half its time
    np.maximum(scaled, -top, out=scaled)
    return scaled.astype(np.int64)


def rescale(codes, from_frac: int, to_frac: int, bits: int = DATA_BITS) -> np.ndarray:
    """Integer codes at ``from_frac`` fraction bits -> ``bits``-bit codes at ``to_frac``: a power-of-two shift.

    A right shift rounds to nearest, ties to even; a left shift is exact;
    both saturate to the signed ``bits``-bit range.
    """
    codes = np.asarray(codes, dtype=np.int64)
    shift = int(from_frac) - int(to_frac)
    if shift >= 0:
        return golden.round_into_buffer(codes, shift, buffer_bits=bits)
    left = -shift
    # codes beyond +-2^(bits - left) saturate after the shift anyway; clipping first keeps it inside int64
    limit = 1 << max(bits - left, 0)
    return golden.saturate(np.clip(codes, -limit, limit) << min(left, bits), bits)


def learning_rate_exponent(rate: float) -> int:
    """``m`` with ``2^-m`` the power of two nearest ``rate`` in log scale (ties to even)."""
    if not math.isfinite(rate) or rate <= 0:
        raise HwTrainError(f"learning rate {rate!r} must be positive and finite")
    return round(-math.log2(rate))  # Python's round: ties to even, as np.round, in a tenth of its time


# ---------------------------------------------------------------------------- set-up


@dataclass(frozen=True)
class CsbTrainSetup(LoopSetup):
    """What the loop needs: the CSB PE's spec, layer widths, SGD (lr, schedule), warm-up and pruning search."""

    spec_class = CsbSpec

    spec: CsbSpec
    layers: tuple[int, ...]  # features: input, hidden..., classes
    batch_size: int
    epochs: int
    warmup_epochs: int
    lr: float
    schedule: str
    seed: int
    drop_budget: float = 2.0  # accuracy points
    step_percent: int = 10
    max_percent: int = 90
    order: str = "largest_first"
    validation_fraction: float = 0.2
    split_seed: int = 0

    def __post_init__(self) -> None:
        if not isinstance(self.spec, CsbSpec):
            raise HwTrainError(f"spec must be a CsbSpec, got {type(self.spec).__name__}")
        if (self.spec.kernel, self.spec.out_h, self.spec.out_w) != (1, 1, 1):
            raise HwTrainError(f"the MLP loop needs an FC CSB PE (kernel 1, 1 x 1 tile), got kernel "
                               f"{self.spec.kernel}, tile {self.spec.out_h} x {self.spec.out_w}")
        self.check_shared()
        if not isinstance(self.warmup_epochs, int) or isinstance(self.warmup_epochs, bool) or self.warmup_epochs < 1:
            raise HwTrainError(f"warmup_epochs must be an int >= 1, got {self.warmup_epochs!r}")
        if self.warmup_epochs >= self.epochs:
            raise HwTrainError(f"warmup_epochs={self.warmup_epochs} must be below epochs={self.epochs}, so that "
                               "fixed-point epochs on the PE remain")
        if self.order not in ORDERS:
            raise HwTrainError(f"order {self.order!r} must be one of {ORDERS}")
        if not (1 <= self.step_percent <= 100 and 0 <= self.max_percent <= 100 and self.drop_budget >= 0):
            raise HwTrainError(f"pruning search: step_percent {self.step_percent} in 1..100, max_percent "
                               f"{self.max_percent} in 0..100, drop_budget {self.drop_budget} >= 0")
        if not 0 < self.validation_fraction < 1:
            raise HwTrainError(f"validation_fraction {self.validation_fraction} must lie in (0, 1)")


# ---------------------------------------------------------------------------- the loop


def _as_numpy(values, dtype) -> np.ndarray:
    return np.asarray(values.numpy() if hasattr(values, "numpy") else values, dtype=dtype)


class CompressedLoop(ScheduledLoop):
    """What the golden compressed loops share (:class:`CsbMlpTrainer`, :class:`codesign.loops.csb_conv.CsbConvTrainer`):
    the validation slice, the step's dispatch between the float warm-up and the fixed-point phase, the epochs of
    :meth:`fit` with the pruning at the warm-up's end, and the summaries. A loop gives ``features`` and ``classes``
    (what a sample holds and the network's outputs), ``_batch``, ``_float_step``, ``_fixed_step``, ``compress``,
    ``logits`` and its state (``phase``, ``masks``, ``backend``, the MAC counters)."""

    def compress(self, data) -> None:
        """End of the warm-up: freeze the scales, prune the kernels of ``_kernel_norms``' layers by the search (the
        later layers keep every kernel), round the weights into 24-bit buffers."""
        if self.phase != "warmup":
            raise HwTrainError("compress: the loop is already in its fixed-point phase")
        frac_bits = [{blob: power_of_two_frac_bits(self.max_abs[layer].get(blob, 0.0), DATA_BITS)
                      for blob in SCALE_BLOBS} for layer in range(len(self.weights))]
        frac_bits = self._aligned(frac_bits)
        val_x, val_y = self._validation(data)
        norms = self._kernel_norms()

        def correct(masks) -> int:
            logits = self._float_forward(val_x, self._masked(masks))[1][-1].reshape(val_y.size, -1)
            return int(np.sum(np.argmax(logits, axis=1) == val_y))

        host_before = self.host_macs
        setup = self.setup
        masks = search_masks(norms, correct, reference=correct([np.ones(n.shape, bool) for n in norms]),
                             samples=val_y.size, order=setup.order, step_percent=setup.step_percent,
                             max_percent=setup.max_percent, drop_budget=setup.drop_budget, log=self.search_log)
        masks += [np.ones(w.shape[:2], bool) for w in self.weights[len(norms):]]
        self.search_macs, self.host_macs = self.host_macs - host_before, host_before
        buffers = [np.where(m.reshape(m.shape + (1,) * (w.ndim - 2)), quantize(w, f["weight"] + BUFFER_EXTRA_BITS,
                                                                             BUFFER_BITS), 0)
                   for w, m, f in zip(self.weights, masks, frac_bits)]
        self._set_fixed(masks, buffers, frac_bits)

    def _aligned(self, frac_bits: list[dict[str, int]]) -> list[dict[str, int]]:
        """The measured scales as the loop's fixed-point step needs them (a residual network lowers some so that
        its shortcuts add in place; :mod:`codesign.step.csb.conv_net`)."""
        return frac_bits

    def _set_fixed(self, masks: list[np.ndarray], dense_buffers: list[np.ndarray],
                   frac_bits: list[dict[str, int]]) -> None:
        """The switch to fixed point: the kept structure (``self._kernels`` of each mask, encoded in the PE's
        blocks) and each stored entry's buffer words from ``dense_buffers``."""
        structures = [encode(self._kernels(layer, mask), block_rows=self.spec.block_rows,
                             block_cols=self.spec.block_cols) for layer, mask in enumerate(masks)]
        buffers = []
        for structure, dense in zip(structures, dense_buffers):
            rows, cols = structure.entry_coordinates()
            buffers.append(np.asarray(dense, dtype=np.int64)[rows, cols])
        last = frac_bits[-1]
        check_loss_fractions(self.setup.batch_size, self.classes, logit_frac=last["weight"] + last["activation"],
                             error_frac=last["error"])
        self.masks = [np.array(mask, dtype=bool) for mask in masks]
        self._structure, self.buffers = structures, buffers
        self.frac_bits = [dict(entry) for entry in frac_bits]
        self.phase = "fixed"

    def dense_buffers(self) -> list[np.ndarray]:
        """Per layer the int32 buffer words in the weight's shape (``self.shapes``), 0 at pruned weights."""
        out = []
        for shape, structure, words in zip(self.shapes, self._structure, self.buffers):
            dense = np.zeros(shape, dtype=np.int32)
            rows, cols = structure.entry_coordinates()
            dense[rows, cols] = words
            out.append(dense)
        return out

    def read_weights(self) -> dict[str, Any]:
        """The state as copies: fixed phase: 24-bit buffer words (dense, int32), masks and fraction bits;
        warm-up: float64 weights."""
        if self.phase == "warmup":
            return {"phase": "warmup", "weights": [w.copy() for w in self.weights]}
        return {"phase": "fixed", "buffers": self.dense_buffers(), "masks": [m.copy() for m in self.masks],
                "frac_bits": [dict(entry) for entry in self.frac_bits]}

    def _record(self, layer: int, blob: str, values: np.ndarray) -> None:
        entry = self.max_abs[layer]
        entry[blob] = max(entry.get(blob, 0.0), float(np.abs(values).max()) if values.size else 0.0)

    def _logits(self, z: np.ndarray) -> np.ndarray:
        last = self.frac_bits[-1]
        return to_values(z, last["weight"] + last["activation"])

    def _loss_and_codes(self, z: np.ndarray, y) -> tuple[float, np.ndarray]:
        """The step's loss and its gradient's codes (:mod:`codesign.loops.loss_codes`) from the logits'
        accumulators ``z`` (``(n, classes)``)."""
        last = self.frac_bits[-1]
        logit_frac = last["weight"] + last["activation"]
        return (loss_of(z, y, logit_frac=logit_frac),
                gradient_codes(z, y, logit_frac=logit_frac, error_frac=last["error"]))

    def _update(self, index: int, grads: np.ndarray, exponent: int) -> tuple[int, np.ndarray]:
        """SGD into layer ``index``'s buffer with rate 2^-exponent (capped so that UPD's shift <= 31).

        Returns the exponent used and the new buffer words; the trainer's state is not touched.
        """
        fb = self.frac_bits[index]
        grad_frac, buffer_frac = fb["activation"] + fb["error"], fb["weight"] + BUFFER_EXTRA_BITS
        exponent = min(exponent, golden.MAX_SHIFT + buffer_frac - grad_frac)
        shift = grad_frac + exponent - buffer_frac
        if shift < 0:
            grads = rescale(grads, 0, -shift, WORD_BITS)  # exact left shift by -shift, saturated to 32 bits
            shift = 0
        return exponent, self.backend.update(self.matrix(index), self.buffers[index], grads, shift)

    # -- the public loop

    def _update_all(self, grads: list) -> None:
        """UPD of every layer at this step's rate. Every layer's UPD answers before any state changes, so a
        backend that fails part-way (an IP that times out) leaves the step undone rather than some layers
        updated."""
        exponent = learning_rate_exponent(self.learning_rate())
        updates = [self._update(index, grad_words, exponent) for index, grad_words in enumerate(grads)]
        self.lr_exponents.extend(used for used, _ in updates)
        self.buffers = [np.asarray(words, dtype=np.int64) for _, words in updates]

    def logits(self, x) -> np.ndarray:
        """float64 logits of samples ``x`` (fixed phase: FP on the backend, exact logits)."""
        x, _ = self._batch(x)
        if self.phase == "warmup":
            return self._float_forward(x)[1][-1].reshape(x.shape[0], -1)
        return self._logits(self._fixed_forward(x)[1][-1].reshape(x.shape[0], -1))

    def _validation(self, data) -> tuple[np.ndarray, np.ndarray]:
        if getattr(data, "has_validation", False):
            return self._batch(data.validation_x, data.validation_y)
        labels = _as_numpy(data.train_y, np.int64)
        _, held = stratified_split(labels, self.setup.validation_fraction, self.setup.split_seed)
        return self._batch(_as_numpy(data.train_x, np.float64)[held], labels[held])

    def train_step(self, x, y, *, next_x=None) -> float:
        """One SGD step on a batch (float64 on the host in the warm-up, on the backend after); returns the loss.
        ``next_x``, the batch the next call takes, is for list trainers, which write it beside their lists."""
        x, y = self._batch(x, y)
        if self.phase == "warmup":
            loss = self._float_step(x, y)
        else:
            loss = self._fixed_step(x, y)
            self.fixed_steps += 1
        self.step += 1
        return loss

    def predict(self, x) -> np.ndarray:
        """Predicted class per sample."""
        return np.argmax(self.logits(x), axis=1)

    def evaluate(self, x, y) -> float:
        """Accuracy in [0, 1]."""
        return float(np.mean(self.predict(x) == _as_numpy(y, np.int64)))

    def fit(self, data, epochs: int | None = None, *, progress: bool = True, max_steps: int | None = None,
            on_epoch: Callable[[dict[str, Any]], None] | None = None) -> list[dict[str, Any]]:
        """Train ``epochs`` epochs (default: the set-up's) on ``data`` (a :class:`~codesign.train.data.Dataset`).

        The warm-up's last epoch ends with :meth:`compress`. One history row
        per epoch: epoch, phase, loss, test accuracy, MACs (the warm-up's
        float MACs as ``host``, the pruning search's as ``search``, the
        backend's by op), seconds. ``max_steps``
        shortens every epoch to that many steps (the cosine schedule then
        spans the shortened epochs). Every step takes a full batch; the
        samples of an epoch that do not fill one are left out (so a short
        batch never skews the measured error scale).
        """
        check_fit_data(data, features=self.features, classes=self.classes)
        train_x, train_y = self._batch(data.train_x, data.train_y)
        batch = self.setup.batch_size
        self.steps_per_epoch = train_x.shape[0] // batch  # full batches only: the last partial one is dropped
        if self.steps_per_epoch < 1:
            raise HwTrainError(f"{train_x.shape[0]} training samples do not fill one batch of {batch}")
        if max_steps is not None:
            self.steps_per_epoch = min(self.steps_per_epoch, max_steps)
        for _ in range(self.setup.epochs if epochs is None else epochs):
            started, phase = time.perf_counter(), self.phase
            macs_before, host_before = Counter(self.backend.macs), self.host_macs
            order = self.epoch_order(self.epoch, train_x.shape[0])
            losses = []
            for rows, x, following in progress_bar(epoch_batches(train_x, order, batch, self.steps_per_epoch),
                                                   progress, total=self.steps_per_epoch,
                                                   desc=f"epoch {self.epoch} ({phase})", leave=False):
                losses.append(self.train_step(x, train_y[rows], next_x=following))
            accuracy = self.evaluate(data.test_x, data.test_y)
            macs = dict(Counter(self.backend.macs) - macs_before)
            if self.host_macs > host_before:
                macs["host"] = self.host_macs - host_before
            if phase == "warmup" and self.epoch == self.setup.warmup_epochs - 1:
                self.compress(data)
                macs["search"] = self.search_macs
            row = {"epoch": self.epoch, "phase": phase, "loss": float(np.mean(losses)), "accuracy": accuracy,
                   "macs": macs, "seconds": time.perf_counter() - started}
            self.history.append(row)
            self.epoch += 1
            if on_epoch is not None:
                on_epoch(row)
        return self.history

    def pruning_summary(self) -> dict[str, Any]:
        """Weights kept per layer after the search (fixed phase only)."""
        kept = [int(mask.sum()) for mask in self.masks]
        total = [mask.size for mask in self.masks]
        return {"kept": kept, "weights": total, "fraction_pruned": 1 - sum(kept) / max(1, sum(total))}

    def throughput(self) -> dict[str, float]:
        """Fixed-point steps, the backend's MACs, calls, busy seconds, and MACs and steps per second."""
        macs = sum(self.backend.macs.values())
        seconds = getattr(self.backend, "seconds", 0.0)
        return {"fixed_steps": self.fixed_steps, "macs": macs, "calls": getattr(self.backend, "calls", 0),
                "seconds": seconds, "macs_per_s": macs / seconds if seconds else 0.0}


class CsbMlpTrainer(CompressedLoop):
    """Compressed MLP training: float64 warm-up on the host, then every layer product on ``backend`` (golden default)."""

    def __init__(self, setup: CsbTrainSetup, backend: CsbBackend | None = None) -> None:
        self.setup = setup
        self.spec = setup.spec
        self.backend = backend if backend is not None else GoldenCsb(setup.spec)
        self.phase = "warmup"
        self.step, self.epoch, self.fixed_steps = 0, 0, 0
        self.history: list[dict[str, Any]] = []
        self.steps_per_epoch: int | None = None
        self.max_abs: list[dict[str, float]] = [{} for _ in self.shapes]
        self.frac_bits: list[dict[str, int]] = []
        self.masks: list[np.ndarray] = []
        self.buffers: list[np.ndarray] = []  # per layer: 24-bit words of the stored entries, stored order
        self._structure: list[CSBMatrix] = []  # per layer: the CSB layout of the mask (values unused)
        self.search_log: list[dict[str, Any]] = []
        self.host_macs = 0  # float MACs of the warm-up's training steps and evaluations
        self.search_macs = 0  # float MACs of the pruning search's forward passes
        self.lr_exponents: list[int] = []  # per fixed step and layer: the m of 2^-m
        rng = np.random.default_rng(setup.seed)
        self.weights = [rng.uniform(-1.0 / math.sqrt(cols), 1.0 / math.sqrt(cols), (rows, cols))
                        for rows, cols in self.shapes]

    @property
    def shapes(self) -> list[tuple[int, int]]:
        """``(rows, cols)`` = (outputs, inputs) of every layer's weight matrix."""
        layers = self.setup.layers
        return list(zip(layers[1:], layers[:-1]))

    @property
    def features(self) -> int:
        return self.setup.layers[0]

    @property
    def classes(self) -> int:
        return self.setup.layers[-1]

    # -- fixed-point state

    def matrix(self, layer: int) -> CSBMatrix:
        """Layer ``layer``'s CSB matrix as the PE reads it: the top 8 bits of every buffer word."""
        s = self._structure[layer]
        values = (self.buffers[layer] >> BUFFER_EXTRA_BITS).astype(np.int8).reshape(-1, 1, 1)
        return CSBMatrix(shape=s.shape, kernel=1, block_rows=s.block_rows, block_cols=s.block_cols,
                         block_ptr=s.block_ptr, index=s.index, values=values)

    def _kernels(self, layer: int, mask: np.ndarray) -> np.ndarray:
        """The kept kernels of ``layer`` as :func:`encode` takes them: an FC layer's weights are 1 x 1 kernels."""
        return mask.astype(np.int8)

    def float_weights(self) -> list[dict[str, Any]]:
        """Each layer's ``weight`` (outputs x inputs) as float32, zero where pruned: the 24-bit buffer words at
        their scale (the weight's fraction bits plus the buffer's 16 below the 8-bit codes), or the warm-up's float
        weights; ``bias`` None (the CSB MLP has none)."""
        if self.phase == "warmup":
            return [{"weight": w.astype(np.float32), "bias": None} for w in self.weights]
        return [{"weight": (dense * np.ldexp(1.0, -(fracs["weight"] + BUFFER_EXTRA_BITS))).astype(np.float32),
                 "bias": None} for dense, fracs in zip(self.dense_buffers(), self.frac_bits)]

    def load_weights(self, state: dict[str, Any]) -> None:
        """Replace the state by one of :meth:`read_weights`' shape; everything is checked before anything changes."""
        phase = state.get("phase")
        if phase not in PHASES:
            raise HwTrainError(f"load_weights: phase must be one of {PHASES}, got {phase!r}")
        keys = ("weights",) if phase == "warmup" else ("buffers", "masks", "frac_bits")
        for key in keys:
            if key not in state or len(state[key]) != len(self.shapes):
                raise HwTrainError(f"load_weights: state needs {key!r} with one entry per layer ({len(self.shapes)})")
        if phase == "warmup":
            weights = []
            for index, (shape, given) in enumerate(zip(self.shapes, state["weights"])):
                given = np.asarray(given, dtype=np.float64)
                if given.shape != shape or not np.all(np.isfinite(given)):
                    raise HwTrainError(f"load_weights: weights[{index}] must be finite floats of shape {shape}")
                weights.append(given.copy())
            self.weights, self.phase = weights, "warmup"
            return
        low, high = -(1 << (BUFFER_BITS - 1)), (1 << (BUFFER_BITS - 1)) - 1
        for index, (shape, words, mask, fracs) in enumerate(zip(self.shapes, state["buffers"], state["masks"],
                                                                 state["frac_bits"])):
            words, mask = np.asarray(words), np.asarray(mask)
            if words.shape != shape or words.dtype.kind not in "iu":
                raise HwTrainError(f"load_weights: buffers[{index}] must be integer words of shape {shape}, "
                                   f"got {words.dtype} {words.shape}")
            if mask.shape != shape or mask.dtype != bool:
                raise HwTrainError(f"load_weights: masks[{index}] must be bool of shape {shape}")
            if words.size and (words.min() < low or words.max() > high):
                raise HwTrainError(f"load_weights: buffers[{index}] holds words outside the signed "
                                   f"{BUFFER_BITS}-bit range")
            if np.any(words[~mask] != 0):
                raise HwTrainError(f"load_weights: buffers[{index}] is non-zero at pruned weights")
            if not isinstance(fracs, dict) or set(fracs) != set(SCALE_BLOBS) \
                    or not all(isinstance(v, int) and not isinstance(v, bool) for v in fracs.values()):
                raise HwTrainError(f"load_weights: frac_bits[{index}] must map {SCALE_BLOBS} to ints")
        self._set_fixed(state["masks"], state["buffers"], state["frac_bits"])

    # -- inputs

    def _batch(self, x, y=None) -> tuple[np.ndarray, np.ndarray | None]:
        x = _as_numpy(x, np.float64)
        x = x.reshape(x.shape[0], -1) if x.ndim else x
        if x.ndim != 2 or x.shape[1] != self.setup.layers[0] or x.shape[0] < 1:
            raise HwTrainError(f"batch x has shape {x.shape}: need (n, {self.setup.layers[0]}) features "
                               f"(or n images of {self.setup.layers[0]} pixels)")
        if not np.isfinite(x).all():
            raise HwTrainError(f"batch x holds {int(np.size(x) - np.isfinite(x).sum())} non-finite values")
        if y is None:
            return x, None
        y = _as_numpy(y, np.int64)
        if y.shape != (x.shape[0],) or y.min() < 0 or y.max() >= self.setup.layers[-1]:
            raise HwTrainError(f"labels y of shape {y.shape} must be ({x.shape[0]},) classes in "
                               f"0..{self.setup.layers[-1] - 1}")
        return x, y

    # -- float warm-up

    def _float_forward(self, x: np.ndarray, weights=None) -> tuple[list[np.ndarray], list[np.ndarray]]:
        inputs, pre = [], []
        a = x
        weights = self.weights if weights is None else weights
        for index, w in enumerate(weights):
            inputs.append(a)
            z = a @ w.T
            pre.append(z)
            a = np.maximum(z, 0.0) if index < len(weights) - 1 else z
            self.host_macs += x.shape[0] * w.size
        return inputs, pre

    def _float_step(self, x: np.ndarray, y: np.ndarray) -> float:
        measuring = self.epoch == self.setup.warmup_epochs - 1
        inputs, pre = self._float_forward(x)
        loss, dz = softmax_cross_entropy(pre[-1], y)
        rate = self.learning_rate()
        grads = [None] * len(self.weights)
        for index in reversed(range(len(self.weights))):
            if measuring:
                for blob, values in (("activation", inputs[index]), ("weight", self.weights[index]), ("error", dz)):
                    self._record(index, blob, values)
            grads[index] = dz.T @ inputs[index]
            self.host_macs += x.shape[0] * self.weights[index].size
            if index:
                dz = (dz @ self.weights[index]) * (pre[index - 1] > 0)
                self.host_macs += x.shape[0] * self.weights[index].size
        self.weights = [w - rate * g for w, g in zip(self.weights, grads)]
        return loss

    # -- the switch to fixed point

    def _kernel_norms(self) -> list[np.ndarray]:
        """What the pruning search ranks, per layer: an FC layer's kernels are its weights, by magnitude."""
        return [np.abs(w) for w in self.weights]

    def _masked(self, masks: list[np.ndarray]) -> list[np.ndarray]:
        return [w * m for w, m in zip(self.weights, masks)]

    # -- fixed-point forward and backward

    def _fixed_forward(self, x: np.ndarray) -> tuple[list[np.ndarray], list[np.ndarray]]:
        """Codes into every layer and the layers' accumulators (FP on the backend)."""
        fb = self.frac_bits
        a = quantize(x, fb[0]["activation"])
        inputs, pre = [], []
        for index in range(len(self.shapes)):
            inputs.append(a)
            z = np.asarray(self.backend.forward(self.matrix(index), a), dtype=np.int64)
            pre.append(z)
            if index < len(self.shapes) - 1:
                a = rescale(np.maximum(z, 0), fb[index]["weight"] + fb[index]["activation"],
                            fb[index + 1]["activation"])
        return inputs, pre

    def _fixed_step(self, x: np.ndarray, y: np.ndarray) -> float:
        fb = self.frac_bits
        inputs, pre = self._fixed_forward(x)
        loss, dz = self._loss_and_codes(pre[-1], y)
        grads = [None] * len(self.shapes)
        for index in reversed(range(len(self.shapes))):
            csb = self.matrix(index)
            grads[index] = np.asarray(self.backend.weight_grad(csb, inputs[index], dz), dtype=np.int64)
            if index:
                dx = np.asarray(self.backend.backward_error(csb, dz), dtype=np.int64)
                dx = np.where(pre[index - 1] > 0, dx, 0)
                dz = rescale(dx, fb[index]["weight"] + fb[index]["error"], fb[index - 1]["error"])
        self._update_all(grads)
        return loss
