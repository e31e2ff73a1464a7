"""A ``tt-fashion`` run stopped after an epoch goes on from its checkpoint, bit for bit as if it had not stopped."""

from __future__ import annotations

import dataclasses

import pytest

from codesign.reproduce.tt_fashion_budget import budget
from codesign.reproduce.tt_fashion_train import Job, run_job
from codesign.sweep import TaskCheckpoint

STAMP = {"function": "codesign.reproduce.tt_fashion_train:train_task", "kwargs": {}}


class Killed(Exception):
    """Stands for a session ending right after a save."""


class KilledAfterSave(TaskCheckpoint):
    def save(self, state) -> None:
        super().save(state)
        raise Killed


def _without_times(record: dict) -> dict:
    """The record without what differs between sessions: seconds, and where the run resumed."""
    def rows(entries):
        return [{key: value for key, value in row.items() if key != "seconds"} for row in entries]

    kept = {key: value for key, value in record.items() if key not in ("seconds", "resumed_at_epochs")}
    kept["epochs"] = rows(record["epochs"])
    kept["pretrain"] = {**record["pretrain"], "epochs": rows(record["pretrain"]["epochs"])}
    return kept


@pytest.mark.parametrize("job", [Job(kind="tt-float", seed=1, prior_weight=1.0), Job(kind="fp32", seed=1),
                                 Job(kind="tt-fixed", seed=1, prior_weight=1.0)], ids=lambda job: job.label)
def test_a_run_killed_after_each_epoch_ends_as_the_run_that_never_stopped(job, tmp_path):
    b = budget(smoke=True)
    b = dataclasses.replace(b, optim=dataclasses.replace(b.optim, epochs=3))  # two epochs to resume at
    straight = run_job(b, job)
    path = tmp_path / "run.pkl"
    for _ in range(2):  # killed after the first epoch, then after the second
        with pytest.raises(Killed):
            run_job(b, job, KilledAfterSave(path, STAMP))
    resumed = run_job(b, job, TaskCheckpoint(path, STAMP))
    assert resumed["resumed_at_epochs"] == [1, 2] and straight["resumed_at_epochs"] == []
    if job.prior_weight:  # the smoke budget prunes at every epoch: the optimiser is rebuilt across a resume
        assert len(straight["prune_events"]) >= 2
    assert _without_times(resumed) == _without_times(straight)
    assert resumed["seconds"]["total"] == pytest.approx(sum(v for k, v in resumed["seconds"].items() if k != "total"))


@pytest.mark.parametrize("kind", ["tt-float", "tt-fixed"])
def test_a_checkpoint_of_another_set_up_is_refused_with_its_path(kind, tmp_path):
    b = budget(smoke=True)
    job = Job(kind=kind, seed=1)
    path = tmp_path / "run.pkl"
    with pytest.raises(Killed):
        run_job(dataclasses.replace(b, optim=dataclasses.replace(b.optim, epochs=3)), job, KilledAfterSave(path, STAMP))
    with pytest.raises(ValueError, match=r"run\.pkl: .*another set-up; remove it"):
        run_job(b, job, TaskCheckpoint(path, STAMP))  # two epochs, not three: another schedule
