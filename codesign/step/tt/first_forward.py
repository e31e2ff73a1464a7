"""PE1's share of a layer's first forward contraction, so that PE1's copies do not idle through it.

Every forward contraction is PE2's: it passes a state's last axis (``R``, the input modes not yet contracted)
through its lanes, while PE1 sums its ``K``, so PE1 cannot read a state the way PE2 writes it. The first
contraction's input is different: the host writes it, and may write it in any layout. For one sample ``b`` of
the batch, with core 0 ``(a, m, n, c)`` and ``X_b`` the sample's input as ``(a n) x R``,

    S_1[b, (m c), r] = sum over (a n) of G[(m c), (a n)] * X_b[(a n), r]

is a PE1 transaction with the core's forward layout as ``A`` (``I = m c`` rows, ``J = 1``, ``K = a n``) and
``X_b`` transposed as ``B`` (``L`` = the sample's ``R`` values, rows of ``a n`` values). PE1 sends its results
row ``i`` by row, ``L`` values each: ``(m c)`` outer, ``r`` inner, the order in which PE2 writes that sample's
part of ``S_1``. So the rounding stage writes PE1's codes where PE2's would have gone (:class:`SampledOut`),
and the second forward contraction reads them in place: the samples from ``first`` on are PE1's, the others
PE2's, in one phase. The host writes the input a second time, transposed, for PE1's samples only (a few tens
of kilobytes at paper 003's first layer).

The sums are the same integers of the same codes, rounded by the same stage at the same shift, and their
records move the same tracker, so the step is bit for bit the one without the share.
:func:`first_forward_share` chooses how many samples PE1 takes: the count whose busiest copy of either PE ends
soonest by the PEs' transaction cycles and the shell's cycles a call (:data:`CALL_CYCLES`), none where that is
not 3 % sooner than PE2 alone. A layer of three or more cores whose forward runs in one phase (its
contractions on one PE2 copy, as one list) gets no share: its later forwards would read what PE1 still writes.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable, Tuple

import numpy as np

from codesign.contracts.calls import Block
from codesign.numerics.round_stage import RoundStageConfig
from codesign.step.tt.list_tiles import (Contraction, Out, Rows, busiest_copy, call_tiles, copies_work, cuts,
                                         is_chained)

PE1_NAME = "forward 0 on PE1"  # the contraction of PE1's samples (PE2's keeps the name "forward 0")
MIN_GAIN = 0.97  # a share is taken where its busiest copy ends within this fraction of PE2 alone's
# the shell's cycles a call beside its PE's under the board's memory (list_cycles under BOARD_DDR, PE1's calls of
# paper 003's first layer): its descriptor's fetch 2 (read while the call before computed), the first operand's
# and last result's latency 66, its record 36. PE1's share is a call a few hundred MAC cycles long, so a balance
# by PE cycles alone gives it too many samples (21 of 64 at rank 8, where 18 end the phase 4 k cycles sooner)
CALL_CYCLES = 104
_ANYWHERE = Rows(offset=0, values=1, words=1, i_step=1, j_step=0, chunk=1)  # operands' places move no cycles


@dataclass(frozen=True)
class SampledOut:
    """Where PE1's results of the first forward go: ``L`` is ``(sample, r)``, sample ``s`` being the batch's
    ``first + s``, and result ``(i, (s, r))`` goes where PE2's ``Out`` (``pe2``) puts its result ``(first + s, i,
    r)`` (``I`` the samples, ``L`` the ``rows`` core rows, ``K`` the ``values`` values ``r``). A call's ``L`` tile
    lies within one sample and holds whole rows."""

    pe2: Out
    first: int
    rows: int
    values: int

    @property
    def rounding(self) -> RoundStageConfig:
        return self.pe2.rounding

    @property
    def row_words(self) -> int:
        return self.pe2.row_words

    def block(self, i: Tuple[int, int], l: Tuple[int, int], k: Tuple[int, int], l_all: int, k_all: int) -> Block:
        sample, r0 = divmod(l[0], self.values)
        r1, rv = l[1] - sample * self.values, self.rounding.row_values
        if k != (0, 1) or r1 > self.values or r0 % rv or (r1 - r0) % rv:
            raise ValueError(f"an L tile {l} of PE1's first forward must lie within one sample of {self.values} "
                             f"values and hold whole rows of {rv}")
        at = self.first + sample
        return self.pe2.block((at, at + 1), i, (r0, r1), self.rows, self.values)


def transposed_input(batch: int, an: int, values: int, first: int) -> Callable[[np.ndarray], np.ndarray]:
    """The layout of PE1's ``B``: the input codes ``(batch, a n R)`` of samples ``first`` on, each transposed to
    ``R`` rows of ``a n`` values."""
    def layout(x: np.ndarray) -> np.ndarray:
        return np.asarray(x).reshape(batch, an, values)[first:].transpose(0, 2, 1).reshape(-1, an)
    return layout


def pe1_part(pe2: Contraction, core: Rows, x_t: Rows, first: int) -> Contraction:
    """PE1's contraction over samples ``first`` on of the first forward ``pe2`` (its dims ``(B, a n, R, m c)``),
    reading the core's forward layout ``core`` as ``A`` and the transposed input ``x_t`` as ``B``."""
    batch, an, values, mc = pe2.dims
    out = SampledOut(pe2=pe2.out, first=first, rows=mc, values=values)
    return Contraction(PE1_NAME, "tt1", (mc, 1, an, (batch - first) * values), core, x_t, out, pe2.stat,
                       pe2.bits[::-1])


def first_forward_share(pe2: Contraction, spec1, spec2, pieces: Callable[[Contraction], int]) -> int:
    """The samples of the first forward ``pe2`` (on all of the batch) PE1 takes (0: none), the last ones: of
    counts around the one that balances the two PEs' cycles a sample, the one whose busiest copy of either PE
    ends soonest (:func:`busiest`), where that is within :data:`MIN_GAIN` of PE2 alone's, PE1's calls unchained
    (its copies need no accumulation buffer) and each of their ``L`` tiles within one sample."""
    batch, an, values, mc = pe2.dims
    one = pe1_part(pe2, _ANYWHERE, _ANYWHERE, batch - 1)
    if batch < 2 or not _fits(one, spec1, pieces):
        return 0
    alone = busiest(pe2, batch, spec1, spec2, pieces)
    pe2_cycles = alone / batch  # a sample, on PE2's busiest copy
    pe1_copies = pieces(replace(one, dims=(mc, 1, an, batch * values)))
    pe1_cycles = copies_work(one, spec1, 1, call_cycles=CALL_CYCLES)[0] / pe1_copies  # a sample, copies sharing
    balanced = round(batch * pe2_cycles / (pe2_cycles + pe1_cycles))
    tried = {first: busiest(pe2, first, spec1, spec2, pieces)
             for first in range(max(1, batch - balanced - 2), min(batch, batch - balanced + 3))
             if _fits(pe1_part(pe2, _ANYWHERE, _ANYWHERE, first), spec1, pieces)}
    first = min(tried, key=lambda f: (tried[f], -f), default=batch)
    return batch - first if first < batch and tried[first] < MIN_GAIN * alone else 0


def _fits(pe1: Contraction, spec1, pieces: Callable[[Contraction], int]) -> bool:
    """Whether PE1's part ``pe1`` is calls of one transaction each (its copies need no accumulation buffer) and
    each call's ``L`` tile lies within one sample and holds whole rows (:class:`SampledOut`)."""
    values, rv = pe1.out.values, pe1.out.rounding.row_values
    try:  # PE1's buffers may hold no L tile of whole rows
        n = pieces(pe1)
        tile = call_tiles(pe1, spec1, n, *cuts(pe1, spec1, n))[3]
        return not is_chained("tt1", pe1.dims, spec1, pe1.bits, PE1_NAME) and values % tile == 0 and tile % rv == 0
    except ValueError:
        return False


def busiest(pe2: Contraction, first: int, spec1, spec2, pieces: Callable[[Contraction], int]) -> int:
    """Cycles of the busiest copy of either PE with samples ``first`` on PE1's (:func:`pe1_part`) and the others
    PE2's, each PE's result tiles shared among ``pieces(item)`` copies as the lists cut them
    (:func:`~codesign.step.tt.list_tiles.busiest_copy`), each call
    :data:`CALL_CYCLES` more."""
    batch, an, values, mc = pe2.dims
    parts = [(replace(pe2, dims=(first, an, values, mc)), spec2)] if first else []
    if first < batch:
        parts.append((pe1_part(pe2, _ANYWHERE, _ANYWHERE, first), spec1))
    return max(busiest_copy(item, spec, pieces(item), call_cycles=CALL_CYCLES) for item, spec in parts)


__all__ = ["CALL_CYCLES", "MIN_GAIN", "PE1_NAME", "SampledOut", "busiest", "first_forward_share", "pe1_part",
           "transposed_input"]
