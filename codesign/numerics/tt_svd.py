"""TT-SVD of a matrix in the tensor-train-matrix layout, in NumPy (Oseledets 2011, Alg. 1).

A weight ``W`` of shape ``(M, N)``, ``M = m_1 ... m_d`` (output modes) and
``N = n_1 ... n_d`` (input modes), becomes ``d`` cores of shape
``(r_{k-1}, m_k, n_k, r_k)`` with ``r_0 = r_d = 1`` (paper 003,
Definition 1). Both TT trainers start from it: the torch one
(:class:`codesign.train.tt.layer.TTLinear`) and the NumPy loop a board runs
(:mod:`codesign.loops.tt`), so the decomposition lives below both.
"""

from __future__ import annotations

import math
from typing import List, Sequence, Tuple

import numpy as np


def svd_ranks(in_modes: Sequence[int], out_modes: Sequence[int], max_rank: int) -> Tuple[int, ...]:
    """The ranks ``(1, r_1, .., r_{d-1}, 1)`` :func:`tt_svd` gives at ``max_rank``: each inner rank capped by
    ``max_rank`` and by the product of the mode sizes ``m_k n_k`` on either side of its core boundary (the rank of
    that unfolding at most)."""
    sizes = [int(m) * int(n) for m, n in zip(out_modes, in_modes)]
    return (1, *(min(int(max_rank), math.prod(sizes[:k]), math.prod(sizes[k:])) for k in range(1, len(sizes))), 1)


def tt_svd(matrix: np.ndarray, in_modes: Sequence[int], out_modes: Sequence[int],
           ranks: Sequence[int]) -> Tuple[List[np.ndarray], List[np.ndarray]]:
    """Left-to-right truncated SVDs of the unfoldings; ``ranks`` caps the ``d - 1`` inner ranks.

    ``matrix`` is ``(prod(out_modes), prod(in_modes))`` with row-major
    multi-indices. Returns the float64 cores and, per inner rank, the
    singular values discarded, whose squares bound the squared Frobenius
    error (Oseledets 2011, Thm. 2.2). The caller checks modes and ranks.
    """
    matrix = np.asarray(matrix, dtype=np.float64)
    d = len(in_modes)
    # (m_1..m_d, n_1..n_d) -> (m_1, n_1, m_2, n_2, ...): one (m_k n_k) index per core
    tensor = matrix.reshape(*out_modes, *in_modes).transpose([axis for k in range(d) for axis in (k, d + k)])
    cores, discarded = [], []
    rest = tensor.reshape(-1)
    r_prev = 1
    for k in range(d - 1):
        unfolding = rest.reshape(r_prev * out_modes[k] * in_modes[k], -1)
        u, s, vt = np.linalg.svd(unfolding, full_matrices=False)
        r = min(int(ranks[k]), s.size)
        cores.append(u[:, :r].reshape(r_prev, out_modes[k], in_modes[k], r))
        discarded.append(s[r:])
        rest = s[:r, None] * vt[:r]
        r_prev = r
    cores.append(rest.reshape(r_prev, out_modes[-1], in_modes[-1], 1))
    return cores, discarded


__all__ = ["tt_svd"]
