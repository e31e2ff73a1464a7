"""Golden rank-adaptive TT training of a design point in NumPy: the loop a board's host runs around the TT PEs.

The desktop trains the ``tt`` technique in torch (:mod:`codesign.train.tt`,
and with its layer steps on the PEs :mod:`codesign.train.hw_golden_tt`). A
board has no torch (none is built for the ZedBoard's 32-bit ARM), so this
loop is the same method written on NumPy alone, and it is what a board run
is compared with *bit for bit*:

- **Model:** an MLP of TT layers with ReLU between them, shapes from
  design.json's ``loop`` (core shapes at the initial ranks). Each layer
  starts as the TT-SVD (:func:`codesign.numerics.tt_svd.tt_svd`) of a
  uniform ``±1/sqrt(in_features)`` matrix drawn from ``seed``, rescaled to
  that matrix's Frobenius norm, as the torch layer starts (the draws
  differ: NumPy's generator, not torch's).
- **Layer passes on PEs:** the forward pass is
  :func:`codesign.step.tt.step.forward_sweep` (re-aiming the activation and
  bias scales in training, not in evaluation); the backward pass is
  :func:`codesign.step.tt.step.pe_step` started from that sweep (its states,
  codes and scales, which a second sweep would repeat), so the PEs compute
  every contraction of a step once and the host scales every state once
  (``replayed`` counts the forward calls the step reused). The
  contractions go to a *runner*: the golden kernels, each contraction
  whole where that is provably exact (:class:`~codesign.step.tt.whole.WholeRunner`,
  default; the same numbers as :class:`~codesign.step.tt.step.GoldenRunner`'s
  calls one by one) or the board's IPs
  (:class:`codesign.deploy.tt_training.IpRunner`).
- **Host, in a documented precision:** softmax cross-entropy in float64 on
  the logits, its gradient ``(softmax - onehot) / batch`` rounded once to
  float32 (with ``precision.hand_off = "exact"`` kept in float64, as the
  layers' outputs and input gradients are: the next rounding is to the
  last layer's codes); ReLU and its derivative are selections (exact).
  The low-rank prior of paper 003 (Sec. 3.1, Eqs. (1)-(4); :mod:`codesign.train.tt.rank`
  has the derivation): its gradient ``scale * G / lambda`` per rank slice is
  summed in float64 and added to the core gradient in float32, ``scale =
  beta(step) * weight / N_train`` with ``beta`` warmed up linearly; after
  every step each ``lambda`` takes its MAP value ``|slices|^2 / (n + 2)``
  (float64). Adam as ``torch.optim.Adam`` defines it (betas 0.9 and 0.999,
  eps 1e-8, weight decay added to the gradient), element-wise in float32.
  Shadow cores are clipped to their codes' range after the step; rank
  slices whose ``lambda`` fell below ``threshold`` times their rank's
  largest are removed at epoch ends, with Adam's moments sliced alike.
- **Schedule:** cosine (or constant) learning rate over all steps; every
  step takes a full batch (the samples of an epoch that do not fill one are
  left out, as in the other loops of :mod:`codesign.loops`).

Everything is seeded: weights from ``seed``, the sample order of epoch
``e`` from ``(seed, e)``. The torch trainer and this loop take the same
layer steps for the same layer state (both call the PE step), but their
host arithmetic differs in float rounding, so their runs agree in accuracy,
not bit for bit.
"""

from __future__ import annotations

import dataclasses
import math
import time
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from codesign.loops.common import (HwTrainError, LoopSetup, check_fit_data, epoch_batches, ScheduledLoop, progress_bar,
                                   softmax_cross_entropy)
from codesign.loops.tt_update import Adam, keep_slices, prior_grads, slice_lambdas
from codesign.numerics.scales import NO_MEAN, UNSET
from codesign.numerics.tt_svd import tt_svd
from codesign.step.tt.layer_state import PER_CORE_TRACKERS, TRACKERS, TtLayerState
from codesign.step.tt.runners import Counting
from codesign.step.tt.schedule import StepHardware, hardware_of
from codesign.step.tt.step import check_input, forward_sweep, pe_step, step_plan
from codesign.step.tt.whole import WholeRunner

PRECISION_FIELDS = ("core_bits", "activation_bits", "bias_bits", "grad_bits", "core_headroom_bits",
                    "activation_headroom_bits", "grad_headroom_bits", "quantize_intermediates", "rounding",
                    "core_grad_route", "scale_rule", "scale_momentum", "hand_off")
PRECISION_DEFAULTS = {"core_grad_route": "direct", "scale_rule": "exact", "scale_momentum": 0.9,  # older set-ups
                      "hand_off": "float32"}
LAYER_FIELDS = ("core_shapes", "bias", "in_features", "out_features", "is_network_input")


# ---------------------------------------------------------------------------- set-up


def _layer_entry(index: int, layer: Any) -> Dict[str, Any]:
    """One layer of design.json's ``loop.setup.layers``, checked, with its core shapes as tuples."""
    if not isinstance(layer, Mapping) or set(layer) != set(LAYER_FIELDS):
        raise HwTrainError(f"layers[{index}] must be a table of {', '.join(LAYER_FIELDS)}")
    shapes = layer["core_shapes"]
    if (not isinstance(shapes, (list, tuple)) or not shapes
            or any(not isinstance(s, (list, tuple)) or len(s) != 4 for s in shapes)
            or any(isinstance(n, bool) or not isinstance(n, int) or n < 1 for s in shapes for n in s)):
        raise HwTrainError(f"layers[{index}].core_shapes must be lists of four positive ints, got {shapes!r}")
    shapes = tuple(tuple(s) for s in shapes)
    ranks = [s[0] for s in shapes] + [shapes[-1][3]]
    if ranks[0] != 1 or ranks[-1] != 1 or any(a[3] != b[0] for a, b in zip(shapes, shapes[1:])):
        raise HwTrainError(f"layers[{index}].core_shapes: ranks must chain from 1 to 1, got {list(shapes)}")
    if math.prod(s[2] for s in shapes) != layer["in_features"] or math.prod(s[1] for s in shapes) != \
            layer["out_features"]:
        raise HwTrainError(f"layers[{index}]: the cores' modes do not multiply to {layer['in_features']} inputs "
                           f"and {layer['out_features']} outputs")
    if not isinstance(layer["bias"], bool) or not isinstance(layer["is_network_input"], bool):
        raise HwTrainError(f"layers[{index}]: bias and is_network_input must be booleans")
    return {**layer, "core_shapes": shapes}


@dataclass(frozen=True)
class TtTrainSetup(LoopSetup):
    """What the loop needs: layer shapes, precision, the TT IPs' builds, optimiser, schedule and rank prior.

    ``layers``: design.json's layer tables (core shapes at the initial ranks,
    bias, features, which layer takes the network's input); ``precision``:
    the fields of :class:`~codesign.step.tt.layer_state.TtLayerState`'s
    precision (bits, binades of headroom, rounding); ``ips``: ``(IP name, PE,
    spec dict)`` of the design's TT instances, whose builds the step's
    schedule is cut to (none: the default builds). ``lr`` and
    ``weight_decay`` are Adam's; ``prior_weight`` (0: no prior, no pruning),
    ``warmup_epochs``, ``threshold``, ``prune_from_epoch``, ``min_rank`` and
    ``clip_shadow`` are :class:`codesign.train.tt.rank.RankPrior`'s.
    ``forward_split``: the step shares its forward contractions between the
    PE2 and PE1 copies (:class:`~codesign.step.tt.schedule.StepHardware`).
    """

    layers: Tuple[Mapping[str, Any], ...]
    precision: Mapping[str, Any]
    batch_size: int
    epochs: int
    lr: float
    weight_decay: float
    schedule: str
    seed: int
    ips: Tuple[Tuple[str, str, Mapping[str, Any]], ...] = ()
    prior_weight: float = 1.0
    warmup_epochs: int = 5
    threshold: float = 1e-2
    prune_from_epoch: int = 0
    min_rank: int = 1
    clip_shadow: bool = True
    forward_split: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.layers, (list, tuple)) or not self.layers:
            raise HwTrainError("layers must be a non-empty list of layer tables")
        layers = tuple(_layer_entry(index, layer) for index, layer in enumerate(self.layers))
        for index, (a, b) in enumerate(zip(layers, layers[1:])):
            if a["out_features"] != b["in_features"]:
                raise HwTrainError(f"layers[{index + 1}] takes {b['in_features']} inputs; layers[{index}] gives "
                                   f"{a['out_features']}")
        if not layers[0]["is_network_input"] or any(layer["is_network_input"] for layer in layers[1:]):
            raise HwTrainError("exactly the first layer takes the network's input (is_network_input)")
        object.__setattr__(self, "layers", layers)
        if isinstance(self.precision, Mapping):
            object.__setattr__(self, "precision", {**PRECISION_DEFAULTS, **self.precision})
        if not isinstance(self.precision, Mapping) or set(self.precision) != set(PRECISION_FIELDS):
            raise HwTrainError(f"precision must be a table of {', '.join(PRECISION_FIELDS)}")
        object.__setattr__(self, "precision", dict(self.precision))
        object.__setattr__(self, "ips", tuple((str(n), str(p), dict(s)) for n, p, s in self.ips))
        self.check_shared(widths=False)  # the layer tables are checked above, feature counts included
        for name in ("warmup_epochs", "prune_from_epoch", "seed"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise HwTrainError(f"{name} must be an int >= 0, got {value!r}")
        if isinstance(self.min_rank, bool) or not isinstance(self.min_rank, int) or self.min_rank < 1:
            raise HwTrainError(f"min_rank must be an int >= 1, got {self.min_rank!r}")
        for name, low in (("lr", 0.0), ("weight_decay", 0.0), ("prior_weight", 0.0), ("threshold", 0.0)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
                    or value < low:
                raise HwTrainError(f"{name} must be a finite number >= {low}, got {value!r}")
        if not self.lr > 0 or not self.threshold < 1:
            raise HwTrainError(f"lr must be > 0 and threshold < 1, got lr={self.lr!r}, threshold={self.threshold!r}")
        if self.schedule not in ("cosine", "constant"):
            raise HwTrainError(f"schedule {self.schedule!r} must be 'cosine' or 'constant'")
        for name in ("clip_shadow", "forward_split"):
            if not isinstance(getattr(self, name), bool):
                raise HwTrainError(f"{name} must be a bool, got {getattr(self, name)!r}")
        for index in range(len(layers)):
            step_plan(self.layer_state(index, self.initial_cores(index)), 1, self.hardware())  # widths the PEs take

    def hardware(self) -> StepHardware:
        """The PE builds the step's schedule is cut to: the design's TT IPs, or the default builds."""
        if not self.ips:
            return StepHardware(forward_split=self.forward_split)
        try:
            return dataclasses.replace(hardware_of(self.ips, design="loop set-up"), forward_split=self.forward_split)
        except (TypeError, ValueError) as error:
            raise HwTrainError(f"ips: {error}") from None

    def initial_cores(self, index: int) -> List[np.ndarray]:
        """Zero cores of layer ``index``'s initial shapes (what a shape check needs)."""
        return [np.zeros(shape, np.float32) for shape in self.layers[index]["core_shapes"]]

    def layer_state(self, index: int, cores: Sequence[np.ndarray], bias: Optional[np.ndarray] = None,
                    trackers: Optional[Mapping[str, Sequence[int]]] = None,
                    means: Optional[Mapping[str, Sequence[float]]] = None) -> TtLayerState:
        """Layer ``index`` as the PE step reads it, with these cores, bias (zeros if None), trackers and running
        means (unset)."""
        layer = self.layers[index]
        if trackers is None:
            trackers = unset_trackers(len(cores))
        if bias is None and layer["bias"]:
            bias = np.zeros(layer["out_features"], np.float32)
        return TtLayerState(cores=tuple(cores), bias=bias if layer["bias"] else None,
                            in_features=layer["in_features"], out_features=layer["out_features"],
                            is_network_input=layer["is_network_input"],
                            trackers=tuple(tuple(trackers[name]) for name in TRACKERS),
                            means=() if means is None else tuple(tuple(means[name]) for name in TRACKERS),
                            **self.precision)

    def to_dict(self) -> Dict[str, Any]:
        values = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        values["layers"] = [{**layer, "core_shapes": [list(s) for s in layer["core_shapes"]]}
                            for layer in self.layers]
        values["ips"] = [list(ip) for ip in self.ips]
        return values

    @classmethod
    def from_dict(cls, values: Mapping[str, Any]) -> TtTrainSetup:
        """The set-up design.json's ``loop.setup`` holds; a missing, unknown or mistyped field is one
        :class:`HwTrainError` naming it."""
        if not isinstance(values, Mapping):
            raise HwTrainError(f"must be an object of set-up fields, got {type(values).__name__}")
        unknown = sorted(set(values) - {f.name for f in dataclasses.fields(cls)})
        if unknown or not isinstance(values.get("layers"), (list, tuple)) \
                or not isinstance(values.get("ips", ()), (list, tuple)):
            raise HwTrainError(f"unknown field(s) {unknown}" if unknown else "layers and ips must be lists")
        try:
            return cls(**{**values, "layers": tuple(values["layers"]),
                          "ips": tuple(tuple(ip) for ip in values.get("ips", ()))})
        except (TypeError, KeyError) as error:  # a missing field, or one of the wrong type tripped over
            raise HwTrainError(f"{type(error).__name__}: {error}") from None


def unset_means(order: int) -> Dict[str, Tuple[float, ...]]:
    """Every running mean of a layer of ``order`` cores, nothing observed yet."""
    return {name: (NO_MEAN,) * (order if index < PER_CORE_TRACKERS else 1) for index, name in enumerate(TRACKERS)}


def unset_trackers(order: int) -> Dict[str, Tuple[int, ...]]:
    """Every scale tracker of a layer of ``order`` cores, not yet aimed."""
    return {name: (UNSET,) * (order if index < PER_CORE_TRACKERS else 1) for index, name in enumerate(TRACKERS)}


# ---------------------------------------------------------------------------- the loop


class TtMlpTrainer(ScheduledLoop):
    """Rank-adaptive low-precision TT training with every layer contraction on ``runner`` (golden by default)."""

    def __init__(self, setup: TtTrainSetup, runner=None) -> None:
        if not isinstance(setup, TtTrainSetup):
            raise HwTrainError(f"setup must be a TtTrainSetup, got {type(setup).__name__}")
        self.setup = setup
        self.hardware = setup.hardware()
        self.runner = Counting(runner if runner is not None else WholeRunner())
        self.step, self.epoch = 0, 0
        self.history: List[Dict[str, Any]] = []
        self.steps_per_epoch: Optional[int] = None
        self.train_size = 0
        self.replayed = self.replay_misses = 0
        self.optimizer = Adam(setup.weight_decay)
        self.cores: List[List[np.ndarray]] = []
        self.biases: List[Optional[np.ndarray]] = []
        rng = np.random.default_rng(setup.seed)
        for layer in setup.layers:
            cores, bias = _initial_layer(layer, rng)
            self.cores.append(cores)
            self.biases.append(bias)
        self.trackers = [unset_trackers(len(cores)) for cores in self.cores]
        self.means = [unset_means(len(cores)) for cores in self.cores]
        self.lambdas = [slice_lambdas(cores) for cores in self.cores]
        self.rank_history = [self.ranks()]
        self.prune_events: List[Dict[str, Any]] = []

    # -- state

    def ranks(self) -> List[Tuple[int, ...]]:
        """TT ranks ``(1, r_1, ..., 1)`` of every layer's current cores."""
        return [tuple([1] + [core.shape[3] for core in cores]) for cores in self.cores]

    def layer_state(self, index: int) -> TtLayerState:
        return self.setup.layer_state(index, self.cores[index], self.biases[index], self.trackers[index],
                                      self.means[index])

    def float_weights(self) -> List[Dict[str, Any]]:
        """Each layer's ``weight`` (outputs x inputs) as float32, its shadow cores multiplied out (the trained
        parameters; the PEs compute with their 4-bit codes), and its ``bias`` (None without one)."""
        out = []
        for cores, bias in zip(self.cores, self.biases):
            state = cores[0].reshape(cores[0].shape[1], cores[0].shape[2], cores[0].shape[3])  # (m_1, n_1, r_1)
            for core in cores[1:]:
                rows, cols = state.shape[0] * core.shape[1], state.shape[1] * core.shape[2]
                state = np.einsum("pqa,amnc->pmqnc", state, core).reshape(rows, cols, core.shape[3])
            out.append({"weight": state.reshape(state.shape[0], state.shape[1]).astype(np.float32),
                        "bias": None if bias is None else bias.astype(np.float32)})
        return out

    def read_weights(self) -> Dict[str, Any]:
        """Copies of the shadow cores and biases (float32), Adam's moments, the scale trackers, their running means
        and the ranks, flat."""
        moments = []
        for key in sorted(self.optimizer.moments):
            moments.extend(moment.copy() for moment in self.optimizer.moments[key])
        return {"cores": [core.copy() for cores in self.cores for core in cores],
                "biases": [bias.copy() for bias in self.biases if bias is not None], "moments": moments,
                "trackers": [np.array(self.trackers[i][name], np.int64) for i in range(len(self.cores))
                             for name in TRACKERS],
                "means": [np.array(self.means[i][name], np.float64) for i in range(len(self.cores)) for name in TRACKERS],
                "ranks": [np.array(ranks, np.int64) for ranks in self.ranks()], "step": self.step}

    # -- passes

    def _forward(self, x: np.ndarray, *, training: bool) -> Tuple[np.ndarray, List[np.ndarray], list]:
        """Logits, every layer's input, and (training) every layer's sweep and its PE calls' count; what passes
        between the layers is of their hand-off type (float32, or float64 where ``precision.hand_off`` is
        "exact")."""
        inputs, sweeps = [], []
        for index in range(len(self.cores)):
            state = self.layer_state(index)
            x = check_input(state, x)
            calls_before = self.runner.transactions
            sweep = forward_sweep(state, x, step_plan(state, x.shape[0], self.hardware), self.runner, update=training)
            self._keep_scales(index, sweep)
            inputs.append(x)
            sweeps.append((sweep, self.runner.transactions - calls_before) if training else None)
            y = sweep.y.astype(state.hand_off_dtype)
            x = y if index == len(self.cores) - 1 else np.maximum(y, y.dtype.type(0))
        return x, inputs, sweeps

    def logits(self, x) -> np.ndarray:
        """Logits (the hand-off type) of images or feature rows ``x`` (forward passes on the PEs, scales not
        re-aimed), a training batch of rows at a time: a forward pass holds every contraction's state for every row
        it takes (at rank 16 of paper 003's network about 0.7 MB a row, so gigabytes for a whole test split). Once a
        training step has set the scale trackers the logits do not depend on the cut."""
        features, rows = self._features(x), self.setup.batch_size
        if len(features) <= rows:
            return self._forward(features, training=False)[0]
        return np.concatenate([self._forward(features[start:start + rows], training=False)[0]
                               for start in range(0, len(features), rows)])

    def predict(self, x) -> np.ndarray:
        return np.argmax(self.logits(x), axis=1)

    def evaluate(self, x, y) -> float:
        """Accuracy in [0, 1]."""
        return float(np.mean(self.predict(x) == np.asarray(y, np.int64)))

    def _batch(self, x, y) -> Tuple[np.ndarray, np.ndarray]:
        """A training batch as feature rows and int64 labels, or an error naming what is wrong."""
        x = self._features(x)
        if x.shape[0] < 1:
            raise HwTrainError(f"x of shape {x.shape}: a batch needs at least one sample")
        y = np.asarray(y, np.int64)
        classes = self.setup.layers[-1]["out_features"]
        if y.shape != (x.shape[0],) or (y.size and (y.min() < 0 or y.max() >= classes)):
            raise HwTrainError(f"labels y {y.shape} must be one class in 0..{classes - 1} per sample")
        return x, y

    def _features(self, x) -> np.ndarray:
        x = np.asarray(x, dtype=np.float32)
        features = self.setup.layers[0]["in_features"]
        if x.ndim < 2 or math.prod(x.shape[1:]) != features:
            raise HwTrainError(f"x of shape {x.shape}: need (n, {features}) or images of as many pixels")
        return x.reshape(x.shape[0], features)

    # -- one step

    def prior_scale(self) -> float:
        """``beta(step) * weight / N_train``: the prior's weight in the loss at this step (0 without a prior)."""
        if self.setup.prior_weight == 0 or self.train_size == 0:
            return 0.0
        warmup = self.setup.warmup_epochs * (self.steps_per_epoch or 0)
        beta = 1.0 if warmup == 0 else min(1.0, self.step / warmup)
        return beta * self.setup.prior_weight / self.train_size

    def train_step(self, x, y, *, next_x=None) -> float:
        """One step on a batch: forward and backward on the PEs, loss, prior and Adam on the host; the loss.

        A step is whole or not at all: the state is changed only after every
        PE call of the step has answered. ``next_x``: the batch the next call
        takes, which a trainer whose host works beside its accelerator
        prepares while this step's lists compute (this loop has no use for it).
        """
        x, y = self._batch(x, y)
        trackers_before, means_before = list(self.trackers), list(self.means)
        try:
            logits, inputs, sweeps = self._forward(x, training=True)
            loss, grad = softmax_cross_entropy(logits.astype(np.float64), y)
            grad = grad.astype(logits.dtype)
            steps, replayed = [], 0
            for index in range(len(self.cores) - 1, -1, -1):
                sweep, forward_calls = sweeps[index]
                step = pe_step(self.layer_state(index), inputs[index], grad, self.runner, self.hardware,
                               forward=sweep)
                replayed += forward_calls  # the step starts from the forward's results: no PE call is repeated
                steps.append((index, step))
                if index:
                    grad = step.grad_x * (inputs[index] > 0)
        except BaseException:
            self.trackers, self.means = trackers_before, means_before
            raise
        self._update(steps)
        self.replayed += replayed
        self.step += 1
        return loss

    def _update(self, steps) -> None:
        """Adam on every core and bias from the steps' gradients plus the prior's; clip; new ``lambda``."""
        rates = self._begin_update()
        for index, step in steps:
            self._update_layer(index, step, rates)
        self._end_update()

    def _begin_update(self) -> Tuple[float, float]:
        """The step's learning rate and prior weight, Adam's step counted: before any layer's update."""
        rates = self.learning_rate(), self.prior_scale()
        self.optimizer.advance()
        return rates

    def _update_layer(self, index: int, step, rates: Tuple[float, float]) -> None:
        """Layer ``index``'s scales kept, Adam on its cores and bias from its step's gradients plus the prior's (at
        the last step's ``lambda``), the cores clipped. Layers update independently, in any order."""
        self._keep_scales(index, step)
        cores = range(len(self.cores[index]))
        self._adam(index, cores, step.core_grads, step.bias_grad, rates, self.trackers[index]["core_frac_bits"])

    def _adam(self, index: int, cores: Sequence[int], grads: Sequence[np.ndarray], bias_grad: np.ndarray | None,
              rates: Tuple[float, float], core_fracs: Sequence[int]) -> None:
        """Adam on layer ``index``'s cores ``cores`` from their ``grads`` (in that order) plus the prior's, and on
        its bias given ``bias_grad``, in one pass; the cores clipped at their codes' ``core_fracs`` (every core's).
        Element-wise throughout, so a layer updated in parts (the prior's gradient of each core from the core
        before its update) gets the bits of one update."""
        lr, scale = rates
        params = [self.cores[index][k] for k in cores]
        if scale:
            priors = prior_grads(self.cores[index], self.lambdas[index], scale, only=cores)
            grads = [(grad + prior).astype(np.float32) for grad, prior in zip(grads, priors)]
        keys, grads = [(index, k) for k in cores], list(grads)
        if bias_grad is not None:
            keys, params, grads = keys + [(index, -1)], params + [self.biases[index]], grads + [bias_grad]
        if not keys:
            return
        updated = self.optimizer.update_all(keys, params, grads, lr)  # in one pass
        new = list(self.cores[index])  # a new list: a failed step's kept state holds the old one
        for k, core in zip(cores, updated):
            new[k] = core
        self.cores[index] = new
        if bias_grad is not None:
            self.biases[index] = updated[-1]
        if self.setup.clip_shadow:
            self._clip(index, cores, core_fracs)

    def _end_update(self) -> None:
        """The next step's ``lambda`` of every layer, once all are updated (a layer's update reads the last)."""
        if self.setup.prior_weight > 0:
            for index in range(len(self.cores)):
                self.lambdas[index] = slice_lambdas(self.cores[index])

    def _keep_scales(self, index: int, source) -> None:
        """Layer ``index``'s trackers and running means as a sweep or step left them."""
        self.trackers[index] = {name: tuple(values) for name, values in source.trackers.items()}
        self.means[index] = {name: tuple(values) for name, values in source.means.items()}

    def _clip(self, index: int, cores: Sequence[int], core_fracs: Sequence[int]) -> None:
        """Clip layer ``index``'s shadow cores ``cores`` to what their codes can represent at ``core_fracs`` (every
        core's; BinaryConnect's clipping)."""
        bits = self.setup.precision["core_bits"]
        for k in cores:  # Adam's new arrays
            core, frac = self.cores[index][k], core_fracs[k]
            np.maximum(core, np.float32(math.ldexp(-(1 << (bits - 1)), -frac)), out=core)  # in place: a clip
            np.minimum(core, np.float32(math.ldexp((1 << (bits - 1)) - 1, -frac)), out=core)

    def prune(self) -> None:
        """Remove the rank slices whose ``lambda`` fell below the threshold from both cores, and from Adam."""
        for index, cores in enumerate(self.cores):
            lambdas = slice_lambdas(cores)
            kept = keep_slices(lambdas, self.setup.threshold, self.setup.min_rank)
            before = self.ranks()[index]
            for k, index_kept in enumerate(kept, start=1):
                if index_kept.size == cores[k].shape[0]:
                    continue
                cores[k - 1] = np.take(cores[k - 1], index_kept, axis=3)
                cores[k] = np.take(cores[k], index_kept, axis=0)
                self.optimizer.slice((index, k - 1), 3, index_kept)
                self.optimizer.slice((index, k), 0, index_kept)
            self.lambdas[index] = slice_lambdas(cores)
            if self.ranks()[index] != before:
                self.prune_events.append({"epoch": self.epoch, "layer": index, "ranks_before": list(before),
                                          "ranks_after": list(self.ranks()[index])})

    # -- epochs

    def fit(self, data, epochs: Optional[int] = None, *, progress: bool = True, max_steps: Optional[int] = None,
            on_epoch: Optional[Callable[[Dict[str, Any]], None]] = None) -> List[Dict[str, Any]]:
        """Train ``epochs`` epochs (default: the set-up's) on ``data`` (train, test and optional validation splits).

        One history row per epoch: epoch, loss, test accuracy, validation
        accuracy (when the data hold a validation split), ranks after the
        epoch's pruning, the PEs' MACs, seconds. ``max_steps`` shortens every
        epoch to that many steps (the schedule spans the shortened epochs).
        """
        layers = self.setup.layers
        check_fit_data(data, features=layers[0]["in_features"], classes=layers[-1]["out_features"])
        train_x, train_y = self._features(data.train_x), np.asarray(data.train_y, np.int64)
        batch = self.setup.batch_size
        self.steps_per_epoch = train_x.shape[0] // batch
        if self.steps_per_epoch < 1:
            raise HwTrainError(f"{train_x.shape[0]} training samples do not fill one batch of {batch}")
        if max_steps is not None:
            self.steps_per_epoch = min(self.steps_per_epoch, max_steps)
        self.train_size = train_x.shape[0]
        for _ in range(self.setup.epochs if epochs is None else epochs):
            started, macs_before = time.perf_counter(), self.runner.macs
            order = self.epoch_order(self.epoch, train_x.shape[0])
            losses = []
            for rows, x, following in progress_bar(epoch_batches(train_x, order, batch, self.steps_per_epoch),
                                                   progress, total=self.steps_per_epoch, desc=f"epoch {self.epoch}",
                                                   leave=False):
                losses.append(self.train_step(x, train_y[rows], next_x=following))
            row = {"epoch": self.epoch, "loss": float(np.mean(losses)),
                   "accuracy": self.evaluate(data.test_x, data.test_y)}
            if getattr(data, "validation_x", None) is not None:
                row["validation_accuracy"] = self.evaluate(data.validation_x, data.validation_y)
            if self.setup.prior_weight > 0 and self.epoch >= self.setup.prune_from_epoch:
                self.prune()
            self.rank_history.append(self.ranks())
            row.update({"ranks": [list(r) for r in self.ranks()], "macs": self.runner.macs - macs_before,
                        "seconds": time.perf_counter() - started})
            self.history.append(row)
            self.epoch += 1
            if on_epoch is not None:
                on_epoch(row)
        return self.history

    def memory_bits(self) -> Dict[str, int]:
        """Bits of the parameters the layers compute with: cores and biases at their trained widths."""
        core = sum(core.size for cores in self.cores for core in cores) * self.setup.precision["core_bits"]
        bias = sum(b.size for b in self.biases if b is not None) * self.setup.precision["bias_bits"]
        return {"core_bits": core, "bias_bits": bias, "total_bits": core + bias}

    def throughput(self) -> Dict[str, float]:
        """Steps, the PEs' MACs and transactions, the runner's seconds, MACs per second, replayed calls."""
        seconds = self.runner.seconds
        return {"steps": self.step, "macs": self.runner.macs, "transactions": self.runner.transactions,
                "seconds": seconds, "macs_per_s": self.runner.macs / seconds if seconds else 0.0,
                "replayed": self.replayed, "replay_misses": self.replay_misses}


def _initial_layer(layer: Mapping[str, Any], rng: np.random.Generator) -> Tuple[List[np.ndarray], Optional[np.ndarray]]:
    """Cores (float32) of the layer's initial shapes: the TT-SVD of a uniform ``±1/sqrt(N)`` matrix at its norm."""
    shapes = layer["core_shapes"]
    in_modes, out_modes = [s[2] for s in shapes], [s[1] for s in shapes]
    bound = 1.0 / math.sqrt(layer["in_features"])
    dense = rng.uniform(-bound, bound, (layer["out_features"], layer["in_features"]))
    cores, _ = tt_svd(dense, in_modes, out_modes, [s[3] for s in shapes[:-1]])
    if [c.shape for c in cores] != [tuple(s) for s in shapes]:
        raise HwTrainError(f"the TT-SVD of a random {dense.shape} matrix has cores {[c.shape for c in cores]}, not "
                           f"the set-up's {list(shapes)}")
    approx = math.sqrt(sum(float((c.astype(np.float64) ** 2).sum()) for c in cores[-1:]))
    # the left cores are orthonormal, so the last one carries the decomposition's norm
    if approx > 0:
        factor = (float(np.linalg.norm(dense)) / approx) ** (1.0 / len(cores))
        cores = [core * factor for core in cores]
    bias = rng.uniform(-bound, bound, layer["out_features"]).astype(np.float32) if layer["bias"] else None
    return [core.astype(np.float32) for core in cores], bias


__all__ = ["TtMlpTrainer", "TtTrainSetup", "unset_means", "unset_trackers"]
