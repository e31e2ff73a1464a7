"""The one path from runs to cached tasks: the measurement task, the task of a configuration, groups of tasks run as
one cached sweep, and a superseded result set aside."""

import json

import pytest

from codesign.reproduce.common import (TRAIN_TASK, Execution, config_task, config_tasks, task_key, train_groups,
                                       train_task)
from codesign.sweep import SweepTask
from codesign.train.config import OptimConfig
from tests.reproduce.conftest import TINY


def test_a_configuration_becomes_the_task_every_cache_names():
    task = config_task("eval,a,seed=0", TINY.replace(seed=3), "a seed 3")
    assert task.function == TRAIN_TASK == "codesign.reproduce.common:train_task"  # cached tasks name it: never move it
    assert task.kwargs == {"config": TINY.replace(seed=3).to_dict(), "description": "a seed 3"}
    assert [t.key for t in config_tasks({"x,seed=1": TINY, "x,seed=2": TINY})] == ["x,seed=1", "x,seed=2"]
    assert task_key("tune", "smd_x4/3", "seed=1001") == "tune,smd_x4_3,seed=1001"


def test_the_measurement_returns_the_training_result_as_data():
    result = train_task(config=TINY.to_dict(), description="t")
    json.dumps(result, allow_nan=False)  # plain data, as a sweep result must be
    assert {"test_accuracy", "validation_accuracy", "cost", "config", "techniques"} <= set(result)


def test_groups_run_as_one_cached_sweep_and_come_back_in_task_order(tmp_path):
    groups = {("a", 0): config_tasks({f"a,seed={seed}": TINY.replace(seed=seed) for seed in (2, 1)}),
              ("b", 0): config_tasks({"b,seed=1": TINY.replace(seed=1)})}
    first = train_groups(groups, tmp_path, Execution(progress=False))
    assert first.counts() == {"trained": 3, "cached": 0}
    assert [r["config"]["seed"] for r in first.groups[("a", 0)]] == [2, 1] and len(first.groups[("b", 0)]) == 1
    again = train_groups(groups, tmp_path, Execution(progress=False))
    assert again.counts() == {"trained": 0, "cached": 3} and again.groups == first.groups
    assert train_groups({"none": []}, tmp_path, Execution()).groups == {"none": []}  # no task: no sweep at all


def test_a_cached_result_of_another_task_is_set_aside_and_never_read(tmp_path):
    train_groups({"a": [config_task("eval,a,seed=0", TINY, "a")]}, tmp_path, Execution(progress=False))
    longer = TINY.replace(optim=OptimConfig(epochs=2, batch_size=16))  # the same task key, another task
    again = train_groups({"a": [config_task("eval,a,seed=0", longer, "a")]}, tmp_path, Execution(progress=False))
    assert again.groups["a"][0]["config"]["optim"]["epochs"] == 2
    aside = json.loads((tmp_path / "results" / "eval,a,seed=0.superseded.json").read_text())
    assert aside["task"]["kwargs"]["config"]["optim"]["epochs"] == 1


def test_a_failed_task_stops_the_reproduction(tmp_path):
    broken = SweepTask(key="broken", function=TRAIN_TASK, kwargs={"config": {"optim": {"lr": -1.0}}})
    with pytest.raises(RuntimeError, match="training tasks failed"):
        train_groups({"x": [broken]}, tmp_path, Execution(progress=False, retries=0))


@pytest.mark.parametrize("field, value", [("workers", -1), ("retries", -1), ("workers", True), ("retries", 1.5)])
def test_an_execution_with_a_bad_count_is_refused(field, value):
    with pytest.raises(ValueError, match=field):
        Execution(**{field: value})
