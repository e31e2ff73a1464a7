"""A conv network's step lists: SELECT pieces cover a map within the PE's element count, the head's input is the
last map flattened channel-major, and the C++ and RTL shells run a whole step's lists as the golden lists do, the
RTL in exactly the modelled cycles."""

from __future__ import annotations

import shutil

import numpy as np
import pytest

from codesign.pe import get_pe
from codesign.pe.csb import CsbSpec, encode
from codesign.shell.calls import ListCase, run_list_golden
from codesign.shell.ip import held_by_default
from codesign.step.csb.conv_net import net_shapes, resnet_shapes
from codesign.step.csb.conv_step import MapView, _pieces, net_arena, net_lists, net_step_scales, write_identities
from codesign.step.csb.lists import CsbStepScales
from codesign.step.list_cycles import list_cycles

PE = get_pe("csb")
needs_icarus = pytest.mark.skipif(shutil.which("iverilog") is None, reason="Icarus Verilog is not on PATH")


@pytest.mark.parametrize("dims, row, cap", [((5, 4), 32, 511), ((3, 8), 128, 511), ((2, 7), 512, 511),
                                            ((4, 1), 16, 16)])
def test_select_pieces_cover_the_map_each_within_one_select(dims, row, cap):
    if row > cap:
        with pytest.raises(ValueError, match="more than one SELECT"):
            list(_pieces(*dims, row, cap))
        return
    covered = np.zeros(dims, int)
    for c, nc, r, nr in _pieces(*dims, row, cap):
        assert nc * nr * row <= cap
        covered[c:c + nc, r:r + nr] += 1
    assert (covered == 1).all()


def test_a_flattened_view_puts_each_position_in_its_own_channel():
    view = MapView(base=64, channel_bytes=6 * 40, row_bytes=3 * 40, position_bytes=40, lane_bytes=8, width=3)
    block = view.block(1, 2, 0, 2)
    assert block.row_offsets().tolist() == [64 + 40 * f for f in range(6, 18)]  # features 6..17 = channels 1, 2
    assert block.words == 2


def network_case(seed: int = 0, n: int = 6, relu=(-9, -8), packed: bool = False, stream_bits: int = 32):
    """A two-conv network (the second at stride 2) and its head on a small PE (``packed``: two products a DSP
    slice; ``stream_bits`` 64: 8 lanes, a position's codes a beat), a random kept structure, state, batch and
    logits' gradient, and one step's lists (``relu``: the rounding stage's shifts after the convs)."""
    rng = np.random.default_rng(seed)
    spec = CsbSpec(block_rows=4, block_cols=4, kernel=3, out_h=2, out_w=2, batch=4 * stream_bits // 32,
                   max_stride=2, packed=packed, stream_bits=stream_bits)
    shapes = net_shapes(spec, (2, 4, 4), ((4, 1), (6, 2)), 5)
    structures, buffers = [], []
    for shape in shapes:
        keep = rng.random((shape.outputs, shape.channels)) < 0.6
        k = shape.kernel  # the convs' 3, the head's 1 (K1)
        csb = encode(np.broadcast_to(keep[:, :, None, None], (*keep.shape, k, k)).astype(np.int8), block=4)
        structures.append(csb)
        buffers.append(rng.integers(-(1 << 23), 1 << 23, (csb.nnz, k, k)))
    net = net_arena(spec, shapes, n, structures)
    image = net.image.copy()
    for a, csb, words in zip(net.layers, structures, buffers):
        a.write_state(image, csb, words, 0)
    net.layers[0].write_input(image, rng.integers(-128, 128, (n, 2, 4, 4)))
    net.layers[-1].write_errors(image, rng.integers(-128, 128, (n, 5, 1, 1)))
    scales = CsbStepScales(relu=tuple(relu), mask=(0, -7, -6), upd=((3, False), (2, True), (0, False)))
    return spec, net, image, net_lists(net, n, scales, 0)


def residual_case(seed: int = 0, n: int = 6):
    """A stem, an identity block and a stride-2 projection block with a head on a small PE: random kept structures
    (some block rows and columns empty), state, batch and logits' gradient, the identities' constant codes, and one
    step's lists."""
    rng = np.random.default_rng(seed)
    spec = CsbSpec(block_rows=4, block_cols=4, kernel=3, out_h=2, out_w=2, batch=4, max_stride=2)
    shapes, blocks = resnet_shapes(spec, (2, 4, 4), ((8, 1),), ((8, 1), (6, 2)), 5)
    structures, buffers = [], []
    for index, shape in enumerate(shapes):
        keep = rng.random((shape.outputs, shape.channels)) < 0.6
        if index in (1, 3):  # each block's conv1 without its first block column: its shortcut's EB starts those
            keep[:, :4] = False
        if index in (2, 5):  # the identity's conv2 and the projection without their second block row
            keep[4:] = False
        if index == 4:  # the projection block's conv2 without its first: the projection's FP starts those sums
            keep[:4] = False
        k = shape.kernel
        csb = encode(np.broadcast_to(keep[:, :, None, None], (*keep.shape, k, k)).astype(np.int8), block=4)
        structures.append(csb)
        buffers.append(rng.integers(-(1 << 23), 1 << 23, (csb.nnz, k, k)))
    net = net_arena(spec, shapes, n, structures, blocks)
    image = net.image.copy()
    for a, csb, words in zip(net.layers, structures, buffers):
        a.write_state(image, csb, words, 0)
    fracs = [{"activation": 4, "weight": 6 + (i == 5), "error": 8} for i in range(len(shapes))]
    fracs[4]["activation"] = 5  # the projection block's: conv2's sums at 6 + 5 = the projection's 7 + 4
    fracs[3]["error"] = 9  # and conv1's EB sums at 6 + 9 = the projection's 7 + 8
    write_identities(net, image, fracs)
    net.layers[0].write_input(image, rng.integers(-128, 128, (n, 2, 4, 4)))
    net.layers[-1].write_errors(image, rng.integers(-128, 128, (n, 5, 1, 1)))
    scales = net_step_scales(fracs, [(3, False), (2, True), (0, False), (1, False), (2, False), (0, True), (1, True)],
                             blocks)
    return spec, net, image, net_lists(net, n, scales, 0)


def test_a_layer_pruned_to_no_kernel_is_placed_and_its_sums_stay_zero():
    spec = CsbSpec(block_rows=4, block_cols=4, kernel=3, out_h=2, out_w=2, batch=4, max_stride=2)
    shapes = net_shapes(spec, (2, 4, 4), ((4, 1),), 3)
    structures = [encode(np.zeros((4, 2, 3, 3), np.int8), block=4), encode(np.ones((3, 64, 1, 1), np.int8), block=4)]
    net = net_arena(spec, shapes, 4, structures)
    image = net.image.copy()
    net.layers[0].write_state(image, structures[0], np.zeros((0, 3, 3), np.int64), 0)
    net.layers[1].write_state(image, structures[1], np.full((structures[1].nnz, 1, 1), 1 << 16), 0)
    net.layers[0].write_input(image, np.ones((4, 2, 4, 4), np.int64))
    lists = net_lists(net, 4, CsbStepScales(relu=(0,), mask=(0, 0), upd=((0, False),) * 2), 0)
    after = run_list_golden(PE, spec, image, lists.forward)
    assert not net.layers[0].read_sums(after, 4).any() and not net.layers[1].read_sums(after, 4).any()


def test_the_head_reads_the_last_map_flattened_and_the_update_writes_the_other_phase():
    """At shift 0 the ReLU's codes are the sums clipped to [0, 127]: feature ``c * h * w + y * w + x`` of the head's
    1 x 1 map holds channel ``c`` at ``(y, x)`` of the last conv's map."""
    spec, net, image, lists = network_case(relu=(0, 0))
    forward = run_list_golden(PE, spec, image, lists.forward)
    head, last = net.layers[-1], net.layers[-2]
    grid = head._map_view(forward, head.x[0], head._grid_dims(), np.int8)
    features = grid[:head.shape.channels, head.shape.pad, head.shape.pad, :].astype(np.int64)  # (24, 4 lanes)
    want = np.clip(last.read_sums(forward, 6), 0, 127).reshape(6, -1).T
    assert np.array_equal(features, want[:, :spec.batch]) and 0 < np.count_nonzero(want) < want.size
    # the two lane chunks folded onto one 2 x 2 map run under K1: the second at position (0, 1), its lanes past
    # the sixth sample's whatever the last conv's ReLU gave them, the positions no chunk takes 0
    assert head.fold == 2 and head.k1 and (head.shape.kernel, head.shape.stride, head.shape.pad) == (1, 1, 0)
    assert len(head.x) == 1 and head.grid == (2, 2)
    second = grid[:head.shape.channels, 0, 1, :2].astype(np.int64)
    assert np.array_equal(second, want[:, spec.batch:])
    assert not grid[:, 1].any()
    after = run_list_golden(PE, spec, forward, lists.backward)
    for a in net.layers:
        assert not np.array_equal(a.read_buffer(after, 1), a.read_buffer(image, 1))  # UPD wrote phase 1


def _run(tmp_path, level: str, packed: bool = False, stream_bits: int = 32, residual: bool = False) -> list[int]:
    """The step's two lists at ``level`` against the golden lists; at RTL, each list's busy cycles (the model's)."""
    from codesign.shell.list_sim import run_list_csim, run_list_rtl
    from codesign.shell.ip import render_accel_project

    spec, net, image, lists = residual_case() if residual else network_case(packed=packed, stream_bits=stream_bits)
    busy = []
    if level == "csim":
        render_accel_project(PE, spec, "csb_0", None, tmp_path / "hls")
    for part, calls in (("forward", lists.forward), ("backward", lists.backward)):
        case = ListCase(calls=calls, arena=image, expected=run_list_golden(PE, spec, image, calls))
        if level == "csim":
            result = run_list_csim(tmp_path / "hls", case, build_dir=tmp_path / f"build-{part}")
        else:
            result = run_list_rtl(PE, spec, case, tmp_path / part, held_sums=held_by_default(PE),
                                  timeout_cycles=4_000_000)
            model = list_cycles(PE, spec, calls, image)
            print(f"\n[csb conv step {part}] {len(calls)} calls, model {model.total}, RTL busy {result.busy_cycles}")
            assert model.total == result.busy_cycles
            busy.append(result.busy_cycles)
        assert result.passed, result.first_mismatches
        image = case.expected
    return busy


def test_csim_runs_a_network_step_as_the_golden_lists(tmp_path):
    _run(tmp_path, "csim")


@needs_icarus
def test_rtl_runs_a_network_step_bit_exact_in_the_modelled_cycles(tmp_path):  # 12 s
    _run(tmp_path, "rtl")


@pytest.mark.slow
def test_csim_runs_a_residual_network_step_as_the_golden_lists(tmp_path):  # 15 s
    _run(tmp_path, "csim", residual=True)


@needs_icarus
@pytest.mark.slow
def test_rtl_runs_a_residual_network_step_bit_exact_in_the_modelled_cycles(tmp_path):  # 45 s
    """Each shortcut's FP onto its block's conv2 sums and EB onto its conv1's (an identity's constant codes, a
    stride-2 projection under K1), where a row or column of the other layer is empty and where it is not."""
    _run(tmp_path, "rtl", residual=True)


def test_csim_runs_a_network_step_on_a_64_bit_stream_as_the_golden_lists(tmp_path):
    _run(tmp_path, "csim", stream_bits=64)


@needs_icarus
def test_rtl_runs_a_network_step_on_a_64_bit_stream_bit_exact_in_the_modelled_cycles(tmp_path):
    _run(tmp_path, "rtl", stream_bits=64)


@needs_icarus
def test_rtl_runs_a_packed_network_step_on_a_64_bit_stream_bit_exact_in_the_modelled_cycles(tmp_path):
    """The build that carries the conv example's best operations per DSP slice: two products a slice, a beat of
    two parts a cycle."""
    _run(tmp_path, "rtl", packed=True, stream_bits=64)


def test_csim_runs_a_packed_network_step_as_the_golden_lists(tmp_path):
    _run(tmp_path, "csim", packed=True)


@needs_icarus
def test_rtl_runs_a_packed_network_step_bit_exact_in_the_modelled_cycles(tmp_path):
    """Two products a DSP slice: the same words in the model's cycles (checked in ``_run``); the forward (FP,
    RELU) takes the unpacked build's modelled cycles, and the backward its cycles plus one per WG step (each takes
    two cycles), the unpacked WG calls' compute cycles."""
    from codesign.pe.csb.cycles import FLAG_EW, FLAG_K1, OP_WG, compute_cycles

    spec, _, image, lists = network_case()
    after_forward = run_list_golden(PE, spec, image, lists.forward)
    plain = [list_cycles(PE, spec, lists.forward, image).total,
             list_cycles(PE, spec, lists.backward, after_forward).total]
    wg_steps = sum(compute_cycles(spec.run_as(kernel_one=bool(call.header & FLAG_K1)), op=OP_WG,
                                  nnz=(call.header >> 16) & 0x1FF)
                   for call in lists.backward if call.header & 3 == OP_WG and not call.header & FLAG_EW)
    packed = _run(tmp_path, "rtl", packed=True)
    assert wg_steps > 0 and packed == [plain[0], plain[1] + wg_steps]
