"""PE2 of the TT room: hand-worked words, per-product saturation order, the TT mapping, golden against reference."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from codesign.pe import get_pe
from codesign.pe.tt import contract, golden
from codesign.pe.tt.cycles import pe2_cycles, transaction_cycles
from codesign.pe.tt.reference import pe2_reference
from codesign.pe.tt.spec import Tt1Spec, Tt2Spec
from codesign.pe.tt.stimulus import TtStimulusOptions, count_macs
from codesign.pe.tt.stimulus import build as build_stimulus
from codesign.train.tt.ttm import tt_forward


def test_spec_fields_are_checked_by_name_and_pes_do_not_share_specs():
    with pytest.raises(ValueError, match="rows"):
        Tt2Spec(rows=9)
    with pytest.raises(ValueError, match="max_k"):
        Tt2Spec(max_k=256)
    assert Tt2Spec().bank_depth == 4 * 1 and Tt2Spec().max_jc == 1
    with pytest.raises(TypeError, match="needs a Tt2Spec"):
        get_pe("tt2").check_spec(Tt1Spec())


def test_pe2_transaction_by_hand():
    spec = Tt2Spec(lanes=2, rows=1, a_bits=8, b_bits=4, acc_bits=16, max_j=2, max_k=3, max_l=2)
    a = np.array([[[1, -2, 3], [4, 5, -6]]])  # I=1, J=2, K=3
    b = np.array([[2, -1], [7, -8]])  # L=2, J=2
    words = golden.words(spec, a, b)
    header = 1 | 2 << 8 | 3 << 16 | 2 << 24
    # B rows of J=2 values: one chunk of two 4-bit slots each; A rows of K=3: two chunks of two 8-bit slots
    assert words.tolist() == [header, 0xF2, 0x87, 0xFE01, 0x03, 0x0504, 0xFA]
    z = [[2 * 1 - 4, 2 * -2 - 5, 2 * 3 + 6], [7 - 32, -14 - 40, 21 + 48]]
    expected = [0] + [v & 0xFFFFFFFF for row in z for v in row]
    assert golden.output(spec, a, b).tolist() == expected
    assert pe2_reference(words, **spec.to_dict()) == expected
    # header and status 0-1, B 2-3, A 4-7; group 0's MAC loop (2 chunks x 2 MACs) 8-11, its read 13, its 3 results
    # 14-16; group 1's loop 12-15 beside them, its read 17, its results 18-20: 21 cycles. compute: 8 MACs and a
    # flush; drain: 2 reads and 6 results
    cycles = pe2_cycles(spec, header)
    assert (cycles.load, cycles.compute, cycles.drain, cycles.total) == (6, 9, 8, 21)
    assert transaction_cycles(spec, header) == cycles


def test_row_pairs_move_cycles_not_words_by_hand():
    """Two lanes, one row, K = 1: with row pairs a group holds two rows (lane 0 row 0, lane 1 row 1), so the two
    rows' MAC loops become one (the words in and out are those of a build without pairs: the golden has no pair
    path, and the RTL grid checks the pair builds' words against it)."""
    plain = Tt2Spec(lanes=2, rows=1, a_bits=8, b_bits=4, acc_bits=16, max_j=2, max_k=3, max_l=3)
    pairs = dataclasses.replace(plain, row_pairs=True)
    header = 1 | 2 << 8 | 1 << 16 | 3 << 24  # I=1, J=2, K=1, L=3
    assert [pairs.group_rows(k) for k in (1, 2)] == [2, 1] and plain.group_rows(1) == 1
    # header and status 0-1, B (3 rows of one chunk) 2-4, A (2 rows of one chunk) 5-6; rows 0 and 1's loop
    # (J = 2 MACs) 7-8, its read 10 and its two results 11-12; row 2's loop 9-10 beside them, its read 13, its
    # result 14: 15 cycles. Three one-row groups take 18: the third's loop waits for the first's result (11)
    # and runs 13-14, its read 16, its result 17
    assert (pe2_cycles(pairs, header).total, pe2_cycles(plain, header).total) == (15, 18)
    assert pe2_cycles(pairs, header).compute == 2 * 2 + 1
    assert "row_pairs" not in plain.to_dict() and pairs.to_dict()["row_pairs"] is True
    assert [get_pe("tt2").rtl_parameters(spec)["ROW_PAIRS"] for spec in (pairs, plain)] == [1, 0]
    with pytest.raises(ValueError, match="row_pairs"):
        Tt2Spec(row_pairs=1)


def test_the_row_pair_grid_runs_upper_halves_at_both_widths():
    """Every quick row-pair build has a 10^4-contraction twin, and its stimulus runs transactions whose groups
    use the upper lanes (K <= lanes / 2 and more than ``rows`` rows of L) and transactions without pairs; L
    reaches the top of its header field; the builds stream 32 and 128 bits."""
    grid = [case for case in get_pe("tt2").verification_grid() if case.spec.row_pairs]
    quick, long = [case for case in grid if not case.long], {case.id for case in grid if case.long}
    assert len(quick) >= 5 and all(f"{case.id}_10k" in long for case in quick)
    assert {case.spec.stream_bits for case in quick} == {32, 128} and max(case.spec.max_l for case in quick) == 255
    for case in quick:
        kinds = {"upper": 0, "plain": 0}
        for words_in, _ in build_stimulus(case.spec, TtStimulusOptions()):
            header = contract.stream_header(words_in, case.spec.stream_bits)
            if golden.status(case.spec, header) != contract.STATUS_OK:
                continue  # a refused header runs no group
            (_, _, k, l), _ = contract.header_dims(header, 4)
            if case.spec.group_rows(k) > case.spec.rows:
                kinds["upper"] += l > case.spec.rows
            else:
                kinds["plain"] += 1
        assert kinds["upper"] >= 8 and kinds["plain"] >= 8, (case.id, kinds)


def test_pe2_saturates_every_product_in_order():
    # 100*127 = 12700 twice reaches 25400, a third saturates at 32767, then -12700 pulls back to 20067
    a = np.full((1, 4, 1), 100)
    b = np.array([[127, 127, 127, -127]])
    assert golden.contract_middle(a, b, acc_bits=16).tolist() == [[[32767 - 12700]]]
    assert golden.contract_middle(a, b[:, ::-1], acc_bits=16).tolist() == [[[3 * 12700 - 12700]]]
    with pytest.raises(ValueError, match="J = 4 columns"):
        golden.contract_middle(a, b[:, :3], acc_bits=16)


@pytest.mark.parametrize("case", [c for c in get_pe("tt2").verification_grid() if not c.long], ids=lambda c: c.id)
def test_golden_equals_reference_and_reaches_the_mac_target(case):
    transactions = build_stimulus(case.spec, TtStimulusOptions())
    assert count_macs(case.spec, transactions) >= 10_000
    for words_in, words_out in transactions:
        assert pe2_reference(words_in, **case.spec.to_dict()) == words_out.tolist()


def test_refused_headers():
    spec = Tt2Spec(max_j=2, max_k=3, max_l=2)
    assert golden.status(spec, contract.header_word(1, 2, 3, 0)) == contract.STATUS_BAD_HEADER
    assert golden.status(spec, contract.header_word(1, 2, 4, 2)) == contract.STATUS_TOO_LARGE
    with pytest.raises(ValueError, match="after its first axis"):
        golden.words(spec, np.zeros((1, 2, 3), int), np.zeros((2, 3), int))


def test_inner_core_mapping_equals_tt_forward():
    rng = np.random.default_rng(9)
    cores = [rng.integers(-8, 8, size=(1, 2, 3, 4)).astype(float), rng.integers(-8, 8, size=(4, 5, 6, 3)).astype(float),
             rng.integers(-8, 8, size=(3, 2, 2, 1)).astype(float)]
    x = rng.integers(-128, 128, size=(2, 36)).astype(float)
    _, saved = tt_forward(x, cores)
    for k in (0, 1):
        a, b = golden.inner_core_operands(saved[k], cores[k])
        z = golden.contract_middle(a.astype(np.int64), b.astype(np.int64), acc_bits=32, a_bits=16, b_bits=4)
        assert np.array_equal(z.reshape(-1), saved[k + 1].reshape(-1)), k
    with pytest.raises(ValueError, match="state must be"):
        golden.inner_core_operands(saved[1], cores[0])


def test_pe2_beats_and_the_last_beat_spilling_by_hand():
    """At 128 bits PE2 sends up to four results of one chunk a cycle: K = 6 on 4 lanes is a beat of 4 and one of 2
    per row; the 12 results of I = 1, L = 2 fill three words, the last beat (2 results after 10) overfills none."""
    spec = Tt2Spec(lanes=4, rows=2, stream_bits=128, max_j=4, max_k=8, max_l=4)
    cycles = pe2_cycles(spec, 1 | 3 << 8 | 6 << 16 | 2 << 24)
    assert cycles.drain == 1 + 2 * 2  # one group read, two rows of ceil(6 / 4) beats, no spill
    # K = 3, L = 3: beats of 3 results; after 6 the word holds 2, the last beat brings 3: its third leaves alone
    spilled = pe2_cycles(spec, 1 | 3 << 8 | 3 << 16 | 3 << 24)
    assert spilled.drain == 2 + 3 * 1 + 1  # two group reads (rows 2 + 1), a beat per row, the spill's word
    # at 64 bits the beat is 2: K = 3 is two beats a row, and no last beat can spill (I*L*K even when it is 2)
    narrow = pe2_cycles(dataclasses.replace(spec, stream_bits=64), 1 | 3 << 8 | 3 << 16 | 3 << 24)
    assert narrow.drain == 2 + 3 * 2


def test_the_128_bit_grid_sends_last_beats_that_spill():
    """The RTL grid at 128 bits reaches the packer's extra word (tests/pe/test_stream_rtl.py runs it under stalls)."""
    wide = [case for case in get_pe("tt2").verification_grid() if not case.long and case.spec.stream_bits == 128]
    spills = 0
    for case in wide:
        for words_in, _ in build_stimulus(case.spec, TtStimulusOptions()):
            header = contract.stream_header(words_in, 128)
            (i, _, k, l), _ = contract.header_dims(header, 4)
            cycles = pe2_cycles(case.spec, header)
            if cycles.drain:
                spills += cycles.drain - i * (contract.chunks(l, case.spec.group_rows(k)) + l * contract.chunks(k, 4))
    assert wide and spills >= 10
