"""SignSGD (Bernstein et al., ICML 2018): every update uses the sign of the full gradient.

E²-Train compares its predictive sign gradient (PSG) against this rule
(Table 2, "SignSGD [20]"): the sign is taken of the gradient computed in
full, so the whole backward pass is done and nothing is saved in
computation, which is why the paper builds PSG at all (Sec. 3.3).

The rule. After the backward pass every parameter's gradient is replaced by
its sign (``torch.sign``: -1, 0 or +1 per entry), and the trainer's SGD then
applies it with the run's momentum, weight decay and learning-rate schedule.
E²-Train does not say whether its SignSGD arm used momentum; it trains every
arm with SGD momentum 0.9 (Sec. 4.1), and its PSG is the same sign-then-SGD
rule (see :mod:`codesign.train.techniques.psg`), so this comparator uses it
too: the only difference from PSG is where the sign comes from (the full
gradient here, the MSB predictor there). With ``optim.momentum = 0`` and
``optim.weight_decay = 0`` the update is Bernstein's plain signSGD,
``w -= lr * sign(g)``. (Bernstein's Signum takes the sign of the momentum
instead; that is not what E²-Train's PSG does, so it is not what is compared.)

``other_parameters`` (default True) signs every parameter of the model as
it is at ``attach``: weights, BatchNorm scales and shifts, biases, the same
reach as PSG's ``sign_other_parameters``. False signs only the weights of
the counted layers (conv and linear). Parameters added after attaching
(SLU's gates) keep their ordinary gradient.

Energy. This technique changes no precision and records nothing in the
ledger: the layers charge their forward, error and full weight-gradient
passes as they would without it, at whatever precision another technique
set (combine with ``psg`` at ``predict=False`` for PSG's 8/16-bit fixed
point, the arm of Table 2). Taking a sign is a comparison per weight, far
below one MAC, and is not charged; the gradient is also charged its full
width in DRAM, although a sign would fit in 2 bits, so the arm's energy
equals that of plain SGD at the same precision. Conservative, and what the
paper says of it: SignSGD by itself does not save energy.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch
from torch import nn

from codesign.train.config import require
from codesign.train.layers import counted_layers
from codesign.train.techniques import base

if TYPE_CHECKING:
    from codesign.train.trainer import Trainer


@dataclass(frozen=True, kw_only=True)
class Config:
    """``other_parameters``: sign every parameter of the model (True) or only the counted layers' weights."""

    other_parameters: bool = True

    def validate(self, prefix: str = "signsgd") -> None:
        require(isinstance(self.other_parameters, bool), f"{prefix}.other_parameters", "must be a bool")


def sign_gradients(parameters: list[nn.Parameter]) -> int:
    """Replace each parameter's gradient by its sign in place; returns the number of entries signed."""
    signed = 0
    for parameter in parameters:
        if parameter.grad is not None:
            parameter.grad = torch.sign(parameter.grad)
            signed += parameter.grad.numel()
    return signed


class Technique(base.Technique):
    name = "signsgd"

    def __init__(self, config: Config) -> None:
        self.config = config
        self.parameters: list[nn.Parameter] = []
        self.signed_entries = 0  # gradient entries replaced by their sign, over the run

    def attach(self, trainer: Trainer) -> None:
        if self.config.other_parameters:
            self.parameters = list(trainer.model.parameters())
        else:
            self.parameters = [layer.weight for layer in counted_layers(trainer.model)]

    def after_backward(self, trainer: Trainer) -> None:
        self.signed_entries += sign_gradients(self.parameters)

    def report(self) -> dict[str, Any]:
        return {"other_parameters": self.config.other_parameters, "signed_entries": self.signed_entries,
                "sign_of": "full gradient"}

    def state_dict(self) -> dict[str, Any]:
        return {"signed_entries": self.signed_entries}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.signed_entries = state["signed_entries"]
