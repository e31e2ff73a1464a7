"""A TT multilayer perceptron and the glue that trains it with the project's :class:`Trainer`.

The trainer builds its model from :class:`ModelConfig`; a TT model is
described by :class:`TTMLPConfig` instead. :func:`use_tt_model` swaps the
TT model (seeded from the run's seed) and an Adam optimiser over the shadow
parameters (the paper trains with Adam, App. B) into a trainer; the
:class:`RankAdaptation` technique then adds the rank prior. Two entry points
share it: :func:`tt_trainer` (a trainer for a :class:`TTMLPConfig` given in
Python) and the ``tt`` technique of the training configuration
(:mod:`codesign.train.techniques.tt`, ``[techniques.tt]`` in TOML). Everything
else — data order, cosine learning rate, evaluation, the cost ledger — is the
trainer's own, so a dense baseline run through the same trainer
(:func:`use_adam`) sees the same data, steps and schedule.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn

from codesign.train.config import TrainConfig, require
from codesign.train.data import Dataset
from codesign.train.models import LayerStack
from codesign.train.trainer import Trainer
from codesign.train.tt.layer import TTLinear, tt_layers
from codesign.train.tt.precision import TTPrecision
from codesign.train.tt.rank import RankAdaptation, RankPrior
from codesign.train.tt.ttm import check_max_rank, check_modes


@dataclass(frozen=True, kw_only=True)
class TTLayerSpec:
    """One TT layer: how its input and output sizes factor, and the initial (largest) inner ranks."""

    in_modes: tuple[int, ...]
    out_modes: tuple[int, ...]
    max_rank: int | tuple[int, ...]

    def __post_init__(self) -> None:
        self.validate()

    def validate(self, prefix: str = "layer") -> None:
        check_modes(self.in_modes, f"{prefix}.in_modes")
        check_modes(self.out_modes, f"{prefix}.out_modes")
        require(len(self.in_modes) == len(self.out_modes), f"{prefix}.out_modes",
                f"needs as many modes as in_modes ({len(self.in_modes)}), got {len(self.out_modes)}")
        check_max_rank(self.max_rank, len(self.in_modes), f"{prefix}.max_rank")

    @property
    def in_features(self) -> int:
        return math.prod(self.in_modes)

    @property
    def out_features(self) -> int:
        return math.prod(self.out_modes)


@dataclass(frozen=True, kw_only=True)
class TTMLPConfig:
    """An MLP of TT layers (ReLU between them); ``precision=None`` trains in float32."""

    layers: tuple[TTLayerSpec, ...]
    precision: TTPrecision | None = TTPrecision()
    inputs: int = 64
    classes: int = 10

    def __post_init__(self) -> None:
        require(isinstance(self.layers, tuple) and len(self.layers) >= 1
                and all(isinstance(spec, TTLayerSpec) for spec in self.layers), "layers",
                "must be a non-empty tuple of TTLayerSpec")
        require(self.precision is None or isinstance(self.precision, TTPrecision), "precision",
                "must be a TTPrecision or None")
        require(self.layers[0].in_features == self.inputs, "layers[0].in_modes",
                f"product {self.layers[0].in_features} != inputs {self.inputs}")
        for i in range(1, len(self.layers)):
            require(self.layers[i].in_features == self.layers[i - 1].out_features, f"layers[{i}].in_modes",
                    f"product {self.layers[i].in_features} != out_features {self.layers[i - 1].out_features} "
                    f"of layers[{i - 1}]")
        require(self.layers[-1].out_features == self.classes, f"layers[{len(self.layers) - 1}].out_modes",
                f"product {self.layers[-1].out_features} != classes {self.classes}")

    @property
    def hidden(self) -> tuple[int, ...]:
        return tuple(spec.out_features for spec in self.layers[:-1])


class TTMLP(LayerStack):
    """An MLP of TT layers (:class:`codesign.train.models.LayerStack`)."""

    def __init__(self, config: TTMLPConfig) -> None:
        super().__init__([TTLinear(spec.in_features, spec.out_features, in_modes=spec.in_modes,
                                   out_modes=spec.out_modes, max_rank=spec.max_rank, precision=config.precision)
                          for spec in config.layers])


def use_adam(trainer: Trainer) -> Trainer:
    """Replace the trainer's optimiser by Adam at the configured learning rate and weight decay."""
    trainer.optimizer = torch.optim.Adam(trainer.model.parameters(), lr=trainer.config.optim.lr,
                                         weight_decay=trainer.config.optim.weight_decay)
    return trainer


def use_tt_model(trainer: Trainer, model: TTMLPConfig) -> Trainer:
    """Replace the trainer's model by the TT MLP ``model`` (weights drawn after seeding torch with the run's seed)
    and its optimiser by Adam over the new parameters (:func:`use_adam`)."""
    require(isinstance(model, TTMLPConfig), "model", f"must be a TTMLPConfig, got {type(model).__name__}")
    torch.manual_seed(trainer.config.seed)
    trainer.model = TTMLP(model)
    return use_adam(trainer)


def tt_trainer(config: TrainConfig, model: TTMLPConfig, prior: RankPrior | None = None, *,
               dataset: Dataset | None = None, progress: bool = False, description: str = "tt") -> Trainer:
    """A :class:`Trainer` running ``config``'s data, budget and schedule on a TT MLP with Adam.

    With ``prior`` the :class:`RankAdaptation` technique adds the low-rank
    prior, updates ``lambda`` and prunes ranks; without it the TT ranks stay
    at their initial values (shadow cores are then not clipped either).
    ``config.techniques`` are attached as usual, before the rank technique.
    """
    require(isinstance(model, TTMLPConfig), "model", f"must be a TTMLPConfig, got {type(model).__name__}")
    require(prior is None or isinstance(prior, RankPrior), "prior", "must be a RankPrior or None")
    trainer = use_tt_model(Trainer(config, dataset=dataset, progress=progress, description=description), model)
    if prior is not None:
        technique = RankAdaptation(prior)
        technique.attach(trainer)
        trainer.techniques.append(technique)
    return trainer


def model_memory_bits(model: nn.Module) -> dict[str, int]:
    """Bits of the parameters a model computes with: TT layers at their widths, everything else at 32 bits."""
    tt = tt_layers(model)
    tt_params = {id(p) for layer in tt for p in layer.parameters()}
    core_bits = sum(layer.memory_bits()["core_bits"] for layer in tt)
    bias_bits = sum(layer.memory_bits()["bias_bits"] for layer in tt)
    other = sum(int(p.numel()) * 32 for p in model.parameters() if id(p) not in tt_params)
    values = sum(int(p.numel()) for p in model.parameters())
    return {"values": values, "tt_core_bits": core_bits, "tt_bias_bits": bias_bits, "other_bits": other,
            "total_bits": core_bits + bias_bits + other}


__all__ = ["TTLayerSpec", "TTMLP", "TTMLPConfig", "model_memory_bits", "tt_trainer", "use_adam", "use_tt_model"]
