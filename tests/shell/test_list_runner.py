"""The golden list shell's host timer: a step's wall time less the shell's, after the warm steps."""

from __future__ import annotations

import types

import numpy as np
import pytest

from codesign.shell import list_runner
from codesign.shell.list_runner import host_per_list_step


class _Shell:
    seconds = 0.0
    flushed = read = lists = 0


class _Trainer:
    """Each step: 5 ms of the shell's (as if the IP computed), 4 words flushed, 2 read, 2 lists."""

    def __init__(self, shell) -> None:
        self.shell, self.steps = shell, 0

    def train_step(self, x, y) -> float:
        self.steps += 1
        self.shell.seconds += 5.0  # far more than the step's wall time: the host's share is what is left
        self.shell.flushed, self.shell.read, self.shell.lists = (self.shell.flushed + 4, self.shell.read + 2,
                                                                 self.shell.lists + 2)
        return 0.0


def test_the_host_share_leaves_out_the_shells_seconds_and_the_warm_steps():
    shell = _Shell()
    trainer = _Trainer(shell)
    measured = host_per_list_step(trainer, shell, [(None, None)] * 3, warm_steps=1)
    assert trainer.steps == 3
    assert measured["seconds"] < 0  # less the 5 s each step claims for the shell
    assert {k: measured[k] for k in ("flushed_bytes", "read_bytes", "lists")} == {
        "flushed_bytes": 16, "read_bytes": 8, "lists": 2}


def test_the_host_s_work_beside_the_lists_and_the_counts_are_those_of_the_least_step():
    shell = _Shell()
    trainer = _Trainer(shell)
    steps = iter([{(0, 4): 0.5, (0, 0): 0.25}, {(0, 6): 0.125}, {(0, 1): 0.75}])
    trained = trainer.train_step

    def noting(x, y):  # a trainer that reports its work beside the lists; the second step is the least
        trainer.beside_seconds = next(steps)
        if (0, 6) in trainer.beside_seconds:
            shell.seconds, shell.lists = shell.seconds + 1.0, shell.lists + 5  # 1 s more of the IPs', 5 more lists
        return trained(x, y)
    trainer.train_step = noting
    measured = host_per_list_step(trainer, shell, [(None, None)] * 3, warm_steps=0)
    assert measured["beside"] == [(0, 6, 0.125)] and measured["lists"] == 7


def test_the_gaps_between_phases_are_the_least_of_each_over_the_steps_of_the_least_steps_phases(monkeypatch):
    """The host's time before the first phase, between phases and after the last, as a golden shell marks each
    phase's start and end: each gap the least over the timed steps whose phase count is the least step's (a clock
    the steps move, so the figures are exact)."""
    clock = types.SimpleNamespace(now=0.0)
    monkeypatch.setattr(list_runner, "time", types.SimpleNamespace(perf_counter=lambda: clock.now))
    shell = _Shell()
    trainer = _Trainer(shell)
    # seconds before each phase and after the last, and each phase's: the third step has smaller gaps but three
    # phases and is not the least, so it is left out
    steps = iter([((4, 1, 3), 1), ((2, 5, 1), 1), ((0.5, 0.5, 0.5, 9), 1)])
    trained = trainer.train_step

    def phases(x, y):
        waits, phase = next(steps)
        for wait in waits[:-1]:
            clock.now += wait
            shell.phase_times += [clock.now, clock.now + phase]
            clock.now += phase
        clock.now += waits[-1]
        return trained(x, y)
    trainer.train_step = phases
    assert host_per_list_step(trainer, shell, [(None, None)] * 3, warm_steps=0)["gaps_seconds"] == [2, 1, 1]


def test_the_golden_shell_marks_a_phases_start_and_end_only_while_replaying():
    shell = list_runner.GoldenListShell({})
    arena = np.zeros(4, np.uint32)
    shell.run_phase((), arena)
    assert shell.phase_times == []
    shell.replay = True
    shell.run_phase((), arena)

    def failing() -> None:
        raise RuntimeError("beside")
    with pytest.raises(RuntimeError, match="beside"):
        shell.run_phase((), arena, beside=failing)
    assert len(shell.phase_times) == 4 and shell.phase_times == sorted(shell.phase_times)


def test_no_step_left_to_time_is_refused():
    shell = _Shell()
    with pytest.raises(ValueError, match="2 batches leave no step to time after 2 warm steps"):
        host_per_list_step(_Trainer(shell), shell, [(None, None)] * 2, warm_steps=2)


def test_a_replaying_shell_hands_back_a_phase_s_last_arena_without_computing():
    """While replaying, a phase's lists run golden once, and a later run of the same lists (the same objects)
    gives back the words they wrote then (every result and record, no other word, as an IP writes), counted
    as lists and calls; new lists run golden again; off, nothing is kept."""
    import numpy as np

    from codesign.pe.fpmac_array.spec import FpmacArraySpec
    from codesign.shell.list_runner import GoldenListShell, _written_words
    from codesign.step.fpmac_array.lists import PE, step_arena, step_lists

    spec = FpmacArraySpec(exp_bits=5, max_fb=7, max_m=4, max_n=3, max_k=5)
    arena = step_arena(spec, (7, 5, 4), 3)
    lists = step_lists(arena, 3, 7, 0)
    shell = GoldenListShell({PE: spec})
    device = np.array(arena.image)
    device[:] = np.random.default_rng(0).integers(0, 1 << 12, device.size)
    golden = shell.run_phase(lists.phases[0], np.array(device))
    assert not shell._replies  # not replaying: nothing kept
    shell.replay = True
    first = shell.run_phase(lists.phases[0], np.array(device))
    assert np.array_equal(first, golden)
    written = _written_words([calls for _, calls in lists.phases[0]])
    assert set(np.flatnonzero(golden != device)) <= set(written.tolist())  # every word the phase changed
    assert written.size < device.size
    stale = np.zeros_like(device)
    replayed = shell.run_phase(lists.phases[0], stale)  # handed back, not computed: only the written words
    assert np.array_equal(replayed[written], golden[written])
    assert not np.any(np.delete(replayed, written))
    assert (shell.lists, shell.calls) == (3, 3 * len(lists.forward))
    again = step_lists(arena, 3, 7, 0)  # equal lists, other objects: computed
    assert not np.array_equal(shell.run_phase(again.phases[0], np.zeros_like(device)), golden)


def test_the_golden_shell_runs_the_host_s_work_first_on_the_arena_the_lists_start_from():
    import numpy as np

    from codesign.pe.fpmac_array.spec import FpmacArraySpec
    from codesign.shell.list_runner import GoldenListShell
    from codesign.step.fpmac_array.lists import PE, step_arena, step_lists

    spec = FpmacArraySpec(exp_bits=5, max_fb=7, max_m=4, max_n=3, max_k=5)
    arena = step_arena(spec, (7, 5, 4), 3)
    lists = step_lists(arena, 3, 7, 0)
    shell = GoldenListShell({PE: spec})
    rng = np.random.default_rng(0)
    device, other = (rng.integers(0, 1 << 12, np.asarray(arena.image).size).astype(np.uint32) for _ in range(2))
    golden, golden_other = (shell.run_phase(lists.phases[0], np.array(image)) for image in (device, other))
    assert not np.array_equal(golden, golden_other)
    seen = []
    before = (shell.seconds, shell.lists)
    got = shell.run_phase(lists.phases[0], np.array(device), beside=lambda: seen.append((shell.seconds, shell.lists)))
    assert np.array_equal(got, golden)
    # once, before the phase's lists ran, and none of its seconds counted as the shell's
    assert seen == [before] and shell.seconds > before[0] and shell.lists > before[1]
    # what the host writes beside is where the lists start from: a list that read it computes with it
    given = np.array(device)
    got = shell.run_phase(lists.phases[0], given, beside=lambda: given.__setitem__(slice(None), other))
    assert np.array_equal(got, golden_other)
    # host work that fails: the lists still run and write the arena in place, as a board's started IPs would
    given = np.array(device)

    def fails() -> None:
        raise KeyError("the host's work failed")
    with pytest.raises(KeyError, match="failed"):
        shell.run_phase(lists.phases[0], given, beside=fails)
    assert np.array_equal(given, golden)


def test_a_trainer_that_stages_the_next_batch_is_given_it_as_its_epoch_loop_gives_it():
    shell = _Shell()
    trainer = _Trainer(shell)
    given = []
    trained = trainer.train_step

    def staging(x, y, *, next_x=None):
        given.append((x, next_x))
        return trained(x, y)
    trainer.train_step = staging
    host_per_list_step(trainer, shell, [(k, None) for k in range(4)], warm_steps=1)
    assert given == [(0, 1), (1, 2), (2, 3), (3, 0)]
