"""The shared study: validation-only tuning, then every choice trained at every (seed, split), all as cached tasks."""

import json

import pytest

from codesign.reproduce.arms import Arm
from codesign.reproduce.common import Execution
from codesign.reproduce.protocol import SPLIT_SEEDS, TUNING_SEED, TUNING_SEEDS, VALIDATION_FRACTION
from codesign.reproduce.study import evaluation_key, run_study
from codesign.train.config import ConfigError
from tests.reproduce.conftest import TINY


def test_tuning_reads_validation_only_over_three_seeds_and_the_choice_is_trained_at_every_seed_and_split(study):
    out, arms, runs, tuning = study
    stored = [json.loads(p.read_text()) for p in (out / "tasks" / "results").glob("tune,*.json")]
    for arm in arms:
        entry = tuning[arm.name]
        trials = entry["trials"]
        own = len(arm.trials())
        assert [t["setting"] for t in trials[:own]] == arm.trials() and all(t["widening"] == 0 for t in trials[:own])
        for trial in trials:  # the mean of three tuning seeds decides, and no test figure is kept
            assert set(trial) == {"setting", "validation_accuracy", "validation_accuracies", "tuning_seeds", "widening"}
            assert len(trial["validation_accuracies"]) == 3 and trial["tuning_seeds"] == list(TUNING_SEEDS)
            assert trial["validation_accuracy"] == pytest.approx(sum(trial["validation_accuracies"]) / 3)
        best = max(t["validation_accuracy"] for t in trials)
        assert entry["chosen"] == next(t["setting"] for t in trials if t["validation_accuracy"] == best)
        mine = [s for s in stored if s["task"]["key"].split(",")[1] == arm.name]
        assert len(mine) == 3 * len(trials)
        assert {s["task"]["kwargs"]["config"]["seed"] for s in mine} == set(TUNING_SEEDS)
        assert {s["task"]["kwargs"]["config"]["data"]["split_seed"] for s in mine} == {SPLIT_SEEDS[0]}
        assert [(r.config["seed"], r.config["data"]["split_seed"]) for r in runs[arm.name]] == \
            [(seed, split) for split in SPLIT_SEEDS for seed in (0, 1, 2)]
        assert all(r.config["optim"]["lr"] == entry["chosen"]["optim.lr"] for r in runs[arm.name])
        assert all(r.config["data"]["validation_fraction"] == VALIDATION_FRACTION for r in runs[arm.name])
        assert all(r.validation_accuracy is not None for r in runs[arm.name])


def test_evaluation_runs_keep_the_cache_keys_they_had_before_splits_were_resampled(study):
    out, _, _, _ = study
    assert evaluation_key("smd_x4/3", 3, SPLIT_SEEDS[0]) == "eval,smd_x4_3,seed=3"
    assert evaluation_key("a", 3, 2) == "eval,a,seed=3,split=2"
    assert (out / "tasks" / "results" / "eval,base,seed=0.json").is_file()
    assert (out / "tasks" / "results" / "eval,fixed,seed=2,split=1.json").is_file()


def test_a_rerun_trains_nothing_again(study):
    out, arms, runs, tuning = study
    before = {p.name: p.stat().st_mtime_ns for p in (out / "tasks" / "results").iterdir()}
    again, tuning_again = run_study(arms, [0, 1, 2], out, execution=Execution(progress=False))
    assert tuning_again == tuning
    assert [r.test_accuracy for r in again["fixed"]] == [r.test_accuracy for r in runs["fixed"]]
    assert {p.name: p.stat().st_mtime_ns for p in (out / "tasks" / "results").iterdir()} == before


@pytest.mark.parametrize(("arms", "seeds", "message"), [
    ([Arm("a", TINY, baseline=True, tune={"optim.lr": (0.1, 0.01)}), Arm("b", TINY, tune={"optim.lr": (0.1,)})],
     [0], "same tuning budget"),
    ([Arm("a", TINY), Arm("b", TINY)], [0], "exactly one arm"),
    ([Arm("a", TINY, baseline=True), Arm("a", TINY)], [0], "unique"),
    ([Arm("a", TINY, baseline=True)], [0, 0], "without repeats"),
    ([Arm("a", TINY, baseline=True)], [TUNING_SEED], "reserved"),
    ([Arm("a", TINY, baseline=True)], [TUNING_SEEDS[2]], "reserved"),
    ([Arm("a", TINY, baseline=True, tune={"optim.lr": (-1.0,)})], [0], "optim.lr"),
])
def test_bad_studies_are_refused_before_anything_is_written(tmp_path, arms, seeds, message):
    with pytest.raises((ValueError, ConfigError), match=message):
        run_study(arms, seeds, tmp_path / "out", execution=Execution(progress=False))
    assert not (tmp_path / "out").exists()


@pytest.mark.slow
def test_a_study_on_a_local_dask_cluster_of_two_workers_gives_the_same_runs(tmp_path, study):
    _, arms, runs, tuning = study
    remote, remote_tuning = run_study(arms, [0, 1, 2], tmp_path, execution=Execution(workers=2, progress=False))
    assert remote_tuning == tuning
    for name in runs:
        assert [r.test_accuracy for r in remote[name]] == [r.test_accuracy for r in runs[name]]
        assert [r.energy_pj for r in remote[name]] == [r.energy_pj for r in runs[name]]
    stored = json.loads(next((tmp_path / "tasks" / "results").glob("eval,*.json")).read_text())
    assert stored["task"]["function"] == "codesign.reproduce.common:train_task"
