"""The FB-float step's arena: tiles on one grid, a shorter batch in the same tiles, the state in and out of the
parameter regions, and no two tensors sharing a word."""

from __future__ import annotations

import numpy as np
import pytest

from codesign.contracts.calls import ArenaLayout
from codesign.pe.fpmac_array.spec import FpmacArraySpec
from codesign.step.fpmac_array.arena import REGIONS, Tiles, build_arena, param_rows, region

SPEC = FpmacArraySpec(exp_bits=5, max_fb=9, max_m=8, max_n=6, max_k=7)  # tile = 6


def _arena():
    return build_arena(SPEC, (13, 7, 4), 10, one=1 << 9, record_slots=5)


def test_tiles_round_trip_a_matrix_and_a_shorter_batch():
    layout = ArenaLayout()
    tiles = Tiles.place(layout, [4, 4, 2], [3, 2], gap=5)
    image = layout.image()
    matrix = np.arange(10 * 5, dtype=np.uint64).reshape(10, 5)
    ranges = tiles.write(image, matrix)
    assert sum(words for _, words in ranges) == 50 and len(ranges) == 6
    np.testing.assert_array_equal(tiles.read(image), matrix)
    assert tiles.rows_of(6) == [4, 2] and tiles.rows_of(10) == [4, 4, 2]
    tiles.write(image, matrix[:6] + 100)
    np.testing.assert_array_equal(tiles.read(image, 6), matrix[:6] + 100)
    assert tiles.ranges(6) == [(tiles.offsets[i][j] // 4, w) for i, j, w in ((0, 0, 12), (0, 1, 8), (1, 0, 6),
                                                                           (1, 1, 4))]
    # a tile, its gap, and the tile with the gap's first words: contiguous blocks
    assert tiles.tile(1, 0, 2).total_words == 6
    assert tiles.gap_block(1, 0, 5, 2).offset == tiles.offsets[1][0] + 24
    assert tiles.with_gap(1, 0, 5, 2).total_words == 11
    with pytest.raises(ValueError, match="gap"):
        tiles.gap_block(0, 0, 6)
    with pytest.raises(ValueError, match="rows"):
        tiles.rows_of(11)


def test_every_tensor_is_on_the_grid_and_apart():
    arena = _arena()
    assert arena.tile == 6
    assert param_rows(13, 6) == [1, 6, 6, 1]
    assert arena.params[0].row_spans == (1, 6, 6, 1) and arena.params[0].col_spans == (6, 1)
    assert arena.a[1].col_spans == arena.dz[0].col_spans == arena.dx[1].col_spans
    assert arena.logits.col_spans == arena.dz[-1].col_spans
    assert arena.dx[0] is None and arena.a[0].row_spans == (6, 4)
    taken = np.zeros(arena.image.size, dtype=bool)

    def claim(start, words):
        assert not taken[start:start + words].any()
        taken[start:start + words] = True

    for tiles in [*arena.a, arena.logits, *arena.dz, *arena.dx[1:]]:
        for start, words in tiles.ranges():
            claim(start, words + tiles.gap)
    for index in range(len(REGIONS)):
        for tiles in arena.params:
            for start, words in tiles.ranges():
                claim(start + arena.base(index) // 4, words + tiles.gap)
    claim(arena.ones // 4, arena.tile)
    claim(arena.scalars // 4, 3)
    claim(arena.records // 4, 8 * arena.record_slots)
    assert np.all(arena.image[arena.ones // 4:arena.ones // 4 + 6] == 1 << 9)


def test_the_state_round_trips_through_either_phase():
    arena, rng = _arena(), np.random.default_rng(0)
    image = arena.image.copy()
    shapes = [(13, 7), (7, 4)]
    weights = [rng.integers(0, 1 << 15, s, dtype=np.uint64) for s in shapes]
    biases = [rng.integers(0, 1 << 15, (1, s[1]), dtype=np.uint64) for s in shapes]
    velocity = [rng.integers(0, 1 << 15, w.shape, dtype=np.uint64) for w in weights + biases]
    for phase in (0, 1):
        ranges = arena.write_params(image, phase, weights, biases, velocity)
        assert sum(words for _, words in ranges) == 2 * sum(w.size + b.size for w, b in zip(weights, biases))
        assert sorted(ranges) == sorted(arena.param_ranges(phase))
        state = arena.read_params(image, phase)
        for key, mine in (("weights", weights), ("biases", biases), ("velocity", velocity)):
            for got, given in zip(state[key], mine):
                np.testing.assert_array_equal(got, given)
    assert region(0, "g") + 1 == region(0, "p") and region(1, "p") + 1 == region(1, "v")
    with pytest.raises(ValueError, match="velocities"):
        arena.write_params(image, 0, weights, biases, velocity[:3])
    with pytest.raises(ValueError, match="widths"):
        build_arena(SPEC, (4,), 3, one=1, record_slots=0)
