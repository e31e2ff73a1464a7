"""How the host lays a TT step's inputs into the arena (codesign.step.tt.list_layout): written in place, slot by
slot, the words the PE's packer makes; a core code's slots are where its layouts put it."""

from __future__ import annotations

import math

import numpy as np
import pytest

from codesign.contracts.calls import ArenaLayout
from codesign.pe.tt.contract import pack_rows
from codesign.step.tt.list_layout import (HostInput, core_forward, core_input_grad, core_last_forward,
                                          core_last_input_grad, core_slots, flat_cores, put_rows, room_rows,
                                          write_rows)
from codesign.step.tt.list_tiles import SLOT_BITS


@pytest.mark.parametrize("values, lanes, parts", [(4, 4, 1), (5, 4, 1), (13, 8, 4), (8, 8, 4), (3, 8, 2), (5, 4, 4), (4, 4, 2)])
def test_rows_written_in_place_are_the_packers_words(values, lanes, parts):
    """Codes written over stale words (padding lanes, a chunk's unused slots and all) give the words
    ``pack_rows`` makes of them: two's complement in 16-bit slots, every other bit 0; integers, or float32 whole
    numbers (negative ones and both extremes included)."""
    rng = np.random.default_rng(values * lanes + parts)
    codes = rng.integers(-(1 << 15), 1 << 15, size=(6, values))
    layout = ArenaLayout()
    rows = room_rows(layout, 6, values, lanes, parts, 1, 0)
    arena = rng.integers(0, 1 << 32, size=layout.image().size, dtype=np.uint64).astype(np.uint32)  # stale words
    item = HostInput(rows=rows, source="x", layout=lambda v: v, words=6 * rows.words)
    write_rows(arena, item, codes, lanes)
    start = rows.offset // 4
    packed = pack_rows(codes, lanes, SLOT_BITS, stream_bits=32 * parts).reshape(-1)
    assert np.array_equal(arena[start:start + item.words], packed)
    codes[0, :2] = [-(1 << 15), (1 << 15) - 1]  # as float32 whole numbers (the host's rounded codes), extremes too
    arena[start:start + item.words] = rng.integers(0, 1 << 32, size=item.words, dtype=np.uint64).astype(np.uint32)
    write_rows(arena, item, codes.astype(np.float32), lanes)
    packed = pack_rows(codes, lanes, SLOT_BITS, stream_bits=32 * parts).reshape(-1)
    assert np.array_equal(arena[start:start + item.words], packed)
    put = put_rows(layout, codes, lanes, parts, 1, 0)  # the same rows, put where the arena grows
    assert (put.values, put.words) == (rows.values, rows.words) and put.offset > rows.offset


def test_core_slots_name_each_slot_after_the_code_it_holds():
    """Every core's layouts, each packed once over the codes' positions: a slot's number is 1 + the index of the
    code it holds among every core's codes in order (:func:`flat_cores`), its padding slots 0."""
    shapes = [(1, 2, 3, 2), (2, 3, 2, 1)]
    layout, inputs = ArenaLayout(), {}
    for k, shape in enumerate(shapes):
        for name, lay in (("forward", core_forward if k == 0 else core_last_forward),
                          ("grad", core_input_grad if k == 0 else core_last_input_grad)):
            laid = lay(np.zeros(shape, np.int64))
            rows = room_rows(layout, laid.shape[0], laid.shape[1], 4, 1, 1, 0)
            inputs[f"{name} {k}"] = HostInput(rows=rows, source=k, layout=lay, words=laid.shape[0] * rows.words)
    inputs["x"] = HostInput(rows=room_rows(layout, 2, 3, 4, 1, 1, 0), source="x", layout=lambda v: v, words=2)
    dst, src = core_slots(inputs, shapes, 4, 1)
    cores = [np.arange(math.prod(shape)).reshape(shape) + 100 * (k + 1) for k, shape in enumerate(shapes)]
    arena = np.zeros(layout.image().size, np.uint32)
    for item in inputs.values():
        if item.source != "x":
            write_rows(arena, item, item.layout(cores[item.source]), 4)
    codes = np.concatenate([[0], flat_cores(cores)])
    assert np.array_equal(arena.view("<u2")[dst], codes[src])  # every slot written holds the code it names
    assert set(src[src > 0]) == set(range(1, codes.size))  # every code lies in some layout
