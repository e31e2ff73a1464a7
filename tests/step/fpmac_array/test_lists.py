"""The FB-float step's call lists: the fast golden path equals the reference path over the whole arena, every
call is accepted, the calls and products of a step, and an update that never writes the state it reads."""

from __future__ import annotations

import numpy as np
import pytest

from codesign.contracts.calls import RECORD, RECORD_DONE, Block
from codesign.pe import get_pe
from codesign.pe.fpmac_array.contract import Header
from codesign.pe.fpmac_array.spec import FpmacArraySpec
from codesign.pe.fpmac_array.vector import OP_SGD, VectorHeader, is_vector
from codesign.shell.calls import run_list_golden
from codesign.step.fpmac_array.arena import region
from codesign.step.fpmac_array.lists import gemm_products, one_word, step_arena, step_lists

SPEC = FpmacArraySpec(exp_bits=5, max_fb=7, max_m=4, max_n=3, max_k=5)  # tile 3: every contraction chained
PE = get_pe("fpmac_array")


def _filled(arena, rng, n, fb):
    """The arena with random state, a batch, a loss gradient and SGD scalars as container words at ``fb``."""
    image = arena.image.copy()
    low = np.uint64((1 << (SPEC.max_fb - fb)) - 1)

    def words(shape):  # values of magnitude about 2^-3 .. 2^3, either sign, at fb
        exponent = rng.integers(12, 19, shape).astype(np.uint64) << np.uint64(SPEC.max_fb)
        fraction = rng.integers(0, 1 << SPEC.max_fb, shape).astype(np.uint64) & ~low
        return rng.integers(0, 2, shape).astype(np.uint64) << np.uint64(SPEC.width - 1) | exponent | fraction

    shapes = list(zip(arena.layers[:-1], arena.layers[1:]))
    weights = [words(s) for s in shapes]
    biases = [words((1, s[1])) for s in shapes]
    arena.write_params(image, 0, weights, biases, [words(w.shape) for w in weights + biases])
    arena.a[0].write(image, words((n, arena.layers[0])))
    arena.dz[-1].write(image, words((n, arena.layers[-1])))
    arena.write_scalars(image, [int(w) for w in words(3)])
    return image


@pytest.mark.parametrize("n", [7, 5])
def test_the_fast_golden_lists_equal_the_reference_lists_over_the_whole_arena(n):
    arena = step_arena(SPEC, (7, 5, 4), 7)
    lists = step_lists(arena, n, 4, 0)
    image = _filled(arena, np.random.default_rng(n), n, 4)
    for calls in (lists.forward, lists.backward):
        fast = run_list_golden(PE, SPEC, image, calls, fast=True)
        np.testing.assert_array_equal(fast, run_list_golden(PE, SPEC, image, calls))
        for call in calls:
            record = fast[call.record // 4:call.record // 4 + 8]
            assert record[RECORD["status"]] == 0 and record[RECORD["done"]] == RECORD_DONE
        image = fast
    assert not np.array_equal(arena.read_params(image, 1)["weights"][0], arena.read_params(image, 0)["weights"][0])


def test_a_steps_calls_and_products():
    layers, batch = (64, 64, 32, 10), 64
    arena = step_arena(FpmacArraySpec(exp_bits=8, max_fb=9), layers, batch)
    lists = step_lists(arena, batch, 6, 0)
    # forward: 2 row tiles x (2 output tiles x 3 calls + 1 x 3 + 1 x 2): GEMM chains, the bias row first, the
    # hidden layers' chains ending in the PE's ReLU (no element-wise ReLU call)
    assert (len(lists.forward), len(lists.backward), arena.record_slots) == (22, 45, 45)
    assert not any(is_vector(c.header) for c in lists.forward)
    relu = [Header.parse(c.header).relu for c in lists.forward]
    assert sum(relu) == 2 * (2 + 1) and not any(relu[-4:])  # every hidden output tile once, never the logits
    pairs = list(zip(layers[:-1], layers[1:]))
    forward = sum(batch * (i + 1) * o for i, o in pairs)  # the bias row is a product of 1.0
    gradients = sum((i + 1) * batch * o for i, o in pairs) + sum(batch * o * i for i, o in pairs[1:])
    assert lists.macs == forward + gradients
    assert all(Header.parse(c.header).fb == 6 for c in lists.forward if not is_vector(c.header))
    sgd = [c for c in lists.backward if is_vector(c.header) and VectorHeader.parse(c.header).op == OP_SGD]
    assert sum(VectorHeader.parse(c.header).elements for c in sgd) == sum((i + 1) * o for i, o in pairs)
    shorter = step_lists(arena, 20, 6, 1)
    assert shorter.macs < lists.macs and len(shorter.forward) == 11


@pytest.mark.parametrize("phase", [0, 1])
def test_no_call_writes_the_state_its_phase_reads(phase):
    arena = step_arena(SPEC, (7, 5, 4), 7)
    lists = step_lists(arena, 7, 4, phase)
    state = [Block(offset=block.offset + arena.base(region(phase, name)), words=block.total_words, rows=1)
             for tiles in arena.params for name in ("p", "v")
             for i in range(len(tiles.row_spans)) for j in range(len(tiles.col_spans))
             for block in (tiles.tile(i, j),)]
    for call in lists.forward + lists.backward:
        assert not any(call.out.overlaps(block) for block in state)
    updated = [c.out for c in lists.backward if is_vector(c.header) and VectorHeader.parse(c.header).op == OP_SGD]
    other = arena.base(region(1 - phase, "p"))
    assert all(other <= out.offset - arena.params[0].offsets[0][0] < other + arena.region_bytes for out in updated)


@pytest.mark.parametrize("copies", [2, 3])
def test_a_step_shared_among_copies_leaves_the_one_ip_state(copies):
    """On copies the forward and the input gradients go by runs of row tiles, each IP's chains keeping their
    partial sums in its own two buffers (the parameter tiles' gaps are every row tile's), and the gradients and
    updates by parameter column (a column's chains share dz's gaps): a phase's lists write disjoint words and read
    none another writes, and run phase by phase they leave the new state, activations, logits and gradients of the
    one-IP lists."""
    from tests.step.test_share import assert_side_by_side, run_phases

    arena = step_arena(SPEC, (7, 5, 4), 7, copies)
    image = _filled(arena, np.random.default_rng(copies), 7, 4)
    one, shared = step_lists(arena, 7, 4, 0), step_lists(arena, 7, 4, 0, copies)
    # 3 row tiles; 2 parameter columns a layer
    assert [len(phase) for phase in shared.phases] == [min(copies, 3)] * 2 + [min(copies, 4)]
    assert_side_by_side(shared.phases)
    want, got = run_phases(PE, SPEC, image, one.phases), run_phases(PE, SPEC, image, shared.phases)
    for layer in range(len(arena.params)):  # the gaps and the partial-sum buffers aside
        tiles = [arena.a[layer], arena.dz[layer]] + ([arena.dx[layer]] if layer else [])
        for start, words in (r for t in tiles + [arena.logits] for r in t.ranges(7)):
            np.testing.assert_array_equal(got[start:start + words], want[start:start + words])
    new = arena.read_params(got, 1), arena.read_params(want, 1)
    for key in new[0]:
        for mine, theirs in zip(new[0][key], new[1][key]):
            np.testing.assert_array_equal(mine, theirs)
    assert gemm_products(one.forward) + gemm_products(one.backward) == shared.macs
    with pytest.raises(ValueError, match="partial sums for 0 IPs"):
        step_lists(step_arena(SPEC, (7, 5, 4), 7), 7, 4, 0, copies)


def test_the_one_word_and_a_bad_phase():
    assert one_word(SPEC) == 15 << 7  # E=5: bias 15, a zero fraction
    assert one_word(FpmacArraySpec(exp_bits=8, max_fb=23)) == 0x3F80_0000  # float32's 1.0
    with pytest.raises(ValueError, match="phase"):
        step_lists(step_arena(SPEC, (3, 2), 2), 2, 4, 2)
