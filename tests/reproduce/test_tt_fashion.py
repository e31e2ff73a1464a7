"""The ``tt-fashion`` reproduction end to end on its smoke budget: one start per seed, the report, resuming from the
task cache, its cached tasks' keys."""

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from codesign.design.families.tt import PAPER_LAYERS
from codesign.loops.npm_data import NPM_DATASETS, cached_path
from codesign.reproduce import REPRODUCTIONS, reproduction, tt_fashion
from codesign.reproduce.common import Execution
from codesign.reproduce.protocol import TUNING_SEED
from codesign.reproduce.readme import committed
from codesign.reproduce.tt_fashion_budget import ARMS, MAIN_ARM, budget, digest, fixed_setup
from codesign.reproduce.tt_fashion_train import (Job, _torch_start, carry_over, data_of, shared_start,
                                                 train_task)

FETCHED = all(cached_path(name).is_file() for name in NPM_DATASETS)
needs_data = pytest.mark.skipif(not FETCHED, reason="the data sets are not fetched: run `codesign setup`")
SEEDS = [0, 1, 2]


def test_registered_with_the_interface_of_every_reproduction():
    assert "tt-fashion" in REPRODUCTIONS and reproduction("tt-fashion") is tt_fashion
    assert callable(tt_fashion.run) and callable(tt_fashion.headline)


@pytest.fixture(scope="module")
def smoke(tmp_path_factory):
    """(report folder, payload) of a smoke run at three seeds, trained in this process (every test that takes it
    is marked ``needs_data``)."""
    out = tmp_path_factory.mktemp("tt-fashion") / "report"
    return out, tt_fashion.run(out, seeds=SEEDS, smoke=True, progress=False)


@needs_data
@pytest.mark.slow  # the smoke run: 15 s
def test_the_smoke_run_writes_its_report(smoke):
    out, payload = smoke
    assert {path.name for path in out.iterdir()} >= {"results.json", "table.md", "plot.png", "tasks"}
    assert json.loads((out / "results.json").read_text()) == json.loads(json.dumps(payload))
    runs = payload["extra"]["runs"]
    assert list(runs) == list(ARMS) and all([run["seed"] for run in runs[arm]] == SEEDS for arm in ARMS)
    epochs = budget(smoke=True).optim.epochs
    for arm in ARMS:  # the test split after every epoch, counted and charged
        assert all(run["macs"]["test_passes"] == epochs and 0 < run["macs"]["test_share"] < 1 for run in runs[arm])
    assert payload["tests"][MAIN_ARM]["best_validation"]["n"] == 3
    assert payload["cost"]["tasks"] == {"trained": 21, "cached": 0}  # 3 trials + reference, 6 arms x 3 seeds less
    assert len(payload["cost"]["task_seconds"]["trials and untuned arms"]) == 21  # the tuned arm (the proposal's)
    order = payload["mode_order"]  # the proposal at each layer's order of fewest step products, against ours
    macs = order["training_macs_per_sample"]
    assert macs["tt-fixed-prior-fewest"] < macs["tt-fixed-prior"] and order["tost"]["n"] == 3
    assert order["modes"]["tt-fixed-prior"] == PAPER_LAYERS != order["modes"]["tt-fixed-prior-fewest"]
    table = (out / "table.md").read_text()
    assert "89.27" in table and "84.86" in table and "292x" in table and "H0: mu <= -5.41 pt" in table
    assert "Cost of the study on 2 cores" in table
    assert tt_fashion.headline(payload).startswith(f"{MAIN_ARM}: ")
    with pytest.raises(ValueError, match="smoke"):  # a smoke report never enters results/README.md
        committed(out.parent, "report")


@needs_data
@pytest.mark.slow  # the smoke run: 15 s
def test_the_tuned_arm_is_trained_at_the_chosen_weight(smoke):
    _, payload = smoke
    tuning = payload["extra"]["tuning"]
    assert [t["prior_weight"] for t in tuning["trials"]] == list(budget(smoke=True).weight_grid)
    runs = payload["extra"]["runs"]["tt-fixed-prior-tuned"]
    assert {run["prior_weight"] for run in runs} == {tuning["chosen_weight"]}


@needs_data
def test_every_tt_arm_of_a_seed_starts_from_the_same_cores():
    b = budget(smoke=True)
    start = shared_start(b, 1)
    model = _torch_start(b, Job(kind="tt-float", seed=1, prior_weight=1.0))
    for cores, layer in zip(start.cores, model.layers):
        assert all(np.array_equal(core, parameter.detach().numpy()) for core, parameter in zip(cores, layer.cores))
    assert all(np.array_equal(a, c) for a, c in zip(shared_start(b, 1).cores[0], start.cores[0]))
    assert not np.array_equal(shared_start(b, 2).cores[0][0], start.cores[0][0])  # another seed, another start


@needs_data
def test_the_fashion_phase_continues_the_pretrained_model():
    b = budget(smoke=True)
    pre = shared_start(b, 0)
    mnist, fashion = data_of(b, pretrain=True), data_of(b, pretrain=False)
    pre.fit(mnist, progress=False)
    follow = type(pre)(fixed_setup(b, 0, pretrain=False, prior_weight=1.0))
    assert not np.array_equal(follow.logits(fashion.test_x), pre.logits(fashion.test_x))
    carry_over(pre, follow)
    assert np.array_equal(follow.logits(fashion.test_x), pre.logits(fashion.test_x))  # the same model, bit for bit
    assert follow.step == 0 and follow.optimizer.moments == {}  # a fresh Adam for the new task


@needs_data
@pytest.mark.slow  # the smoke run: 15 s
def test_a_rerun_trains_nothing_twice_and_a_lost_run_is_trained_again(smoke, tmp_path):
    out, payload = smoke
    copy = tmp_path / "report"
    shutil.copytree(out, copy)
    again = tt_fashion.run(copy, seeds=SEEDS, smoke=True, progress=False)
    assert again["cost"]["tasks"] == {"trained": 0, "cached": 21}
    assert again["comparisons"] == payload["comparisons"] and again["extra"]["tuning"] == payload["extra"]["tuning"]
    lost = next((copy / "tasks" / "results").glob("eval,tt-fixed,prior=0,seed=1,*.json"))
    lost.unlink()  # as a run killed before this task finished leaves it
    resumed = tt_fashion.run(copy, seeds=SEEDS, smoke=True, progress=False, execution=Execution())
    assert resumed["cost"]["tasks"] == {"trained": 1, "cached": 20}
    assert resumed["comparisons"] == payload["comparisons"]  # the golden is exact: the same run again


def test_cached_tasks_are_keyed_by_what_they_train():
    b = budget(smoke=True)
    job = tt_fashion.arm_job("tt-fixed-prior-tuned", 2, 3.0)
    assert job == Job(kind="tt-fixed", seed=2, prior_weight=3.0)
    assert tt_fashion.arm_job("tt-fixed-prior", 2) == Job(kind="tt-fixed", seed=2, prior_weight=1.0)
    assert tt_fashion.arm_job("fp32", 2, 3.0) == Job(kind="fp32", seed=2)
    fewest = tt_fashion.arm_job("tt-fixed-prior-fewest", 2)
    assert fewest == Job(kind="tt-fixed", seed=2, prior_weight=1.0, modes="fewest")
    assert tt_fashion.job_task(b, fewest, smoke=True).key.startswith("eval,tt-fixed,prior=1,modes=fewest,seed=2,")
    assert "modes" not in job.to_dict() and fewest.to_dict()["modes"] == "fewest"  # older keys stay as they were
    with pytest.raises(ValueError, match="modes"):  # another order is the golden's alone
        Job(kind="tt-float", seed=0, modes="fewest")
    task = tt_fashion.job_task(b, job, smoke=True)
    assert task.function == "codesign.reproduce.tt_fashion_train:train_task"  # cached tasks name it: never move it
    assert task.key.startswith("eval,tt-fixed,prior=3,seed=2,") and len(task.key.rsplit(",", 1)[1]) == 10
    assert tt_fashion.job_task(b, Job(kind="fp32", seed=TUNING_SEED), smoke=True).key.startswith("tune,fp32,")
    assert task.kwargs == {"smoke": True, "digest": digest(b), "job": job.to_dict()}
    assert Job.from_dict(json.loads(json.dumps(job.to_dict()))) == job
    with pytest.raises(ValueError, match="budget changed"):
        train_task(smoke=True, digest="0" * 16, job=job.to_dict())
    with pytest.raises(ValueError, match="prior_weight"):  # the dense model has no prior
        Job(kind="fp32", seed=0, prior_weight=1.0)
    with pytest.raises(ValueError, match="kind"):
        Job(kind="tt-double", seed=0)


def test_the_committed_runs_are_the_cached_tasks_of_the_code_as_it_stands():
    """Every run in results/tt-fashion/tasks (about 18 h of CPU) is a task the full study asks for now, under the
    same key: a field added to what a run trains with (as ``TTPrecision.hand_off``, left out of the keys at its
    default) must not orphan them."""
    results = Path(__file__).resolve().parents[2] / "results" / "tt-fashion"
    payload = json.loads((results / "results.json").read_text(encoding="utf-8"))
    b = budget(smoke=False)
    jobs = tt_fashion.tuning_jobs(b) + [job for arm_jobs in tt_fashion.evaluation_jobs(
        payload["seeds"], payload["extra"]["tuning"]["chosen_weight"]).values() for job in arm_jobs]
    keys = {tt_fashion.job_task(b, job, smoke=False).key for job in jobs}
    committed_keys = {path.stem for path in (results / "tasks" / "results").glob("*.json")}
    assert len(committed_keys) == 22 and committed_keys == keys


def test_the_tuned_arm_at_the_papers_weight_reuses_the_proposals_runs():
    jobs = tt_fashion.evaluation_jobs([0, 1, 2], 1.0)
    assert jobs["tt-fixed-prior-tuned"] == jobs["tt-fixed-prior"]
    assert "tt-fixed-prior-tuned" not in tt_fashion.evaluation_jobs([0], None)
    assert len(tt_fashion.tuning_jobs(budget(smoke=False))) == 4  # three weights and the fp32 reference


def test_bad_seeds_are_refused_before_training(tmp_path):
    for seeds in ([0, 0], [0, TUNING_SEED]):
        with pytest.raises(ValueError, match="seeds"):
            tt_fashion.run(tmp_path / "report", smoke=True, progress=False, seeds=seeds)
    assert not (tmp_path / "report" / "results.json").exists()


@needs_data
def test_the_study_is_estimated_from_measured_steps():
    estimate = tt_fashion.estimate_study(smoke=True, seeds=[0, 1, 2], repeats=1)
    assert set(estimate["step_ms"]) == {"fp32 prior=0 seed=0", "tt-float prior=0 seed=0", "tt-float prior=1 seed=0",
                                        "tt-fixed prior=0 seed=0", "tt-fixed prior=1 seed=0"}
    assert estimate["runs"] == 21 and all(value > 0 for value in estimate["step_ms"].values())
    assert 0 < estimate["two_worker_hours"] <= estimate["cpu_hours"] < 2 * estimate["two_worker_hours"] + 1e-9
    assert estimate["two_worker_hours_with_tuned_arm"] > estimate["two_worker_hours"]
