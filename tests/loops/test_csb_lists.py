"""The CSB loop as call lists: equal to the golden loop in every state word and loss over a warm-up, the pruning
event and two fixed-point epochs (16-bit sums that saturate, a cosine rate whose power of two moves), step by step
with a shorter batch and a structure with empty block rows and columns, and what the host moves per step."""

from __future__ import annotations

import numpy as np
import pytest

from codesign.loops.common import HwTrainError
from codesign.loops.csb import CsbMlpTrainer, CsbTrainSetup
from codesign.loops.csb_lists import CsbListTrainer, upd_fields
from codesign.pe.csb import CsbSpec
from codesign.shell.list_runner import GoldenListShell
from codesign.train.data import synthetic_dataset

SMALL = CsbSpec(block_rows=4, block_cols=4, batch=3, acc_bits=16)  # 16-bit sums: saturation happens


def small_setup(spec=SMALL, **changes) -> CsbTrainSetup:
    fields = dict(spec=spec, layers=(64, 12, 7, 10), batch_size=20, epochs=3, warmup_epochs=1, lr=0.3,
                  schedule="cosine", seed=3, step_percent=20)
    fields.update(changes)
    return CsbTrainSetup(**fields)


def shell(spec=SMALL, copies: int = 1) -> GoldenListShell:
    return GoldenListShell({"csb": spec}, units={"csb": copies})


def assert_same_state(golden, lists) -> int:
    """Every buffer word and mask equal; returns how many buffer words were compared."""
    mine, theirs = golden.read_weights(), lists.read_weights()
    assert mine["phase"] == theirs["phase"] == "fixed" and mine["frac_bits"] == theirs["frac_bits"]
    compared = 0
    for a, b, m, n in zip(mine["buffers"], theirs["buffers"], mine["masks"], theirs["masks"]):
        np.testing.assert_array_equal(a, b)
        np.testing.assert_array_equal(m, n)
        compared += a.size
    return compared


def test_warmup_pruning_and_two_fixed_epochs_equal_the_golden_loop():
    data = synthetic_dataset(samples=150, seed=1, validation_fraction=0.2)  # 84 training rows: 4 steps an epoch
    setup = small_setup()
    golden, lists = CsbMlpTrainer(setup), CsbListTrainer(setup, shell())
    states = {"golden": [], "lists": []}
    golden.fit(data, progress=False, on_epoch=lambda row: states["golden"].append(golden.read_weights()))
    lists.fit(data, progress=False, on_epoch=lambda row: states["lists"].append(lists.read_weights()))
    assert [row["phase"] for row in lists.history] == ["warmup", "fixed", "fixed"]
    for row_g, row_l in zip(golden.history, lists.history):
        for key in ("epoch", "phase", "loss", "accuracy", "macs"):
            assert row_g[key] == row_l[key]
    assert golden.lr_exponents == lists.lr_exponents and len(set(lists.lr_exponents)) > 1  # the rate's power moves
    for mine, theirs in zip(states["golden"][1:], states["lists"][1:]):
        for a, b in zip(mine["buffers"], theirs["buffers"]):
            np.testing.assert_array_equal(a, b)
    assert assert_same_state(golden, lists) == 64 * 12 + 12 * 7 + 7 * 10
    moved = sum(int(np.sum(a != b)) for a, b in zip(states["lists"][1]["buffers"], states["lists"][2]["buffers"]))
    assert moved > 100  # the second fixed epoch changed the buffers: the comparison is not of untouched state
    assert any(mask.sum() < mask.size for mask in lists.masks)  # the search pruned
    assert lists.list_steps == 8 and lists.shell.lists == 16
    assert lists.inputs_staged == 6  # fit gives the next batch: every fixed step but an epoch's first took it


@pytest.mark.parametrize("bits, copies", [(64, 1), (128, 2)])
def test_a_wide_stream_build_equals_the_golden_loop(bits, copies):
    """On a 64- or 128-bit stream: the arena's every section in whole beats, every call taking all the parts the
    PE sends (docs/csb.md, "Wide streams"); on one IP and shared among two."""
    spec = CsbSpec(block_rows=4, block_cols=4, batch=4, acc_bits=16, stream_bits=bits)
    data = synthetic_dataset(samples=150, seed=1, validation_fraction=0.2)
    setup = small_setup(spec)
    golden, lists = CsbMlpTrainer(setup), CsbListTrainer(setup, shell(spec, copies))
    golden.fit(data, progress=False)
    lists.fit(data, progress=False)
    for row_g, row_l in zip(golden.history, lists.history):
        for key in ("epoch", "phase", "loss", "accuracy", "macs"):
            assert row_g[key] == row_l[key]
    assert assert_same_state(golden, lists) == 64 * 12 + 12 * 7 + 7 * 10
    assert lists.list_steps == 8 and golden.lr_exponents == lists.lr_exponents


def pruned_state(trainer: CsbMlpTrainer, rng) -> dict:
    """A fixed-point state whose masks leave whole block rows and columns empty, scales that need a left-shifted
    gradient (UPD's LEFT) in one layer and a right shift in another, and buffers near both 24-bit ends."""
    masks = [rng.random(shape) < 0.5 for shape in trainer.shapes]
    masks[0][4:8, :] = False  # an empty block row of layer 0: its z and layer 1's X tile stay 0
    masks[1][:, 8:12] = False  # an empty block column of layer 1: its dx and layer 0's DY tile stay 0
    masks[2][:, :4] = False
    buffers = [np.where(m, rng.integers(-(1 << 23), 1 << 23, m.shape), 0).astype(np.int32) for m in masks]
    buffers[1][masks[1]] = np.clip(buffers[1][masks[1]], -(1 << 22), 1 << 22)
    frac_bits = [{"activation": 5, "weight": 9, "error": 24}, {"activation": 6, "weight": 9, "error": 20},
                 {"activation": 6, "weight": 8, "error": 14}]
    return {"phase": "fixed", "buffers": buffers, "masks": masks, "frac_bits": frac_bits}


@pytest.mark.parametrize("copies", [1, 2, 3, 4])
def test_step_by_step_with_a_shorter_batch_empty_blocks_and_what_the_host_moves(copies):
    """On one csb IP and shared among two, three or four (the explorer offers four): the forward's and the errors'
    lane chunks in runs (a batch of one leaves IPs idle), the blocks' gradients and updates dealt out."""
    setup = small_setup(schedule="constant", lr=0.25)
    runner = shell(copies=copies)
    golden, lists = CsbMlpTrainer(setup), CsbListTrainer(setup, runner)
    rng = np.random.default_rng(0)
    state = pruned_state(golden, rng)
    golden.load_weights(state)
    lists.load_weights(state)
    used, upd = upd_fields(lists.frac_bits, 2)
    assert {left for _, left in upd} == {True, False}  # both UPD kinds run
    saturated = 0
    for n in (20, 7, 20, 1):
        x, y = rng.random((n, 64)) * 4, rng.integers(0, 10, n)
        pre = golden._fixed_forward(golden._batch(x)[0])[1]
        saturated += sum(int(np.sum(np.abs(z) >= (1 << 15) - 1)) for z in pre)
        before = (runner.flushed, runner.read, runner.lists)
        assert golden.train_step(x, y) == lists.train_step(x, y)
        chunks = -(-n // SMALL.batch)  # 16 input tiles of 4 x 3 codes (3 words), 3 of the 10 classes' errors
        lists_run = 2 if copies == 1 else 2 * min(chunks, copies) + copies
        assert (runner.flushed - before[0], runner.read - before[1], runner.lists - before[2]) == \
            (16 * 3 * chunks + 3 * 3 * chunks, (4 + 4 + 2) * 3 * chunks, lists_run)
        assert lists.buffer_phase == lists.list_steps % 2
    assert saturated > 0  # 16-bit sums clip: the chains keep the golden order of additions
    assert_same_state(golden, lists)
    for a, b in zip(golden.read_weights()["buffers"], state["buffers"]):
        assert np.sum(a != b) > 0


class InPlaceShell(GoldenListShell):
    """The golden shell writing each phase's results into the device buffer it was given, as a board's shell runs
    its IPs over one buffer (the golden shell hands back a new array a phase)."""

    def run_phase(self, phase, arena, beside=None):
        arena[...] = super().run_phase(phase, arena, beside)
        return arena


@pytest.mark.parametrize("classes, copies, in_place, loss", [(3, 1, True, True), (4, 2, False, True),
                                                            (8, 2, True, True), (4, 1, True, False)])
def test_loss_gradient_on_the_pe_or_the_host_equals_the_loop(classes, copies, in_place, loss):
    """On a build with the LOSS unit whose classes fit a tile (3 of 4 rows, or all 4), the backward list starts with
    LOSS per lane chunk and the host computes nothing between the lists; with more classes than a tile (8), or
    without the unit, the host computes the same codes. Batches that fill a chunk in part give lanes without a
    sample (codes 0): every loss and state word equals the loop's."""
    spec = CsbSpec(block_rows=4, block_cols=4, batch=3, acc_bits=16, loss=loss)
    setup = small_setup(spec=spec, layers=(64, 12, 7, classes), batch_size=18, schedule="constant", lr=0.25)
    runner = (InPlaceShell if in_place else GoldenListShell)({"csb": spec}, units={"csb": copies})
    golden, lists = CsbMlpTrainer(setup), CsbListTrainer(setup, runner)
    rng = np.random.default_rng(classes)
    state = pruned_state(golden, rng)
    golden.load_weights(state)
    lists.load_weights(state)
    on_pe = loss and classes <= 4
    assert bool(lists.layout.loss_in) == on_pe
    for n in (18, 9, 18, 7, 1, 16):
        x, y = rng.random((n, 64)) * 4, rng.integers(0, classes, n)
        assert golden.train_step(x, y) == lists.train_step(x, y)
        calls = [call for phase in lists.lists(n, lists._step_fields(lists.step)[1]).backward_phases
                 for _, calls in phase for call in calls]
        assert sum(call.header & 0x23 == 0x23 for call in calls if call.header is not None) == \
            (-(-n // 3) if on_pe else 0)  # a LOSS (EW, op 3) a lane chunk
    assert_same_state(golden, lists)


def staging_pair(fails_after_beside, *, seed: int):
    """A shell of two IPs that fails once when armed, the loop and a list trainer on it from one pruned state, and
    the generator that drew it."""
    setup = small_setup(schedule="constant", lr=0.25)
    runner = fails_after_beside(shell(copies=2))
    golden, lists = CsbMlpTrainer(setup), CsbListTrainer(setup, runner)
    rng = np.random.default_rng(seed)
    state = pruned_state(golden, rng)
    golden.load_weights(state)
    lists.load_weights(state)
    return runner, golden, lists, rng


def test_the_next_batch_written_beside_the_lists_is_taken_only_where_it_is_the_batch(fails_after_beside,
                                                                                     unconvertible):
    """Given ``next_x``, a step writes its codes into the other phase's input tiles beside its last lists (the
    golden shell runs that work before the phase's lists, so a list that read those tiles would differ from the
    loop); the next step takes them only where its batch is that one value for value in the phase they were
    written for. A batch changed in place, another one, a step that failed after staging, and next batches that
    fail the check are taken afresh or refused as without staging."""
    runner, golden, lists, rng = staging_pair(fails_after_beside, seed=5)
    x = [rng.random((20, 64)) * 4 for _ in range(4)]
    y = [rng.integers(0, 10, 20) for _ in range(4)]
    bad = x[3].copy()
    bad[1, 2] = np.nan

    def step(index, given, next_x, staged):
        assert golden.train_step(given, y[index][:len(given)]) == \
            lists.train_step(given, y[index][:len(given)], next_x=next_x)
        assert lists.inputs_staged == staged
    step(0, x[0], x[1], 0)
    assert list(lists.beside_seconds) == [(0, 2)]  # beside the last of three phases: WG, UPD, SHR
    step(1, x[1], x[2], 1)  # taken
    x[2][0, 0] += 1.0
    step(2, x[2], x[3][:7], 1)  # changed in place after staging: taken afresh
    step(3, x[3][:7], np.zeros((3, 63)), 2)  # a shorter batch, taken; a next batch of 63 features stages nothing
    step(0, x[0], x[1], 2)
    step(3, x[3], bad, 2)  # another batch than the staged one
    with pytest.raises(HwTrainError, match="1 non-finite values"):  # a NaN batch stages nothing; its step says why
        lists.train_step(bad, y[3])
    step(0, x[0], np.zeros((21, 64)), 2)  # more samples than the arena holds: nothing staged
    step(1, x[1], unconvertible, 2)  # its conversion fails: nothing staged, this step unharmed
    runner.armed = True
    with pytest.raises(HwTrainError, match="refused"):  # staged x[2] for the next phase, then failed: the
        lists.train_step(x[1], y[1], next_x=x[2])  # next step runs this phase again, so it does not take x[2]
    step(2, x[2], None, 2)
    assert lists.list_steps == 9
    assert_same_state(golden, lists)


@pytest.mark.parametrize("bad", ["non-finite", "label", "samples", "shell"])
def test_a_batch_checked_beside_a_staged_forward_that_fails_moves_no_state(fails_after_beside, bad):
    """Where a batch was staged, the step runs its forward on those codes and checks the batch beside it. A batch
    that then fails the check (or a forward the shell fails) raises once the phase is done, with no state word,
    phase or step count moved; the next step writes its codes afresh and equals the loop."""
    runner, golden, lists, rng = staging_pair(fails_after_beside, seed=8)
    x, y = rng.random((20, 64)) * 4, rng.integers(0, 10, 20)
    assert golden.train_step(x, y) == lists.train_step(x, y, next_x=x)
    given_x, given_y = x.copy(), y.copy()
    if bad == "non-finite":
        given_x[4, 5] = np.inf
    elif bad == "label":
        given_y[3] = 10
    elif bad == "samples":
        given_x, given_y = np.zeros((21, 64)), np.zeros(21, dtype=int)
    else:
        runner.armed = True
    lists_run = runner.lists
    with pytest.raises(HwTrainError, match={"non-finite": "1 non-finite", "label": "classes in", "samples": "holds 20",
                                            "shell": "refused"}[bad]):
        lists.train_step(given_x, given_y)
    assert runner.lists > lists_run  # the forward ran on the staged codes before the check answered
    assert (lists.step, lists.list_steps, lists.buffer_phase, lists.inputs_staged) == (1, 1, 1, 0)
    assert_same_state(golden, lists)
    assert golden.train_step(x, y) == lists.train_step(x, y)
    assert lists.inputs_staged == 0
    assert_same_state(golden, lists)


def test_bad_shells_specs_and_batches_are_refused():
    with pytest.raises(HwTrainError, match="build"):
        CsbListTrainer(small_setup(), shell(CsbSpec(block_rows=4, block_cols=4, batch=2, acc_bits=16)))
    with pytest.raises(HwTrainError, match="square blocks"):
        spec = CsbSpec(block_rows=4, block_cols=8, batch=3)
        CsbListTrainer(small_setup(spec), shell(spec))
    with pytest.raises(HwTrainError, match="lanes"):
        spec = CsbSpec(block_rows=4, block_cols=4, batch=8)
        CsbListTrainer(small_setup(spec), shell(spec))
    lists = CsbListTrainer(small_setup(), shell())
    lists.load_weights(pruned_state(lists, np.random.default_rng(2)))
    with pytest.raises(HwTrainError, match="holds 20"):
        lists.train_step(np.zeros((21, 64)), np.zeros(21, dtype=int))
    x = np.zeros((4, 64))
    x[3, 63] = -np.inf
    with pytest.raises(HwTrainError, match="1 non-finite values"):
        lists.train_step(x, np.zeros(4, dtype=int))
    with pytest.raises(HwTrainError, match=r"classes in 0\.\.9"):
        lists.train_step(np.zeros((4, 64)), np.array([0, 1, 2, 10]))
    assert lists.step == 0 and lists.buffer_phase == 0 and lists.shell.lists == 0


@pytest.mark.parametrize("fracs, upd", [
    ((0, 20, 0), (31, True)),  # s = 0 + 0 + 2 - 36 = -34: the loop clips to 32 bits past 31, LEFT by 31 does the same
    ((7, 0, 14), (7, False)),  # s = 7 + 14 + 2 - 16 = 7: a right shift
    ((30, 0, 30), (31, False)),  # s = 30 + 30 + 2 - 16 = 46 is capped at 31 (the rate's exponent becomes -13)
])
def test_upd_shift_edges_equal_the_loop(fracs, upd):
    setup = small_setup(schedule="constant", lr=0.25)
    golden, lists = CsbMlpTrainer(setup), CsbListTrainer(setup, shell())
    state = pruned_state(golden, np.random.default_rng(3))
    activation, weight, error = fracs
    state["frac_bits"][0] = {"activation": activation, "weight": weight, "error": error}
    golden.load_weights(state)
    lists.load_weights(state)
    assert upd_fields(lists.frac_bits, 2)[1][0] == upd
    rng = np.random.default_rng(4)
    for _ in range(2):
        x, y = rng.random((20, 64)) * 4, rng.integers(0, 10, 20)
        assert golden.train_step(x, y) == lists.train_step(x, y)
    assert_same_state(golden, lists)
    assert golden.lr_exponents == lists.lr_exponents
