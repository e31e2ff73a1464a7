"""Stride 2 on the CSB PE (header S2; docs/csb.md, "Stride 2"): the word-level rules, the cycle model by hand, and the
stimulus that checks them at every level."""

from __future__ import annotations

import numpy as np
import pytest

from codesign.pe.csb.cycles import transaction_cycles, zero_words
from codesign.pe.csb.reference import reference_output
from codesign.pe.csb.spec import CsbSpec
from codesign.pe.csb.stimulus_stride import count_stride, stride_transactions
from codesign.pe.csb.stream import (
    FLAG_S2,
    CsbSession,
    Op,
    encode_select_held,
    encode_transaction,
    expected_output,
    header_word,
    result_count,
    sections,
)

S2 = CsbSpec(block_rows=3, block_cols=2, kernel=3, out_h=3, out_w=2, batch=2, parallel=3, acc_bits=16, max_stride=2)
S1 = CsbSpec(**{**S2.to_dict(), "max_stride": 1})
SEL = CsbSpec(block_rows=8, block_cols=8, kernel=3, out_h=2, out_w=2, batch=1, parallel=2, max_stride=2)  # EB sums fit a SELECT


def test_sections_cover_the_stride_two_tile():
    in_bytes = 2 * (7 * 5) * 2  # block_cols * (2*(3-1)+3) x (2*(2-1)+3) positions * lanes
    assert S2.in_tile(2) == (7, 5)
    assert dict((name, count) for name, _, count in sections(S2, Op.FP, 1, FLAG_S2))["x"] == in_bytes
    assert dict((name, count) for name, _, count in sections(S2, Op.EB, 1, FLAG_S2))["acc"] == in_bytes
    assert result_count(S2, Op.EB, 1, FLAG_S2) == in_bytes
    assert result_count(S2, Op.FP, 1, FLAG_S2) == result_count(S2, Op.FP, 1) == 3 * 6 * 2


def test_s2_is_refused_where_the_pe_or_the_op_has_no_stride_two():
    for op in Op:
        assert expected_output(S1, [header_word(op, 1) | FLAG_S2]).tolist() == [1]
    assert expected_output(S2, [header_word(Op.UPD, 1) | FLAG_S2]).tolist() == [1]
    assert expected_output(S2, [header_word(0, 1, ew=True) | FLAG_S2]).tolist() == [1]
    with pytest.raises(ValueError, match="runs strides 1..1"):
        encode_transaction(S1, Op.FP, index=[0], weights=np.zeros((1, 3, 3), int), x=np.zeros((2, 7, 5, 2), int),
                           zero=True, stride=2)
    with pytest.raises(ValueError, match="stride=2"):
        encode_transaction(S2, Op.UPD, index=[0], buffer=np.zeros((1, 3, 3), int), grads=np.zeros((1, 3, 3), int),
                           stride=2)


def test_carry_needs_the_stride_held_and_select_takes_held_stride_two_sums():
    rng = np.random.default_rng(3)
    session, state = CsbSession(SEL), {}

    def both(words):
        golden = session.answer(words).tolist()
        assert golden == reference_output([int(w) for w in words], **SEL.to_dict(), state=state)
        return golden

    operands = dict(index=[0x10, 0x37], weights=rng.integers(-128, 128, (2, 3, 3)),
                    dy=rng.integers(-128, 128, (8, 2, 2, 1)), zero=True, stride=2)
    held = encode_transaction(SEL, Op.EB, hold=True, **operands)
    assert both(held) == [0]
    assert both([header_word(Op.EB, 2, carry=True)]) == [1]  # held at stride 2, carried at stride 1
    assert both([header_word(Op.EB, 2, carry=True, stride=2)]) == [1]  # the refusal dropped the sums
    assert both(held) == [0]
    n = result_count(SEL, Op.EB, 0, FLAG_S2)
    assert n == 8 * 25 <= SEL.ew_capacity
    z = rng.integers(-3, 3, n)
    masked = both(encode_select_held(SEL, z))
    sums = expected_output(SEL, encode_transaction(SEL, Op.EB, **operands))[1:].view(np.int32)
    assert masked == [0] + np.where(z > 0, sums, 0).astype(np.uint32).tolist()


def test_a_one_by_one_eb_at_stride_two_leaves_the_positions_no_output_reaches():
    """At a 1 x 1 kernel, stride 2 reaches the even rows and columns of the 5 x 5 input tile only; the odd ones keep
    their initial sums, the even ones add w * DY."""
    spec = CsbSpec(block_rows=2, block_cols=2, kernel=1, out_h=3, out_w=3, batch=1, max_stride=2)
    rng = np.random.default_rng(5)
    acc = rng.integers(-1000, 1000, (2, 5, 5, 1))
    dy = rng.integers(-128, 128, (2, 3, 3, 1))
    words = encode_transaction(spec, Op.EB, index=[0x10], weights=np.full((1, 1, 1), 3), dy=dy, acc=acc, stride=2)
    out = expected_output(spec, words)
    assert out[0] == 0
    sums = out[1:].view(np.int32).reshape(2, 5, 5, 1)
    expected = acc.copy()
    expected[0, ::2, ::2] += 3 * dy[1]  # entry (y=1, x=0): input channel 0 from output channel 1
    assert np.array_equal(sums, expected)
    assert reference_output([int(w) for w in words], **spec.to_dict()) == out.tolist()


def test_cycles_by_hand():
    words = encode_transaction(S2, Op.EB, index=[0x00, 0x21], weights=np.zeros((2, 3, 3), int),
                               dy=np.zeros((3, 3, 2, 2), int), zero=True, stride=2)
    # in: header, index word, 18 weight bytes (5 words), 36 DY bytes (9 words); ZERO clears 2 channels x 7 rows x
    # 2 * ceil(ceil(5 / 2) / 3) = 2 words a row; compute 2 entries x 9 taps x ceil(6 / 3); drain 1 + status + 140
    assert zero_words(S2, op=Op.EB, nnz=2, stride=2) == 2 * 7 * 2
    cycles = transaction_cycles(S2, words)
    assert (cycles.load, cycles.compute, cycles.drain) == (1 + 1 + 5 + 9 + 28, 2 * 9 * 2, 2 + 2 * 35 * 2)
    assert zero_words(S2, op=Op.EB, nnz=2) == 2 * 5 * 2  # stride 1: 5 x 4 tile, ceil(4 / 3) words a row
    refused = transaction_cycles(S1, [header_word(Op.EB, 2) | FLAG_S2])
    assert (refused.load, refused.compute, refused.drain) == (1, 0, 2)


def test_stimulus_reaches_its_target_at_stride_two_and_agrees_with_the_reference():
    pairs = stride_transactions(S2, target=2000, seed=1)
    assert min(count_stride(S2, pairs).values()) >= 2000
    statuses = {int(out[0]) for _, out in pairs}
    assert statuses == {0, 1, 3}  # accepted, refused headers (a CARRY at the other stride), an index outside
    state: dict = {}
    for words_in, words_out in pairs:
        assert reference_output([int(w) for w in words_in], **S2.to_dict(), state=state) == words_out.tolist()
    assert stride_transactions(S1, target=2000, seed=1) == []
