"""A TTLinear as the PE step's NumPy description (codesign.train.tt.pe_check), and the one mean |x| both sides take.

The PE step's host and the trainer's torch layer pick the scale of a float
tensor from codesign.numerics.scales.mean_abs; the expected values are that
the two pick the same scale from the same values whatever the tensor's
shape, strides or dtype on the way in.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from codesign.numerics.scales import UNSET, mean_abs
from codesign.step.tt.layer_state import TRACKERS, TtLayerState
from codesign.step.tt.rounding import frac_of_values
from codesign.train.tt.layer import TTLinear
from codesign.train.tt.pe_check import layer_state, trackers_of
from codesign.train.tt.precision import TTPrecision, tracked_quantize


def _layer(bias=True) -> TTLinear:
    torch.manual_seed(0)
    return TTLinear(16, 10, in_modes=(4, 4), out_modes=(2, 5), max_rank=2, bias=bias, precision=TTPrecision())


def _random_tensors(count: int, seed: int):
    """Float64 arrays of many shapes and magnitudes (ReLU-like, signed, with zeros), the step's sizes among them."""
    rng = np.random.default_rng(seed)
    shapes = [(n,) for n in range(1, 40)] + [(5, 64), (17, 16), (3, 8), (33, 255), (16, 16), (21, 255), (6, 64),
                                             (5, 256), (17, 10), (33, 42), (64, 784), (1, 4, 4, 2), (2, 5, 3, 1)]
    for k in range(count):
        shape = shapes[k % len(shapes)]
        values = rng.normal(size=shape) * 10.0 ** rng.uniform(-6, 6)
        if k % 3 == 0:
            values = np.maximum(values, 0)
        yield values


def test_mean_abs_depends_on_the_values_and_their_order_only():
    for values in _random_tensors(600, seed=1):
        expected = mean_abs(values)
        assert mean_abs(values.astype(np.float32).astype(np.float64)) == mean_abs(values.astype(np.float32))
        assert mean_abs(np.asfortranarray(values)) == expected  # strides do not change the order summed
        assert mean_abs(values.reshape(-1)) == expected
        assert mean_abs(torch.from_numpy(values.copy()).numpy()) == expected
        assert expected == pytest.approx(float(np.abs(values).sum()) / values.size, rel=1e-12)
    assert mean_abs(np.zeros((0, 3))) == 0.0


def test_the_layer_and_the_pe_host_pick_the_same_scale():
    for values in _random_tensors(600, seed=2):
        for bits, headroom in ((4, 1), (8, 3), (16, 6)):
            tensor = torch.from_numpy(values.copy())
            if tensor.ndim == 2:
                tensor = tensor.t().contiguous().t()  # the trainer may hand a strided view
            trackers = torch.full((1,), UNSET, dtype=torch.int64)
            tracked_quantize(tensor, trackers, 0, bits=bits, headroom_bits=headroom, rounding="nearest_even",
                             update=True)
            assert int(trackers[0]) == frac_of_values(values, bits=bits, headroom_bits=headroom, current=UNSET,
                                                      update=True)


def test_layer_state_is_a_copy_of_what_the_step_reads():
    layer = _layer()
    state = layer_state(layer)
    assert [c.shape for c in state.cores] == [tuple(c.shape) for c in layer.cores]
    assert all(np.array_equal(a, c.detach().numpy()) and a.dtype == np.float32
               for a, c in zip(state.cores, layer.cores))
    assert np.array_equal(state.bias, layer.bias.detach().numpy())
    assert state.tracker_values() == trackers_of(layer) and tuple(state.tracker_values()) == TRACKERS
    assert (state.in_features, state.out_features, state.activation_bits, state.grad_bits) == (16, 10, 8, 16)
    with torch.no_grad():
        layer.cores[0].add_(1.0)
    assert not np.array_equal(state.cores[0], layer.cores[0].detach().numpy())  # the layer moved on, the state not
    with pytest.raises(ValueError, match="read-only"):
        state.cores[0][0, 0, 0, 0] = 1.0
    assert layer_state(_layer(bias=False)).bias is None


def test_layer_state_refuses_what_is_no_tt_layer():
    with pytest.raises(TypeError, match="TTLinear"):
        layer_state(torch.nn.Linear(16, 10))
    with pytest.raises(ValueError, match="precision=None"):
        layer_state(TTLinear(16, 10, in_modes=(4, 4), out_modes=(2, 5), max_rank=2))
    good = layer_state(_layer())
    fields = {name: getattr(good, name) for name in good.__dataclass_fields__}
    with pytest.raises(TypeError, match="keyword arguments only"):
        TtLayerState(*fields.values())
    bad_cases = [({"out_features": 11}, "out_features=11"), ({"cores": good.cores[::-1]}, "ranks must chain"),
                 ({"bias": np.zeros(3)}, "bias must have shape"), ({"trackers": good.trackers[:-1]}, "trackers must"),
                 ({"in_features": 15}, "in_features=15")]
    for change, message in bad_cases:
        with pytest.raises(ValueError, match=message):
            TtLayerState(**{**fields, **change})
