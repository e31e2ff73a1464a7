"""SignSGD: the update is lr * sign(full gradient), other parameters signed or not, the ledger charges exactly
what plain SGD at the same precision costs, and the config is validated."""

from __future__ import annotations

import copy

import pytest
import torch
import torch.nn.functional as F

from codesign.train.config import ConfigError, DataConfig, ModelConfig, OptimConfig, TrainConfig, config_from_dict
from codesign.train.layers import counted_layers
from codesign.train.techniques.psg import Config as PsgConfig
from codesign.train.techniques.signsgd import Config, sign_gradients
from codesign.train.trainer import Trainer

PLAIN = OptimConfig(epochs=1, batch_size=20, lr=0.01, momentum=0.0, weight_decay=0.0, schedule="constant")
MLP = TrainConfig(seed=2, data=DataConfig(name="synthetic", synthetic_samples=100, test_fraction=0.2),
                  model=ModelConfig(name="mlp", hidden=(16,)), optim=PLAIN)


@pytest.mark.parametrize("value", ["yes", 1, None])
def test_bad_other_parameters_is_refused(value):
    with pytest.raises(ConfigError, match=r"^techniques\.signsgd\.other_parameters: "):
        MLP.replace(techniques={"signsgd": Config(other_parameters=value)})
    with pytest.raises(ConfigError, match=r"^techniques\.signsgd\.other_parameters"):
        config_from_dict({"techniques": {"signsgd": {"other_parameters": value}}})


def test_sign_of_a_hand_made_gradient():
    parameter = torch.nn.Parameter(torch.zeros(5))
    parameter.grad = torch.tensor([0.3, -2.0, 0.0, 1e-9, -1e-30])
    untouched = torch.nn.Parameter(torch.zeros(2))  # no gradient: left alone, not counted
    assert sign_gradients([parameter, untouched]) == 5
    assert torch.equal(parameter.grad, torch.tensor([1.0, -1.0, 0.0, 1.0, -1.0]))
    assert untouched.grad is None


def full_gradients(trainer: Trainer, x: torch.Tensor, y: torch.Tensor) -> list[torch.Tensor]:
    """The gradient plain SGD would see for this batch, from a copy of the model."""
    model = copy.deepcopy(trainer.model)
    model.train()
    F.cross_entropy(model(x), y).backward()
    return [p.grad.clone() for p in model.parameters()]


@pytest.mark.parametrize("other_parameters", [True, False])
def test_the_update_is_lr_times_the_sign_of_the_full_gradient(other_parameters):
    trainer = Trainer(MLP.replace(techniques={"signsgd": Config(other_parameters=other_parameters)}), progress=False)
    x, y = trainer.dataset.train_x[:20], trainer.dataset.train_y[:20]
    grads = full_gradients(trainer, x, y)
    before = [p.detach().clone() for p in trainer.model.parameters()]
    trainer.train_step(x, y)
    weights = {id(layer.weight) for layer in counted_layers(trainer.model)}
    for parameter, old, grad in zip(trainer.model.parameters(), before, grads):
        signed = other_parameters or id(parameter) in weights
        step = torch.sign(grad) if signed else grad
        assert torch.allclose(parameter.detach(), old - PLAIN.lr * step, atol=0, rtol=1e-6)
        if signed:
            assert torch.equal((old - parameter.detach()).abs() > 0, grad != 0)  # every nonzero entry moves
    assert trainer.techniques[0].report()["signed_entries"] == sum(
        p.numel() for p in trainer.model.parameters() if other_parameters or id(p) in weights)


@pytest.mark.parametrize("precision", [{}, {"psg": PsgConfig(predict=False)}])
def test_the_ledger_charges_the_full_backward_as_plain_sgd_at_the_same_precision(precision):
    plain = Trainer(MLP.replace(techniques=precision), progress=False).fit()
    signed = Trainer(MLP.replace(techniques={**precision, "signsgd": Config()}), progress=False).fit()
    assert signed.cost == plain.cost
    assert signed.cost["total"]["macs"] > 0 and signed.cost["by_phase"]["weight_grad"]["macs"] > 0
    assert signed.test_accuracy != plain.test_accuracy or signed.history != plain.history  # a different rule ran
