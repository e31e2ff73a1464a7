"""The hooks a technique may implement; the trainer calls them in a fixed order each step.

Step order: ``skip_batch`` (a skipped batch costs nothing and changes no
state but the technique's own RNG), ``before_step``, forward, loss +
``extra_loss``, backward, ``after_backward``, optimiser step, ``after_step``.
Epoch order: ``on_epoch_start``, steps, evaluation, ``on_epoch_end``.
Techniques keep every piece of mutable state in ``state_dict`` so a resumed
run continues bit-identically.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch

if TYPE_CHECKING:
    from codesign.train.trainer import Trainer


FIXED_POINT_ARRAY = "fixed_mac_array"  # the PE fixed-point MAC techniques need; not built yet, so a design refuses them


class Technique:
    name = "technique"

    def attach(self, trainer: Trainer) -> None:
        """Called once, after the model and optimiser exist and before any step."""

    def on_epoch_start(self, trainer: Trainer, epoch: int) -> None:
        pass

    def skip_batch(self, trainer: Trainer) -> bool:
        return False

    def before_step(self, trainer: Trainer) -> None:
        pass

    def extra_loss(self, trainer: Trainer, logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor | None:
        return None

    def after_backward(self, trainer: Trainer) -> None:
        pass

    def after_step(self, trainer: Trainer) -> None:
        pass

    def on_epoch_end(self, trainer: Trainer, epoch: int, metrics: dict[str, float]) -> None:
        pass

    def fp_mac_pj(self) -> Any:
        """Energy per FB-float MAC as a function of FB (pJ), for techniques that train in FB-float; else None."""
        return None

    def report(self) -> dict[str, Any]:
        """Technique-specific measurements for results.json (skip rates, predictor use, FB trace, ...)."""
        return {}

    def state_dict(self) -> dict[str, Any]:
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        pass
