"""The CSB PE's header flags and element-wise ops (ZERO, G_FIRST, LEFT, SELECT, SHR, RELU): hand-worked transactions
from docs/csb.md, the golden model against the independent reference on every grid point's stimulus (at least 10^4
values per feature and point), the cycle model by hand, and bad input refused before anything is streamed.
tests/pe/test_levels.py runs the same stimulus at the C-sim and RTL levels and tests/pe/test_stream_rtl.py times
it on the RTL."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from codesign.pe.csb import CsbSpec
from codesign.pe.csb.cycles import transaction_cycles
from codesign.pe.csb.pe import CsbPE, CsbStimulusOptions
from codesign.pe.csb.reference import reference_output
from codesign.pe.csb.stimulus_ext import FEATURES, count_ext
from codesign.pe.csb.stream import (
    FLAG_EW,
    FLAG_G_FIRST,
    FLAG_LEFT,
    FLAG_ZERO,
    EwOp,
    Op,
    encode_elementwise,
    encode_transaction,
    expected_output,
    header_status,
    header_word,
)

SMALL = CsbSpec(block_rows=2, block_cols=3, batch=2)


def u32(values) -> list:
    return [int(v) & 0xFFFF_FFFF for v in values]


def both(spec: CsbSpec, words) -> list:
    """The golden words, checked equal to the reference's first."""
    golden = [int(w) for w in expected_output(spec, np.asarray(words, dtype=np.uint32))]
    assert golden == reference_output([int(w) for w in words], **spec.to_dict())
    return golden


def test_select_keeps_v_where_z_is_positive_and_shr_floors():
    # SELECT: z > 0 keeps v; z = 0 and negative z give 0; acc_bits = 32
    words = [header_word(EwOp.SELECT, 5, ew=True), *u32([5, -3, 7, 9, -(1 << 31)]), *u32([1, 1 << 30, 0, -1, 2])]
    assert both(SMALL, words) == [0, *u32([5, -3, 0, 0, -(1 << 31)])]
    # SHR 16 of 24-bit words: the top byte, floored (-1 -> -1, 0x7FFFFF -> 127, -0x800000 -> -128, 0x1FFFF -> 1);
    # bits above 24 ignored (0xAB_00FFFF is 0xFFFF -> 0)
    words = [header_word(EwOp.SHR, 5, 16, ew=True), *u32([-1, 0x7FFFFF, 0x800000, 0x1FFFF, 0xAB00FFFF])]
    assert both(SMALL, words) == [0, *u32([-1, 127, -128, 1, 0])]
    relu = encode_elementwise(SMALL, EwOp.SELECT, [4, -4, 0], [4, -4, 0])
    assert both(SMALL, relu) == [0, 4, 0, 0]
    # RELU: SELECT(v, v) from v alone; -2^31 and 0 give 0, 1 and 2^31 - 1 stay; at acc_bits = 20 the bits above
    # are ignored (0xFFF80000 is -2^19) and results are sign-extended
    words = [header_word(EwOp.RELU, 5, ew=True), *u32([1, -(1 << 31), 0, (1 << 31) - 1, -7])]
    assert both(SMALL, words) == [0, 1, 0, 0, (1 << 31) - 1, 0]
    narrow = CsbSpec(block_rows=2, block_cols=3, batch=2, acc_bits=20)
    words = [header_word(EwOp.RELU, 3, ew=True), *u32([0xFFF80000, 0x7FFFF | 1 << 25, 0x80000])]
    assert both(narrow, words) == [0, 0, (1 << 19) - 1, 0]
    assert encode_elementwise(SMALL, EwOp.RELU, [4, -4, 0]).tolist() == [header_word(EwOp.RELU, 3, ew=True), 4,
                                                                           0xFFFF_FFFC, 0]


def test_zero_g_first_and_left_by_hand():
    # W = [[0, 2, 0], [-3, 0, 1]] (SMALL's hand example in test_csb_header_cases): FP from zero
    index, weights, x = [0x01, 0x10, 0x12], [2, -3, 1], [1, 10, 2, 20, 5, 30]
    fp = encode_transaction(SMALL, Op.FP, index=np.array(index), weights=np.array(weights).reshape(3, 1, 1),
                            x=np.array(x).reshape(3, 1, 1, 2), zero=True)
    assert fp.size == 1 + 1 + 1 + 2  # header, index, weights, x: no accumulator section
    assert both(SMALL, fp) == [0, *u32([4, 40, 2, 0])]  # row 0: 2 x[1]; row 1: -3 x[0] + x[2]
    # WG with G first: G = -7 + 1*1 + 10*2 = 14 and 1000 + 3*3 + 30*4 = 1129, sent before X and DY
    wg = [header_word(Op.WG, 2, g_first=True), 0x12 << 8, *u32([-7, 1000]), 1 | 10 << 8 | 2 << 16 | 20 << 24,
          3 | 30 << 8, 1 | 2 << 8 | 3 << 16 | 4 << 24]
    assert both(SMALL, wg) == [0, 14, 1129]
    # UPD with LEFT, shift 2: B - sat32(4 G); 10 - 12 = -2; 4 * 2^30 saturates to 2^31 - 1, B saturates low;
    # 4 * -2^29 = -2^31 exactly: 0 + 2^31 saturates high
    upd = [header_word(Op.UPD, 3, 2, left=True), 0x00 | 0x01 << 8 | 0x02 << 16, *u32([10, 0, 0]),
           *u32([3, 1 << 30, -(1 << 29)])]
    assert both(SMALL, upd) == [0, *u32([-2, -(1 << 23), (1 << 23) - 1])]


def test_refused_combinations_and_encoder_errors():
    refused = [FLAG_EW | 3 | 1 << 16, FLAG_EW | FLAG_ZERO | 1 << 16, header_word(EwOp.SELECT, 1, ew=True) | 1 << 8,
               header_word(EwOp.RELU, 1, ew=True) | 1 << 8, header_word(EwOp.RELU, 1, ew=True) | 1 << 7,
               header_word(Op.UPD, 1) | FLAG_ZERO, header_word(Op.FP, 1) | FLAG_G_FIRST,
               header_word(Op.WG, 1) | FLAG_LEFT, header_word(Op.FP, 1) | 1 << 13]
    assert [header_status(SMALL, word) for word in refused] == [1] * len(refused)
    assert header_status(SMALL, header_word(EwOp.SHR, SMALL.ew_capacity + 1, ew=True)) == 2
    assert header_status(SMALL, header_word(EwOp.SHR, SMALL.ew_capacity, 31, ew=True)) == 0
    with pytest.raises(ValueError, match="capacity"):
        encode_elementwise(SMALL, EwOp.SHR, np.zeros(SMALL.ew_capacity + 1, int), shift=1)
    with pytest.raises(ValueError, match="SELECT takes"):
        encode_elementwise(SMALL, EwOp.SELECT, [1])
    with pytest.raises(ValueError, match="RELU takes v alone"):
        encode_elementwise(SMALL, EwOp.RELU, [1], [1])
    with pytest.raises(ValueError, match="status 1"):
        encode_transaction(SMALL, Op.UPD, index=np.array([0]), buffer=np.zeros((1, 1, 1), int),
                           grads=np.zeros((1, 1, 1), int), zero=True)
    with pytest.raises(ValueError, match="24-bit"):
        encode_elementwise(SMALL, EwOp.SHR, [1 << 23], shift=1)


def test_cycle_model_by_hand():
    # ZERO: the PE clears a result-buffer word (both lanes) a cycle; FP on SMALL: 2 rows = 2 cycles for 4 sums
    fp = [header_word(Op.FP, 1, zero=True), 0x01, 2, 1 | 2 << 8 | 3 << 16 | 4 << 24, 5 | 6 << 8]
    cycles = transaction_cycles(SMALL, fp)
    assert (cycles.load, cycles.compute, cycles.drain) == (5 + 2, 1, 2 + 4)
    wg = [header_word(Op.WG, 2, zero=True), 0x01 | 0x10 << 8, 0x04030201, 0x0605, 0x04030201]  # index, X, DY
    assert transaction_cycles(SMALL, wg).load == 5 + 2  # WG: a gradient word a cycle
    sel = [header_word(EwOp.SELECT, 3, ew=True)] + [1] * 6
    cycles = transaction_cycles(SMALL, sel)
    assert (cycles.load, cycles.compute, cycles.drain) == (7, 0, 2)  # Z streamed: 2n + 3
    relu = transaction_cycles(SMALL, [header_word(EwOp.RELU, 3, ew=True)] + [1] * 3)  # v once: 3 words fewer
    assert (relu.load, relu.compute, relu.drain) == (4, 0, 2) and relu.total == 3 + 3  # V streamed: n + 3
    assert transaction_cycles(SMALL, [header_word(EwOp.RELU, 0, ew=True)]).total == 3  # no element: the status
    assert transaction_cycles(SMALL, [header_word(Op.UPD, 1) | FLAG_ZERO]).total == 3


@pytest.mark.parametrize("case", [pytest.param(case, id=case.id, marks=[pytest.mark.slow] * bool(index))
                                  for index, case in enumerate(CsbPE().verification_grid())])  # 1 to 8 s each
def test_grid_stimulus_reaches_every_feature_and_agrees_with_the_reference(case):
    pe, spec = CsbPE(), replace(case.spec, stream_bits=32)  # a wide point's set is this one's as beats (the grid tests)
    transactions = pe.build_stimulus(spec, CsbStimulusOptions())
    counts = count_ext(spec, transactions)
    assert min(counts[feature] for feature in FEATURES) >= 10_000, counts
    answer = pe.reference_session(spec)  # in order: the held sums' transactions depend on the one before
    answers = [np.asarray(answer(w)).tolist() for w, _ in transactions]
    flagged = [(w, o, a) for (w, o), a in zip(transactions, answers) if int(w[0]) & 0xFC]
    mismatches = sum(a != o.tolist() for _, o, a in flagged)
    assert mismatches == 0 and len(flagged) > 50
    refused = sum(int(o[0]) != 0 for _, o, _ in flagged)
    assert refused >= 10  # every refused combination of the flags is in the directed set
