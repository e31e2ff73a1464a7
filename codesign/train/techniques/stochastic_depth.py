"""Stochastic depth (Huang et al., ECCV 2016): random residual blocks dropped during training.

E²-Train compares SLU against it (Sec. 4.3, Fig. 4) as SLU's "random"
counterpart, with ``p_L`` set so that its dropping ratio equals SLU's.

The rule. Block ``l`` of ``L`` (counted from the input, ``l = 1..L`` over
every residual block of the network) survives a training step with
probability ``p_l = 1 - (l / L) * (1 - p_L)``, the paper's linear decay
from 1 at the input to ``p_L`` (``final_survival``) at the last block. One
Bernoulli draw per block and per training step (mini-batch), from this
technique's own generator (seeded from the run seed with a salt, as SMD's;
its state is in ``state_dict``, so a resumed run drops the same blocks). A
dropped block is the identity: its input goes on unchanged. At test time
every block runs with its residual branch scaled by its survival
probability, ``relu(x + p_l * f(x))`` (``ResidualBlock.forward``'s
``residual_scale``).

Which blocks. Only identity-shortcut blocks (``ResidualBlock.skippable``)
are dropped, the same blocks SLU gates, so that the two techniques skip
from the same work; a block whose shortcut is a strided 1x1 convolution
cannot pass its input through unchanged and always runs (Huang et al. pad
and pool that shortcut instead; these ResNets do not). ``l`` and ``L``
still count every block, so the decay follows depth as in the paper.

Cost. A dropped block is not called at all: none of its layers records a
forward, error or weight-gradient MAC or a DRAM bit in the ledger, and its
parameters get no gradient that step (``.grad`` stays None, so SGD leaves
them, their momentum and weight decay alone), exactly as SLU's block that
every sample skips. The draws themselves are not charged. Evaluation is
not charged (the trainer detaches the ledger there), so the full-depth
test-time network costs the run nothing.

Operating point. :func:`expected_drop_ratio` gives the expected fraction
of the droppable blocks' MACs skipped for a ``p_L``;
:func:`final_survival_for_drop` inverts it, which is how a reproduction
sets ``p_L`` to match a target drop ratio (SLU's skip ratio). The measured
ratio over the run is in ``report()``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch

from codesign.train.config import ConfigError, is_number, require
from codesign.train.models import skippable_blocks
from codesign.train.techniques import base
from codesign.train.techniques.slu import block_macs_per_sample

if TYPE_CHECKING:
    from codesign.train.models import ResidualBlock
    from codesign.train.trainer import Trainer

SEED_SALT = 0x5D_0002  # mixed into the run seed: a stream apart from the global generator's and SMD's


@dataclass(frozen=True, kw_only=True)
class Config:
    """``final_survival``: p_L, the survival probability of the last block, in (0, 1] (1 drops nothing)."""

    final_survival: float = 0.5

    def validate(self, prefix: str = "stochastic_depth") -> None:
        require(is_number(self.final_survival) and 0 < self.final_survival <= 1, f"{prefix}.final_survival",
                f"must be in (0, 1], got {self.final_survival!r}")


def survival_probability(position: int, blocks: int, final_survival: float) -> float:
    """p_l = 1 - (l / L) (1 - p_L) for block ``position`` (0-based, so l = position + 1) of ``blocks``."""
    if not 0 <= position < blocks:
        raise ValueError(f"block {position} is not one of {blocks}")
    return 1.0 - (position + 1) / blocks * (1.0 - final_survival)


def expected_drop_ratio(droppable: list[int], blocks: int, final_survival: float,
                        macs: list[int] | None = None) -> float:
    """Expected fraction of the droppable blocks' MACs skipped (``macs`` per block; equal weights if None)."""
    weights = macs if macs is not None else [1] * len(droppable)
    drops = [1.0 - survival_probability(i, blocks, final_survival) for i in droppable]
    return sum(w * d for w, d in zip(weights, drops)) / sum(weights)


def final_survival_for_drop(drop: float, droppable: list[int], blocks: int, macs: list[int] | None = None) -> float:
    """The p_L at which :func:`expected_drop_ratio` equals ``drop`` (the ratio is linear in 1 - p_L)."""
    per_unit = expected_drop_ratio(droppable, blocks, 0.0, macs)  # the drop ratio at 1 - p_L = 1
    final = 1.0 - drop / per_unit
    if not 0 < final <= 1:
        raise ValueError(f"a drop ratio of {drop} is out of reach by linear decay over these blocks "
                         f"(at most {per_unit:.3f})")
    return final


def sd_seed(run_seed: int) -> int:
    """The seed of the technique's generator for a run seed (63 bits, as torch generators require)."""
    return (run_seed * 1_000_003 + SEED_SALT) % (2**63 - 1)


class Technique(base.Technique):
    name = "stochastic_depth"

    def __init__(self, config: Config) -> None:
        self.config = config
        self.generator = torch.Generator()
        self.survival: dict[int, float] = {}  # droppable block index -> p_l
        self.block_macs: dict[int, int] = {}  # forward MACs per sample of each droppable block
        self.train_counts: dict[int, list[int]] = {}  # per droppable block: [samples run, samples offered]

    def attach(self, trainer: Trainer) -> None:
        if "slu" in trainer.config.techniques:
            raise ConfigError("techniques.stochastic_depth: cannot be combined with slu (both decide which "
                              "blocks run)")
        model = trainer.model
        blocks = getattr(model, "blocks", ())
        droppable = skippable_blocks(model)
        if not droppable:
            raise ConfigError("techniques.stochastic_depth: the model has no identity-shortcut residual block "
                              "(use model.name='resnet')")
        self.survival = {i: survival_probability(i, len(blocks), self.config.final_survival) for i in droppable}
        self.train_counts = {i: [0, 0] for i in droppable}
        self.generator.manual_seed(sd_seed(trainer.config.seed))
        model.block_runner = self.run_block

    def run_block(self, index: int, block: ResidualBlock, x: torch.Tensor) -> torch.Tensor:
        if index not in self.survival:
            return block(x)
        if not (block.training and torch.is_grad_enabled()):
            return block(x, residual_scale=self.survival[index])  # test time: every block, scaled by p_l
        if index not in self.block_macs:
            self.block_macs[index] = block_macs_per_sample(block, x.shape[2], x.shape[3])
        survive = bool(torch.rand((), generator=self.generator) < self.survival[index])
        counts = self.train_counts[index]
        counts[1] += int(x.shape[0])
        if not survive:
            return x  # dropped: the block is not called, so nothing is computed or charged
        counts[0] += int(x.shape[0])
        return block(x)

    def drop_ratio(self) -> float:
        """Measured MAC-weighted fraction of the droppable blocks' training work skipped (0 before any step)."""
        offered = sum(self.block_macs.get(i, 1) * c[1] for i, c in self.train_counts.items())
        executed = sum(self.block_macs.get(i, 1) * c[0] for i, c in self.train_counts.items())
        return 1.0 - executed / offered if offered else 0.0

    def report(self) -> dict[str, Any]:
        indices = sorted(self.survival)
        weights = [self.block_macs.get(i, 1) for i in indices]
        expected = sum(w * (1 - self.survival[i]) for i, w in zip(indices, weights)) / sum(weights) if indices else 0.0
        return {"final_survival": self.config.final_survival,
                "survival": {str(i): self.survival[i] for i in indices},
                "expected_train_drop_ratio": expected, "measured_train_drop_ratio": self.drop_ratio(),
                "per_block_train_drop_rate": {str(i): (1 - c[0] / c[1] if c[1] else 0.0)
                                              for i, c in sorted(self.train_counts.items())}}

    def state_dict(self) -> dict[str, Any]:
        return {"generator": self.generator.get_state(),
                "train_counts": {i: list(c) for i, c in self.train_counts.items()}}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.generator.set_state(state["generator"])
        self.train_counts = {i: list(c) for i, c in state["train_counts"].items()}
