"""The reproduction protocol: validation-only tuning with equal budgets, paired intervals, cached sweep tasks."""

import json

import pytest

from codesign.reproduce.common import (
    TUNING_SEED,
    VALIDATION_FRACTION,
    Arm,
    Execution,
    CLAIM_SEEDS,
    run_study,
    study_seeds,
    summarize,
    with_setting,
)
from codesign.reproduce.stats import bootstrap_interval
from codesign.train.config import ConfigError, DataConfig, ModelConfig, OptimConfig, TrainConfig
from codesign.train.techniques.psg import Config as PsgConfig

TINY = TrainConfig(data=DataConfig(name="synthetic", synthetic_samples=60), model=ModelConfig(name="mlp", hidden=(16,)),
                   optim=OptimConfig(epochs=1, batch_size=16))


def _arms():
    return [Arm("base", TINY, baseline=True, tune={"optim.lr": (0.1, 0.01)}),
            Arm("fixed", TINY.replace(techniques={"psg": PsgConfig(predict=False)}), tune={"optim.lr": (0.1, 0.01)})]


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    out = tmp_path_factory.mktemp("study")
    arms = _arms()
    runs, tuning = run_study(arms, [0, 1, 2], out, execution=Execution(progress=False))
    return out, arms, runs, tuning


def test_tuning_reads_validation_only_and_the_choice_is_trained_at_every_seed(study):
    out, arms, runs, tuning = study
    for arm in arms:
        trials = tuning[arm.name]["trials"]
        assert [t["setting"] for t in trials] == arm.trials()
        best = max(trials, key=lambda t: t["validation_accuracy"])
        assert tuning[arm.name]["chosen"] == next(t["setting"] for t in trials
                                                  if t["validation_accuracy"] == best["validation_accuracy"])
        assert all(set(t) == {"setting", "validation_accuracy"} for t in trials)  # no test figure is kept
        assert [r.config["seed"] for r in runs[arm.name]] == [0, 1, 2]
        assert all(r.config["optim"]["lr"] == tuning[arm.name]["chosen"]["optim.lr"] for r in runs[arm.name])
        assert all(r.config["data"]["validation_fraction"] == VALIDATION_FRACTION for r in runs[arm.name])
        assert all(r.validation_accuracy is not None for r in runs[arm.name])
    stored = [json.loads(p.read_text()) for p in (out / "tasks" / "results").glob("tune,*.json")]
    assert len(stored) == 4 and {s["task"]["kwargs"]["config"]["seed"] for s in stored} == {TUNING_SEED}


def test_summary_pairs_each_seed_with_the_baseline(study):
    _, arms, runs, tuning = study
    base, fixed = summarize(arms, runs, tuning)
    differences = [f.test_accuracy - b.test_accuracy for f, b in zip(runs["fixed"], runs["base"])]
    assert fixed.accuracy_difference == bootstrap_interval(differences).as_dict()
    ratios = [f.energy_pj / b.energy_pj for f, b in zip(runs["fixed"], runs["base"])]
    assert fixed.energy_ratio["mean"] == pytest.approx(sum(ratios) / 3) and fixed.energy_ratio["mean"] < 1
    assert base.accuracy_difference["mean"] == 0 and base.verdict == "baseline"
    assert fixed.chosen == tuning["fixed"]["chosen"]


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
    ([Arm("a", TINY, baseline=True, tune={"optim.lr": (-1.0,)})], [0], "optim.lr"),
])
def test_bad_studies_are_refused_before_anything_is_written(tmp_path, arms, seeds, message):
    with pytest.raises((ValueError, ConfigError), match=message):
        run_study(arms, seeds, tmp_path / "out", execution=Execution(progress=False))
    assert not (tmp_path / "out").exists()


def test_study_seeds_default_to_the_claim_seeds_and_refuse_an_empty_list():
    assert study_seeds(None, smoke=False) == list(CLAIM_SEEDS) and len(CLAIM_SEEDS) >= 8
    assert study_seeds(None, smoke=True) == [0]
    assert study_seeds((3, 5), smoke=True) == [3, 5]
    with pytest.raises(ValueError, match="at least one seed"):
        study_seeds([], smoke=False)


def test_settings_are_set_by_dotted_name_and_validated():
    config = TINY.replace(techniques={"psg": PsgConfig()})
    assert with_setting(config, "optim.lr", 0.5).optim.lr == 0.5
    assert with_setting(config, "techniques.psg.beta", 0.1).techniques["psg"].beta == 0.1
    with pytest.raises(ValueError, match="no technique"):
        with_setting(config, "techniques.smd.p", 0.5)
    with pytest.raises(ValueError, match="cannot tune"):
        with_setting(config, "optimizer.lr", 0.5)
    with pytest.raises(ConfigError, match="techniques.psg.beta"):
        with_setting(config, "techniques.psg.beta", 2.0)


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
