"""Where a TT list trainer's layer hands its result on by writing the receiving layer's codes itself
(:class:`codesign.loops.tt_lists.TtListTrainer`): the next layer's input after its forward lists, the output
gradient of the layer below after its backward ones, rounded straight from its accumulators. Between two layers'
lists the host then makes the codes in one scaling pass, and the values the loop hands on (float32) wait until
the receiving layer asks for them beside its own lists."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Callable, Tuple

import numpy as np

from codesign.step.tt.list_finish import handed_gradient_codes, handed_input_codes, input_grad, layer_output


@dataclass(frozen=True, eq=False)
class Handed:
    """What a layer handed on having written the receiving layer's codes: ``values()``, the values it would have
    handed on (float32), worked out once when first asked; ``codes``, as float32 whole numbers; ``inside``, for an
    input, where it lay within its codes' bounds. ``values()`` reads the handing layer's accumulators in its arena
    when first asked, so it must be asked within the step: no list writes those words again before the next step
    (the trainer asks beside the receiving layer's lists, and a layer's rest at the latest)."""

    values: Callable[[], np.ndarray]
    codes: np.ndarray
    inside: np.ndarray | None = None


def resolved(value):
    """An array handed on, or the values of a :class:`Handed`."""
    return value.values() if isinstance(value, Handed) else value


def hand_forward(shell, state, lists, arena, book, fracs, bias, following) -> Handed | None:
    """The next layer's input codes, rounded straight from this layer's output sums (and ``bias``, as the output
    adds it), written into its arena (:func:`~codesign.step.tt.list_finish.handed_input_codes`: the ReLU of the
    float32 output's codes, in a third of the host's passes); the output is worked out when first asked. None,
    with nothing written, where that is not provably the same: the next layer takes its codes from the output, as
    the loop does. ``following``: the next layer's :class:`~codesign.loops.tt_list_prep.Prepared` (its state,
    fractions, lists and arena)."""
    state_next, fracs_next, lists_next, arena_next = following.state, following.fracs, following.lists, following.arena
    made = handed_input_codes(state, lists, arena, book, fracs, bias, fracs_next.act[0], state_next.activation_bits)
    if made is None:
        return None
    codes, inside = made
    shell.flush(arena_next, lists_next.write(arena_next, x=codes, x_t=codes))
    return Handed(values=lru_cache(maxsize=None)(lambda: layer_output(state, lists, arena, book, fracs, bias=bias)),
                  codes=codes, inside=inside)


def hand_backward(shell, state, lists, arena, fracs, passes: np.ndarray, below: Tuple) -> Handed | None:
    """The layer below's output-gradient codes, rounded straight from this layer's input-gradient sums (masked
    where ``passes`` is not), written into its arena (:func:`~codesign.step.tt.list_finish.handed_gradient_codes`:
    in half the host's passes); the input gradient is worked out when first asked. None, with nothing written,
    where that is not provably the same. ``below``: the layer below's forward part (state, input, later works,
    book, fractions, lists, arena, output)."""
    state_below, _, _, _, fracs_below, lists_below, arena_below, _ = below
    d = len(state_below.cores)
    codes = handed_gradient_codes(state, lists, arena, fracs, passes, fracs_below.grad[d - 1], state_below.grad_bits)
    if codes is None:
        return None
    shell.flush(arena_below, lists_below.write(arena_below, gy=codes))
    return Handed(values=lru_cache(maxsize=None)(lambda: input_grad(state, lists, arena, fracs, inside=passes)),
                  codes=codes)


__all__ = ["Handed", "hand_backward", "hand_forward", "resolved"]
