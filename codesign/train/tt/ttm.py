"""Tensor-train matrices (TTM): TT-SVD, reconstruction, and the core contractions of a TT layer.

A weight matrix ``W`` of shape ``(M, N)`` with ``M = m_1 ... m_d`` (output
modes) and ``N = n_1 ... n_d`` (input modes) is stored as ``d`` cores
``G_k`` of shape ``(r_{k-1}, m_k, n_k, r_k)`` with ``r_0 = r_d = 1``
(paper 003, Definition 1)::

    W[(i_1..i_d), (j_1..j_d)] = G_1[:, i_1, j_1, :] @ G_2[:, i_2, j_2, :] @ ... @ G_d[:, i_d, j_d, :]

Row and column multi-indices are row-major (``i_1`` most significant), the
layout ``torch.reshape`` gives, so ``W`` has the shape of an ``nn.Linear``
weight: ``y = W x`` maps ``N`` inputs to ``M`` outputs.

The contractions below never form ``W``. The forward pass sweeps the cores
left to right over the input (paper 003, App. A.1, Eqs. (8)-(10)); the
backward pass sweeps them right to left over the output gradient, giving the
input gradient (Eqs. (11)-(12)) and, from the intermediates saved in the
forward sweep, each core's gradient directly (the first of the two routes in
App. A.2). :func:`tt_dense_core_grads` takes the second: the dense weight
gradient first, then its contractions with the other cores (Eqs. (14)-(19)).
Every function works on NumPy arrays and on torch tensors alike, because
``einsum`` and ``reshape`` have the same meaning in both.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from codesign.numerics.tt_dense_route import Node, dense_route, node_shape
from codesign.numerics.tt_svd import tt_svd as svd_cores
from codesign.train.config import require

Array = Any  # numpy.ndarray or torch.Tensor
StepHook = Callable[[int, Array], Array]


def _is_torch(x) -> bool:
    return type(x).__module__.startswith("torch")


def _einsum(spec: str, *operands):
    if _is_torch(operands[0]):
        import torch

        return torch.einsum(spec, *operands)
    return np.einsum(spec, *operands, optimize=True)


def check_modes(modes: Sequence[int], name: str, features: int | None = None, features_name: str = "") -> tuple[int, ...]:
    """Validated mode sizes (positive ints); with ``features``, their product must equal it."""
    require(isinstance(modes, (tuple, list)) and len(modes) >= 1, name, f"must be a non-empty tuple of ints, got {modes!r}")
    require(all(isinstance(m, int) and not isinstance(m, bool) and m >= 1 for m in modes), name,
            f"must be positive ints, got {tuple(modes)!r}")
    if features is not None:
        require(math.prod(modes) == features, name,
                f"product {math.prod(modes)} of {tuple(modes)} != {features_name} {features}")
    return tuple(int(m) for m in modes)


def check_max_rank(max_rank, d: int, name: str = "max_rank") -> tuple[int, ...]:
    """One int for every inner rank, or a sequence of ``d - 1`` ints; each >= 1."""
    ranks = (max_rank,) * (d - 1) if isinstance(max_rank, int) and not isinstance(max_rank, bool) else max_rank
    require(isinstance(ranks, (tuple, list)) and len(ranks) == d - 1, name,
            f"must be an int or {d - 1} ints (one per inner rank), got {max_rank!r}")
    require(all(isinstance(r, int) and not isinstance(r, bool) and r >= 1 for r in ranks), name,
            f"ranks must be ints >= 1, got {max_rank!r}")
    return tuple(int(r) for r in ranks)


def check_cores(cores: Sequence[Array], name: str = "cores") -> tuple[int, ...]:
    """Validate core shapes (4-D, boundary ranks 1, neighbours agree); return the ranks incl. the boundary 1s."""
    require(isinstance(cores, (list, tuple)) and len(cores) >= 1, name, "must be a non-empty list of 4-D arrays")
    for k, core in enumerate(cores):
        shape = tuple(core.shape)
        require(len(shape) == 4, f"{name}[{k}]", f"must be 4-D (r_prev, m, n, r_next), got shape {shape}")
        require(all(s >= 1 for s in shape), f"{name}[{k}]", f"every dimension must be >= 1, got shape {shape}")
    require(cores[0].shape[0] == 1, f"{name}[0]", f"first rank must be 1, got shape {tuple(cores[0].shape)}")
    require(cores[-1].shape[3] == 1, f"{name}[{len(cores) - 1}]",
            f"last rank must be 1, got shape {tuple(cores[-1].shape)}")
    for k in range(1, len(cores)):
        require(cores[k].shape[0] == cores[k - 1].shape[3], f"{name}[{k}]",
                f"first rank {cores[k].shape[0]} != last rank {cores[k - 1].shape[3]} of {name}[{k - 1}]")
    return (1, *(int(core.shape[3]) for core in cores))


def tt_svd(matrix: np.ndarray, in_modes: Sequence[int], out_modes: Sequence[int],
           max_rank) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """TT-SVD of a matrix in TTM layout (:func:`codesign.numerics.tt_svd.tt_svd`), ranks capped at ``max_rank``.

    Returns the cores and, per inner rank, the singular values that were
    discarded, whose squares bound the squared Frobenius error.
    """
    return svd_cores(matrix, in_modes, out_modes, check_max_rank(max_rank, len(in_modes)))


def tt_to_dense(cores: Sequence[Array]) -> Array:
    """Multiply the cores out to ``W`` (M, N); for checks and initialisation, never in a training pass."""
    first = cores[0]
    state = first.reshape(first.shape[1], first.shape[2], first.shape[3])  # (P = m_1, Q = n_1, r_1)
    for core in cores[1:]:
        p, q = state.shape[0], state.shape[1]
        state = _einsum("pqa,amnc->pmqnc", state, core)
        state = state.reshape(p * core.shape[1], q * core.shape[2], core.shape[3])
    return state.reshape(state.shape[0], state.shape[1])


def forward_shapes(cores: Sequence[Array], batch: int) -> list[tuple[int, int, int, int, int]]:
    """Shape ``(B, P_k, r_{k-1}, n_k, R_k)`` of the state entering contraction ``k``.

    ``P_k`` is the product of the output modes already produced (m_1..m_{k-1}),
    ``R_k`` that of the input modes not yet consumed (n_{k+1}..n_d).
    """
    in_modes = [core.shape[2] for core in cores]
    shapes, produced = [], 1
    for k, core in enumerate(cores):
        remaining = math.prod(in_modes[k + 1:])
        shapes.append((batch, produced, core.shape[0], core.shape[2], remaining))
        produced *= core.shape[1]
    return shapes


def contraction_macs(cores: Sequence[Array], batch: int) -> dict[str, list[int]]:
    """Multiply-accumulates of each contraction, per core, for a batch.

    ``forward[k]`` = output elements x (r_{k-1} n_k); ``input_grad[k]`` = its
    transpose, (input elements) x (m_k r_k); ``core_grad[k]`` = |G_k| x
    (B P_k R_k). All three equal ``B P_k R_k r_{k-1} m_k n_k r_k``.
    """
    per_core = []
    for (b, p, a, n, rem), core in zip(forward_shapes(cores, batch), cores):
        per_core.append(b * p * rem * a * n * core.shape[1] * core.shape[3])
    return {"forward": per_core, "input_grad": list(per_core), "core_grad": list(per_core)}


def tt_forward(x: Array, cores: Sequence[Array], *, on_state: StepHook | None = None) -> tuple[Array, list[Array]]:
    """``y = x W^T`` for ``x`` of shape (B, N), as ``d`` core contractions (paper 003, Eqs. (8)-(10)).

    Contraction ``k`` takes the state (B, P_k, r_{k-1}, n_k, R_k) and the core
    (r_{k-1}, m_k, n_k, r_k), sums over r_{k-1} and n_k, and yields
    (B, P_k m_k, r_k, R_k). ``on_state(k, state)`` may replace each state
    before it enters contraction ``k`` (a quantiser; state 0 is the input).
    Returns ``y`` (B, M) and the states as they entered each contraction,
    which the backward sweep needs for the core gradients.
    """
    batch = x.shape[0]
    shapes = forward_shapes(cores, batch)
    state = x
    saved = []
    for k, core in enumerate(cores):
        state = state.reshape(shapes[k])
        if on_state is not None:
            state = on_state(k, state)
        saved.append(state)
        b, p, _, _, rem = shapes[k]
        state = _einsum("bpajq,aijc->bpicq", state, core).reshape(b, p * core.shape[1], core.shape[3], rem)
    return state.reshape(batch, -1), saved


def tt_backward(grad_y: Array, cores: Sequence[Array], saved: Sequence[Array], *, need_input_grad: bool = True,
                on_grad: StepHook | None = None, need_core_grads: bool = True) -> tuple[Array | None, list[Array]]:
    """Input and core gradients of ``y = x W^T`` by a right-to-left sweep (paper 003, Eqs. (11)-(12), App. A.2).

    With ``g_k`` the gradient of contraction ``k``'s output, reshaped to
    (B, P_k, m_k, r_k, R_k)::

        dG_k    = sum_{b,p,q} state_k[b,p,a,j,q] * g_k[b,p,i,c,q]      (core gradient)
        g_{k-1} = sum_{i,c}   g_k[b,p,i,c,q]     * G_k[a,i,j,c]         (gradient of the state entering k)

    ``on_grad(k, g)`` may replace ``g_k`` before it is used (a quantiser).
    The sweep stops before the input gradient when ``need_input_grad`` is
    False (the network input needs none). Without ``need_core_grads`` (the
    dense route computes them) only the input-gradient chain runs, and the
    list holds None. Returns (dx or None, [dG_1..dG_d]).
    """
    batch = grad_y.shape[0]
    shapes = forward_shapes(cores, batch)
    d = len(cores)
    core_grads: list[Array] = [None] * d  # type: ignore[list-item]
    g = grad_y
    grad_x = None
    if not need_input_grad and not need_core_grads:
        return None, core_grads
    for k in range(d - 1, -1, -1):
        b, p, a, n, rem = shapes[k]
        core = cores[k]
        g = g.reshape(b, p, core.shape[1], core.shape[3], rem)
        if on_grad is not None:
            g = on_grad(k, g)
        if need_core_grads:
            core_grads[k] = _einsum("bpajq,bpicq->aijc", saved[k], g)
        if k == 0 and not need_input_grad:
            break
        g = _einsum("bpicq,aijc->bpajq", g, core)
        if k == 0:
            grad_x = g.reshape(batch, -1)
        else:
            prev = shapes[k - 1]
            g = g.reshape(b, prev[1] * cores[k - 1].shape[1], cores[k - 1].shape[3], prev[4])
    return grad_x, core_grads


def tt_dense_core_grads(dense_grad: Array, cores: Sequence[Array], *,
                        on_node: Callable[[Node, Array], Array] | None = None) -> list[Array]:
    """Core gradients from the dense weight gradient ``dW`` (M, N) (paper 003, App. A.2, second route).

    Follows :func:`codesign.numerics.tt_dense_route.dense_route`: ``dW`` as
    ``(m_1, n_1, .., m_d, n_d)``, then left steps (sum over ``r_lo, m_lo,
    n_lo`` against core ``lo``) and right steps (sum over ``m, n, r_hi``
    against core ``hi - 1``) down to each core's gradient ``(r_{k-1}, m_k,
    n_k, r_k)``. ``on_node(node, tensor)`` may replace every node as it is
    made, ``dW`` first (a quantiser); the nodes are handed over in the
    route's order, flat as ``(r_lo, .., r_hi)`` row-major.
    """
    d = len(cores)
    ranks, out_modes, in_modes = _ranks_and_modes(cores)
    interleave = [axis for k in range(d) for axis in (k, d + k)]
    start = dense_grad.reshape(*out_modes, *in_modes)
    start = (start.permute(*interleave) if _is_torch(start) else start.transpose(interleave)).reshape(-1)
    nodes = {(0, d): on_node((0, d), start) if on_node is not None else start}
    for step in dense_route(d):
        source = nodes[step.source]
        core = cores[step.core]
        a, m, n, c = (int(v) for v in core.shape)
        if step.side == "left":  # (a·m·n, rest) against the core (a·m·n, c): (c, rest)
            z = _einsum("jr,jc->cr", source.reshape(a * m * n, -1), core.reshape(a * m * n, c))
        else:  # (rest, m·n·c) against the core (a, m·n·c): (rest, a)
            z = _einsum("rj,aj->ra", source.reshape(-1, m * n * c), core.reshape(a, m * n * c))
        z = z.reshape(-1)
        nodes[step.target] = on_node(step.target, z) if on_node is not None else z
    return [nodes[(k, k + 1)].reshape(node_shape((k, k + 1), ranks, out_modes, in_modes)[0], out_modes[k],
                                      in_modes[k], ranks[k + 1]) for k in range(d)]


def _ranks_and_modes(cores: Sequence[Array]) -> tuple[list[int], list[int], list[int]]:
    """``(r_0 .. r_d)``, the output modes and the input modes of cores ``(r_{k-1}, m_k, n_k, r_k)``."""
    return ([int(core.shape[0]) for core in cores] + [1], [int(core.shape[1]) for core in cores],
            [int(core.shape[2]) for core in cores])


def dense_route_sizes(cores: Sequence[Array]) -> list[tuple[int, int, int]]:
    """``(values read, values written, MACs)`` of every contraction of the dense route, in the route's order
    (the core's values not counted as read)."""
    d = len(cores)
    ranks, out_modes, in_modes = _ranks_and_modes(cores)
    out = []
    for step in dense_route(d):
        source = math.prod(node_shape(step.source, ranks, out_modes, in_modes))
        target = math.prod(node_shape(step.target, ranks, out_modes, in_modes))
        summed = ranks[step.core] * out_modes[step.core] * in_modes[step.core] if step.side == "left" else \
            out_modes[step.core] * in_modes[step.core] * ranks[step.core + 1]
        out.append((source, target, target * summed))
    return out


@dataclass(frozen=True, eq=False)
class TTMatrix:
    """A matrix (M, N) held as TT cores; ``in_modes`` factor N, ``out_modes`` factor M.

    Construct with :meth:`from_dense` (TT-SVD) or from cores; shapes are
    checked before anything is computed and errors name the field.
    """

    cores: list
    in_modes: tuple[int, ...]
    out_modes: tuple[int, ...]

    def __post_init__(self) -> None:
        ranks = check_cores(self.cores)
        check_modes(self.in_modes, "in_modes")
        check_modes(self.out_modes, "out_modes")
        d = len(self.cores)
        require(len(self.in_modes) == d, "in_modes", f"has {len(self.in_modes)} modes for {d} cores")
        require(len(self.out_modes) == d, "out_modes", f"has {len(self.out_modes)} modes for {d} cores")
        for k, core in enumerate(self.cores):
            require((core.shape[1], core.shape[2]) == (self.out_modes[k], self.in_modes[k]), f"cores[{k}]",
                    f"mode sizes {(core.shape[1], core.shape[2])} != (out_modes[{k}], in_modes[{k}]) = "
                    f"{(self.out_modes[k], self.in_modes[k])}")
        object.__setattr__(self, "_ranks", ranks)

    @classmethod
    def from_dense(cls, matrix, in_modes: Sequence[int], out_modes: Sequence[int], max_rank) -> TTMatrix:
        """TT-SVD of ``matrix`` (shape ``(prod(out_modes), prod(in_modes))``), ranks capped at ``max_rank``.

        ``max_rank`` is an int for every inner rank or ``d - 1`` ints. At or
        above the ranks of the unfoldings the decomposition is exact (up to
        float64 rounding); below, the squared Frobenius error is at most the
        sum of the squared discarded singular values (Oseledets 2011, Thm. 2.2).
        """
        if _is_torch(matrix):
            matrix = matrix.detach().cpu().numpy()
        matrix = np.asarray(matrix)
        require(matrix.ndim == 2, "matrix", f"must be 2-D (out_features, in_features), got shape {matrix.shape}")
        require(bool(np.all(np.isfinite(matrix))), "matrix", "must be finite")
        in_modes = check_modes(in_modes, "in_modes", matrix.shape[1], "in_features (matrix.shape[1])")
        out_modes = check_modes(out_modes, "out_modes", matrix.shape[0], "out_features (matrix.shape[0])")
        require(len(in_modes) == len(out_modes), "out_modes",
                f"needs as many modes as in_modes ({len(in_modes)}), got {len(out_modes)}")
        cores, _ = tt_svd(matrix, in_modes, out_modes, max_rank)
        return cls(cores=cores, in_modes=in_modes, out_modes=out_modes)

    @property
    def ranks(self) -> tuple[int, ...]:
        """TT ranks ``(1, r_1, ..., r_{d-1}, 1)``."""
        return self._ranks  # type: ignore[attr-defined]

    @property
    def shape(self) -> tuple[int, int]:
        return math.prod(self.out_modes), math.prod(self.in_modes)

    @property
    def parameters(self) -> int:
        """Number of values in all cores: sum_k r_{k-1} m_k n_k r_k."""
        return sum(int(np.prod(core.shape)) for core in self.cores)

    def to_dense(self):
        return tt_to_dense(self.cores)

    def matvec(self, x):
        """``x W^T`` for a batch ``x`` (B, N) by core contractions."""
        return tt_forward(x, self.cores)[0]


__all__ = ["TTMatrix", "check_cores", "check_max_rank", "check_modes", "contraction_macs", "dense_route_sizes", "forward_shapes",
           "tt_backward", "tt_dense_core_grads", "tt_forward", "tt_svd", "tt_to_dense"]
