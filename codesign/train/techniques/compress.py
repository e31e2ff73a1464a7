"""Compressed CNN training (FPGA 2019): kernel-wise pruning, then 8-bit fixed point with a wide weight buffer.

The paper's process (Sec. 4), as this technique runs it inside one training budget:

1. **FP32 warm-up** for ``warmup_epochs`` epochs. During the last of them the
   technique measures max|x| of every blob of every counted layer: its input
   activations, its weights, its weight gradients and the errors arriving at
   its output (training steps only; evaluation passes are not measured).
2. **Kernel-wise pruning** at the end of the warm-up. A kernel is the H×W
   slice ``weight[n, c]`` of a conv; it is pruned whole. Layer by layer, the
   search masks the ``step_percent``, ``2 step_percent``, ... per cent of the
   layer's kernels with the smallest L2 norm (norms of the warm-up weights, so
   the masks of one layer are nested; ties go to the lower flat index
   ``n * C + c``) and keeps the largest share before the first step whose
   accuracy drop on the validation slice exceeds ``drop_budget`` points of the
   unpruned model. The budget is cumulative: a later layer may only use what
   the earlier ones left, so the visiting ``order`` matters; the default,
   ``largest_first``, gives it first to the layers that hold most kernels (the
   paper only says "layer by layer"). As in the paper, nothing is trained
   between search steps; the fixed-point epochs that follow are the
   fine-tuning, so the budget bounds the damage *before* fine-tuning.
   *Validation slice:* the run's held-out validation split when the data has
   one (``data.validation_fraction > 0``: images the model never trains on);
   otherwise a fixed stratified ``validation_fraction`` of the training set
   (seeded by ``data.split_seed``) that stays in the training set, so the
   compressed arm trains on exactly the baseline's data and steps. Either way
   the test set is never consulted for a decision. BatchNorm uses the slice's own
   statistics in these passes (see :meth:`Technique._validation_correct`). The
   search's forward passes run in FP32 and are charged to the ledger (forward
   phase), since they are work the method does;
   ``report()['search_forward_macs']`` gives their count.
   *What is pruned:* every conv, including the 1×1 shortcut convs
   (``prune_shortcuts=True``; a 1×1 kernel is a single weight); the stem
   is a conv like the others. The fully connected head is never pruned (the
   paper's kernel-wise method is for conv layers).
3. **Fixed-point training** for the remaining epochs. Activations, weights,
   errors and weight gradients are ``bits``-bit (8) fixed point with a
   power-of-two scale frozen from the measured max: ``frac_bits =
   power_of_two_frac_bits(max|x|, bits)``, the nearest 2^k that fits the max, so
   rescaling is a shift. The weights live in a ``buffer_bits``-wide buffer
   (16, 24 or 32) of the *same* scale with ``buffer_bits - bits`` extra fraction
   bits; the forward and error passes see only its top ``bits`` bits
   (:func:`codesign.numerics.msb_slice`, i.e. truncation, which is what wiring
   the MSBs does). Each optimiser step is applied to the buffer and the result
   rounded to the buffer's grid (nearest even), so an update smaller than one
   8-bit step still accumulates in the low bits. A 24-bit buffer resolves 2^-16
   of an 8-bit step; a 16-bit one only 2^-8, and rounds away any update below
   half of that (the paper's ablation). ``report()['buffer_updates']``
   counts the updates the optimiser proposed and those the buffer rounded away.

Pruned weights stay exactly zero: gradients are masked after backward, the
optimiser's momentum is zeroed for pruned kernels when they are pruned, and the
mask is applied to the weights after every step.

MAC counting: the operator-sparse (forward, error) and result-sparse (weight
gradient) PEs of the paper skip pruned kernels, so a pruned conv's MACs per
output are ``unpruned kernels × H × W / out_channels`` (an exact fraction; the
product with the number of outputs is an integer). The technique sets that as an
instance override of ``layer.macs_per_output`` whenever masks change.

Deviations, documented: BatchNorm and biases stay float32 (they are not MAC
operands); the optimiser (SGD, momentum, weight decay) computes each update in
float from the 8-bit weight gradient, and only its result is rounded into the
buffer; the weight storage and DRAM traffic in the ledger remain dense
(a CSB store would hold only unpruned kernels plus indices); buffers wider than
24 bits need float64 weight tensors (float32 cannot hold a 32-bit code), so for
``buffer_bits=32`` the quantised layers keep float64 master weights from attach
on, the warm-up included (it still computes in float32).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np
import torch

from codesign.loops.pruning import ORDERS, kernels_to_prune
from codesign.numerics import FixedFormat
from codesign.train.quantize import msb_slice
from codesign.pe.csb.golden import round_into_buffer, split_dyadic
from codesign.train.config import ConfigError, require
from codesign.train.data import stratified_split
from codesign.train.layers import CountedConv2d, attach_ledger, counted_layers
from codesign.numerics.scales import power_of_two_frac_bits
from codesign.train.precision import FixedQuantizer, LayerPrecision
from codesign.train.techniques import base

BUFFER_BITS = (16, 24, 32)
BLOBS = ("activation", "weight", "error", "gradient")
FLOAT32_EXACT_BITS = 24  # a float32 significand holds every signed code up to this width


@dataclass(frozen=True, kw_only=True)
class Config:
    """Kernel-wise pruning plus fixed-point training; percentages are of a layer's kernels, budgets in points."""

    warmup_epochs: int = 5
    drop_budget: float = 2.0
    step_percent: int = 10
    max_percent: int = 90
    validation_fraction: float = 0.2
    order: str = "largest_first"
    prune_shortcuts: bool = True
    bits: int = 8
    buffer_bits: int = 24

    def validate(self, prefix: str = "techniques.compress") -> None:
        def is_int(value: Any) -> bool:
            return isinstance(value, int) and not isinstance(value, bool)

        require(is_int(self.warmup_epochs) and self.warmup_epochs >= 1, f"{prefix}.warmup_epochs",
                f"must be an int >= 1 (scales are measured in the last FP32 epoch), got {self.warmup_epochs!r}")
        require(isinstance(self.drop_budget, (int, float)) and not isinstance(self.drop_budget, bool)
                and math.isfinite(self.drop_budget) and self.drop_budget >= 0, f"{prefix}.drop_budget",
                f"must be a number of accuracy points >= 0, got {self.drop_budget!r}")
        require(is_int(self.step_percent) and 1 <= self.step_percent <= 100, f"{prefix}.step_percent",
                f"must be an int in [1, 100], got {self.step_percent!r}")
        require(is_int(self.max_percent) and 0 <= self.max_percent <= 100, f"{prefix}.max_percent",
                f"must be an int in [0, 100], got {self.max_percent!r}")
        require(isinstance(self.validation_fraction, float) and 0 < self.validation_fraction < 1,
                f"{prefix}.validation_fraction", f"must be a float in (0, 1), got {self.validation_fraction!r}")
        require(self.order in ORDERS, f"{prefix}.order", f"must be one of {ORDERS}, got {self.order!r}")
        require(isinstance(self.prune_shortcuts, bool), f"{prefix}.prune_shortcuts", "must be a bool")
        require(is_int(self.bits) and 2 <= self.bits <= 16, f"{prefix}.bits", f"must be an int in [2, 16], got {self.bits!r}")
        require(is_int(self.buffer_bits) and self.buffer_bits in BUFFER_BITS and self.buffer_bits > self.bits,
                f"{prefix}.buffer_bits", f"must be one of {BUFFER_BITS} and wider than bits, got {self.buffer_bits!r}")


# -- kernel-wise pruning ------------------------------------------------------

def kernel_norms(weight: torch.Tensor) -> torch.Tensor:
    """L2 norm of every H×W kernel of a conv weight (N, C, H, W), as float64 (N, C)."""
    return weight.detach().to(torch.float64).flatten(2).norm(dim=2)


def kernel_order(weight: torch.Tensor) -> torch.Tensor:
    """Flat kernel indices ``n * C + c``, smallest L2 norm first; equal norms keep index order."""
    return torch.sort(kernel_norms(weight).flatten(), stable=True).indices


def kernel_mask(weight: torch.Tensor, percent: int, order: torch.Tensor | None = None) -> torch.Tensor:
    """Keep-mask (N, C), False for the ``percent`` per cent of kernels with the smallest L2 norm."""
    order = kernel_order(weight) if order is None else order
    keep = torch.ones(order.numel(), dtype=torch.bool)
    keep[order[:kernels_to_prune(order.numel(), percent)]] = False
    return keep.reshape(weight.shape[:2])


def apply_mask(weight: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
    """``weight`` with pruned kernels set to +0.0 (not -0.0)."""
    return torch.where(keep[..., None, None] if weight.dim() == 4 else keep, weight, torch.zeros((), dtype=weight.dtype))


@dataclass(frozen=True)
class UnprunedMacsPerOutput:
    """A conv's ``macs_per_output`` override: MACs per output element that touch unpruned kernels.

    ``unpruned_kernels * H * W / out_channels`` as an exact Fraction; times the
    number of outputs (a multiple of ``out_channels``) it is an integer.
    """

    value: Fraction

    def __call__(self) -> Fraction:
        return self.value


def unpruned_macs_per_output(layer: CountedConv2d, keep: torch.Tensor) -> UnprunedMacsPerOutput:
    kh, kw = layer.kernel_size
    return UnprunedMacsPerOutput(Fraction(int(keep.sum()) * kh * kw, layer.out_channels))


def prune_order(layers: dict[str, Any], *, order: str, shortcuts: bool) -> list[str]:
    """Names of the convs the search visits, in visiting order.

    ``network``: input to output. ``largest_first``: most kernels first (ties in
    network order), so the shared drop budget goes first to the layers that hold
    most of the weights, which also dominate weight storage and traffic.
    """
    names = [name for name, layer in layers.items() if isinstance(layer, CountedConv2d)
             and (shortcuts or tuple(layer.kernel_size) != (1, 1))]
    if order == "largest_first":
        names.sort(key=lambda name: -layers[name].out_channels * layers[name].in_channels)  # stable
    return names


# -- fixed point with a wide weight buffer --------------------------------------

@dataclass(frozen=True)
class MsbWeightQuantizer(FixedQuantizer):
    """The top ``bits`` bits of a ``buffer_bits``-wide weight buffer, which shares this quantiser's scale.

    The buffer format has ``frac_bits + buffer_bits - bits`` fraction bits; its
    top ``bits`` bits are a ``FixedFormat(bits, frac_bits)`` value (truncated
    toward minus infinity, as wiring the MSBs does). Being a FixedQuantizer of
    ``bits`` bits, the counted layers accumulate it exactly and count ``bits``-bit MACs.
    """

    buffer_bits: int = 24

    def __post_init__(self) -> None:
        if self.frac_bits is None:
            raise ValueError("a weight buffer needs a frozen frac_bits")
        super().__post_init__()
        self.buffer_format  # validates the wide format

    @property
    def buffer_format(self) -> FixedFormat:
        return FixedFormat(bits=self.buffer_bits, frac_bits=self.frac_bits + self.buffer_bits - self.bits)

    def store(self, weight: torch.Tensor) -> torch.Tensor:
        """Round ``weight`` onto the buffer's grid (nearest even, saturating): the update lands in the buffer.

        The rounding is the PE's UPD rule, :func:`codesign.pe.csb.golden.round_into_buffer`,
        applied to the exact value of each float (NaN passes through).
        """
        fmt = self.buffer_format
        if weight.dtype == torch.float32 and fmt.bits > FLOAT32_EXACT_BITS:
            raise ValueError(
                f"a {fmt.bits}-bit fixed-point code does not fit a float32 tensor exactly; use float64 tensors or encode()"
            )
        values = weight.detach().cpu().numpy().astype(np.float64)
        nan = np.isnan(values)
        numerator, shift = split_dyadic(np.ldexp(np.where(nan, 0.0, values), fmt.frac_bits))
        codes = round_into_buffer(numerator, shift, buffer_bits=fmt.bits)
        stored = np.where(nan, values, np.ldexp(codes.astype(np.float64), -fmt.frac_bits))
        return torch.from_numpy(stored).to(dtype=weight.dtype, device=weight.device)

    def __call__(self, tensor: torch.Tensor) -> torch.Tensor:
        values, _ = msb_slice(tensor.detach(), self.buffer_format, self.bits)
        return values


# -- the technique -----------------------------------------------------------

class Technique(base.Technique):
    name = "compress"

    def __init__(self, config: Config) -> None:
        self.config = config
        self.phase = "warmup"  # -> "fixed" at the end of the warm-up
        self.max_abs: dict[str, dict[str, float]] = {}
        self.frac_bits: dict[str, dict[str, int]] = {}
        self.masks: dict[str, torch.Tensor] = {}
        self.search_log: list[dict[str, Any]] = []
        self.validation_reference: dict[str, Any] = {}
        self.validation_source = ""
        self.search_forward_macs = 0
        self.weight_quantizers: dict[str, MsbWeightQuantizer] = {}
        self.gradient_quantizers: dict[str, FixedQuantizer] = {}
        self.output_positions: dict[str, int] = {}
        self.updates_by_epoch: dict[int, list[int]] = {}  # epoch -> [updates lost in the buffer, updates proposed]
        self._before_step: dict[str, torch.Tensor] = {}

    # -- set-up ------------------------------------------------------------
    def attach(self, trainer) -> None:
        epochs = trainer.config.optim.epochs
        if self.config.warmup_epochs >= epochs:
            raise ConfigError(f"techniques.compress.warmup_epochs: must be < optim.epochs ({epochs}) so that "
                              f"fixed-point training has epochs left, got {self.config.warmup_epochs}")
        self.trainer = trainer
        self.layers = {layer.layer_name: layer for layer in counted_layers(trainer.model)}
        self.prunable = prune_order(self.layers, order=self.config.order, shortcuts=self.config.prune_shortcuts)
        if self.config.buffer_bits > FLOAT32_EXACT_BITS:
            for layer in self.layers.values():
                layer.weight.data = layer.weight.data.to(torch.float64)
        self.validation_index: torch.Tensor | np.ndarray | None = None  # rows of the training slice, if one is used
        if trainer.dataset.has_validation:
            self.validation_source = "held-out validation split"
        else:
            self.validation_source = "training-set slice"
            _, self.validation_index = stratified_split(trainer.dataset.train_y.numpy(),
                                                        self.config.validation_fraction, trainer.config.data.split_seed)
        for name, layer in self.layers.items():
            layer.register_forward_pre_hook(self._activation_hook(name))
            layer.register_forward_hook(self._output_hook(name))

    def _measuring(self, module: torch.nn.Module | None = None) -> bool:
        """True during training steps of the last FP32 epoch, where the frozen scales are measured."""
        return (self.phase == "warmup" and self.trainer.epoch == self.config.warmup_epochs - 1
                and (module is None or (module.training and torch.is_grad_enabled())))

    def _record(self, name: str, blob: str, tensor: torch.Tensor) -> None:
        value = float(tensor.detach().abs().max()) if tensor.numel() else 0.0
        entry = self.max_abs.setdefault(name, {})
        entry[blob] = max(entry.get(blob, 0.0), value)

    def _activation_hook(self, name: str):
        def hook(module, args):
            if self._measuring(module):
                self._record(name, "activation", args[0])
        return hook

    def _output_hook(self, name: str):
        def hook(module, args, output):
            self.output_positions[name] = int(output[0, 0].numel()) if output.dim() > 2 else 1
            if self._measuring(module) and output.requires_grad:
                output.register_hook(lambda grad: self._record(name, "error", grad))
        return hook

    # -- per-step hooks ----------------------------------------------------
    def after_backward(self, trainer) -> None:
        if self._measuring():
            for name, layer in self.layers.items():
                self._record(name, "weight", layer.weight)
                if layer.weight.grad is not None:
                    self._record(name, "gradient", layer.weight.grad)
        if self.phase != "fixed":
            return
        for name, layer in self.layers.items():
            self._before_step[name] = layer.weight.detach().clone()
            grad = layer.weight.grad
            if grad is None:
                continue
            grad = self.gradient_quantizers[name](grad)
            if name in self.masks:
                grad = apply_mask(grad, self.masks[name])
            layer.weight.grad = grad

    def after_step(self, trainer) -> None:
        if self.phase != "fixed":
            return
        proposed = {name: layer.weight.detach() != self._before_step[name] for name, layer in self.layers.items()}
        self._store_weights()
        counts = self.updates_by_epoch.setdefault(trainer.epoch, [0, 0])
        for name, layer in self.layers.items():
            lost = proposed[name] & (layer.weight.detach() == self._before_step[name])
            counts[0] += int(lost.sum())
            counts[1] += int(proposed[name].sum())
        self._before_step = {}

    def _store_weights(self) -> None:
        """Round every quantised weight onto its wide buffer and re-zero pruned kernels."""
        with torch.no_grad():
            for name, layer in self.layers.items():
                stored = self.weight_quantizers[name].store(layer.weight)
                if name in self.masks:
                    stored = apply_mask(stored, self.masks[name])
                layer.weight.copy_(stored)

    def on_epoch_end(self, trainer, epoch: int, metrics: dict[str, float]) -> None:
        if self.phase == "warmup" and epoch == self.config.warmup_epochs - 1:
            self._freeze_scales()
            self._prune()
            self.phase = "fixed"
            self._install_fixed_point()
            self._store_weights()

    # -- the switch to fixed point -------------------------------------------
    def _freeze_scales(self) -> None:
        bits = self.config.bits
        self.frac_bits = {name: {blob: power_of_two_frac_bits(self.max_abs.get(name, {}).get(blob, 0.0), bits)
                                 for blob in BLOBS} for name in self.layers}

    def _install_fixed_point(self) -> None:
        """Layer precisions and gradient quantisers from the frozen scales (derived state, rebuilt on resume)."""
        bits = self.config.bits
        for name, layer in self.layers.items():
            frac = self.frac_bits[name]
            self.weight_quantizers[name] = MsbWeightQuantizer(bits, frac["weight"], buffer_bits=self.config.buffer_bits)
            self.gradient_quantizers[name] = FixedQuantizer(bits, frac["gradient"])
            layer.precision = LayerPrecision(activation=FixedQuantizer(bits, frac["activation"]),
                                             weight=self.weight_quantizers[name], grad=FixedQuantizer(bits, frac["error"]))

    def _set_mask(self, name: str, keep: torch.Tensor, original: torch.Tensor) -> None:
        layer = self.layers[name]
        with torch.no_grad():
            layer.weight.copy_(apply_mask(original, keep))
        self.masks[name] = keep
        layer.macs_per_output = unpruned_macs_per_output(layer, keep)

    def _validation_correct(self) -> int:
        """Correct answers on the validation slice, BatchNorm recalibrated; the forward MACs are charged.

        BatchNorm normalises with the slice's own statistics (one forward pass in
        training mode, every BN buffer restored afterwards): pruning shifts the
        channel statistics, and the running averages of the unpruned network
        would charge that shift to the pruned kernels although the first steps
        of fine-tuning re-estimate it.
        """
        trainer = self.trainer
        x, y = self._validation_data()
        norms = [module for module in trainer.model.modules() if isinstance(module, torch.nn.modules.batchnorm._BatchNorm)]
        saved = [{key: value.clone() for key, value in module.named_buffers()} for module in norms]
        before = trainer.ledger.total_macs("forward")
        attach_ledger(trainer.model, trainer.ledger)
        trainer.model.train()
        with torch.no_grad():
            correct = int((trainer.model(x).argmax(dim=1) == y).sum())
            for module, buffers in zip(norms, saved):
                for key, value in module.named_buffers():
                    value.copy_(buffers[key])
        attach_ledger(trainer.model, None)
        self.search_forward_macs += trainer.ledger.total_macs("forward") - before
        return correct

    def _validation_data(self) -> tuple[torch.Tensor, torch.Tensor]:
        """The images and labels the pruning search reads (see the module docstring)."""
        dataset = self.trainer.dataset
        if self.validation_index is None:
            return dataset.validation_x, dataset.validation_y
        return dataset.train_x[self.validation_index], dataset.train_y[self.validation_index]

    def _prune(self) -> None:
        """Greedy layer-by-layer search in ``step_percent`` steps within the cumulative ``drop_budget``."""
        samples = len(self.validation_index) if self.validation_index is not None else int(
            self.trainer.dataset.validation_y.numel())
        reference = self._validation_correct()
        self.validation_reference = {"correct": reference, "samples": samples, "source": self.validation_source}

        def within_budget(correct: int) -> bool:  # (reference - correct) / samples * 100 <= budget, exactly
            return 100 * (reference - correct) <= self.config.drop_budget * samples

        step, top = self.config.step_percent, self.config.max_percent
        for name in self.prunable:
            original = self.layers[name].weight.detach().clone()
            order = kernel_order(original)
            accepted = 0
            for percent in range(step, top + 1, step):
                self._set_mask(name, kernel_mask(original, percent, order), original)
                correct = self._validation_correct()
                ok = within_budget(correct)
                self.search_log.append({"layer": name, "percent": percent, "correct": correct, "accepted": ok})
                if not ok:
                    break
                accepted = percent
            self._set_mask(name, kernel_mask(original, accepted, order), original)
        self._zero_pruned_momentum()

    def _zero_pruned_momentum(self) -> None:
        for name, keep in self.masks.items():
            state = self.trainer.optimizer.state.get(self.layers[name].weight, {})
            buffer = state.get("momentum_buffer")
            if buffer is not None:
                buffer.copy_(apply_mask(buffer, keep))

    # -- reporting and checkpoints -------------------------------------------
    def pruning_summary(self) -> dict[str, Any]:
        """Kernels, weights and forward MACs pruned, per layer and overall.

        A 1x1 conv's kernel is a single weight, so a share of *all* kernels
        mixes two units; the summary therefore also gives the k x k convs
        (kernel size > 1) and the 1x1 convs (the shortcuts) apart, the share
        of weights (conv weights, and every counted layer's weights with the
        unpruned head included), and the share of forward MACs per sample
        removed (pruned / dense, the operator-sparse PE skipping pruned
        kernels; from the output sizes of the last forward pass).
        """
        per_layer, pruned_all, total_all, pruned_prunable, total_prunable = {}, 0, 0, 0, 0
        groups = {"kxk_conv": [0, 0, 0, 0], "pointwise_conv": [0, 0, 0, 0]}  # kernels pruned/total, weights pruned/total
        weights_all = 0
        dense_macs = sparse_macs = Fraction(0)
        for name, layer in self.layers.items():
            dense = type(layer).macs_per_output(layer)
            sparse = layer.macs_per_output()
            positions = self.output_positions.get(name, 0) * getattr(layer, "out_channels", getattr(layer, "out_features", 0))
            dense_macs += positions * dense
            sparse_macs += positions * sparse
            weights_all += int(layer.weight.numel())
            if not isinstance(layer, CountedConv2d):
                continue
            kernels = layer.out_channels * layer.in_channels
            kernel_weights = int(layer.weight[0, 0].numel())
            pruned = kernels - int(self.masks[name].sum()) if name in self.masks else 0
            per_layer[name] = {"pruned": pruned, "kernels": kernels, "fraction": pruned / kernels,
                               "prunable": name in self.prunable, "kernel_size": list(layer.weight.shape[2:]),
                               "pruned_weights": pruned * kernel_weights, "weights": kernels * kernel_weights}
            pruned_all, total_all = pruned_all + pruned, total_all + kernels
            if name in self.prunable:
                pruned_prunable, total_prunable = pruned_prunable + pruned, total_prunable + kernels
            group = groups["kxk_conv" if kernel_weights > 1 else "pointwise_conv"]
            group[0] += pruned
            group[1] += kernels
            group[2] += pruned * kernel_weights
            group[3] += kernels * kernel_weights
        conv_weights = sum(g[3] for g in groups.values())
        pruned_weights = sum(g[2] for g in groups.values())
        return {
            "per_layer": per_layer,
            "fraction_of_prunable_kernels": pruned_prunable / max(1, total_prunable),
            "fraction_of_all_conv_kernels": pruned_all / max(1, total_all),
            "by_kernel_size": {key: {"pruned_kernels": g[0], "kernels": g[1], "kernel_fraction": g[0] / max(1, g[1]),
                                     "pruned_weights": g[2], "weights": g[3], "weight_fraction": g[2] / max(1, g[3])}
                               for key, g in groups.items()},
            "pruned_weights": pruned_weights,
            "fraction_of_conv_weights": pruned_weights / max(1, conv_weights),
            "fraction_of_all_weights": pruned_weights / max(1, weights_all),
            "forward_macs_dense": float(dense_macs), "forward_macs_pruned": float(dense_macs - sparse_macs),
            "forward_mac_fraction_removed": float(1 - sparse_macs / dense_macs) if dense_macs else 0.0,
        }

    def report(self) -> dict[str, Any]:
        return {
            "phase": self.phase, "bits": self.config.bits, "buffer_bits": self.config.buffer_bits,
            "warmup_epochs": self.config.warmup_epochs, "drop_budget": self.config.drop_budget,
            "frac_bits": self.frac_bits, "max_abs": self.max_abs, "pruning": self.pruning_summary(),
            "validation": self.validation_reference, "search_log": self.search_log,
            "search_forward_macs": self.search_forward_macs, "buffer_updates": self.buffer_update_summary(),
        }

    def buffer_update_summary(self) -> dict[str, Any]:
        """Weight updates the optimiser proposed in the fixed-point phase, and those the buffer rounded away."""
        lost = sum(counts[0] for counts in self.updates_by_epoch.values())
        proposed = sum(counts[1] for counts in self.updates_by_epoch.values())
        return {"lost": lost, "proposed": proposed, "lost_fraction": lost / proposed if proposed else 0.0,
                "by_epoch": {str(epoch): {"lost": counts[0], "proposed": counts[1]}
                             for epoch, counts in sorted(self.updates_by_epoch.items())}}

    def state_dict(self) -> dict[str, Any]:
        return {"phase": self.phase, "max_abs": self.max_abs, "frac_bits": self.frac_bits,
                "masks": {name: keep.clone() for name, keep in self.masks.items()}, "search_log": self.search_log,
                "validation_reference": self.validation_reference, "search_forward_macs": self.search_forward_macs,
                "updates_by_epoch": {epoch: list(counts) for epoch, counts in self.updates_by_epoch.items()}}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.phase = state["phase"]
        self.max_abs = {name: dict(entry) for name, entry in state["max_abs"].items()}
        self.frac_bits = {name: dict(entry) for name, entry in state["frac_bits"].items()}
        self.search_log = list(state["search_log"])
        self.validation_reference = dict(state["validation_reference"])
        self.search_forward_macs = state["search_forward_macs"]
        self.updates_by_epoch = {epoch: list(counts) for epoch, counts in state["updates_by_epoch"].items()}
        self.masks = {}
        for name, keep in state["masks"].items():
            self.masks[name] = keep.clone()
            self.layers[name].macs_per_output = unpruned_macs_per_output(self.layers[name], keep)
        if self.phase == "fixed":
            self._install_fixed_point()


def pe_needs(training) -> list:
    """The CSB PE (FC or 3x3 kernels as the model has them); its operand and buffer widths are the PE's own, so
    a configuration asking other widths is refused."""
    from codesign.pe.csb.spec import CsbSpec

    compress, contract = training.techniques["compress"], CsbSpec()
    for setting, wanted in (("bits", contract.data_bits), ("buffer_bits", contract.buffer_bits)):
        if getattr(compress, setting) != wanted:
            raise ConfigError(f"techniques.compress.{setting}: the CSB PE implements {wanted}-bit "
                              f"{'operands' if setting == 'bits' else 'weight buffers'}, the configuration asks "
                              f"{getattr(compress, setting)}")
    kernel = 3 if training.model.name in ("resnet", "convnet") else 1
    fields = {"kernel": kernel}
    if training.model.name == "convnet" and 2 in training.model.strides + training.model.block_strides:
        fields["max_stride"] = 2  # its stride-2 convs step at stride 2 on the PE
    return [("csb", fields,
             f"kernel-wise compressed training: {compress.bits}-bit operands in CSB blocks, {kernel}x{kernel} kernels")]
