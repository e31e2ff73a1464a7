"""A conv layer's arena: the padded grid reaches every tile's input, a tile's block reads exactly the positions the
PE's X section holds (channel, row, column, lane), and the host's maps go in and out unchanged."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from codesign.pe.csb import CsbSpec, encode
from codesign.pe.csb.format import unpack_bytes
from codesign.shell.calls import gather
from codesign.step.csb.conv_arena import ConvShape, build_conv_arena, folded_head, grid_of, head_fold
from codesign.step.csb.conv_lists import clear_regions


def _codes(words: np.ndarray) -> np.ndarray:
    """Signed 8-bit codes, four to a word."""
    return unpack_bytes(words, 4 * words.size).view(np.int8).astype(np.int64)


def _arena(c=6, o=5, h=7, w=9, k=3, s=1, th=4, tw=4, b=4, block=4, n=6):
    spec = CsbSpec(block_rows=block, block_cols=block, kernel=k, out_h=th, out_w=tw, batch=b, max_stride=s)
    shape = ConvShape(channels=c, outputs=o, height=h, width=w, kernel=k, stride=s)
    csb = encode(np.ones((o, c, k, k), np.int64), block=block)
    return build_conv_arena(spec, shape, n, csb, record_slots=1)


@pytest.mark.parametrize("kwargs, out_map, tiles, grid", [
    ({}, (7, 9), (2, 3), (10, 14)),  # three tiles across reach column 13: past the padded 11
    ({"s": 2, "th": 2, "tw": 2}, (4, 5), (2, 3), (9, 13)),  # stride 2: the last tile reads up to 2 * 5 + 3
    ({"k": 1, "s": 2, "th": 2, "tw": 3}, (4, 5), (2, 2), (7, 11)),  # 1 x 1: no padding; the grid is the map's
])
def test_the_grid_reaches_every_tile_s_input(kwargs, out_map, tiles, grid):
    arena = _arena(**kwargs)
    assert arena.shape.out_map == out_map and arena.tiles == tiles and arena.grid == grid
    assert grid_of(arena.spec, arena.shape) == grid


def test_a_tile_s_block_reads_the_padded_input_in_the_pe_s_order():
    arena = _arena(s=2, th=2, tw=3, n=5)
    rng = np.random.default_rng(0)
    codes = rng.integers(-128, 128, (5, 6, 7, 9))
    image = arena.image.copy()
    arena.write_input(image, codes)
    spec, pad = arena.spec, arena.shape.pad
    padded = np.zeros((2 * spec.batch, 8, *arena.grid), np.int64)  # two chunks, channels to whole block columns
    padded[:5, :6, pad:pad + 7, pad:pad + 9] = codes
    ih, iw = spec.in_tile(2)
    for k, ty, tx, col in ((0, 0, 0, 0), (1, 1, 1, 1), (0, 1, 0, 1)):
        read = _codes(gather(image, arena.in_tile(ty, tx, col * 4, arena.x[k], 1))).reshape(4, ih, iw, 4)
        r, c = 2 * ty * spec.out_h, 2 * tx * spec.out_w
        want = padded[k * 4:(k + 1) * 4, col * 4:(col + 1) * 4, r:r + ih, c:c + iw].transpose(1, 2, 3, 0)
        assert np.array_equal(read, want), (k, ty, tx, col)


def test_maps_go_in_and_out_unchanged_and_the_clears_cover_the_grid():
    arena = _arena()
    rng = np.random.default_rng(1)
    image = arena.image.copy()
    errors = rng.integers(-128, 128, (6, 5, 7, 9))
    arena.write_errors(image, errors)
    tile = _codes(gather(image, arena.out_tile(1, 2, 4, arena.dy[0], 1))).reshape(4, 4, 4, 4)
    assert np.array_equal(tile[0, :3, :1, :], errors[:4, 4, 4:7, 8:9].transpose(1, 2, 0))  # the map's last corner
    assert not tile[1:].any() and not tile[0, 3:].any() and not tile[0, :, 1:].any()  # past the map: zero
    covered = np.zeros(arena.grid, bool)
    ih, iw = arena.spec.in_tile(1)
    for row, col in clear_regions(arena):
        covered[row:row + ih, col:col + iw] = True
    assert covered.all()
    with pytest.raises(ValueError, match="1..6"):
        arena.chunks_of(7)


def test_a_folded_head_holds_its_chunks_as_positions_of_one_map():
    spec = CsbSpec(block_rows=4, block_cols=4, kernel=3, out_h=2, out_w=2, batch=4, max_stride=2)
    assert [head_fold(spec, n) for n in (4, 5, 16, 17, 36)] == [0, 2, 2, 3, 3]  # chunks 1, 2, 4, 5, 9
    assert head_fold(CsbSpec(kernel=5, batch=4), 16) == 2  # K1 folds on any build: no stride 2 needed
    head = ConvShape(channels=6, outputs=3, height=1, width=1, kernel=1)
    csb = encode(np.ones((3, 6, 1, 1), np.int8), block=4)
    arena = build_conv_arena(spec, folded_head(head, 2), 14, csb, record_slots=1, fold=2)
    assert (arena.shape.height, arena.shape.stride, arena.chunks, arena.chunks_of(14)) == (2, 1, 1, 1)
    assert arena.k1 and arena.geometry.kernel == 1 and arena.grid == (2, 2)  # the kernel-1 tile: no halo
    assert [arena.place(k) for k in range(4)] == [(0, 0, 0), (0, 0, 1), (0, 1, 0), (0, 1, 1)]
    rng = np.random.default_rng(2)
    image = arena.image.copy()
    arena.write_errors(image, rng.integers(-128, 128, (14, 3, 1, 1)))  # four chunks: a full map
    errors = rng.integers(-128, 128, (7, 3, 1, 1))  # two: the other two positions are cleared
    arena.write_errors(image, errors)
    dy = arena._map_view(image, arena.dy[0], arena._out_dims(), np.int8)
    assert np.array_equal(dy[:3, 0, 1, :3], errors[4:, :, 0, 0].T) and not dy[:, 1].any() and not dy[:, 0, 1, 3].any()
    codes = rng.integers(-128, 128, (7, 6, 1, 1))
    arena.write_input(image, codes)
    x = arena._map_view(image, arena.x[0], arena._grid_dims(), np.int8)
    assert np.array_equal(x[:6, 0, 1, :3], codes[4:, :, 0, 0].T) and not x[:, 1].any()  # chunk 1 at (0, 1)
    z = arena._map_view(image, arena.z[0], arena._out_dims(), np.int32)
    dx = arena._map_view(image, arena.dx[0], arena._grid_dims(), np.int32)
    for k in range(4):  # every position its own values: chunk, lane and channel told apart
        _, row, col = arena.place(k)
        z[:3, row, col] = 100 * k + np.arange(3)[:, None] * 10 + np.arange(4)
        dx[:6, row, col] = 1000 * k + np.arange(6)[:, None] * 10 + np.arange(4)
    samples = np.arange(7)
    want = 100 * (samples // 4)[:, None] + np.arange(3) * 10 + (samples % 4)[:, None]
    assert np.array_equal(arena.read_sums(image, 7)[:, :, 0, 0], want)
    want = 1000 * (samples // 4)[:, None] + np.arange(6) * 10 + (samples % 4)[:, None]
    assert np.array_equal(arena.read_input_errors(image, 7)[:, :, 0, 0], want)
    with pytest.raises(ValueError, match="1..14"):
        arena.write_errors(image, np.zeros((20, 3, 1, 1)))
    with pytest.raises(ValueError, match="holds 4 lane chunks"):
        build_conv_arena(spec, folded_head(head, 2), 17, csb, record_slots=1, fold=2)  # five chunks
    with pytest.raises(ValueError, match="holds 4 lane chunks"):
        build_conv_arena(spec, head, 14, csb, record_slots=1, fold=2)  # not the folded shape
    with pytest.raises(ValueError, match="structure of that kernel"):  # a 3 x 3 head on a kernel-5 build
        build_conv_arena(CsbSpec(kernel=5, batch=4), dataclasses.replace(head, kernel=3), 4,
                         encode(np.ones((3, 6, 3, 3), np.int8), block=4), record_slots=1)


def test_a_shortcut_shares_its_block_s_maps_and_refuses_others():
    """A 1 x 1 projection reads conv1's grid past its padding and adds onto conv2's sums: no maps of its own, its
    input tile at the grid's (pad, pad); a shape that is not the one's input and the other's output, or one side of
    the sharing alone, is refused, and so is the host reading or writing the maps through it."""
    from codesign.contracts.calls import ArenaLayout

    spec = CsbSpec(block_rows=4, block_cols=4, kernel=3, out_h=2, out_w=2, batch=4, max_stride=2)
    layout = ArenaLayout()
    conv1, conv2, projection = (ConvShape(channels=4, outputs=6, height=4, width=4, kernel=3, stride=2),
                                ConvShape(channels=6, outputs=6, height=2, width=2, kernel=3),
                                ConvShape(channels=4, outputs=6, height=4, width=4, kernel=1, stride=2))

    def place(shape, **shared):
        csb = encode(np.ones((shape.outputs, shape.channels, shape.kernel, shape.kernel), np.int8), block=4)
        return build_conv_arena(spec, shape, 8, csb, record_slots=0, layout=layout, **shared)

    first, second = place(conv1), place(conv2)
    short = place(projection, reads=first, adds_to=second)
    assert (short.x, short.dx, short.z, short.dy) == (first.x, first.dx, second.z, second.dy)
    assert short.grid == first.grid and short.origin == 1 and short.k1
    assert short.in_tile(0, 1, 0, short.x[0], 1).offset == first.grid_block(1, 1 + 2 * 2, 0, first.x[0], 1).offset
    with pytest.raises(ValueError, match="both"):
        place(projection, reads=first)
    with pytest.raises(ValueError, match="a 1 x 1 conv of the one's input map"):
        place(dataclasses.replace(projection, outputs=4), reads=first, adds_to=second)
    with pytest.raises(ValueError, match="block's conv1's"):
        short.write_input(np.zeros((8 * 4 * 4 * 4 // 4,), np.uint32), np.zeros((2, 4, 4, 4), np.int64))
