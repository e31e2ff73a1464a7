"""A TT layer as its step on the PEs reads it: NumPy shadow cores and bias, the precision fields, the scale trackers.

The step (:mod:`codesign.step.tt.step`) needs only arrays and integers, so it
takes this frozen description instead of the trainer's layer: the PE layer
of the package, and a board runtime beneath it, then run on NumPy alone.
The trainer builds one from its layer before every step and stores the
trackers the step returns.
"""

from __future__ import annotations

import math
from functools import cached_property
from typing import Optional, Tuple

import numpy as np

from codesign.numerics.records import keyword_record
from codesign.numerics.scales import NO_MEAN, check_scale_rule, hand_off_float
from codesign.numerics.tt_dense_route import ROUTES

# the scale trackers of a layer, each a tuple of fraction bits: one per core (the first four), or one
TRACKERS = ("core_frac_bits", "act_frac_bits", "grad_frac_bits", "core_grad_frac_bits", "bias_frac_bits",
            "bias_grad_frac_bits")
PER_CORE_TRACKERS = 4


def _frozen_float32(values) -> np.ndarray:
    array = np.array(values, dtype=np.float32)  # a copy: the trainer's parameters move on, this state does not
    array.setflags(write=False)
    return array


@keyword_record(eq=False)
class TtLayerState:
    """One TT layer ``y = x W^T + b`` at one step: what the PE step computes with, nothing it does not.

    ``cores``: the float32 shadow cores, core ``k`` of shape ``(r_{k-1},
    m_k, n_k, r_k)`` (copied and made read-only); ``bias`` (out_features,)
    float32 or None. Widths in bits and the binades of headroom of the
    layer's low precision; ``quantize_intermediates`` and ``rounding`` as
    the trainer's precision names them (the step refuses what the PEs cannot
    do); ``core_grad_route``, ``"direct"`` or ``"dense"`` (through PE3,
    :mod:`codesign.numerics.tt_dense_route`). ``trackers``: the fraction bits of every tracked tensor, in
    :data:`TRACKERS` order. ``is_network_input``: no input gradient is taken. ``scale_rule``
    (:data:`codesign.numerics.scales.SCALE_RULES`) and ``scale_momentum``: how activation and gradient scales are
    aimed (:mod:`codesign.step.tt.scale_book`); ``means``: the running mean |x| of every tracked tensor, in
    :data:`TRACKERS` order (empty: none observed yet; :data:`~codesign.numerics.scales.NO_MEAN` for an entry not observed).
    ``hand_off`` (:data:`~codesign.numerics.scales.HAND_OFFS`): whether the output and input gradient leave the
    layer in float32 or exact (float64), :attr:`hand_off_dtype`.
    """

    cores: Tuple[np.ndarray, ...]
    bias: Optional[np.ndarray]
    in_features: int
    out_features: int
    is_network_input: bool
    trackers: Tuple[Tuple[int, ...], ...]
    core_bits: int
    activation_bits: int
    bias_bits: int
    grad_bits: int
    core_headroom_bits: int
    activation_headroom_bits: int
    grad_headroom_bits: int
    quantize_intermediates: bool
    rounding: str
    core_grad_route: str = "direct"
    scale_rule: str = "exact"
    scale_momentum: float = 0.9
    means: Tuple[Tuple[float, ...], ...] = ()
    hand_off: str = "float32"

    def __post_init__(self) -> None:
        check_scale_rule(self.scale_rule, self.scale_momentum)
        hand_off_float(self.hand_off)  # one of HAND_OFFS, or an error naming them
        if self.core_grad_route not in ROUTES:
            raise ValueError(f"core_grad_route must be one of {ROUTES}, got {self.core_grad_route!r}")
        cores = tuple(_frozen_float32(core) for core in self.cores)
        if not cores or any(core.ndim != 4 for core in cores):
            raise ValueError("cores must be one or more 4-d arrays (r_prev, m, n, r)")
        ranks = [core.shape[0] for core in cores] + [cores[-1].shape[3]]
        if ranks[0] != 1 or ranks[-1] != 1 or any(a.shape[3] != b.shape[0] for a, b in zip(cores, cores[1:])):
            raise ValueError(f"core ranks must chain from 1 to 1, got shapes {[core.shape for core in cores]}")
        if math.prod(core.shape[2] for core in cores) != self.in_features:
            raise ValueError(f"in_features={self.in_features} is not the product of the cores' input modes")
        if math.prod(core.shape[1] for core in cores) != self.out_features:
            raise ValueError(f"out_features={self.out_features} is not the product of the cores' output modes")
        object.__setattr__(self, "cores", cores)
        if self.bias is not None:
            bias = _frozen_float32(self.bias)
            if bias.shape != (self.out_features,):
                raise ValueError(f"bias must have shape ({self.out_features},), got {bias.shape}")
            object.__setattr__(self, "bias", bias)
        trackers = tuple(tuple(int(v) for v in values) for values in self.trackers)
        lengths = [len(cores)] * PER_CORE_TRACKERS + [1] * (len(TRACKERS) - PER_CORE_TRACKERS)
        if [len(values) for values in trackers] != lengths:
            raise ValueError(f"trackers must be {len(TRACKERS)} tuples ({', '.join(TRACKERS)}) of lengths {lengths}")
        object.__setattr__(self, "trackers", trackers)
        means = tuple(tuple(float(v) for v in values) for values in self.means) if self.means else \
            tuple((NO_MEAN,) * length for length in lengths)
        if [len(values) for values in means] != lengths:
            raise ValueError(f"means must be {len(TRACKERS)} tuples of lengths {lengths}, or empty")
        object.__setattr__(self, "means", means)

    @cached_property
    def hand_off_dtype(self) -> np.dtype:
        """The float type of the layer's output and input gradient
        (:func:`~codesign.numerics.scales.hand_off_float`; worked out once: a list step asks for it a dozen
        times)."""
        return np.dtype(hand_off_float(self.hand_off))

    def tracker_values(self) -> dict[str, tuple[int, ...]]:
        """The scale trackers by name (:data:`TRACKERS`)."""
        return dict(zip(TRACKERS, self.trackers))

    def mean_values(self) -> dict[str, tuple[float, ...]]:
        """The running means by tracker name (:data:`TRACKERS`)."""
        return dict(zip(TRACKERS, self.means))


__all__ = ["TRACKERS", "TtLayerState"]
