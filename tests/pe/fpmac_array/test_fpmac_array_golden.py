"""The golden GEMM: hand-worked containers, the k order, per-element agreement with fp_dot, words and refusals;
the fast golden of a whole transaction against the grid's stimulus."""

from __future__ import annotations

import numpy as np
import pytest

from codesign.numerics import FloatFormat, fp_dot
from codesign.pe.fpmac.golden import from_container, to_container
from codesign.pe.fpmac_array import golden, stimulus, stimulus_vector
from codesign.pe.fpmac_array.contract import STATUS_BAD_HEADER, STATUS_TOO_LARGE, Header
from codesign.pe.fpmac_array.pe import FpmacArrayPE
from codesign.pe.fpmac_array.reference import reference_output
from codesign.pe.fpmac_array.spec import FpmacArraySpec

# (E=4, fb=2) in a max_fb=3 container (codes shifted left by 1): bias 7, 1.0 = field 7 -> code 28 -> container 56
ONE, ONE_HALF = 56, 60  # 1.0, 1.5


@pytest.mark.parametrize("rounding, expected", [("nearest_even", 70), ("nearest_away", 72), ("toward_zero", 70)])
def test_two_step_accumulation_by_hand(rounding, expected):
    # k=0: 1.0 * 1.5 = 1.5. k=1: 1.5 * 1.5 = 2.25 is a tie between 2.0 and 2.5 (quantum 0.5): even -> 2.0,
    # away -> 2.5, zero -> 2.0; then 1.5 + 2.0 = 3.5 (container 70), 1.5 + 2.5 = 4.0 (container 72).
    # A fused MAC would give 1.5 + 2.25 = 3.75 -> 4.0 under nearest_even: the product is rounded first.
    out = golden.gemm([[ONE, ONE_HALF]], [[ONE_HALF], [ONE_HALF]], fb=2, exp_bits=4, max_fb=3, rounding=rounding)
    assert out.tolist() == [[expected]]


def test_accumulation_order_is_k_ascending():
    # E=8, fb=3: 1024 + 1 = 1025 needs 11 bits and rounds to 1024; then -1024 gives +0, not the exact 1.
    big, one = (127 + 10) << 3, 127 << 3
    a = np.array([[big, one, big | 1 << 11]], dtype=np.uint64)
    b = np.array([[one], [one], [one]], dtype=np.uint64)
    assert golden.gemm(a, b, fb=3, exp_bits=8, max_fb=3).tolist() == [[0]]
    # big - big first, then + 1: the exact sum, so the order is visible in the result
    assert golden.gemm(a[:, [0, 2, 1]], b, fb=3, exp_bits=8, max_fb=3).tolist() == [[one]]


def test_start_is_plus_zero_or_c_in():
    # a -0 product on a +0 start is +0 (x AND y); on a -0 C_in it stays -0
    neg_zero = 1 << 31
    a, b = np.array([[neg_zero]], dtype=np.uint64), np.array([[127 << 23]], dtype=np.uint64)
    assert golden.gemm(a, b, fb=23, exp_bits=8, max_fb=23).tolist() == [[0]]
    assert golden.gemm(a, b, [[neg_zero]], fb=23, exp_bits=8, max_fb=23).tolist() == [[neg_zero]]


@pytest.mark.parametrize("exp_bits, max_fb, fb, rounding", [(8, 23, 23, "nearest_even"), (8, 23, 5, "nearest_away"),
                                                            (5, 10, 1, "toward_zero"), (2, 1, 1, "nearest_even")])
def test_every_element_is_fp_dot_of_its_row_and_column(exp_bits, max_fb, fb, rounding):
    rng = np.random.default_rng(fb)
    width = 1 + exp_bits + max_fb
    m, n, k = 7, 5, 9
    a, b, c = (rng.integers(0, 1 << width, size=shape, dtype=np.uint64) for shape in ((m, k), (k, n), (m, n)))
    out = golden.gemm(a, b, c, fb=fb, exp_bits=exp_bits, max_fb=max_fb, rounding=rounding)
    fmt = FloatFormat(exp_bits=exp_bits, frac_bits=fb, rounding=rounding)
    codes = [from_container(x, fb, max_fb=max_fb) for x in (a, b, c)]
    for i in range(m):
        for j in range(n):
            expected = fp_dot(codes[0][i], codes[1][:, j], codes[2][i, j], fmt)
            assert int(out[i, j]) == int(to_container(expected, fb, max_fb=max_fb))
    assert not np.any(out & np.uint64((1 << (max_fb - fb)) - 1))  # bits below fb are zero on output


def test_bits_below_fb_are_ignored():
    rng = np.random.default_rng(3)
    a, b = rng.integers(0, 1 << 32, size=(3, 4), dtype=np.uint64), rng.integers(0, 1 << 32, size=(4, 2),
                                                                                  dtype=np.uint64)
    low = np.uint64((1 << 13) - 1)
    clean = golden.gemm(a & ~low, b & ~low, fb=10, exp_bits=8, max_fb=23)
    assert np.array_equal(golden.gemm(a, b, fb=10, exp_bits=8, max_fb=23), clean)


@pytest.mark.parametrize("kwargs, match", [
    ({"fb": 0}, "fb"), ({"fb": 24}, "fb"), ({"fb": True}, "fb"),
    ({"a": [[1 << 32]]}, "above the 32-bit container"), ({"a": [[-1]]}, "non-negative"),
    ({"b": [[1], [2]]}, "inner dimensions"), ({"c": [[0, 0]]}, "c must be"), ({"a": [1, 2]}, "2-D"),
])
def test_gemm_refuses_bad_operands(kwargs, match):
    args = {"a": [[1]], "b": [[1]], "c": None, "fb": 4, **kwargs}
    with pytest.raises(ValueError, match=match):
        golden.gemm(args["a"], args["b"], args["c"], fb=args["fb"], exp_bits=8, max_fb=23)


SPEC = FpmacArraySpec(exp_bits=5, max_fb=10, rows=3, cols=2, max_m=9, max_n=7, max_k=12)


@pytest.mark.parametrize("trans_a, trans_b", [(False, False), (True, False), (False, True), (True, True)])
def test_words_sections_and_transposes(trans_a, trans_b):
    a = np.arange(1, 7, dtype=np.uint64).reshape(2, 3) << np.uint64(4)
    b = np.arange(11, 23, dtype=np.uint64).reshape(3, 4) << np.uint64(4)
    c = np.arange(31, 39, dtype=np.uint64).reshape(2, 4)
    words = golden.words(SPEC, a, b, c, fb=6, trans_a=trans_a, trans_b=trans_b)
    header = Header.parse(int(words[0]))
    assert (header.m, header.n, header.k, header.fb, header.trans_a, header.trans_b, header.accumulate) == (
        2, 4, 3, 6, trans_a, trans_b, True)
    a_part = (a.T if trans_a else a).reshape(-1)
    b_part = (b.T if trans_b else b).reshape(-1)
    assert words[1:].tolist() == a_part.tolist() + b_part.tolist() + c.reshape(-1).tolist()
    expected = golden.output(SPEC, a, b, c, fb=6)
    assert reference_output(words, **SPEC.to_dict()) == expected.tolist()


def test_high_noise_is_ignored_by_the_reference():
    rng = np.random.default_rng(5)
    a, b = rng.integers(0, 1 << 16, size=(2, 3), dtype=np.uint64), rng.integers(0, 1 << 16, size=(3, 2),
                                                                                  dtype=np.uint64)
    noise = rng.integers(0, 1 << 32, size=12, dtype=np.uint64)
    words = golden.words(SPEC, a, b, fb=10, high_noise=noise)
    assert np.any(words[1:] >> np.uint64(16))
    assert reference_output(words, **SPEC.to_dict()) == golden.output(SPEC, a, b, fb=10).tolist()


def test_words_refuse_what_the_build_cannot_take():
    with pytest.raises(ValueError, match="do not fit"):
        golden.words(SPEC, np.zeros((10, 1), dtype=np.uint64), np.zeros((1, 1), dtype=np.uint64), fb=1)
    with pytest.raises(ValueError, match="do not fit"):
        golden.words(SPEC, np.zeros((1, 1), dtype=np.uint64), np.zeros((1, 1), dtype=np.uint64), fb=11)


def test_refused_outputs_are_the_status_alone():
    assert golden.refused(SPEC, Header(m=0, n=1, k=1, fb=1).word()).tolist() == [STATUS_BAD_HEADER]
    assert golden.refused(SPEC, Header(m=1, n=8, k=1, fb=1).word()).tolist() == [STATUS_TOO_LARGE]
    assert reference_output([Header(m=1, n=1, k=1, fb=11).word()], **SPEC.to_dict()) == [STATUS_TOO_LARGE]
    with pytest.raises(ValueError, match="accepted"):
        golden.refused(SPEC, Header(m=1, n=1, k=1, fb=1).word())


def test_k_split_through_c_in_is_exact():
    """docs/fpmac_array.md: a K larger than the buffer, split in order and chained through C_in, gives the same C."""
    rng = np.random.default_rng(9)
    a, b, c = (rng.integers(0, 1 << 16, size=shape, dtype=np.uint64) for shape in ((4, 11), (11, 3), (4, 3)))
    kwargs = {"fb": 5, "exp_bits": 5, "max_fb": 10}
    whole = golden.gemm(a, b, c, **kwargs)
    first = golden.gemm(a[:, :6], b[:6], c, **kwargs)
    assert np.array_equal(golden.gemm(a[:, 6:], b[6:], first, **kwargs), whole)


@pytest.mark.parametrize("case", FpmacArrayPE().verification_grid(), ids=lambda case: case.id)
def test_transaction_output_is_the_expected_stream_of_every_grid_transaction(case):
    # the fast golden a list trainer runs: GEMMs (transposes, C_in, noise above the container), element-wise
    # operations and refused headers, word for word the words the stimulus expects (which the reference checks)
    rng = np.random.default_rng(4)
    transactions = stimulus.directed(case.spec, rng) + stimulus_vector.directed(case.spec, rng)
    transactions += stimulus.random(case.spec, 30, rng) + stimulus_vector.random(case.spec, 30, rng)
    assert any(int(words_out[0]) != 0 for _, words_out in transactions)
    for words_in, words_out in transactions:
        assert golden.transaction_output(case.spec, words_in).tolist() == words_out.tolist()
        assert FpmacArrayPE().golden_output(case.spec, words_in).tolist() == words_out.tolist()


def test_transaction_output_refuses_a_stream_of_the_wrong_length():
    spec = FpmacArraySpec(max_m=4, max_n=4, max_k=4)
    words = golden.words(spec, np.zeros((2, 3), np.uint64), np.zeros((3, 2), np.uint64), fb=5)
    with pytest.raises(ValueError, match="announces"):
        golden.transaction_output(spec, words[:-1])
