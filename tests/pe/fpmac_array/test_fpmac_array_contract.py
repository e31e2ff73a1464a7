"""The header word: field positions, round trip, and the status rule for every refused field."""

from __future__ import annotations

import pytest

from codesign.pe.fpmac_array.contract import STATUS_BAD_HEADER, STATUS_OK, STATUS_TOO_LARGE, Header
from codesign.pe.fpmac_array.spec import FpmacArraySpec


def test_field_positions_by_hand():
    # M 6..0, ReLU 7, N 15..8, K 23..16, fb 28..24, A^T 29, B^T 30, accumulate 31 (docs/fpmac_array.md)
    header = Header(m=3, n=5, k=7, fb=10, trans_a=True, trans_b=False, accumulate=True)
    assert header.word() == 0x03 | 0x05 << 8 | 0x07 << 16 | 10 << 24 | 1 << 29 | 1 << 31 == 0xAA070503
    assert Header.parse(0xAA070503) == header
    assert Header.parse(0xFFFFFFFF) == Header(m=127, n=255, k=255, fb=31, trans_a=True, trans_b=True,
                                               accumulate=True, relu=True)
    relu = Header(m=3, n=5, k=7, fb=10, relu=True)
    assert relu.word() == 0x83 | 0x05 << 8 | 0x07 << 16 | 10 << 24 and Header.parse(relu.word()) == relu
    assert (header.input_words, header.macs) == (3 * 7 + 7 * 5 + 3 * 5, 105)


@pytest.mark.parametrize("field, value", [("m", 128), ("n", -1), ("k", 300), ("fb", 32)])
def test_word_refuses_fields_that_do_not_fit(field, value):
    fields = {"m": 1, "n": 1, "k": 1, "fb": 1, field: value}
    with pytest.raises(ValueError, match=field):
        Header(**fields).word()


SPEC = FpmacArraySpec(max_fb=10, max_m=9, max_n=7, max_k=12)


@pytest.mark.parametrize("fields, status", [
    ({}, STATUS_OK),
    ({"m": 9, "n": 7, "k": 12, "fb": 10}, STATUS_OK),
    ({"m": 0}, STATUS_BAD_HEADER), ({"n": 0}, STATUS_BAD_HEADER), ({"k": 0}, STATUS_BAD_HEADER),
    ({"fb": 0}, STATUS_BAD_HEADER), ({"m": 0, "k": 200}, STATUS_BAD_HEADER),
    ({"m": 10}, STATUS_TOO_LARGE), ({"n": 8}, STATUS_TOO_LARGE), ({"k": 13}, STATUS_TOO_LARGE),
    ({"fb": 11}, STATUS_TOO_LARGE), ({"fb": 31}, STATUS_TOO_LARGE),
    ({"relu": True}, STATUS_OK), ({"m": 0, "relu": True}, STATUS_BAD_HEADER),
    ({"m": 10, "relu": True}, STATUS_TOO_LARGE),
])
def test_status_rule(fields, status):
    assert Header(**{"m": 1, "n": 1, "k": 1, "fb": 1, **fields}).status(SPEC) == status
