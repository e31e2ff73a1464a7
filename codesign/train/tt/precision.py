"""Low-precision arithmetic of tensor-train training: widths, scale trackers, quantise calls.

Paper 003, Sec. 3.2-3.3: TT cores in 4 bits, activations and biases in 8
bits, gradients in 16 bits, every scale a power of two. Scales of the cores
are fixed (chosen once, from the initial cores); scales of activations,
gradients and intermediate results follow each tensor's mean |x| (see
:mod:`codesign.numerics.scales`) and are shared across the samples and
neurons of a layer. All rounding goes through :func:`codesign.numerics.quantize`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

from codesign.train.quantize import quantize
from codesign.numerics.formats import DETERMINISTIC_ROUNDING
from codesign.numerics.scales import (HAND_OFFS, NO_MEAN, UNSET, aim_scale, check_scale_rule, mean_abs,
                                      mean_abs_frac_bits)
from codesign.numerics.tt_dense_route import ROUTES
from codesign.pe.tt.contract import fixed_format  # noqa: F401 (the codes of TT training are the PEs')
from codesign.train.config import require

BIT_RANGE = (2, 24)  # up to 24 bits a code times a power of two is exact in the float32 tensors a layer returns


@dataclass(frozen=True, kw_only=True)
class TTPrecision:
    """Bit widths (bits) and scale margins of a low-precision TT layer.

    ``*_headroom_bits``: binades left between the tracked mean |code| and the
    largest code (:func:`codesign.numerics.scales.mean_code_range`).
    ``quantize_intermediates``: round the states between two core
    contractions too (forward states to ``activation_bits``, backward ones to
    ``grad_bits``), as a datapath that writes them back to memory must.
    ``core_grad_route``: ``"direct"`` contracts the output gradient with the
    saved states, core by core; ``"dense"`` forms the dense weight gradient
    first (PE3's outer products) and contracts it with the other cores
    (paper 003, App. A.2; :mod:`codesign.numerics.tt_dense_route`). The two
    round different intermediates, so their gradients differ in the last bits.
    ``scale_rule``: ``"exact"`` aims each activation and gradient scale at the
    tensor itself; ``"tracked"`` (paper 003, Sec. 3.3) rounds it at the scale
    aimed from earlier steps' running mean |x| (``scale_momentum``: the weight
    of the past in that mean), so a PE can round as it sends
    (:func:`codesign.numerics.scales.aim_scale`). ``hand_off``: ``"float32"``
    passes a layer's output and input gradient on rounded to float32, as a
    float host does; ``"exact"`` passes them on as the PEs computed them
    (float64), so the next layer rounds them once, as a PE's rounding stage
    can (:func:`codesign.numerics.scales.hand_off_float`). Runs recorded before
    the field existed trained with ``"float32"``, which their keys leave out.
    """

    core_bits: int = 4
    activation_bits: int = 8
    bias_bits: int = 8
    grad_bits: int = 16
    core_headroom_bits: int = 1
    activation_headroom_bits: int = 3
    grad_headroom_bits: int = 6
    quantize_intermediates: bool = True
    rounding: str = "nearest_even"
    core_grad_route: str = "direct"
    scale_rule: str = "exact"
    scale_momentum: float = 0.9
    hand_off: str = field(default="float32", metadata={"omit_default": True})

    def __post_init__(self) -> None:
        self.validate()

    def validate(self, prefix: str = "precision") -> None:
        for name in ("core_bits", "activation_bits", "bias_bits", "grad_bits"):
            value = getattr(self, name)
            require(isinstance(value, int) and not isinstance(value, bool) and BIT_RANGE[0] <= value <= BIT_RANGE[1],
                    f"{prefix}.{name}", f"must be an int in [{BIT_RANGE[0]}, {BIT_RANGE[1]}] bits, got {value!r}")
        for name, bits in (("core_headroom_bits", self.core_bits), ("activation_headroom_bits", self.activation_bits),
                           ("grad_headroom_bits", self.grad_bits)):
            value = getattr(self, name)
            require(isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= bits - 2,
                    f"{prefix}.{name}", f"must be an int in [0, {bits - 2}] for {bits}-bit codes, got {value!r}")
        require(isinstance(self.quantize_intermediates, bool), f"{prefix}.quantize_intermediates", "must be a bool")
        require(self.rounding in DETERMINISTIC_ROUNDING, f"{prefix}.rounding",
                f"must be one of {DETERMINISTIC_ROUNDING}, got {self.rounding!r}")
        require(self.core_grad_route in ROUTES, f"{prefix}.core_grad_route",
                f"must be one of {ROUTES}, got {self.core_grad_route!r}")
        try:
            check_scale_rule(self.scale_rule, self.scale_momentum, prefix=prefix)
        except ValueError as error:
            name, message = str(error).split(": ", 1)
            require(False, name, message)
        require(self.hand_off in HAND_OFFS, f"{prefix}.hand_off", f"must be one of {HAND_OFFS}, got {self.hand_off!r}")


def tracked_quantize(tensor: torch.Tensor, trackers: torch.Tensor, index: int, *, bits: int, headroom_bits: int,
                     rounding: str, update: bool) -> torch.Tensor:
    """Quantise ``tensor`` with the scale held in ``trackers[index]``; re-aim the scale first when ``update``.

    Re-aiming moves the scale by as many binades as it takes to bring this
    tensor's mean |code| back into range (a tensor of zeros keeps the old
    scale). An unset tracker is aimed even when ``update`` is False. The
    mean |x| is :func:`codesign.numerics.scales.mean_abs` (NumPy), the one
    the PE step's host takes, so both pick the same scale from the same values.
    """
    current = int(trackers[index])
    if update or current == UNSET:
        fallback = bits - 1 if current == UNSET else current
        current = mean_abs_frac_bits(mean_abs(tensor.detach().cpu().numpy()), bits=bits, headroom_bits=headroom_bits,
                                     fallback=fallback)
        trackers[index] = current
    return quantize(tensor, fixed_format(bits, current, rounding))


def aim_tracker(tensor: torch.Tensor, trackers: torch.Tensor, means: torch.Tensor, index: int, *, bits: int,
                headroom_bits: int, rule: str, momentum: float, update: bool) -> int:
    """The fraction bits ``tensor`` is rounded at under ``rule``; ``trackers[index]`` and ``means[index]`` move
    on to what the next step starts from (:func:`codesign.numerics.scales.aim_scale`). The mean |x| observed is
    :func:`codesign.numerics.scales.mean_abs` of the float64 values, which the PE step takes from the same
    values' exact integer sum."""
    current, mean = int(trackers[index]), float(means[index])
    observed = mean_abs(tensor.detach().cpu().numpy()) if rule == "tracked" or update or current == UNSET else 0.0
    used, kept, mean = aim_scale(observed, rule=rule, current=current, mean=mean, momentum=momentum, bits=bits,
                                 headroom_bits=headroom_bits, update=update)
    trackers[index], means[index] = kept, mean
    return used


def mean_buffer(name: str) -> str:
    """The running-mean buffer of tracker ``name`` (``act_frac_bits`` -> ``act_mean_abs``)."""
    return name.replace("_frac_bits", "_mean_abs")


def representable_range(bits: int, frac_bits: int) -> tuple[float, float]:
    """Smallest and largest value of a signed ``bits``-wide code at ``frac_bits`` (for clipping)."""
    fmt = fixed_format(bits, frac_bits)
    return float(np.ldexp(fmt.min_code, -fmt.frac_bits)), float(np.ldexp(fmt.max_code, -fmt.frac_bits))


__all__ = ["NO_MEAN", "TTPrecision", "UNSET", "aim_tracker", "fixed_format", "mean_buffer", "representable_range",
           "tracked_quantize"]
