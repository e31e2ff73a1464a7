"""Kernel 1 on the CSB PE (header K1; docs/csb.md, "Kernel 1"): a K1 transaction is the kernel-1 PE's, its cycles
are that PE's, and the stimulus that checks it at every level reaches its targets."""

from __future__ import annotations

import numpy as np
import pytest

from codesign.pe.csb.cycles import transaction_cycles
from codesign.pe.csb.reference import reference_output
from codesign.pe.csb.spec import CsbSpec
from codesign.pe.csb.stimulus import build_transactions
from codesign.pe.csb.stimulus_k1 import count_k1, k1_transactions, with_k1
from codesign.pe.csb.stream import (
    FLAG_K1,
    FLAG_S2,
    CsbSession,
    EwOp,
    Op,
    chain_held,
    encode_select_held,
    encode_transaction,
    expected_output,
    header_word,
    result_count,
)

K3 = CsbSpec(block_rows=3, block_cols=2, kernel=3, out_h=3, out_w=2, batch=2, parallel=3, acc_bits=16, max_stride=2)
K5 = CsbSpec(block_rows=4, block_cols=4, kernel=5, out_h=2, out_w=2, batch=4, parallel=2)
FC = CsbSpec(block_rows=4, block_cols=4, batch=2)
SEL = CsbSpec(block_rows=4, block_cols=4, kernel=3, out_h=3, out_w=2, batch=2, max_stride=2)  # K1 EB sums fit


@pytest.mark.parametrize("spec", [K3, K5], ids=["k3-s2", "k5"])
def test_a_k1_transaction_is_the_kernel_one_pe_s_with_bit_14_set(spec):
    """Every transaction of the kernel-1 PE's own stimulus, sent with K1 to the k x k build, gets the kernel-1 PE's
    words back and takes its cycles."""
    one = spec.run_as(kernel_one=True)
    assert (one.kernel, one.in_tile(1)) == (1, (spec.out_h, spec.out_w)) and spec.run_as(kernel_one=False) == spec
    plain, k1 = CsbSession(one), CsbSession(spec)
    for words, _ in build_transactions(one, count=60, seed=4):
        sent = with_k1(words)
        want = plain.answer(words)
        assert np.array_equal(k1.answer(sent), want)
        if not int(words[0]) & 1 << 5:  # element-wise ones are sent without K1
            assert transaction_cycles(spec, sent) == transaction_cycles(one, words)


def test_k1_is_refused_on_elementwise_ops_and_carries_only_onto_its_own_sums():
    rng = np.random.default_rng(6)
    for op in EwOp:
        assert expected_output(SEL, [header_word(op, 2, ew=True) | FLAG_K1]).tolist() == [1]
    session, state = CsbSession(SEL), {}

    def both(words):
        golden = session.answer(words).tolist()
        assert golden == reference_output([int(w) for w in words], **SEL.to_dict(), state=state)
        return golden

    operands = dict(index=[0x10, 0x21], weights=rng.integers(-128, 128, (2, 1, 1)),
                    dy=rng.integers(-128, 128, (4, 3, 2, 2)), zero=True, stride=2, k1=True)
    held = encode_transaction(SEL, Op.EB, hold=True, **operands)
    for carry in ([header_word(Op.EB, 2, carry=True, stride=2)],  # held under K1, carried without it
                  [header_word(Op.EB, 2, carry=True, k1=True)]):  # ... or at the other stride
        assert both(held) == [0] and both(carry) == [1]
    n = result_count(SEL, Op.EB, 0, FLAG_S2 | FLAG_K1)
    assert n == 4 * 5 * 3 * 2 <= SEL.ew_capacity and chain_held(SEL, header_word(EwOp.SELECT, n, ew=True, carry=True))[2] == \
        FLAG_S2 | FLAG_K1  # the kernel-1 stride-2 tile: 5 x 3 positions
    assert both(held) == [0]
    z = rng.integers(-3, 3, n)
    masked = both(encode_select_held(SEL, z))
    sums = expected_output(SEL, encode_transaction(SEL, Op.EB, **operands))[1:].view(np.int32)
    assert masked == [0] + np.where(z > 0, sums, 0).astype(np.uint32).tolist()


def test_k1_changes_nothing_on_a_kernel_one_build():
    rng = np.random.default_rng(7)
    operands = dict(index=[0x00, 0x31], weights=rng.integers(-128, 128, (2, 1, 1)),
                    x=rng.integers(-128, 128, (4, 1, 1, 2)), zero=True)
    plain, k1 = CsbSession(FC), CsbSession(FC)
    assert plain.answer(encode_transaction(FC, Op.FP, hold=True, **operands)).tolist() == [0]
    assert k1.answer(encode_transaction(FC, Op.FP, hold=True, k1=True, **operands)).tolist() == [0]
    carry = encode_transaction(FC, Op.FP, carry=True, **{**operands, "zero": False})  # carried without K1: accepted
    assert np.array_equal(plain.answer(carry), k1.answer(carry)) and k1.held is None


def test_stimulus_reaches_its_targets_under_k1_and_agrees_with_the_reference():
    pairs = k1_transactions(K3, target=2000, seed=1)
    counts = count_k1(K3, pairs)
    assert min(counts.values()) >= 2000 and set(counts) == {"fp", "eb", "wg", "upd"}
    assert {int(out[0]) for _, out in pairs} == {0, 1, 2, 3}
    headers = [int(words[0]) for words, _ in pairs]
    assert any(h & FLAG_K1 and h & FLAG_S2 for h in headers) and any(h & FLAG_K1 and not h & FLAG_S2 for h in headers)
    state: dict = {}
    for words_in, words_out in pairs:
        assert reference_output([int(w) for w in words_in], **K3.to_dict(), state=state) == words_out.tolist()
