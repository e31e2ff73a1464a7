"""A conv network's layers and residual blocks, and the fractions that let its shortcuts add in place."""

from __future__ import annotations

import numpy as np
import pytest

from codesign.pe.csb import CsbSpec
from codesign.step.csb.conv_net import (IDENTITY_SHIFT_RANGE, ResidualBlock, align_fractions, check_aligned,
                                        resnet_shapes, shortcut_shifts, shortcut_terms)

SPEC = CsbSpec(block_rows=8, block_cols=8, kernel=3, out_h=4, out_w=4, batch=8, max_stride=2)


def test_resnet_8_s_layers_and_blocks():
    shapes, blocks = resnet_shapes(SPEC, (1, 8, 8), ((16, 1),), ((16, 1), (32, 2), (64, 2)), 10)
    assert [(s.channels, s.outputs, s.kernel, s.stride, s.height) for s in shapes] == [
        (1, 16, 3, 1, 8), (16, 16, 3, 1, 8), (16, 16, 3, 1, 8), (16, 32, 3, 2, 8), (32, 32, 3, 1, 4),
        (16, 32, 1, 2, 8), (32, 64, 3, 2, 4), (64, 64, 3, 1, 2), (32, 64, 1, 2, 4), (256, 10, 1, 1, 1)]
    assert blocks == (ResidualBlock(first=1), ResidualBlock(first=3, projection=5),
                      ResidualBlock(first=6, projection=8))
    assert blocks[1].layers == (3, 4, 5) and shortcut_terms(shapes, blocks[0]) == 1
    assert shortcut_terms(shapes, blocks[2]) == 64
    # a block that widens at stride 1 projects too
    assert resnet_shapes(SPEC, (3, 8, 8), ((8, 1),), ((12, 1),), 4)[1] == (ResidualBlock(first=1, projection=3),)
    with pytest.raises(ValueError, match="at least one plain conv"):
        resnet_shapes(SPEC, (3, 8, 8), (), ((12, 1),), 4)


def _random_fractions(rng, layers: int):
    return [{blob: int(rng.integers(-2, 16)) for blob in ("activation", "weight", "error")} for _ in range(layers)]


@pytest.mark.parametrize("seed", range(40))
def test_aligned_fractions_only_go_down_and_let_every_shortcut_add_in_place(seed):
    rng = np.random.default_rng(seed)
    shapes, blocks = resnet_shapes(SPEC, (1, 8, 8), ((8, 1),), ((8, 1), (16, 2), (16, 1), (24, 1)), 10)
    natural = _random_fractions(rng, len(shapes))
    aligned = align_fractions(natural, blocks)
    assert all(a[blob] <= n[blob] for a, n in zip(aligned, natural) for blob in a)
    check_aligned(aligned, blocks)
    for block in blocks:
        if block.projection is None:
            assert all(IDENTITY_SHIFT_RANGE[0] <= j <= IDENTITY_SHIFT_RANGE[1]
                       for j in shortcut_shifts(aligned, block))
    # a layer no block touches keeps its fractions
    assert aligned[0] == natural[0] and aligned[-1] == natural[-1]


def test_an_aligned_block_moves_only_what_it_must():
    block = ResidualBlock(first=0)
    fracs = [{"activation": 4, "weight": 8, "error": 10}, {"activation": 4, "weight": 7, "error": 12}]
    aligned = align_fractions(fracs, [block])
    # jf = 7 + 4 - 4 = 7: conv2's input loses one bit; jb = 8 + 10 - 12 = 6 already fits
    assert aligned == [{"activation": 4, "weight": 8, "error": 10}, {"activation": 3, "weight": 7, "error": 12}]
    assert shortcut_shifts(aligned, block) == (6, 6)
    with pytest.raises(ValueError, match="not aligned"):
        shortcut_shifts(fracs, block)
    with pytest.raises(ValueError, match="not aligned"):
        check_aligned(fracs, [block])


def test_a_projection_shares_its_input_and_error_fractions_and_meets_both_sums():
    block = ResidualBlock(first=0, projection=2)
    fracs = [{"activation": 5, "weight": 8, "error": 11}, {"activation": 4, "weight": 7, "error": 12},
             {"activation": 6, "weight": 9, "error": 13}]
    aligned = align_fractions(fracs, [block])
    check_aligned(aligned, [block])
    # the projection's weight fraction: min(9, 7 + 4 - 5, 8 + 11 - 12) = 6
    assert aligned[2] == {"activation": 5, "weight": 6, "error": 12}
    assert aligned[1]["activation"] == 4 and aligned[0]["error"] == 10
    with pytest.raises(ValueError, match="projection"):
        check_aligned(fracs, [block])
