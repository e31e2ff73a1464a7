"""Stochastic depth: linear decay of the survival probability, a dropped block passes its input through and
costs nothing (no MAC, no DRAM, no gradient), test time scales every block by p_l, the measured drop ratio
follows the expected one, p_L for a target drop ratio, config validation, and bit-identical resume."""

from __future__ import annotations

import pytest
import torch

from codesign.energy import CostLedger
from codesign.train.config import ConfigError, DataConfig, ModelConfig, OptimConfig, TrainConfig, config_from_dict
from codesign.train.layers import attach_ledger
from codesign.train.techniques.slu import Config as SluConfig
from codesign.train.techniques.stochastic_depth import (
    Config,
    expected_drop_ratio,
    final_survival_for_drop,
    survival_probability,
)
from codesign.train.trainer import Trainer

# ResNet-14: 6 blocks, identity shortcuts on blocks 0, 1, 3, 5
SMALL = TrainConfig(seed=1, data=DataConfig(name="synthetic", synthetic_samples=100, test_fraction=0.2),
                    model=ModelConfig(depth=14, width=4), optim=OptimConfig(epochs=3, batch_size=20))


def sd_trainer(config: TrainConfig = SMALL, final_survival: float = 0.5) -> Trainer:
    return Trainer(config.replace(techniques={"stochastic_depth": Config(final_survival=final_survival)}),
                   progress=False)


@pytest.mark.parametrize("value", [0.0, -0.5, 1.5, float("nan"), "0.5", True])
def test_bad_final_survival_is_refused(value):
    with pytest.raises(ConfigError, match=r"^techniques\.stochastic_depth\.final_survival: "):
        SMALL.replace(techniques={"stochastic_depth": Config(final_survival=value)})
    with pytest.raises(ConfigError, match=r"^techniques\.stochastic_depth\.final_survival"):
        config_from_dict({"techniques": {"stochastic_depth": {"final_survival": value}}})


def test_models_without_identity_blocks_and_slu_together_are_refused():
    with pytest.raises(ConfigError, match=r"^techniques\.stochastic_depth: the model has no identity-shortcut"):
        sd_trainer(SMALL.replace(model=ModelConfig(name="mlp")))
    with pytest.raises(ConfigError, match=r"^techniques\.stochastic_depth: cannot be combined with slu"):
        Trainer(SMALL.replace(techniques={"stochastic_depth": Config(), "slu": SluConfig()}), progress=False)


def test_survival_decays_linearly_over_depth():
    assert [survival_probability(i, 6, 0.5) for i in range(6)] == pytest.approx(
        [1 - 1 / 12, 1 - 2 / 12, 1 - 3 / 12, 1 - 4 / 12, 1 - 5 / 12, 0.5])
    assert survival_probability(3, 4, 1.0) == 1.0
    trainer = sd_trainer(final_survival=0.2)
    assert trainer.techniques[0].survival == pytest.approx({0: 1 - 0.8 / 6, 1: 1 - 1.6 / 6, 3: 1 - 3.2 / 6, 5: 0.2})
    with pytest.raises(ValueError):
        survival_probability(6, 6, 0.5)


def test_final_survival_for_a_drop_ratio_inverts_the_expected_ratio():
    droppable = [0, 1, 3, 5]
    assert expected_drop_ratio(droppable, 6, 0.5) == pytest.approx(0.5 * 13 / 24)
    final = final_survival_for_drop(0.4, droppable, 6)
    assert final == pytest.approx(1 - 0.4 * 24 / 13)
    assert expected_drop_ratio(droppable, 6, final) == pytest.approx(0.4)
    assert expected_drop_ratio([0, 5], 6, 0.0, macs=[3, 1]) == pytest.approx((3 / 6 + 1) / 4)
    with pytest.raises(ValueError, match="out of reach"):
        final_survival_for_drop(0.6, droppable, 6)


def test_a_dropped_block_passes_its_input_through_and_costs_nothing():
    trainer = sd_trainer()
    sd, model = trainer.techniques[0], trainer.model
    sd.survival = {index: 0.0 for index in sd.survival}  # every droppable block is dropped
    x, y = trainer.dataset.train_x[:20], trainer.dataset.train_y[:20]
    ledger = CostLedger()
    attach_ledger(model, ledger)
    model.train()
    h = torch.rand(20, 4, 8, 8, requires_grad=True)
    assert sd.run_block(0, model.blocks[0], h) is h
    assert not ledger.records()
    before = [p.detach().clone() for p in model.blocks[0].parameters()]
    trainer.train_step(x, y)
    layers = {r.layer.split(".")[1] for r in trainer.ledger.records() if r.layer.startswith("blocks.")}
    assert layers == {"2", "4"}  # only the blocks with a projection shortcut ran and were charged
    for index in (0, 1, 3, 5):
        assert all(p.grad is None for p in model.blocks[index].parameters())
    assert all(torch.equal(a, b) for a, b in zip(before, model.blocks[0].parameters()))  # no decay, no momentum
    assert sd.report()["measured_train_drop_ratio"] == 1.0


def test_a_surviving_block_runs_unscaled_in_training_and_scaled_by_p_at_test_time():
    trainer = sd_trainer()
    sd, block = trainer.techniques[0], trainer.model.blocks[1]
    h = torch.rand(6, 4, 8, 8)
    sd.survival[1] = 1.0
    block.train()
    with torch.enable_grad():
        assert torch.equal(sd.run_block(1, block, h), block(h))
    sd.survival[1] = 0.3
    block.eval()
    with torch.no_grad():
        expected = torch.relu(h + 0.3 * block.residual(h))
        assert torch.allclose(sd.run_block(1, block, h), expected, rtol=0, atol=1e-6)
        projection, h2 = trainer.model.blocks[2], torch.rand(6, 4, 8, 8)
        projection.eval()
        assert torch.equal(sd.run_block(2, projection, h2), projection(h2))  # not droppable: never scaled


def test_measured_drop_ratio_follows_the_expected_one():
    trainer = sd_trainer(final_survival=0.3)
    sd, model = trainer.techniques[0], trainer.model
    model.train()
    h = torch.rand(1, 4, 8, 8)
    with torch.enable_grad():
        for _ in range(400):
            for index in (0, 1):
                sd.run_block(index, model.blocks[index], h)
    report = sd.report()
    rates = report["per_block_train_drop_rate"]
    assert rates["0"] == pytest.approx(0.7 / 6, abs=0.05) and rates["1"] == pytest.approx(1.4 / 6, abs=0.06)


@pytest.mark.parametrize("stop_after", [5, 8])
def test_killed_and_resumed_run_ends_bit_identical(tmp_path, stop_after, kill_and_resume):
    config = SMALL.replace(techniques={"stochastic_depth": Config(final_survival=0.3)})
    run = kill_and_resume(config, stop_after, tmp_path / "run.pt")
    assert 0 < run.expected.techniques["stochastic_depth"]["measured_train_drop_ratio"] < 1
    assert run.result.cost == run.expected.cost and run.result.history == run.expected.history
    assert run.result.techniques == run.expected.techniques
