"""The ``tt`` reproduction: four TT arms from one large start, its tuning rule, and an end-to-end smoke report."""

import json
from dataclasses import replace

import pytest

from codesign.reproduce import REPRODUCTIONS, reproduction, tt
from codesign.reproduce.common import TUNING_SEED, VALIDATION_FRACTION
from codesign.reproduce.stats import bootstrap_interval, t_interval


def test_registered():
    assert "tt" in REPRODUCTIONS and reproduction("tt") is tt


def test_dense_bits_count_every_weight_and_bias_at_32_bits():
    full = tt.budget(smoke=False)
    assert tt.dense_bits(full) == 32 * (64 * 256 + 256 + 256 * 256 + 256 + 256 * 10 + 10)


def test_the_four_table1_arms_share_one_large_start_and_differ_in_precision_and_prior():
    full = tt.budget(smoke=False)
    specs = {arm: tt.arm_spec(arm, full) for arm in tt.TT_ARMS}
    assert {spec.max_ranks for spec in specs.values()} == {None}  # the budget's large start, for every arm
    table1 = [specs[arm] for arm in tt.TT_ARMS if arm != tt.FIXED_PRIOR_DENSE]
    assert sorted((spec.lowp, spec.prior) for spec in table1) == [(False, False), (False, True), (True, False),
                                                                  (True, True)]
    assert {spec.route for spec in table1} == {"direct"}
    # the proposal again, its core gradients through the dense weight gradient; paired against it
    dense = specs[tt.FIXED_PRIOR_DENSE]
    assert (dense.lowp, dense.prior, dense.route) == (True, True, "dense")
    assert tt.ROUTE_PAIRS == ((tt.FIXED_PRIOR_DENSE, tt.FIXED_PRIOR),)
    assert full.hand_picked_ranks == tt.HAND_PICKED_RANKS == ((4, 4, 4), (4, 2, 4), (4, 4, 4))
    # rank 8 where the modes allow it; the last layer's first rank is cut to 1 * 4 by its (1, 4) first core
    assert tt.initial_ranks(full) == {"layers.0": [1, 8, 8, 8, 1], "layers.1": [1, 8, 8, 8, 1],
                                      "layers.2": [1, 4, 8, 8, 1]}
    with pytest.raises(ValueError, match="arm"):
        tt.arm_spec("tt-other", full)


def test_memory_of_ranks_counts_4_bit_cores_and_8_bit_biases():
    full = tt.budget(smoke=False)
    ranks = tt.initial_ranks(full, tt.HAND_PICKED_RANKS)
    # cores r_{k-1} m_k n_k r_k: layer 0 32+256+256+32, layer 1 64+128+128+64, layer 2 16+64+128+80; biases 256+256+10
    cores = (32 + 256 + 256 + 32) + (64 + 128 + 128 + 64) + (16 + 64 + 128 + 80)
    assert tt.ranks_memory_bits(full, ranks, lowp=True) == 4 * cores + 8 * 522
    assert tt.ranks_memory_bits(full, ranks, lowp=False) == 32 * cores + 32 * 522
    assert tt.dense_bits(full) / tt.ranks_memory_bits(full, ranks, lowp=True) == pytest.approx(296.69, abs=0.01)
    # the large start is far from the target: the prior has to prune to get there
    assert tt.dense_bits(full) / tt.ranks_memory_bits(full, tt.initial_ranks(full), lowp=True) < 120


def test_both_arms_get_the_same_number_of_tuning_trials_and_every_run_holds_out_validation():
    full = tt.budget(smoke=False)
    assert len(full.baseline_grid) == len(full.tt_grid) >= 4
    assert full.data.validation_fraction == VALIDATION_FRACTION > 0
    with pytest.raises(ValueError, match="as many trials"):
        replace(full, tt_grid=full.tt_grid[:-1])
    with pytest.raises(ValueError, match="warm-up"):
        replace(full, tt_grid=tuple(replace(t, warmup_epochs=full.optim.epochs) for t in full.tt_grid))
    with pytest.raises(ValueError, match="validation"):
        replace(full, data=replace(full.data, validation_fraction=0.0))
    config = tt.train_config(full, 3, 1e-2, split_seed=2)
    assert config.data.validation_fraction == VALIDATION_FRACTION and config.data.split_seed == 2


def test_the_tt_choice_is_least_memory_within_the_accuracy_tolerance_never_the_memory_target():
    trials = [{"validation_accuracy": 96.0, "memory_bits": 20_000},
              {"validation_accuracy": 95.1, "memory_bits": 12_000},   # within 3 pt of 98: the least memory wins
              {"validation_accuracy": 94.0, "memory_bits": 5_000},    # 400x+, but 4 pt below: not chosen
              {"validation_accuracy": 95.5, "memory_bits": 12_000}]   # same memory as #1, more accurate: preferred
    index, rule = tt.choose_tt(trials, 98.0)
    assert index == 3 and "least memory" in rule
    index, rule = tt.choose_tt(trials, 99.5)  # nothing within 3 pt: the most accurate
    assert index == 0 and "most accurate" in rule


def test_seeds_cycle_through_three_resampled_splits():
    assert [tt.split_seed_of(seed) for seed in range(6)] == [0, 1, 2, 0, 1, 2]
    assert len(set(tt.SPLIT_SEEDS)) == 3


def test_bad_trials_and_seeds_are_refused_before_training(tmp_path):
    with pytest.raises(ValueError, match="weight"):
        tt.TTTrial(lr=1e-2, prior_weight=-1.0, threshold=0.1, warmup_epochs=1)
    with pytest.raises(ValueError, match="lr"):
        tt.BaselineTrial(lr=0.0, weight_decay=0.0)
    for seeds in ([0, 0], [0, TUNING_SEED]):
        with pytest.raises(ValueError, match="seeds"):
            tt.run(tmp_path / "report", smoke=True, progress=False, seeds=seeds)
    assert not (tmp_path / "report" / "results.json").exists()


def test_jobs_round_trip_through_task_data():
    job = tt.Job(arm=tt.MAIN_ARM, seed=3, split_seed=0, lr=1e-2, prior=tt.budget(smoke=True).tt_grid[0].prior(),
                 tuning=True)
    assert tt.Job.from_dict(json.loads(json.dumps(job.to_dict()))) == job
    with pytest.raises(ValueError, match="budget changed"):
        tt.train_task(smoke=True, digest="0" * 16, job=job.to_dict())
    with pytest.raises(ValueError, match="prior"):  # a prior arm without its prior is refused, not trained
        tt.train_job(tt.budget(smoke=True), replace(job, prior=None))


@pytest.mark.slow
def test_smoke_reproduction_writes_the_report(tmp_path):
    seeds = [0, 1, 2, 3]
    payload = tt.run(tmp_path, smoke=True, progress=False, seeds=seeds)
    results = json.loads((tmp_path / "results.json").read_text())
    assert results == json.loads(json.dumps(payload))
    assert [arm["name"] for arm in results["arms"]] == list(tt.ARMS)
    table = (tmp_path / "table.md").read_text()
    assert all(f"| {name}" in table for name in tt.ARMS) and "TOST" in table and "| n |" in table
    assert (tmp_path / "plot.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    settings, extra = results["settings"], results["extra"]
    assert settings["validation_fraction"] == VALIDATION_FRACTION
    assert settings["budget"]["data"]["validation_fraction"] == VALIDATION_FRACTION
    assert settings["split_seeds"] == {str(s): s % 3 for s in seeds}
    assert (settings["tost_margin_pt"], settings["prior_margin_pt"]) == (tt.TOST_MARGIN_PT, tt.PRIOR_MARGIN_PT)
    for arm in tt.ARMS:  # every run held out its validation split and trained on its seed's split
        rows = extra["per_seed"][arm]
        assert [(row["seed"], row["split_seed"]) for row in rows] == [(s, s % 3) for s in seeds]
        assert all(row["validation_accuracy"] is not None for row in rows)
    steps = {(arm["name"], row["seed"]): row["steps"] for arm in results["arms"] for row in arm["per_seed"]}
    assert len(set(steps.values())) == 1
    tuning = extra["tuning"]
    assert len(tuning["baseline_trials"]) == len(tuning["tt_trials"]) >= 2

    # trajectories: the initial ranks and one entry per epoch; the memory read off the last equals the model's
    budget = tt.budget(smoke=True)
    for arm in tt.ARMS[1:]:
        for row, path in zip(extra["per_seed"][arm], extra["trajectories"][arm]):
            assert len(path["ranks"]) == len(path["memory_bits"]) == budget.optim.epochs + 1
            assert path["memory_bits"][-1] == row["memory_bits"]
            if not tt.arm_spec(arm, budget).prior:
                assert path["prune_events"] == [] and len({json.dumps(r) for r in path["ranks"]}) == 1
    for arm in tt.TT_ARMS:
        assert extra["trajectories"][arm][0]["ranks"][0] == tt.initial_ranks(budget)

    # comparisons: arm − baseline per seed with both intervals, n and the TOST; memory as baseline / arm bits
    accuracy = {arm["name"]: [row["test_accuracy"] for row in arm["per_seed"]] for arm in results["arms"]}
    dense = settings["dense_bits"]
    for arm, entry in results["comparisons"]["against_baseline"].items():
        differences = [a - b for a, b in zip(accuracy[arm], accuracy["fp32"])]
        difference = entry["accuracy_difference_pt"]
        assert difference["bootstrap"] == pytest.approx(bootstrap_interval(differences).as_dict())
        assert difference["t"] == pytest.approx(t_interval(differences).as_dict())
        assert difference["n"] == len(seeds) and difference["tost"]["margin"] == tt.TOST_MARGIN_PT
        reduction = entry["memory_reduction"]["bootstrap"]
        assert reduction["mean"] == pytest.approx(sum(dense / b for b in extra["memory_bits"][arm]) / len(seeds))
    effect = results["comparisons"]["prior_effect"]["tt-fixed-prior vs tt-fixed-no-prior"]
    ratios = [b / a for a, b in zip(extra["memory_bits"]["tt-fixed-prior"], extra["memory_bits"]["tt-fixed-no-prior"])]
    assert effect["memory_reduction"]["bootstrap"]["mean"] == pytest.approx(sum(ratios) / len(ratios))
    assert effect["accuracy_difference_pt"]["tost"]["margin"] == tt.PRIOR_MARGIN_PT
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
