"""The CSB PE's held sums (HOLD, CARRY; docs/csb.md, "Held sums"): a held chain equals the chain that streams its
sums out and back in, the state rules by hand (what drops the sums, what a CARRY needs), the cycle model, and the
grid's chain stimulus against the independent reference run in the same order (at least 10^4 MACs of each flag per
point), which a golden that forgot the held sums would fail. tests/pe/test_levels.py runs the same stimulus at the
C-sim and RTL levels and tests/pe/test_stream_rtl.py times it on the RTL."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from codesign.pe.csb import CsbSpec
from codesign.pe.csb.cycles import transaction_cycles
from codesign.pe.csb.pe import CsbPE
from codesign.pe.csb.stimulus import TransactionBuilder
from codesign.pe.csb.stimulus_chain import FEATURES, chain_transactions, count_chains, held_tiles
from codesign.pe.csb.stream import (
    FLAG_CARRY,
    FLAG_EW,
    CsbSession,
    EwOp,
    Op,
    decode_output,
    encode_elementwise,
    encode_select_held,
    encode_transaction,
    expected_output,
    header_word,
    split_stream,
)

SAT16 = CsbSpec(block_rows=4, block_cols=3, kernel=3, out_h=2, out_w=3, batch=2, parallel=2, acc_bits=16)


def _operands(make: TransactionBuilder, op: Op, nnz: int) -> dict:
    k = make.spec.kernel
    if op == Op.FP:
        return dict(weights=make.int8((nnz, k, k)), x=make.int8(make.x_shape))
    if op == Op.EB:
        return dict(weights=make.int8((nnz, k, k)), dy=make.int8(make.dy_shape))
    return dict(x=make.int8(make.x_shape), dy=make.int8(make.dy_shape))


@pytest.mark.parametrize("op", [Op.FP, Op.EB, Op.WG])
def test_a_held_chain_equals_the_chain_that_streams_its_sums(op):
    make = TransactionBuilder(SAT16, np.random.default_rng(int(op)))
    nnz = SAT16.capacity
    index = make.index(nnz, "shuffled")
    start = make.acc(make.dy_shape if op == Op.FP else make.x_shape if op == Op.EB else (nnz, 3, 3), "near")
    calls = [_operands(make, op, nnz) for _ in range(4)]
    initial = "grads" if op == Op.WG else "acc"
    session, sums = CsbSession(SAT16), start
    for at, operands in enumerate(calls):
        streamed = expected_output(SAT16, encode_transaction(SAT16, op, index=index, **{initial: sums}, **operands))
        sums = decode_output(SAT16, op, nnz, streamed)[1].reshape(np.shape(start))
        held = session.answer(encode_transaction(SAT16, op, index=index, hold=at < 3, carry=at > 0,
                                                 **({} if at else {initial: start}), **operands))
        assert held.tolist() == ([0] if at < 3 else streamed.tolist())
    assert np.any(np.abs(sums) == 1 << 15) or np.any(sums == (1 << 15) - 1)  # the 16-bit sums saturated on the way


@pytest.mark.parametrize("op", [Op.FP, Op.EB])
def test_a_select_on_held_sums_masks_them_where_z_is_positive(op):
    spec = CsbSpec(block_rows=3, block_cols=8, batch=2, acc_bits=16)
    make = TransactionBuilder(spec, np.random.default_rng(3))
    index, operands = make.index(5), _operands(make, op, 5)
    sent = expected_output(spec, encode_transaction(spec, op, index=index, zero=True, **operands))
    sums = decode_output(spec, op, 5, sent)[1]
    z = make.acc((sums.size,))
    z[:4] = [0, 1, -1, spec.acc_min]
    session = CsbSession(spec)
    assert session.answer(encode_transaction(spec, op, index=index, zero=True, hold=True, **operands)).tolist() == [0]
    masked = session.answer(encode_select_held(spec, z))
    assert masked[1:].view(np.int32).tolist() == np.where(z > 0, sums, 0).tolist()
    assert session.held is None  # a SELECT holds nothing: a second one is refused from its header
    assert session.answer(encode_select_held(spec, z)[:1]).tolist() == [1]
    assert transaction_cycles(spec, encode_select_held(spec, z)).load == 1 + z.size  # Z alone


def _held_fp(spec: CsbSpec, rng: np.random.Generator, nnz: int = 1) -> np.ndarray:
    make = TransactionBuilder(spec, rng)
    return encode_transaction(spec, Op.FP, index=make.index(nnz), zero=True, hold=True, **_operands(make, Op.FP, nnz))


def test_what_drops_the_held_sums_and_what_a_carry_needs():
    rng, spec = np.random.default_rng(5), SAT16
    make = TransactionBuilder(spec, rng)
    carry_fp = encode_transaction(spec, Op.FP, index=make.index(2), carry=True, **_operands(make, Op.FP, 2))
    session = CsbSession(spec)
    assert session.answer(_held_fp(spec, rng)).tolist() == [0]
    assert session.answer(carry_fp).tolist()[0] == 0  # another block of the row: FP's sums are per channel
    breakers = [encode_elementwise(spec, EwOp.SHR, [1, 2], shift=1), make.transaction(Op.UPD, 1, shift=2),
                np.array([header_word(Op.FP, 1) | 1 << 13], dtype=np.uint32),
                encode_transaction(spec, Op.FP, index=make.index(1), zero=True, **_operands(make, Op.FP, 1))]
    for breaker in breakers:
        session.answer(_held_fp(spec, rng))
        session.answer(breaker)
        assert session.held is None
        assert session.answer(carry_fp[:1]).tolist() == [1]  # refused from its header alone
    session.answer(_held_fp(spec, rng))
    assert session.answer(np.array([header_word(Op.EB, 1, carry=True)], dtype=np.uint32)).tolist() == [1]
    wg = encode_transaction(spec, Op.WG, index=make.index(2), zero=True, hold=True, **_operands(make, Op.WG, 2))
    session.answer(wg)
    assert session.answer(np.array([header_word(Op.WG, 3, carry=True)], dtype=np.uint32)).tolist() == [1]
    outside = np.array([0x00, 0xF0], dtype=np.uint8)  # row 15 lies outside the 4-row block: status 3
    words = encode_transaction(spec, Op.FP, index=outside, zero=True, hold=True, check=False,
                               **_operands(make, Op.FP, 2))
    assert session.answer(words).tolist() == [3] and session.held is None
    for word in (header_word(Op.FP, 1) | FLAG_CARRY | 4, header_word(Op.UPD, 1) | 1 << 6,
                 header_word(EwOp.SELECT, 1, ew=True) | 1 << 6):  # each after an FP held it could otherwise take
        session.answer(_held_fp(spec, rng))
        assert session.answer(np.array([word], dtype=np.uint32)).tolist() == [1]
    with pytest.raises(ValueError, match="carry=True"):
        encode_transaction(spec, Op.FP, index=make.index(1), zero=True, carry=True, **_operands(make, Op.FP, 1))


def test_cycle_model_and_stream_split_of_a_chain():
    rng = np.random.default_rng(9)
    held, make = _held_fp(SAT16, rng, 2), TransactionBuilder(SAT16, rng)
    carry = encode_transaction(SAT16, Op.FP, index=make.index(2), carry=True, **_operands(make, Op.FP, 2))
    acc_words = SAT16.block_rows * SAT16.out_pos * SAT16.batch
    assert transaction_cycles(SAT16, held).drain == 2  # the status alone
    assert transaction_cycles(SAT16, held).load == held.size + 4 * 2 * 2  # ZERO: 4 channels x 2 rows x 2 words
    cycles = transaction_cycles(SAT16, carry)
    assert (cycles.load, cycles.drain) == (carry.size, 2 + acc_words)  # no ACC section, no cycle for it
    assert transaction_cycles(SAT16, carry[:1]).total == 3  # refused: header, register load, status
    parts = split_stream(SAT16, np.concatenate([held, carry, carry[:1]]))
    assert [part.size for part in parts] == [held.size, carry.size, 1]


@pytest.mark.parametrize("case", CsbPE().verification_grid(), ids=lambda case: case.id)
def test_grid_chains_reach_their_target_and_agree_with_the_reference_in_order(case):
    pe, spec = CsbPE(), replace(case.spec, stream_bits=32)  # a wide point's set is this one's as beats (the grid tests)
    pairs = chain_transactions(spec, target=10_000, seed=2024)
    counts = count_chains(spec, pairs)
    wanted = [feature for feature in FEATURES if feature != "select" or held_tiles(spec)]
    assert min(counts[feature] for feature in wanted) >= 10_000, counts
    # their FP sums exceed a SELECT's elements: 256 > 144 and 108 > 16
    assert len(wanted) == 3 or case.id in ("conv4_k3_t4_b4_p2", "conv4_k1_t3_b3_p2")
    answer = pe.reference_session(spec)
    assert sum(np.asarray(answer(w)).tolist() != o.tolist() for w, o in pairs) == 0
    statuses = [int(o[0]) for _, o in pairs]
    assert statuses.count(1) >= 27  # every drop and every refused combination of the directed set
    wrong = 0  # what a PE that started every CARRY from zero would send instead: it would fail
    for words, out in pairs:
        if int(words[0]) & FLAG_CARRY and not int(words[0]) & FLAG_EW and out.size > 1:
            header = int(words[0]) & ~FLAG_CARRY | 4  # ZERO: the same sections, sums from 0
            wrong += expected_output(spec, np.concatenate([[header], words[1:]]).astype(np.uint32)).tolist() != \
                out.tolist()
    assert wrong > 10
