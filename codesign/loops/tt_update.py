"""The host's update of a TT layer after its step: Adam on the shadow cores and bias, the rank prior's gradient
and its MAP ``lambda`` per rank slice, and which slices pruning keeps. NumPy in float32 and float64, as the torch
trainer states it, so that the golden loop, the list trainer and a board's host reach the same bits."""

from __future__ import annotations

import math
from typing import Dict, List, Sequence, Tuple

import numpy as np

ADAM_BETAS, ADAM_EPS = (0.9, 0.999), 1e-8  # torch.optim.Adam's defaults, which the torch trainer uses
LAMBDA_FLOOR = 1e-30  # keeps 1/lambda finite for a slice that is exactly zero (as codesign.train.tt.rank)


def slice_lambdas(cores: Sequence[np.ndarray], *, only: Sequence[int] | None = None,
                  squares: Dict[Tuple[int, int], np.ndarray] | None = None) -> List[np.ndarray]:
    """MAP ``lambda`` of every slice of every inner rank ``k`` (between cores ``k - 1`` and ``k``; of ranks ``only``
    where given, in that order): ``(|G_{k-1}[..., c]|^2 + |G_k[c, ...]|^2) / (n + 2)``. ``squares``: terms taken
    before (:func:`slice_squares`, by ``(k, j)``, of the cores as they stand)."""
    lambdas, squared, given = [], {}, squares or {}  # each core's squares once
    for k in range(1, len(cores)) if only is None else only:
        terms = []
        for j in (k - 1, k):
            if (k, j) not in given and j not in squared:
                squared[j] = np.square(cores[j].astype(np.float64))
            terms.append(given[(k, j)] if (k, j) in given else _slice_sums(squared[j], last=j == k - 1))
        count = cores[k - 1][..., 0].size + cores[k][0].size
        lambdas.append(np.maximum((terms[0] + terms[1]) / (count + 2), LAMBDA_FLOOR))
    return lambdas


def slice_squares(cores: Sequence[np.ndarray], k: int, j: int) -> np.ndarray:
    """Core ``j``'s term of inner rank ``k``'s ``lambda`` in :func:`slice_lambdas` (``j`` is ``k - 1`` or ``k``):
    the sums of squares, in float64, of its slices along that rank, taken apart (beside the lists, once the core
    is updated)."""
    return _slice_sums(np.square(cores[j].astype(np.float64)), last=j == k - 1)


def _slice_sums(squared: np.ndarray, *, last: bool) -> np.ndarray:
    """A core's squares summed per slice of its last rank (``last``) or its first."""
    return squared.sum(axis=(0, 1, 2)) if last else squared.sum(axis=(1, 2, 3))


def prior_grads(cores: Sequence[np.ndarray], lambdas: Sequence[np.ndarray], scale: float, *,
                only: Sequence[int] | None = None) -> List[np.ndarray]:
    """Gradient of ``scale * sum |slice|^2 / (2 lambda)`` in each core (float64; of cores ``only`` where given, in
    that order): ``scale * G / lambda`` from the rank on each side of the core (``lambda`` held fixed, as the MAP
    update sets it between steps)."""
    grads = []
    for k in range(len(cores)) if only is None else only:
        core = cores[k]
        inverse = 0.0  # 1 / lambda of the rank on each side, broadcast over the core (a, 1, 1, c)
        if k >= 1:
            inverse = inverse + (1.0 / lambdas[k - 1])[:, None, None, None]
        if k + 1 < len(cores):
            inverse = inverse + (1.0 / lambdas[k])[None, None, None, :]
        grads.append(scale * core.astype(np.float64) * inverse)
    return grads


def keep_slices(lambdas: Sequence[np.ndarray], threshold: float, min_rank: int) -> List[np.ndarray]:
    """Indices kept per inner rank: ``lambda >= threshold * max``, and at least the ``min_rank`` largest."""
    kept = []
    for lam in lambdas:
        mask = lam >= threshold * lam.max()
        floor = min(min_rank, lam.size)
        if int(mask.sum()) < floor:
            mask[np.argsort(-lam, kind="stable")[:floor]] = True
        kept.append(np.flatnonzero(mask))
    return kept


class Adam:
    """Adam over float32 arrays, element-wise as ``torch.optim.Adam`` states it (L2 weight decay in the gradient).

    ``step`` counts the updates (bias corrections); the moments of a pruned
    parameter are sliced with it (:meth:`slice`), so kept slices go on as if
    nothing had been removed.
    """

    def __init__(self, weight_decay: float) -> None:
        self.weight_decay = weight_decay
        self.step = 0
        self.moments: Dict[Tuple[int, int], Tuple[np.ndarray, np.ndarray]] = {}
        self._flat: Dict[tuple, tuple] = {}  # keys -> the moments laid end to end, and the views self.moments holds

    def update(self, key: Tuple[int, int], param: np.ndarray, grad: np.ndarray, lr: float) -> np.ndarray:
        """The updated ``param`` (float32); call :meth:`advance` once per step before the updates."""
        return self.update_all([key], [param], [grad], lr)[0]

    def update_all(self, keys: Sequence[Tuple[int, int]], params: Sequence[np.ndarray],
                   grads: Sequence[np.ndarray], lr: float) -> List[np.ndarray]:
        """:meth:`update` of every ``params[i]`` under ``keys[i]``, their elements laid end to end: the same
        float32 operations element by element, so the same bits, in a dozen NumPy calls instead of a dozen an
        array. The results (and the moments) are views of one array each."""
        beta1, beta2 = ADAM_BETAS
        param = np.concatenate([np.ravel(p) for p in params]).astype(np.float32, copy=False)
        grad = np.concatenate([np.ravel(g).astype(np.float32, copy=False) for g in grads])
        if self.weight_decay:
            grad = grad + np.float32(self.weight_decay) * param
        m, v = self._moments(tuple(keys), params)
        m = m + np.float32(1 - beta1) * (grad - m)
        v = v * np.float32(beta2) + np.float32(1 - beta2) * grad * grad
        step_size = lr / (1 - beta1 ** self.step)
        denom = np.sqrt(v) / np.float32(math.sqrt(1 - beta2 ** self.step)) + np.float32(ADAM_EPS)
        param = (param - np.float32(step_size) * (m / denom)).astype(np.float32, copy=False)
        views = _split_as(params, m, v, param)
        pairs = [(mk, vk) for mk, vk, _ in views]
        self._flat[tuple(keys)] = (m, v, pairs)
        self.moments.update(zip(keys, pairs))
        return [pk for _, _, pk in views]

    def _moments(self, keys: tuple, params: Sequence[np.ndarray]) -> Tuple[np.ndarray, np.ndarray]:
        """The moments of ``keys`` end to end: the arrays the last update of these keys left, when every moment is
        still their view (a pruned parameter's are sliced apart), else laid out again (zeros where none yet)."""
        kept = self._flat.get(keys)
        if kept is not None and kept[0].size == sum(p.size for p in params) and all(
                self.moments.get(key) is pair and pair[0].base is kept[0] and pair[1].base is kept[1]
                for key, pair in zip(keys, kept[2])):
            return kept[0], kept[1]
        pairs = [self.moments.get(key, (np.zeros(p.shape, np.float32),) * 2) for key, p in zip(keys, params)]
        return tuple(np.concatenate([np.ravel(pair[i]) for pair in pairs]) for i in (0, 1))

    def advance(self) -> None:
        self.step += 1

    def snapshot(self) -> tuple:
        """The optimizer's state as it stands, for :meth:`restore`: references do, as an update makes new arrays."""
        return self.step, dict(self.moments), dict(self._flat)

    def restore(self, snapshot: tuple) -> None:
        """The state :meth:`snapshot` took, back (a step that failed after some of its updates)."""
        self.step, moments, flat = snapshot
        self.moments, self._flat = dict(moments), dict(flat)

    def slice(self, key: Tuple[int, int], axis: int, index: np.ndarray) -> None:
        if key in self.moments:
            self.moments[key] = tuple(np.take(moment, index, axis=axis) for moment in self.moments[key])


def _split_as(params: Sequence[np.ndarray], *flats: np.ndarray) -> List[Tuple[np.ndarray, ...]]:
    """Per parameter, its part of each of ``flats`` (laid end to end as ``params``) in its shape: views."""
    out, start = [], 0
    for p in params:
        out.append(tuple(flat[start:start + p.size].reshape(p.shape) for flat in flats))
        start += p.size
    return out


__all__ = ["ADAM_BETAS", "ADAM_EPS", "Adam", "LAMBDA_FLOOR", "keep_slices", "prior_grads", "slice_lambdas",
           "slice_squares"]
