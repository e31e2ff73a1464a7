"""Verification stimulus for the CSB PE's stride-2 transactions (header ``S2``; docs/csb.md, "Stride 2").

Only a PE built with ``max_stride`` 2 runs them; for one built for stride 1
the set is empty (its refusal of ``S2`` is among the directed headers of
:mod:`codesign.pe.csb.stimulus`). The directed part:

* the classic directed cases of FP, EB and WG at stride 2 (empty, one-entry
  and full blocks, out-of-block indices, saturation in both directions with
  the order visible, WG's partials across the ``P`` groups, EB in column-major
  order, garbage in ignored bits);
* ``ZERO`` at stride 2, chains of ``HOLD`` and ``CARRY`` at stride 2, a SELECT
  on held stride-2 EB sums (where they fit its capacity), and a ``CARRY`` at
  the other stride than the sums held (status 1, which also drops them);
* an EB through one tap from near-end sums, so the input positions no output
  reaches through it keep their initial sums (at a 1 x 1 kernel, every odd
  row and column).

Then random stride-2 FP, EB and WG transactions (``ZERO``, ``HOLD`` and
``CARRY`` among them) until each op has ``target`` MACs at stride 2. Pairs
are answered in order by one session that starts holding nothing.
"""

from __future__ import annotations

import numpy as np

from codesign.pe.csb.spec import CsbSpec
from codesign.pe.csb.stimulus import TransactionBuilder, directed_transactions
from codesign.pe.csb.stimulus_chain import ChainBuilder, answered_until, select_held
from codesign.pe.csb.stream import (
    FLAG_S2,
    STATUS_OK,
    Op,
    header_word,
    result_count,
)

MAC_OPS = (Op.FP, Op.EB, Op.WG)
STRIDE = 2


def _select_on_held_eb(spec: CsbSpec, b: ChainBuilder) -> list[np.ndarray]:
    """A held stride-2 EB, then a SELECT with ``CARRY`` on its sums (none where they exceed a SELECT)."""
    if result_count(spec, Op.EB, 0, FLAG_S2) > spec.ew_capacity:
        return []
    return b.chain(Op.EB, 1, spec.capacity, first="acc", mode="near", end_held=True) + \
        [select_held(spec, Op.EB, b.rng, stride=STRIDE)]


def directed_stride(spec: CsbSpec, rng: np.random.Generator) -> list[np.ndarray]:
    """Input words of the directed stride-2 cases, in stream order (see the module docstring)."""
    s, cap = spec, spec.capacity
    out = directed_transactions(spec, rng, stride=STRIDE)
    b = ChainBuilder(spec, rng, stride=STRIDE)
    for op in MAC_OPS:
        for nnz in (0, 1, cap):
            out.append(b.flagged(op, nnz, zero=True))
        out += b.chain(op, 3, cap, first="zero")
        out += b.chain(op, 3, cap, first="acc", mode="near")
    out += _select_on_held_eb(s, b)
    for op in MAC_OPS:  # the sums held at one stride, a CARRY at the other: refused, and the sums are dropped
        other = ChainBuilder(spec, rng)
        out += b.chain(op, 1, 1, end_held=True) + [np.array([header_word(op, 1, carry=True)], dtype=np.uint32)]
        out += other.chain(op, 1, 1, end_held=True) + \
            [np.array([header_word(op, 1, carry=True, stride=STRIDE)], dtype=np.uint32)]
    make = TransactionBuilder(spec, rng, STRIDE)
    one_tap = np.zeros((1, s.kernel, s.kernel), int)
    one_tap[0, -1, -1] = 127
    out.append(make.transaction(Op.EB, 0, index=[0x00], weights=one_tap, dy=np.full(make.dy_shape, -128),
                                acc=make.acc(make.x_shape, "near")))
    return out


def random_stride(spec: CsbSpec, rng: np.random.Generator, *, stride: int = STRIDE) -> list[np.ndarray]:
    """One random transaction at ``stride``, or a chain of two to four holding for each other; a third garbled."""
    b = ChainBuilder(spec, rng, stride=stride)
    op = MAC_OPS[int(rng.integers(0, 3))]
    nnz = int(rng.integers(0, spec.capacity + 1))
    mode = str(rng.choice(["any", "near", "small"]))
    if rng.random() < 0.5:
        calls = [b.make.transaction(op, nnz, order="shuffled" if rng.random() < 0.5 else "row", acc_mode=mode)]
    else:
        calls = b.chain(op, int(rng.integers(2, 5)), nnz, first=str(rng.choice(["zero", "acc"])), mode=mode)
    return [b.make.garble(words) if rng.random() < 1 / 3 else words for words in calls]


def count_stride(spec: CsbSpec, transactions) -> dict[str, int]:
    """MACs of accepted stride-2 FP, EB and WG transactions, by op."""
    counts = {op.name.lower(): 0 for op in MAC_OPS}
    per_entry = spec.kk * spec.out_pos * spec.batch
    for words_in, words_out in transactions:
        header = int(words_in[0])
        if header & FLAG_S2 and int(words_out[0]) == STATUS_OK and header & 3 != Op.UPD:
            counts[Op(header & 3).name.lower()] += (header >> 16 & 0x1FF) * per_entry
    return counts


def stride_transactions(spec: CsbSpec, *, target: int, seed: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """The directed stride-2 cases, then random ones until FP, EB and WG each have ``target`` MACs at stride 2;
    pairs ``(words_in, words_out)`` answered by one session (none for a PE without stride 2)."""
    if spec.max_stride < STRIDE:
        return []
    rng = np.random.default_rng([seed, 42])
    return answered_until(spec, directed_stride(spec, rng), lambda counts: random_stride(spec, rng),
                          lambda pairs: count_stride(spec, pairs), target)


__all__ = ["count_stride", "directed_stride", "random_stride", "stride_transactions"]
