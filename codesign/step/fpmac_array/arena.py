"""Where an FB-float MLP's training state lies in a call list's arena: every tensor tile by tile, in place.

Why tiles: the FP-MAC array takes at most ``max_m x max_k`` of A and
``max_k x max_n`` of B per transaction, so a layer GEMM is cut into calls, and
a contraction longer than ``max_k`` is chained through ``C_in`` (the FP-MAC
accumulates in ``k`` order from it, so a chain is bit for bit one long
contraction). A chained GEMM takes three sections: A, B, then C_in. So every
tile a chain reads as B is stored contiguously with :attr:`Tiles.gap` free
words after it, and the previous call of the chain writes its partial sums
there: B and C_in are then one contiguous segment, and a call takes two of the
shell's :data:`~codesign.contracts.calls.MAX_SEGMENTS` (a third costs a
sequencer cycle a call).

Every matrix is cut on one grid of ``tile = min(max_m, max_n, max_k)`` rows
and columns, so a tile of one GEMM's result is a whole tile of the next
operation's operand (the mask, the next layer's GEMMs) and element-wise
operations pair tiles one to one. The batch is cut the same way; a smaller
batch uses the first rows of the same tiles.

The parameters of layer ``l`` are ``[b; W]`` (``1 + fan_in`` rows of
``fan_out`` words): the bias row is a row tile of its own, the rows of ``W``
are cut on the grid, so the feature tiles of ``W`` match the previous layer's
output tiles. Six *regions* of one size ``D`` hold the parameter tiles alike:
``G, P, V`` (gradients, parameters, velocities) of phase 0 and of phase 1. A
step in phase ``p`` reads its ``P`` and ``V``, writes its ``G``, and the
momentum-SGD operation writes ``P'`` and ``V'`` into the other phase's
regions (its results may not overlap its operands): in one call it reads the
three tiles ``G, P, V`` as one block of three rows ``D`` bytes apart and
writes ``P', V'`` as two rows ``D`` apart.
"""

from __future__ import annotations

from typing import Dict, List, Sequence, Tuple

import numpy as np

from codesign.contracts.calls import RECORD_WORDS, ArenaLayout, Block
from codesign.numerics.records import keyword_record
from codesign.pe.fpmac_array.spec import FpmacArraySpec
from codesign.step.host import spans

REGIONS = ("g0", "p0", "v0", "g1", "p1", "v1")  # parameter regions, D bytes apart, in this order
ALIGN_WORDS = ArenaLayout.ALIGN // 4
Ranges = List[Tuple[int, int]]  # (first word, words): what the host flushes or reads


def _aligned(words: int) -> int:
    return -(-words // ALIGN_WORDS) * ALIGN_WORDS


def region(phase: int, name: str) -> int:
    """Index of the ``g``/``p``/``v`` region a step in ``phase`` reads (:data:`REGIONS`)."""
    return REGIONS.index(f"{name}{phase}")


@keyword_record
class Tiles:
    """A matrix stored tile by tile: tile ``(i, j)`` is ``row_spans[i] x col_spans[j]`` words row-major at byte
    ``offsets[i][j]``, ``gap`` free words after it. A batch of fewer rows than the spans hold takes the first
    rows of the same tiles (:meth:`rows_of`)."""

    offsets: Tuple[Tuple[int, ...], ...]
    row_spans: Tuple[int, ...]
    col_spans: Tuple[int, ...]
    gap: int = 0

    def __post_init__(self) -> None:
        if not self.row_spans or not self.col_spans or min(self.row_spans + self.col_spans) < 1 or self.gap < 0:
            raise ValueError(f"tiles of rows {self.row_spans} and columns {self.col_spans} (gap {self.gap})")
        if len(self.offsets) != len(self.row_spans) or any(len(line) != len(self.col_spans) for line in self.offsets):
            raise ValueError("one offset a tile")

    @classmethod
    def place(cls, layout: ArenaLayout, row_spans: Sequence[int], col_spans: Sequence[int], gap: int = 0,
              fill: int = ArenaLayout.RESERVED) -> "Tiles":
        """Room for every tile and its gap in ``layout``, one after the other (64-byte aligned)."""
        offsets = tuple(tuple(layout.put(np.full(r * c + gap, fill, dtype=np.uint32)) for c in col_spans)
                        for r in row_spans)
        return cls(offsets=offsets, row_spans=tuple(row_spans), col_spans=tuple(col_spans), gap=gap)

    def shifted(self, offset: int) -> "Tiles":
        """The same tiles ``offset`` bytes further (a parameter region's)."""
        return Tiles(offsets=tuple(tuple(o + offset for o in line) for line in self.offsets),
                     row_spans=self.row_spans, col_spans=self.col_spans, gap=self.gap)

    def rows_of(self, n: int) -> List[int]:
        """Rows of each row tile holding the first ``n`` rows (a prefix of the spans, the last one cut)."""
        if not 1 <= n <= sum(self.row_spans):
            raise ValueError(f"{n} rows: the tiles hold 1..{sum(self.row_spans)}")
        rows, left = [], n
        for span in self.row_spans:
            if left <= 0:
                break
            rows.append(min(span, left))
            left -= span
        return rows

    def tile(self, i: int, j: int, rows: int | None = None) -> Block:
        """Tile ``(i, j)`` (its first ``rows`` rows) as one contiguous block."""
        rows = self.row_spans[i] if rows is None else rows
        return Block(offset=self.offsets[i][j], words=rows * self.col_spans[j], rows=1)

    def with_gap(self, i: int, j: int, words: int, rows: int | None = None) -> Block:
        """Tile ``(i, j)`` and the first ``words`` of its gap: a chained call's B and C_in, one segment."""
        block = self.tile(i, j, rows)
        if words > self.gap:
            raise ValueError(f"{words} words of C_in do not fit the tile's gap of {self.gap}")
        return Block(offset=block.offset, words=block.words + words, rows=1)

    def gap_block(self, i: int, j: int, words: int, rows: int | None = None) -> Block:
        """The first ``words`` of the gap after tile ``(i, j)``: where a chain's partial sums wait."""
        block = self.tile(i, j, rows)
        if words > self.gap:
            raise ValueError(f"{words} partial sums do not fit the tile's gap of {self.gap}")
        return Block(offset=block.offset + 4 * block.words, words=words, rows=1)

    def ranges(self, n: int | None = None) -> Ranges:
        """Word ranges of the first ``n`` rows (all by default), a range per tile."""
        rows = self.rows_of(n) if n is not None else list(self.row_spans)
        return [(self.offsets[i][j] // 4, r * c) for i, r in enumerate(rows) for j, c in enumerate(self.col_spans)]

    def write(self, arena: np.ndarray, matrix: np.ndarray, base: int = 0) -> Ranges:
        """Store ``matrix`` (its rows the first of the tiles'), ``base`` bytes further; its word ranges."""
        matrix = np.asarray(matrix)
        if matrix.ndim != 2 or matrix.shape[1] != sum(self.col_spans):
            raise ValueError(f"a matrix of {sum(self.col_spans)} columns, not {matrix.shape}")
        rows, cols = self.rows_of(matrix.shape[0]), np.cumsum((0,) + self.col_spans)
        ranges, r0 = [], 0
        for i, r in enumerate(rows):
            for j in range(len(self.col_spans)):
                start = (self.offsets[i][j] + base) // 4
                arena[start:start + r * self.col_spans[j]] = matrix[r0:r0 + r, cols[j]:cols[j + 1]].reshape(-1)
                ranges.append((start, r * self.col_spans[j]))
            r0 += r
        return ranges

    def read(self, arena: np.ndarray, n: int | None = None, base: int = 0) -> np.ndarray:
        """The first ``n`` rows (all by default), ``base`` bytes further, as a uint64 matrix."""
        rows = self.rows_of(n) if n is not None else list(self.row_spans)
        out = np.zeros((sum(rows), sum(self.col_spans)), dtype=np.uint64)
        cols, r0 = np.cumsum((0,) + self.col_spans), 0
        for i, r in enumerate(rows):
            for j, c in enumerate(self.col_spans):
                start = (self.offsets[i][j] + base) // 4
                out[r0:r0 + r, cols[j]:cols[j + 1]] = arena[start:start + r * c].reshape(r, c)
            r0 += r
        return out


def param_rows(fan_in: int, tile: int) -> List[int]:
    """Row tiles of ``[b; W]``: the bias row alone, then ``W``'s rows on the grid."""
    return [1] + spans(fan_in, tile)


@keyword_record
class FbArena:
    """The arena of an FB-float MLP step (see the module docstring): per layer ``l`` its parameter tiles
    ``params[l]`` (offsets within region 0; region ``r`` is ``r * region_bytes`` further), its input ``a[l]``
    (``a[0]`` is the batch the host writes; a hidden layer's forward GEMMs write the next one's ReLU on the PE, so
    no pre-activation is stored), the batch's tiles by phase ``inputs`` (``inputs[0]`` is ``a[0]``: a phase-``p``
    step reads ``inputs[p]``, so the host writes the next batch while a step computes), the ``logits`` the host
    reads, output gradient ``dz[l]`` (``dz[-1]``: the host
    writes it) and, for ``l > 0``, input gradient ``dx[l]``
    (``dx[0]`` is None); ``ones`` (``tile`` words of 1.0: the bias row's A), ``scalars`` (weight decay,
    momentum, minus the learning rate), ``records`` (a record slot per call of the longest one-IP list: a phase's lists share those, ``record_slots``),
    the arena's first ``image`` and, for a step shared among copies of the array, ``scratch``: two partial-sum
    buffers an IP (byte offsets), where a chain over parameter tiles that other IPs' chains read too keeps its
    sums, not in the tiles' gaps, which those chains would write as well."""

    spec: FpmacArraySpec
    layers: Tuple[int, ...]
    batch: int
    tile: int
    params: Tuple[Tiles, ...]
    region_bytes: int
    a: Tuple[Tiles, ...]
    inputs: Tuple[Tiles, Tiles]
    logits: Tiles
    dz: Tuple[Tiles, ...]
    dx: Tuple[Tiles | None, ...]
    ones: int
    scalars: int
    records: int
    record_slots: int
    image: np.ndarray
    scratch: Tuple[int, ...] = ()

    @property
    def arena(self) -> np.ndarray:
        """The image, as a list shell's ``arena(lists, key)`` takes it."""
        return self.image

    def base(self, index: int) -> int:
        """Byte offset of parameter region ``index`` relative to region 0."""
        return index * self.region_bytes

    def write_params(self, arena: np.ndarray, phase: int, weights: Sequence[np.ndarray],
                     biases: Sequence[np.ndarray], velocity: Sequence[np.ndarray]) -> Ranges:
        """Store a loop's state (container words; ``velocity`` of weights then biases) in ``phase``'s P and V."""
        count = len(self.params)
        if not len(weights) == len(biases) == count or len(velocity) != 2 * count:
            raise ValueError(f"{count} layers: weights, biases and 2 x {count} velocities")
        ranges: Ranges = []
        for index, tiles in enumerate(self.params):
            for name, bias, weight in (("p", biases[index], weights[index]),
                                       ("v", velocity[count + index], velocity[index])):
                ranges += tiles.write(arena, np.vstack([bias, weight]), self.base(region(phase, name)))
        return ranges

    def read_params(self, arena: np.ndarray, phase: int) -> Dict[str, List[np.ndarray]]:
        """``weights``, ``biases`` and ``velocity`` (weights then biases) from ``phase``'s P and V."""
        state: Dict[str, List[np.ndarray]] = {"weights": [], "biases": [], "velocity": []}
        velocity_b = []
        for tiles in self.params:
            p = tiles.read(arena, base=self.base(region(phase, "p")))
            v = tiles.read(arena, base=self.base(region(phase, "v")))
            state["biases"].append(p[:1])
            state["weights"].append(p[1:])
            state["velocity"].append(v[1:])
            velocity_b.append(v[:1])
        state["velocity"] += velocity_b
        return state

    def param_ranges(self, phase: int) -> Ranges:
        """Word ranges of ``phase``'s P and V."""
        return [(start + self.base(region(phase, name)) // 4, words) for tiles in self.params
                for name in ("p", "v") for start, words in tiles.ranges()]

    def write_scalars(self, arena: np.ndarray, words: Sequence[int]) -> Ranges:
        arena[self.scalars // 4:self.scalars // 4 + 3] = np.asarray(words, dtype=np.uint64).reshape(3)
        return [(self.scalars // 4, 3)]


def build_arena(spec: FpmacArraySpec, layers: Sequence[int], batch: int, *, one: int,
                record_slots: int, copies: int = 1) -> FbArena:
    """The arena of an MLP ``layers`` (features: input, hidden..., classes) trained ``batch`` rows a step on
    ``spec``; ``one`` is the container word of 1.0; ``record_slots`` records (the longest list's calls);
    ``copies`` > 1: the IPs' own partial-sum buffers, two each."""
    layers = tuple(int(f) for f in layers)
    if len(layers) < 2 or min(layers) < 1 or batch < 1:
        raise ValueError(f"layers {layers} and batch {batch}: at least two widths, all >= 1")
    tile = min(spec.max_m, spec.max_n, spec.max_k)
    layout = ArenaLayout()
    rows = spans(batch, tile)
    chunk = tile * tile  # the most partial sums a chain keeps in a gap
    region_words, params = 0, []
    for fan_in, fan_out in zip(layers[:-1], layers[1:]):
        offsets = []
        for r in param_rows(fan_in, tile):
            line = []
            for c in spans(fan_out, tile):
                line.append(4 * region_words)
                region_words += _aligned(r * c + chunk)
            offsets.append(tuple(line))
        params.append(Tiles(offsets=tuple(offsets), row_spans=tuple(param_rows(fan_in, tile)),
                            col_spans=tuple(spans(fan_out, tile)), gap=chunk))
    start = layout.put(np.full(len(REGIONS) * region_words, ArenaLayout.RESERVED, dtype=np.uint32))
    params = [tiles.shifted(start) for tiles in params]
    count = len(layers) - 1
    a = tuple(Tiles.place(layout, rows, spans(layers[index], tile)) for index in range(count))
    inputs = (a[0], Tiles.place(layout, rows, spans(layers[0], tile)))
    logits = Tiles.place(layout, rows, spans(layers[-1], tile))
    dz = tuple(Tiles.place(layout, rows, spans(layers[index + 1], tile), gap=chunk) for index in range(count))
    dx = (None,) + tuple(Tiles.place(layout, rows, spans(layers[index], tile)) for index in range(1, count))
    ones = layout.put(np.full(tile, one, dtype=np.uint32))
    scalars = layout.put(np.zeros(3, dtype=np.uint32))
    scratch = tuple(layout.reserve(chunk) for _ in range(2 * copies)) if copies > 1 else ()
    records = layout.reserve(RECORD_WORDS * record_slots)
    return FbArena(spec=spec, layers=layers, batch=batch, tile=tile, params=tuple(params),
                   region_bytes=4 * region_words, a=a, inputs=inputs, logits=logits, dz=dz, dx=dx, ones=ones,
                   scalars=scalars,
                   records=records, record_slots=record_slots, image=layout.image(), scratch=scratch)


__all__ = ["REGIONS", "FbArena", "Tiles", "build_arena", "param_rows", "region"]
