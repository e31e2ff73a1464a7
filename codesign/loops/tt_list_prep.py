"""What a TT list trainer (:class:`codesign.loops.tt_lists.TtListTrainer`) holds for a layer step before its
lists run: the next batch staged beside the step before, and a layer's fractions, lists and arena prepared, its
state and scale book made when first asked."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Tuple

import numpy as np

from codesign.loops.common import StagedBatch
from codesign.step.tt.scale_book import ScaleBook
from codesign.step.tt.step_lists import Fracs


@dataclass(frozen=True, eq=False)
class StagedInput(StagedBatch):
    """A :class:`StagedBatch` (``x`` checked, a float32 copy of its own, as the step converts a batch; no key: the
    step takes the codes only where the scale is still ``frac``), its mean |x| (``observed``), and its ``codes`` at
    ``frac``, the scale the network input's tracker holds as this step left it."""

    observed: float
    frac: int
    codes: np.ndarray
    written_in: object = None  # the arena its codes were written into (None: not written), the forward's layouts


def same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    """Whether two float32 arrays hold the same values bit for bit (-0 is not +0)."""
    return a.shape == b.shape and np.array_equal(a.view(np.uint32), b.view(np.uint32))


def list_fracs(trackers, precision) -> Fracs:
    """The fractions a layer's lists round at, from its trackers by name (each tensor at the scale its tracker
    holds, as ints: a layer's state takes them so) and the code widths of the set-up's ``precision``."""
    def ints(name: str) -> tuple:
        return tuple(int(v) for v in trackers[name])
    return Fracs(act=ints("act_frac_bits"), grad=ints("grad_frac_bits"), core_grad=ints("core_grad_frac_bits"),
                 core=ints("core_frac_bits"),
                 act_bits=precision["activation_bits"], grad_bits=precision["grad_bits"],
                 core_bits=precision["core_bits"])


@dataclass(frozen=True, eq=False)
class Prepared:
    """What a layer's forward needs but its input (:meth:`TtListTrainer._prepare`): its fractions, its lists at
    them and its arena, and ``parts()``, its state and scale book, made once, when first asked. At a step's start
    the first layer's are asked for beside a later phase than its first, beside which ``settle(arena)`` (given the
    arena that phase starts from) checks and writes the cores that phase does not read: both off the path to it."""

    parts: Callable[[], Tuple]
    fracs: Fracs
    lists: object
    arena: np.ndarray
    settle: Callable[[np.ndarray], None] | None = None

    @property
    def state(self):
        return self.parts()[0]

    @property
    def book(self) -> ScaleBook:
        return self.parts()[1]


__all__ = ["Prepared", "StagedInput", "list_fracs", "same_bits"]
