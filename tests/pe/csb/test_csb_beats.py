"""codesign.pe.csb.beats and the wide-stream answers built on it: a CSB transaction's 32-bit words as 64- and
128-bit beats (docs/csb.md, "Wide streams"), worked out by hand, then the golden session, the plain reference and
the cycle model on the same beats."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from codesign.pe.csb import beats
from codesign.pe.csb.cycles import transaction_cycles
from codesign.pe.csb.reference import reference_output
from codesign.pe.csb.spec import CsbSpec
from codesign.pe.csb.stream import CsbSession, Op, encode_transaction, header_word, split_stream, transaction_sections

SMALL = CsbSpec(block_rows=2, block_cols=3, batch=4, parallel=1)  # an FC block: X 3 x 4 codes, ACC 2 x 4 words


def u32(values) -> np.ndarray:
    return np.array([int(v) & 0xFFFF_FFFF for v in values], dtype=np.uint32)


def small_fp(spec: CsbSpec = SMALL) -> np.ndarray:
    """FP on entries (0, 1) = 2, (1, 0) = -3, (1, 2) = 1 of the 2 x 3 block; 32-bit words."""
    x = np.arange(12).reshape(3, 1, 1, 4) - 6
    acc = np.arange(8).reshape(2, 1, 1, 4) * 100
    return encode_transaction(replace(spec, stream_bits=32), Op.FP, index=np.array([0x01, 0x10, 0x12]),
                              weights=np.array([2, -3, 1]).reshape(3, 1, 1), x=x, acc=acc)


def test_sections_start_new_beats_by_hand():
    words = u32([0xAA, 1, 2, 3, 4, 5])  # a header, a section of 3 words, one of 2
    wide = beats.widen(words, (1, 3, 2), 2)
    assert wide.tolist() == [0xAA, 0, 1, 2, 3, 0, 4, 5]
    assert beats.widen(words, (1, 3, 2), 4).tolist() == [0xAA, 0, 0, 0, 1, 2, 3, 0, 4, 5, 0, 0]
    garbled = wide.copy()
    garbled[[1, 5]] = 0xDEAD  # what the unused parts hold does not matter
    assert beats.narrow(garbled, (1, 3, 2), 2).tolist() == words.tolist()
    assert beats.widen(words, (1, 3, 2), 1).tolist() == beats.narrow(words, (1, 3, 2), 1).tolist() == words.tolist()
    with pytest.raises(ValueError, match="sections take 8"):
        beats.narrow(wide[:-1], (1, 3, 2), 2)
    with pytest.raises(ValueError, match="6 words"):
        beats.widen(words, (1, 3), 2)
    assert (beats.beats(5, 4), beats.padded(5, 4), beats.padded(0, 4)) == (2, 8, 0)


def test_the_status_is_a_beat_and_the_results_follow_four_to_a_beat():
    assert beats.widen_output(u32([3]), 4).tolist() == [3, 0, 0, 0]
    assert beats.widen_output(u32([0, 1, 2, 3, 4, 5]), 4).tolist() == [0, 0, 0, 0, 1, 2, 3, 4, 5, 0, 0, 0]
    assert beats.widen_output(u32([0, 7]), 1).tolist() == [0, 7]


@pytest.mark.parametrize("bits", [64, 128])
def test_a_wide_session_answers_the_beats_of_the_narrow_one(bits):
    """The FP transaction by hand: the same results, laid out as beats; the padding's content ignored; the plain
    reference reads the beats the same way; the cycle model counts beats."""
    spec, words = replace(SMALL, stream_bits=bits), small_fp()
    parts = spec.parts
    narrow = CsbSession(replace(spec, stream_bits=32)).answer(words)
    layout = transaction_sections(spec, int(words[0]))
    assert layout == [1, 1, 1, 3, 8]  # header, 3 index bytes, 3 weights, 12 X codes, 8 sums
    stream = beats.widen(words, layout, parts)
    garbled = stream.copy()
    garbled[parts + 1:2 * parts] = 0x5A5A5A5A  # the index beat's unused parts
    want = beats.widen_output(narrow, parts)
    assert CsbSession(spec).answer(garbled).tolist() == want.tolist()
    assert reference_output(garbled.tolist(), **spec.to_dict()) == want.tolist()
    # 2 rows x 4 lanes: acc + 2 x[1] (row 0), acc - 3 x[0] + x[2] (row 1)
    x = np.arange(12).reshape(3, 4) - 6
    assert want[parts:].astype(np.int32).tolist() == [*(np.arange(4) * 100 + 2 * x[1]),
                                                      *((np.arange(4) + 4) * 100 - 3 * x[0] + x[2])]
    cycles = transaction_cycles(spec, garbled)
    beats_in = sum(beats.beats(count, parts) for count in layout)
    assert (cycles.load, cycles.compute, cycles.drain) == (beats_in, 3, 2 + 8 // parts)


@pytest.mark.parametrize("bits", [64, 128])
def test_a_header_beat_with_an_upper_part_set_is_refused_alone(bits):
    spec = replace(SMALL, stream_bits=bits)
    for part in range(1, spec.parts):
        stream = np.zeros(spec.parts, np.uint32)
        stream[0], stream[part] = header_word(Op.FP, 1, zero=True), 1 << 31
        want = [1] + [0] * (spec.parts - 1)
        assert CsbSession(spec).answer(stream).tolist() == want
        assert reference_output(stream.tolist(), **spec.to_dict()) == want
        assert transaction_cycles(spec, stream).total == 3
        with pytest.raises(ValueError, match="expects a new header"):
            CsbSession(spec).answer(np.concatenate([stream, np.zeros(spec.parts, np.uint32)]))
    with pytest.raises(ValueError, match="header beat has"):
        CsbSession(spec).answer(np.zeros(1, np.uint32))
    with pytest.raises(ValueError, match="whole beats"):
        transaction_cycles(spec, np.zeros(spec.parts + 1, np.uint32))


def test_a_wide_stream_splits_into_its_transactions():
    spec = replace(SMALL, stream_bits=128)
    words = small_fp()
    first = beats.widen(words, transaction_sections(spec, int(words[0])), 4)
    refused = np.array([header_word(Op.FP, 1), 0, 9, 0], np.uint32)
    zero_upd = beats.widen(u32([header_word(Op.UPD, 0)]), [1], 4)  # nnz 0: the header alone, accepted
    pieces = split_stream(spec, np.concatenate([first, refused, zero_upd, first]))
    assert [piece.size for piece in pieces] == [first.size, 4, 4, first.size]
    with pytest.raises(ValueError, match="truncated"):
        split_stream(spec, np.concatenate([first, first[:-4]]))


def test_a_zero_wg_clears_a_beat_of_gradients_a_cycle():
    """ZERO's virtual G section: nnz * k^2 words, ``parts`` a cycle; FP's and EB's R clears are unchanged."""
    spec = CsbSpec(block_rows=2, block_cols=2, kernel=3, out_h=1, out_w=1, batch=4, stream_bits=128)
    words = encode_transaction(replace(spec, stream_bits=32), Op.WG, index=np.array([0x00, 0x11]), zero=True,
                               x=np.zeros((2, 3, 3, 4), np.int64), dy=np.zeros((2, 1, 1, 4), np.int64))
    stream = beats.widen(words, transaction_sections(spec, int(words[0])), 4)
    cycles = transaction_cycles(spec, stream)
    # header, index, X (72 codes: 5 beats), DY (8 codes: 1 beat); 18 gradients cleared 4 a cycle; 18 results
    assert (cycles.load, cycles.compute, cycles.drain) == (1 + 1 + 5 + 1 + 5, 2 * 9, 2 + 5)
