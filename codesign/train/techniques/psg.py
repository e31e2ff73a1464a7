"""PSG, predictive sign gradient descent (E²-Train, NeurIPS 2019, Sec. 3.3 and 4.4), with optional SWA.

What it does to each counted layer (conv and linear), at ``attach``:

* precision: 8-bit activations, 8-bit weights, 16-bit output gradients, all
  signed fixed point with a power-of-two scale (``FixedQuantizer``).
  **Scales are dynamic per tensor**: every call picks the fraction bits from
  that tensor's max|x| (a max-reduction and a shift in hardware). Gradients
  shrink by orders of magnitude during training and differ from layer to
  layer, so a frozen scale would either saturate early or flush late
  gradients to zero (the paper does not say which it used). A consequence
  for the predictor: the MSB slices are relative to each tensor's own max,
  so the top bits always carry the tensor's largest values.
* weight gradient, through ``layer.weight_grad_fn`` (Eq. 2 of the paper)::

      x_msb = top 4 bits of the 8-bit activation code    (codesign.numerics.msb_slice)
      g_msb = top 10 bits of the 16-bit gradient code
      g_pred = weight_grad(x_msb, g_msb)                   (4x10-bit MACs, every weight)
      g~[i] = sign(g_pred[i])  if |g_pred[i]| >= beta * max|g_pred|  and g_pred[i] != 0
              sign(g_full[i])  otherwise, g_full = weight_grad(x8, g16)  (8x16-bit MACs)

  The threshold is adaptive per layer and per step (beta times that layer's
  max|g_pred|, Sec. 3.3). A predictor value of exactly zero carries no sign,
  so it never counts as a prediction (this only matters when a whole layer's
  predictor is zero and the threshold is 0).

  How a slice is read (``msb_reconstruction``). The top bits of a two's
  complement code are its floor: ``x - x_msb`` lies in [0, one slice step),
  always >= 0. Activations are ReLU outputs (>= 0), so the gradient's floor
  error, summed over a weight's N*H*W terms, always pushes g_pred the same
  way (negative); in layers with thousands of terms it outweighs the true
  gradient, the predicted signs agree with the full ones about half the
  time, the weights drift one way each step and the BatchNorm running
  statistics cannot follow (ResNet-8/digits: test accuracy collapses to
  10-30% after the first epoch, ``"floor"``). The paper's guarantee (Eq. 3)
  treats ``x - x_msb`` as zero-mean quantisation noise of step Delta; the
  default ``"midpoint"`` reads each slice as the centre of the codes it
  stands for (a constant 1 appended below the slice), which makes that error
  zero-mean. The 4x10-bit multipliers stay: by linearity the midpoint adds
  ``h_x * sum(g_msb) + h_g * sum(x_msb)`` per weight, sums shared across
  output (resp. input) channels; they are charged as extra predictor MACs.
* the update: the trainer's SGD (momentum, weight decay, LR schedule as
  configured) applied to the sign gradient, i.e. signSGD with momentum, as
  the paper does (it lowers the initial LR from 0.1 to 0.03 for PSG runs
  because signSGD prefers small LRs, Sec. 4.1; the LR belongs to the run's
  ``optim`` config). The paper does not scale the sign, and neither do we.
  With ``sign_other_parameters`` (default) the parameters that carry no MACs
  (BatchNorm scale/shift, layer biases) are updated with the sign of their
  gradient too, so the whole base model trains with one signSGD rule at one
  LR. Parameters added to the model after PSG attaches (e.g. SLU gates) are
  left alone.

Cost accounting (the hook records its own ``weight_grad`` costs in
``layer.ledger``; forward and error passes are recorded by the layer at
8x8 and 16x8 bits):

* MACs: every weight's predictor dot product at 10x4 bits (the ledger stores
  weight-gradient MACs as grad bits x activation bits; the midpoint
  reading's shared sums are added there too, see
  :meth:`Technique.midpoint_correction_macs`), plus, only for the weights
  that fell back, the partial products that complete the full 16x8-bit dot
  product: the MSB partial products are part of the full product (Sec. 3.3),
  so with ``g = g_m + g_l`` and ``x = x_m + x_l`` a fall-back weight adds
  ``g_m x_l`` (10x4 bits) and ``g_l x`` (6x8 bits), 88 bit-products where a
  second full MAC would be 128. Every partial product is charged once.
* DRAM bits: the operands are stored as bit planes, so the predictor streams
  only the MSB planes (10 bits of every gradient, 4 bits of every
  activation); the fall-back streams the LSB planes (6 + 4 bits) only of the
  output and input channels that hold at least one fall-back weight; the
  result is written as a ternary sign (2 bits per weight) instead of 32 bits.
  (The simulation computes the full gradient for every weight so that it can
  pick the fall-back signs; only the ones used are charged.)

SWA (stochastic weight averaging, the paper's [64], SWALP): with ``swa`` the
float32 parameters are averaged once per epoch over the last ``swa_epochs``
epochs. After the last epoch the averaged weights replace the model's, the
BatchNorm running statistics are recomputed for them (running stats reset,
then one forward pass over the training set in train mode with a cumulative
average, in the layers' 8-bit precision and counted in the ledger as forward
MACs: the pass is real work), and the averaged model is the one evaluated:
the run's final test accuracy is the SWA model's; the last iterate's is kept
in the report. The trainer's LR schedule runs on through the averaging
window (cosine, so the averaged iterates are the low-LR tail of the run;
SWALP holds the LR constant there instead), and the running sums of the
parameters (float64) are in ``state_dict``.

The statistic the paper quotes (>= 60% of weights predicted at beta = 0.05,
Sec. 4.4) is ``report()["predicted_fraction"]``, per layer, overall, and per
epoch.

``predict=False`` keeps only the precision (8-bit x/w, 16-bit g, the same
dynamic scales) with the full weight gradient and ordinary SGD: the plain
fixed-point arm, which separates what quantisation saves from what the
prediction saves.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch
from torch import nn

from codesign.numerics import FixedFormat
from codesign.train.quantize import msb_slice, quantize
from codesign.train.config import ConfigError, require
from codesign.train.layers import CountedMixin, attach_ledger, counted_layers
from codesign.train.precision import FixedQuantizer, LayerPrecision
from codesign.train.techniques.base import FIXED_POINT_ARRAY
from codesign.train.techniques.base import Technique as BaseTechnique

if TYPE_CHECKING:
    from codesign.train.trainer import Trainer

SIGN_BITS = 2  # a ternary sign {-1, 0, +1} written per weight
MAX_GRAD_BITS = 24  # float32 tensors hold fixed-point codes exactly up to 24 bits
MAX_OPERAND_BITS = 16
MSB_RECONSTRUCTIONS = ("midpoint", "floor")


def _int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


@dataclass(frozen=True, kw_only=True)
class Config:
    """PSG settings; defaults are the paper's (Sec. 4.4): 8-bit x/w, 16-bit g, 4/10-bit predictors, beta 0.05."""

    beta: float = 0.05
    activation_bits: int = 8
    weight_bits: int = 8
    grad_bits: int = 16
    activation_msb_bits: int = 4
    grad_msb_bits: int = 10
    msb_reconstruction: str = "midpoint"
    sign_other_parameters: bool = True
    swa: bool = False
    swa_epochs: int = 5
    predict: bool = True  # False: the same fixed-point precision with the full gradient and plain SGD (no prediction)

    def validate(self, prefix: str = "psg") -> None:
        require(isinstance(self.beta, (int, float)) and not isinstance(self.beta, bool) and 0 < self.beta <= 1,
                f"{prefix}.beta", f"must be in (0, 1], got {self.beta!r}")
        for name, high in (("activation_bits", MAX_OPERAND_BITS), ("weight_bits", MAX_OPERAND_BITS),
                           ("grad_bits", MAX_GRAD_BITS)):
            value = getattr(self, name)
            require(_int(value) and 2 <= value <= high, f"{prefix}.{name}",
                    f"must be an int in [2, {high}], got {value!r}")
        for name, full in (("activation_msb_bits", "activation_bits"), ("grad_msb_bits", "grad_bits")):
            value, limit = getattr(self, name), getattr(self, full)
            require(_int(value) and 2 <= value <= limit, f"{prefix}.{name}",
                    f"must be an int in [2, {full}={limit}] (a signed slice keeps the sign bit), got {value!r}")
        require(self.msb_reconstruction in MSB_RECONSTRUCTIONS, f"{prefix}.msb_reconstruction",
                f"must be one of {MSB_RECONSTRUCTIONS}, got {self.msb_reconstruction!r}")
        for name in ("sign_other_parameters", "swa", "predict"):
            require(isinstance(getattr(self, name), bool), f"{prefix}.{name}", "must be a bool")
        require(_int(self.swa_epochs) and self.swa_epochs >= 1, f"{prefix}.swa_epochs",
                f"must be an int >= 1, got {self.swa_epochs!r}")


# -- the rule and its pieces (pure functions, tested on hand-made tensors) -----------------


def fixed_format_of(quantizer: Any, quantized: torch.Tensor) -> FixedFormat:
    """The format ``quantizer`` used to produce ``quantized`` (exact for frozen and dynamic scales).

    A dynamic scale is chosen from max|x| of the original tensor. Re-deriving
    it from the quantised tensor gives the same fraction bits, except when a
    negative maximum rounded up to the power of two just outside the range
    (code -2**(bits-1)); then the re-derived scale is one bit coarser and
    cannot represent every value, and the finer one is the one used.
    """
    if not isinstance(quantizer, FixedQuantizer):
        raise TypeError(f"PSG needs fixed-point activations and gradients, got {type(quantizer).__name__}")
    fmt = quantizer.format_for(quantized)
    if quantizer.frac_bits is not None or quantized.numel() == 0:
        return fmt
    values = quantized.detach().to(torch.float64)
    top = 2.0 ** (fmt.bits - 2 - fmt.frac_bits)  # the power of two that set this scale
    if not (float(values.min()) == -top and float(values.abs().max()) == top):
        return fmt  # no negative power-of-two maximum: the re-derived scale is the one used
    if torch.equal(quantize(values, fmt), values):
        return fmt
    finer = dataclasses.replace(fmt, frac_bits=fmt.frac_bits + 1)
    if not torch.equal(quantize(values, finer), values):
        raise ValueError(f"tensor is not on the grid of {fmt} nor of {finer}; was it quantised by {quantizer}?")
    return finer


@dataclass(frozen=True)
class SignDecision:
    """Eq. (2): the sign gradient and which entries took the predictor's sign."""

    sign: torch.Tensor
    predicted: torch.Tensor  # bool, same shape
    threshold: float


def predictive_sign(predicted_grad: torch.Tensor, full_grad: torch.Tensor, beta: float) -> SignDecision:
    """sign(g_pred) where |g_pred| >= beta * max|g_pred| (and g_pred != 0), else sign(g_full)."""
    if predicted_grad.shape != full_grad.shape:
        raise ValueError(f"predictor shape {tuple(predicted_grad.shape)} != gradient shape {tuple(full_grad.shape)}")
    magnitude = predicted_grad.abs()
    threshold = beta * float(magnitude.max()) if magnitude.numel() else 0.0
    predicted = (magnitude >= threshold) & (predicted_grad != 0)
    sign = torch.where(predicted, torch.sign(predicted_grad), torch.sign(full_grad))
    return SignDecision(sign=sign, predicted=predicted, threshold=threshold)


def fallback_dram_bits(layer: CountedMixin, fallback: torch.Tensor, x: torch.Tensor, grad: torch.Tensor,
                       x_lsb_bits: int, grad_lsb_bits: int) -> int:
    """LSB-plane bits the fall-back must stream: only channels holding a fall-back weight (all if grouped)."""
    if not bool(fallback.any()):
        return 0
    out_channels, in_per_group = fallback.shape[0], fallback.shape[1]
    groups = getattr(layer, "groups", 1)
    per_pair = fallback.reshape(out_channels, in_per_group, -1).any(dim=2)
    if groups == 1:
        out_needed, in_needed = int(per_pair.any(dim=1).sum()), int(per_pair.any(dim=0).sum())
    else:
        out_needed, in_needed = out_channels, x.shape[1]
    grad_per_channel = grad.numel() // grad.shape[1]
    x_per_channel = x.numel() // x.shape[1]
    return out_needed * grad_per_channel * grad_lsb_bits + in_needed * x_per_channel * x_lsb_bits


# -- the technique -------------------------------------------------------------------------


class Technique(BaseTechnique):
    name = "psg"

    def __init__(self, config: Config) -> None:
        self.config = config
        self.layers: list[CountedMixin] = []
        self.predicted: dict[str, int] = {}  # weight-gradient entries that took the predictor's sign
        self.total: dict[str, int] = {}  # all weight-gradient entries computed
        self.epoch_predicted = 0
        self.epoch_total = 0
        self.epoch_fractions: list[float] = []
        self.other_parameters: list[nn.Parameter] = []
        self.swa_sum: dict[str, torch.Tensor] = {}
        self.swa_count = 0
        self.swa_start_epoch = 0
        self.swa_result: dict[str, float] = {}

    # -- wiring ------------------------------------------------------------------------
    def precision(self) -> LayerPrecision:
        c = self.config
        return LayerPrecision(activation=FixedQuantizer(c.activation_bits), weight=FixedQuantizer(c.weight_bits),
                              grad=FixedQuantizer(c.grad_bits))

    def attach(self, trainer: Trainer) -> None:
        """Set every counted layer's precision and weight-gradient hook; nothing else in the trainer changes."""
        if "tt" in trainer.config.techniques:
            raise ConfigError("techniques.psg: cannot be combined with tt (psg predicts the weight gradients of "
                              "dense layers; tt's layers hold TT cores, whose gradients tt computes itself)")
        self.layers = counted_layers(trainer.model)
        for layer in self.layers:
            layer.precision = self.precision()
            # without prediction the layer computes (and records) its full 16x8-bit weight gradient itself
            layer.weight_grad_fn = self.weight_grad if self.config.predict else None
            self.predicted.setdefault(layer.layer_name, 0)
            self.total.setdefault(layer.layer_name, 0)
        hooked = {id(layer.weight) for layer in self.layers}
        self.other_parameters = [p for p in trainer.model.parameters() if id(p) not in hooked]
        epochs = trainer.config.optim.epochs
        if self.config.swa and self.config.swa_epochs > epochs:
            raise ConfigError(f"techniques.psg.swa_epochs: must be <= optim.epochs={epochs}, "
                              f"got {self.config.swa_epochs}")
        self.swa_start_epoch = epochs - self.config.swa_epochs

    def predict(self, layer: CountedMixin, xq: torch.Tensor, gq: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(g_pred, g_full) in float64: the predictor from the MSB slices, and the gradient from the full codes.

        Both are exact (float64 sums of integer-code products far below 2**53).
        """
        c = self.config
        x = xq.detach().to(torch.float64)
        g = gq.detach().to(torch.float64)
        x_msb, x_slice = msb_slice(x, fixed_format_of(layer.precision.activation, xq), c.activation_msb_bits)
        g_msb, g_slice = msb_slice(g, fixed_format_of(layer.precision.grad, gq), c.grad_msb_bits)
        if c.msb_reconstruction == "midpoint":
            # read each slice as the centre of the codes it stands for (a constant 1 appended below it)
            x_msb = x_msb + 0.5 * x_slice.scale
            g_msb = g_msb + 0.5 * g_slice.scale
        return layer.weight_grad(x_msb, g_msb), layer.weight_grad(x, g)

    def weight_grad(self, layer: CountedMixin, xq: torch.Tensor, gq: torch.Tensor) -> torch.Tensor:
        """The ``weight_grad_fn`` hook: Eq. (2) for one layer and one batch, with its cost recorded."""
        c = self.config
        predicted_grad, full_grad = self.predict(layer, xq, gq)
        decision = predictive_sign(predicted_grad, full_grad, c.beta)

        weights = decision.sign.numel()
        used = int(decision.predicted.sum())
        fallback = weights - used
        macs = gq.numel() * layer.macs_per_output()  # the full weight-gradient MAC count of this batch
        macs_per_weight = macs // weights
        name = layer.layer_name
        self.predicted[name] = self.predicted.get(name, 0) + used
        self.total[name] = self.total.get(name, 0) + weights
        self.epoch_predicted += used
        self.epoch_total += weights
        if layer.ledger is not None:
            ledger = layer.ledger
            ledger.add_macs(name, "weight_grad", macs + self.midpoint_correction_macs(layer, macs),
                            bits_a=c.grad_msb_bits, bits_b=c.activation_msb_bits, arith="int")
            # the fall-back completes the predictor's MSB product, not a second full one (each pass charged once):
            # g x = g_m x_m + g_m x_l + g_l x, so its remaining partial products are grad-MSB x activation-LSB
            # and grad-LSB x the whole activation
            lsb_grad, lsb_activation = c.grad_bits - c.grad_msb_bits, c.activation_bits - c.activation_msb_bits
            ledger.add_macs(name, "weight_grad", macs_per_weight * fallback, bits_a=c.grad_msb_bits,
                            bits_b=lsb_activation, arith="int")
            ledger.add_macs(name, "weight_grad", macs_per_weight * fallback, bits_a=lsb_grad,
                            bits_b=c.activation_bits, arith="int")
            msb_bits = gq.numel() * c.grad_msb_bits + xq.numel() * c.activation_msb_bits
            lsb_bits = fallback_dram_bits(layer, ~decision.predicted, xq, gq, c.activation_bits - c.activation_msb_bits,
                                          c.grad_bits - c.grad_msb_bits)
            ledger.add_dram(name, "weight_grad", msb_bits + lsb_bits + weights * SIGN_BITS)
        return decision.sign.to(gq.dtype)

    def midpoint_correction_macs(self, layer: CountedMixin, macs: int) -> int:
        """Extra work of the midpoint reading, charged as predictor MACs (it is additions: conservative).

        (g_m + h_g)(x_m + h_x) summed over a weight's terms is the 10x4-bit dot product plus
        h_x * (sum of g_m) and h_g * (sum of x_m). Those sums are shared: the x_m sums by every output
        channel (macs / out_channels additions), the g_m sums by every input channel of a group
        (macs / in_channels_per_group additions).
        """
        if self.config.msb_reconstruction != "midpoint":
            return 0
        shape = layer.weight.shape
        return macs // shape[0] + macs // shape[1]

    # -- hooks -------------------------------------------------------------------------
    def on_epoch_start(self, trainer: Trainer, epoch: int) -> None:
        self.epoch_predicted = 0
        self.epoch_total = 0

    def after_backward(self, trainer: Trainer) -> None:
        if not (self.config.predict and self.config.sign_other_parameters):
            return
        for parameter in self.other_parameters:
            if parameter.grad is not None:
                parameter.grad = torch.sign(parameter.grad)

    def on_epoch_end(self, trainer: Trainer, epoch: int, metrics: dict[str, float]) -> None:
        fraction = self.epoch_predicted / self.epoch_total if self.epoch_total else None
        self.epoch_fractions.append(fraction)
        if fraction is not None:
            metrics["psg_predicted_fraction"] = fraction
        if not self.config.swa or epoch < self.swa_start_epoch:
            return
        self._accumulate(trainer.model)
        if epoch == trainer.config.optim.epochs - 1:
            self._finish_swa(trainer, metrics)

    # -- SWA ---------------------------------------------------------------------------
    def _accumulate(self, model: nn.Module) -> None:
        for name, parameter in model.named_parameters():
            value = parameter.detach().to(torch.float64)
            if name in self.swa_sum:
                self.swa_sum[name] += value
            else:
                self.swa_sum[name] = value.clone()
        self.swa_count += 1

    def _finish_swa(self, trainer: Trainer, metrics: dict[str, float]) -> None:
        """Swap in the averaged weights, recompute BN statistics (counted), and evaluate the averaged model."""
        model = trainer.model
        last_iterate = metrics["test_accuracy"]
        with torch.no_grad():
            for name, parameter in model.named_parameters():
                parameter.copy_((self.swa_sum[name] / self.swa_count).to(parameter.dtype))
        self._recompute_batch_norm(trainer)
        accuracy = trainer.evaluate()
        self.swa_result = {"test_accuracy_swa": accuracy, "test_accuracy_last_iterate": last_iterate,
                           "averaged_epochs": self.swa_count}
        metrics["test_accuracy_last_iterate"] = last_iterate
        metrics["test_accuracy"] = accuracy
        if "validation_accuracy" in metrics:
            metrics["validation_accuracy"] = trainer.validation_accuracy()
        metrics["energy_pj"] = trainer.cost_summary()["total"]["energy_pj"]

    def _recompute_batch_norm(self, trainer: Trainer) -> None:
        norms = [m for m in trainer.model.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm)]
        if not norms:
            return
        momenta = [m.momentum for m in norms]
        for norm in norms:
            norm.reset_running_stats()
            norm.momentum = None  # cumulative average over the pass
        attach_ledger(trainer.model, trainer.ledger)
        trainer.model.train()
        size = trainer.config.optim.batch_size
        x = trainer.dataset.train_x
        with torch.no_grad():
            for start in range(0, x.shape[0], size):
                trainer.model(x[start:start + size])
        attach_ledger(trainer.model, None)
        for norm, momentum in zip(norms, momenta):
            norm.momentum = momentum

    # -- reporting and state -----------------------------------------------------------
    def report(self) -> dict[str, Any]:
        per_layer = {name: (self.predicted[name] / self.total[name] if self.total[name] else None)
                     for name in sorted(self.total)}
        total = sum(self.total.values())
        finite = [f for f in self.epoch_fractions if f is not None]
        report = {
            "beta": self.config.beta,
            "bits": {"activation": self.config.activation_bits, "weight": self.config.weight_bits,
                     "grad": self.config.grad_bits, "activation_msb": self.config.activation_msb_bits,
                     "grad_msb": self.config.grad_msb_bits},
            "scales": "dynamic power-of-two per tensor",
            "predicted_fraction": {
                "overall": sum(self.predicted.values()) / total if total else None,
                "per_layer": per_layer,
                "per_epoch": list(self.epoch_fractions),
                "min_epoch": min(finite) if finite else None,
            },
        }
        if self.config.swa:
            report["swa"] = dict(self.swa_result)
        return report

    def state_dict(self) -> dict[str, Any]:
        return {"predicted": dict(self.predicted), "total": dict(self.total), "epoch_predicted": self.epoch_predicted,
                "epoch_total": self.epoch_total, "epoch_fractions": list(self.epoch_fractions),
                "swa_sum": {name: value.clone() for name, value in self.swa_sum.items()}, "swa_count": self.swa_count,
                "swa_result": dict(self.swa_result)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.predicted = dict(state["predicted"])
        self.total = dict(state["total"])
        self.epoch_predicted = state["epoch_predicted"]
        self.epoch_total = state["epoch_total"]
        self.epoch_fractions = list(state["epoch_fractions"])
        self.swa_sum = {name: value.clone() for name, value in state["swa_sum"].items()}
        self.swa_count = state["swa_count"]
        self.swa_result = dict(state["swa_result"])


def pe_needs(training) -> list:
    """A fixed-point MAC array (not built yet: a design point names it and refuses)."""
    return [(FIXED_POINT_ARRAY, {}, "techniques.psg (fixed-point MACs)")]
