"""``tt-fashion``'s budget: the example's settings, memory by hand, compute against the ledger, the time plan."""

import dataclasses
import math

import pytest
import torch

from codesign.design.families.tt import PAPER_LAYERS
from codesign.design.point import load_design
from codesign.loops.tt import TtMlpTrainer
from codesign.reproduce.tt_budget import dense_bits, ranks_memory_bits
from codesign.reproduce.tt_fashion_budget import (INITIAL_RANK, PAPER_PRIOR_WEIGHT, budget, fixed_setup,
                                                  macs_per_sample, memory_bits, plan_seconds, start_ranks)
from codesign.resources import data_dir
from codesign.train.tt import TTPrecision

START = {"layers.0": [1, 16, 16, 16, 1], "layers.1": [1, 8, 16, 16, 1]}  # rank 16, cut where the modes allow less
PRUNED = {"layers.0": [1, 4, 6, 4, 1], "layers.1": [1, 2, 3, 2, 1]}


def test_the_full_budget_is_the_example_config():
    """examples/fashion_tt.toml is paper 003's configuration: the study trains what it says."""
    design = load_design(data_dir("examples") / "fashion_tt.toml")
    training, b = design.training, budget(smoke=False)
    tt = training.techniques["tt"]
    assert (training.data.name, training.data.pad_to) == (b.data.name, b.data.pad_to) == ("fashion-mnist", 32)
    assert training.data.validation_fraction == b.data.validation_fraction
    assert (training.optim.epochs, training.optim.batch_size, training.optim.lr, training.optim.weight_decay,
            training.optim.schedule) == (b.optim.epochs, b.optim.batch_size, b.optim.lr, b.optim.weight_decay,
                                         b.optim.schedule) == (30, 64, 1e-3, 0.0, "cosine")
    assert tuple(training.model.hidden) == b.hidden == (512,)
    assert [(tuple(i), tuple(o)) for i, o in zip(tt.in_modes, tt.out_modes)] == [tuple(map(tuple, layer))
                                                                                  for layer in PAPER_LAYERS]
    assert tt.max_rank == b.rank == INITIAL_RANK
    assert tt.precision == b.precision == TTPrecision(scale_rule="tracked")
    assert tt.prior == b.prior and b.prior.weight == PAPER_PRIOR_WEIGHT == 1.0
    assert b.pretrain_data.name == "mnist" and b.pretrain_epochs == 3 and PAPER_PRIOR_WEIGHT in b.weight_grid


def test_memory_bits_by_hand():
    """Core values per layer: sum of r_k * m_k * n_k * r_{k+1}; 4 bits a core value, 8 a bias (512 + 10)."""
    b = budget(smoke=False)
    assert start_ranks(b) == START
    # layer 0: 32*16 + 16*32*16 + 16*32*16 + 16*16 = 17,152; layer 1: 8*8 + 8*4*16 + 16*8*16 + 16*20 = 2,944
    assert memory_bits(b, "tt-fixed", START) == 4 * 20_096 + 8 * 522 == 84_560
    assert memory_bits(b, "tt-float", START) == 32 * (20_096 + 522) == 659_776
    assert memory_bits(b, "fp32", None) == dense_bits(b) == 32 * (1024 * 512 + 512 + 512 * 10 + 10) == 16_957_760
    assert round(dense_bits(b) / 84_560, 1) == 200.5  # below 243x and 292x: any more is the prior's pruning
    # layer 0: 32*4 + 4*32*6 + 6*32*4 + 4*16 = 1,728; layer 1: 8*2 + 2*4*3 + 3*8*2 + 2*20 = 128
    assert memory_bits(b, "tt-fixed", PRUNED) == 4 * 1_856 + 8 * 522 == 11_600
    assert dense_bits(b) / memory_bits(b, "tt-fixed", PRUNED) == pytest.approx(1461.88, abs=0.01)
    with pytest.raises(ValueError, match="kind"):
        memory_bits(b, "tt-double", START)


def test_the_golden_start_holds_the_ranks_and_bits_the_budget_reads():
    b = budget(smoke=False)
    trainer = TtMlpTrainer(fixed_setup(b, 0, pretrain=False, prior_weight=1.0))
    assert {f"layers.{i}": list(r) for i, r in enumerate(trainer.ranks())} == START
    assert trainer.memory_bits()["total_bits"] == ranks_memory_bits(b, START, True) == 84_560
    assert trainer.setup.precision["scale_rule"] == "tracked" and trainer.setup.batch_size == 64
    pre = fixed_setup(b, 0, pretrain=True, prior_weight=1.0)
    assert pre.prior_weight == 0.0 and pre.epochs == 3  # no prior while pre-training


def test_macs_per_sample_by_hand_and_against_the_ledger():
    b = budget(smoke=True)
    dense = macs_per_sample(b, "fp32", None)
    assert dense == {"forward": 1024 * 512 + 512 * 10, "training": 2 * 1024 * 512 + 3 * 512 * 10}
    from codesign.energy import CostLedger, horowitz_45nm
    from codesign.reproduce.tt_fashion_train import Job, _torch_start
    from codesign.train.layers import attach_ledger
    from codesign.train.models import MLP

    x, y = torch.rand(7, 1, 32, 32), torch.randint(0, 10, (7,))
    for model, kind in ((MLP(inputs=1024, hidden=(512,), classes=10), "fp32"),
                        (_torch_start(b, Job(kind="tt-float", seed=0)), "tt-float")):
        ledger = CostLedger()
        attach_ledger(model, ledger)
        torch.nn.functional.cross_entropy(model(x), y).backward()
        summary = ledger.summary(horowitz_45nm())
        ranks = None if kind == "fp32" else {f"layers.{i}": list(layer.ranks) for i, layer in enumerate(model.layers)}
        expected = macs_per_sample(b, kind, ranks)
        assert summary["by_phase"]["forward"]["macs"] == 7 * expected["forward"]
        assert summary["total"]["macs"] == 7 * expected["training"]


def test_the_time_plan_counts_every_step_and_pass():
    b = dataclasses.replace(budget(smoke=False), pretrain_epochs=1)
    seconds = plan_seconds(b, {"k": 1.0}, {"k": 0.0})
    assert seconds["k"] == math.ceil(8_571 / 64) + 30 * math.ceil(54_000 / 64)
    seconds = plan_seconds(b, {"k": 0.0}, {"k": 64.0})
    assert seconds["k"] == 1_429 + 30 * 16_000 + 54_000  # a forward of 64 images per 64 images evaluated


def test_a_budget_that_would_not_be_the_papers_is_refused():
    b = budget(smoke=True)
    with pytest.raises(ValueError, match="prior.weight"):
        dataclasses.replace(b, prior=dataclasses.replace(b.prior, weight=2.0))
    with pytest.raises(ValueError, match="validation"):
        dataclasses.replace(b, data=dataclasses.replace(b.data, validation_fraction=0.0))
    with pytest.raises(ValueError, match="weight_grid"):
        dataclasses.replace(b, weight_grid=(1.0,))
