"""Golden TT training of a design point: the ``tt`` technique's trainer with every TT layer step on PE calls.

A configuration with ``[techniques.tt]`` trains, in :mod:`codesign.train.trainer`,
an MLP of :class:`~codesign.train.tt.layer.TTLinear` layers whose passes are
core contractions computed in float64 on codes. :class:`TtHwTrainer` is the
same trainer with each TT layer's forward and backward moved onto the TT
PEs' schedule (:mod:`codesign.step.tt.schedule`) through a *runner*: the
golden PE kernels, each contraction whole where that is provably exact
(:class:`~codesign.step.tt.whole.WholeRunner`, the default; the numbers of
:class:`~codesign.step.tt.step.GoldenRunner`'s calls one by one), or the IPs
of a board (:class:`codesign.deploy.tt_training.IpRunner`).

- **Forward** of a layer: :func:`pe_forward`, the forward sweep that
  :func:`codesign.step.tt.step.pe_step` also starts with
  (:func:`~codesign.step.tt.step.forward_sweep`: PE2 calls, the host's
  integer scale choice and rounding between them); in evaluation mode the
  scales are not re-aimed, as the golden layer's are not.
- **Backward**: :func:`~codesign.step.tt.step.pe_step` on the batch and the
  output gradient, started from the forward pass's sweep (its states, codes
  and the scales it rounded at), so the PEs compute every contraction of a
  step once (``replayed_transactions`` counts the forward calls reused;
  ``replay_misses`` stays 0).
- **Host, in the trainer's precision:** loss (softmax cross-entropy), the
  low-rank prior and its ``lambda`` updates (float64), Adam on float32
  shadow cores and biases, shadow clipping, rank pruning at epoch ends and
  the learning-rate schedule are the trainer's own code, run on the values
  the PEs produced. ReLU and its derivative are selections (exact).

Because :func:`~codesign.step.tt.step.pe_step` returns the golden layer's
step bit for bit, a run of this loop ends with the same weights, bit for
bit, as ``codesign train`` on the same configuration (same seed): the
trainer's golden model, its PE schedule and the board agree.
"""

from __future__ import annotations

import copy
import dataclasses
import time
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from codesign.step.tt.runners import Counting
from codesign.step.tt.schedule import StepHardware, hardware_of
from codesign.step.tt.step import ForwardSweep, check_input, forward_sweep, pe_step, step_plan
from codesign.step.tt.whole import WholeRunner
from codesign.step.tt.rounding import to_values
from codesign.train.config import TrainConfig
from codesign.train.data import Dataset
from codesign.loops.common import HwTrainError
from codesign.train.trainer import Trainer
from codesign.train.tt.layer import TTLinear, hand_off_dtype, tt_layers
from codesign.train.tt.pe_check import layer_state, means_of, trackers_of
from codesign.train.tt.precision import mean_buffer

# ---------------------------------------------------------------------------- the forward sweep on PEs
@dataclass
class ForwardResult:
    """A layer's forward pass on the PEs: ``y`` (B, M) of the layer's hand-off type, its trackers after it, and
    what the ledger needs.

    ``cores`` are the quantised core values and ``states`` the PE2 operands
    of every contraction (shapes and counts only matter to the ledger).
    """

    y: np.ndarray
    trackers: dict[str, tuple[int, ...]]
    cores: list[np.ndarray]
    states: list[np.ndarray]
    sweep: ForwardSweep


def pe_forward(layer: TTLinear, x, runner, hardware: StepHardware = StepHardware(), *,
               update: bool = True) -> ForwardResult:
    """``y = x W^T + b`` of ``layer`` as the forward sweep of :func:`codesign.step.tt.step.pe_step`, on ``runner``.

    ``update``: re-aim every activation and bias scale from this batch (the
    layer in training mode); otherwise a scale is only aimed while unset
    (evaluation mode), the golden layer's rule. ``layer`` is not changed.
    """
    state = layer_state(layer)
    x = check_input(state, x)
    plan = step_plan(state, x.shape[0], hardware)  # checks the layer's precision
    sweep = forward_sweep(state, x, plan, runner, update=update)
    return ForwardResult(y=sweep.y.astype(state.hand_off_dtype),
                         trackers={name: tuple(v) for name, v in sweep.trackers.items()},
                         cores=[to_values(c, f) for c, f in zip(sweep.cores, sweep.core_frac)], states=sweep.states,
                         sweep=sweep)


# ---------------------------------------------------------------------------- TT layers on PEs
class PeBackend:
    """Where the TT layers' contractions run: ``runner`` for ``hardware``, counted; replay figures per step."""

    def __init__(self, runner, hardware: StepHardware) -> None:
        if not isinstance(hardware, StepHardware):
            raise TypeError(f"hardware must be a StepHardware, got {type(hardware).__name__}")
        self.hardware = hardware
        self.runner = Counting(runner)
        self.replayed = 0
        self.replay_misses = 0


class _PeTTFunction(torch.autograd.Function):
    """The TT layer's passes on the PEs: :func:`pe_forward`, then :func:`pe_step` started from that sweep (its
    states, codes and the scales it rounded at: under the tracked rule the layer's trackers already hold the next
    step's, so a second sweep would not be the same)."""

    @staticmethod
    def forward(ctx, x, bias, layer, *cores):
        backend: PeBackend = layer.pe_backend
        x_in = _numpy_input(x)
        calls_before = backend.runner.transactions
        result = pe_forward(layer, x_in, backend.runner, backend.hardware, update=layer.training)
        _set_trackers(layer, result.sweep)
        ctx.layer, ctx.x, ctx.x_dtype, ctx.parameter_dtype = layer, x_in, x.dtype, cores[0].dtype
        ctx.sweep, ctx.forward_calls = result.sweep, backend.runner.transactions - calls_before
        if layer.ledger is not None:
            y = torch.from_numpy(result.y)
            layer._record_forward([torch.from_numpy(c) for c in result.cores],
                                  [torch.from_numpy(s) for s in result.states], y)
        return torch.from_numpy(result.y).to(hand_off_dtype(layer.precision_tt, x.dtype))

    @staticmethod
    def backward(ctx, grad_y):
        layer: TTLinear = ctx.layer
        backend: PeBackend = layer.pe_backend
        step = pe_step(layer_state(layer), ctx.x, _numpy_input(grad_y), backend.runner, backend.hardware,
                       forward=ctx.sweep)
        backend.replayed += ctx.forward_calls  # the step starts from the forward's results: no PE call is repeated
        _set_trackers(layer, step)
        need_x = ctx.needs_input_grad[0] and not layer.is_network_input
        if layer.ledger is not None:
            layer._record_backward(list(layer.cores), ctx.x.shape[0], need_x)
        dtype = ctx.parameter_dtype  # each gradient in its input's type: the layer's input, the bias, the cores
        grad_x = torch.from_numpy(step.grad_x).to(ctx.x_dtype) if need_x and step.grad_x is not None else None
        grad_b = torch.from_numpy(step.bias_grad).to(dtype) \
            if step.bias_grad is not None and ctx.needs_input_grad[1] else None
        grads = [torch.from_numpy(g).to(dtype) if needed else None
                 for g, needed in zip(step.core_grads, ctx.needs_input_grad[3:])]
        return grad_x, grad_b, None, *grads


def _numpy_input(values: torch.Tensor) -> np.ndarray:
    """A layer's input or output gradient for the PE step: float64 kept (an exact hand-off's values; the step takes
    them as float32 where the layer hands off in float32), any other type as float32, as the golden layer reads
    it."""
    values = values.detach()
    return (values if values.dtype == torch.float64 else values.to(torch.float32)).numpy()


def _set_trackers(layer: TTLinear, source) -> None:
    """The layer's trackers and running means as a sweep or step left them."""
    for name, values in source.trackers.items():
        getattr(layer, name).copy_(torch.tensor(values, dtype=torch.int64))
        getattr(layer, mean_buffer(name)).copy_(torch.tensor(source.means[name], dtype=torch.float64))


class PeTTLinear(TTLinear):
    """A :class:`TTLinear` whose passes run on its ``pe_backend`` (set by :func:`run_on_pes`)."""

    pe_backend: PeBackend

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.ndim < 2 or int(np.prod(x.shape[1:])) != self.in_features:
            raise ValueError(f"x must be (batch, {self.in_features}) or flatten to it, got shape {tuple(x.shape)}")
        x = x.reshape(x.shape[0], self.in_features)
        return _PeTTFunction.apply(x, self.bias, self, *self.cores)


def run_on_pes(model: torch.nn.Module, backend: PeBackend) -> list[TTLinear]:
    """Move every TT layer of ``model`` onto ``backend`` (in place: same parameters, buffers and names)."""
    layers = tt_layers(model)
    if not layers:
        raise HwTrainError("the model has no TT layer to run on the TT PEs")
    for layer in layers:
        step_plan(layer_state(layer), 1, backend.hardware)  # refuses a precision or widths the PEs cannot take
        layer.__class__ = PeTTLinear
        layer.pe_backend = backend
    return layers


def design_hardware(design) -> StepHardware:
    """The PE builds of a design point's TT instances (:func:`codesign.step.tt.schedule.hardware_of`) and its
    ``forward_split``."""
    try:
        return dataclasses.replace(hardware_of([(i.name, i.pe, i.spec) for i in design.instances],
                                               design=design.name), forward_split=design.forward_split)
    except ValueError as error:
        raise HwTrainError(str(error)) from None


# ---------------------------------------------------------------------------- the loop
def _tensor(values, dtype: torch.dtype) -> torch.Tensor:
    if isinstance(values, torch.Tensor):
        return values.to(dtype)
    return torch.as_tensor(np.asarray(values)).to(dtype)


class WholeStepTrainer(Trainer):
    """The trainer, with every step done entirely or not at all.

    A step's contractions run on a runner that can fail part-way (an IP
    that times out, or answers short): by then the forward pass has re-aimed
    the scale trackers and the ledger has counted its MACs. The state before
    the step (:meth:`Trainer.state_dict`) is kept and put back when the step
    raises, so a user can retry it or read the weights of the last whole step.
    """

    def train_step(self, x, y):
        saved = copy.deepcopy(self.state_dict())
        try:
            return super().train_step(x, y)
        except BaseException:
            self.load_state_dict(saved)
            raise


class TtHwTrainer:
    """The ``tt`` technique's trainer with the TT layers on PE calls (golden kernels unless ``runner`` is given).

    ``training`` must hold ``techniques.tt``; ``hardware`` is the PE builds
    (:func:`design_hardware` of a design point, or :meth:`from_design`).
    ``dataset`` defaults to the configuration's. ``trainer`` is the
    :class:`~codesign.train.trainer.Trainer` (model, optimiser, ledger,
    techniques, history).
    """

    def __init__(self, training: TrainConfig, *, hardware: StepHardware = StepHardware(), runner=None,
                 dataset: Dataset | None = None, description: str = "tt on PEs") -> None:
        if not isinstance(training, TrainConfig):
            raise HwTrainError(f"training must be a TrainConfig, got {type(training).__name__}")
        if "tt" not in training.techniques:
            raise HwTrainError("the TT loop trains a configuration with techniques.tt; this one has "
                               f"{sorted(training.techniques) or 'no technique'}")
        from codesign.train.techniques.tt import pe_widths

        for pe, widths in pe_widths(training.techniques["tt"]).items():
            spec = hardware.spec(pe)
            if spec.a_bits < widths["a_bits"] or spec.b_bits < widths["b_bits"]:
                raise HwTrainError(f"{pe} is built for {spec.a_bits} x {spec.b_bits}-bit operands; "
                                   f"techniques.tt.precision needs {widths['a_bits']} x {widths['b_bits']}")
        self.trainer = WholeStepTrainer(training, dataset=dataset, progress=False, description=description)
        self.backend = PeBackend(runner if runner is not None else WholeRunner(), hardware)
        self.layers = run_on_pes(self.trainer.model, self.backend)
        self.step_seconds = 0.0
        self.steps = 0

    @classmethod
    def from_design(cls, design, **kwargs) -> TtHwTrainer:
        """The loop of a design point: its training configuration on its TT instances' builds, golden kernels."""
        return cls(design.training, hardware=design_hardware(design), **kwargs)

    @property
    def hardware(self) -> StepHardware:
        return self.backend.hardware

    # -- weights

    def read_weights(self) -> dict[str, Any]:
        """Copies of every TT layer's shadow cores and bias (float32), Adam's moments, and the scale trackers."""
        optimizer = self.trainer.optimizer
        cores, biases, moments, trackers = [], [], [], []
        for layer in self.layers:
            cores.append([core.detach().numpy().copy() for core in layer.cores])
            biases.append(None if layer.bias is None else layer.bias.detach().numpy().copy())
            trackers.append(trackers_of(layer))
            for parameter in layer.parameters():
                state = optimizer.state.get(parameter, {})
                moments.append([state[key].detach().numpy().copy() for key in ("exp_avg", "exp_avg_sq")
                                if key in state])
        return {"cores": cores, "biases": biases, "moments": moments, "trackers": trackers,
                "means": [means_of(layer) for layer in self.layers],
                "ranks": [tuple(layer.ranks) for layer in self.layers], "step": self.trainer.global_step}

    def load_weights(self, state: dict[str, Any]) -> None:
        """Replace every layer's shadow cores and bias by float arrays of the current shapes (all checked first)."""
        if not isinstance(state, dict):
            raise HwTrainError(f"load_weights: state must be a dict, got {type(state).__name__}")
        for key in ("cores", "biases"):
            if key not in state:
                raise HwTrainError(f"load_weights: state lacks {key!r}")
            if len(state[key]) != len(self.layers):
                raise HwTrainError(f"load_weights: {len(state[key])} layers of {key}, the model has {len(self.layers)}")
        checked = []
        for index, (layer, cores, bias) in enumerate(zip(self.layers, state["cores"], state["biases"])):
            mine = [*layer.cores, *([] if layer.bias is None else [layer.bias])]
            given = [*cores, *([] if layer.bias is None else [bias])]
            if len(given) != len(mine):
                raise HwTrainError(f"load_weights: layer {index} has {len(layer.cores)} cores, got {len(cores)}")
            for parameter, value in zip(mine, given):
                value = np.asarray(value)
                if value.shape != tuple(parameter.shape) or not np.issubdtype(value.dtype, np.floating):
                    raise HwTrainError(f"load_weights: layer {index} needs float arrays of shape "
                                       f"{tuple(parameter.shape)}, got {value.dtype} {value.shape}")
                if not np.all(np.isfinite(value)):
                    raise HwTrainError(f"load_weights: layer {index} holds values that are not finite")
                checked.append((parameter, torch.from_numpy(value.astype(np.float32))))
        with torch.no_grad():
            for parameter, value in checked:
                parameter.copy_(value)

    # -- steps

    def train_step(self, x, y) -> float | None:
        """One scheduled step of the trainer (loss on the host, TT layers on the PEs); the schedule advances by one.

        Returns the batch's mean cross-entropy, or None when a technique skipped the batch.
        """
        x, y = _tensor(x, torch.float32), _tensor(y, torch.int64)
        if x.ndim < 2 or int(np.prod(x.shape[1:])) != self.layers[0].in_features or y.shape != (x.shape[0],):
            raise HwTrainError(f"batch x {tuple(x.shape)}, y {tuple(y.shape)}: need (n, "
                               f"{self.layers[0].in_features}) or images of as many pixels, and (n,)")
        started = time.perf_counter()
        loss = self.trainer.train_step(x, y)
        self.trainer.global_step += 1
        self.step_seconds += time.perf_counter() - started
        self.steps += 1
        return loss

    def fit(self, data: Dataset | None = None, epochs: int | None = None, *, progress: bool = True
            ) -> list[dict[str, Any]]:
        """Train the configuration's remaining epochs, or the next ``epochs`` of them (:meth:`Trainer.fit`: its
        order, schedule, evaluation, rank pruning); split into several calls the run is the same as in one.

        ``data`` replaces the dataset for this and later epochs; the schedule was laid out for the
        constructor's, so it must have as many training samples. Returns the trainer's history, one row per
        epoch (test accuracy %, loss, modelled energy pJ).
        """
        if data is not None:
            if not isinstance(data, Dataset):
                raise HwTrainError(f"data must be a Dataset, got {type(data).__name__}")
            if data.train_size != self.trainer.dataset.train_size:
                raise HwTrainError(f"data has {data.train_size} training samples; the schedule was laid out for "
                                   f"{self.trainer.dataset.train_size} (give other data as dataset=... when "
                                   "constructing the trainer)")
        remaining = self.trainer.config.optim.epochs - self.trainer.epoch
        if epochs is not None and (isinstance(epochs, bool) or not isinstance(epochs, int)
                                   or not 1 <= epochs <= remaining):
            raise HwTrainError(f"epochs={epochs!r}: {remaining} of the configured "
                               f"{self.trainer.config.optim.epochs} epochs remain")
        if remaining == 0:
            raise HwTrainError(f"all {self.trainer.config.optim.epochs} configured epochs are trained")
        if data is not None:
            self.trainer.dataset = data
        self.trainer.progress = progress
        started, before = time.perf_counter(), self.trainer.global_step
        self.result = self.trainer.fit(until_epoch=self.trainer.epoch + (remaining if epochs is None else epochs))
        self.step_seconds += time.perf_counter() - started
        self.steps += self.trainer.global_step - before
        return self.trainer.history

    def predict(self, x) -> np.ndarray:
        """Predicted class per sample (forward passes on the PEs, scales not re-aimed)."""
        model = self.trainer.model
        model.eval()
        try:
            with torch.no_grad():
                return model(_tensor(x, torch.float32)).argmax(dim=1).numpy()
        finally:
            model.train()

    def evaluate(self, x, y) -> float:
        """Accuracy in [0, 1]."""
        return float(np.mean(self.predict(x) == np.asarray(y)))

    def throughput(self) -> dict[str, float]:
        """Steps and their seconds (host and PEs), PE transactions, MACs, the runner's seconds, the replayed calls."""
        runner = self.backend.runner
        return {"steps": self.steps, "seconds": self.step_seconds,
                "steps_per_s": self.steps / self.step_seconds if self.step_seconds else 0.0,
                "pe_transactions": runner.transactions, "macs": runner.macs, "runner_s": runner.seconds,
                "macs_per_s": runner.macs / runner.seconds if runner.seconds else 0.0,
                "replayed_transactions": self.backend.replayed, "replay_misses": self.backend.replay_misses}


__all__ = ["ForwardResult", "PeBackend", "PeTTLinear", "TtHwTrainer", "WholeStepTrainer",
           "design_hardware", "pe_forward", "run_on_pes"]
