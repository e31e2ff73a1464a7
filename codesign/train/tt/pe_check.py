"""A :class:`~codesign.train.tt.layer.TTLinear` as the PE step reads it, and the layer's own step to check it against.

The PE step (:func:`codesign.step.tt.step.pe_step`) runs on NumPy alone and
takes a :class:`~codesign.step.tt.layer_state.TtLayerState`;
:func:`layer_state` builds one from a layer. :func:`golden_step` is the
expected result: the step the trainer takes, forward and backward in
training mode, low precision, on a copy of the layer.
"""

from __future__ import annotations

import copy

import numpy as np
import torch

from codesign.step.tt.layer_state import TRACKERS, TtLayerState
from codesign.step.tt.step import StepResult, check_batch, check_layer
from codesign.train.tt.layer import TTLinear
from codesign.train.tt.precision import mean_buffer


def trackers_of(layer: TTLinear) -> dict[str, tuple[int, ...]]:
    """The layer's scale trackers (fraction bits) by name."""
    return {name: tuple(int(v) for v in getattr(layer, name)) for name in TRACKERS}


def means_of(layer: TTLinear) -> dict[str, tuple[float, ...]]:
    """The layer's running mean |x| per tracker, by tracker name."""
    return {name: tuple(float(v) for v in getattr(layer, mean_buffer(name))) for name in TRACKERS}


def layer_state(layer: TTLinear) -> TtLayerState:
    """What the PE step reads of ``layer`` now: copies of its shadow cores and bias, its precision and trackers."""
    if not isinstance(layer, TTLinear):
        raise TypeError(f"layer must be a TTLinear, got {type(layer).__name__}")
    q = layer.precision_tt
    if q is None:
        raise ValueError("the layer trains in float32 (precision=None); the PEs need a low-precision TTPrecision")
    trackers, means = trackers_of(layer), means_of(layer)
    return TtLayerState(
        cores=tuple(core.detach().numpy() for core in layer.cores),
        bias=None if layer.bias is None else layer.bias.detach().numpy(),
        in_features=layer.in_features, out_features=layer.out_features,
        is_network_input=bool(layer.is_network_input), trackers=tuple(trackers[name] for name in TRACKERS),
        core_bits=q.core_bits, activation_bits=q.activation_bits, bias_bits=q.bias_bits, grad_bits=q.grad_bits,
        core_headroom_bits=q.core_headroom_bits, activation_headroom_bits=q.activation_headroom_bits,
        grad_headroom_bits=q.grad_headroom_bits, quantize_intermediates=q.quantize_intermediates,
        rounding=q.rounding, core_grad_route=q.core_grad_route, scale_rule=q.scale_rule,
        scale_momentum=q.scale_momentum, means=tuple(means[name] for name in TRACKERS), hand_off=q.hand_off)


def golden_step(layer: TTLinear, x, grad_y) -> StepResult:
    """The training step the trainer takes (forward, then backward from ``grad_y``), on a copy of ``layer``.

    ``layer`` must be one the PEs can run (:func:`layer_state` and the step's
    checks), so that a comparison with :func:`~codesign.step.tt.step.pe_step`
    compares the same step.
    """
    state = layer_state(layer)
    check_layer(state)
    x, grad_y = check_batch(state, x, grad_y)
    layer = copy.deepcopy(layer)
    layer.ledger = None
    layer.train()
    layer.zero_grad(set_to_none=True)
    # the batch in the hand-off type (widening is exact), so the input gradient comes back in it, as the step's
    xt = torch.from_numpy(x.astype(state.hand_off_dtype)).requires_grad_(not layer.is_network_input)
    y = layer(xt)
    y.backward(torch.from_numpy(grad_y.copy()).to(y.dtype))
    return StepResult(y=y.detach().numpy().astype(state.hand_off_dtype),
                      grad_x=None if xt.grad is None else xt.grad.numpy().astype(state.hand_off_dtype),
                      core_grads=[core.grad.numpy().astype(np.float32) for core in layer.cores],
                      bias_grad=None if layer.bias is None else layer.bias.grad.numpy().astype(np.float32),
                      trackers=trackers_of(layer), means=means_of(layer))


__all__ = ["golden_step", "layer_state", "means_of", "trackers_of"]
