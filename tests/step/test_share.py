"""A CSB step shared among copies of one csb IP: runs of lane chunks cut evenly, stored blocks dealt by cycles, and,
for the MLP's and the conv network's lists alike, the shared phases hold exactly the one-IP step's calls, a phase's
lists write disjoint words and read none another writes, and run phase by phase they leave the arena as the one-IP
lists do, record words aside."""

from __future__ import annotations

import numpy as np
import pytest

from codesign.contracts.calls import RAW, RECORD_WORDS, Block
from codesign.pe.csb import CsbSpec
from codesign.pe.csb.stream import FLAG_EW, EwOp, Op, header_word
from codesign.shell.calls import run_list_golden
from codesign.pe.csb import encode
from codesign.step.csb.conv_net import net_shapes
from codesign.step.csb.conv_step import net_arena, net_lists
from codesign.step.csb.lists import CsbStepScales, step_arena, step_lists
from codesign.step.csb.lists import draft_cycles
from codesign.step.share import balanced, placed, runs
from tests.step.csb.test_conv_step import PE, network_case
from tests.step.csb.test_list_time import LAYERS, SPEC, step_case


@pytest.mark.parametrize("count, copies", [(8, 2), (7, 3), (2, 5), (1, 1), (0, 2)])
def test_runs_cut_a_range_evenly_and_leave_none_empty(count, copies):
    parts = runs(count, copies)
    assert [i for part in parts for i in part] == list(range(count))
    assert len(parts) == min(count, copies) and all(len(part) for part in parts)
    assert max(map(len, parts), default=0) - min(map(len, parts), default=0) <= 1


def test_blocks_are_dealt_costliest_first_and_keep_their_order():
    spec = CsbSpec(block_rows=4, block_cols=4, batch=4)

    def group(nnz: int, tag: int) -> list:
        return [(header_word(Op.WG, nnz), (Block(offset=4 * tag, words=1, rows=1),), Block(), 0, RAW)]
    groups = [group(nnz, tag) for tag, nnz in enumerate((1, 16, 2, 15, 3))]
    lists = balanced(groups, 2, draft_cycles(spec))
    tags = [[item[1][0].offset // 4 for item in listed] for listed in lists]
    # a call costs nnz products, its header and its operand word: 18 + 4 + 3 against 17 + 5, in the given order
    assert tags == [[0, 1, 2], [3, 4]]
    assert balanced(groups[:1], 3, draft_cycles(spec)) == [groups[0]]  # no empty list


def test_a_phase_over_its_record_slots_is_refused():
    item = (header_word(Op.WG, 1), (Block(offset=0, words=1, rows=1),), Block(), 0, RAW)
    with pytest.raises(ValueError, match="3 calls in a phase, 2 record slots"):
        placed([[[item, item], [item]]], 2, PE, 4096, 2, 1 << 16)
    assert len(placed([[[item, item], [item]]], 1, PE, 4096, 3, 1 << 16)[0][0][1]) == 3


def test_a_phase_whose_lists_race_is_refused():
    """Drafted lists of one phase run side by side: one that reads what another writes is refused as it is placed,
    while on one IP (one list, in order) it is the list's own business."""
    first = (header_word(Op.WG, 1), (Block(offset=0, words=4, rows=1),), Block(offset=64, words=4, rows=1), 4, RAW)
    second = (header_word(Op.WG, 1), (Block(offset=64, words=4, rows=1),), Block(offset=128, words=4, rows=1), 4, RAW)
    with pytest.raises(ValueError, match="list 1 reads word 16, which list 0 of the same phase writes"):
        placed([[[first], [second]]], 2, PE, 4096, 4, 1 << 16)
    assert len(placed([[[first], [second]]], 1, PE, 4096, 4, 1 << 16)[0][0][1]) == 2


def assert_side_by_side(phases) -> None:
    """The lists of every phase write disjoint words (results and records) and read none another list writes."""
    for phase in phases:
        written = [np.concatenate([call.out.word_indices() for call in calls] +
                                  [call.record // 4 + np.arange(RECORD_WORDS) for call in calls]) for _, calls in phase]
        read = [np.concatenate([block.word_indices() for call in calls for block in call.segments])
                for _, calls in phase]
        for i, mine in enumerate(written):
            for j, theirs in enumerate(written):
                assert i == j or not np.intersect1d(mine, theirs).size
                assert i == j or not np.intersect1d(mine, read[j]).size


def run_phases(pe, spec, image, phases):
    """The golden arena after ``phases``, their lists one after the other."""
    for phase in phases:
        for _, calls in phase:
            image = run_list_golden(pe, spec, image, calls)
    return image


def _call_key(call):
    return call.header, call.segments, call.out, call.count, call.rounding


def _updates_apart(calls) -> tuple:
    """``(updates, rest)``: the calls of the stored blocks' WG, UPD and SHR, and the others."""
    def update(call) -> bool:
        op = call.header & 3
        return op == EwOp.SHR if call.header & FLAG_EW else op in (Op.WG, Op.UPD)
    return [call for call in calls if update(call)], [call for call in calls if not update(call)]


def _mlp_case(copies: int):
    csbs, image, one = step_case()
    arena = step_arena(SPEC, LAYERS, 6, csbs)
    scales = CsbStepScales(relu=(-3,), mask=(0, -5), upd=((2, False), (3, True)))
    return SPEC, image, one, step_lists(arena, 6, scales, 0, copies=copies), arena.records, arena.record_slots


def _conv_case(copies: int):
    spec, net, image, one = network_case()
    scales = CsbStepScales(relu=(-9, -8), mask=(0, -7, -6), upd=((3, False), (2, True), (0, False)))
    return spec, image, one, net_lists(net, 6, scales, 0, copies), net.records, net.record_slots


def _tiled_conv_case(copies: int):
    """Two stride-1 convs whose maps take four 2 x 2 tiles each, so the second's EB clears and loads its grid: the
    entry-less EBs read their own chunk's errors, which a list on another IP is not writing."""
    spec = CsbSpec(block_rows=4, block_cols=4, kernel=3, out_h=2, out_w=2, batch=4, max_stride=2)
    shapes = net_shapes(spec, (2, 4, 4), ((4, 1), (4, 1)), 5)
    rng = np.random.default_rng(1)
    structures = [encode(np.broadcast_to((rng.random((s.outputs, s.channels)) < 0.7)[:, :, None, None],
                                         (s.outputs, s.channels, s.kernel, s.kernel)).astype(np.int8), block=4)
                  for s in shapes]
    net = net_arena(spec, shapes, 8, structures)
    image = net.image.copy()
    for a, csb in zip(net.layers, structures):
        a.write_state(image, csb, rng.integers(-(1 << 23), 1 << 23, (csb.nnz, csb.kernel, csb.kernel)), 0)
    net.layers[0].write_input(image, rng.integers(-128, 128, (8, 2, 4, 4)))
    net.layers[-1].write_errors(image, rng.integers(-128, 128, (8, 5, 1, 1)))
    scales = CsbStepScales(relu=(-9, -8), mask=(0, -7, -6), upd=((3, False), (2, True), (0, False)))
    assert net.layers[1].tiles == (2, 2)
    return (spec, image, net_lists(net, 8, scales, 0), net_lists(net, 8, scales, 0, copies), net.records,
            net.record_slots)


CASES = {"mlp": (_mlp_case, 3), "conv": (_conv_case, 5), "tiled conv": (_tiled_conv_case, 5)}


@pytest.mark.parametrize("copies", [2, 3, 5])
@pytest.mark.parametrize("network", sorted(CASES))
def test_shared_phases_split_the_one_ip_step_and_write_disjoint_words(network, copies):
    case, phases = CASES[network]
    spec, image, one, shared, records, slots = case(copies)
    assert shared.copies == copies and len(shared.phases) == phases
    assert max(len(phase) for phase in shared.phases) == min(copies, max(len(phase) for phase in shared.phases))
    assert len(shared.phases[-1]) == copies  # the stored blocks dealt to every IP
    shared_calls = [call for phase in shared.phases for _, calls in phase for call in calls]
    one_updates, one_rest = _updates_apart(one.forward + one.backward)
    shared_updates, shared_rest = _updates_apart(shared_calls)
    assert sorted(map(_call_key, one_rest), key=repr) == sorted(map(_call_key, shared_rest), key=repr)
    if len(shared_updates) == len(one_updates):  # every block whole
        assert sorted(map(_call_key, one_updates), key=repr) == sorted(map(_call_key, shared_updates), key=repr)
    # else a block costlier than an even share of the phase is cut into entry ranges: more calls, the same words
    assert (network, copies) != ("conv", 5) or len(shared_updates) > len(one_updates)
    assert np.array_equal(*(np.unique(np.concatenate([call.out.word_indices() for call in calls]))
                            for calls in (one_updates, shared_updates)))
    assert_side_by_side(shared.phases)
    want, got = run_phases(PE, spec, image, one.phases), run_phases(PE, spec, image, shared.phases)
    kept = np.ones(got.size, bool)
    kept[records // 4:records // 4 + RECORD_WORDS * slots] = False
    assert np.array_equal(got[kept], want[kept]) and not np.array_equal(want[kept], image[kept])
    with pytest.raises(ValueError, match="not one list"):
        shared.forward if network != "mlp" else shared.backward
