"""The stimulus covers what the brief of the PE names: fb ends, dimension edges, flags, ties, specials, refusals."""

from __future__ import annotations

import numpy as np
import pytest

from codesign.pe.fpmac_array import stimulus, stimulus_vector, vector
from codesign.pe.fpmac_array.contract import STATUS_OK, Header
from codesign.pe.fpmac_array.reference import reference_output
from codesign.pe.fpmac_array.spec import FpmacArraySpec
from codesign.pe.fpmac_array.stimulus import FpmacArrayStimulusOptions

SPEC = FpmacArraySpec(exp_bits=5, max_fb=10, rounding="nearest_away", rows=3, cols=2, max_m=9, max_n=7, max_k=12)


@pytest.fixture(scope="module")
def transactions():
    return stimulus.build(SPEC, FpmacArrayStimulusOptions())


def test_directed_and_random_coverage(transactions):
    everything = transactions
    transactions = [t for t in transactions if not vector.is_vector(int(t[0][0]))]  # the GEMMs
    headers = [Header.parse(int(words_in[0])) for words_in, _ in transactions]
    accepted = [h for h, (_, out) in zip(headers, transactions) if int(out[0]) == STATUS_OK]
    assert stimulus.count_macs(transactions) >= 10_000
    assert {1, SPEC.max_fb} <= {h.fb for h in accepted}
    for field, limit in (("m", SPEC.max_m), ("n", SPEC.max_n), ("k", SPEC.max_k)):
        values = {getattr(h, field) for h in accepted}
        assert {1, limit} <= values, field
    assert {h.m % SPEC.rows for h in accepted} == set(range(SPEC.rows))  # partial row tiles of every size
    assert {h.n % SPEC.cols for h in accepted} == set(range(SPEC.cols))
    assert {(h.trans_a, h.trans_b, h.accumulate) for h in accepted} >= {(a, b, c) for a in (False, True)
                                                                         for b in (False, True) for c in (False, True)}
    refused = {(int(out[0]), len(words_in)) for (words_in, out), h in zip(transactions, headers)
               if int(out[0]) != STATUS_OK}
    assert refused == {(1, 1), (2, 1)}  # both statuses, the header alone
    # m, n, fb and a ReLU header's m at 0; m, n, k, fb and a ReLU header's m above the build
    assert sum(int(out[0]) != STATUS_OK for _, out in transactions) == 9
    relu = [(h, out) for h, (_, out) in zip(headers, transactions) if h.relu and int(out[0]) == STATUS_OK]
    sent = np.concatenate([out[1:] for _, out in relu])
    assert len(relu) >= 6 and not np.any(sent >> np.uint64(SPEC.width - 1))  # no negative result, -0 included
    assert 0 in sent.tolist() and np.any(sent)  # zeros (ReLU's and the sums') and positive results
    outputs = np.concatenate([out[1:] for _, out in everything])
    largest = (1 << (SPEC.width - 1)) - 1  # +max: all-ones exponent and fraction
    assert {0, 1 << (SPEC.width - 1), largest, largest | 1 << (SPEC.width - 1)} <= set(outputs.tolist())
    inputs = np.concatenate([words_in[1:] for words_in, _ in transactions])
    assert np.any(inputs >> np.uint64(SPEC.width))  # bits above the container the PE must ignore


def test_element_wise_coverage(transactions):
    elementwise = [t for t in transactions if vector.is_vector(int(t[0][0]))]
    headers = [vector.VectorHeader.parse(int(words_in[0])) for words_in, _ in elementwise]
    accepted = [h for h, (_, out) in zip(headers, elementwise) if int(out[0]) == STATUS_OK]
    assert stimulus_vector.count_elements(transactions) >= 10_000
    assert {h.op for h in accepted} == set(vector.OPS.values())
    for op in vector.OPS.values():
        mine = [h for h in accepted if h.op == op]
        assert {1, SPEC.max_fb} <= {h.fb for h in mine} and {1, SPEC.max_m} <= {h.m for h in mine}
        assert {1, SPEC.max_n} <= {h.n for h in mine}
    refused = [(int(out[0]), len(words_in)) for words_in, out in elementwise if int(out[0]) != STATUS_OK]
    # op 0, 4, 7; m, n, fb at 0 and above the build; m = 128 and 129 (an element-wise M has 8 bits)
    assert sorted(refused) == [(1, 1)] * 6 + [(2, 1)] * 5
    inputs = np.concatenate([words_in[1:] for words_in, _ in elementwise if len(words_in) > 1])
    assert np.any(inputs >> np.uint64(SPEC.width))


def test_tie_cases_are_ties():
    """The tie transaction rounds differently under nearest_even and nearest_away (so it hits exact ties)."""
    for fb in (1, 6, 10):
        spec_even = FpmacArraySpec(exp_bits=5, max_fb=10, max_m=3, max_n=2, max_k=2)
        words_in, even = stimulus._ties(spec_even, fb)
        away = reference_output(words_in, **{**spec_even.to_dict(), "rounding": "nearest_away"})
        assert even.tolist() != away, fb


def test_transactions_agree_with_reference(transactions):
    for words_in, words_out in transactions[:40]:
        assert reference_output(words_in, **SPEC.to_dict()) == words_out.tolist()


def test_options_are_validated():
    with pytest.raises(ValueError, match="min_macs"):
        FpmacArrayStimulusOptions(min_macs=-1)
    with pytest.raises(ValueError, match="seed"):
        FpmacArrayStimulusOptions(seed=1.5)
