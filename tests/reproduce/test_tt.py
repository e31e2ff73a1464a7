"""The ``tt`` reproduction: its runs on the one path to cached tasks, its choice rules, an end-to-end smoke report."""

import json
from dataclasses import replace

import pytest

from codesign.reproduce import REPRODUCTIONS, reproduction, tt
from codesign.reproduce.protocol import TUNING_SEED, VALIDATION_FRACTION
from codesign.reproduce.stats import bootstrap_interval, t_interval
from codesign.reproduce.tt_budget import (ARMS, FIXED_PRIOR_EXACT_HAND_OFF, FIXED_PRIOR_TRACKED, MAIN_ARM, TT_ARMS,
                                          arm_spec, budget, budget_digest, initial_ranks)
from codesign.reproduce.tt_report import PRIOR_MARGIN_PT, ROUTE_MARGIN_PT, SCALE_RULE_MARGIN_PT, TOST_MARGIN_PT
from codesign.train.tt import TTPrecision

# The cached tasks' keys of evaluation_jobs([0, 4], baseline_grid[0], tt_grid[0]), computed from the code before
# the tracked arm existed: an arm added later must not move an earlier arm's key (its cached run would be lost).
KEYS_BEFORE_TRACKED = {
    True: ["eval,fp32,seed=0,split=0,dc6fea75e5", "eval,tt-fixed-prior,seed=0,split=0,518f20df44",
           "eval,tt-fixed-no-prior,seed=0,split=0,e889c729a8", "eval,tt-float-prior,seed=0,split=0,8090107ccf",
           "eval,tt-float-no-prior,seed=0,split=0,13a45b395f", "eval,tt-fixed-prior-dense,seed=0,split=0,d12b9ee04e",
           "eval,fp32,seed=4,split=1,771508cb42", "eval,tt-fixed-prior,seed=4,split=1,a0ac4984e5",
           "eval,tt-fixed-no-prior,seed=4,split=1,e37ee864e1", "eval,tt-float-prior,seed=4,split=1,84456a4bc2",
           "eval,tt-float-no-prior,seed=4,split=1,9eeb8f2b19", "eval,tt-fixed-prior-dense,seed=4,split=1,8773f4b2d3"],
    False: ["eval,fp32,seed=0,split=0,c85915c003", "eval,tt-fixed-prior,seed=0,split=0,26a3eeb602",
            "eval,tt-fixed-no-prior,seed=0,split=0,0ebdc7a7a2", "eval,tt-float-prior,seed=0,split=0,72b4a1698c",
            "eval,tt-float-no-prior,seed=0,split=0,1403c83e17", "eval,tt-fixed-prior-dense,seed=0,split=0,1b45c4ec37",
            "eval,fp32,seed=4,split=1,5271e75a2e", "eval,tt-fixed-prior,seed=4,split=1,c841b1a64e",
            "eval,tt-fixed-no-prior,seed=4,split=1,2fa61ee2f0", "eval,tt-float-prior,seed=4,split=1,28825e8c2e",
            "eval,tt-float-no-prior,seed=4,split=1,11f47cb623", "eval,tt-fixed-prior-dense,seed=4,split=1,eba3e2a1e8"],
}


def test_registered():
    assert "tt" in REPRODUCTIONS and reproduction("tt") is tt


def test_the_tt_choice_is_least_memory_within_the_accuracy_tolerance_never_the_memory_target():
    trials = [{"validation_accuracy": 96.0, "memory_bits": 20_000},
              {"validation_accuracy": 95.1, "memory_bits": 12_000},   # within 3 pt of 98: the least memory wins
              {"validation_accuracy": 94.0, "memory_bits": 5_000},    # 400x+, but 4 pt below: not chosen
              {"validation_accuracy": 95.5, "memory_bits": 12_000}]   # same memory as #1, more accurate: preferred
    index, rule = tt.choose_tt(trials, 98.0)
    assert index == 3 and "least memory" in rule
    index, rule = tt.choose_tt(trials, 99.5)  # nothing within 3 pt: the most accurate
    assert index == 0 and "most accurate" in rule


def test_the_baseline_choice_is_the_most_accurate_and_ties_go_to_the_smaller_step():
    trials = [{"validation_accuracy": 95.0, "lr": 1e-2, "weight_decay": 0.0},
              {"validation_accuracy": 96.0, "lr": 3e-2, "weight_decay": 0.0},
              {"validation_accuracy": 96.0, "lr": 3e-3, "weight_decay": 0.0}]
    assert tt.choose_baseline(trials) == 2


def test_bad_seeds_are_refused_before_training(tmp_path):
    for seeds in ([0, 0], [0, TUNING_SEED]):
        with pytest.raises(ValueError, match="seeds"):
            tt.run(tmp_path / "report", smoke=True, progress=False, seeds=seeds)
    assert not (tmp_path / "report" / "results.json").exists()


def test_jobs_round_trip_through_task_data_and_keep_their_cache_keys():
    job = tt.Job(arm=MAIN_ARM, seed=3, split_seed=0, lr=1e-2, prior=budget(smoke=True).tt_grid[0].prior(),
                 tuning=True)
    assert tt.Job.from_dict(json.loads(json.dumps(job.to_dict()))) == job
    task = tt.job_task(budget(smoke=True), job, smoke=True)
    assert task.function == "codesign.reproduce.tt:train_task"  # cached tasks name it: never move it
    assert task.key.startswith(f"tune,{MAIN_ARM},seed=3,split=0,") and len(task.key.rsplit(",", 1)[1]) == 10
    assert task.kwargs == {"smoke": True, "digest": budget_digest(budget(smoke=True)), "job": job.to_dict()}
    with pytest.raises(ValueError, match="budget changed"):
        tt.train_task(smoke=True, digest="0" * 16, job=job.to_dict())
    with pytest.raises(ValueError, match="prior"):  # a prior arm without its prior is refused, not trained
        tt.train_job(budget(smoke=True), replace(job, prior=None))


def test_earlier_arms_keep_their_task_keys_and_the_later_arms_get_their_own():
    """The arms before the tracked one keep their keys; the tracked arm and the exact hand-off's get their own."""
    full = budget(smoke=False)
    tuning = tt.Job(arm=MAIN_ARM, seed=0, split_seed=0, lr=1e-2, prior=full.tt_grid[1].prior(), tuning=True)
    assert tt.job_task(full, tuning, smoke=False).key == "tune,tt-fixed-prior,seed=0,split=0,998b897324"
    later = (FIXED_PRIOR_TRACKED, FIXED_PRIOR_EXACT_HAND_OFF)
    for smoke, before in KEYS_BEFORE_TRACKED.items():
        b = budget(smoke)
        jobs = tt.evaluation_jobs([0, 4], b.baseline_grid[0], b.tt_grid[0])
        tasks = [tt.job_task(b, job, smoke=smoke) for job in jobs]
        keys = [task.key for task in tasks]
        assert [key for key in keys if key.split(",")[1] not in later] == before
        for arm in later:
            assert [key.rsplit(",", 1)[0] for key in keys if key.split(",")[1] == arm] == [
                f"eval,{arm},seed=0,split=0", f"eval,{arm},seed=4,split=1"]
        assert len(set(keys)) == len(keys)


def test_the_tracked_arm_is_the_proposal_with_tracked_scales(monkeypatch):
    """Same seed, split, learning rate and prior as the proposal's run; its TT model rounds at tracked scales."""
    full = budget(smoke=False)
    jobs = tt.evaluation_jobs([4], full.baseline_grid[0], full.tt_grid[2])
    proposal, tracked = (next(job for job in jobs if job.arm == arm) for arm in (MAIN_ARM, FIXED_PRIOR_TRACKED))
    assert replace(tracked, arm=MAIN_ARM) == proposal

    built = {}

    class Built(Exception):
        pass

    def capture(config, model, prior, **_):
        built[model.precision.scale_rule if model.precision else None] = (config, model, prior)
        raise Built

    monkeypatch.setattr(tt, "tt_trainer", capture)
    for job in (proposal, tracked):
        with pytest.raises(Built):
            tt.train_job(full, job)
    config_exact, model_exact, prior_exact = built["exact"]
    config_tracked, model_tracked, prior_tracked = built["tracked"]
    assert model_exact.precision == TTPrecision()
    assert model_tracked.precision == TTPrecision(scale_rule="tracked")  # its default momentum
    assert model_tracked.layers == model_exact.layers and prior_tracked == prior_exact == full.tt_grid[2].prior()
    assert config_tracked == config_exact


def test_every_arm_of_a_seed_trains_on_that_seed_s_split():
    full = budget(smoke=False)
    jobs = tt.evaluation_jobs([4, 0], full.baseline_grid[0], full.tt_grid[0])
    assert [(job.arm, job.seed, job.split_seed) for job in jobs] == [(arm, seed, seed % 3) for seed in (4, 0)
                                                                     for arm in ARMS]
    assert all((job.prior is not None) == arm_spec(job.arm).prior for job in jobs if job.arm in TT_ARMS)


@pytest.mark.slow
def test_smoke_reproduction_writes_the_report(tmp_path):
    seeds = [0, 1, 2, 3]
    payload = tt.run(tmp_path, smoke=True, progress=False, seeds=seeds)
    results = json.loads((tmp_path / "results.json").read_text())
    assert results == json.loads(json.dumps(payload))
    assert [arm["name"] for arm in results["arms"]] == list(ARMS)
    table = (tmp_path / "table.md").read_text()
    assert all(f"| {name}" in table for name in ARMS) and "TOST" in table and "| n |" in table
    assert (tmp_path / "plot.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    settings, extra = results["settings"], results["extra"]
    assert settings["validation_fraction"] == VALIDATION_FRACTION
    assert settings["budget"]["data"]["validation_fraction"] == VALIDATION_FRACTION
    assert settings["split_seeds"] == {str(s): s % 3 for s in seeds}
    assert (settings["tost_margin_pt"], settings["prior_margin_pt"]) == (TOST_MARGIN_PT, PRIOR_MARGIN_PT)
    assert (settings["route_margin_pt"], settings["scale_rule_margin_pt"]) == (ROUTE_MARGIN_PT, SCALE_RULE_MARGIN_PT)
    assert settings["chosen"][FIXED_PRIOR_TRACKED]["scales"].startswith("tracked")
    assert settings["chosen"][MAIN_ARM]["scales"].startswith("exact")
    for arm in ARMS:  # every run held out its validation split and trained on its seed's split
        rows = extra["per_seed"][arm]
        assert [(row["seed"], row["split_seed"]) for row in rows] == [(s, s % 3) for s in seeds]
        assert all(row["validation_accuracy"] is not None for row in rows)
    steps = {(arm["name"], row["seed"]): row["steps"] for arm in results["arms"] for row in arm["per_seed"]}
    assert len(set(steps.values())) == 1
    tuning = extra["tuning"]
    assert len(tuning["baseline_trials"]) == len(tuning["tt_trials"]) >= 2

    # trajectories: the initial ranks and one entry per epoch; the memory read off the last equals the model's
    smoke = budget(smoke=True)
    for arm in ARMS[1:]:
        for row, path in zip(extra["per_seed"][arm], extra["trajectories"][arm]):
            assert len(path["ranks"]) == len(path["memory_bits"]) == smoke.optim.epochs + 1
            assert path["memory_bits"][-1] == row["memory_bits"]
            if not arm_spec(arm).prior:
                assert path["prune_events"] == [] and len({json.dumps(r) for r in path["ranks"]}) == 1
    for arm in TT_ARMS:
        assert extra["trajectories"][arm][0]["ranks"][0] == initial_ranks(smoke)

    # comparisons: arm − baseline per seed with both intervals, n and the TOST; memory as baseline / arm bits
    accuracy = {arm["name"]: [row["test_accuracy"] for row in arm["per_seed"]] for arm in results["arms"]}
    dense = settings["dense_bits"]
    for arm, entry in results["comparisons"]["against_baseline"].items():
        differences = [a - b for a, b in zip(accuracy[arm], accuracy["fp32"])]
        difference = entry["accuracy_difference_pt"]
        assert difference["bootstrap"] == pytest.approx(bootstrap_interval(differences).as_dict())
        assert difference["t"] == pytest.approx(t_interval(differences).as_dict())
        assert difference["n"] == len(seeds) and difference["tost"]["margin"] == TOST_MARGIN_PT
        reduction = entry["memory_reduction"]["bootstrap"]
        assert reduction["mean"] == pytest.approx(sum(dense / b for b in extra["memory_bits"][arm]) / len(seeds))
    effect = results["comparisons"]["prior_effect"]["tt-fixed-prior vs tt-fixed-no-prior"]
    ratios = [b / a for a, b in zip(extra["memory_bits"]["tt-fixed-prior"], extra["memory_bits"]["tt-fixed-no-prior"])]
    assert effect["memory_reduction"]["bootstrap"]["mean"] == pytest.approx(sum(ratios) / len(ratios))
    assert effect["accuracy_difference_pt"]["tost"]["margin"] == PRIOR_MARGIN_PT
    scales = results["comparisons"]["scale_rule_effect"][f"{FIXED_PRIOR_TRACKED} vs {MAIN_ARM}"]
    differences = [a - b for a, b in zip(accuracy[FIXED_PRIOR_TRACKED], accuracy[MAIN_ARM])]
    assert scales["accuracy_difference_pt"]["values"] == pytest.approx(differences)
    assert scales["accuracy_difference_pt"]["tost"]["margin"] == SCALE_RULE_MARGIN_PT == 1.0
    assert scales["accuracy_difference_pt"]["n"] == len(seeds)
    assert f"| {FIXED_PRIOR_TRACKED} vs {MAIN_ARM} |" in table and f"TOST ±{SCALE_RULE_MARGIN_PT:g} pt" in table
    memory_target, accuracy_target, prior_target = results["targets"]
    main = results["comparisons"]["against_baseline"]["tt-fixed-prior"]
    assert memory_target["met"] == (main["memory_reduction"]["bootstrap"]["low"] >= 292)
    assert accuracy_target["met"] == main["accuracy_difference_pt"]["tost"]["equivalent"]
    assert results["all_targets_met"] == all(t["met"] for t in results["targets"])
    readme = results["readme"]
    assert readme["reproduction"].startswith("`tt` (") and "TOST" in readme["measured"] and "n = 4" in readme["measured"]
    met = [t["met"] for t in results["targets"]]
    if all(met) or not any(met):
        assert readme["verdict"] == ("met" if all(met) else "**not met**")
    else:  # names what was met, then what was not
        assert " met; " in readme["verdict"] and readme["verdict"].endswith("**not met**")
    assert extra["pruning"]["tt-fixed-prior"]["seeds"] == len(seeds)

    # every run is a cached task: a second run trains nothing and reports the same figures
    assert tuning["tasks"] == {"trained": 4, "cached": 0}
    again = tt.run(tmp_path, smoke=True, progress=False, seeds=seeds)
    assert again["extra"]["tuning"]["tasks"] == {"trained": 0, "cached": 4}
    assert again["comparisons"] == payload["comparisons"] and again["readme"] == payload["readme"]
    assert tt.headline(again).startswith(f"{MAIN_ARM}: ")
