"""The ``tt`` reproduction runs end to end on its smoke budget and writes a consistent report."""

import json

import pytest
import torch

from codesign.reproduce import REPRODUCTIONS, reproduction, tt
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


@pytest.mark.slow
def test_smoke_reproduction_writes_the_report(tmp_path):
    payload = tt.run(tmp_path, smoke=True, progress=False)
    results = json.loads((tmp_path / "results.json").read_text())
    assert results == json.loads(json.dumps(payload))
    assert [arm["name"] for arm in results["arms"]] == ["fp32", "tt-lowp-prior", "tt-lowp-fixed-rank"]
    assert [arm["baseline"] for arm in results["arms"]] == [True, False, False]
    table = (tmp_path / "table.md").read_text()
    assert all(f"| {name}" in table for name in ("fp32 (baseline)", "tt-lowp-prior", "tt-lowp-fixed-rank"))
    assert (tmp_path / "plot.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    extra = results["extra"]
    # every arm trained the same steps
    steps = {arm["name"]: arm["per_seed"][0]["steps"] for arm in results["arms"]}
    assert len(set(steps.values())) == 1
    # the same number of tuning trials for the baseline and the TT arm, all read on the validation split
    tuning = extra["tuning"]
    assert len(tuning["baseline_trials"]) == len(tuning["tt_trials"]) >= 2
    assert tuning["baseline_lr"] in [t["lr"] for t in tuning["baseline_trials"]]
    # memory: dense bits are the fp32 model's, the ratio is dense / TT bits per seed
    dense = results["settings"]["dense_bits"]
    assert extra["memory_bits"]["fp32"] == [dense]
    (tt_bits,) = extra["memory_bits"]["tt-lowp-prior"]
    assert extra["reduction"]["tt-lowp-prior"] == [pytest.approx(dense / tt_bits)]
    # TT bits = 4 per core value + 8 per bias value of the final (pruned) ranks
    ranks = extra["per_seed"]["tt-lowp-prior"][0]["final_ranks"]
    budget = tt.budget(smoke=True)
    core_values = 0
    for spec, layer in zip(budget.tt_layers, ("layers.0", "layers.1")):
        r = ranks[layer]
        core_values += sum(r[k] * spec.out_modes[k] * spec.in_modes[k] * r[k + 1] for k in range(len(spec.in_modes)))
    assert tt_bits == 4 * core_values + 8 * (16 + 10)
    # the target is judged on the reported figures
    drop = extra["drop_pt"]["tt-lowp-prior"][0]
    arms = {arm["name"]: arm for arm in results["arms"]}
    assert drop == pytest.approx(arms["fp32"]["per_seed"][0]["test_accuracy"]
                                 - arms["tt-lowp-prior"]["per_seed"][0]["test_accuracy"])
    assert results["targets"][0]["met"] == (dense / tt_bits >= 292 and drop <= 3)
    # ranks over training: the initial ranks and one entry per epoch
    (history,) = extra["rank_history"]
    assert len(history) == budget.optim.epochs + 1
    assert history[-1] == ranks
