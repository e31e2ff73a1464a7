"""The golden list shell's host timer: a step's wall time less the shell's, after the warm steps."""

from __future__ import annotations

import pytest

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


def test_no_step_left_to_time_is_refused():
    shell = _Shell()
    with pytest.raises(ValueError, match="2 batches leave no step to time after 2 warm steps"):
        host_per_list_step(_Trainer(shell), shell, [(None, None)] * 2, warm_steps=2)
