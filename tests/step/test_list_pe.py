"""The PE phases of the list cycle model: the FP-MAC array's add up to its RTL cycle model, for GEMMs,
element-wise operations and refused headers."""

from __future__ import annotations

import pytest

from codesign.pe import get_pe
from codesign.pe.fpmac_array.contract import Header
from codesign.pe.fpmac_array.cycles import transaction_cycles
from codesign.pe.fpmac_array.spec import FpmacArraySpec
from codesign.pe.fpmac_array.vector import OP_MASK, OP_RELU, OP_SGD, VectorHeader
from codesign.step.list_pe import IN, OUT, WAIT, pe_phases

SPEC = FpmacArraySpec(max_m=12, max_n=10, max_k=12)


@pytest.mark.parametrize("header", [
    Header(m=12, n=10, k=12, fb=9).word(), Header(m=3, n=1, k=7, fb=23, trans_a=True, accumulate=True).word(),
    VectorHeader(op=OP_RELU, m=4, n=5, fb=7).word(), VectorHeader(op=OP_MASK, m=1, n=10, fb=7).word(),
    VectorHeader(op=OP_SGD, m=12, n=10, fb=23).word(), Header(m=13, n=1, k=1, fb=1).word(),
    VectorHeader(op=5, m=1, n=1, fb=1).word()])
def test_fpmac_array_phases_add_up_to_its_cycle_model(header):
    steps, status, operands, results = pe_phases(get_pe("fpmac_array"), SPEC, header)
    cycles = transaction_cycles(SPEC, header)
    assert sum(n for _, n, _ in steps) == cycles.total
    assert steps[:2] == [(IN, 1, None), (OUT, 1, status)]
    assert (operands, results) == ((cycles.load, cycles.drain) if status == 0 else (0, 0))
    if status == 0:
        assert [kind for kind, _, _ in steps[2:]] == [IN, WAIT, OUT]
