"""The CSB step's arena: what each call reads as one segment lies together, codes and accumulators go in and out
of their tiles as the PE lays them out, the encoded state round-trips, and specs the lists cannot run are refused."""

from __future__ import annotations

import numpy as np
import pytest

from codesign.pe.csb import CsbSpec, encode
from codesign.pe.csb.format import unpack_bytes
from codesign.step.csb.arena import BlockSlots, EntryRange, build_arena

SPEC = CsbSpec(block_rows=4, block_cols=4, batch=3)


def structures(rng, layers=(10, 9, 5)):
    masks = [rng.random((o, i)) < 0.6 for i, o in zip(layers[:-1], layers[1:])]
    masks[0][:4, :] = False  # block row 0 of layer 0 empty
    return [encode(m.astype(np.int8), block_rows=4, block_cols=4) for m in masks], masks


def test_layout_keeps_each_segment_together():
    rng = np.random.default_rng(0)
    csbs, masks = structures(rng)
    arena = build_arena(SPEC, (10, 9, 5), 7, csbs, record_slots=5)
    assert arena.chunks == 3 and arena.code_words == 3 and arena.acc_words == 12
    last_x = max(o for layer in arena.x for line in layer for o in line)
    first_dy = min(o for layer in arena.dy for line in layer for o in line)
    assert last_x < first_dy  # WG reads an X and a DY tile as one block of two rows
    for slots in arena.blocks:
        for s in slots:
            assert s.b[0] < s.ig and s.b[1] < s.ig and s.b[0] + 4 * s.nnz <= s.b[1]  # UPD: B then G
    kept = [(r, c) for r in range(3) for c in range(3) if masks[0][4 * r:4 * r + 4, 4 * c:4 * c + 4].any()]
    assert [(s.row, s.col) for s in arena.blocks[0]] == kept and kept[0][0] == 1  # empty blocks have no slots
    assert sum(s.nnz for s in arena.blocks[1]) == csbs[1].nnz


def test_codes_accumulators_and_state_round_trip():
    rng = np.random.default_rng(1)
    csbs, masks = structures(rng)
    arena = build_arena(SPEC, (10, 9, 5), 7, csbs, record_slots=5)
    image = np.full_like(arena.image, 0xA5A5_A5A5)  # what an earlier batch left: padding must be zeroed
    codes = rng.integers(-128, 128, (5, 10))
    ranges = arena.write_codes(image, arena.x[0], codes)
    assert len(ranges) == 3 * 2 and all(words == 3 for _, words in ranges)  # 3 channel tiles, 2 chunks of 3 lanes
    first = image[arena.x[0][1][1] // 4:arena.x[0][1][1] // 4 + 3].copy()
    tile = unpack_bytes(first, 12).view(np.int8).reshape(4, 3)  # channels 4..7, samples 3..5 (5 padded to 0)
    np.testing.assert_array_equal(tile[:, :2], codes[3:5, 4:8].T)
    assert not tile[:, 2].any()
    last = unpack_bytes(image[arena.x[0][2][0] // 4:arena.x[0][2][0] // 4 + 3], 12).view(np.int8).reshape(4, 3)
    np.testing.assert_array_equal(last[:2], codes[0:3, 8:10].T)
    assert not last[2:].any()  # channels 10 and 11 padded
    assert arena.write_codes(image, arena.x[0], codes.astype(np.int8)) == ranges and (image[
        arena.x[0][1][1] // 4:arena.x[0][1][1] // 4 + 3] == first).all()  # int8 codes alike
    with pytest.raises(ValueError, match="little-endian 32-bit"):
        arena.write_codes(image.astype(">u4"), arena.x[0], codes)
    accs = rng.integers(-(1 << 31), 1 << 31, (7, 5))
    for c, line in enumerate(arena.z[1]):
        for k, offset in enumerate(line):
            block = np.zeros((4, 3), np.int64)
            part = accs[3 * k:3 * k + 3, 4 * c:4 * c + 4].T
            block[:part.shape[0], :part.shape[1]] = part
            image[offset // 4:offset // 4 + 12] = (block.reshape(-1) & 0xFFFF_FFFF).astype(np.uint32)
    tiles = arena.acc_tiles(arena.z[1], 7, 5)
    np.testing.assert_array_equal(tiles.read(image), accs)
    assert sum(words for _, words in tiles.ranges) == (4 + 1) * 3 * 3
    buffer = rng.integers(-(1 << 23), 1 << 23, csbs[1].nnz)
    arena.write_state(image, 1, csbs[1], buffer, 1)
    np.testing.assert_array_equal(arena.read_buffer(image, 1, 1), buffer)
    s = arena.blocks[1][0]
    weights = unpack_bytes(image[s.iw // 4 + s.index_words:s.iw // 4 + 2 * s.index_words], s.nnz).view(np.int8)
    np.testing.assert_array_equal(weights, buffer[:s.nnz] >> 16)  # the top byte: truncation
    with pytest.raises(ValueError, match="buffer words"):
        arena.write_state(image, 1, csbs[1], buffer[:-1], 0)
    with pytest.raises(ValueError, match="1..7"):
        arena.chunks_of(8)
    before = image.copy()
    for bad in (rng.integers(-128, 128, (5, 13)), rng.integers(-128, 128, 10), rng.integers(-128, 128, (8, 10)),
                rng.random((5, 10))):
        with pytest.raises(ValueError):  # too many channels, not a matrix, more samples than lanes, not integers
            arena.write_codes(image, arena.x[0], bad)
    assert image.tobytes() == before.tobytes()  # refused before a word is written


def test_specs_the_lists_cannot_run_are_refused():
    rng = np.random.default_rng(2)
    csbs, _ = structures(rng)
    with pytest.raises(ValueError, match="square FC blocks"):
        build_arena(CsbSpec(block_rows=4, block_cols=8, batch=3), (10, 9, 5), 7, csbs, record_slots=1)
    with pytest.raises(ValueError, match="SELECT"):
        build_arena(CsbSpec(block_rows=4, block_cols=4, batch=8), (10, 9, 5), 7, csbs, record_slots=1)
    with pytest.raises(ValueError, match="structures"):
        build_arena(SPEC, (10, 9, 5), 7, csbs[:1], record_slots=1)


def test_entry_ranges_cut_a_block_on_whole_words_and_find_their_words():
    slots = BlockSlots(row=0, col=1, start=7, nnz=23, iw=1000, ig=2000, b=(3000, 4000))
    whole = EntryRange.whole(slots, 9)
    parts = whole.split(3)
    assert [(p.first, p.nnz) for p in parts] == [(0, 8), (8, 8), (16, 7)]
    assert [(p.first, p.nnz) for p in whole.split(5)] == [(0, 8), (8, 8), (16, 7)]  # 4 entries a word at least
    assert [(p.first, p.nnz) for p in whole.split(30)] == [(0, 4), (4, 4), (8, 4), (12, 4), (16, 4), (20, 3)]
    second = parts[1]  # the block's index takes 6 words: 23 bytes
    assert (second.index(slots.iw), second.index(slots.ig), second.index_words) == (1008, 2008, 2)
    assert second.weights == 1000 + 4 * 6 + 8 * 9  # byte 72 of the weight codes: a whole word
    assert second.gradients == 2000 + 4 * (6 + 8 * 9) and second.buffer(1) == 4000 + 4 * 8 * 9
    for bad in (dict(first=2, nnz=4), dict(first=0, nnz=0), dict(first=20, nnz=4)):
        with pytest.raises(ValueError, match="multiple of 4"):
            EntryRange(slots=slots, kk=9, **bad)


@pytest.mark.parametrize("parts", [2, 4])
def test_entry_ranges_on_a_wide_stream_start_on_beats_and_fill_whole_beats(parts):
    """On a stream of ``parts`` 32-bit parts a beat a range starts at a multiple of ``4 * parts`` entries, so its
    index bytes, weight codes, gradients and buffer words start a beat; its sections are counted in whole beats."""
    beat = 4 * parts
    slots = BlockSlots(row=0, col=1, start=7, nnz=37, iw=1024, ig=2048, b=(3072, 4096), parts=parts)
    ranges = EntryRange.whole(slots, 9).split(3)
    assert [r.first for r in ranges] == list(range(0, 37, ranges[0].nnz)) and ranges[0].nnz % beat == 0
    assert sum(r.nnz for r in ranges) == 37 and len(ranges) <= 3
    for r in ranges:
        assert r.index_words % parts == 0 and r.value_words % parts == 0
        assert r.index_words >= -(-r.nnz // 4) and r.value_words >= 9 * r.nnz
        for at in (r.index(slots.iw), r.index(slots.ig), r.weights, r.gradients, r.buffer(0), r.buffer(1)):
            assert at % beat == 0
    last = ranges[-1]  # ends inside the block's padded sections
    assert last.first * 9 + last.value_words <= -(-37 * 9 // parts) * parts
    assert slots.index_words == -(-10 // parts) * parts  # 37 index bytes: 10 words, in whole beats
    with pytest.raises(ValueError, match=f"multiple of {beat}"):
        EntryRange(slots=slots, first=4, nnz=4, kk=9)
