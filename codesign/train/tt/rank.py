"""Rank adaptation: a Bayesian low-rank prior on the TT cores, and pruning of the slices it shrinks.

Model (paper 003, Sec. 3.1, Eqs. (1)-(2), after Hawkins et al. 2020): every
element of the rank slice ``c`` of inner rank ``r_k`` — the last-index
slice ``G_{k-1}[..., c]`` of the core on its left and the first-index slice
``G_k[c, ...]`` of the core on its right — has a zero-mean Gaussian prior of
variance ``lambda_{k,c}``, and each ``lambda`` a log-uniform prior
``p(lambda) ∝ 1/lambda``. Tying both neighbouring slices to one ``lambda``
is our reading: it makes a slice that goes to zero removable from both cores
at once, which is what shrinks the rank.

Training minimises ``CE + beta(t) * weight * (-log prior) / N_train`` over
the shadow cores, with ``beta`` warmed up linearly from 0 to 1 over the
first epochs so that the data shape the cores before the prior pulls on them.
After every optimiser step each ``lambda`` takes its closed-form MAP value
given the cores (the paper's Eq. (4) update)::

    lambda_{k,c} = (|G_{k-1}[..., c]|^2 + |G_k[c, ...]|^2) / (n_{k,c} + 2)

with ``n_{k,c}`` the number of elements in the two slices (the ``+ 2`` is
the log-uniform prior's ``log lambda`` term). At the end of an epoch, slices
whose ``lambda`` fell below ``threshold`` times the largest ``lambda`` of
their rank are removed from both cores; the layer's parameters change shape
and the optimiser is rebuilt with its state sliced the same way.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch
from torch import nn

from codesign.train.config import is_number, require
from codesign.train.techniques.base import Technique
from codesign.train.tt.layer import TTLinear, tt_layers

if TYPE_CHECKING:
    from codesign.train.trainer import Trainer

LAMBDA_FLOOR = 1e-30  # keeps 1/lambda finite for a slice that is exactly zero


@dataclass(frozen=True, kw_only=True)
class RankPrior:
    """The low-rank prior and the pruning rule.

    ``weight``: scale of the prior term (1 is the Bayesian posterior; 0 turns
    the prior and pruning off). ``warmup_epochs``: epochs over which the
    prior's weight ramps from 0 to ``weight``. ``threshold``: relative
    ``lambda`` below which a rank slice is pruned. ``prune_from_epoch``:
    first epoch (0-based) after which pruning may happen. ``min_rank``: no
    inner rank is pruned below this. ``clip_shadow``: clip the shadow cores
    to the quantised cores' range after every step (BinaryConnect).
    """

    weight: float = 1.0
    warmup_epochs: int = 5
    threshold: float = 1e-2
    prune_from_epoch: int = 0
    min_rank: int = 1
    clip_shadow: bool = True

    def __post_init__(self) -> None:
        self.validate()

    def validate(self, prefix: str = "prior") -> None:
        require(is_number(self.weight) and self.weight >= 0, f"{prefix}.weight", f"must be >= 0, got {self.weight!r}")
        require(isinstance(self.warmup_epochs, int) and not isinstance(self.warmup_epochs, bool)
                and self.warmup_epochs >= 0, f"{prefix}.warmup_epochs", f"must be an int >= 0, got {self.warmup_epochs!r}")
        require(is_number(self.threshold) and 0 <= self.threshold < 1, f"{prefix}.threshold",
                f"must be in [0, 1), got {self.threshold!r}")
        require(isinstance(self.prune_from_epoch, int) and not isinstance(self.prune_from_epoch, bool)
                and self.prune_from_epoch >= 0, f"{prefix}.prune_from_epoch", "must be an int >= 0")
        require(isinstance(self.min_rank, int) and not isinstance(self.min_rank, bool) and self.min_rank >= 1,
                f"{prefix}.min_rank", f"must be an int >= 1, got {self.min_rank!r}")
        require(isinstance(self.clip_shadow, bool), f"{prefix}.clip_shadow", "must be a bool")


def slice_norms(layer: TTLinear, k: int) -> tuple[torch.Tensor, int]:
    """Squared norms of the rank-``k`` slices (both neighbouring cores), and the elements per slice."""
    left, right = layer.cores[k - 1], layer.cores[k]
    squares = left.pow(2).sum(dim=(0, 1, 2)) + right.pow(2).sum(dim=(1, 2, 3))
    count = left.shape[0] * left.shape[1] * left.shape[2] + right.shape[1] * right.shape[2] * right.shape[3]
    return squares, count


@torch.no_grad()
def map_lambdas(layer: TTLinear) -> list[torch.Tensor]:
    """Closed-form MAP ``lambda`` of every inner rank of ``layer`` given its shadow cores."""
    lambdas = []
    for k in range(1, layer.order):
        squares, count = slice_norms(layer, k)
        lambdas.append((squares.detach().to(torch.float64) / (count + 2)).clamp_min(LAMBDA_FLOOR))
    return lambdas


def negative_log_prior(layer: TTLinear, lambdas: list[torch.Tensor]) -> torch.Tensor:
    """``sum_{k,c} (|slices|^2 / (2 lambda) + (n/2 + 1) log lambda)``, differentiable in the cores."""
    total = layer.cores[0].new_zeros(())
    for k, lam in enumerate(lambdas, start=1):
        squares, count = slice_norms(layer, k)
        lam = lam.to(squares.dtype)
        total = total + (squares / (2 * lam)).sum() + ((count / 2 + 1) * torch.log(lam)).sum()
    return total


def prune_keep(lambdas: list[torch.Tensor], threshold: float, min_rank: int) -> dict[int, torch.Tensor]:
    """Indices to keep per inner rank: ``lambda >= threshold * max lambda``, at least ``min_rank`` largest."""
    keep = {}
    for k, lam in enumerate(lambdas, start=1):
        mask = lam >= threshold * lam.max()
        floor = min(min_rank, lam.numel())
        if int(mask.sum()) < floor:
            mask[torch.topk(lam, floor).indices] = True
        keep[k] = torch.nonzero(mask).flatten()
    return keep


def rebuild_optimizer(optimizer: torch.optim.Optimizer,
                      replaced: list[tuple[nn.Parameter, nn.Parameter, dict[int, torch.Tensor]]]) -> torch.optim.Optimizer:
    """A new optimiser of the same class and groups in which every replaced parameter is swapped for its new one.

    Per-parameter state (momentum, Adam's moments) is sliced along the same
    dimensions as the parameter, so the kept slices continue exactly as if
    nothing had been removed; scalar state (Adam's step) is copied.
    """
    mapping = {id(old): (new, dims) for old, new, dims in replaced}
    groups = []
    for group in optimizer.param_groups:
        settings = {key: value for key, value in group.items() if key != "params"}
        groups.append({**settings, "params": [mapping.get(id(p), (p, None))[0] for p in group["params"]]})
    rebuilt = type(optimizer)(groups, **optimizer.defaults)
    for group in optimizer.param_groups:
        for old in group["params"]:
            if old not in optimizer.state:
                continue
            state = optimizer.state[old]
            if id(old) not in mapping:
                rebuilt.state[old] = state
                continue
            new, dims = mapping[id(old)]
            sliced = {}
            for key, value in state.items():
                if isinstance(value, torch.Tensor) and value.shape == old.shape:
                    for dim, index in dims.items():
                        value = value.index_select(dim, index)
                    value = value.clone()
                sliced[key] = value
            rebuilt.state[new] = sliced
    return rebuilt


class RankAdaptation(Technique):
    """Trainer technique: low-rank prior in the loss, MAP ``lambda`` updates, shadow clipping, rank pruning.

    Not in the TOML registry (a TT model is not built from ``ModelConfig``):
    append it to ``trainer.techniques`` and call :meth:`attach`, as
    :func:`codesign.train.tt.model.tt_trainer` does.
    """

    name = "tt_rank"

    def __init__(self, config: RankPrior) -> None:
        require(isinstance(config, RankPrior), "prior", f"must be a RankPrior, got {type(config).__name__}")
        self.config = config
        self.layers: list[TTLinear] = []
        self.lambdas: list[list[torch.Tensor]] = []
        self.rank_history: list[dict[str, list[int]]] = []
        self.prune_events: list[dict[str, Any]] = []
        self.train_size = 1
        self.warmup_steps = 0

    def attach(self, trainer: Trainer) -> None:
        self.layers = tt_layers(trainer.model)
        require(bool(self.layers), "model", "has no TTLinear layer for rank adaptation")
        self.lambdas = [map_lambdas(layer) for layer in self.layers]
        self.train_size = trainer.dataset.train_size
        self.warmup_steps = self.config.warmup_epochs * trainer.batches_per_epoch
        self.rank_history = [self._ranks()]

    def _ranks(self) -> dict[str, list[int]]:
        return {layer.layer_name: list(layer.ranks) for layer in self.layers}

    def beta(self, step: int) -> float:
        """Warm-up factor of the prior at global step ``step``: linear from 0 to 1."""
        if self.warmup_steps == 0:
            return 1.0
        return min(1.0, step / self.warmup_steps)

    def extra_loss(self, trainer: Trainer, logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor | None:
        if self.config.weight == 0:
            return None
        scale = self.beta(trainer.global_step) * self.config.weight / self.train_size
        if scale == 0:
            return None
        total = sum(negative_log_prior(layer, lam) for layer, lam in zip(self.layers, self.lambdas))
        return scale * total

    def after_step(self, trainer: Trainer) -> None:
        if self.config.clip_shadow:
            for layer in self.layers:
                layer.clip_shadow_()
        if self.config.weight > 0:
            self.lambdas = [map_lambdas(layer) for layer in self.layers]

    def on_epoch_end(self, trainer: Trainer, epoch: int, metrics: dict[str, float]) -> None:
        if self.config.weight > 0 and epoch >= self.config.prune_from_epoch:
            self.prune(trainer, epoch)
        self.rank_history.append(self._ranks())

    def prune(self, trainer: Trainer, epoch: int) -> None:
        """Remove the slices below threshold from every TT layer and rebuild the trainer's optimiser."""
        replaced_all = []
        for i, layer in enumerate(self.layers):
            self.lambdas[i] = map_lambdas(layer)
            keep = prune_keep(self.lambdas[i], self.config.threshold, self.config.min_rank)
            before = layer.ranks
            replaced = layer.prune_ranks(keep)
            if not replaced:
                continue
            self.lambdas[i] = [lam.index_select(0, keep[k]) for k, lam in enumerate(self.lambdas[i], start=1)]
            replaced_all.extend(replaced)
            self.prune_events.append({"epoch": epoch, "layer": layer.layer_name, "ranks_before": list(before),
                                      "ranks_after": list(layer.ranks)})
        if replaced_all:
            trainer.optimizer = rebuild_optimizer(trainer.optimizer, replaced_all)

    def report(self) -> dict[str, Any]:
        memory = {layer.layer_name: layer.memory_bits() for layer in self.layers}
        return {"rank_history": self.rank_history, "final_ranks": self._ranks(), "prune_events": self.prune_events,
                "memory_bits": memory,
                "lambda_max": {layer.layer_name: [float(lam.max()) for lam in lams]
                               for layer, lams in zip(self.layers, self.lambdas)},
                "config": {"weight": self.config.weight, "warmup_epochs": self.config.warmup_epochs,
                           "threshold": self.config.threshold, "prune_from_epoch": self.config.prune_from_epoch,
                           "min_rank": self.config.min_rank, "clip_shadow": self.config.clip_shadow}}

    def state_dict(self) -> dict[str, Any]:
        return {"lambdas": [[lam.clone() for lam in lams] for lams in self.lambdas],
                "rank_history": self.rank_history, "prune_events": self.prune_events}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.lambdas = [[lam.clone() for lam in lams] for lams in state["lambdas"]]
        self.rank_history = state["rank_history"]
        self.prune_events = state["prune_events"]


def total_parameters(model: nn.Module) -> int:
    return sum(int(p.numel()) for p in model.parameters())


__all__ = ["LAMBDA_FLOOR", "RankAdaptation", "RankPrior", "map_lambdas", "negative_log_prior", "prune_keep",
           "rebuild_optimizer", "slice_norms", "total_parameters"]
