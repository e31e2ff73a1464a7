"""Verification stimulus for the CSB PE's held sums (``HOLD``, ``CARRY``; docs/csb.md, "Held sums"): chains of FP,
EB and WG transactions whose answers depend on the transaction before, so the expected words come from one
:class:`~codesign.pe.csb.stream.CsbSession` run over the whole set in order (the C testbench and the RTL bench
stream the file in that order, with nothing in between).

What the directed set pins:

* per op, chains of three (``ZERO`` + ``HOLD``, ``CARRY`` + ``HOLD``, ``CARRY``) whose first call has an empty,
  a one-entry or a full block, and chains with sums started near the ``acc_bits`` ends so that they saturate
  inside and across the calls;
* a ``HOLD`` that nothing carries: the next transaction (an UPD, SHR, SELECT, an FP without flags, a header refused
  with status 1 or a ``HOLD`` refused with status 2) drops the sums, and a ``CARRY`` after it is refused with
  status 1 (its header alone);
* SELECT with ``CARRY`` on held FP and EB sums (where they fit its capacity; else status 2), with ``Z`` at 0, +-1
  and the ends, a ``CARRY`` after it refused; refused after a held WG, with nothing held and with one element too
  many or too few;
* ``CARRY`` after a ``HOLD`` of another op, a WG ``CARRY`` with another ``nnz``, a ``CARRY`` after a ``HOLD``
  answered with status 3 (an index outside the block), ``CARRY`` with ``ZERO`` or ``G_FIRST`` (after a ``HOLD``
  it could otherwise take), ``HOLD`` or ``CARRY`` on UPD and on the element-wise ops: all status 1, each dropping
  what was held (a ``CARRY`` after it is refused);
* random chains of two to five calls of one op (WG: one ``nnz``), a third of them with garbage in ignored bits,
  FP and EB chains ending held and masked by a SELECT half of the time, until ``HOLD`` and ``CARRY`` have each
  ``target`` MACs and the SELECTs ``target`` elements (where a held tile fits a SELECT).
"""

from __future__ import annotations

import numpy as np

from codesign.pe.csb.spec import CsbSpec
from codesign.pe.csb.stimulus_ext import ExtBuilder
from codesign.pe.csb.stream import (
    FLAG_CARRY,
    FLAG_EW,
    FLAG_G_FIRST,
    FLAG_HOLD,
    FLAG_ZERO,
    STATUS_OK,
    CsbSession,
    EwOp,
    Op,
    encode_elementwise,
    encode_select_held,
    encode_transaction,
    header_word,
    result_count,
    stride_flag,
)

FEATURES = ("hold", "carry", "select")
MAC_OPS = (Op.FP, Op.EB, Op.WG)


class ChainBuilder(ExtBuilder):
    """Draws the transactions of one chain for ``spec`` from ``rng``."""

    def call(self, op: Op, index: np.ndarray, *, first: str, hold: bool, mode: str = "any") -> np.ndarray:
        """One call of a chain: ``first`` is ``"zero"``, ``"acc"`` (an initial section) or ``"carry"``."""
        return self.flagged(op, index.size, zero=first == "zero", carry=first == "carry", hold=hold, mode=mode,
                            index=index)

    def chain(self, op: Op, length: int, nnz: int, *, first: str = "zero", mode: str = "any",
              end_held: bool = False) -> list[np.ndarray]:
        """``length`` calls of ``op``, each holding for the next (the last too with ``end_held``); the first has
        ``nnz`` entries, and so has every WG call (a WG carries its sums by entry), FP and EB draw theirs."""
        rng, out = self.rng, []
        for at in range(length):
            size = nnz if at == 0 or op == Op.WG else int(rng.integers(0, self.spec.capacity + 1))
            index = self.make.index(size, "shuffled" if rng.random() < 0.5 else "row")
            out.append(self.call(op, index, first=first if at == 0 else "carry", hold=at < length - 1 or end_held,
                                 mode=mode))
        return out


def held_tiles(spec: CsbSpec) -> list[Op]:
    """The ops whose held sums a SELECT can take whole (as many as its capacity allows)."""
    return [op for op in (Op.FP, Op.EB) if result_count(spec, op, 0) <= spec.ew_capacity]


def select_held(spec: CsbSpec, op: Op, rng: np.random.Generator, mode: str = "any", stride: int = 1) -> np.ndarray:
    """A SELECT with ``CARRY`` after a held ``op`` (at ``stride``): ``Z`` random, a third at 0, +-1 or the
    ``acc_bits`` ends."""
    from codesign.pe.csb.stimulus import TransactionBuilder

    n = result_count(spec, op, 0, stride_flag(stride))
    z = TransactionBuilder(spec, rng).acc((n,), mode)
    special = rng.random(n) < 1 / 3
    z[special] = rng.choice([0, 1, -1, spec.acc_min, spec.acc_max], size=int(special.sum()))
    return encode_select_held(spec, z)


def _header(words: np.ndarray) -> int:
    return int(words[0])


def directed_chains(spec: CsbSpec, rng: np.random.Generator) -> list[np.ndarray]:
    """Input words of the directed cases, in stream order (see the module docstring)."""
    s, b = spec, ChainBuilder(spec, rng)
    cap, out = s.capacity, []
    for op in MAC_OPS:
        for nnz in (0, 1, cap):
            out += b.chain(op, 3, nnz, first="zero")
        out += b.chain(op, 3, cap, first="acc", mode="near")  # 16-bit sums saturate inside and across the calls
        out += b.chain(op, 2, 1, first="acc", mode="near")
    for op in held_tiles(s):  # SELECT on held sums, after a chain of one call and of three
        for length in (1, 3):
            out += b.chain(op, length, cap, first="acc", mode="near", end_held=True) + [select_held(s, op, rng)]
    fp_sums = result_count(s, Op.FP, 0)
    for held in (b.chain(Op.WG, 1, 1, end_held=True), []):  # a held WG, or nothing held
        out += held + [np.array([header_word(EwOp.SELECT, min(fp_sums, s.ew_capacity), ew=True, carry=True)],
                                dtype=np.uint32)]
    for count in (fp_sums - 1, fp_sums + 1):  # one element too few, or too many
        if 0 <= count <= 0x1FF:
            out += b.chain(Op.FP, 1, 1, end_held=True) + [np.array([header_word(EwOp.SELECT, count, ew=True,
                                                                                carry=True)], dtype=np.uint32)]
    carry = {op: np.array([header_word(op, 1, carry=True)], dtype=np.uint32) for op in MAC_OPS}
    for op in MAC_OPS[:2]:  # SELECT on held sums holds nothing; too many sums for one SELECT: status 2
        count = result_count(s, op, 0)
        if op in held_tiles(s):
            out += b.chain(op, 1, 1, end_held=True) + [select_held(s, op, rng), carry[op]]
        elif count <= 0x1FF:
            out += b.chain(op, 1, 1, end_held=True) + [np.array([header_word(EwOp.SELECT, count, ew=True,
                                                                             carry=True)], dtype=np.uint32)]
    breakers = [encode_elementwise(s, EwOp.SHR, np.arange(2), shift=1),
                encode_elementwise(s, EwOp.SELECT, [1, 2], [1, -1]),
                b.make.transaction(Op.UPD, 1, shift=3),
                b.call(Op.FP, b.make.index(1), first="zero", hold=False),
                np.array([header_word(Op.FP, 1) | 1 << 15], dtype=np.uint32)]
    if s.capacity < 0x1FF:  # a HOLD refused with status 2
        breakers.append(np.array([header_word(Op.FP, s.capacity + 1, hold=True)], dtype=np.uint32))
    for breaker in breakers:  # a HOLD that nothing carries: the next transaction drops the sums
        out += b.chain(Op.FP, 1, 2, end_held=True) + [breaker, carry[Op.FP]]
    out += b.chain(Op.FP, 1, 1, end_held=True) + [carry[Op.EB]]  # another op held
    out += b.chain(Op.WG, 1, 2, end_held=True) + [carry[Op.WG]]  # another nnz held
    if s.block_rows < 16 or s.block_cols < 16:  # a HOLD answered with status 3 holds nothing
        outside = np.array([(s.block_rows - 1) << 4 | (s.block_cols - 1), 0xFF], dtype=np.uint8)
        make = b.make
        out.append(encode_transaction(s, Op.FP, index=outside, weights=make.int8((2, s.kernel, s.kernel)),
                                      x=make.int8(make.x_shape), zero=True, hold=True, check=False))
        out.append(np.array([header_word(Op.FP, 2, carry=True)], dtype=np.uint32))
    refused = [(Op.FP, header_word(Op.FP, 1) | FLAG_CARRY | FLAG_ZERO),
               (Op.WG, header_word(Op.WG, 1) | FLAG_CARRY | FLAG_G_FIRST),
               (Op.FP, header_word(Op.UPD, 1) | FLAG_HOLD), (Op.FP, header_word(Op.UPD, 1) | FLAG_CARRY),
               (Op.FP, header_word(EwOp.SELECT, 1, ew=True) | FLAG_HOLD),
               (Op.FP, header_word(EwOp.SHR, 1, ew=True) | FLAG_CARRY)]
    for op, word in refused:  # each after a held op of one entry that it would take but for its flags; it drops it
        out += b.chain(op, 1, 1, end_held=True) + [np.array([word], dtype=np.uint32), carry[op]]
    return out


def random_chain(spec: CsbSpec, rng: np.random.Generator) -> list[np.ndarray]:
    """One random chain, closed (its last call sends the sums), a third of its calls garbled."""
    b = ChainBuilder(spec, rng)
    op = MAC_OPS[int(rng.integers(0, 3))]
    nnz = int(rng.integers(0, spec.capacity + 1))
    first = str(rng.choice(["zero", "acc"]))
    mode = str(rng.choice(["any", "near", "small"]))
    masked = op in held_tiles(spec) and rng.random() < 0.5
    calls = b.chain(op, int(rng.integers(2, 6)), nnz, first=first, mode=mode, end_held=masked)
    calls = [b.make.garble(words) if rng.random() < 1 / 3 else words for words in calls]
    return calls + ([select_held(spec, op, rng, mode)] if masked else [])


def random_select(spec: CsbSpec, rng: np.random.Generator) -> list[np.ndarray]:
    """A held FP or EB of up to two entries from random initial sums, then a SELECT on them: the cheapest way to
    many SELECT elements once the chains have their MACs."""
    b = ChainBuilder(spec, rng)
    op = held_tiles(spec)[int(rng.integers(0, len(held_tiles(spec))))]
    mode = str(rng.choice(["any", "near", "small"]))
    return b.chain(op, 1, int(rng.integers(0, 3)), first="acc", mode=mode, end_held=True) + \
        [select_held(spec, op, rng, mode)]


def count_chains(spec: CsbSpec, transactions) -> dict[str, int]:
    """MACs of accepted ``HOLD`` and of accepted ``CARRY`` block transactions, elements of accepted SELECTs on
    held sums."""
    counts = dict.fromkeys(FEATURES, 0)
    per_entry = spec.kk * spec.out_pos * spec.batch
    for words_in, words_out in transactions:
        header = _header(words_in)
        if int(words_out[0]) != STATUS_OK:
            continue
        if header & FLAG_EW:
            counts["select"] += header >> 16 & 0x1FF if header & FLAG_CARRY else 0
            continue
        macs = (header >> 16 & 0x1FF) * per_entry
        counts["hold"] += macs if header & FLAG_HOLD else 0
        counts["carry"] += macs if header & FLAG_CARRY else 0
    return counts


def answered_until(spec: CsbSpec, directed, draw, count, target: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """Pairs ``(words_in, words_out)`` answered in order by one session that starts holding nothing (the set opens
    with a transaction that drops whatever the stimulus before it left): the ``directed`` transactions, then
    ``draw(counts)``'s until every value of ``count(pairs)`` (a dict of what the set has so far) reaches
    ``target``."""
    session = CsbSession(spec)
    opening = [np.array([header_word(Op.FP, 0) | 1 << 15], dtype=np.uint32)]  # refused: leaves nothing held
    pairs = [(words, session.answer(words)) for words in opening + list(directed)]
    counts = count(pairs)
    while min(counts.values()) < target:
        drawn = [(words, session.answer(words)) for words in draw(counts)]
        pairs += drawn
        for key, value in count(drawn).items():
            counts[key] += value
    return pairs


def chain_transactions(spec: CsbSpec, *, target: int, seed: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """The directed cases, then random chains until ``HOLD`` and ``CARRY`` have ``target`` MACs each and SELECT on
    held sums ``target`` elements (where a held tile fits one); pairs ``(words_in, words_out)`` answered in order
    (:func:`answered_until`)."""
    rng = np.random.default_rng([seed, 41])
    wanted = [feature for feature in FEATURES if feature != "select" or held_tiles(spec)]

    def count(pairs) -> dict[str, int]:
        counts = count_chains(spec, pairs)
        return {feature: counts[feature] for feature in wanted}

    def draw(counts) -> list[np.ndarray]:
        only_select = all(counts[feature] >= target for feature in wanted if feature != "select")
        return random_select(spec, rng) if only_select else random_chain(spec, rng)

    return answered_until(spec, directed_chains(spec, rng), draw, count, target)


__all__ = ["FEATURES", "answered_until", "chain_transactions", "count_chains", "directed_chains", "held_tiles", "random_chain",
           "random_select", "select_held"]
