"""The FB-float loop as call lists: equal to the golden loop in every state word and loss over two epochs with an
FB change, step by step with a shorter batch, what the host moves per step, and a -0 bias that changes nothing."""

from __future__ import annotations

import numpy as np
import pytest

from codesign.design.families.fpmac_array import fb_setup
from codesign.loops.common import HwTrainError
from codesign.loops.fb import FbMlpTrainer
from codesign.loops.fb_lists import FbListTrainer
from codesign.pe.fpmac_array import FpmacArraySpec
from codesign.shell.list_runner import GoldenListShell
from codesign.train.config import config_from_dict
from codesign.train.data import synthetic_dataset

SMALL = FpmacArraySpec(exp_bits=5, max_fb=9, max_m=8, max_n=4, max_k=16)  # tile 4: every GEMM cut and chained
KEYS = ("weights", "biases", "velocity")


def small_setup(**changes):
    config = config_from_dict({"seed": 3, "model": {"name": "mlp", "hidden": [12]},
                               "optim": {"epochs": 2, "batch_size": 20, "lr": 0.1},
                               "techniques": {"abvs": {"fb_min": 5, "fb_max": 7, "exp_bits": 5}}})
    return fb_setup(config, SMALL, **changes)


def shell(spec=SMALL, copies: int = 1) -> GoldenListShell:
    return GoldenListShell({"fpmac_array": spec}, units={"fpmac_array": copies})


def assert_same_state(golden, lists) -> int:
    """Every state word equal; returns how many were compared."""
    mine, theirs = golden.read_weights(), lists.read_weights()
    assert mine["fb"] == theirs["fb"]
    compared = 0
    for key in KEYS:
        assert len(mine[key]) == len(theirs[key])
        for a, b in zip(mine[key], theirs[key]):
            np.testing.assert_array_equal(a, b)
            compared += a.size
    return compared


@pytest.mark.slow  # 24 s, the only FB change on lists: make test runs list steps at one FB (below)
def test_two_epochs_with_an_fb_change_equal_the_golden_loop_in_every_state_word():
    data = synthetic_dataset(samples=150, seed=1, validation_fraction=0.2)  # 84 training rows: a last batch of 4
    setup = small_setup(epsilon=1.0)  # every check raises the FB: 5 in epoch 0, 6 in epoch 1
    golden, lists = FbMlpTrainer(setup), FbListTrainer(setup, shell())
    states = []
    lists_on_epoch = lambda row: states.append(lists.read_weights())  # noqa: E731
    golden_states = []
    golden.fit(data, progress=False, on_epoch=lambda row: golden_states.append(golden.read_weights()))
    lists.fit(data, progress=False, on_epoch=lists_on_epoch)
    assert [row["fb"] for row in lists.history] == [5, 6] and lists.fb == 7
    for row_g, row_l in zip(golden.history, lists.history):
        for key in ("epoch", "fb", "loss", "accuracy", "validation_accuracy"):
            assert row_g[key] == row_l[key]
    for mine, theirs in zip(golden_states, states):
        for key in KEYS:
            for a, b in zip(mine[key], theirs[key]):
                np.testing.assert_array_equal(a, b)
    assert assert_same_state(golden, lists) == 2 * (65 * 12 + 13 * 10)
    # 5 steps an epoch: a full batch in both phases and the last batch of 4 in one, at each of the two FBs
    assert lists.list_steps == 10 and lists.lists_built == 6
    assert lists.inputs_staged == 8  # fit gives the next batch: every step but an epoch's first took it


@pytest.mark.parametrize("copies", [1, 2, 3, 4])
def test_step_by_step_with_a_shorter_batch_and_what_the_host_moves(copies):
    """On one fpmac_array IP and shared among two to four: the batch's row tiles in runs (each IP's chains keep
    their partial sums in its own buffers), the parameter tiles' gradients and updates dealt out by column."""
    setup = small_setup()
    runner = shell(copies=copies)
    golden, lists = FbMlpTrainer(setup), FbListTrainer(setup, runner)
    rng = np.random.default_rng(0)
    flushed, read = runner.flushed, runner.read
    for step, n in enumerate((20, 20, 7, 20)):
        x, y = rng.random((n, 64)), rng.integers(0, 10, n)
        before = (runner.flushed, runner.read, runner.lists)
        assert golden.train_step(x, y) == lists.train_step(x, y)
        scalars = 3 if step == 0 else 0  # weight decay, momentum and the rate go in when they change, here once
        tiles = -(-n // 4)  # row tiles of 4; 6 column tiles of parameters (3 a layer)
        lists_run = 2 if copies == 1 else 2 * min(tiles, copies) + min(6, copies)
        assert (runner.flushed - before[0], runner.read - before[1], runner.lists - before[2]) == \
            (n * 64 + scalars + n * 10, n * 10, lists_run)
        assert lists.phase == lists.step % 2
    assert flushed == 2 * (65 * 12 + 13 * 10) and read == 0  # the state went in once, at the start
    assert_same_state(golden, lists)
    assert golden.gemm.macs.keys() == lists.gemm.macs.keys()


def test_the_next_batch_written_beside_the_lists_is_taken_only_where_it_is_the_batch_at_the_fb(fails_after_beside,
                                                                                            unconvertible):
    """Given ``next_x``, a step writes it into the other phase's input tiles beside its last lists (the golden shell
    runs that work before the phase's lists, so a list that read them would differ from the loop); the next step
    takes it only where its batch is that one bit for bit at the same FB, in the phase it was written for: an FB
    moved in between, a batch changed in place (or only in a zero's sign), a step that failed after staging and
    next batches that fail the check are taken afresh or refused as without staging."""
    setup = small_setup()
    runner = fails_after_beside(shell(copies=2))
    golden, lists = FbMlpTrainer(setup), FbListTrainer(setup, runner)
    rng = np.random.default_rng(2)
    x = [rng.random((20, 64)) for _ in range(4)]
    y = [rng.integers(0, 10, 20) for _ in range(4)]

    def step(index, given, next_x, staged):
        assert golden.train_step(given, y[index][:len(given)]) == \
            lists.train_step(given, y[index][:len(given)], next_x=next_x)
        assert lists.inputs_staged == staged
    step(0, x[0], x[1], 0)
    assert list(lists.beside_seconds) == [(0, 2)]  # beside the last of three phases: gradients and updates
    step(1, x[1], x[2], 1)
    golden.controller.fb = lists.controller.fb = 6  # as the ABVS rule moves it between epochs
    step(2, x[2], x[3][:7], 1)  # staged at FB 5: taken afresh
    x[3][0, 0] += 1.0
    step(3, x[3][:7], np.full((3, 64), np.inf), 1)  # changed in place after staging; an infinite batch stages nothing
    step(0, x[0], np.zeros((21, 64)), 1)  # more rows than the arena holds: nothing staged
    step(1, x[1], np.zeros((20, 63)), 1)  # 63 features: nothing staged
    step(0, x[0], unconvertible, 1)  # its conversion fails: nothing staged, this step unharmed
    runner.armed = True
    with pytest.raises(HwTrainError, match="refused"):  # staged x[2] for the next phase, then failed: the
        lists.train_step(x[1], y[1], next_x=x[2])  # next step runs this phase again, so it does not take x[2]
    x[1][:, 0] = 0.0
    signed = x[1].copy()
    signed[:, 0] = -0.0  # equal in value to the staged batch's +0, but a container word keeps the sign
    step(2, x[2], x[1], 1)
    step(1, signed, None, 1)
    assert lists.list_steps == 9
    assert_same_state(golden, lists)


@pytest.mark.parametrize("bad", ["non-finite", "shell"])
def test_a_batch_checked_beside_a_staged_forward_that_fails_moves_no_state(fails_after_beside, bad):
    """Where a batch was staged, the forward runs on its codes and the batch is checked beside it: a batch that
    fails the check, or a forward the shell fails, raises with no state word or count moved, and the next step
    writes its batch afresh and equals the loop."""
    setup = small_setup()
    runner = fails_after_beside(shell(copies=2))
    golden, lists = FbMlpTrainer(setup), FbListTrainer(setup, runner)
    rng = np.random.default_rng(4)
    x, y = rng.random((20, 64)), rng.integers(0, 10, 20)
    assert golden.train_step(x, y) == lists.train_step(x, y, next_x=x)
    given = x.copy()
    given[2, 3] = np.nan
    if bad == "shell":
        given, runner.armed = x, True
    with pytest.raises(HwTrainError, match="non-finite|refused"):
        lists.train_step(given, y)
    assert (lists.step, lists.list_steps, lists.phase, lists.inputs_staged) == (1, 1, 1, 0)
    assert_same_state(golden, lists)
    assert golden.train_step(x, y) == lists.train_step(x, y)
    assert_same_state(golden, lists)


def test_a_negative_zero_bias_changes_no_state_word():
    # [1 | A] . [b; W] starts from +0 and adds 1 * b: b = -0 gives +0 where the loop starts from -0; only a zero's
    # sign in Z can differ, which ReLU, the mask and the decoded logits do not see
    setup = small_setup()
    golden, lists = FbMlpTrainer(setup), FbListTrainer(setup, shell())
    state = golden.read_weights()
    sign = np.uint64(1 << (SMALL.width - 1))
    state["biases"][0][0, :6] = sign
    state["biases"][1][0, :3] = sign
    golden.load_weights(state)
    lists.load_weights(state)
    rng = np.random.default_rng(1)
    for _ in range(2):
        x, y = rng.random((20, 64)), rng.integers(0, 10, 20)
        x[:3] = 0  # rows whose products are all zeros: the loop's sums stay -0 there, the lists' +0
        assert golden.train_step(x, y) == lists.train_step(x, y)
    assert_same_state(golden, lists)


def test_bad_shells_and_batches_are_refused():
    with pytest.raises(HwTrainError, match="build"):
        FbListTrainer(small_setup(), shell(FpmacArraySpec(exp_bits=5, max_fb=9)))
    lists = FbListTrainer(small_setup(), shell())
    with pytest.raises(HwTrainError, match="1 <= n <= 20"):
        lists.train_step(np.zeros((21, 64)), np.zeros(21, dtype=int))
    with pytest.raises(HwTrainError, match=r"labels y hold 0\.\.10: need classes in 0\.\.9"):
        lists.train_step(np.zeros((4, 64)), np.array([0, 3, 10, 2]))
    x = np.zeros((4, 64))
    x[1, 5], x[2, 0] = np.nan, np.inf
    with pytest.raises(HwTrainError, match="2 non-finite values"):
        lists.train_step(x, np.zeros(4, dtype=int))
    assert lists.step == 0 and lists.phase == 0 and lists.list_steps == 0
