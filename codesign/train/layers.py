"""Convolution and linear layers that quantise per their precision and count the MACs they really compute.

Each layer runs through one autograd function so that all three phases are
under our control: forward (activations x weights), error (output gradient x
weights, skipped for the network input, which needs no gradient) and weight
gradient (output gradient x activations). Techniques may replace the weight
gradient (PSG) through ``layer.weight_grad_fn``.

Accumulation: with fixed-point operands, products and sums are computed in
float64, which is exact for the code widths used here (8- and 16-bit
operands, sums below 2**53), so the result equals what integer hardware
accumulates; the sum is then returned in float32. With FB-float or float32
operands the sums accumulate in float32, not rounded per MAC: the FB rounding
is applied to each layer's inputs, weights and gradients (as QPyTorch does),
which is the documented deviation from a per-MAC-rounded FP-MAC.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn

from codesign.energy.ledger import CostLedger
from codesign.train.precision import LayerPrecision

WeightGradFn = Callable[["CountedMixin", torch.Tensor, torch.Tensor], torch.Tensor]


class CountedMixin:
    """State shared by counted layers: a name, a precision, a ledger and an optional weight-gradient override."""

    def _init_counting(self) -> None:
        self.layer_name = ""
        self.precision = LayerPrecision()
        self.ledger: CostLedger | None = None
        self.weight_grad_fn: WeightGradFn | None = None
        self.is_network_input = False

    def macs_per_output(self) -> int:
        raise NotImplementedError

    def record(self, phase: str, macs: int, dram_bits: int) -> None:
        if self.ledger is None:
            return
        arith, bits_a, bits_b, exp_bits = self.precision.mac_kind(phase)
        self.ledger.add_macs(self.layer_name, phase, macs, bits_a=bits_a, bits_b=bits_b, arith=arith,
                             exp_bits=exp_bits)
        self.ledger.add_dram(self.layer_name, phase, dram_bits)

    def operand_bits(self, phase: str) -> tuple[int, int]:
        """Storage bits of the two operands of ``phase`` (an FB-float value: sign + exponent + FB)."""
        arith, bits_a, bits_b, exp_bits = self.precision.mac_kind(phase)
        if arith == "fp":
            return 1 + exp_bits + bits_a, 1 + exp_bits + bits_b
        return bits_a, bits_b


class _CountedFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, bias, layer):
        precision = layer.precision
        xq = precision.activation(x) if precision.activation else x
        wq = precision.weight(weight) if precision.weight else weight
        exact = precision.fixed_point and precision.exact_accumulation
        compute_dtype = torch.float64 if exact else x.dtype
        y = layer.compute(xq.to(compute_dtype), wq.to(compute_dtype), None if bias is None else bias.to(compute_dtype))
        y = y.to(x.dtype)
        ctx.save_for_backward(xq, wq)
        ctx.layer = layer
        ctx.has_bias = bias is not None
        bits_a, bits_b = layer.operand_bits("forward")
        layer.record("forward", y.numel() * layer.macs_per_output(), x.numel() * bits_a + weight.numel() * bits_b + y.numel() * 32)
        return y

    @staticmethod
    def backward(ctx, grad_output):
        layer = ctx.layer
        precision = layer.precision
        xq, wq = ctx.saved_tensors
        gq = precision.grad(grad_output) if precision.grad else grad_output
        exact = precision.fixed_point and precision.exact_accumulation
        dtype = torch.float64 if exact else grad_output.dtype
        macs = grad_output.numel() * layer.macs_per_output()
        grad_x = grad_w = grad_b = None
        if ctx.needs_input_grad[0] and not layer.is_network_input:
            grad_x = layer.input_grad(xq.shape, wq.to(dtype), gq.to(dtype)).to(grad_output.dtype)
            bits_a, bits_b = layer.operand_bits("error")
            layer.record("error", macs, gq.numel() * bits_a + wq.numel() * bits_b + xq.numel() * 32)
        if ctx.needs_input_grad[1]:
            if layer.weight_grad_fn is not None:
                grad_w = layer.weight_grad_fn(layer, xq, gq)  # records its own cost
            else:
                grad_w = layer.weight_grad(xq.to(dtype), gq.to(dtype)).to(grad_output.dtype)
                bits_a, bits_b = layer.operand_bits("weight_grad")
                layer.record("weight_grad", macs, gq.numel() * bits_a + xq.numel() * bits_b + wq.numel() * 32)
        if ctx.has_bias and ctx.needs_input_grad[2]:
            grad_b = layer.bias_grad(gq)
        return grad_x, grad_w, grad_b, None


class CountedConv2d(nn.Conv2d, CountedMixin):
    """``nn.Conv2d`` whose three phases are quantised per ``precision`` and counted in ``ledger``."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._init_counting()

    def macs_per_output(self) -> int:
        return (self.in_channels // self.groups) * self.kernel_size[0] * self.kernel_size[1]

    def compute(self, x, weight, bias):
        return F.conv2d(x, weight, bias, self.stride, self.padding, self.dilation, self.groups)

    def input_grad(self, shape, weight, grad):
        return torch.nn.grad.conv2d_input(shape, weight, grad, self.stride, self.padding, self.dilation, self.groups)

    def weight_grad(self, x, grad):
        return torch.nn.grad.conv2d_weight(x, self.weight.shape, grad, self.stride, self.padding, self.dilation, self.groups)

    def bias_grad(self, grad):
        return grad.sum(dim=(0, 2, 3))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _CountedFunction.apply(x, self.weight, self.bias, self)


class CountedLinear(nn.Linear, CountedMixin):
    """``nn.Linear`` whose three phases are quantised per ``precision`` and counted in ``ledger``."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._init_counting()

    def macs_per_output(self) -> int:
        return self.in_features

    def compute(self, x, weight, bias):
        return F.linear(x, weight, bias)

    def input_grad(self, shape, weight, grad):
        return grad @ weight

    def weight_grad(self, x, grad):
        return grad.t() @ x

    def bias_grad(self, grad):
        return grad.sum(dim=0)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _CountedFunction.apply(x, self.weight, self.bias, self)


def counted_layers(model: nn.Module) -> list[CountedMixin]:
    return [module for module in model.modules() if isinstance(module, CountedMixin)]


def attach_ledger(model: nn.Module, ledger: CostLedger | None) -> None:
    """Point every counted layer at ``ledger`` (None stops counting, e.g. during evaluation)."""
    for layer in counted_layers(model):
        layer.ledger = ledger
