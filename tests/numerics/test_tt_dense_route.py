"""The dense route's plan (codesign.numerics.tt_dense_route) and its contractions (tt_dense_core_grads).

The route must reach every core's gradient, make each node once, and run a
step only after its source; on integer-valued tensors (exact in float64) its
gradients must equal the direct sweep's exactly, since both are the same sum
of products taken in another order.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from codesign.numerics.tt_dense_route import core_grad_path, dense_route, node_shape
from codesign.train.tt.ttm import dense_route_sizes, tt_backward, tt_dense_core_grads, tt_forward


@pytest.mark.parametrize("order", range(1, 8))
def test_the_route_reaches_every_core_once_through_made_nodes(order):
    steps = dense_route(order)
    made = {(0, order): 0}
    for step in steps:
        assert step.source in made and made[step.source] == step.depth - 1  # its source is one depth shallower
        assert step.target not in made
        lo, hi = step.source
        assert step.target == ((lo + 1, hi) if step.side == "left" else (lo, hi - 1))
        assert step.core == (lo if step.side == "left" else hi - 1)
        made[step.target] = step.depth
    assert all((k, k + 1) in made for k in range(order))
    assert [s.depth for s in steps] == sorted(s.depth for s in steps)
    # shared partials: fewer contractions than a separate chain of order - 1 per core
    assert len(steps) == len(made) - 1 <= max(order * (order - 1), 0)


@pytest.mark.parametrize("order, count", [(1, 0), (2, 2), (3, 5), (4, 8), (5, 12)])
def test_the_route_shares_its_partials(order, count):
    assert len(dense_route(order)) == count
    # every gradient contracts the d - 1 other cores, so the route is d - 1 deep
    assert all(len(core_grad_path(k, order)) == order for k in range(order))
    assert max((s.depth for s in dense_route(order)), default=0) == order - 1


def test_a_core_outside_the_layer_is_refused():
    with pytest.raises(ValueError, match="core 4 of 4"):
        core_grad_path(4, 4)
    with pytest.raises(ValueError, match="order"):
        dense_route(0)


LAYERS = [((2, 4, 4, 2), (4, 4, 4, 4), (1, 3, 2, 4, 1)), ((3, 5, 17), (7, 2, 3), (1, 2, 3, 1)),
          ((4, 4), (2, 5), (1, 2, 1)), ((8,), (5,), (1, 1))]


@pytest.mark.parametrize("in_modes, out_modes, ranks", LAYERS)
@pytest.mark.parametrize("library", ["numpy", "torch"])
def test_dense_core_grads_equal_the_direct_sweep_exactly_on_integers(in_modes, out_modes, ranks, library):
    rng = np.random.default_rng(3)
    d = len(in_modes)
    cores = [rng.integers(-7, 8, size=(ranks[k], out_modes[k], in_modes[k], ranks[k + 1])).astype(np.float64)
             for k in range(d)]
    x = rng.integers(-127, 128, size=(5, int(np.prod(in_modes)))).astype(np.float64)
    g = rng.integers(-999, 1000, size=(5, int(np.prod(out_modes)))).astype(np.float64)
    _, saved = tt_forward(x, cores)
    _, direct = tt_backward(g, cores, saved)
    wrap = torch.from_numpy if library == "torch" else np.asarray
    dense = tt_dense_core_grads(wrap(g.T @ x), [wrap(c) for c in cores])
    for a, b in zip(direct, dense):
        np.testing.assert_array_equal(a, np.asarray(b))


def test_every_node_passes_the_hook_once_in_route_order():
    ranks, out_modes, in_modes = (1, 2, 3, 1), (2, 3, 2), (3, 2, 2)
    cores = [np.ones((ranks[k], out_modes[k], in_modes[k], ranks[k + 1])) for k in range(3)]
    seen = []

    def hook(node, tensor):
        seen.append((node, tensor.size))
        return tensor * 2  # replaced values must be what the next step reads

    grads = tt_dense_core_grads(np.ones((12, 12)), cores, on_node=hook)
    assert seen[0][0] == (0, 3) and [n for n, _ in seen[1:]] == [s.target for s in dense_route(3)]
    assert all(size == np.prod(node_shape(node, ranks, out_modes, in_modes)) for node, size in seen)
    _, _, macs = zip(*dense_route_sizes(cores))
    assert len(macs) == len(seen) - 1 and all(m > 0 for m in macs)
    # all-ones cores: each gradient entry is 12 * 12 / (m_k n_k) products of ones, doubled once per node on its path
    for k, grad in enumerate(grads):
        depth = len(core_grad_path(k, 3))
        np.testing.assert_array_equal(grad, np.full(grad.shape, 144 / (out_modes[k] * in_modes[k]) * 2 ** depth
                                                    * np.prod([ranks[j] for j in range(1, 3)]) / (ranks[k] *
                                                                                                   ranks[k + 1])))
