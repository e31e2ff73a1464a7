"""An FB-float MLP's training step as call lists on the FP-MAC array, with every tensor in place.

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
runs its contraction in ascending order, as the loop's GEMMs do. On copies of
the array the forward is a phase of lists (runs of the batch's row tiles) and
the backward two (``dX`` and the masks likewise; then per parameter tile its
gradient and update), the same results bit for bit. A list
depends on the batch's rows, the FB (every header holds it) and the phase:
the trainer keeps the lists it built.
"""

from __future__ import annotations

from typing import Callable, List, Optional, Sequence, Tuple

import numpy as np

from codesign.contracts.calls import RAW, Block, Call
from codesign.numerics import FloatFormat, encode
from codesign.numerics.records import keyword_record
from codesign.pe.fpmac.golden import to_container
from codesign.pe.fpmac_array.contract import Header
from codesign.pe.fpmac_array.spec import FpmacArraySpec
from codesign.pe.fpmac_array.vector import OP_MASK, OP_SGD, VectorHeader, is_vector
from codesign.step.fpmac_array.arena import FbArena, Tiles, build_arena, region
from codesign.step.share import Draft, Phase, PhasedLists, balanced, check_copies, placed, runs

PE = "fpmac_array"
BTile = Tuple[Tiles, int, int, Optional[int]]  # a chain's B: tiles, tile (i, j), rows (None: the tile's)


def one_word(spec: FpmacArraySpec) -> int:
    """The container word of 1.0 (a zero fraction: the same word at every FB)."""
    fmt = FloatFormat(exp_bits=spec.exp_bits, frac_bits=spec.max_fb, rounding=spec.rounding)
    return int(to_container(encode(np.float64(1.0), fmt), spec.max_fb, max_fb=spec.max_fb))


@keyword_record
class FbStepLists(PhasedLists):
    """One step's lists for ``n`` batch rows at ``fb`` in ``phase`` on ``copies`` fpmac_array IPs:
    ``forward_phases`` (up to the logits) and ``backward_phases`` (gradients, mask, update), each phase's lists
    side by side (:mod:`codesign.step.share`; one IP: a list each); ``macs``: the GEMM products of all (the
    update's three FP-MACs an element are not counted, as the loop counts its GEMMs only)."""

    n: int
    fb: int
    phase: int
    copies: int
    forward_phases: Tuple[Phase, ...]
    backward_phases: Tuple[Phase, ...]
    macs: int


class _Drafts:
    """The calls of one list before their record slots are known (:data:`codesign.step.share.Draft`); ``ip``: the
    IP of its phase whose partial-sum buffers its chains use (None: the parameter tiles' gaps)."""

    def __init__(self, arena: FbArena, n: int, fb: int, phase: int, ip: int | None = None) -> None:
        self.arena, self.n, self.fb, self.phase = arena, n, fb, phase
        self.scratch = arena.scratch[2 * ip:2 * ip + 2] if ip is not None else ()  # the IP's partial sums
        self.rows = arena.a[0].rows_of(n)
        self.items: List[Draft] = []

    def params(self, layer: int, name: str, phase: Optional[int] = None) -> Tiles:
        index = region(self.phase if phase is None else phase, name)
        return self.arena.params[layer].shifted(self.arena.base(index))

    def a(self, layer: int) -> Tiles:
        """Layer ``layer``'s input: the batch's tiles of this phase (the next step's go into the other phase's while
        this step's lists compute)."""
        return self.arena.inputs[self.phase] if layer == 0 else self.arena.a[layer]

    def ones(self, words: int) -> Block:
        return Block(offset=self.arena.ones, words=words, rows=1)

    def add(self, header: int, segments: Sequence[Block], out: Block, count: int) -> None:
        self.items.append((header, tuple(segments), out, count, RAW))

    def vector(self, op: int, m: int, n: int, segments: Sequence[Block], out: Block, sections_out: int = 1) -> None:
        self.add(VectorHeader(op=op, m=m, n=n, fb=self.fb).word(), segments, out, sections_out * m * n)

    def chain(self, m: int, n: int, parts: Sequence[Tuple[int, Block, BTile]], out: Block, *,
              trans_a: bool = False, trans_b: bool = False, relu: bool = False) -> None:
        """``C (m x n)`` over the contraction pieces ``parts`` (``(k, A block, B tile)`` in order): each call after
        the first reads its B tile and, in the gap after it, the partial sums the call before left there (with
        ``scratch``, the IP's own two buffers in turn, a third segment: the same words to the PE); with ``relu``
        the last call sends ReLU of the sums."""
        words = m * n
        for index, (k, a, (tiles, i, j, rows)) in enumerate(parts):
            header = Header(m=m, n=n, k=k, fb=self.fb, trans_a=trans_a, trans_b=trans_b, accumulate=index > 0,
                            relu=relu and index + 1 == len(parts))
            if self.scratch:
                if words > self.arena.tile ** 2:
                    raise ValueError(f"{words} partial sums do not fit an IP's buffer of {self.arena.tile ** 2}")
                held = (Block(offset=self.scratch[index % 2], words=words, rows=1),) if index else ()
                segments = (a, tiles.tile(i, j, rows), *held)
            else:
                segments = (a, tiles.with_gap(i, j, words, rows) if index else tiles.tile(i, j, rows))
            if index + 1 == len(parts):
                target = out
            elif self.scratch:
                target = Block(offset=self.scratch[(index + 1) % 2], words=words, rows=1)
            else:
                next_tiles, ni, nj, nrows = parts[index + 1][2]
                target = next_tiles.gap_block(ni, nj, words, nrows)
            self.add(header.word(), segments, target, words)


def _forward(d: _Drafts, tiles: Sequence[int]) -> None:
    """The batch's row ``tiles`` through every layer (a hidden layer's chains end in the PE's ReLU)."""
    arena = d.arena
    last = len(arena.params) - 1
    for layer in range(last + 1):
        p, a = d.params(layer, "p"), d.a(layer)
        out = arena.logits if layer == last else arena.a[layer + 1]  # the logits, or the next input relu(Z)
        for i in tiles:
            r = d.rows[i]
            for t, o in enumerate(p.col_spans):
                parts = [(1, d.ones(r), (p, 0, t, None))]
                parts += [(f, a.tile(i, j - 1, r), (p, j, t, None)) for j, f in enumerate(p.row_spans) if j]
                d.chain(r, o, parts, out.tile(i, t, r), relu=layer < last)


def _errors(d: _Drafts, tiles: Sequence[int]) -> None:
    """``dX = dZ . W^T`` and the mask into the layer before's ``dZ``, for the batch's row ``tiles``, from the last
    layer down to the second."""
    arena = d.arena
    for layer in range(len(arena.params) - 1, 0, -1):
        p, a, dz = d.params(layer, "p"), arena.a[layer], arena.dz[layer]
        dx, dz_before = arena.dx[layer], arena.dz[layer - 1]
        for i in tiles:
            r = d.rows[i]
            for j, f in enumerate(p.row_spans):
                if j:
                    d.chain(r, f, [(o, dz.tile(i, t, r), (p, j, t, None)) for t, o in enumerate(p.col_spans)],
                            dx.tile(i, j - 1, r), trans_b=True)
        for i in tiles:
            r = d.rows[i]
            for c, f in enumerate(dx.col_spans):
                d.vector(OP_MASK, r, f, (dx.tile(i, c, r), a.tile(i, c, r)), dz_before.tile(i, c, r))


def _gradient(d: _Drafts, layer: int, j: int, t: int) -> None:
    """Row ``j`` (0: the bias), column ``t`` of layer ``layer``'s ``G = [1 | A]^T . dZ``, a chain over the batch's
    row tiles."""
    arena = d.arena
    g, a, dz = d.params(layer, "g"), d.a(layer), arena.dz[layer]
    o = g.col_spans[t]
    if not j:
        d.chain(1, o, [(r, d.ones(r), (dz, i, t, r)) for i, r in enumerate(d.rows)], g.tile(0, t))
        return
    d.chain(g.row_spans[j], o, [(r, a.tile(i, j - 1, r), (dz, i, t, r)) for i, r in enumerate(d.rows)],
            g.tile(j, t), trans_a=True)


def _update(d: _Drafts, layer: int, j: int, t: int) -> None:
    """Momentum SGD of parameter tile ``(j, t)``: G, P, V read as three rows a region apart; P', V' written as two
    rows a region apart into the other phase's regions."""
    arena = d.arena
    g, target = d.params(layer, "g"), d.params(layer, "p", 1 - d.phase)
    rows, cols = g.row_spans[j], g.col_spans[t]
    operands = Block(offset=g.offsets[j][t], words=rows * cols, rows=3, stride=arena.region_bytes)
    out = Block(offset=target.offsets[j][t], words=rows * cols, rows=2, stride=arena.region_bytes)
    d.vector(OP_SGD, rows, cols, (Block(offset=arena.scalars, words=3, rows=1), operands), out, sections_out=2)


def draft_cycles(spec: FpmacArraySpec) -> Callable[[Draft], int]:
    """A drafted call's cost on the array, as far as its words and products say (to deal lists among copies): its
    operand and result words, and a GEMM's products over the array's MACs."""
    def cycles(item: Draft) -> int:
        header, segments, _, count, _ = item
        words = sum(block.total_words for block in segments) + count
        return words if is_vector(header) else words + -(-Header.parse(header).macs // (spec.rows * spec.cols))
    return cycles


def _phases(arena: FbArena, n: int, fb: int, phase: int, copies: int) -> Tuple[list, list]:
    """The drafted forward phase and the two backward phases, each a list of drafted lists: the forward and then
    ``dX`` and the masks by runs of the batch's row tiles; per parameter tile, its gradient and its update, the
    tiles dealt by cost."""
    if phase not in (0, 1):
        raise ValueError(f"phase {phase!r}: 0 or 1")
    forward, errors, updates = [], [], []
    parts = runs(len(arena.a[0].rows_of(n)), copies)
    if copies > 1 and len(arena.scratch) < 2 * len(parts):
        raise ValueError(f"the arena holds partial sums for {len(arena.scratch) // 2} IPs, not {copies}")
    for index, tiles in enumerate(parts):  # their chains all read the same parameter tiles: each IP's own sums
        ip = index if copies > 1 else None
        forward.append(_Drafts(arena, n, fb, phase, ip))
        _forward(forward[-1], tiles)
        errors.append(_Drafts(arena, n, fb, phase, ip))
        _errors(errors[-1], tiles)
    for layer, params in enumerate(arena.params):
        for t in range(len(params.col_spans)):  # G's chains of a column share dz's gaps: one IP takes them all
            updates.append(_Drafts(arena, n, fb, phase))
            for j in range(len(params.row_spans)):
                _gradient(updates[-1], layer, j, t)
                _update(updates[-1], layer, j, t)
    return [[d.items for d in forward]], [[d.items for d in errors],
                                          balanced([d.items for d in updates], copies, draft_cycles(arena.spec))]


def gemm_products(calls: Sequence[Call]) -> int:
    """Products of a list's GEMM calls (``M * N * K`` a header; element-wise calls have none)."""
    return sum(Header.parse(call.header).macs for call in calls if not is_vector(call.header))


def step_arena(spec: FpmacArraySpec, layers: Sequence[int], batch: int, copies: int = 1) -> FbArena:
    """The arena of ``layers`` trained ``batch`` rows a step on ``spec`` by ``copies`` IPs, with a record slot per
    call of its longest list (a full batch's on one IP: on several, a phase's lists share out those calls)."""
    sized = build_arena(spec, layers, batch, one=one_word(spec), record_slots=0)
    calls = [sum(len(items) for lists in phases for items in lists) for phases in _phases(sized, batch, spec.max_fb,
                                                                                          0, 1)]
    return build_arena(spec, layers, batch, one=one_word(spec), record_slots=max(calls),
                       copies=check_copies(copies))


def step_lists(arena: FbArena, n: int, fb: int, phase: int, copies: int = 1) -> FbStepLists:
    """The lists of a step of ``n`` rows at ``fb`` in ``phase`` on ``copies`` fpmac_array IPs, checked against the
    arena: on one IP a forward and a backward list; on several, a forward phase and two backward phases (see
    :func:`_phases`) whose lists run side by side. Every result is the one-IP step's, bit for bit."""
    forward, backward = (placed(phases, copies, PE, arena.records, arena.record_slots, 4 * arena.image.size)
                         for phases in _phases(arena, n, fb, phase, check_copies(copies)))
    macs = sum(gemm_products(calls) for phase_ in (*forward, *backward) for _, calls in phase_)
    return FbStepLists(n=n, fb=fb, phase=phase, copies=copies, forward_phases=forward, backward_phases=backward,
                       macs=macs)


__all__ = ["PE", "FbStepLists", "draft_cycles", "gemm_products", "one_word", "step_arena", "step_lists"]
