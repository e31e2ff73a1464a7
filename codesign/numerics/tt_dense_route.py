"""The dense route to a TT layer's core gradients: which partial contractions, in which order (shapes only).

Paper 003, App. A.2 names two routes to the gradients of the cores. The
direct one contracts the output gradient with the saved forward states, core
by core. The dense one first forms the gradient of the full weight,
``dW = sum_b g_b x_b^T`` (an outer product per sample, PE3), and then
contracts ``dW`` with every core but one (Eqs. (14)-(19), on PE1 and PE2).
The paper takes it because it starts from large ranks; its cost does not
grow with the batch after the outer products.

Both the trainer's golden layer and the PE step follow this plan, so they
round the same intermediates. ``dW`` is laid out as the tensor
``(m_1, n_1, m_2, n_2, .., m_d, n_d)`` (each core's output and input mode
side by side, as in the core ``(r_{k-1}, m_k, n_k, r_k)``). A *node*
``(lo, hi)`` is ``dW`` with cores ``0..lo-1`` contracted from the left and
cores ``hi..d-1`` from the right: shape ``(r_lo, m_lo n_lo, ..,
m_{hi-1} n_{hi-1}, r_hi)``. ``(0, d)`` is ``dW``; ``(k, k+1)`` is the
gradient of core ``k``, in the core's own layout. A left step
``(lo, hi) -> (lo+1, hi)`` sums over ``r_lo, m_lo, n_lo`` (PE2: the summed
axis is not the last); a right step ``(lo, hi) -> (lo, hi-1)`` sums over
``m_{hi-1}, n_{hi-1}, r_hi`` (PE1: the last two axes).

Sharing: the core gradient ``k`` takes the shorter way from ``dW``. With
at least as many cores to its left as to its right (``k >= d-1-k``), it
continues from the left partial ``(k, d)`` (shared by every such ``k``)
by right steps; otherwise from the right partial ``(0, k+1)`` by left
steps. Every node is a tensor the host rounds: ``dW`` and the partials to
the gradient width at a scale chosen from that tensor alone, each core
gradient with its own tracked scale.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import List, Tuple

Node = Tuple[int, int]
ROUTES = ("direct", "dense")  # the two routes to the core gradients (paper 003, App. A.2), as a precision names them


@dataclass(frozen=True)
class RouteStep:
    """One contraction of the dense route: ``source`` node to ``target`` node through core ``core``.

    ``side`` is ``"left"`` (sums the core's left rank and modes, PE2) or
    ``"right"`` (sums its modes and right rank, PE1); ``depth`` the number of
    contractions from ``dW`` to ``target`` (steps of equal depth depend only
    on shallower ones, so they may run at once).
    """

    source: Node
    target: Node
    core: int
    side: str
    depth: int


def core_grad_path(k: int, order: int) -> List[Node]:
    """The nodes from ``dW`` to the gradient of core ``k`` of ``order`` cores, both ends included."""
    if not 0 <= k < order:
        raise ValueError(f"core {k} of {order}")
    if k >= order - 1 - k:  # left partial (k, d), then right steps
        return [(lo, order) for lo in range(k + 1)] + [(k, hi) for hi in range(order - 1, k, -1)]
    return [(0, hi) for hi in range(order, k, -1)] + [(lo, k + 1) for lo in range(1, k + 1)]


def dense_route(order: int) -> List[RouteStep]:
    """Every contraction of the route for ``order`` cores, each node made once, shallowest first (then by the
    node), so a plan laid out in this order can run it depth by depth."""
    if order < 1:
        raise ValueError(f"order must be >= 1, got {order}")
    steps = {}
    for k in range(order):
        path = core_grad_path(k, order)
        for depth, (source, target) in enumerate(zip(path, path[1:]), start=1):
            left = target[0] == source[0] + 1
            steps[target] = RouteStep(source=source, target=target, core=source[0] if left else source[1] - 1,
                                      side="left" if left else "right", depth=depth)
    return sorted(steps.values(), key=lambda step: (step.depth, step.target))


def node_shape(node: Node, ranks, out_modes, in_modes) -> Tuple[int, ...]:
    """``(r_lo, m_lo n_lo, .., m_{hi-1} n_{hi-1}, r_hi)`` of a node, from the layer's ranks ``(1, .., 1)`` and modes."""
    lo, hi = node
    return (ranks[lo], *(out_modes[k] * in_modes[k] for k in range(lo, hi)), ranks[hi])


__all__ = ["ROUTES", "Node", "RouteStep", "core_grad_path", "dense_route", "node_shape"]
