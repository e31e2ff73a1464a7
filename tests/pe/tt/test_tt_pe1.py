"""PE1 of the TT room: spec validation, the chunk packing, the saturating order, hand-worked words, the TT mapping."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from codesign.pe import get_pe
from codesign.pe.tt import contract, golden
from codesign.pe.tt.cycles import pe1_cycles
from codesign.pe.tt.reference import pe1_reference
from codesign.pe.tt.spec import Tt1Spec, Tt3Spec
from codesign.pe.tt.stimulus import TtStimulusOptions, count_macs
from codesign.pe.tt.stimulus import build as build_stimulus
from codesign.train.tt.ttm import tt_forward


@pytest.mark.parametrize("field, value", [
    ("lanes", 0), ("lanes", 3), ("lanes", 32), ("rows", 0), ("rows", 9), ("a_bits", 1), ("a_bits", 17),
    ("b_bits", 1), ("b_bits", 17), ("acc_bits", 15), ("acc_bits", 33), ("max_j", 0), ("max_k", 0), ("max_l", 256),
])
def test_spec_refuses_out_of_range_fields_by_name(field, value):
    with pytest.raises(ValueError, match=field):
        Tt1Spec(**{field: value})


def test_spec_is_keyword_only_frozen_and_typed():
    with pytest.raises(TypeError):
        Tt1Spec(16)  # type: ignore[misc]
    with pytest.raises(TypeError, match="lanes"):
        Tt1Spec(lanes=16.0)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="chunks of B"):
        Tt1Spec(lanes=1, max_j=255, max_k=255, max_l=255)
    spec = Tt1Spec()
    assert spec.macs == 128 and spec.max_kc == 4 and spec.bank_depth == 4 * 16 * 4


def test_chunk_packing_by_hand():
    # 4 lanes of 4-bit codes: one word, fields of 4 bits, lane 0 lowest
    assert contract.pack_rows(np.array([[1, -1, 7, -8]]), 4, 4).tolist() == [0x87F1]
    # K = 3 in 2-lane chunks of 8-bit codes: two chunks, the padding lane is 0
    assert contract.pack_rows(np.array([[1, -2, 3]]), 2, 8).tolist() == [0xFE01, 0x0003]
    # 16-bit codes, 4 lanes: two words per chunk
    assert contract.pack_rows(np.array([[-1, 2, 3, -32768]]), 4, 16).tolist() == [0x0002FFFF, 0x80000003]
    assert contract.chunk_words(16, 16) == 8 and contract.chunk_words(16, 4) == 2 and contract.chunk_words(1, 4) == 1


def test_saturating_order_is_visible():
    terms = np.array([[30000, 30000, -30000]])
    assert contract.saturating_scan(terms, 16).tolist() == [32767 - 30000]
    assert contract.saturating_scan(terms[:, ::-1], 16).tolist() == [30000]


def test_pe1_transaction_by_hand():
    spec = Tt1Spec(lanes=2, rows=1, a_bits=8, b_bits=4, acc_bits=16, max_j=2, max_k=3, max_l=2)
    a = np.array([[[1, -2, 3]]])  # I=1, J=1, K=3
    b = np.array([[[2, 1, -1]], [[-8, 7, 0]]])  # L=2
    words = golden.words(spec, a, b)
    header = 1 | 1 << 8 | 3 << 16 | 2 << 24
    # B rows: [2, 1 | -1, pad], [-8, 7 | 0, pad] as 2 x 4-bit slots per chunk; A as 2 x 8-bit slots
    assert words.tolist() == [header, 0x12, 0x0F, 0x78, 0x00, 0xFE01, 0x03]
    z0, z1 = 1 * 2 - 2 * 1 + 3 * -1, 1 * -8 + -2 * 7
    assert golden.output(spec, a, b).tolist() == [0, z0 & 0xFFFFFFFF, z1 & 0xFFFFFFFF]
    assert pe1_reference(words, **spec.to_dict()) == [0, z0 & 0xFFFFFFFF, z1 & 0xFFFFFFFF]
    cycles = pe1_cycles(spec, header)  # 2 + B 4 words + A 2 words + 2 groups of (2 chunks + 1) + 2 results
    assert (cycles.header, cycles.load, cycles.compute, cycles.drain, cycles.total) == (2, 6, 6, 2, 16)


def test_pe1_beats_and_the_last_beat_spilling_by_hand():
    """At 128 bits PE1 sends up to four results of one row group a cycle (rows 6: a beat of 4 and one of 2 a
    group); at 64 bits two; on 3 rows at 128 bits two (the beat is a power of two)."""
    spec = Tt1Spec(lanes=4, rows=6, stream_bits=128, max_j=4, max_k=8, max_l=16)
    # I = 1, L = 10: groups of 6 and 4 rows, beats 4 + 2 and 4; 10 results end with a beat of 4 after 6: the
    # word holds 2, so the beat's last two leave as a word of their own
    assert pe1_cycles(spec, 1 | 1 << 8 | 4 << 16 | 10 << 24).drain == 2 + 1 + 1
    # I = 2, L = 6: a group of 6 a row, beats 4 + 2; 12 results fill three words, no spill
    assert pe1_cycles(spec, 2 | 1 << 8 | 4 << 16 | 6 << 24).drain == 2 * 2
    assert pe1_cycles(dataclasses.replace(spec, stream_bits=64), 2 | 1 << 8 | 4 << 16 | 6 << 24).drain == 2 * 3
    three = dataclasses.replace(spec, rows=3)  # I = 1, L = 5: groups of 3 and 2, beats 2 + 1 and 2; the last
    assert pe1_cycles(three, 1 | 1 << 8 | 4 << 16 | 5 << 24).drain == 3 + 1  # starts with 3 held: it spills
    assert pe1_cycles(dataclasses.replace(spec, stream_bits=32), 1 | 1 << 8 | 4 << 16 | 10 << 24).drain == 10


def test_pe1_refusals():
    spec = Tt1Spec(max_j=2, max_k=3, max_l=2)
    assert golden.status(spec, contract.header_word(1, 0, 1, 1)) == contract.STATUS_BAD_HEADER
    assert golden.status(spec, contract.header_word(1, 3, 1, 1)) == contract.STATUS_TOO_LARGE
    assert pe1_cycles(spec, contract.header_word(0, 1, 1, 1)).total == 2
    with pytest.raises(ValueError, match="do not fit"):
        golden.words(spec, np.zeros((1, 3, 1), int), np.zeros((1, 3, 1), int))
    with pytest.raises(ValueError, match="b must share"):
        golden.contract_last(np.zeros((1, 2, 3), int), np.zeros((1, 2, 4), int), lanes=16, acc_bits=32)
    with pytest.raises(ValueError, match="4-bit range"):
        golden.words(spec, np.zeros((1, 1, 1), int), np.full((1, 1, 1), 8))


@pytest.mark.parametrize("case", [c for c in get_pe("tt1").verification_grid() if not c.long], ids=lambda c: c.id)
def test_golden_equals_reference_and_reaches_the_mac_target(case):
    transactions = build_stimulus(case.spec, TtStimulusOptions())
    assert count_macs(case.spec, transactions) >= 10_000
    for words_in, words_out in transactions:
        assert pe1_reference(words_in, **case.spec.to_dict()) == words_out.tolist()


def test_narrow_accumulators_saturate_in_the_stimulus():
    spec = Tt1Spec(lanes=4, rows=3, a_bits=16, b_bits=16, acc_bits=16, max_j=5, max_k=9, max_l=7)
    results = np.concatenate([w[1:] for _, w in build_stimulus(spec, TtStimulusOptions())])
    signed = results.astype(np.int64) - ((results >> 31) << 32).astype(np.int64)
    assert (signed == 32767).any() and (signed == -32768).any()


def test_last_core_mapping_equals_tt_forward():
    rng = np.random.default_rng(5)
    cores = [rng.integers(-8, 8, size=(1, 2, 3, 4)).astype(float), rng.integers(-8, 8, size=(4, 5, 6, 1)).astype(float)]
    x = rng.integers(-128, 128, size=(3, 18)).astype(float)
    y, saved = tt_forward(x, cores)
    state = saved[1]  # (B, P, r_1, n_2, 1); its values are integer sums of products of codes
    a, b = golden.last_core_operands(state, cores[1])
    z = golden.contract_last(a.astype(np.int64), b.astype(np.int64), lanes=16, acc_bits=32, a_bits=16, b_bits=4)
    assert np.array_equal(z.reshape(y.shape), y)
    with pytest.raises(ValueError, match="last core"):
        golden.last_core_operands(state, cores[0])
    with pytest.raises(ValueError, match="state must be"):
        golden.last_core_operands(state[:, :, :2], cores[1])
    with pytest.raises(ValueError, match="rank and mode >= 1"):
        golden.last_core_operands(state, np.zeros((0, 5, 6, 1)))


@pytest.mark.parametrize("stream_bits", [32, 64, 128])
@pytest.mark.parametrize(("name", "fields"), [("tt1", "jkl"), ("tt2", "jkl"), ("tt3", "j")])
def test_grid_reaches_every_header_field_and_has_a_10k_contraction_twin_of_each(name, fields, stream_bits):
    """At every stream width: builds at the top of every cached dimension's header field in the quick grid (PE1,
    PE2: three builds at the top of J, K and L; PE3: J up to 255), a 10^4-contraction twin of every quick point,
    and at least five configurations with 10^4 contractions in the extended grid (all five at 32 bits quick)."""
    grid = [case for case in get_pe(name).verification_grid()
            if case.spec.stream_bits == stream_bits and getattr(case.spec, "b_order", "lj") == "lj"
            and not getattr(case.spec, "row_pairs", False) and not getattr(case.spec, "j_pairs", False)]
    # (the builds of b_order_grid, j_pairs_grid and row_pairs_grid apart)
    quick = [case for case in grid if not case.long]
    long = {case.id: case for case in grid if case.long}
    assert {max(getattr(case.spec, f"max_{d}") for case in quick) for d in fields} == {255}
    for case in quick:
        twin = long[f"{case.id}_10k"]
        assert twin.spec == case.spec and twin.options.min_contractions >= 10_000
    configs = {case.spec for case in long.values() if case.options.min_contractions >= 10_000}
    assert len(configs) >= 5
    if stream_bits == 32:
        assert len(quick) == len(long) == 5 + (3 if len(fields) == 3 else 0)
    else:
        assert len(quick) < len(configs)  # make test runs a few of them


def test_j_pairs_add_two_rows_at_once_by_hand():
    """2 lanes, K = 1: rows j = 0, 1 and 2, 3 are summed in pairs. Products 2^14, 2^14, 2^14 and -16256 saturate a
    16-bit accumulator one by one at 32767, then fall to 16511; in pairs the sums are 32768 (saturating) and 128:
    32767. The stream is the same; the loop takes ceil(J/2) = 2 cycles a group instead of 4."""
    plain = Tt1Spec(lanes=2, rows=1, a_bits=8, b_bits=8, acc_bits=16, max_j=4, max_k=2, max_l=1)
    pairs = dataclasses.replace(plain, j_pairs=True)
    a, b = np.full((1, 4, 1), -128), np.array([[[-128], [-128], [-128], [127]]])
    words = golden.words(pairs, a, b)
    assert np.array_equal(words, golden.words(plain, a, b))
    assert golden.output(plain, a, b).tolist() == [0, 16511] == pe1_reference(words, **plain.to_dict())
    assert golden.output(pairs, a, b).tolist() == [0, 32767] == pe1_reference(words, **pairs.to_dict())
    assert golden.answer(pairs, words).tolist() == [0, 32767]
    # header and status 0-1, B 2-5, A 6-9, the loop 10-11 and its flush 12, the result 13: 14 cycles (16 without)
    header = int(words[0])
    assert (pe1_cycles(pairs, header).total, pe1_cycles(plain, header).total) == (14, 16)
    assert pairs.pairs(1) and not pairs.pairs(2) and not plain.pairs(1)  # K = 2 fills both lanes: no pairs
    assert pairs.loop_cycles(5, 1) == 3 and pairs.loop_cycles(5, 2) == 5
    assert "j_pairs" not in plain.to_dict() and pairs.to_dict()["j_pairs"] is True
    assert [get_pe("tt1").rtl_parameters(spec)["J_PAIRS"] for spec in (pairs, plain)] == [1, 0]
    with pytest.raises(ValueError, match="j_pairs"):
        Tt1Spec(j_pairs="yes")


def test_the_j_pair_grid_runs_pairs_and_their_order_of_additions():
    """Every quick j-pair build has a 10^4-contraction twin and runs transactions summed in pairs (J > 1) and
    without; in the saturating builds some results differ from an unpaired sum, so the pairs' order is checked
    at every level; J reaches the top of its header field; both B orders and 32- and 128-bit streams."""
    grid = [case for case in get_pe("tt1").verification_grid() if case.spec.j_pairs]
    quick, long = [case for case in grid if not case.long], {case.id for case in grid if case.long}
    assert len(quick) >= 5 and all(f"{case.id}_10k" in long for case in quick)
    assert {case.spec.stream_bits for case in quick} == {32, 128} and max(case.spec.max_j for case in quick) == 255
    assert {case.spec.b_order for case in quick} == {"lj", "jl"}
    differ = 0
    for case in quick:
        plain, kinds = dataclasses.replace(case.spec, j_pairs=False), {"pairs": 0, "plain": 0}
        for words_in, words_out in build_stimulus(case.spec, TtStimulusOptions()):
            header = contract.stream_header(words_in, case.spec.stream_bits)
            (_, j, k, _), _ = contract.header_dims(header, 4)
            if golden.status(case.spec, header) == contract.STATUS_OK:  # a refused header sums nothing
                kinds["pairs" if case.spec.pairs(k) and j > 1 else "plain"] += 1
            differ += not np.array_equal(golden.answer(plain, words_in), words_out)
        assert kinds["pairs"] >= 8 and kinds["plain"] >= 8, (case.id, kinds)
    assert differ >= 10


@pytest.mark.parametrize("spec", [Tt1Spec(lanes=4, rows=3, max_j=5, max_k=9, max_l=7), Tt3Spec(lanes=4, max_j=9)])
def test_min_contractions_adds_small_contractions_with_right_answers(spec):
    from codesign.pe.tt.reference import pe3_reference
    from codesign.pe.tt.stimulus import count_contractions

    base = build_stimulus(spec, TtStimulusOptions())
    more = build_stimulus(spec, TtStimulusOptions(min_contractions=len(base) + 150))
    assert count_contractions(more) == len(base) + 150 > count_contractions(base)
    reference = pe3_reference if isinstance(spec, Tt3Spec) else pe1_reference
    fields = spec.to_dict()
    for words_in, words_out in more[len(base):]:
        assert reference(words_in, **fields) == words_out.tolist()
    with pytest.raises(ValueError, match="min_contractions"):
        TtStimulusOptions(min_contractions=-1)


def test_grid_checks_the_j_outer_order_quick_and_with_10k_contractions():
    """The builds that take B j outer: quick points (rows 1 and partial groups, L and J at the top of their header
    fields, the call lists' 128-bit build), each with a 10^4-contraction twin; their stimulus has contractions
    where the two orders differ (J and L both above 1), so reading the stream in the other order would be seen."""
    grid = [case for case in get_pe("tt1").verification_grid() if case.spec.b_order == "jl"]
    quick = [case for case in grid if not case.long]
    long = {case.id: case for case in grid if case.long}
    assert len(quick) >= 5 and {case.spec.rows for case in quick} >= {1, 3, 8}
    assert max(case.spec.max_l for case in quick) == max(case.spec.max_j for case in quick) == 255
    assert {case.spec.stream_bits for case in quick} == {32, 128}
    for case in quick:
        assert long[f"{case.id}_10k"].spec == case.spec and long[f"{case.id}_10k"].options.min_contractions >= 10_000


def test_j_outer_order_moves_only_the_rows_of_b():
    """The same A and B on builds of either order: B's words are the same rows, j outer; A and every result word
    are equal; the reference read in the build's order gives them, read in the other order it does not."""
    lj = Tt1Spec(lanes=4, rows=3, a_bits=16, b_bits=16, acc_bits=16, max_j=5, max_k=9, max_l=7)
    jl = Tt1Spec(lanes=4, rows=3, a_bits=16, b_bits=16, acc_bits=16, max_j=5, max_k=9, max_l=7, b_order="jl")
    rng = np.random.default_rng(8)
    a, b = rng.integers(-2**15, 2**15, size=(3, 4, 9)), rng.integers(-2**15, 2**15, size=(5, 4, 9))
    words_lj, words_jl = golden.words(lj, a, b), golden.words(jl, a, b)
    row = contract.row_words(9, 4, 16)
    b_lj, b_jl = words_lj[1:1 + 20 * row].reshape(5, 4, row), words_jl[1:1 + 20 * row].reshape(4, 5, row)
    assert np.array_equal(b_jl, b_lj.transpose(1, 0, 2)) and not np.array_equal(words_lj, words_jl)
    assert np.array_equal(words_lj[1 + 20 * row:], words_jl[1 + 20 * row:])
    assert np.array_equal(golden.output(lj, a, b), golden.output(jl, a, b))
    assert pe1_reference(words_jl, **jl.to_dict()) == golden.output(jl, a, b).tolist()
    assert pe1_reference(words_jl, **lj.to_dict()) != golden.output(jl, a, b).tolist()
    stacked = golden.stacked_words(jl, np.stack([a, a[::-1]]), np.stack([b, b[::-1]]))
    assert np.array_equal(stacked[1], golden.words(jl, a[::-1], b[::-1]))
    assert pe1_cycles(jl, int(words_jl[0])).total == pe1_cycles(lj, int(words_lj[0])).total
    assert "b_order" not in lj.to_dict() and jl.to_dict()["b_order"] == "jl"
    assert get_pe("tt1").rtl_parameters(jl)["B_ORDER"] == 1 and get_pe("tt1").rtl_parameters(lj)["B_ORDER"] == 0
    with pytest.raises(ValueError, match="b_order"):
        Tt1Spec(b_order="kl")
