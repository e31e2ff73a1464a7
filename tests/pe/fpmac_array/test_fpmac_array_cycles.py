"""The cycle model by hand (the RTL's stall-free counts are checked against it in tests/rtl/test_stream_rtl.py and tests/pe/fpmac_array/test_fpmac_array_rtl_cases.py)."""

from __future__ import annotations

from codesign.pe.fpmac_array.contract import Header
from codesign.pe.fpmac_array.cycles import groups, tiles, transaction_cycles
from codesign.pe.fpmac_array.spec import FpmacArraySpec

SPEC = FpmacArraySpec(rows=3, cols=2, max_m=9, max_n=7, max_k=12)


def test_tiles_and_groups():
    assert (tiles(SPEC, 9, 7), groups(SPEC, 9, 7)) == (12, 3)  # 3 x 4 tiles, the last column partial
    assert (tiles(SPEC, 4, 5), groups(SPEC, 4, 5)) == (6, 2)
    assert (tiles(SPEC, 1, 1), groups(SPEC, 1, 1)) == (1, 1)


def test_transaction_by_hand():
    # 4 x 5 x 6 with C_in: load 24 + 30 + 20; 6 tiles in 2 groups: 4 * 2 * 5 + 6 + 7 = 53; send 20
    cycles = transaction_cycles(SPEC, Header(m=4, n=5, k=6, fb=3, accumulate=True).word())
    assert (cycles.header, cycles.load, cycles.compute, cycles.drain, cycles.total) == (2, 74, 53, 20, 149)
    # 1 x 1 x 1 without C_in: 2 + 2 + (0 + 1 + 7) + 1
    assert transaction_cycles(SPEC, Header(m=1, n=1, k=1, fb=1).word()).total == 13


def test_refused_header_is_two_cycles():
    for header in (Header(m=0, n=1, k=1, fb=1), Header(m=1, n=1, k=13, fb=1), Header(m=1, n=1, k=1, fb=24)):
        cycles = transaction_cycles(SPEC, header.word())
        assert (cycles.total, cycles.load, cycles.compute) == (2, 0, 0)


def test_element_wise_operations_by_hand():
    from codesign.pe.fpmac_array.vector import OP_MASK, OP_RELU, OP_SGD, VectorHeader

    # SGD on 2 x 3: 3 scalars + 3 * 6 in; read, 3 x 4 FP-MAC stages, see it empty, first read: 15; 2 * 6 out
    sgd = transaction_cycles(SPEC, VectorHeader(op=OP_SGD, m=2, n=3, fb=5).word())
    assert (sgd.header, sgd.load, sgd.compute, sgd.drain, sgd.total) == (2, 21, 15, 12, 50)
    assert transaction_cycles(SPEC, VectorHeader(op=OP_RELU, m=2, n=2, fb=1).word()).total == 2 + 4 + 1 + 4
    assert transaction_cycles(SPEC, VectorHeader(op=OP_MASK, m=1, n=3, fb=1).word()).total == 2 + 6 + 1 + 3
    for refused in (VectorHeader(op=0, m=1, n=1, fb=1), VectorHeader(op=OP_SGD, m=10, n=1, fb=1)):
        assert transaction_cycles(SPEC, refused.word()).total == 2
