"""Where a TT list trainer's layer hands its result on by writing the receiving layer's codes itself
(:class:`codesign.loops.tt_lists.TtListTrainer`): the next layer's input after its forward lists, the output
gradient of the layer below after its backward ones, rounded straight from its accumulators. Between two layers'
lists the host then makes the codes in one scaling pass, and the values the loop hands on (float32) wait until
the receiving layer asks for them beside its own lists."""

from __future__ import annotations

from dataclasses import dataclass, replace
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


def hand_forward(shell, state, lists, arena, book, fracs, bias, following, early: Tuple | None = None
                 ) -> Handed | None:
    """The next layer's input codes, rounded straight from this layer's output sums (and ``bias``, as the output
    adds it), written into its arena (:func:`~codesign.step.tt.list_finish.handed_input_codes`: the ReLU of the
    float32 output's codes, in a third of the host's passes); the output is worked out when first asked. None,
    with nothing written, where that is not provably the same: the next layer takes its codes from the output, as
    the loop does. ``following``: the next layer's :class:`~codesign.loops.tt_list_prep.Prepared` (its state,
    fractions, lists and arena); ``early``: :func:`hand_forward_early`'s, where the first samples' codes were
    written beside the last forward phase (the rest are written here)."""
    if early is None:
        return _hand_samples(shell, state, lists, arena, book, fracs, bias, following, (0, lists.batch))
    made = _hand_samples(shell, state, lists, arena, book, fracs, bias, following, (early[0].shape[0], lists.batch))
    if made is None:
        return None
    codes, inside = (np.concatenate((part, rest)) for part, rest in zip(early, (made.codes, made.inside)))
    return replace(made, codes=codes, inside=inside)


def hand_forward_early(shell, state, lists, arena, book, fracs, bias, following) -> Tuple | None:
    """Beside the last forward phase, where the phase before it completed the first samples' output
    (``lists.early_samples``): those samples' codes written as :func:`hand_forward` writes the batch's, and
    returned with where their values lay (None, nothing written, where that is not provably the same, or the
    lists complete no sample early)."""
    if not lists.early_samples or "x_t" in following.lists.inputs:
        return None
    shell.invalidate(arena, lists.read_ranges(forward=True, samples=(0, lists.early_samples)))
    made = _hand_samples(shell, state, lists, arena, book, fracs, bias, following, (0, lists.early_samples))
    return None if made is None else (made.codes, made.inside)


def _hand_samples(shell, state, lists, arena, book, fracs, bias, following, samples: Tuple[int, int]
                  ) -> Handed | None:
    """:func:`hand_forward` of ``samples`` (first, stop), whose output the host has read (invalidated): their codes
    written, a :class:`Handed` of the batch's values and of those samples' codes."""
    state_next, fracs_next, lists_next, arena_next = following.state, following.fracs, following.lists, following.arena
    whole = samples == (0, lists.batch)
    made = handed_input_codes(state, lists, arena, book, fracs, bias, fracs_next.act[0], state_next.activation_bits,
                              None if whole else samples)
    if made is None:
        return None
    codes, inside = made
    shell.flush(arena_next, lists_next.write(arena_next, x=codes, x_t=codes) if whole else
                lists_next.write_samples(arena_next, codes, samples[0]))
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


__all__ = ["Handed", "hand_backward", "hand_forward", "hand_forward_early", "resolved"]
