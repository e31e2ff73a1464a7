"""codesign_fpmac_array.h on its own: the fpmac_array-specific cases of the stream-PE header checker
(tests/pe/conftest.py; tests/pe/test_stream_headers.py runs it on the whole grid), for one configuration.

Expected words come from outside the header: a transaction worked out by hand
from docs/fpmac_array.md and docs/numerics.md, refused headers, and the golden
stimulus (checked against the Fraction reference in tests/pe/fpmac_array).
The checker also fails a transaction whose input words are not read exactly.
"""

from __future__ import annotations

import numpy as np

from codesign.pe.fpmac_array.contract import Header
from codesign.pe.fpmac_array.spec import FpmacArraySpec
from codesign.pe.fpmac_array.stimulus import FpmacArrayStimulusOptions, build

SPEC = FpmacArraySpec(exp_bits=4, max_fb=3, rows=2, cols=3, max_m=5, max_n=4, max_k=6)


def _words(*values: int) -> np.ndarray:
    return np.array(values, dtype=np.uint64)


def test_hand_worked_refused_and_broken(header_checker, tmp_path):
    # (E=4, fb=2) in the max_fb=3 container: 1.0 -> 56, 1.5 -> 60. A = [1.0, 1.5], B = [1.5, 1.5]^T:
    # 1.5, then 1.5 + round(2.25) = 1.5 + 2.0 (a tie, to even) = 3.5 -> code (8 << 2 | 3) << 1 = 70.
    # With A^T and C_in = -0 (bit 7 of the 8-bit container): the same sum, as -0 + 1.5 = 1.5.
    header = Header(m=1, n=1, k=2, fb=2).word()
    transposed = Header(m=1, n=1, k=2, fb=2, trans_a=True, accumulate=True).word()
    transactions = [
        (_words(header, 56, 60, 60, 60), _words(0, 70)),
        (_words(transposed, 56, 60, 60, 60, 0x80), _words(0, 70)),
        (_words(header, 56 | 0xFFFFFF00, 60 | 1, 60, 60), _words(0, 70)),  # ignored bits set above and below
        (_words(Header(m=0, n=1, k=1, fb=1).word()), _words(1)),
        (_words(Header(m=1, n=1, k=1, fb=4).word()), _words(2)),
        (_words(Header(m=6, n=1, k=1, fb=1).word()), _words(2)),
    ]
    assert header_checker.run("fpmac_array", SPEC, transactions, tmp_path)[:2] == (6, 0)
    broken = [(words_in, words_out.copy()) for words_in, words_out in transactions]
    broken[0][1][1] ^= np.uint64(2)
    assert header_checker.run("fpmac_array", SPEC, broken, tmp_path)[:2] == (6, 1)
    short = [(transactions[0][0][:-1], transactions[0][1])]  # the PE reads past the stream's end
    assert header_checker.run("fpmac_array", SPEC, short, tmp_path)[:2] == (1, 1)


def test_stimulus(header_checker, tmp_path):
    stimulus = build(SPEC, FpmacArrayStimulusOptions(min_macs=2000))  # the C-sim level runs the full grid
    assert header_checker.run("fpmac_array", SPEC, stimulus, tmp_path)[:2] == (len(stimulus), 0)
