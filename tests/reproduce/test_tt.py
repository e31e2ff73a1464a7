"""The ``tt`` reproduction runs end to end on its smoke budget and writes a consistent report."""

import json
from dataclasses import replace

import pytest
import torch

from codesign.reproduce import REPRODUCTIONS, reproduction, tt
from codesign.reproduce.common import TUNING_SEED
from codesign.reproduce.stats import bootstrap_interval
from codesign.train.data import synthetic_dataset


def test_registered():
    assert "tt" in REPRODUCTIONS and reproduction("tt") is tt


def test_validation_split_is_carved_from_the_training_split_only():
    data = synthetic_dataset(samples=200, seed=0)
    tuning = tt.validation_split(data)
    assert tuning.train_size + tuning.test_y.numel() == data.train_size
    train_rows = {tuple(row.flatten().tolist()) for row in data.train_x}
    test_rows = {tuple(row.flatten().tolist()) for row in data.test_x}
    validation_rows = {tuple(row.flatten().tolist()) for row in tuning.test_x}
    assert validation_rows <= train_rows and not validation_rows & test_rows
    assert torch.equal(torch.bincount(tuning.test_y, minlength=10), torch.full((10,), 3))  # stratified, 20 % of 15


def test_dense_bits_count_every_weight_and_bias_at_32_bits():
    full = tt.budget(smoke=False)
    assert tt.dense_bits(full) == 32 * (64 * 256 + 256 + 256 * 256 + 256 + 256 * 10 + 10)


def test_both_arms_get_the_same_number_of_tuning_trials():
    full = tt.budget(smoke=False)
    assert len(full.baseline_grid) == len(full.tt_grid) >= 4
    with pytest.raises(ValueError, match="as many trials"):
        replace(full, tt_grid=full.tt_grid[:-1])
    with pytest.raises(ValueError, match="warm-up"):
        replace(full, tt_grid=tuple(replace(t, warmup_epochs=full.optim.epochs) for t in full.tt_grid))


def test_initial_ranks_of_a_trial_replace_the_layers_ranks():
    b = tt.budget(smoke=True)
    assert tt.tt_layers(b) == b.tt_layers
    assert [spec.max_rank for spec in tt.tt_layers(b, ((3,), (2,)))] == [(3,), (2,)]
    with pytest.raises(ValueError, match="max_ranks"):
        tt.tt_layers(b, ((3,),))
    with pytest.raises(ValueError, match="max_rank"):
        replace(b, tt_grid=(b.tt_grid[0], replace(b.tt_grid[1], max_ranks=((3, 3), (2,)))))


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
    job = tt.Job(arm=tt.MAIN_ARM, seed=3, lr=1e-2, prior=tt.budget(smoke=True).tt_grid[0].prior(),
                 max_ranks=((3,), (2,)), tuning=True)
    assert tt.Job.from_dict(json.loads(json.dumps(job.to_dict()))) == job
    with pytest.raises(ValueError, match="budget changed"):
        tt.train_task(smoke=True, digest="0" * 16, job=job.to_dict())


@pytest.mark.slow
def test_smoke_reproduction_writes_the_report(tmp_path):
    payload = tt.run(tmp_path, smoke=True, progress=False, seeds=[0, 1])
    results = json.loads((tmp_path / "results.json").read_text())
    assert results == json.loads(json.dumps(payload))
    assert results["seeds"] == [0, 1]
    assert [arm["name"] for arm in results["arms"]] == ["fp32", "tt-lowp-prior", "tt-lowp-fixed-rank"]
    assert [arm["baseline"] for arm in results["arms"]] == [True, False, False]
    table = (tmp_path / "table.md").read_text()
    assert all(f"| {name}" in table for name in ("fp32 (baseline)", "tt-lowp-prior", "tt-lowp-fixed-rank"))
    assert (tmp_path / "plot.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    extra = results["extra"]
    # every arm trained the same steps
    steps = {(arm["name"], row["seed"]): row["steps"] for arm in results["arms"] for row in arm["per_seed"]}
    assert len(set(steps.values())) == 1
    # the same number of tuning trials for the baseline and the TT arm, all read on the validation split
    tuning = extra["tuning"]
    assert len(tuning["baseline_trials"]) == len(tuning["tt_trials"]) >= 2
    assert tuning["baseline"] in [{"lr": t["lr"], "weight_decay": t["weight_decay"]} for t in tuning["baseline_trials"]]
    # memory: dense bits are the fp32 model's; TT bits = 4 per core value + 8 per bias value of the final ranks
    dense = results["settings"]["dense_bits"]
    assert extra["memory_bits"]["fp32"] == [dense, dense]
    budget = tt.budget(smoke=True)
    tt_bits = []
    for row in extra["per_seed"]["tt-lowp-prior"]:
        core_values = 0
        for spec, layer in zip(budget.tt_layers, ("layers.0", "layers.1")):
            r = row["final_ranks"][layer]
            core_values += sum(r[k] * spec.out_modes[k] * spec.in_modes[k] * r[k + 1] for k in range(len(spec.in_modes)))
        tt_bits.append(4 * core_values + 8 * (16 + 10))
    assert extra["memory_bits"]["tt-lowp-prior"] == tt_bits

    # comparisons: technique − baseline per seed, bootstrap interval over seeds
    accuracy = {arm["name"]: [row["test_accuracy"] for row in arm["per_seed"]] for arm in results["arms"]}
    comparisons = {c["arm"]: c for c in results["comparisons"]}
    assert list(comparisons) == ["tt-lowp-prior", "tt-lowp-fixed-rank"]
    for arm, comparison in comparisons.items():
        assert set(comparison) == {"arm", "baseline", "accuracy_difference", "memory_reduction", "verdict"}
        assert comparison["baseline"] == "fp32"
        expected = bootstrap_interval([a - b for a, b in zip(accuracy[arm], accuracy["fp32"])])
        assert comparison["accuracy_difference"] == pytest.approx(expected.as_dict())
        assert comparison["accuracy_difference"]["n"] == 2
        reduction = comparison["memory_reduction"]
        assert reduction["mean"] == pytest.approx(sum(dense / bits for bits in extra["memory_bits"][arm]) / 2)
        assert reduction["low"] <= reduction["mean"] <= reduction["high"]
    # the targets are judged on the intervals, and the README row says so
    difference, reduction = (comparisons["tt-lowp-prior"][key] for key in ("accuracy_difference", "memory_reduction"))
    memory_target, accuracy_target = results["targets"]
    assert memory_target["met"] == (reduction["low"] >= 292)
    assert accuracy_target["met"] == (difference["low"] >= -3)
    assert results["all_targets_met"] == (memory_target["met"] and accuracy_target["met"])
    readme = results["readme"]
    assert set(readme) == {"reproduction", "target", "measured", "verdict"}
    assert readme["reproduction"].startswith("`tt` (")
    assert "95 % CI" in readme["measured"]
    if results["all_targets_met"]:
        assert readme["verdict"] == "met"
    elif not (memory_target["met"] or accuracy_target["met"]):
        assert readme["verdict"] == "**not met**"
    else:
        assert "**not met**" in readme["verdict"] and readme["verdict"] != "**not met**"
    # ranks over training: the initial ranks and one entry per epoch
    history = extra["rank_history"][0]
    assert len(history) == budget.optim.epochs + 1
    assert history[-1] == extra["per_seed"]["tt-lowp-prior"][0]["final_ranks"]

    # every run is a cached task: a second run trains nothing and reports the same figures
    assert tuning["tasks"] == {"trained": 4, "cached": 0}
    again = tt.run(tmp_path, smoke=True, progress=False, seeds=[0, 1])
    assert again["extra"]["tuning"]["tasks"] == {"trained": 0, "cached": 4}
    assert again["comparisons"] == payload["comparisons"] and again["readme"] == payload["readme"]
