"""SMD: validated p, a seeded skip stream of its own, dropped batches cost nothing and move nothing,
the learning-rate schedule runs over them, the measured skip rate, and bit-identical resume."""

from __future__ import annotations

import math

import pytest
import torch

from codesign.train.config import ConfigError, DataConfig, ModelConfig, OptimConfig, TrainConfig, config_from_dict
from codesign.train.techniques import base
from codesign.train.techniques.smd import Config, expected_energy_ratio
from codesign.train.trainer import Trainer

# 160 training images in batches of 20: 8 steps per epoch, every batch the same size
MLP = TrainConfig(seed=3, data=DataConfig(name="synthetic", synthetic_samples=200, test_fraction=0.2),
                  model=ModelConfig(name="mlp", hidden=(16,)), optim=OptimConfig(epochs=4, batch_size=20))
FORWARD_MACS_PER_SAMPLE = 64 * 16 + 16 * 10


def with_smd(config: TrainConfig, p: float = 0.5) -> TrainConfig:
    return config.replace(techniques={"smd": Config(p=p)})


@pytest.mark.parametrize("p", [-0.1, 1.0, 1.5, True, "0.5", float("nan")])
def test_bad_p_is_refused_before_training(p):
    with pytest.raises(ConfigError, match=r"^techniques\.smd\.p: must be in \[0, 1\)"):
        with_smd(MLP, p)
    with pytest.raises(ConfigError, match=r"^techniques\.smd\.p:"):
        config_from_dict({"techniques": {"smd": {"p": p}}})


def test_unknown_field_is_refused():
    with pytest.raises(ConfigError, match=r"^techniques\.smd\.rate: unknown field"):
        config_from_dict({"techniques": {"smd": {"rate": 0.5}}})


def test_p_zero_drops_nothing_and_costs_the_baseline():
    baseline = Trainer(MLP, progress=False).fit()
    result = Trainer(with_smd(MLP, 0.0), progress=False).fit()
    assert result.skipped_steps == 0 and result.techniques["smd"]["measured_skip_rate"] == 0.0
    assert result.cost == baseline.cost and result.history == baseline.history


def test_dropped_batches_add_no_macs_and_the_skip_rate_is_measured():
    result = Trainer(with_smd(MLP), progress=False).fit()
    report = result.techniques["smd"]
    assert result.steps == 32 and report["decisions"] == 32
    assert report["skipped"] == result.skipped_steps and 0 < result.skipped_steps < 32
    assert report["measured_skip_rate"] == result.skipped_steps / 32
    executed = 32 - result.skipped_steps
    phases = result.cost["by_phase"]
    assert phases["forward"]["macs"] == executed * 20 * FORWARD_MACS_PER_SAMPLE
    assert phases["weight_grad"]["macs"] == executed * 20 * FORWARD_MACS_PER_SAMPLE
    assert phases["error"]["macs"] == executed * 20 * 16 * 10


def test_skip_rate_is_bernoulli_p_over_many_draws():
    trainer = Trainer(with_smd(MLP, 0.3), progress=False)
    smd = trainer.techniques[0]
    draws = 20_000
    skipped = sum(smd.skip_batch(trainer) for _ in range(draws))
    # 5 standard deviations of a Binomial(20000, 0.3) count: 324
    assert abs(skipped - 0.3 * draws) < 5 * math.sqrt(draws * 0.3 * 0.7)
    assert smd.report()["measured_skip_rate"] == skipped / draws


def test_stream_is_seeded_by_the_run_seed_and_leaves_the_model_init_alone():
    def pattern(config):
        trainer = Trainer(config, progress=False)
        return [trainer.techniques[0].skip_batch(trainer) for _ in range(64)]

    assert pattern(with_smd(MLP)) == pattern(with_smd(MLP))
    assert pattern(with_smd(MLP)) != pattern(with_smd(MLP.replace(seed=4)))
    plain, smd = Trainer(MLP, progress=False), Trainer(with_smd(MLP), progress=False)
    assert all(torch.equal(a, b) for a, b in zip(plain.model.state_dict().values(), smd.model.state_dict().values()))


class StepSpy(base.Technique):
    """Records the global step and learning rate of every step that is really taken."""

    name = "spy"

    def __init__(self):
        self.taken: list[tuple[int, float]] = []

    def before_step(self, trainer):
        self.taken.append((trainer.global_step, trainer.optimizer.param_groups[0]["lr"]))


def test_learning_rate_schedule_advances_over_dropped_batches():
    trainer = Trainer(with_smd(MLP), progress=False)
    spy = StepSpy()
    trainer.techniques.append(spy)
    result = trainer.fit()
    steps = [step for step, _ in spy.taken]
    assert len(steps) == 32 - result.skipped_steps
    dropped = sorted(set(range(32)) - set(steps))
    assert len(dropped) == result.skipped_steps > 0
    for step, lr in spy.taken:  # each taken step uses the cosine value of its own scheduled index
        assert lr == pytest.approx(0.5 * 0.1 * (1 + math.cos(math.pi * step / 32)), rel=1e-12)


def test_a_dropped_step_leaves_weights_momentum_and_ledger_untouched():
    trainer = Trainer(with_smd(MLP), progress=False)
    x, y = trainer.dataset.train_x[:20], trainer.dataset.train_y[:20]
    outcomes = []
    for _ in range(12):
        weights = [p.detach().clone() for p in trainer.model.parameters()]
        momentum = [trainer.optimizer.state[p].get("momentum_buffer") for p in trainer.model.parameters()]
        momentum = [None if m is None else m.clone() for m in momentum]
        ledger = trainer.ledger.state_dict()
        loss = trainer.train_step(x, y)
        outcomes.append(loss is None)
        if loss is None:
            assert all(torch.equal(a, b) for a, b in zip(weights, trainer.model.parameters()))
            after = [trainer.optimizer.state[p].get("momentum_buffer") for p in trainer.model.parameters()]
            assert all((a is None and b is None) or torch.equal(a, b) for a, b in zip(momentum, after))
            assert trainer.ledger.state_dict() == ledger
        else:
            assert not all(torch.equal(a, b) for a, b in zip(weights, trainer.model.parameters()))
    assert any(outcomes) and not all(outcomes)


@pytest.mark.parametrize("stop_after", [3, 8, 13])
def test_killed_and_resumed_run_ends_bit_identical(tmp_path, stop_after, kill_and_resume):
    run = kill_and_resume(with_smd(MLP), stop_after, tmp_path / "run.pt")
    assert run.result.cost == run.expected.cost and run.result.history == run.expected.history
    assert run.result.skipped_steps == run.expected.skipped_steps
    assert run.result.techniques == run.expected.techniques


def test_expected_energy_ratio_of_the_papers_operating_point():
    assert expected_energy_ratio(0.5, 20, 15) == pytest.approx(2 / 3)
    assert expected_energy_ratio(0.5, 30, 15) == pytest.approx(1.0)
    assert expected_energy_ratio(0.0, 10, 15) == pytest.approx(2 / 3)
