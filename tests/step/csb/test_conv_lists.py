"""A CSB conv layer's lists: halo tiles read in place, stride 2 on the PE. The golden lists equal the whole-map layer
model (codesign.pe.csb.golden: one tile, the host's padding) on every grid point; the HLS C++ shell and the RTL
shell equal the golden arena word for word, and the list cycle model gives the RTL's busy cycles exactly."""

from __future__ import annotations

import shutil

import numpy as np
import pytest

from codesign.pe import get_pe
from codesign.pe.csb import CsbSpec, encode, golden
from codesign.pe.csb.stream import FLAG_CARRY, FLAG_HOLD, FLAG_ZERO, Op, stride_of
from codesign.shell.calls import ListCase, run_list_golden
from codesign.shell.ip import held_by_default
from codesign.step.csb.conv_arena import ConvShape
from codesign.step.csb.conv_lists import conv_arena, conv_lists
from codesign.step.list_cycles import DdrTiming, list_cycles

PE = get_pe("csb")
needs_icarus = pytest.mark.skipif(shutil.which("iverilog") is None, reason="Icarus Verilog is not on PATH")

# (channels, outputs, height, width, kernel, stride, tile rows, tile cols, lanes, block, samples[, stream bits])
GRID = {
    "k3-s1-4tiles": (8, 8, 8, 8, 3, 1, 4, 4, 4, 4, 4),
    "k3-s1-ragged": (6, 8, 7, 9, 3, 1, 4, 4, 4, 4, 6),  # partial channel blocks, tiles past the map, 2 chunks
    "k3-s2": (8, 8, 8, 8, 3, 2, 2, 2, 4, 4, 4),
    "k1-s2-shortcut": (8, 8, 8, 8, 1, 2, 2, 2, 4, 4, 4),  # a 1 x 1 shortcut reads its subsampled map by stride
    "k1-s1": (8, 6, 5, 5, 1, 1, 2, 3, 8, 4, 8),
    "k3-s2-odd": (8, 8, 9, 7, 3, 2, 2, 3, 4, 8, 5),
    "k5-s1-wide": (4, 12, 6, 10, 5, 1, 3, 4, 12, 4, 15),  # halos of two positions, three lane chunks of 12
    "k3-s1-one-tile": (16, 16, 4, 4, 3, 1, 4, 4, 16, 8, 16),  # the whole map one tile: no halo is shared
    # wide streams: every section in whole beats, a position's codes a beat or more
    "k3-s2-odd-w64": (8, 8, 9, 7, 3, 2, 2, 3, 8, 4, 13, 64),
    "k3-s1-ragged-w128": (6, 8, 7, 9, 3, 1, 4, 4, 16, 4, 20, 128),
    "k1-s2-shortcut-w64": (8, 8, 8, 8, 1, 2, 2, 2, 8, 4, 8, 64),
    "k5-s1-w128": (4, 12, 6, 10, 5, 1, 3, 4, 16, 8, 16, 128),
}


def layer_case(point, seed: int = 0, density: float = 0.5, acc_bits: int = 32):
    """A random pruned layer on its PE, its arena filled (weights, input, errors) and its lists."""
    c, o, h, w, k, s, th, tw, b, block, n, *bits = point
    rng = np.random.default_rng(seed)
    spec = CsbSpec(block_rows=block, block_cols=block, kernel=k, out_h=th, out_w=tw, batch=b, max_stride=s,
                   acc_bits=acc_bits, stream_bits=bits[0] if bits else 32)
    shape = ConvShape(channels=c, outputs=o, height=h, width=w, kernel=k, stride=s)
    kernels = rng.integers(-128, 128, (o, c, k, k)) * (rng.random((o, c)) < density)[:, :, None, None]
    csb = encode(kernels.astype(np.int64), block_rows=block, block_cols=block)
    arena = conv_arena(spec, shape, n, csb)
    image = arena.image.copy()
    arena.write_weights(image, csb)
    x = rng.integers(-128, 128, (n, c, h, w))
    dy = rng.integers(-128, 128, (n, o, *shape.out_map))
    arena.write_input(image, x)
    arena.write_errors(image, dy)
    return spec, shape, csb, arena, image, x, dy, conv_lists(arena, n)


def whole_map(shape: ConvShape, csb, x, dy, acc_bits: int = 32):
    """The layer on one tile the size of the map (the golden layer model), the input padded by the host."""
    p, s = shape.pad, shape.stride
    padded = np.pad(x, ((0, 0), (0, 0), (p, p), (p, p)))
    z = golden.forward(csb, padded, stride=s, acc_bits=acc_bits)
    grads = golden.weight_grad(csb, padded, dy, stride=s)
    errors = golden.backward_error(csb, dy, stride=s)
    full = np.zeros((*errors.shape[:2], max(padded.shape[2], errors.shape[2]), max(padded.shape[3], errors.shape[3])),
                    np.int64)
    full[:, :, :errors.shape[2], :errors.shape[3]] = errors  # rows no window reaches get no error
    return z, grads, full[:, :, p:p + shape.height, p:p + shape.width]


def stale(arena, image: np.ndarray, seed: int) -> np.ndarray:
    """``image`` with the input-error sums and the gradients an earlier step left (random words): the lists must
    clear or overwrite every one they read."""
    rng, image = np.random.default_rng(seed), image.copy()
    words = arena.column_blocks * arena.spec.block_cols * arena.grid[0] * arena.grid[1] * arena.spec.batch
    for base in arena.dx:
        image[base // 4:base // 4 + words] = rng.integers(0, 1 << 32, words, dtype=np.uint64)
    for s in arena.blocks:
        at = s.ig // 4 + s.index_words
        image[at:at + s.nnz * arena.shape.kernel ** 2] = 0xDEAD_BEEF
    return image


@pytest.mark.parametrize("name", list(GRID))
def test_golden_lists_equal_the_whole_map_layer(name):
    """From an arena an earlier step left (stale sums and gradients), on every grid point: FP, WG and EB equal the
    whole-map layer's, word for word."""
    spec, shape, csb, arena, image, x, dy, lists = layer_case(GRID[name])
    after = run_list_golden(PE, spec, stale(arena, image, 1), lists.forward)
    after = run_list_golden(PE, spec, after, lists.backward)
    z, grads, errors = whole_map(shape, csb, x, dy)
    assert np.array_equal(arena.read_sums(after, x.shape[0]), z)
    assert np.array_equal(arena.read_gradients(after), grads)
    assert np.array_equal(arena.read_input_errors(after, x.shape[0]), errors)
    assert z.any() and grads.any() and errors.any()
    headers = [call.header for call in lists.forward + lists.backward]
    assert {stride_of(h) for h in headers} == {shape.stride}  # stride 2 runs on the PE, never subsampled
    wg = [call for call in lists.backward if call.header & 3 == Op.WG]
    assert all(len(call.segments) == 3 for call in wg)  # index, input tile, error tile
    if arena.tiles != (1, 1):  # tiles read as strided 3-D blocks (one tile of the whole grid is one run)
        assert all(call.segments[1].planes > 1 or call.segments[1].rows > 1 for call in wg)


def test_a_tile_reads_its_halo_where_the_next_tile_reads_it():
    """Neighbouring tiles' input blocks overlap by kernel - stride rows and columns: the halo is read twice, from
    one map, and nothing is cut out by the host."""
    spec, shape, _, arena, _, _, _, lists = layer_case(GRID["k3-s1-4tiles"])
    first, right = arena.in_tile(0, 0, 0, arena.x[0], 1), arena.in_tile(0, 1, 0, arena.x[0], 1)
    assert first.overlaps(right) and right.offset - first.offset == spec.out_w * spec.batch
    fp = [call.segments[1] for call in lists.forward]
    assert first in fp and right in fp


def test_fp_sums_saturate_as_the_whole_map_layer_s():
    """16-bit sums: a position's additions come in the same order however the map is tiled, so FP saturates as the
    one-tile golden layer does."""
    point = (8, 8, 8, 8, 3, 1, 4, 4, 4, 4, 4)
    spec, shape, csb, arena, image, x, dy, lists = layer_case(point, seed=3, density=1.0, acc_bits=16)
    after = run_list_golden(PE, spec, image, lists.forward)
    z = arena.read_sums(after, x.shape[0])
    assert np.array_equal(z, whole_map(shape, csb, x, dy, acc_bits=16)[0])
    assert np.count_nonzero(np.abs(z) == 1 << 15) + np.count_nonzero(z == (1 << 15) - 1) > 50


def test_eb_clears_then_chains_each_tile_onto_the_sums_before_it():
    """Per block column the grid is cleared by entry-less ZERO EBs (but tile (0, 0)'s region, whose chains start
    from zero), then each later tile's chain loads its positions' sums (the third segment, or an entry-less loading
    EB for a one-block column) and its last call writes them. A map of one tile shares no halo: nothing is cleared
    or loaded."""
    _, _, _, arena, _, _, _, lists = layer_case(GRID["k3-s1-ragged"])
    eb = [call for call in lists.backward if call.header & 3 == Op.EB]
    clears = [call for call in eb if call.header & FLAG_ZERO and not call.header >> 16]
    assert clears and all(call.count for call in clears)
    fresh = [call for call in eb if call.header & FLAG_ZERO and call.header >> 16]
    loads = [call for call in eb if not call.header & (FLAG_ZERO | FLAG_CARRY)]
    assert all(call.segments[-1].total_words == call.count or call.header & FLAG_HOLD for call in loads)
    writes = [call for call in eb if call.count and call.header >> 16]
    assert fresh and len(writes) == len(loads) + len(fresh)
    assert all(call.header & (FLAG_CARRY | FLAG_ZERO) for call in writes)
    first_layer = conv_lists(arena, 6, input_errors=False)  # the network's input takes no error: no EB at all
    assert not any(call.header & 3 == Op.EB for call in first_layer.backward)
    assert first_layer.macs * 3 == lists.macs * 2
    for point in (GRID["k3-s1-one-tile"], (8, 8, 8, 8, 3, 2, 4, 4, 4, 4, 4)):  # stride 2: a grid past the tile
        one_tile = [call for call in layer_case(point)[-1].backward if call.header & 3 == Op.EB]
        assert all(call.header >> 16 and len(call.segments) == 2 for call in one_tile)


@pytest.mark.parametrize("make, match", [
    (lambda: ConvShape(channels=4, outputs=4, height=4, width=4, kernel=2), "odd kernel"),
    (lambda: ConvShape(channels=4, outputs=4, height=4, width=4, kernel=3, stride=3), "stride"),
    (lambda: layer_case((8, 8, 8, 8, 3, 1, 4, 4, 3, 4, 4)), "multiple of 4"),
    (lambda: conv_arena(CsbSpec(block_rows=4, block_cols=4, kernel=3, out_h=2, out_w=2, batch=4),
                        ConvShape(channels=4, outputs=4, height=4, width=4, kernel=3, stride=2),
                        4, encode(np.ones((4, 4, 3, 3), np.int64), block=4)), "max_stride"),
    (lambda: conv_arena(CsbSpec(block_rows=4, block_cols=4, kernel=1, out_h=2, out_w=2, batch=4),
                        ConvShape(channels=4, outputs=4, height=4, width=4, kernel=3),
                        4, encode(np.ones((4, 4, 3, 3), np.int64), block=4)), "kernel"),
    (lambda: conv_arena(CsbSpec(block_rows=4, block_cols=4, kernel=3, out_h=2, out_w=2, batch=4),
                        ConvShape(channels=8, outputs=4, height=4, width=4, kernel=3),
                        4, encode(np.ones((4, 4, 3, 3), np.int64), block=4)), "structure"),
    (lambda: conv_lists(layer_case(GRID["k3-s2"])[3], 5), "1..4"),
])
def test_a_layer_the_lists_cannot_run_is_refused(make, match):
    with pytest.raises(ValueError, match=match):
        make()


def _rtl_case(name: str, tmp_path, ddr=None):
    from codesign.shell.list_sim import run_list_rtl

    spec, _, _, _, image, _, _, lists = layer_case(GRID[name])
    for part, calls in (("forward", lists.forward), ("backward", lists.backward)):
        case = ListCase(calls=calls, arena=image, expected=run_list_golden(PE, spec, image, calls))
        result = run_list_rtl(PE, spec, case, tmp_path / part, ddr=ddr, held_sums=held_by_default(PE))
        model = list_cycles(PE, spec, calls, image, ddr=ddr)
        print(f"\n[csb conv {name} {part}] {len(calls)} calls, {result.mismatches} mismatches of {result.words} words, "
              f"model {model.total}, RTL busy {result.busy_cycles}; {model.breakdown()}")
        assert result.passed, result.first_mismatches
        assert model.total == result.busy_cycles
        image = case.expected


@needs_icarus
@pytest.mark.parametrize("name, ddr", [("k3-s1-4tiles", None),
                                       pytest.param("k3-s2", None, marks=pytest.mark.slow),
                                       pytest.param("k1-s2-shortcut", DdrTiming(), marks=pytest.mark.slow),
                                       pytest.param("k3-s1-ragged", DdrTiming(), marks=pytest.mark.long),
                                       ("k1-s2-shortcut-w64", None),
                                       pytest.param("k3-s2-odd-w64", None, marks=pytest.mark.slow),
                                       pytest.param("k5-s1-w128", DdrTiming(), marks=pytest.mark.slow)])
def test_rtl_runs_the_layer_lists_bit_exact_in_the_modelled_cycles(tmp_path, name, ddr):
    _rtl_case(name, tmp_path, ddr)


@pytest.mark.parametrize("name", ["k3-s2-odd", pytest.param("k3-s1-ragged", marks=pytest.mark.slow),
                                  "k1-s2-shortcut-w64", pytest.param("k3-s1-ragged-w128", marks=pytest.mark.slow)])
def test_csim_runs_the_layer_lists_as_the_golden_lists(tmp_path, name):
    from codesign.shell.ip import render_accel_project
    from codesign.shell.list_sim import run_list_csim

    spec, _, _, _, image, _, _, lists = layer_case(GRID[name])
    render_accel_project(PE, spec, "csb_0", None, tmp_path / "hls")
    for part, calls in (("forward", lists.forward), ("backward", lists.backward)):
        case = ListCase(calls=calls, arena=image, expected=run_list_golden(PE, spec, image, calls))
        result = run_list_csim(tmp_path / "hls", case, build_dir=tmp_path / f"build-{part}")
        print(f"\n[csb conv csim {name} {part}] {len(calls)} calls, {result.mismatches} mismatches of {result.words}")
        assert result.passed, result.first_mismatches
        image = case.expected
