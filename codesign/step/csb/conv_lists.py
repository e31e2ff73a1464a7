"""A CSB convolution layer's FP, WG and EB as call lists: every tile read in place, halo and all, stride 2 on the PE.

The layer's maps lie whole in the arena (:mod:`codesign.step.csb.conv_arena`); a call reads a tile's input as a
3-D block, so the host cuts nothing, and a stride-2 layer runs at stride 2 on the PE (header ``S2``). Per lane
chunk ``k`` and output tile ``(ty, tx)`` (row-major):

* **FP**, per block row: a chain over the row's stored blocks in column order (the golden sweep's order, so
  every sum saturates as in :func:`codesign.pe.csb.golden.forward`: a position's additions do not depend on the
  tiling), the first ``ZERO`` (or, on a shortcut adding onto its block's sums, loading them), the others ``CARRY``
  from the sums the call before held (``HOLD``); the last writes the tile's sums into ``z``;
* **WG**, per stored block: a chain over the chunks and tiles, ``ZERO`` then ``CARRY``; each call reads three
  segments (the index, the block column's input tile, the block row's error tile); the last writes the
  gradients after the index in ``ig``;
* **EB**, per block column: the tiles' sums overlap where their halos do, so ``dx`` is first cleared (EB
  transactions without entries, ``ZERO``, whose results are zeros, over the grid but tile (0, 0)'s region), then
  per tile a chain over the column's blocks in row order: tile (0, 0)'s from zero, every later one's first call
  taking the tile's input positions from ``dx`` as its initial sums (the third segment), the last writing them
  back, so each tile adds onto what the tiles before it left. A column with one block starts a later tile's
  chain with an entry-less EB that only loads those sums; a map of one tile is neither cleared nor loaded.

FP's sums equal the whole-map golden model bit for bit at any tiling; WG's and EB's add the same products in
another order (tile by tile), so they equal it wherever no partial sum saturates (the conv loop's set-up,
:class:`codesign.loops.csb_conv.CsbConvSetup`, refuses a network whose sums could). A block row or column with no
stored kernel is never written: its sums stay as the arena holds them, zero in the fresh arena of a pruning
event.
"""

from __future__ import annotations

from typing import List, Sequence, Tuple

from codesign.contracts.calls import RAW, Block, Call, check_list
from codesign.numerics.records import keyword_record
from codesign.numerics.round_stage import RoundStageConfig
from codesign.pe.csb.format import CSBMatrix
from codesign.pe.csb.spec import CsbSpec
from codesign.pe.csb.stream import Op, header_word
from codesign.step.csb.arena import BlockSlots, EntryRange, words_of_bytes
from codesign.step.csb.conv_arena import ConvArena, ConvShape, build_conv_arena
from codesign.step.share import calls_of


@keyword_record
class ConvLists:
    """One step's lists of a conv layer for ``n`` samples: ``forward`` (FP into ``z``) and ``backward`` (WG into
    ``ig``, then EB into ``dx``); ``macs``: the products the stored kernels take (``nnz * k^2`` a position)."""

    n: int
    forward: Tuple[Call, ...]
    backward: Tuple[Call, ...]
    macs: int


class _Drafts:
    """The calls of one list before their record slots are known; a network's layers add to one ``items``."""

    def __init__(self, arena: ConvArena, n: int, items: list | None = None, chunks: Sequence[int] | None = None,
                 columns: Sequence[int] | None = None, onto: Sequence[int] = ()) -> None:
        self.a, self.items, self.onto = arena, [] if items is None else items, frozenset(onto)
        self.all_chunks = arena.chunks_of(n)
        self.chunks = range(self.all_chunks) if chunks is None else chunks
        self.columns = range(arena.column_blocks) if columns is None else columns
        self.stride = arena.shape.stride
        ty, tx = arena.tiles
        self.tiles = [(y, x) for y in range(ty) for x in range(tx)]

    def add(self, header: int, segments: Sequence[Block], out: Block, count: int,
            rounding: RoundStageConfig = RAW) -> None:
        self.items.append((header, tuple(segments), out, count, rounding))

    def weights(self, s: BlockSlots) -> Block:
        """FP's and EB's first two sections, the index and the weight codes, each in whole beats."""
        kk = self.a.shape.kernel ** 2
        return Block(offset=s.iw, words=s.index_words + words_of_bytes(s.nnz * kk, s.parts), rows=1)

    def header(self, op: Op, nnz: int, first: bool, last: bool) -> int:
        return header_word(op, nnz, zero=first, carry=not first, hold=not last, stride=self.stride, k1=self.a.k1)


def _forward(d: _Drafts) -> None:
    """FP per chunk, tile and block row: a chain over the row's blocks (:func:`_chain`), from zero, or for the rows
    in ``d.onto`` from the sums ``z`` holds (another layer's, which this one adds to)."""
    a, spec = d.a, d.a.spec
    count = spec.block_rows * spec.out_pos * spec.batch
    for k in d.chunks:
        for ty, tx in d.tiles:
            some_x = a.in_tile(ty, tx, 0, a.x[k], 1)  # what an entry-less FP reads as its (unused) input
            for r in range(a.row_blocks):
                row = [s for s in a.blocks if s.row == r]
                _chain(d, Op.FP, row, [a.in_tile(ty, tx, s.col * spec.block_cols, a.x[k], 1) for s in row],
                       a.out_tile(ty, tx, r * spec.block_rows, a.z[k], 4), fresh=r not in d.onto, filler=some_x,
                       count=count)


def _gradients(d: _Drafts, parts: Sequence[EntryRange]) -> None:
    a, spec = d.a, d.a.spec
    steps = [(k, tile) for k in range(d.all_chunks) for tile in d.tiles]
    for part in parts:
        s, words = part.slots, part.value_words  # on a wide stream the last beat's unused parts too
        index = Block(offset=part.index(s.ig), words=part.index_words, rows=1)
        for j, (k, (ty, tx)) in enumerate(steps):
            last = j == len(steps) - 1
            segments = (index, a.in_tile(ty, tx, s.col * spec.block_cols, a.x[k], 1),
                        a.out_tile(ty, tx, s.row * spec.block_rows, a.dy[k], 1))
            out = Block(offset=part.gradients, words=words, rows=1) if last else Block()
            d.add(d.header(Op.WG, part.nnz, not j, last), segments, out, words if last else 0)


def clear_regions(arena: ConvArena) -> List[Tuple[int, int]]:
    """Grid corners ``(row, col)`` of the input tiles whose zeros clear the whole grid: tile-sized, side by side,
    the last of a row or column moved back to end on the grid's edge."""
    (gh, gw), (ih, iw) = arena.grid, arena.geometry.in_tile(arena.shape.stride)
    rows = sorted({min(r, gh - ih) for r in range(0, gh, ih)})
    cols = sorted({min(c, gw - iw) for c in range(0, gw, iw)})
    return [(r, c) for r in rows for c in cols]



def _errors(d: _Drafts) -> None:
    """EB per chunk, tile and block column. Tile ``(0, 0)`` is the first to touch its positions, so its chains
    start from zero (``ZERO``) and its region needs no clearing; the other tiles add onto the grid, which the
    clears zero first. A map of one tile needs no clear and no load at all; tiles whose inputs share no halo (a
    kernel no larger than the stride) start every chain from zero, and where they also leave no gap (a kernel of
    the stride: a 1 x 1 conv at stride 1) nothing is cleared either. The columns in ``d.onto`` add onto sums
    another layer left on the grid (a shortcut's errors onto its block's conv1's): never cleared, every tile's
    chain loaded."""
    a, spec = d.a, d.a.spec
    count = spec.block_cols * a.geometry.in_pos_at(d.stride) * spec.batch
    several, k = a.tiles != (1, 1), a.shape.kernel
    overlap = several and k > d.stride  # the tiles' inputs share a halo: a later tile adds onto the grid's sums
    clears = [corner for corner in clear_regions(a) if corner != (0, 0)] if several and k != d.stride else []
    for k in d.chunks:
        # what an entry-less EB reads as its (unused) errors: its own chunk's, which no other IP writes meanwhile
        some_dy = a.out_tile(0, 0, 0, a.dy[k], 1)
        for c in d.columns:
            for row, col in clears if c not in d.onto and any(s.col == c for s in a.blocks) else ():
                d.add(header_word(Op.EB, 0, zero=True, stride=d.stride, k1=a.k1), (some_dy,),
                      a.grid_block(row, col, c * spec.block_cols, a.dx[k], 4), count)
        for ty, tx in d.tiles:
            for c in d.columns:
                column = [s for s in a.blocks if s.col == c]
                if column:  # else no stored kernel reads these channels: their errors stay 0
                    _chain(d, Op.EB, column, [a.out_tile(ty, tx, s.row * spec.block_rows, a.dy[k], 1) for s in column],
                           a.in_tile(ty, tx, c * spec.block_cols, a.dx[k], 4),
                           fresh=c not in d.onto and ((ty, tx) == (0, 0) or not overlap), filler=some_dy, count=count)


def _chain(d: _Drafts, op: Op, chain: list, data: List[Block], sums: Block, *, fresh: bool, filler: Block,
           count: int) -> None:
    """FP over a block row's blocks in column order, or EB over a block column's in row order, into ``sums``:
    from zero (``fresh``) or from what ``sums`` holds (the first call's third segment; an entry-less call,
    reading ``filler`` as its data, loads them where the chain has one block, as a call cannot write what it
    reads), the last call writing them back. ``data``: each block's input tile (FP) or error tile (EB)."""
    a = d.a
    entry_less = not fresh and len(chain) == 1
    if entry_less:
        d.add(header_word(op, 0, hold=True, stride=d.stride, k1=a.k1), (filler, sums), Block(), 0)
    for j, (s, tile) in enumerate(zip(chain, data)):
        last = j == len(chain) - 1
        zero, load = fresh and j == 0, not fresh and not entry_less and j == 0
        header = header_word(op, s.nnz, zero=zero, carry=not (zero or load), hold=not last, stride=d.stride, k1=a.k1)
        d.add(header, (d.weights(s), tile) + ((sums,) if load else ()), sums if last else Block(),
              count if last else 0)


def layer_forward(arena: ConvArena, n: int, items: list, chunks: Sequence[int] | None = None,
                  onto: Sequence[int] = ()) -> None:
    """FP of ``n`` samples on one layer of a network, added to ``items``: the lane ``chunks`` given (all); the
    block rows ``onto`` add to the sums ``z`` holds."""
    _forward(_Drafts(arena, n, items, chunks, onto=onto))


def layer_gradients(arena: ConvArena, n: int, items: list, parts: Sequence[EntryRange] | None = None) -> None:
    """WG of ``n`` samples on one layer of a network for the entry ranges ``parts`` of its stored blocks (every
    block whole), each a chain over every chunk and tile, added to ``items``."""
    kk = arena.shape.kernel ** 2
    _gradients(_Drafts(arena, n, items), [EntryRange.whole(s, kk) for s in arena.blocks] if parts is None else parts)


def layer_errors(arena: ConvArena, n: int, items: list, chunks: Sequence[int] | None = None,
                 columns: Sequence[int] | None = None, onto: Sequence[int] = ()) -> None:
    """EB of ``n`` samples on one layer of a network for the lane ``chunks`` and block ``columns`` given (all; a
    column's sums are its own channels of ``dx``), added to ``items``; the columns ``onto`` add to the sums ``dx``
    holds."""
    _errors(_Drafts(arena, n, items, chunks, columns=columns, onto=onto))


def layer_backward(arena: ConvArena, n: int, items: list, input_errors: bool) -> None:
    """WG and (``input_errors``) EB of ``n`` samples on one layer, added to ``items``."""
    layer_gradients(arena, n, items)
    if input_errors:
        layer_errors(arena, n, items)


def _drafts(arena: ConvArena, n: int, input_errors: bool) -> Tuple[list, list]:
    forward: list = []
    backward: list = []
    layer_forward(arena, n, forward)
    layer_backward(arena, n, backward, input_errors)
    return forward, backward


def conv_arena(spec: CsbSpec, shape: ConvShape, batch: int, csb: CSBMatrix) -> ConvArena:
    """The arena of one conv layer with a record slot per call of its longest list (a full batch's)."""
    sized = build_conv_arena(spec, shape, batch, csb, record_slots=1)
    slots = max(len(items) for items in _drafts(sized, batch, True))
    return build_conv_arena(spec, shape, batch, csb, record_slots=slots)


def conv_lists(arena: ConvArena, n: int, *, input_errors: bool = True) -> ConvLists:
    """The forward and backward lists of ``n`` samples, checked against the arena (both write their records from
    the same first slot: they run one after the other); ``input_errors`` False: no EB (the network's first layer,
    whose input takes no gradient)."""
    forward, backward = (calls_of(items, arena.records) for items in _drafts(arena, n, input_errors))
    for calls in (forward, backward):
        if len(calls) > arena.record_slots:
            raise ValueError(f"{len(calls)} calls, {arena.record_slots} record slots")
        check_list(calls, 4 * arena.image.size, arena.spec.stream_bits)
    oh, ow = arena.shape.out_map
    macs = (2 + input_errors) * n * sum(s.nnz for s in arena.blocks) * arena.shape.kernel ** 2 * oh * ow
    return ConvLists(n=n, forward=forward, backward=backward, macs=macs)


__all__ = ["ConvLists", "clear_regions", "conv_arena", "conv_lists", "layer_backward", "layer_errors",
           "layer_forward", "layer_gradients"]
