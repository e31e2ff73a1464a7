"""Stochastic mini-batch dropping (SMD), the data-level technique of E²-Train (NeurIPS 2019, Sec. 3.1).

Every scheduled mini-batch is dropped with probability ``p`` (default 0.5),
independently, by a Bernoulli draw from this technique's own generator.

What a dropped step costs and changes:

* **nothing is computed**: ``skip_batch`` answers True before the trainer
  runs any hook, forward or backward pass, so the ledger gets no MAC and no
  DRAM bit for that batch;
* **the optimiser step is not taken at all**: SGD's momentum buffers are not
  decayed, no weight decay is applied and no parameter moves. A dropped
  batch is as if it had never been scheduled, except that
* **the learning-rate schedule still advances**: the trainer's cosine runs
  over all scheduled steps, skipped ones included (as the paper keeps "all
  other training protocols, such as the learning-rate schedule, unchanged").

Randomness: the generator is seeded from the run seed (``seed`` of the
:class:`~codesign.train.config.TrainConfig`) mixed with a fixed SMD salt, so
it is independent of the global torch generator (model initialisation, data
order) and of every other technique. Its state and the decision counters are
in ``state_dict``, so a resumed run drops exactly the batches an
uninterrupted one would.

Energy: with the same number of scheduled epochs SMD halves the work at
p = 0.5. The paper's operating point (Sec. 4.2, Fig. 3a) is SMD with 4/3 of
the baseline's iterations, i.e. an expected work ratio of
``(1 - p) * epochs_smd / epochs_baseline = 0.5 * 4/3 = 0.67``; see
:func:`expected_energy_ratio` and ``codesign.reproduce.smd``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch

from codesign.train.config import is_number, require
from codesign.train.techniques import base

if TYPE_CHECKING:
    from codesign.train.trainer import Trainer

# Mixed into the run seed so that SMD's stream differs from the global generator seeded with the same seed.
SEED_SALT = 0x5D_0001




@dataclass(frozen=True, kw_only=True)
class Config:
    """``p``: probability of dropping each scheduled mini-batch, in [0, 1) (1 would never train)."""

    p: float = 0.5

    def validate(self, prefix: str = "smd") -> None:
        require(is_number(self.p) and 0 <= self.p < 1, f"{prefix}.p", f"must be in [0, 1), got {self.p!r}")


def expected_energy_ratio(p: float, epochs: int, baseline_epochs: int) -> float:
    """Expected work of SMD over ``epochs`` relative to a baseline over ``baseline_epochs`` (same batches per epoch)."""
    return (1 - p) * epochs / baseline_epochs


def smd_seed(run_seed: int) -> int:
    """The seed of SMD's generator for a run seed (kept in 63 bits, as torch generators require)."""
    return (run_seed * 1_000_003 + SEED_SALT) % (2**63 - 1)


class Technique(base.Technique):
    name = "smd"

    def __init__(self, config: Config) -> None:
        self.config = config
        self.generator = torch.Generator()
        self.decisions = 0
        self.skipped = 0

    def attach(self, trainer: Trainer) -> None:
        self.generator.manual_seed(smd_seed(trainer.config.seed))

    def draw(self) -> bool:
        """One Bernoulli(p) decision: True means drop the batch. Always consumes one draw, even at p = 0."""
        skip = bool(torch.rand((), generator=self.generator) < self.config.p)
        self.decisions += 1
        self.skipped += skip
        return skip

    def skip_batch(self, trainer: Trainer) -> bool:
        return self.draw()

    @property
    def skip_rate(self) -> float:
        return self.skipped / self.decisions if self.decisions else 0.0

    def report(self) -> dict[str, Any]:
        return {"p": self.config.p, "decisions": self.decisions, "skipped": self.skipped,
                "measured_skip_rate": self.skip_rate}

    def state_dict(self) -> dict[str, Any]:
        return {"generator": self.generator.get_state(), "decisions": self.decisions, "skipped": self.skipped}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.generator.set_state(state["generator"])
        self.decisions = state["decisions"]
        self.skipped = state["skipped"]
