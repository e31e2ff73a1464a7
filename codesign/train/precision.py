"""Quantisers for training tensors, and the per-layer precision the counted layers consult each step.

Every quantiser goes through :func:`codesign.numerics.quantize`: there is no
second quantiser in the training code. A layer's precision names three
quantisers: its input activations, its weights (forward and error passes)
and its output gradients (the error arriving in backward).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from codesign.numerics import FixedFormat, FloatFormat
from codesign.train.quantize import quantize
from codesign.numerics.scales import power_of_two_frac_bits

FP32 = ("fp32", 32)


@dataclass(frozen=True)
class FloatQuantizer:
    """Round to an FB-float format (sign, exp_bits, frac_bits); accounted as the ``fp`` FP-MAC."""

    fmt: FloatFormat

    @property
    def arith(self) -> str:
        return "fp"

    @property
    def bits(self) -> int:
        return self.fmt.frac_bits

    def __call__(self, tensor: torch.Tensor) -> torch.Tensor:
        return quantize(tensor, self.fmt)


@dataclass(frozen=True)
class FixedQuantizer:
    """Signed fixed point with a power-of-two scale: ``frac_bits`` frozen, or chosen per call from max|x|."""

    bits: int
    frac_bits: int | None = None
    rounding: str = "nearest_even"

    def __post_init__(self) -> None:
        FixedFormat(bits=self.bits, frac_bits=self.frac_bits or 0, rounding=self.rounding)

    @property
    def arith(self) -> str:
        return "int"

    def format_for(self, tensor: torch.Tensor) -> FixedFormat:
        frac_bits = self.frac_bits
        if frac_bits is None:
            frac_bits = power_of_two_frac_bits(float(tensor.detach().abs().max()) if tensor.numel() else 0.0, self.bits)
        return FixedFormat(bits=self.bits, frac_bits=frac_bits, rounding=self.rounding)

    def __call__(self, tensor: torch.Tensor) -> torch.Tensor:
        values = tensor.detach().to(torch.float64)
        return quantize(values, self.format_for(tensor)).to(tensor.dtype)


Quantizer = FloatQuantizer | FixedQuantizer


@dataclass
class LayerPrecision:
    """What a counted layer quantises; ``None`` leaves that tensor in float32.

    Mutable on purpose: schedules (CPT, ABVS) change it between steps.
    """

    activation: Quantizer | None = None
    weight: Quantizer | None = None
    grad: Quantizer | None = None
    exact_accumulation: bool = field(default=True)

    def mac_kind(self, phase: str) -> tuple[str, int, int, int]:
        """(arithmetic, bits_a, bits_b, exp_bits) of the MACs of ``phase``; exp_bits is 0 unless FB-float."""
        pairs = {"forward": (self.activation, self.weight), "error": (self.grad, self.weight),
                 "weight_grad": (self.grad, self.activation)}
        first, second = pairs[phase]
        floats = [q for q in (first, second) if isinstance(q, FloatQuantizer)]
        if floats:
            widest = max(floats, key=lambda q: (q.fmt.frac_bits, q.fmt.exp_bits))
            return "fp", widest.fmt.frac_bits, widest.fmt.frac_bits, widest.fmt.exp_bits
        if first is None and second is None:
            return "fp32", 32, 32, 0
        return "int", first.bits if first else 32, second.bits if second else 32, 0

    @property
    def fixed_point(self) -> bool:
        """True when every quantised operand is an integer code (so float64 accumulation is exact)."""
        quantizers = [q for q in (self.activation, self.weight, self.grad) if q is not None]
        return bool(quantizers) and all(isinstance(q, FixedQuantizer) for q in quantizers)
