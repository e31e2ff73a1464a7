"""The ABVS fraction-bit rule (paper 005, Eq. (1) and Fig. 3): when to check accuracy and when to raise the FB.

Plain Python, shared by the torch training technique (:mod:`codesign.train.techniques.abvs`)
and the design-point FB-float loop (:mod:`codesign.loops.fb`) that also runs on a board.
"""

from __future__ import annotations

import math
from typing import Any, Dict, List, Mapping, Sequence

CHECK_TOLERANCE_EPOCHS = 1e-9  # ceil(k * f) with f a float: k * f = 9.000000001 still means epoch 9


def check_interval(total_epochs: int, alpha: float, fb_min: int, fb_max: int) -> float:
    """Eq. (1): ``f = T / (alpha * (fb_max - fb_min))`` epochs; ``inf`` when fb_min == fb_max (nothing to check)."""
    if fb_max == fb_min:
        return math.inf
    return total_epochs / (alpha * (fb_max - fb_min))


def check_epoch(index: int, interval: float) -> float:
    """Epoch (0-based) of the ``index``-th check: ``ceil(index * f)``; ``inf`` if never."""
    if math.isinf(interval):
        return 0 if index == 0 else math.inf
    return math.ceil(index * interval - CHECK_TOLERANCE_EPOCHS)


class FbController:
    """The Fig. 3 state machine: current FB, ``A_check`` and the index of the next check.

    Drive it with :meth:`end_epoch` once per epoch, in order; it returns the
    FB for the next epoch. All state is plain data (``state_dict``).
    """

    def __init__(self, *, fb_min: int, fb_max: int, alpha: float, epsilon: float, total_epochs: int) -> None:
        self.fb_min, self.fb_max, self.epsilon = fb_min, fb_max, epsilon
        self.interval = check_interval(total_epochs, alpha, fb_min, fb_max)
        self.fb = fb_min
        self.a_check = 0.0
        self.next_check = 0  # index k of the next check
        self.log: List[Dict[str, Any]] = []  # one row per epoch

    def is_check(self, epoch: int) -> bool:
        return self.fb_max > self.fb_min and check_epoch(self.next_check, self.interval) <= epoch

    def end_epoch(self, epoch: int, accuracy: float) -> int:
        """Record epoch ``epoch`` (trained at ``self.fb``) with validation accuracy ``accuracy`` in [0, 1]."""
        row: dict[str, Any] = {"epoch": epoch, "fb": self.fb, "accuracy": accuracy, "check": False}
        if self.is_check(epoch):
            gain = accuracy - self.a_check
            raised = gain < self.epsilon and self.fb < self.fb_max
            row.update(check=True, a_check=self.a_check, gain=gain, raised=raised)
            self.a_check = accuracy
            while check_epoch(self.next_check, self.interval) <= epoch:  # one check per epoch at most
                self.next_check += 1
            if raised:
                self.fb += 1
        self.log.append(row)
        return self.fb

    def state_dict(self) -> dict[str, Any]:
        return {"fb": self.fb, "a_check": self.a_check, "next_check": self.next_check,
                "log": [dict(row) for row in self.log]}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.fb, self.a_check, self.next_check = int(state["fb"]), float(state["a_check"]), int(state["next_check"])
        self.log = [dict(row) for row in state["log"]]


def fb_schedule(accuracies: Sequence[float], *, fb_min: int, fb_max: int, alpha: float, epsilon: float,
                total_epochs: int | None = None) -> List[int]:
    """FB used in each epoch when epoch ``i`` ends with test accuracy ``accuracies[i]`` (fractions in [0, 1])."""
    controller = FbController(fb_min=fb_min, fb_max=fb_max, alpha=alpha, epsilon=epsilon,
                              total_epochs=len(accuracies) if total_epochs is None else total_epochs)
    used = []
    for epoch, accuracy in enumerate(accuracies):
        used.append(controller.fb)
        controller.end_epoch(epoch, accuracy)
    return used
