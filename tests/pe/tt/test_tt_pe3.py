"""PE3 of the TT room: the spec, hand-worked words, the header rule, golden against reference, the dense-gradient route."""

from __future__ import annotations

import numpy as np
import pytest

from codesign.pe import get_pe
from codesign.pe.tt import contract, golden
from codesign.pe.tt.cycles import pe3_cycles
from codesign.pe.tt.reference import pe3_reference
from codesign.pe.tt.spec import Tt3Spec
from codesign.pe.tt.stimulus import TtStimulusOptions, count_macs
from codesign.pe.tt.stimulus import build as build_stimulus


@pytest.mark.parametrize("field, value", [("lanes", 5), ("a_bits", 1), ("b_bits", 17), ("max_j", 0), ("max_j", 256)])
def test_spec_refuses_out_of_range_fields_by_name(field, value):
    with pytest.raises(ValueError, match=field):
        Tt3Spec(**{field: value})


def test_spec_has_no_accumulator_and_paper_defaults():
    spec = Tt3Spec()
    assert (spec.lanes, spec.a_bits, spec.b_bits, spec.macs) == (16, 8, 16, 16)
    assert not hasattr(spec, "acc_bits") and spec.max_jc == 4


def test_pe3_transaction_by_hand():
    spec = Tt3Spec(lanes=2, a_bits=8, b_bits=16, max_j=3)
    a, b = np.array([3, -1, 2]), np.array([-32768, 7, 100])
    words = golden.words(spec, a, b)
    # B: chunks of two 16-bit slots; A: chunks of two 8-bit slots
    assert words.tolist() == [3 | 3 << 8, 0x00078000, 0x0064, 0xFF03, 0x02]
    expected = [0] + [(x * y) & 0xFFFFFFFF for x in (3, -1, 2) for y in (-32768, 7, 100)]
    assert golden.output(spec, a, b).tolist() == expected
    assert pe3_reference(words, **spec.to_dict()) == expected
    cycles = pe3_cycles(spec, int(words[0]))  # 2 + B 2 + A 2 + 3 rows x (2 x 2 + 3)
    assert (cycles.load, cycles.compute, cycles.drain, cycles.total) == (4, 12, 9, 27)


def test_pe3_header_rule():
    spec = Tt3Spec(max_j=3)
    assert golden.status(spec, contract.header_word(1, 1) | 1 << 20) == contract.STATUS_BAD_HEADER
    assert golden.status(spec, contract.header_word(1, 4)) == contract.STATUS_TOO_LARGE
    assert golden.status(spec, contract.header_word(255, 3)) == contract.STATUS_OK
    with pytest.raises(ValueError, match="16-bit range"):
        golden.words(spec, np.array([1]), np.array([1 << 15]))


@pytest.mark.parametrize("case", [c for c in get_pe("tt3").verification_grid() if not c.long], ids=lambda c: c.id)
def test_golden_equals_reference_and_reaches_the_mac_target(case):
    transactions = build_stimulus(case.spec, TtStimulusOptions())
    assert count_macs(case.spec, transactions) >= 10_000
    for words_in, words_out in transactions:
        assert pe3_reference(words_in, **case.spec.to_dict()) == words_out.tolist()


def test_outer_products_summed_over_a_batch_give_the_dense_weight_gradient():
    # paper 003, App. A.2: dW = sum_b dy_b x_b^T, the PE3 products accumulated by the host
    rng = np.random.default_rng(3)
    x, dy = rng.integers(-128, 128, size=(4, 6)), rng.integers(-32768, 32768, size=(4, 5))
    dw = sum(golden.outer(dy[b], x[b]) for b in range(4))
    assert np.array_equal(dw, dy.T @ x)
