"""The CSB layer-schedule model against hand-worked timelines and plain-loop oracles."""

import math

import numpy as np
import pytest

from codesign.step.csb.schedule import ArraySpec, LayerShape, block_nnz, random_keep_mask, schedule_layer


def layer(out, inp, hw, k, name="l"):
    return LayerShape(name=name, in_channels=inp, out_channels=out, height=hw, width=hw, kernel=k)


def dense(shape):
    return np.ones((shape.out_channels, shape.in_channels), dtype=bool)


# --------------------------------------------------------------------------- compute only (unlimited bandwidth)

@pytest.mark.parametrize("op", ["FP", "EB", "WG"])
@pytest.mark.parametrize("tile", [4, 3])  # 3 cuts the 4x4 map into partial tiles
def test_dense_layer_on_one_pe_is_fully_utilised(op, tile):
    shape = layer(7, 5, 4, 3)  # 4x4 blocks: partial last block row and column
    array = ArraySpec(n_pe=1, block_rows=4, block_cols=4, tile_h=tile, tile_w=tile, batch=3)
    result = schedule_layer(shape, array, op, dense(shape))
    assert result.cycles == 7 * 5 * 9 * 16  # one MAC step per kernel tap per output position
    assert result.useful_macs == 7 * 5 * 9 * 16 * 3
    assert result.utilisation == 1.0 and result.compute_utilisation == 1.0
    assert result.bound == "compute"


def test_eb_spends_no_step_on_the_halo():
    shape = layer(3, 2, 2, 3)  # 2x2 outputs, 4x4 input positions with the halo
    result = schedule_layer(shape, ArraySpec(n_pe=1), "EB", dense(shape))
    assert result.cycles == 3 * 2 * 9 * 4  # one step per kernel tap per *output* position
    assert result.utilisation == 1.0


@pytest.mark.parametrize("op,expected", [("FP", 9 / 12), ("WG", 9 / 12), ("EB", 9 / 12)])
def test_2x2_group_loses_the_positions_that_do_not_divide_by_four(op, expected):
    # k = 1: IN_POS = OUT_POS = 9, a 2x2 group runs ceil(9 / 4) = 3 steps per kernel on 4 PEs' MACs
    shape = layer(4, 4, 3, 1)
    result = schedule_layer(shape, ArraySpec(n_pe=4, grouping="2x2"), op, dense(shape))
    assert result.n_units == 1
    assert result.cycles == 16 * 3
    assert result.utilisation == pytest.approx(expected)


def test_perfectly_balanced_blocks_are_fully_utilised_even_in_lockstep():
    shape = layer(8, 8, 4, 3)
    keep = (np.add.outer(np.arange(8), np.arange(8)) % 2 == 0)  # every 2x4 block holds 4 kernels
    array = ArraySpec(n_pe=4, block_rows=2, block_cols=4, tile_h=4, tile_w=4, common_slots=1)
    result = schedule_layer(shape, array, "FP", keep)
    assert result.cycles == 2 * 4 * 9 * 16  # two steps of four kernels per unit, all units in step
    assert result.utilisation == 1.0


def test_two_pe_imbalance_by_hand():
    # 1x1 kernels on a 2x2 map: a kernel is 4 cycles. Unit 0 runs row 0 (2 kernels), unit 1 row 1 (1 kernel).
    shape = layer(2, 2, 2, 1)
    array = ArraySpec(n_pe=2, block_rows=1, block_cols=1, tile_h=2, tile_w=2)
    result = schedule_layer(shape, array, "FP", np.array([[True, True], [True, False]]))
    assert result.cycles == 8
    assert result.utilisation == pytest.approx(12 / 16)


@pytest.mark.parametrize("slots,cycles", [(1, 8), (2, 4)])
def test_common_buffer_depth_decides_how_far_a_unit_runs_ahead(slots, cycles):
    # Unit 0 has a kernel at step 0 only, unit 1 at step 1 only. With one common slot step 1's operand waits
    # until every unit finished step 0 (cycle 4); with ping-pong unit 1 starts step 1 at once.
    shape = layer(2, 2, 2, 1)
    array = ArraySpec(n_pe=2, block_rows=1, block_cols=1, tile_h=2, tile_w=2, common_slots=slots)
    result = schedule_layer(shape, array, "FP", np.array([[True, False], [False, True]]))
    assert result.cycles == cycles
    assert result.utilisation == pytest.approx(8 / (cycles * 2))


def test_eb_deals_block_columns_to_the_units():
    shape = layer(1, 2, 1, 1)
    array = ArraySpec(n_pe=2, block_rows=1, block_cols=1, tile_h=1, tile_w=1)
    forward = schedule_layer(shape, array, "FP", dense(shape))
    backward = schedule_layer(shape, array, "EB", dense(shape))
    assert (forward.cycles, forward.passes, forward.steps) == (2, 1, 2)  # one output row: one unit idles
    assert (backward.cycles, backward.passes, backward.steps) == (1, 1, 1)  # two input columns, one each
    assert forward.utilisation == 0.5 and backward.utilisation == 1.0


def _oracle_step_cycles(keep, k, hw, tile, br, bc, parallel, op):
    """Per item (tile-major, then block row; EB: block column) the list of its steps' compute cycles."""
    rows, cols = len(keep), len(keep[0])
    lengths = [min(tile, hw - start) for start in range(0, hw, tile)]
    tiles = [(th, tw) for th in lengths for tw in lengths]
    n_r, n_c = -(-rows // br), -(-cols // bc)
    items = []
    for th, tw in tiles:
        positions = th * tw  # FP, EB and WG all step over the output positions
        per_step = -(-positions // parallel)
        for item in range(n_c if op == "EB" else n_r):
            steps = []
            for step in range(n_r if op == "EB" else n_c):
                r, c = (step, item) if op == "EB" else (item, step)
                nnz = 0
                for i in range(r * br, min(rows, (r + 1) * br)):
                    for j in range(c * bc, min(cols, (c + 1) * bc)):
                        nnz += bool(keep[i][j])
                steps.append(nnz * k * k * per_step)
            items.append(steps)
    return items


@pytest.mark.parametrize("op", ["FP", "EB", "WG"])
@pytest.mark.parametrize("grouping", ["single", "2x2"])
def test_makespan_matches_plain_loop_oracles_in_lockstep_and_free_running(op, grouping):
    shape = layer(21, 13, 6, 3)
    keep = random_keep_mask(shape, 0.35, seed=7)
    units = 5
    n_pe = units * (4 if grouping == "2x2" else 1)
    parallel = 4 if grouping == "2x2" else 1
    items = _oracle_step_cycles(keep.tolist(), 3, 6, 4, 4, 3, parallel, op)
    passes = [items[i:i + units] for i in range(0, len(items), units)]
    lockstep = sum(max(item[s] for item in group) for group in passes for s in range(len(items[0])))
    per_unit = [0] * units
    for i, item in enumerate(items):
        per_unit[i % units] += sum(item)
    common = dict(n_pe=n_pe, grouping=grouping, block_rows=4, block_cols=3, tile_h=4, tile_w=4)
    strict = schedule_layer(shape, ArraySpec(**common, common_slots=1), op, keep)
    free = schedule_layer(shape, ArraySpec(**common, common_slots=10 ** 6), op, keep)
    assert strict.cycles == lockstep
    assert free.cycles == max(per_unit)
    assert strict.calc_cycles == free.calc_cycles == sum(per_unit)
    assert free.useful_macs == int(keep.sum()) * 9 * 36 * 16


# --------------------------------------------------------------------------- with loads and saves

def test_single_step_timeline_by_hand_and_bound_from_the_inequality():
    # 2 PEs, one 1x1 block each, k = 3, 4x4 outputs, batch 1, bandwidth 0.5 byte/cycle:
    # common load 36 bytes (6x6 inputs) = 72 cycles, local 1 index + 9 weights = 20 cycles each,
    # calc 9 * 16 = 144 cycles, save 16 bytes = 32 cycles each.
    # read port: common 0-72, local u0 72-92, u1 92-112; calc u0 92-236, u1 112-256;
    # write port: u0 236-268, u1 268-300.
    shape = layer(2, 1, 4, 3)
    array = ArraySpec(n_pe=2, block_rows=1, block_cols=1, tile_h=4, tile_w=4, batch=1, bandwidth=0.5)
    result = schedule_layer(shape, array, "FP", dense(shape))
    assert result.cycles == 300
    assert result.compute_cycles == 144
    assert (result.common_load_cycles, result.local_load_cycles, result.save_cycles) == (72, 40, 64)
    assert (result.read_bytes, result.write_bytes) == (36 + 20, 32)
    assert result.calc_cycles == 288
    # Sec. 5.5: T_calc = 144 > T_common + T_local * N = 72 + 20 * 2 = 112
    assert result.sec55_compute_bound and result.bound == "compute"
    assert result.utilisation == pytest.approx(288 / (300 * 2))


@pytest.mark.parametrize("bandwidth,compute_bound", [(4, True), (1, True), (0.5, True), (0.4, True), (0.25, False),
                                                     (0.125, False)])
def test_bound_type_follows_the_sec55_inequality(bandwidth, compute_bound):
    shape = layer(2, 1, 4, 3)
    array = ArraySpec(n_pe=2, block_rows=1, block_cols=1, tile_h=4, tile_w=4, batch=1, bandwidth=bandwidth)
    result = schedule_layer(shape, array, "FP", dense(shape))
    t_common, t_local = math.ceil(36 / bandwidth), math.ceil(10 / bandwidth)
    assert (144 > t_common + 2 * t_local) == compute_bound
    assert result.sec55_compute_bound == compute_bound
    assert result.bound == ("compute" if compute_bound else "bandwidth")
    assert result.cycles >= max(144, t_common + 2 * t_local)
    assert (result.common_load_cycles, result.local_load_cycles) == (t_common, 2 * t_local)  # whole cycles


def test_transfers_take_whole_cycles_without_float_rounding():
    # one 1x1 kernel, 1x1 map, batch 3: common 3 bytes, local 2 bytes, save 3 bytes at 0.1 byte/cycle
    shape = layer(1, 1, 1, 1)
    array = ArraySpec(n_pe=1, block_rows=1, block_cols=1, tile_h=1, tile_w=1, batch=3, bandwidth=0.1)
    result = schedule_layer(shape, array, "FP", dense(shape))
    assert (result.common_load_cycles, result.local_load_cycles, result.save_cycles) == (30, 20, 30)
    assert result.cycles == 30 + 20 + 1 + 30


def test_bandwidth_bound_pipeline_by_hand():
    # 1 PE, three 1x1 blocks along the input channels, k = 1, 4x4 map, batch 1, 1 byte/cycle:
    # per step common 16 cycles, local 2, calc 16; T_calc 16 < 16 + 2 * 1: bandwidth-bound.
    # g0: common 0-16, local 16-18, calc 18-34
    # g1: common 18-34, local 34-36, calc 36-52
    # g2: common 36-52 (slot of g0 free at 34), local 52-54, calc 54-70; save 16 bytes 70-86
    shape = layer(1, 3, 4, 1)
    array = ArraySpec(n_pe=1, block_rows=1, block_cols=1, tile_h=4, tile_w=4, batch=1, bandwidth=1)
    result = schedule_layer(shape, array, "FP", dense(shape))
    assert result.cycles == 86
    assert result.compute_cycles == 48
    assert not result.sec55_compute_bound and result.bound == "bandwidth"
    assert result.utilisation == pytest.approx(48 / 86)
    assert (result.t_calc, result.t_load_common, result.t_load_local) == (16, 16, 2)


def test_weight_buffer_ping_pong_holds_back_the_next_local_loads():
    # 2 PEs, 16x1 blocks (16 output channels, 1 input channel), k = 3, 4x4 map, batch 1, 1 byte/cycle, common
    # buffer unlimited. A heavy block (16 kernels) is 2304 cycles of calc and 160 bytes of local load, a light
    # one (1 kernel) 144 cycles and 10 bytes; a common load is 36 bytes. Unit 0 is heavy at step 0, unit 1 at
    # step 2.
    # g0: common 0-36, local u0 36-196, u1 196-206; calc u0 196-2500, u1 206-350
    # g1: common 206-242, local u0 242-252, u1 252-262; calc u0 2500-2644, u1 350-494
    # g2: common 262-298; u0's second slot frees when its g0 calc ends: local u0 2500-2510, u1 (behind it on the
    #     port) 2510-2670; calc u0 2644-2788, u1 2670-4974; saves of 256 bytes u0 2788-3044, u1 4974-5230
    shape = layer(32, 3, 4, 3)
    keep = np.zeros((32, 3), dtype=bool)
    keep[0:16, 0] = True
    keep[0, 1:3] = True
    keep[16, 0:2] = True
    keep[16:32, 2] = True
    array = ArraySpec(n_pe=2, block_rows=16, block_cols=1, tile_h=4, tile_w=4, batch=1, bandwidth=1,
                      common_slots=10 ** 6)
    assert schedule_layer(shape, array, "FP", keep).cycles == 5230


def test_result_buffer_ping_pong_holds_back_the_third_result():
    # EB, 1 PE, 1 output x 2 input channels (only the first kernel kept), k = 3, 2x1 map cut into 1x1 tiles,
    # batch 3, 4 bytes/cycle. Items (tile, input column): (t0,c0) (t0,c1) (t1,c0) (t1,c1), one step each.
    # Kept kernel: calc 9 taps x 1 output position = 9, local 10 bytes = 3 cycles; common 3 bytes = 1 cycle;
    # every item saves 3x3 input positions x 3 lanes = 27 bytes = 7 cycles.
    # g0: common 0-1, local 1-4, calc 4-13, save 13-20
    # g1: common 4-5, calc 13-13 (empty block), save 20-27
    # g2: common 13-14 (a common slot frees with g0's calc), local 14-17, calc waits for g0's result slot
    #     (saved at 20): 20-29, save 29-36
    # g3: common 17-18, calc 29-29, save 36-43
    shape = LayerShape(name="x", in_channels=2, out_channels=1, height=2, width=1, kernel=3)
    array = ArraySpec(n_pe=1, block_rows=1, block_cols=1, tile_h=1, tile_w=1, batch=3, bandwidth=4)
    result = schedule_layer(shape, array, "EB", np.array([[True, False]]))
    assert result.cycles == 43
    assert result.save_cycles == 4 * 7 and result.common_load_cycles == 4 and result.local_load_cycles == 6


def test_common_load_is_shared_by_the_units_on_the_same_tile():
    # k = 3, 4x2 map cut into two 2x2 tiles (4x4 input positions each), batch 1, 1x1 blocks, 4 PEs in one pass.
    # Two output rows: units 0, 1 on tile 0 and units 2, 3 on tile 1 share one 16-byte load per tile; with one
    # output row and 4 tiles of 1x2 (3x4 inputs) every unit needs its own.
    two_rows = LayerShape(name="x", in_channels=1, out_channels=2, height=4, width=2, kernel=3)
    array = ArraySpec(n_pe=4, block_rows=1, block_cols=1, tile_h=2, tile_w=2, batch=1, bandwidth=1)
    result = schedule_layer(two_rows, array, "FP", dense(two_rows))
    assert result.passes == 1
    assert result.read_bytes == 2 * 16 + 4 * 10
    one_row = LayerShape(name="y", in_channels=1, out_channels=1, height=4, width=2, kernel=3)
    array = ArraySpec(n_pe=4, block_rows=1, block_cols=1, tile_h=1, tile_w=2, batch=1, bandwidth=1)
    result = schedule_layer(one_row, array, "FP", dense(one_row))
    assert result.read_bytes == 4 * 12 + 4 * 10


def test_wg_moves_weight_buffer_words_and_the_output_error():
    # WG, one 1x1 block, k = 3, 2x2 outputs, batch 2: local = 1 index + 3 * 9 buffer bytes + 1 * 4 * 2 error
    # bytes; common = 1 * 16 * 2 input bytes; save = 27 buffer bytes
    shape = layer(1, 1, 2, 3)
    array = ArraySpec(n_pe=1, block_rows=1, block_cols=1, tile_h=2, tile_w=2, batch=2, bandwidth=1)
    result = schedule_layer(shape, array, "WG", dense(shape))
    assert result.read_bytes == 1 + 27 + 8 + 32
    assert result.write_bytes == 27
    # common 0-32, local 32-68, calc 68-104 (9 taps x 4 positions), save 104-131
    assert result.cycles == 131


# --------------------------------------------------------------------------- sparsity and blocks

def test_block_nnz_counts_kernels_per_csb_block():
    rng = np.random.default_rng(3)
    keep = rng.random((19, 11)) < 0.4
    counts = block_nnz(keep, 8, 4)
    assert counts.shape == (3, 3)
    for r in range(3):
        for c in range(3):
            expected = sum(bool(keep[i, j]) for i in range(r * 8, min(19, r * 8 + 8))
                           for j in range(c * 4, min(11, c * 4 + 4)))
            assert counts[r, c] == expected


def test_random_keep_mask_keeps_the_exact_share_per_seed():
    shape = layer(64, 32, 4, 3)
    a, b, c = (random_keep_mask(shape, 0.4, seed) for seed in (1, 1, 2))
    assert a.shape == (64, 32) and a.dtype == bool
    assert int(a.sum()) == round(0.4 * 64 * 32)
    assert np.array_equal(a, b) and not np.array_equal(a, c)
    assert random_keep_mask(shape, 1.0, 0).all()


def test_utilisation_falls_with_sparser_blocks_and_rises_with_grouping():
    shape = layer(128, 128, 8, 3)
    result = {}
    for density in (0.2, 0.6):
        keep = random_keep_mask(shape, density, 0)
        for grouping in ("single", "2x2"):
            array = ArraySpec(n_pe=16, grouping=grouping, block_rows=8, block_cols=8, tile_h=8, tile_w=8)
            result[density, grouping] = schedule_layer(shape, array, "FP", keep).utilisation
    assert result[0.2, "single"] < result[0.6, "single"]
    assert result[0.2, "single"] < result[0.2, "2x2"]
    assert all(0 < u < 1 for u in result.values())


# --------------------------------------------------------------------------- bad input

@pytest.mark.parametrize("kwargs,match", [
    (dict(in_channels=0), "in_channels"), (dict(kernel=8), "kernel"), (dict(height=True), "height"),
    (dict(name=""), "name"), (dict(width=2.0), "width"),
])
def test_bad_layer_is_refused(kwargs, match):
    fields = dict(name="x", in_channels=4, out_channels=4, height=4, width=4, kernel=3) | kwargs
    with pytest.raises(ValueError, match=match):
        LayerShape(**fields)


@pytest.mark.parametrize("kwargs,match", [
    (dict(grouping="3x3"), "grouping"), (dict(n_pe=6, grouping="2x2"), "multiple of 4"),
    (dict(block_rows=17), "block_rows"), (dict(block_cols=0), "block_cols"), (dict(bandwidth=0), "bandwidth"),
    (dict(bandwidth=float("nan")), "bandwidth"), (dict(bandwidth="fast"), "bandwidth"), (dict(batch=17), "batch"),
    (dict(common_slots=0), "common_slots"), (dict(n_pe=0), "n_pe"), (dict(tile_h=0), "tile_h"),
])
def test_bad_array_is_refused(kwargs, match):
    with pytest.raises(ValueError, match=match):
        ArraySpec(**(dict(n_pe=8) | kwargs))


def test_descriptions_are_frozen_and_keyword_only():
    with pytest.raises(TypeError):
        ArraySpec(8)
    with pytest.raises(TypeError):
        LayerShape("x", 1, 1, 1, 1, 1)
    array = ArraySpec(n_pe=8)
    with pytest.raises(AttributeError):
        array.n_pe = 4


def test_bad_schedule_inputs_are_refused():
    shape = layer(4, 3, 4, 3)
    array = ArraySpec(n_pe=2)
    keep = dense(shape)
    with pytest.raises(ValueError, match="op"):
        schedule_layer(shape, array, "BP", keep)
    with pytest.raises(ValueError, match="shape"):
        schedule_layer(shape, array, "FP", keep.T)
    with pytest.raises(ValueError, match="bool"):
        schedule_layer(shape, array, "FP", keep.astype(int))
    with pytest.raises(ValueError, match="no kernel"):
        schedule_layer(shape, array, "FP", np.zeros_like(keep))
    with pytest.raises(ValueError, match="LayerShape"):
        schedule_layer("conv", array, "FP", keep)
    with pytest.raises(ValueError, match="ArraySpec"):
        schedule_layer(shape, {"n_pe": 2}, "FP", keep)
    for density in (0, 1.5, float("nan"), True):
        with pytest.raises(ValueError, match="density"):
            random_keep_mask(shape, density, 0)
    with pytest.raises(ValueError, match="seed"):
        random_keep_mask(shape, 0.5, -1)
    with pytest.raises(ValueError, match="keep"):
        block_nnz(np.ones((2, 2, 2), dtype=bool), 2, 2)
