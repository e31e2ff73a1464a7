"""codesign_tt.h on its own: the TT-specific cases of the stream-PE header checker (tests/pe/conftest.py), which
tests/pe/test_stream_headers.py runs on every TT PE's grid at 32-, 64- and 128-bit streams and whose own failure
detection it checks.

Expected words here come from outside the header: transactions worked out by hand from docs/tt_pe.md (the golden
model must agree with them too), at 32 bits and, for PE1, at the wider streams, where a 32-bit field takes a whole
stream word, results share one and a set bit above bit 31 of the header word refuses the transaction. The checker
fails a transaction whose input words are not read exactly, so "the header is the whole transaction" for a
refusal is checked word for word.
"""

from __future__ import annotations

import numpy as np
import pytest

from codesign.pe.tt import golden
from codesign.pe.tt.spec import Tt1Spec, Tt2Spec, Tt3Spec

MASK = 0xFFFFFFFF


def _transactions(*pairs) -> list[tuple[np.ndarray, np.ndarray]]:
    return [(np.array(words_in, dtype=np.uint64), np.array(words_out, dtype=np.uint64)) for words_in, words_out in pairs]


def test_pe1_hand_worked(header_checker, tmp_path):
    """The worked PE1 transaction of docs/tt_pe.md, a zero dimension (status 1) and a J above MAX_J (status 2);
    a wrong expected word is caught."""
    hand = Tt1Spec(lanes=2, rows=1, a_bits=8, b_bits=4, acc_bits=16, max_j=2, max_k=3, max_l=2)
    words = [1 | 1 << 8 | 3 << 16 | 2 << 24, 0x12, 0x0F, 0x78, 0x00, 0xFE01, 0x03]
    a, b = np.array([[[1, -2, 3]]]), np.array([[[2, 1, -1]], [[-8, 7, 0]]])
    assert golden.words(hand, a, b).tolist() == words
    transactions = _transactions((words, [0, (2 - 2 - 3) & MASK, (-8 - 14) & MASK]),
                                 ([1 | 0 << 8 | 1 << 16 | 1 << 24], [1]), ([1 | 3 << 8 | 1 << 16 | 1 << 24], [2]))
    assert header_checker.run("tt1", hand, transactions, tmp_path)[:2] == (3, 0)
    transactions[0][1][1] ^= np.uint64(1)
    assert header_checker.run("tt1", hand, transactions, tmp_path)[:2] == (3, 1)


def test_pe2_hand_worked(header_checker, tmp_path):
    hand = Tt2Spec(lanes=2, rows=1, a_bits=8, b_bits=4, acc_bits=16, max_j=2, max_k=3, max_l=2)
    words = [1 | 2 << 8 | 3 << 16 | 2 << 24, 0xF2, 0x87, 0xFE01, 0x03, 0x0504, 0xFA]  # docs/tt_pe.md by hand
    z = [2 * 1 - 4, 2 * -2 - 5, 2 * 3 + 6, 7 - 32, -14 - 40, 21 + 48]
    transactions = _transactions((words, [0] + [v & MASK for v in z]), ([0x01010301], [2]))
    assert header_checker.run("tt2", hand, transactions, tmp_path)[:2] == (2, 0)


def test_pe3_hand_worked(header_checker, tmp_path):
    hand = Tt3Spec(lanes=2, a_bits=8, b_bits=16, max_j=3)
    words = [3 | 3 << 8, 0x00078000, 0x0064, 0xFF03, 0x02]  # docs/tt_pe.md by hand
    z = [(x * y) & MASK for x in (3, -1, 2) for y in (-32768, 7, 100)]
    transactions = _transactions((words, [0] + z), ([0x00010101], [1]), ([0x00000401], [2]))
    assert header_checker.run("tt3", hand, transactions, tmp_path)[:2] == (3, 0)


def _widened(words, parts):
    """Words that fit 32 bits as stream words of ``parts`` 32-bit parts (the upper parts 0)."""
    return [part for word in words for part in [word] + [0] * (parts - 1)]


@pytest.mark.parametrize("stream_bits", [64, 128])
def test_pe1_hand_worked_wide(header_checker, tmp_path, stream_bits):
    """The worked PE1 transaction at a wider stream: every 32-bit field in its own word (a chunk of 2 lanes fills
    less than one word), the two results in one word, a set bit above bit 31 of the header refused; a wrong padding
    part is caught (at 64 bits the status word's)."""
    parts = stream_bits // 32
    hand = Tt1Spec(lanes=2, rows=1, a_bits=8, b_bits=4, acc_bits=16, max_j=2, max_k=3, max_l=2,
                   stream_bits=stream_bits)
    header = 1 | 1 << 8 | 3 << 16 | 2 << 24
    words_in = _widened([header, 0x12, 0x0F, 0x78, 0x00, 0xFE01, 0x03], parts)
    words_out = [0] * parts + [(2 - 2 - 3) & MASK, (-8 - 14) & MASK] + [0] * (parts - 2)
    a, b = np.array([[[1, -2, 3]]]), np.array([[[2, 1, -1]], [[-8, 7, 0]]])
    assert golden.words(hand, a, b).tolist() == words_in and golden.output(hand, a, b).tolist() == words_out
    refused = [header] + [0] * (parts - 1)
    refused[-1] = 1 << 31
    transactions = _transactions((words_in, words_out), (refused, [1] + [0] * (parts - 1)))
    assert header_checker.run("tt1", hand, transactions, tmp_path)[:2] == (2, 0)
    transactions[0][1][-1 if parts > 2 else 1] ^= np.uint64(1)
    assert header_checker.run("tt1", hand, transactions, tmp_path)[:2] == (2, 1)
