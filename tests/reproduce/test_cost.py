"""Every pass of a run charged once: training from the ledger, each evaluation pass at the training forward cost."""

import dataclasses

import pytest

from codesign.reproduce.cost import (COST_KEYS, E2TRAIN_ACCOUNTING, EvaluationPasses, PaperAccounting, charged_cost,
                                     data_sizes, every_test_charged)


def test_every_pass_is_charged_once_training_from_the_ledger_evaluation_at_the_forward_cost_per_image(study):
    _, _, runs, _ = study
    run = runs["base"][0]
    # the MLP 64 -> 16 -> 10 forwards 64 x 16 + 16 x 10 MACs per image
    per_image = 64 * 16 + 16 * 10
    sizes = data_sizes(run.config)
    assert sizes["train"] + sizes["validation"] + sizes["test"] == 60 and sizes["validation"] > 0
    assert run.cost["by_phase"]["forward"]["macs"] == per_image * sizes["train"] * run.config["optim"]["epochs"]
    charged = charged_cost(run, sizes)
    evaluated = run.config["optim"]["epochs"] * sizes["validation"] + sizes["test"]
    assert charged["macs"] == pytest.approx(run.cost["total"]["macs"] + per_image * evaluated)
    assert 0 < charged["evaluation_share"] < 1
    assert charged["energy_pj"] > run.energy_pj


def test_forward_passes_over_non_training_images_do_not_raise_the_evaluation_price(study):
    _, _, runs, _ = study
    run = runs["base"][0]
    sizes = data_sizes(run.config)
    plain = charged_cost(run, sizes)
    half = run.cost["by_phase"]["forward"]["macs"] // 2  # as if half the forward MACs were a pruning search's
    searched = dataclasses.replace(run, techniques={"compress": {"search_forward_macs": half}})
    charged = charged_cost(searched, sizes)
    for key in ("macs", "energy_pj"):
        evaluation = plain[key] - run.cost["total"][key]
        assert charged[key] - run.cost["total"][key] == pytest.approx(evaluation / 2)


def test_a_paper_counts_one_of_the_charged_totals():
    assert E2TRAIN_ACCOUNTING.key == "compute_pj"
    with pytest.raises(ValueError, match="key"):
        PaperAccounting(key="joules", name="x", citation="y")


def test_every_test_pass_charged_by_hand():
    # 100 pJ charged for 3 x 10 validation + 20 test images: 2 pJ per image; two more test passes add 80 pJ
    passes = EvaluationPasses(epochs=3, validation=10, test=20)
    assert passes.charged_images == 50
    assert every_test_charged(1100.0, 1000.0, passes) == pytest.approx(1180.0)
    assert every_test_charged(1100.0, 1000.0, EvaluationPasses(epochs=1, validation=10, test=20)) == 1100.0
    with pytest.raises(ValueError, match="exceeds"):
        every_test_charged(900.0, 1000.0, passes)
    with pytest.raises(ValueError, match="test must be >= 1"):
        EvaluationPasses(epochs=3, validation=10, test=0)
    with pytest.raises(ValueError, match="epochs"):
        EvaluationPasses(epochs=0, validation=10, test=20)


def test_the_charged_cost_gives_every_key_with_every_test_pass_charged_too(study):
    _, _, runs, _ = study
    run = runs["base"][0]
    sizes = data_sizes(run.config)
    config = {**run.config, "optim": {**run.config["optim"], "epochs": 3}}  # as if it had evaluated three times
    longer = dataclasses.replace(run, config=config)
    charged = charged_cost(longer, sizes)
    for key in COST_KEYS:
        per_image = (charged[key] - longer.cost["total"][key]) / (3 * sizes["validation"] + sizes["test"])
        assert charged[f"{key}_every_test"] == pytest.approx(charged[key] + 2 * sizes["test"] * per_image)
        assert charged[f"{key}_every_test"] > charged[key]
    assert charged_cost(run, sizes)["energy_pj_every_test"] == charged_cost(run, sizes)["energy_pj"]  # one epoch
