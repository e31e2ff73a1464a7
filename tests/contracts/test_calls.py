"""The call-list contract's 3-D blocks and accumulating calls (codesign.contracts.calls): canonical forms, the
descriptor words, and the chains a list must keep whole."""

from __future__ import annotations

import numpy as np
import pytest

from codesign.contracts.calls import (ACC_DEPTH, FIELD, RAW, Block, Call, CallListError, check_chains,
                                      check_side_by_side, decode_descriptor, decode_list, encode_list)
from codesign.numerics.round_stage import RoundStageConfig


def _offsets_by_hand(offset, words, rows, stride, planes, plane_stride):
    return [offset + p * plane_stride + r * stride for p in range(planes) for r in range(rows)]


@pytest.mark.parametrize("shape", [(0, 3, 2, 20, 4, 64), (8, 2, 5, 12, 3, 100), (4, 4, 3, 16, 2, 48),
                                   (0, 2, 1, 0, 5, 8), (0, 2, 1, 0, 5, 12), (12, 1, 4, 8, 1, 0)])
def test_a_block_moves_the_words_its_fields_say(shape):
    """Whatever canonical form a block takes, it touches the same words in the same order."""
    offset, words, rows, stride, planes, plane_stride = shape
    block = Block(offset=offset, words=words, rows=rows, stride=stride, planes=planes, plane_stride=plane_stride)
    expected = [o + 4 * w for o in _offsets_by_hand(*shape) for w in range(words)]
    got = [o + 4 * w for o in block.row_offsets().tolist() for w in range(block.words)]
    assert got == expected and block.total_words == len(expected)
    assert block.end == max(expected) + 4


def test_canonical_forms():
    assert Block(offset=0, words=3, rows=2, stride=12, planes=4, plane_stride=24) == \
        Block(offset=0, words=24, rows=1, stride=12)  # a merged row keeps its (unused) stride, as 2-D blocks do
    assert Block(offset=0, words=3, rows=2, stride=16, planes=4, plane_stride=32) == \
        Block(offset=0, words=3, rows=8, stride=16)
    assert Block(offset=0, words=2, rows=1, planes=5, plane_stride=12) == Block(offset=0, words=2, rows=5, stride=12)
    kept = Block(offset=0, words=3, rows=2, stride=16, planes=4, plane_stride=40)
    assert kept.planes == 4 and kept.plane_words() == (4, 40) and Block(offset=4, words=1, rows=1).plane_words() == \
        (0, 0)


@pytest.mark.parametrize("fields, match", [
    (dict(words=4, rows=2, stride=16, planes=2, plane_stride=20), "planes overlap"),
    (dict(words=4, rows=2, stride=16, planes=0), "at least one plane"),
    (dict(words=4, rows=2, stride=16, planes=2, plane_stride=34), "multiples of 4"),
    (dict(words=1 << 16, rows=1 << 8, stride=1 << 18, planes=1 << 8, plane_stride=1 << 27), "exceeds 2\\^32"),
])
def test_bad_blocks_are_refused(fields, match):
    with pytest.raises(CallListError, match=match):
        Block(offset=0, **fields)


ROUND = RoundStageConfig(enable=True, shift=-3, bits=8, lanes=4, group_words=1, row_values=4)


def _call(count=8, *, add=False, hold=False, rounding=RAW, out=None, record=4096):
    if out is None:
        words = 0 if hold else (rounding.words_out(count) if rounding.enable else (2 if add else 1) * count)
        out = Block(offset=2048, words=words, rows=1 if words else 0)
    return Call(header=1, segments=(Block(offset=0, words=4, rows=3, stride=32, planes=2, plane_stride=128),),
                out=out, count=count, record=record, rounding=rounding, acc_add=add, acc_hold=hold)


def test_planes_and_accumulation_round_trip_through_descriptors():
    chain = [_call(hold=True), _call(add=True, hold=True), _call(add=True, rounding=ROUND)]
    words = encode_list(chain)
    assert decode_list(words, 3) == chain
    first = words[:32]
    assert first[FIELD["flags"]] == 0b1001 and tuple(first[FIELD["seg0_planes"]:FIELD["seg0_planes"] + 2]) == (2, 128)
    assert words[64 + FIELD["flags"]] == 0b0111
    assert decode_descriptor(_call(add=True).descriptor()).out.total_words == 16  # drained raw: 64-bit words


def test_a_call_re_aimed_at_another_shift_is_the_call_built_with_it():
    from dataclasses import replace

    call = _call(add=True, rounding=ROUND)
    moved = replace(ROUND, shift=5)
    assert call.with_rounding(moved) == replace(call, rounding=moved) and call.rounding == ROUND
    with pytest.raises(CallListError, match="other words"):
        call.with_rounding(replace(ROUND, bits=16, group_words=2))  # two codes a word, not four: other words out
    with pytest.raises(CallListError, match="other words"):
        _call(count=8).with_rounding(moved)  # a raw call has no rounding to re-aim


@pytest.mark.parametrize("make, match", [
    (lambda: _call(hold=True, rounding=ROUND), "cannot round"),
    (lambda: _call(count=ACC_DEPTH + 1, hold=True), "takes 1..4096"),
    (lambda: _call(add=True, out=Block(offset=2048, words=8, rows=1)), "holds 8 words; 8 results raw make 16"),
    (lambda: _call(hold=True, out=Block(offset=2048, words=8, rows=1)), "held make 0"),
    (lambda: check_chains([_call(add=True)]), "holds nothing"),
    (lambda: check_chains([_call(hold=True), _call(count=4, add=True)]), "holds 8 sums"),
    (lambda: check_chains([_call(hold=True), _call(add=True, hold=True)]), "ends holding 8"),
    (lambda: check_chains([_call(hold=True), _call(hold=True), _call(add=True)]), "would be lost"),
])
def test_broken_chains_are_refused(make, match):
    with pytest.raises(CallListError, match=match):
        make()


def test_a_plain_call_between_a_chains_calls_leaves_the_buffer_alone():
    check_chains([_call(hold=True), _call(), _call(add=True)])
    assert np.array_equal(encode_list([_call()])[24:], np.zeros(8, np.uint32))  # no segment 2: words 24..31 stay 0


def test_three_segments_lie_in_words_2_6_and_24_and_an_empty_one_keeps_its_place():
    """Segment 2 (a CSB conv call's second tile) in words 24..27 with its planes in 28, 29; words 30 and 31 stay
    reserved. Trailing empty segments decode to none; an empty middle one keeps segment 2 where it is, which
    the shell sends a sequencer cycle later (docs/accelerator.md)."""
    tile = Block(offset=512, words=3, rows=4, stride=64, planes=2, plane_stride=1024)
    call = Call(header=7, segments=(Block(offset=0, words=2, rows=1), Block(offset=256, words=4, rows=2, stride=32),
                                    tile), out=Block(offset=4096, words=8, rows=1), count=8, record=8192)
    words = call.descriptor()
    assert tuple(words[24:30]) == (512, 3, 4, 64, 2, 1024) and not words[30:].any()
    assert decode_descriptor(words) == call
    gap = Call(header=7, segments=(Block(offset=0, words=2, rows=1), Block(), tile), out=call.out, count=8,
               record=8192)
    assert decode_descriptor(gap.descriptor()).segments == (Block(offset=0, words=2, rows=1), Block(), tile)
    assert decode_descriptor(Call(header=7, segments=(tile, Block(), Block()), out=call.out, count=8,
                                  record=8192).descriptor()).segments == (tile,)
    for word in (30, 31):
        bad = words.copy()
        bad[word] = 1
        with pytest.raises(CallListError, match="reserved"):
            decode_descriptor(bad)
    with pytest.raises(CallListError, match="at most 3"):
        Call(header=7, segments=(tile,) * 4, out=call.out, count=8, record=8192)


def test_interleaved_planes_read_a_transposed_tensor():
    """Planes one row apart, rows a whole tensor row apart: a (J, I) grid of rows read as (I, J)."""
    block = Block(offset=0, words=2, rows=3, stride=5 * 8, planes=5, plane_stride=8)
    assert [o // 8 for o in block.row_offsets().tolist()] == [j * 5 + i for i in range(5) for j in range(3)]
    with pytest.raises(CallListError, match="planes overlap"):
        Block(offset=0, words=2, rows=3, stride=5 * 8 - 4, planes=5, plane_stride=8)


def _moving(reads: int, writes: int, record: int) -> Call:
    """A call reading 4 words from byte ``reads`` and writing 4 from byte ``writes``, its record at byte
    ``record`` (words are 32-bit: byte 64 is word 16)."""
    return Call(header=7, segments=(Block(offset=reads, words=4, rows=1),), out=Block(offset=writes, words=4, rows=1),
                count=4, record=record)


def test_lists_side_by_side_neither_write_a_word_of_another_nor_read_one():
    """Lists of a phase run at once on their own IPs: each may read what its own calls wrote before, not what
    another list writes (which it would race), and no two write one word (results or records)."""
    chained = [_moving(0, 64, 512), _moving(64, 128, 544)]  # the second reads the first's results: in order, one list
    check_side_by_side([chained, [_moving(0, 256, 576)]], 1024)
    check_side_by_side([chained + [_moving(256, 320, 608)]], 1024)  # one list: anything in order
    with pytest.raises(CallListError, match="reads word 16, which list 0 of the same phase writes"):
        check_side_by_side([chained[:1], chained[1:]], 1024)
    with pytest.raises(CallListError, match="lists 0 and 1 of a phase both write word 16"):
        check_side_by_side([chained, [_moving(0, 64, 640)]], 1024)
    with pytest.raises(CallListError, match="both write word 32"):  # a record over another's results
        check_side_by_side([chained, [_moving(0, 256, 128)]], 1024)
