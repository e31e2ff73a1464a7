"""SLU: gates on identity-shortcut blocks only, skipped samples really not computed (forward, backward,
ledger), the straight-through gate gradient, the expected-cost term, the alpha controller, the same
hard gates at evaluation, composition with SMD, config validation and bit-identical resume."""

from __future__ import annotations

import copy
import math

import pytest
import torch

from codesign.energy import CostLedger
from codesign.train.config import ConfigError, DataConfig, ModelConfig, OptimConfig, TrainConfig, config_from_dict
from codesign.train.layers import attach_ledger
from codesign.train.techniques.slu import Config
from codesign.train.techniques.smd import Config as SmdConfig
from codesign.train.trainer import Trainer

# 160 training images in batches of 20 (8 steps per epoch); ResNet-14 with 16 channels: blocks 0, 1, 3, 5 gated
SMALL = TrainConfig(seed=1, data=DataConfig(name="synthetic", synthetic_samples=200, test_fraction=0.2),
                    model=ModelConfig(depth=14, width=16), optim=OptimConfig(epochs=2, batch_size=20))
CONV_MACS_8X8 = 16 * 16 * 9 * 8 * 8  # one 3x3 conv of block 0: 16 -> 16 channels on 8x8, per sample
# for whole runs: 80 training images in batches of 20 (4 steps per epoch), 4 channels
TINY = TrainConfig(seed=1, data=DataConfig(name="synthetic", synthetic_samples=100, test_fraction=0.2),
                   model=ModelConfig(depth=14, width=4), optim=OptimConfig(epochs=3, batch_size=20))


def slu_trainer(config: TrainConfig = SMALL, **slu) -> Trainer:
    return Trainer(config.replace(techniques={"slu": Config(**slu)}), progress=False)


def set_gate(trainer: Trainer, index: int, *, bias: float, weight: torch.Tensor | None = None) -> None:
    gate = trainer.model.slu_gates[str(index)]
    with torch.no_grad():
        gate.bias.fill_(bias)
        gate.weight.copy_(torch.zeros_like(gate.weight) if weight is None else weight.view_as(gate.weight))


def layer_macs(ledger: CostLedger, layer: str, phase: str) -> int:
    return sum(r.macs for r in ledger.records() if r.layer == layer and r.phase == phase)


@pytest.mark.parametrize("field, value", [("target_skip", 1.0), ("target_skip", -0.1), ("alpha_p", -1.0),
                                          ("alpha_i", float("nan")), ("threshold", 0.0), ("alpha_max", 0.0),
                                          ("alpha_init", 9.0), ("gate_bias_init", 50.0), ("target_skip", "0.4")])
def test_bad_values_are_refused_before_training(field, value):
    with pytest.raises(ConfigError, match=rf"^techniques\.slu\.{field}: "):
        SMALL.replace(techniques={"slu": Config(**{field: value})})
    with pytest.raises(ConfigError, match=rf"^techniques\.slu\.{field}: "):
        config_from_dict({"techniques": {"slu": {field: value}}})


def test_a_model_without_skippable_blocks_is_refused():
    with pytest.raises(ConfigError, match=r"^techniques\.slu: the model has no skippable residual block"):
        slu_trainer(SMALL.replace(model=ModelConfig(name="mlp")))


@pytest.mark.parametrize("depth, gated", [(8, ["0"]), (14, ["0", "1", "3", "5"]), (20, ["0", "1", "2", "4", "5", "7", "8"])])
def test_gates_only_on_identity_shortcut_blocks(depth, gated):
    trainer = slu_trainer(SMALL.replace(model=ModelConfig(depth=depth, width=8)))
    assert list(trainer.model.slu_gates.keys()) == gated
    gate_params = {id(p) for p in trainer.model.slu_gates.parameters()}
    assert any(gate_params == {id(p) for p in group["params"]} for group in trainer.optimizer.param_groups)


def test_skipped_samples_are_not_computed_forward_or_backward():
    trainer = slu_trainer()
    model, block = trainer.model, trainer.model.blocks[0]
    slu = trainer.techniques[0]
    # samples 0, 2, 5 have mean 1 in channel 0 -> logit +5 (run); the others mean 0 -> logit -5 (skip)
    x = torch.zeros(8, 16, 8, 8)
    run = [0, 2, 5]
    x[run, 0] = 1.0
    x[:, 1:] = torch.rand(8, 15, 8, 8, generator=torch.Generator().manual_seed(0))
    x.requires_grad_(True)
    set_gate(trainer, 0, bias=-5.0, weight=torch.eye(16)[0] * 10)
    reference_block = copy.deepcopy(block)
    ledger = CostLedger()
    attach_ledger(model, ledger)
    model.train()
    y = slu.run_block(0, block, x)
    y.sum().backward()

    # the ledger holds exactly 3 samples' worth of the block's convolutions, in all three phases
    for phase in ("forward", "error", "weight_grad"):
        assert layer_macs(ledger, "blocks.0.conv1", phase) == 3 * CONV_MACS_8X8
        assert layer_macs(ledger, "blocks.0.conv2", phase) == 3 * CONV_MACS_8X8
    # and the gate's own work: pooling (16 x 8 x 8 adds) and the 16-MAC linear unit, per sample, all 8 samples
    assert layer_macs(ledger, "slu_gates.0", "forward") == 8 * (16 * 64 + 16)
    assert layer_macs(ledger, "slu_gates.0", "weight_grad") == 8 * 16

    # skipped samples pass through untouched and their gradient is the identity's
    skipped = [1, 3, 4, 6, 7]
    assert torch.equal(y[skipped], x[skipped])
    assert torch.equal(x.grad[skipped][:, 2:], torch.ones(5, 14, 8, 8))
    # executed samples equal the block run on the 3-sample sub-batch (BatchNorm statistics of those 3 only)
    subset = x.detach()[run]
    with torch.no_grad():
        expected = reference_block(subset)
    assert torch.equal(y[run], expected)

    # straight-through gradient of the gate bias for L = sum(y): sum_n sum(f(x_n) - x_n) * p(1 - p), executed n only
    p = 1 / (1 + math.exp(-5.0))
    expected_bias_grad = float((expected - subset).sum()) * p * (1 - p)
    assert float(model.slu_gates["0"].bias.grad) == pytest.approx(expected_bias_grad, rel=1e-4)


def test_block_skipped_by_every_sample_gets_no_gradient_and_no_cost():
    trainer = slu_trainer()
    set_gate(trainer, 0, bias=-10.0)
    block0 = [p.detach().clone() for p in trainer.model.blocks[0].parameters()]
    x, y = trainer.dataset.train_x[:20], trainer.dataset.train_y[:20]
    trainer.train_step(x, y)
    assert all(p.grad is None for p in trainer.model.blocks[0].parameters())
    assert all(torch.equal(a, b) for a, b in zip(block0, trainer.model.blocks[0].parameters()))  # no decay, no momentum
    assert not [r for r in trainer.ledger.records() if r.layer.startswith("blocks.0.")]
    assert all(p.grad is not None for p in trainer.model.blocks[1].parameters())
    assert layer_macs(trainer.ledger, "blocks.1.conv1", "forward") == 20 * CONV_MACS_8X8
    assert trainer.techniques[0].train_counts[0] == [0, 20]


def test_expected_cost_is_the_mac_weighted_mean_gate_probability():
    trainer = slu_trainer()
    slu = trainer.techniques[0]
    logit = lambda q: math.log(q / (1 - q))  # noqa: E731
    set_gate(trainer, 0, bias=logit(0.7))
    set_gate(trainer, 1, bias=logit(0.2))
    x = torch.rand(6, 16, 8, 8)
    trainer.model.train()
    slu.before_step(trainer)
    h = slu.run_block(0, trainer.model.blocks[0], x)
    slu.run_block(1, trainer.model.blocks[1], h)
    slu.alpha = 2.0
    # both blocks cost the same MACs: C = (0.7 + 0.2) / 2; 0.7 runs the block, 0.2 skips it
    assert float(slu.extra_loss(trainer, None, None).detach()) == pytest.approx(2.0 * 0.45, rel=1e-6)
    assert slu.train_counts[0] == [6, 6] and slu.train_counts[1] == [0, 6]
    assert slu.block_macs[0] == slu.block_macs[1] == 2 * CONV_MACS_8X8


def test_alpha_controller_by_hand():
    trainer = slu_trainer(target_skip=0.4, alpha_p=2.0, alpha_i=0.1, alpha_max=5.0)
    slu = trainer.techniques[0]
    slu.update_alpha(1.0)  # e = 1 - 0.6 = 0.4: integral 0.04, alpha 0.04 + 0.8
    assert (slu.alpha_integral, slu.alpha) == pytest.approx((0.04, 0.84))
    slu.update_alpha(0.6)  # on target: only the integral remains
    assert (slu.alpha_integral, slu.alpha) == pytest.approx((0.04, 0.04))
    slu.update_alpha(0.0)  # e = -0.6: integral -0.02, alpha -0.02 - 1.2 (negative: open the gates)
    assert (slu.alpha_integral, slu.alpha) == pytest.approx((-0.02, -1.22))
    clamped = slu_trainer(target_skip=0.4, alpha_p=100.0, alpha_i=0.0, alpha_max=0.5).techniques[0]
    clamped.update_alpha(1.0)
    assert clamped.alpha == 0.5
    fixed = slu_trainer(alpha_init=0.3, alpha_p=0.0, alpha_i=0.0).techniques[0]
    fixed.update_alpha(0.0)
    assert fixed.alpha == pytest.approx(0.3)


def test_evaluation_uses_the_same_hard_gates():
    trainer = slu_trainer()
    set_gate(trainer, 0, bias=-10.0)
    set_gate(trainer, 3, bias=-10.0)
    accuracy = trainer.evaluate()
    slu = trainer.techniques[0]
    tested = trainer.dataset.test_y.numel()
    assert slu.eval_counts[0] == [0, tested] and slu.eval_counts[3] == [0, tested]
    assert slu.eval_counts[1] == [tested, tested]
    # the same network with blocks 0 and 3 removed by hand
    trainer.model.block_runner = lambda index, block, x: x if index in (0, 3) else block(x)
    assert trainer.evaluate() == accuracy
    trainer.model.block_runner = lambda index, block, x: block(x)
    trainer.model.eval()
    with torch.no_grad():
        full = trainer.model(trainer.dataset.test_x)
    trainer.model.block_runner = slu.run_block
    with torch.no_grad():
        gated = trainer.model(trainer.dataset.test_x)
    assert not torch.equal(full, gated)


def test_controller_reaches_a_skip_ratio_and_the_report_measures_it():
    trainer = slu_trainer(TINY, target_skip=0.5, alpha_p=5.0, gate_bias_init=0.5)
    result = trainer.fit()
    report = result.techniques["slu"]
    assert report["measured_train_skip_ratio"] > 0.1  # the cost term closed gates within 12 steps
    # each gated block's counted MACs are its executed samples times its per-sample MACs: they fall with its skip rate
    conv_macs = 4 * 4 * 9 * 8 * 8  # every gated conv of the 4-channel ResNet-14: 4ch 8x8 = 8ch 4x4 = 16ch 2x2
    for index, (executed, offered) in trainer.techniques[0].train_counts.items():
        assert offered == 12 * 20
        for phase in ("forward", "error", "weight_grad"):
            assert layer_macs(trainer.ledger, f"blocks.{index}.conv2", phase) == executed * conv_macs
    rates = [block["train_skip_rate"] for block in report["per_block"].values()]
    # equal MACs per gated block: the MAC-weighted ratio is the mean of the per-block rates
    assert report["measured_train_skip_ratio"] == pytest.approx(sum(rates) / len(rates))
    assert result.history[-1]["slu_eval_skip_ratio"] == report["measured_eval_skip_ratio"]
    assert len(report["alpha_trace"]) == 3


def test_composes_with_smd_dropped_batches_touch_no_gate():
    config = TINY.replace(techniques={"smd": SmdConfig(p=0.5), "slu": Config(target_skip=0.4)})
    trainer = Trainer(config, progress=False)
    result = trainer.fit()
    slu = next(t for t in trainer.techniques if t.name == "slu")
    taken = result.steps - result.skipped_steps
    assert 0 < result.skipped_steps < result.steps
    assert all(offered == taken * 20 for _, offered in slu.train_counts.values())
    assert len(slu.alpha_trace) == 3


@pytest.mark.parametrize("stop_after", [6, 8])  # mid-epoch, and at the end of epoch 2 (before its evaluation)
def test_killed_and_resumed_run_ends_bit_identical(tmp_path, stop_after, kill_and_resume):
    config = TINY.replace(techniques={"slu": Config(target_skip=0.5, alpha_p=5.0, gate_bias_init=0.5)})
    run = kill_and_resume(config, stop_after, tmp_path / "run.pt")
    assert run.expected.techniques["slu"]["measured_train_skip_ratio"] > 0  # the run really skips
    assert run.result.cost == run.expected.cost and run.result.history == run.expected.history
    assert run.result.techniques == run.expected.techniques
