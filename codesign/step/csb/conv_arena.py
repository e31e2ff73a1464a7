"""Where a CSB convolution layer's operands lie in a call list's arena: whole zero-padded maps, read in place.

A conv layer's map is larger than the PE's output tile, so the PE computes it tile by tile, and every tile reads
its input with a halo (``kernel - stride`` positions shared with the next tile). Rather than the host cutting each
tile out, every map lies in the arena once, zero-padded, and a call reads a tile as a 3-D block (planes = the
block's channels, rows = the tile's input rows, one row = the tile's input columns times ``b`` lanes): the halo
is simply where the blocks of neighbouring tiles overlap.

Per lane chunk ``k`` (``spec.batch`` = ``b`` samples; ``b`` a multiple of 4 per 32-bit part of the stream's beat,
so a position's codes are whole beats and every tile, row and piece of a map starts on a beat):

* ``x[k]``: the layer input's 8-bit codes on the padded *grid*, ``[channels][grid_h][grid_w][b]`` bytes, the map
  at ``(pad, pad)``, zero elsewhere (channels padded to whole block columns). FP and WG read a tile's
  ``in_h x in_w`` positions at ``(stride * ty * out_h, stride * tx * out_w)``;
* ``z[k]``: FP's 32-bit sums, ``[outputs][tiles_y * out_h][tiles_x * out_w][b]`` words (rows and columns past the
  output map are the sums of tiles that reach past it: not outputs);
* ``dy[k]``: the output's error codes in the same shape, bytes (zero past the map, so WG adds nothing there);
* ``dx[k]``: EB's 32-bit sums on the padded grid, ``[channels][grid_h][grid_w][b]`` words: the input's error at
  ``(pad, pad)``; a tile's sums land on its input positions, where the overlapping halos add up;
* per stored, non-empty block: ``iw`` (its index bytes, then its ``nnz * k * k`` weight bytes: FP's and EB's
  first two sections), ``ig`` (a copy of the index, then ``nnz * k * k`` gradient words) and ``b[0]``, ``b[1]``
  (the 24-bit buffer words of phase 0 and 1: UPD reads one phase's and writes the other's). On a wide stream
  each of these sections is padded to whole beats, as the PE takes every section from a new beat.

A network's dense head (:mod:`codesign.step.csb.conv_step`) is a 1 x 1 conv on a 1 x 1 map, run on a k x k
build under header ``K1`` (one tap: the arena's tiles, weights and gradients are the kernel-1 PE's,
:attr:`ConvArena.geometry`). Where the batch takes several lane chunks it is *folded*: its chunks lie in one
``fold x fold`` map as positions, chunk ``k`` at ``(k // fold, k % fold)``, so one call computes every chunk and
the head's outputs fill its tile instead of one position of it.

Offsets are bytes from the arena's start; the host reads and writes whole maps with the methods here.
"""

from __future__ import annotations

import dataclasses
import math
from typing import List, Tuple

import numpy as np

from codesign.contracts.calls import RECORD_WORDS, ArenaLayout, Block
from codesign.numerics.records import keyword_record
from codesign.pe.csb.beats import padded
from codesign.pe.csb.format import CSBMatrix, pack_bytes
from codesign.pe.csb.spec import CsbSpec
from codesign.step.csb.arena import BUFFER_EXTRA_BITS, BlockSlots, words_of_bytes


@keyword_record
class ConvShape:
    """A 'same'-padded convolution: ``channels`` in, ``outputs`` out, an ``height x width`` input map, an odd
    ``kernel`` and ``stride`` 1 or 2 (padding ``(kernel - 1) / 2``)."""

    channels: int
    outputs: int
    height: int
    width: int
    kernel: int
    stride: int = 1

    def __post_init__(self) -> None:
        for name in ("channels", "outputs", "height", "width", "kernel"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"conv {name}={value!r} must be an int >= 1")
        if self.kernel % 2 == 0:
            raise ValueError(f"kernel {self.kernel}: a 'same' padding needs an odd kernel")
        if self.stride not in (1, 2) or isinstance(self.stride, bool):
            raise ValueError(f"stride {self.stride!r} must be 1 or 2")

    @property
    def pad(self) -> int:
        return (self.kernel - 1) // 2

    @property
    def out_map(self) -> Tuple[int, int]:
        """Output rows and columns."""
        return ((self.height + 2 * self.pad - self.kernel) // self.stride + 1,
                (self.width + 2 * self.pad - self.kernel) // self.stride + 1)


def _ceil(a: int, b: int) -> int:
    return -(-a // b)


@keyword_record
class ConvArena:
    """The arena of one conv layer trained ``batch`` samples a step on ``spec`` (see the module docstring)."""

    spec: CsbSpec
    shape: ConvShape
    batch: int
    chunks: int
    x: Tuple[int, ...]
    z: Tuple[int, ...]
    dy: Tuple[int, ...]
    dx: Tuple[int, ...]
    blocks: Tuple[BlockSlots, ...]
    records: int
    record_slots: int
    image: np.ndarray
    fold: int = 0  # a folded head's map side (chunks as positions of one map); 0: a map a chunk
    grid_size: Tuple[int, ...] = ()  # the grid x and dx lie on where it is another layer's (empty: its own)
    origin: int = 0  # grid rows and columns before the map's first position, past the layer's own padding

    # -- geometry

    @property
    def k1(self) -> bool:
        """Whether the layer's calls run under header ``K1``: a 1 x 1 conv on a build of a larger kernel."""
        return self.shape.kernel != self.spec.kernel

    @property
    def geometry(self) -> CsbSpec:
        """The PE the layer's calls run as (tiles and taps): the build, or under ``K1`` the build at kernel 1."""
        return self.spec.run_as(kernel_one=self.k1)

    @property
    def tiles(self) -> Tuple[int, int]:
        """Output tiles down and across."""
        oh, ow = self.shape.out_map
        return _ceil(oh, self.spec.out_h), _ceil(ow, self.spec.out_w)

    @property
    def grid(self) -> Tuple[int, int]:
        """Rows and columns of the padded grid ``x`` and ``dx`` lie on: the padded map, and as far as the last
        tile's input reaches."""
        return self.grid_size or grid_of(self.spec, self.shape)

    @property
    def column_blocks(self) -> int:
        return _ceil(self.shape.channels, self.spec.block_cols)

    @property
    def row_blocks(self) -> int:
        return _ceil(self.shape.outputs, self.spec.block_rows)

    def in_tile(self, ty: int, tx: int, channel: int, base: int, word_bytes: int) -> Block:
        """The input positions tile ``(ty, tx)`` reads (or EB writes), channels ``channel`` on, one block column's
        planes, on the grid at ``base``, ``word_bytes`` a lane (1: codes, 4: sums)."""
        s, spec, o = self.shape.stride, self.spec, self.origin
        return self.grid_block(o + s * ty * spec.out_h, o + s * tx * spec.out_w, channel, base, word_bytes)

    def grid_block(self, row: int, col: int, channel: int, base: int, word_bytes: int) -> Block:
        """The block of an input tile's size whose first position is grid ``(row, col)`` (see :meth:`in_tile`)."""
        spec = self.spec
        (gh, gw), (ih, iw), b = self.grid, self.geometry.in_tile(self.shape.stride), spec.batch
        at = (channel * gh + row) * gw + col
        return Block(offset=base + at * b * word_bytes, words=iw * b * word_bytes // 4, rows=ih,
                     stride=gw * b * word_bytes, planes=spec.block_cols, plane_stride=gh * gw * b * word_bytes)

    def out_tile(self, ty: int, tx: int, channel: int, base: int, word_bytes: int) -> Block:
        """The output positions of tile ``(ty, tx)``, one block row's channels from ``channel``, in ``z`` or ``dy``
        at ``base``."""
        spec = self.spec
        th, tw = self.tiles[0] * spec.out_h, self.tiles[1] * spec.out_w
        at = (channel * th + ty * spec.out_h) * tw + tx * spec.out_w
        b = spec.batch
        return Block(offset=base + at * b * word_bytes, words=spec.out_w * b * word_bytes // 4, rows=spec.out_h,
                     stride=tw * b * word_bytes, planes=spec.block_rows, plane_stride=th * tw * b * word_bytes)

    def chunks_of(self, n: int) -> int:
        """The maps ``n`` samples use: a lane chunk's each, or the folded head's one."""
        if not 1 <= n <= self.batch:
            raise ValueError(f"{n} samples: a step takes 1..{self.batch}")
        return 1 if self.fold else _ceil(n, self.spec.batch)

    def place(self, k: int) -> Tuple[int, int, int]:
        """``(map, row, column)`` of lane chunk ``k``: its own map at ``(0, 0)``, or on a folded head position
        ``(k // fold, k % fold)`` of the one map (in and out alike: a 1 x 1 kernel at stride 1)."""
        if not self.fold:
            return k, 0, 0
        return 0, k // self.fold, k % self.fold

    # -- maps <-> (n, channels, h, w) arrays

    def map_ranges(self, bases: Tuple[int, ...], n: int, size: int) -> List[Tuple[int, int]]:
        """``(first word, words)`` of the maps at ``bases`` (``x``, ``dy``: ``size`` 1; ``z``, ``dx``: 4) the
        chunks of ``n`` samples use: what the host flushes after writing them or invalidates before reading. Only
        the map's own channels: the planes that pad them to whole blocks lie after them and hold 0 for good."""
        grid = bases in (self.x, self.dx)
        _, rows, cols = self._grid_dims() if grid else self._out_dims()
        channels = self.shape.channels if grid else self.shape.outputs
        words = _ceil(channels * rows * cols * self.spec.batch * size, 4)
        return [(base // 4, words) for base in bases[:self.chunks_of(n)]]

    def _map_view(self, arena: np.ndarray, base: int, dims: Tuple[int, int, int], dtype) -> np.ndarray:
        """The ``(channels, rows, cols, b)`` array of a map at ``base`` (a view into ``arena``)."""
        b = self.spec.batch
        words = arena[base // 4:base // 4 + _ceil(int(np.prod(dims)) * b * np.dtype(dtype).itemsize, 4)]
        return words.view(dtype).reshape(*dims, b)

    def _grid_dims(self) -> Tuple[int, int, int]:
        return (self.column_blocks * self.spec.block_cols, *self.grid)

    def _out_dims(self) -> Tuple[int, int, int]:
        return (self.row_blocks * self.spec.block_rows, self.tiles[0] * self.spec.out_h,
                self.tiles[1] * self.spec.out_w)

    def _put(self, arena: np.ndarray, bases, dims, dtype, values: np.ndarray, at: Tuple[int, int]) -> None:
        b, n = self.spec.batch, values.shape[0]
        self.chunks_of(n)  # refuses a count the arena does not hold
        chunks = _ceil(n, b)
        padded = np.zeros((chunks * b, *values.shape[1:]), dtype=np.int64)
        padded[:n] = values
        _, c, h, w = values.shape
        if self.fold:  # a position no chunk of this step takes keeps no codes of an earlier one
            self._map_view(arena, bases[0], dims, dtype)[...] = 0
        for k in range(chunks):
            m, r, col = self.place(k)
            view = self._map_view(arena, bases[m], dims, dtype)
            view[:c, at[0] + r:at[0] + r + h, at[1] + col:at[1] + col + w] = \
                padded[k * b:(k + 1) * b].transpose(1, 2, 3, 0).astype(dtype)

    def _get(self, arena: np.ndarray, bases, dims, dtype, n: int, channels: int, at: Tuple[int, int],
             size: Tuple[int, int]) -> np.ndarray:
        parts = []
        self.chunks_of(n)
        for k in range(_ceil(n, self.spec.batch)):
            m, r, c = self.place(k)
            view = self._map_view(arena, bases[m], dims, dtype)
            parts.append(view[:channels, at[0] + r:at[0] + r + size[0], at[1] + c:at[1] + c + size[1]])
        return np.concatenate(parts, axis=-1).transpose(3, 0, 1, 2)[:n].astype(np.int64)

    def write_input(self, arena: np.ndarray, codes: np.ndarray) -> None:
        """8-bit ``codes`` ``(n, channels, height, width)`` into ``x`` (the padding stays 0; a folded head's
        ``(n, channels, 1, 1)``)."""
        codes = np.asarray(codes)
        self._own_maps()
        self._put(arena, self.x, self._grid_dims(), np.int8, codes, (self.shape.pad, self.shape.pad))

    def write_errors(self, arena: np.ndarray, codes: np.ndarray) -> None:
        """8-bit error ``codes`` ``(n, outputs, out_h, out_w)`` into ``dy`` (a folded head's ``(n, outputs, 1, 1)``)."""
        self._put(arena, self.dy, self._out_dims(), np.int8, np.asarray(codes), (0, 0))

    def read_sums(self, arena: np.ndarray, n: int) -> np.ndarray:
        """FP's sums ``(n, outputs, out_h, out_w)`` (a folded head's ``(n, outputs, 1, 1)``)."""
        return self._get(arena, self.z, self._out_dims(), np.int32, n, self.shape.outputs, (0, 0),
                         (1, 1) if self.fold else self.shape.out_map)

    def read_input_errors(self, arena: np.ndarray, n: int) -> np.ndarray:
        """EB's sums at the input map's positions ``(n, channels, height, width)`` (a folded head's
        ``(n, channels, 1, 1)``)."""
        self._own_maps()
        pad = self.shape.pad
        size = (1, 1) if self.fold else (self.shape.height, self.shape.width)
        return self._get(arena, self.dx, self._grid_dims(), np.int32, n, self.shape.channels, (pad, pad), size)

    def _own_maps(self) -> None:
        if self.grid_size:
            raise ValueError("a shortcut's input maps are its block's conv1's: read and write them there")

    def write_weights(self, arena: np.ndarray, csb: CSBMatrix) -> None:
        """The index bytes and 8-bit weights of ``csb`` (the structure the arena was built for) into ``iw``, the
        index into ``ig``."""
        for s in self.blocks:
            entries = slice(s.start, s.start + s.nnz)
            index = pack_bytes(np.asarray(csb.index[entries], dtype=np.int64))
            weights = pack_bytes(np.asarray(csb.values[entries], dtype=np.int64).reshape(-1))
            arena[s.iw // 4:s.iw // 4 + index.size] = index
            at = s.iw // 4 + s.index_words  # the weights' section starts a beat
            arena[at:at + weights.size] = weights
            arena[s.ig // 4:s.ig // 4 + index.size] = index

    def write_state(self, arena: np.ndarray, csb: CSBMatrix, buffer: np.ndarray, phase: int) -> None:
        """The index bytes, the 8-bit weights (the top byte of every buffer word) and the ``(nnz, k, k)`` 24-bit
        ``buffer`` words (stored order) of the structure the arena was built for, into ``iw``, ``ig`` and the
        ``phase`` slots."""
        buffer = np.asarray(buffer, dtype=np.int64).reshape(csb.nnz, self.shape.kernel ** 2)  # nnz 0: no block
        self.write_weights(arena, dataclasses.replace(
            csb, values=(buffer >> BUFFER_EXTRA_BITS).astype(np.int8).reshape(csb.values.shape)))
        for s in self.blocks:
            words = (buffer[s.start:s.start + s.nnz].reshape(-1) & 0xFFFF_FFFF).astype(np.uint32)
            arena[s.b[phase] // 4:s.b[phase] // 4 + words.size] = words

    def read_buffer(self, arena: np.ndarray, phase: int) -> np.ndarray:
        """The ``(nnz, k, k)`` buffer words of ``phase`` in stored order (int64)."""
        k = self.shape.kernel
        parts = [arena[s.b[phase] // 4:s.b[phase] // 4 + s.nnz * k * k] for s in self.blocks]
        return np.concatenate(parts + [np.zeros(0, np.uint32)]).view(np.int32).astype(np.int64).reshape(-1, k, k)

    def read_gradients(self, arena: np.ndarray) -> np.ndarray:
        """WG's ``(nnz, k, k)`` gradients in stored order."""
        k = self.shape.kernel
        parts = [arena[s.ig // 4 + s.index_words:s.ig // 4 + s.index_words + s.nnz * k * k]
                 for s in self.blocks]
        return np.concatenate(parts + [np.zeros(0, np.uint32)]).view(np.int32).astype(np.int64).reshape(-1, k, k)


def grid_of(spec: CsbSpec, shape: ConvShape) -> Tuple[int, int]:
    """The padded grid: the map with its padding, and as far as the last tile's input reaches."""
    s, pad = shape.stride, shape.pad
    (oh, ow), k = shape.out_map, shape.kernel
    reach = (s * (_ceil(oh, spec.out_h) * spec.out_h - 1) + k, s * (_ceil(ow, spec.out_w) * spec.out_w - 1) + k)
    return max(shape.height + 2 * pad, reach[0]), max(shape.width + 2 * pad, reach[1])


def check_build(spec: CsbSpec, shape: ConvShape, csb: CSBMatrix) -> None:
    """Refuse a build or structure the conv lists cannot run, before anything is placed."""
    if csb.kernel != shape.kernel or shape.kernel not in (spec.kernel, 1):
        raise ValueError(f"a {shape.kernel} x {shape.kernel} conv needs a structure of that kernel and a PE of that "
                         f"kernel (or any, for 1 x 1 under K1), not {csb.kernel} and {spec.kernel}")
    if shape.stride > spec.max_stride:
        raise ValueError(f"stride {shape.stride} on a PE built with max_stride {spec.max_stride}")
    if spec.batch % (4 * spec.parts):
        raise ValueError(f"{spec.batch} lanes: the conv lists read a tile's positions as whole {spec.stream_bits}-bit "
                         f"stream words, so the lanes must be a multiple of {4 * spec.parts}")
    if csb.shape != (shape.outputs, shape.channels) or (csb.block_rows, csb.block_cols) != (spec.block_rows,
                                                                                            spec.block_cols):
        raise ValueError(f"structure {csb.shape} in {csb.block_rows} x {csb.block_cols} blocks; the layer is "
                         f"{(shape.outputs, shape.channels)} on {spec.block_rows} x {spec.block_cols} blocks")


def head_fold(spec: CsbSpec, batch: int) -> int:
    """The map side a network's head (a 1 x 1 conv) folds its lane chunks onto (see the module docstring), or 0
    where the batch is one chunk."""
    chunks = _ceil(batch, spec.batch)
    return 0 if chunks == 1 else math.isqrt(chunks - 1) + 1


def folded_head(shape: ConvShape, fold: int) -> ConvShape:
    """The head ``shape`` (a 1 x 1 conv on a 1 x 1 map) folded onto a ``fold x fold`` map."""
    return dataclasses.replace(shape, height=fold, width=fold)


def build_conv_arena(spec: CsbSpec, shape: ConvShape, batch: int, csb: CSBMatrix, *, record_slots: int,
                     layout: ArenaLayout | None = None, fold: int = 0, reads: ConvArena | None = None,
                     adds_to: ConvArena | None = None) -> ConvArena:
    """The arena of one conv layer (``csb``: its stored kernels, ``(outputs, channels)``) trained ``batch`` samples a
    step on ``spec``, with ``record_slots`` records; given a ``layout``, the layer is placed in it alone (a
    network's arena: its records and image are the network's, so ``records`` is 0 and ``image`` empty). ``fold``:
    a folded head's map side (``shape`` then :func:`folded_head`'s). A residual block's shortcut (a 1 x 1 conv)
    places no maps of its own: it ``reads`` its input from, and adds its input errors onto, the grid of another
    layer of its input map (``x`` and ``dx``, past that layer's padding), and ``adds_to`` another layer's sums of
    its output map (``z``; ``dy`` its errors)."""
    check_build(spec, shape, csb)
    if isinstance(batch, bool) or not isinstance(batch, int) or batch < 1:
        raise ValueError(f"batch {batch!r} must be an int >= 1")
    b, chunks, kk, parts = spec.batch, _ceil(batch, spec.batch), shape.kernel ** 2, spec.parts
    if fold:
        if fold * fold < chunks or shape.kernel != 1 or shape.stride != 1 or shape != folded_head(shape, fold):
            raise ValueError(f"a head folded {fold} x {fold} holds {fold * fold} lane chunks of a 1 x 1 conv at "
                             f"stride 1 on a {fold}-square map; {chunks} chunks of {shape}")
        chunks = 1
    gh, gw = grid_of(spec, shape)
    oh, ow = shape.out_map
    th, tw = _ceil(oh, spec.out_h) * spec.out_h, _ceil(ow, spec.out_w) * spec.out_w
    cols = _ceil(shape.channels, spec.block_cols) * spec.block_cols
    rows = _ceil(shape.outputs, spec.block_rows) * spec.block_rows
    alone = layout is None
    layout = ArenaLayout() if alone else layout

    def maps(words: int) -> Tuple[int, ...]:
        return tuple(layout.put(np.zeros(words, dtype=np.uint32)) for _ in range(chunks))

    shared = {}
    if (reads is None) != (adds_to is None):
        raise ValueError("a shortcut shares both its input's grid (reads=) and its output's sums (adds_to=)")
    if reads is not None:
        _check_shared(shape, reads, adds_to)
        shared = dict(grid_size=reads.grid, origin=reads.shape.pad)
        x, dx, z, dy = reads.x, reads.dx, adds_to.z, adds_to.dy
    else:
        x, dy = maps(cols * gh * gw * b // 4), maps(rows * th * tw * b // 4)
        z, dx = maps(rows * th * tw * b), maps(cols * gh * gw * b)
    slots: List[BlockSlots] = []
    for block in csb.blocks():
        nnz = block.entries.stop - block.entries.start
        if nnz:
            index, values = words_of_bytes(nnz, parts), padded(nnz * kk, parts)
            iw = layout.put(np.zeros(index + words_of_bytes(nnz * kk, parts), dtype=np.uint32))
            ig = layout.put(np.zeros(index + values, dtype=np.uint32))
            buffers = tuple(layout.put(np.zeros(values, dtype=np.uint32)) for _ in range(2))
            slots.append(BlockSlots(row=block.row, col=block.col, start=block.entries.start, nnz=nnz, iw=iw, ig=ig,
                                    b=buffers, parts=parts))
    records = layout.reserve(RECORD_WORDS * max(record_slots, 1)) if alone else 0
    return ConvArena(spec=spec, shape=shape, batch=batch, chunks=chunks, x=x, z=z, dy=dy, dx=dx,
                     blocks=tuple(slots), records=records, record_slots=record_slots if alone else 0,
                     image=layout.image() if alone else np.zeros(0, np.uint32), fold=fold, **shared)


def _check_shared(shape: ConvShape, reads: ConvArena, adds_to: ConvArena) -> None:
    """Refuse a shortcut whose maps are not the ones it shares: its input is ``reads``' (a grid no smaller than its
    own) and its output ``adds_to``'s."""
    r = reads.shape
    if (shape.kernel != 1 or (r.channels, r.height, r.width) != (shape.channels, shape.height, shape.width)
            or adds_to.shape.out_map != shape.out_map or adds_to.shape.outputs != shape.outputs
            or reads.chunks != adds_to.chunks or reads.fold or adds_to.fold
            or any(have - r.pad < need for have, need in zip(reads.grid, grid_of(reads.spec, shape)))):
        raise ValueError(f"a shortcut {shape} reads {r} and adds to {adds_to.shape}: a 1 x 1 conv of the one's "
                         "input map and the other's output map")


__all__ = ["ConvArena", "ConvShape", "build_conv_arena", "check_build", "folded_head", "grid_of", "head_fold"]
