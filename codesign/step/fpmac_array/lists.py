"""An FB-float MLP's training step as two call lists on the FP-MAC array, with every tensor in place.

Issue 40's step: the weights, velocities and activations stay in the arena
(:mod:`codesign.step.fpmac_array.arena`), the update runs on the PE, and the
host per step writes the batch and the three SGD scalars, starts the
*forward* list, reads the logits, writes the loss gradient it computes from
them, and starts the *backward* list. The lists compute what
:class:`codesign.loops.fb.FbMlpTrainer` computes, bit for bit:

* forward, per layer ``l``: ``Z = [1 | A] . [b; W]``, each output tile a chain
  over the row tiles of ``[b; W]`` (the bias row first, its A the ``ones``
  column); a hidden layer's chains end in the PE's ReLU (the header's flag),
  so they write the next layer's input ``relu(Z)`` and ``Z`` itself is never
  stored. The loop starts each sum from ``b`` as C_in; here it starts from
  +0 and adds ``1 * b`` first, which is ``b`` exactly except that ``b = -0``
  gives +0: a zero's sign, which only the ReLU, the mask (both test
  "positive") and the decoded logits see, so no state word can differ;
* backward, per layer from the last: ``G = [1 | A]^T . dZ`` (A read as
  ``A^T`` by the header's transpose flag, the ones column giving the bias
  gradient as row 0), each tile a chain over the batch's row tiles; for
  ``l > 0`` ``dX = dZ . W^T`` (``W`` read as ``B^T``), each tile a chain over
  ``dZ``'s column tiles, then the mask by the layer's input ``relu(Z)`` of
  the layer before (positive exactly where that ``Z`` is) into its ``dZ``;
* the update: one momentum-SGD operation per parameter tile (three FP-MACs an
  element, as the loop's ``_sgd``), from the step's phase's ``G, P, V`` to the
  other phase's ``P', V'``.

Every result is rounded by the PE itself, so every call is raw. Every chain
runs its contraction in ascending order, as the loop's GEMMs do. A list
depends on the batch's rows, the FB (every header holds it) and the phase:
the trainer keeps the lists it built.
"""

from __future__ import annotations

from typing import List, Optional, Sequence, Tuple

import numpy as np

from codesign.contracts.calls import RECORD_WORDS, Block, Call, check_list
from codesign.numerics import FloatFormat, encode
from codesign.numerics.records import keyword_record
from codesign.pe.fpmac.golden import to_container
from codesign.pe.fpmac_array.contract import Header
from codesign.pe.fpmac_array.spec import FpmacArraySpec
from codesign.pe.fpmac_array.vector import OP_MASK, OP_SGD, VectorHeader, is_vector
from codesign.step.fpmac_array.arena import FbArena, Tiles, build_arena, region

PE = "fpmac_array"
BTile = Tuple[Tiles, int, int, Optional[int]]  # a chain's B: tiles, tile (i, j), rows (None: the tile's)


def one_word(spec: FpmacArraySpec) -> int:
    """The container word of 1.0 (a zero fraction: the same word at every FB)."""
    fmt = FloatFormat(exp_bits=spec.exp_bits, frac_bits=spec.max_fb, rounding=spec.rounding)
    return int(to_container(encode(np.float64(1.0), fmt), spec.max_fb, max_fb=spec.max_fb))


@keyword_record
class FbStepLists:
    """One step's two lists for ``n`` batch rows at ``fb`` in ``phase``: ``forward`` (up to the logits) and
    ``backward`` (gradients, mask, update); ``macs``: the GEMM products of both (the update's three FP-MACs an
    element are not counted, as the loop counts its GEMMs only)."""

    n: int
    fb: int
    phase: int
    forward: Tuple[Call, ...]
    backward: Tuple[Call, ...]
    macs: int

    @property
    def phases(self) -> List[List[Tuple[str, Tuple[Call, ...]]]]:
        """The two lists as a shell's phases (one list each)."""
        return [[(PE, self.forward)], [(PE, self.backward)]]


class _Drafts:
    """The calls of one list before their record slots are known: header, segments, out block, result words."""

    def __init__(self, arena: FbArena, n: int, fb: int, phase: int) -> None:
        self.arena, self.n, self.fb, self.phase = arena, n, fb, phase
        self.rows = arena.a[0].rows_of(n)
        self.items: List[Tuple[int, Tuple[Block, ...], Block, int]] = []

    def params(self, layer: int, name: str, phase: Optional[int] = None) -> Tiles:
        index = region(self.phase if phase is None else phase, name)
        return self.arena.params[layer].shifted(self.arena.base(index))

    def ones(self, words: int) -> Block:
        return Block(offset=self.arena.ones, words=words, rows=1)

    def add(self, header: int, segments: Sequence[Block], out: Block, count: int) -> None:
        self.items.append((header, tuple(segments), out, count))

    def vector(self, op: int, m: int, n: int, segments: Sequence[Block], out: Block, sections_out: int = 1) -> None:
        self.add(VectorHeader(op=op, m=m, n=n, fb=self.fb).word(), segments, out, sections_out * m * n)

    def chain(self, m: int, n: int, parts: Sequence[Tuple[int, Block, BTile]], out: Block, *,
              trans_a: bool = False, trans_b: bool = False, relu: bool = False) -> None:
        """``C (m x n)`` over the contraction pieces ``parts`` (``(k, A block, B tile)`` in order): each call after
        the first reads its B tile and, in the gap after it, the partial sums the call before left there; with
        ``relu`` the last call sends ReLU of the sums."""
        words = m * n
        for index, (k, a, (tiles, i, j, rows)) in enumerate(parts):
            header = Header(m=m, n=n, k=k, fb=self.fb, trans_a=trans_a, trans_b=trans_b, accumulate=index > 0,
                            relu=relu and index + 1 == len(parts))
            b = tiles.with_gap(i, j, words, rows) if index else tiles.tile(i, j, rows)
            if index + 1 < len(parts):
                next_tiles, ni, nj, nrows = parts[index + 1][2]
                target = next_tiles.gap_block(ni, nj, words, nrows)
            else:
                target = out
            self.add(header.word(), (a, b), target, words)

    def calls(self, first_record: int) -> Tuple[Call, ...]:
        return tuple(Call(header=header, segments=segments, out=out, count=count,
                          record=first_record + 4 * RECORD_WORDS * index)
                     for index, (header, segments, out, count) in enumerate(self.items))


def _forward(d: _Drafts) -> None:
    arena = d.arena
    last = len(arena.params) - 1
    for layer in range(last + 1):
        p, a = d.params(layer, "p"), arena.a[layer]
        out = arena.logits if layer == last else arena.a[layer + 1]  # the logits, or the next input relu(Z)
        for i, r in enumerate(d.rows):
            for t, o in enumerate(p.col_spans):
                parts = [(1, d.ones(r), (p, 0, t, None))]
                parts += [(f, a.tile(i, j - 1, r), (p, j, t, None)) for j, f in enumerate(p.row_spans) if j]
                d.chain(r, o, parts, out.tile(i, t, r), relu=layer < last)


def _backward(d: _Drafts) -> None:
    arena = d.arena
    for layer in range(len(arena.params) - 1, -1, -1):
        g, p, a, dz = d.params(layer, "g"), d.params(layer, "p"), arena.a[layer], arena.dz[layer]
        for t, o in enumerate(g.col_spans):
            d.chain(1, o, [(r, d.ones(r), (dz, i, t, r)) for i, r in enumerate(d.rows)], g.tile(0, t))
            for j, f in enumerate(g.row_spans):
                if j:
                    d.chain(f, o, [(r, a.tile(i, j - 1, r), (dz, i, t, r)) for i, r in enumerate(d.rows)],
                            g.tile(j, t), trans_a=True)
        if not layer:
            continue
        dx, dz_before = arena.dx[layer], arena.dz[layer - 1]
        for i, r in enumerate(d.rows):
            for j, f in enumerate(p.row_spans):
                if j:
                    d.chain(r, f, [(o, dz.tile(i, t, r), (p, j, t, None)) for t, o in enumerate(p.col_spans)],
                            dx.tile(i, j - 1, r), trans_b=True)
        for i, r in enumerate(d.rows):
            for c, f in enumerate(dx.col_spans):
                d.vector(OP_MASK, r, f, (dx.tile(i, c, r), a.tile(i, c, r)), dz_before.tile(i, c, r))


def _update(d: _Drafts) -> None:
    """Momentum SGD per parameter tile: G, P, V read as three rows a region apart; P', V' written as two rows
    a region apart into the other phase's regions."""
    arena = d.arena
    scalars = Block(offset=arena.scalars, words=3, rows=1)
    for layer in range(len(arena.params)):
        g, target = d.params(layer, "g"), d.params(layer, "p", 1 - d.phase)
        for j, rows in enumerate(g.row_spans):
            for t, cols in enumerate(g.col_spans):
                words = rows * cols
                operands = Block(offset=g.offsets[j][t], words=words, rows=3, stride=arena.region_bytes)
                out = Block(offset=target.offsets[j][t], words=words, rows=2, stride=arena.region_bytes)
                d.vector(OP_SGD, rows, cols, (scalars, operands), out, sections_out=2)


def _drafts(arena: FbArena, n: int, fb: int, phase: int) -> Tuple[_Drafts, _Drafts]:
    if phase not in (0, 1):
        raise ValueError(f"phase {phase!r}: 0 or 1")
    forward, backward = _Drafts(arena, n, fb, phase), _Drafts(arena, n, fb, phase)
    _forward(forward)
    _backward(backward)
    _update(backward)
    return forward, backward


def gemm_products(calls: Sequence[Call]) -> int:
    """Products of a list's GEMM calls (``M * N * K`` a header; element-wise calls have none)."""
    return sum(Header.parse(call.header).macs for call in calls if not is_vector(call.header))


def step_arena(spec: FpmacArraySpec, layers: Sequence[int], batch: int) -> FbArena:
    """The arena of ``layers`` trained ``batch`` rows a step on ``spec``, with a record slot per call of its
    longest list (a full batch's)."""
    sized = build_arena(spec, layers, batch, one=one_word(spec), record_slots=0)
    slots = max(len(d.items) for d in _drafts(sized, batch, spec.max_fb, 0))
    return build_arena(spec, layers, batch, one=one_word(spec), record_slots=slots)


def step_lists(arena: FbArena, n: int, fb: int, phase: int) -> FbStepLists:
    """The forward and backward lists of a step of ``n`` rows at ``fb`` in ``phase``, checked against the arena
    (both lists write their records from the same first slot: they run one after the other)."""
    forward, backward = (d.calls(arena.records) for d in _drafts(arena, n, fb, phase))
    for calls in (forward, backward):
        if len(calls) > arena.record_slots:
            raise ValueError(f"{len(calls)} calls, {arena.record_slots} record slots")
        check_list(calls, 4 * arena.image.size)
    return FbStepLists(n=n, fb=fb, phase=phase, forward=forward, backward=backward,
                       macs=gemm_products(forward) + gemm_products(backward))


__all__ = ["PE", "FbStepLists", "gemm_products", "one_word", "step_arena", "step_lists"]
