"""The reproduction protocol: validation-only tuning with equal budgets, paired intervals, cached sweep tasks."""

import json

import pytest

from codesign.reproduce.common import (
    CLAIM_SEEDS,
    MAX_WIDENINGS,
    SPLIT_SEEDS,
    TUNING_SEED,
    TUNING_SEEDS,
    VALIDATION_FRACTION,
    Arm,
    _data_sizes,
    Execution,
    PaperAccounting,
    charged_cost,
    run_study,
    study_seeds,
    study_splits,
    summarize,
    widened_value,
    with_setting,
)
from codesign.reproduce.stats import bootstrap_interval, tost
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


def test_a_choice_on_the_edge_widens_the_grid_and_every_widening_is_recorded(study):
    _, arms, _, tuning = study
    for arm in arms:
        entry = tuning[arm.name]
        grid = entry["grid"]["optim.lr"]
        assert len(entry["widenings"]) <= MAX_WIDENINGS
        assert sorted(grid) == sorted({0.1, 0.01} | {w["added"] for w in entry["widenings"]})
        for number, widening in enumerate(entry["widenings"], start=1):
            assert widening["round"] == number
            assert [t["setting"]["optim.lr"] for t in entry["trials"] if t["widening"] == number] == [widening["added"]]
        chosen = entry["chosen"]["optim.lr"]
        on_edge = chosen in (grid[0], grid[-1])
        # either the choice ends inside its grid, or the limit of widenings was reached and the report says so
        assert (not on_edge and entry["edge"] == []) or (len(entry["widenings"]) == MAX_WIDENINGS
                                                          and entry["edge"] == ["optim.lr"])


@pytest.mark.parametrize(("grid", "chosen", "expected"), [
    ((0.2, 0.1, 0.05), 0.2, 0.4), ((0.2, 0.1, 0.05), 0.05, 0.025), ((0.05, 0.1, 0.2), 0.2, 0.4),
    ((1e-3, 3e-4, 1e-4), 1e-4, 1e-4 / 3), ((4, 2), 4, 8), ((4, 2), 2, 1), ((3, 2, 1), 3, 4), ((3, 2, 1), 1, 0),
    ((0.0, 0.5, 1.0), 0.0, -0.5), ((0.2, 0.1, 0.05), 0.1, None), (("a", "b"), "a", None), ((0.1,), 0.1, None),
])
def test_a_grid_continues_its_own_step_beyond_the_edge(grid, chosen, expected):
    new = widened_value(grid, chosen)
    assert new == (pytest.approx(expected, rel=1e-5) if isinstance(expected, float) else expected)


def test_every_pass_is_charged_once_training_from_the_ledger_evaluation_at_the_forward_cost_per_image(study):
    _, _, runs, _ = study
    run = runs["base"][0]
    # the MLP 64 -> 16 -> 10 forwards 64 x 16 + 16 x 10 MACs per image
    per_image = 64 * 16 + 16 * 10
    sizes = _data_sizes(run.config)
    assert sizes["train"] + sizes["validation"] + sizes["test"] == 60 and sizes["validation"] > 0
    assert run.cost["by_phase"]["forward"]["macs"] == per_image * sizes["train"] * run.config["optim"]["epochs"]
    charged = charged_cost(run, sizes)
    evaluated = run.config["optim"]["epochs"] * sizes["validation"] + sizes["test"]
    assert charged["macs"] == pytest.approx(run.cost["total"]["macs"] + per_image * evaluated)
    assert 0 < charged["evaluation_share"] < 1
    assert charged["energy_pj"] > run.energy_pj


def test_summary_pairs_each_seed_and_split_with_the_baseline_and_judges_by_tost(study):
    _, arms, runs, tuning = study
    paper = PaperAccounting(key="bitops", name="BitOPs", citation="test")
    base, fixed = summarize(arms, runs, tuning, margin_pt=30.0, paper=paper)
    differences = [f.test_accuracy - b.test_accuracy for f, b in zip(runs["fixed"], runs["base"])]
    assert fixed.accuracy_difference == bootstrap_interval(differences).as_dict()
    assert fixed.accuracy_tost == tost(differences, 30.0).as_dict() and fixed.verdict == tost(differences, 30.0).text()
    assert [(row["seed"], row["split_seed"]) for row in fixed.per_seed] == \
        [(r.config["seed"], r.config["data"]["split_seed"]) for r in runs["base"]]
    assert len(fixed.per_seed) == 9
    # the fixed-point arm spends fewer BitOPs and less energy than float32 however the passes are charged
    assert fixed.energy_ratio["mean"] < 1 and fixed.paper_ratio["mean"] < 1 and fixed.training_energy_ratio["mean"] < 1
    assert fixed.paper_ratio == fixed.bitops_ratio and fixed.paper_accounting["name"] == "BitOPs"
    assert base.accuracy_difference["mean"] == 0 and base.verdict == "baseline" and base.accuracy_tost == {}
    assert fixed.chosen == tuning["fixed"]["chosen"]
    with pytest.raises(ValueError, match="key"):
        PaperAccounting(key="joules", name="x", citation="y")


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


def test_study_seeds_default_to_the_claim_seeds_and_refuse_an_empty_list():
    assert study_seeds(None, smoke=False) == list(CLAIM_SEEDS)
    assert len(CLAIM_SEEDS) >= 3 and len(SPLIT_SEEDS) >= 3  # crossed: at least 9 paired runs per arm
    assert study_splits(CLAIM_SEEDS) == list(SPLIT_SEEDS) and study_splits([0]) == [SPLIT_SEEDS[0]]
    assert study_seeds(None, smoke=True) == [0]
    assert study_seeds((3, 5), smoke=True) == [3, 5]
    # a reproduction with its own claim seeds (tt: 15, csb-utilisation: 8) passes them as the default
    assert study_seeds(None, smoke=False, default=range(15)) == list(range(15))
    assert study_seeds(None, smoke=True, default=range(15)) == [0] and study_seeds([2], False, default=(7,)) == [2]
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


def test_a_cached_run_of_a_superseded_choice_is_set_aside_and_never_read(tmp_path):
    arms = [Arm("a", TINY, baseline=True)]
    first, _ = run_study(arms, [0], tmp_path, execution=Execution(progress=False))
    longer = TINY.replace(optim=OptimConfig(epochs=2, batch_size=16))  # the same task key, another task
    again, _ = run_study([Arm("a", longer, baseline=True)], [0], tmp_path, execution=Execution(progress=False))
    assert first["a"][0].config["optim"]["epochs"] == 1 and again["a"][0].config["optim"]["epochs"] == 2
    aside = json.loads((tmp_path / "tasks" / "results" / "eval,a,seed=0.superseded.json").read_text())
    assert aside["task"]["kwargs"]["config"]["optim"]["epochs"] == 1


def test_forward_passes_over_non_training_images_do_not_raise_the_evaluation_price(study):
    import dataclasses

    _, _, runs, _ = study
    run = runs["base"][0]
    sizes = _data_sizes(run.config)
    plain = charged_cost(run, sizes)
    half = run.cost["by_phase"]["forward"]["macs"] // 2  # as if half the forward MACs were a pruning search's
    searched = dataclasses.replace(run, techniques={"compress": {"search_forward_macs": half}})
    charged = charged_cost(searched, sizes)
    for key in ("macs", "energy_pj"):
        evaluation = plain[key] - run.cost["total"][key]
        assert charged[key] - run.cost["total"][key] == pytest.approx(evaluation / 2)
