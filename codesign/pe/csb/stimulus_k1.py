"""Verification stimulus for the CSB PE's kernel-1 transactions (header ``K1``; docs/csb.md, "Kernel 1").

A ``K1`` transaction is, word for word, the transaction the same PE built with kernel 1 takes, with ``K1`` set in
its header (:meth:`codesign.pe.csb.spec.CsbSpec.run_as`). So most of the stimulus is the kernel-1 PE's own,
drawn by the builders of the other stimulus modules on ``spec.run_as(kernel_one=True)`` and sent with ``K1``
set in every FP, EB, WG and UPD header:

* the directed cases at each stride the PE runs (empty, one-entry and full blocks, saturation with the order
  visible, WG's partials across the groups, out-of-block indices, garbage in ignored bits, every refused
  header), ``ZERO`` and chains of ``HOLD`` and ``CARRY`` between ``K1`` transactions, and a SELECT on held
  ``K1`` EB sums where they fit one;
* what only the k x k build shows: sums held under ``K1`` met by a ``CARRY`` without it and the other way round
  (status 1, which drops them); and ``K1`` on every element-wise op (status 1);
* random ``K1`` transactions and chains at either stride until FP, EB and WG each have ``target`` MACs and UPD
  ``target`` buffer words under ``K1``.

On a kernel-1 build ``K1`` changes nothing, which the same stimulus checks. Pairs are answered in order by one
session that starts holding nothing.
"""

from __future__ import annotations

import numpy as np

from codesign.pe.csb.spec import CsbSpec
from codesign.pe.csb.stimulus import TransactionBuilder, directed_transactions
from codesign.pe.csb.stimulus_chain import ChainBuilder, answered_until, select_held
from codesign.pe.csb.stimulus_stride import random_stride
from codesign.pe.csb.stream import (
    FLAG_EW,
    FLAG_K1,
    STATUS_OK,
    EwOp,
    Op,
    header_word,
    result_count,
    stride_flag,
)

MAC_OPS = (Op.FP, Op.EB, Op.WG)
FEATURES = ("fp", "eb", "wg", "upd")


def with_k1(words: np.ndarray) -> np.ndarray:
    """``words`` with ``K1`` set in the header of a block transaction (element-wise ones are left alone)."""
    words = np.array(words, dtype=np.uint32)
    if not int(words[0]) & FLAG_EW:
        words[0] |= np.uint32(FLAG_K1)
    return words


def _across_kernels(spec: CsbSpec, rng: np.random.Generator) -> list[np.ndarray]:
    """Held sums under one kernel met by a ``CARRY`` under the other (status 1), and ``K1`` on every element-wise op."""
    one, out = spec.run_as(kernel_one=True), []
    for op in MAC_OPS if spec.kernel > 1 else ():  # on a kernel-1 build the CARRY is accepted: K1 changes nothing
        held_k1 = ChainBuilder(one, rng).chain(op, 1, 1, end_held=True)
        out += [with_k1(w) for w in held_k1] + [np.array([header_word(op, 1, carry=True)], dtype=np.uint32)]
        out += ChainBuilder(spec, rng).chain(op, 1, 1, end_held=True) + \
            [np.array([header_word(op, 1, carry=True, k1=True)], dtype=np.uint32)]
    out += [np.array([header_word(op, 2, ew=True) | FLAG_K1], dtype=np.uint32) for op in EwOp]  # status 1: alone
    count = result_count(one, Op.EB, 0)
    if count <= spec.ew_capacity:  # a SELECT on held K1 EB sums may not say K1 itself: status 1, its header alone
        out += [with_k1(w) for w in ChainBuilder(one, rng).chain(Op.EB, 1, 1, end_held=True)]
        out.append(np.array([header_word(EwOp.SELECT, count, ew=True, carry=True) | FLAG_K1], dtype=np.uint32))
    return out


def directed_k1(spec: CsbSpec, rng: np.random.Generator) -> list[np.ndarray]:
    """Input words of the directed ``K1`` cases, in stream order (see the module docstring)."""
    one, out = spec.run_as(kernel_one=True), []
    for stride in range(1, spec.max_stride + 1):
        b = ChainBuilder(one, rng, stride=stride)
        calls = directed_transactions(one, rng, stride=stride)
        for op in MAC_OPS:
            calls += [b.flagged(op, nnz, zero=True) for nnz in (0, 1, one.capacity)]
            calls += b.chain(op, 3, one.capacity, first="zero") + b.chain(op, 3, one.capacity, first="acc",
                                                                          mode="near")
        if result_count(one, Op.EB, 0, stride_flag(stride)) <= one.ew_capacity:
            calls += b.chain(Op.EB, 1, one.capacity, first="acc", mode="near", end_held=True)
            calls.append(select_held(one, Op.EB, rng, stride=stride))
        out += [with_k1(words) for words in calls]
    return out + _across_kernels(spec, rng)


def random_k1(spec: CsbSpec, rng: np.random.Generator, *, update: bool) -> list[np.ndarray]:
    """A random ``K1`` transaction or chain at either stride, or (``update``) a full-block UPD under ``K1``."""
    one = spec.run_as(kernel_one=True)
    if update:
        return [with_k1(TransactionBuilder(one, rng).transaction(Op.UPD, one.capacity))]
    stride = int(rng.integers(1, spec.max_stride + 1))
    return [with_k1(words) for words in random_stride(one, rng, stride=stride)]


def count_k1(spec: CsbSpec, transactions) -> dict[str, int]:
    """MACs of accepted ``K1`` FP, EB and WG transactions and buffer words of accepted ``K1`` UPDs, by op."""
    one = spec.run_as(kernel_one=True)
    counts = dict.fromkeys(FEATURES, 0)
    for words_in, words_out in transactions:
        header = int(words_in[0])
        if header & FLAG_K1 and not header & FLAG_EW and int(words_out[0]) == STATUS_OK:
            op = Op(header & 3)
            per_entry = 1 if op == Op.UPD else one.out_pos * one.batch
            counts[op.name.lower()] += (header >> 16 & 0x1FF) * per_entry
    return counts


def k1_transactions(spec: CsbSpec, *, target: int, seed: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """The directed ``K1`` cases, then random ones until FP, EB and WG each have ``target`` MACs and UPD ``target``
    buffer words under ``K1``; pairs ``(words_in, words_out)`` answered by one session."""
    rng = np.random.default_rng([seed, 44])

    def draw(counts) -> list[np.ndarray]:
        return random_k1(spec, rng, update=min(counts[name] for name in FEATURES[:3]) >= target)

    return answered_until(spec, directed_k1(spec, rng), draw, lambda pairs: count_k1(spec, pairs), target)


__all__ = ["count_k1", "directed_k1", "k1_transactions", "random_k1", "with_k1"]
