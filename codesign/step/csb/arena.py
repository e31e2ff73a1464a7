"""Where a compressed (CSB) MLP's training state lies in a call list's arena: every tensor in place, as the PE reads it.

Why this layout (docs/csb.md, "A training step as call lists"): a CSB transaction takes three or four sections,
and every segment of a call past the second costs the shell a sequencer cycle. So the arena keeps together what
one call reads in one segment, and every call takes at most two:

* per stored, non-empty block of layer ``l``: ``iw`` = its index bytes then its 8-bit weights (FP's and EB's
  first two sections, one segment); ``ig`` = a copy of the index, then ``nnz`` gradient words (WG reads the
  index; the last call of its chain over lane chunks writes the gradient, the PE holding the sums in between;
  UPD reads index and gradient); ``b[0]``, ``b[1]`` = the 24-bit buffer words of phase 0 and 1 (UPD reads one
  phase's and writes the other's);
* per lane chunk ``k`` (``spec.batch`` samples) and channel tile (``B`` = block rows = block columns channels):
  ``x[l][c][k]`` = layer ``l``'s input codes (``B * b`` bytes, channel-major, lanes inner: the PE's X section);
  the network's input twice, ``inputs[p]`` the tiles a phase-``p`` step reads (``inputs[0]`` is ``x[0]``), so
  the host writes the next step's batch while this step's lists compute;
  ``dy[l][r][k]`` = the error codes of layer ``l``'s output (EB's DY); ``z[l][r][k]`` = layer ``l``'s
  accumulators (the pre-activation, kept for the mask; ``W^T dy`` never leaves the PE before its mask). Every
  ``dy`` tile lies after every ``x`` tile, so WG reads ``x[l][c][k]`` and ``dy[l][r][k]`` as one block of two
  rows.

Tiles no call writes (a block row without a stored entry) stay zero, which is what the PE would compute there.
The encoding (index, weights, buffers) is written once per pruning event (:meth:`CsbArena.write_state`), not per
step. Units: offsets in bytes from the arena's start; ranges in 32-bit words.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import List, Sequence, Tuple

import numpy as np

from codesign.contracts.calls import RECORD_WORDS, ArenaLayout
from codesign.numerics.records import keyword_record
from codesign.pe.csb.beats import padded
from codesign.pe.csb.format import CSBMatrix, pack_bytes
from codesign.pe.csb.loss import NO_SAMPLE_WORD, PARAM_BATCH_BITS, max_classes
from codesign.pe.csb.spec import BUFFER_BITS, DATA_BITS, CsbSpec

MAX_LOSS_BATCH = (1 << PARAM_BATCH_BITS) - 1  # samples a LOSS call divides by (P's field)

Ranges = List[Tuple[int, int]]  # (first word, words): what the host flushes or reads
BUFFER_EXTRA_BITS = BUFFER_BITS - DATA_BITS  # the weight's 8 bits are the buffer word's top bits
_WORD = np.dtype("<u4")  # an arena word as the PE reads it


def words_of_bytes(count: int, parts: int = 1) -> int:
    """Words ``count`` bytes fill, four to a word, in whole beats of ``parts`` words (a section on the stream)."""
    return padded(-(-count // 4), parts)


def _check_words(arena: np.ndarray) -> None:
    """Refuse an arena the host would write codes into at the wrong bytes: not contiguous little-endian 32-bit
    words, as the PE reads them."""
    if arena.dtype != _WORD or not arena.flags.c_contiguous:
        raise ValueError(f"an arena of {arena.dtype} words: the PE reads contiguous little-endian 32-bit words")


def _tiles_key(tiles) -> Tuple[Tuple[int, ...], ...]:
    """Tile offsets as the kept indices' key: the arena's own (tuples) as they are, others made tuples."""
    return tiles if type(tiles) is tuple else tuple(map(tuple, tiles))


@functools.lru_cache(maxsize=64)
def _acc_gather(tiles: Tuple[Tuple[int, ...], ...], b: int, B: int, chunks: int, n: int, channels: int) -> np.ndarray:
    """``(channels, n)`` word indices of accumulator tiles (byte offsets ``tiles[c][k]``: channel tile ``c``, lane
    chunk ``k``; ``B`` channels, then ``b`` lanes inner): sample ``s``, channel ``ch`` lies in tile ``ch // B``,
    chunk ``s // b``, at row ``ch % B``, lane ``s % b``. Read-only, as it is kept."""
    starts = np.array([line[:chunks] for line in tiles], dtype=np.int64) // 4
    samples, channel = np.arange(n)[None, :], np.arange(channels)[:, None]
    index = starts[channel // B, samples // b] + (channel % B) * b + samples % b
    index.flags.writeable = False
    return index


@functools.lru_cache(maxsize=64)
def _acc_ranges(tiles: Tuple[Tuple[int, ...], ...], b: int, B: int, chunks: int,
                channels: int) -> Tuple[Tuple[int, int], ...]:
    """:class:`AccTiles`' ``ranges``: a range per tile of the first ``chunks`` lane chunks, ``B`` rows (fewer in the
    last channel tile) of ``b`` words."""
    return tuple((line[k] // 4, min(B, channels - c * B) * b) for c, line in enumerate(tiles) for k in range(chunks))


@dataclass(frozen=True, eq=False)
class AccTiles:
    """Accumulator tiles as a host reads them every step (the logits, :meth:`CsbArena.acc_tiles`), kept by it so
    that a read hashes no tile offsets: ``ranges``, the words to invalidate before reading (a range per tile: the
    channels lie first, lanes inner); ``index``, their ``(channels, n)`` word indices (read-only)."""

    ranges: Tuple[Tuple[int, int], ...]
    index: np.ndarray

    def read(self, arena: np.ndarray) -> np.ndarray:
        """``(n, channels)`` accumulators, the PE's 32-bit words as int32, column-major (a channel's samples side by
        side, as the tiles hold them; a softmax takes a row's maximum down the columns): one gather."""
        return arena[self.index].view(np.int32).T


@functools.lru_cache(maxsize=64)
def _code_bytes(tiles: Tuple[Tuple[int, ...], ...], b: int, B: int, words: int, n: int,
                channels: int) -> Tuple[np.ndarray, np.ndarray, Tuple[Tuple[int, int], ...]]:
    """Where ``n`` samples' 8-bit codes of ``channels`` channels go in code tiles of ``words`` words (byte offsets
    ``tiles[c][k]``; ``B`` channels, then ``b`` lanes inner, each byte a sample), as arena byte offsets: each code's,
    ``n * channels`` in the codes' row-major order; the other bytes of the tiles of the lane chunks the samples take
    (padded lanes and channels, zeroed); the word ranges. Read-only, as they are kept."""
    chunks = -(-n // b)
    starts = np.array([line[:chunks] for line in tiles], dtype=np.int64).reshape(-1) // 4  # tile c * chunks + k
    every = (4 * starts[:, None] + np.arange(4 * words)).reshape(-1)
    samples, channel = np.arange(n)[:, None], np.arange(channels)[None, :]
    codes = (((channel // B) * chunks + samples // b) * 4 * words + (channel % B) * b + samples % b).reshape(-1)
    taken = np.zeros(every.size, dtype=bool)
    taken[codes] = True
    codes, pads = every[codes], every[~taken]
    for array in (codes, pads):
        array.flags.writeable = False
    return codes, pads, tuple((int(start), words) for start in starts)


@functools.lru_cache(maxsize=64)
@keyword_record
class BlockSlots:
    """One stored, non-empty block of a layer: its block coordinates, entries ``entries`` (stored order) and where
    its words lie (byte offsets): ``iw`` (index, weights), ``ig`` (index, gradients), ``b`` (buffer words of
    phase 0 and 1). On a stream of ``parts`` 32-bit parts a beat every section a slot holds fills whole beats
    (the PE takes each from a new beat and ignores the rest of its last)."""

    row: int
    col: int
    start: int
    nnz: int
    iw: int
    ig: int
    b: Tuple[int, int]
    parts: int = 1

    @property
    def index_words(self) -> int:
        """Words of the index section (and of an FC block's weights): its bytes, four to a word, in whole beats."""
        return words_of_bytes(self.nnz, self.parts)

    @property
    def value_words(self) -> int:
        """Words of a section of one word an entry (an FC block's gradients and buffer words), in whole beats; a
        conv block's, one word a tap, are its :class:`EntryRange`'s ``value_words``."""
        return padded(self.nnz, self.parts)


@keyword_record
class EntryRange:
    """Entries ``first .. first + nnz - 1`` (stored order) of stored block ``slots``, ``kk`` taps each: where a WG,
    UPD and SHR over that part of the block read and write (byte offsets). An entry's gradient and update are its
    own, so a block cut into ranges gives its whole's results. ``first`` is a multiple of four entries a part of
    the stream's beat, so the part's index bytes, weight codes, gradients and buffer words all start on a beat."""

    slots: BlockSlots
    first: int
    nnz: int
    kk: int

    def __post_init__(self) -> None:
        step = 4 * self.slots.parts
        if self.first % step or not 0 < self.nnz <= self.slots.nnz - self.first or self.kk < 1:
            raise ValueError(f"entries {self.first}..{self.first + self.nnz - 1} of a block of {self.slots.nnz}, "
                             f"{self.kk} taps each: the first a multiple of {step}, at least one, all in the block")

    @classmethod
    def whole(cls, slots: BlockSlots, kk: int) -> "EntryRange":
        return cls(slots=slots, first=0, nnz=slots.nnz, kk=kk)

    def split(self, pieces: int) -> List["EntryRange"]:
        """The range cut into at most ``pieces`` ranges of whole beats of index bytes, as even as that allows."""
        step = 4 * self.slots.parts
        size = step * -(-self.nnz // (pieces * step))
        return [EntryRange(slots=self.slots, first=self.first + at, nnz=min(size, self.nnz - at), kk=self.kk)
                for at in range(0, self.nnz, size)]

    @property
    def index_words(self) -> int:
        """The part's index words, in whole beats (the rest of the last beat is the next part's, or padding)."""
        return words_of_bytes(self.nnz, self.slots.parts)

    @property
    def value_words(self) -> int:
        """Words of the part's gradients or buffer words (one a tap), in whole beats."""
        return padded(self.nnz * self.kk, self.slots.parts)

    def index(self, base: int) -> int:
        """The part's index bytes in the copy of the block's index at ``base`` (``slots.iw`` or ``slots.ig``)."""
        return base + self.first

    @property
    def weights(self) -> int:
        """The part's 8-bit weight codes, after the block's index in ``iw``."""
        return self.slots.iw + 4 * self.slots.index_words + self.first * self.kk

    @property
    def gradients(self) -> int:
        """The part's gradient words, after the block's index in ``ig``."""
        return self.slots.ig + 4 * (self.slots.index_words + self.first * self.kk)

    def buffer(self, phase: int) -> int:
        """The part's 24-bit buffer words of ``phase``."""
        return self.slots.b[phase] + 4 * self.first * self.kk


def _tiles(layout: ArenaLayout, count: int, chunks: int, words: int) -> Tuple[Tuple[int, ...], ...]:
    """``count x chunks`` zero tiles of ``words`` words; their byte offsets."""
    return tuple(tuple(layout.put(np.zeros(words, dtype=np.uint32)) for _ in range(chunks))
                 for _ in range(count))


@keyword_record
class CsbArena:
    """The arena of a CSB MLP step (see the module docstring): ``layers`` widths, ``batch`` rows a step, lane
    ``chunks`` of ``spec.batch``, ``tile`` = ``B`` channels a tile; per layer the tile offsets ``x``, ``dy``,
    ``z`` and the ``blocks`` of its stored structure; the network input's tiles by buffer phase, ``inputs``;
    ``records`` (a record slot per call of the longest list, ``record_slots``) and the arena's first ``image``
    (the encoded state in phase 0). On a build with the LOSS unit whose classes fit one tile, ``loss_in`` holds per
    lane chunk the LOSS call's ``P`` beat and the chunk's labels (:meth:`write_loss_inputs`); else it is empty."""

    spec: CsbSpec
    layers: Tuple[int, ...]
    batch: int
    chunks: int
    x: Tuple[Tuple[Tuple[int, ...], ...], ...]
    inputs: Tuple[Tuple[Tuple[int, ...], ...], Tuple[Tuple[int, ...], ...]]
    dy: Tuple[Tuple[Tuple[int, ...], ...], ...]
    z: Tuple[Tuple[Tuple[int, ...], ...], ...]
    blocks: Tuple[Tuple[BlockSlots, ...], ...]
    records: int
    record_slots: int
    image: np.ndarray
    loss_in: Tuple[int, ...] = ()

    @property
    def tile(self) -> int:
        return self.spec.block_rows

    @property
    def code_words(self) -> int:
        """Words of one tile of 8-bit codes (``B * b`` bytes)."""
        return words_of_bytes(self.tile * self.spec.batch)

    @property
    def acc_words(self) -> int:
        """Words of one tile of accumulators (``B * b``)."""
        return self.tile * self.spec.batch

    @property
    def arena(self) -> np.ndarray:
        """The image a shell's ``arena`` call copies (the list trainers' name for it)."""
        return self.image

    def chunks_of(self, n: int) -> int:
        """Lane chunks ``n`` samples take."""
        if not 1 <= n <= self.batch:
            raise ValueError(f"{n} samples: a step takes 1..{self.batch}")
        return -(-n // self.spec.batch)

    # -- tiles <-> (samples, channels) matrices

    def write_codes(self, arena: np.ndarray, tiles, codes: np.ndarray) -> Ranges:
        """8-bit ``codes`` ``(n, channels)`` into ``tiles`` (``x[0]`` or ``dy[-1]``), zero lanes and channels padded
        in every chunk the ``n`` samples take; the word ranges written. Two scatters into the arena's bytes (the
        codes' and the padding's), through offsets kept per tiles and shape (a step's host time on a board's ARM
        is the step's time; rebuilding them took half of it); an arena not of little-endian 32-bit words (the
        PE's) is refused."""
        codes = np.asarray(codes)
        if codes.ndim != 2 or codes.shape[1] > len(tiles) * self.tile or codes.dtype.kind not in "iu":
            raise ValueError(f"codes of shape {codes.shape} and type {codes.dtype}: need integers (samples, at most "
                             f"{len(tiles) * self.tile} channels)")
        _check_words(arena)
        self.chunks_of(codes.shape[0])
        at, pads, ranges = _code_bytes(_tiles_key(tiles), self.spec.batch, self.tile, self.code_words,
                                       codes.shape[0], codes.shape[1])
        arena_bytes = arena.reshape(-1).view(np.uint8)
        flat = codes.reshape(-1)
        arena_bytes[at] = flat.view(np.uint8) if flat.dtype == np.int8 else flat.astype(np.uint8)  # low byte
        arena_bytes[pads] = 0
        return list(ranges)

    def acc_tiles(self, tiles, n: int, channels: int) -> AccTiles:
        """The first ``channels`` channels of accumulator ``tiles`` for ``n`` samples: their word ranges and their
        reading (:class:`AccTiles`; its parts kept per tiles and shape, the host keeps the whole)."""
        key, chunks = _tiles_key(tiles), self.chunks_of(n)
        return AccTiles(ranges=_acc_ranges(key, self.spec.batch, self.tile, chunks, channels),
                        index=_acc_gather(key, self.spec.batch, self.tile, chunks, n, channels))

    @property
    def loss_in_words(self) -> int:
        """Words of one chunk's LOSS inputs: the ``P`` beat, then a label a lane."""
        return self.spec.parts + self.spec.batch

    def write_loss_inputs(self, arena: np.ndarray, y, param: int) -> Ranges:
        """The LOSS calls' inputs of a step on the samples labelled ``y``: per lane chunk ``param`` (``P``) and a
        label a lane (0xFFFFFFFF past the samples); the word ranges written."""
        if not self.loss_in:
            raise ValueError("this arena has no LOSS inputs (a build without the LOSS unit, or classes past a tile)")
        y = np.asarray(y, dtype=np.int64)
        chunks, b, parts = self.chunks_of(y.size), self.spec.batch, self.spec.parts
        labels = np.full(chunks * b, NO_SAMPLE_WORD, dtype=np.uint32)
        labels[:y.size] = y
        words = np.zeros((chunks, self.loss_in_words), dtype=np.uint32)
        words[:, 0], words[:, parts:] = param, labels.reshape(chunks, b)
        flat = arena.reshape(-1)
        ranges = []
        for k in range(chunks):
            start = self.loss_in[k] // 4
            flat[start:start + self.loss_in_words] = words[k]
            ranges.append((start, self.loss_in_words))
        return ranges

    # -- the encoded state

    def write_state(self, arena: np.ndarray, layer: int, csb: CSBMatrix, buffer: np.ndarray, phase: int) -> Ranges:
        """Layer ``layer``'s index bytes, 8-bit weights (the buffer's top bits: truncation) and 24-bit ``buffer``
        words (stored order) into the ``phase`` slots; the word ranges written. The structure must be the one the
        arena was built for."""
        buffer = np.asarray(buffer, dtype=np.int64).reshape(-1)
        slots = self.blocks[layer]
        if buffer.size != csb.nnz or sum(s.nnz for s in slots) != csb.nnz:
            raise ValueError(f"layer {layer}: {buffer.size} buffer words for {csb.nnz} entries; the arena holds "
                             f"{sum(s.nnz for s in slots)}")
        ranges = []
        for s in slots:
            entries = slice(s.start, s.start + s.nnz)
            index = _beats(pack_bytes(np.asarray(csb.index[entries], dtype=np.int64)), s.index_words)
            weights = _beats(pack_bytes((buffer[entries] >> BUFFER_EXTRA_BITS) & 0xFF), s.index_words)
            for offset, words in ((s.iw, np.concatenate([index, weights])), (s.ig, index),
                                  (s.b[phase], (buffer[entries] & 0xFFFF_FFFF).astype(np.uint32))):
                arena[offset // 4:offset // 4 + words.size] = words
                ranges.append((offset // 4, int(words.size)))
        return ranges

    def buffer_ranges(self, layer: int, phase: int) -> Ranges:
        return [(s.b[phase] // 4, s.nnz) for s in self.blocks[layer]]

    def read_buffer(self, arena: np.ndarray, layer: int, phase: int) -> np.ndarray:
        """Layer ``layer``'s 24-bit buffer words of ``phase`` in stored order (int64)."""
        parts = [arena[s.b[phase] // 4:s.b[phase] // 4 + s.nnz].view(np.int32) for s in self.blocks[layer]]
        return np.concatenate(parts + [np.zeros(0, np.int32)]).astype(np.int64)


def _beats(words: np.ndarray, size: int) -> np.ndarray:
    """``words`` padded with zeros to ``size`` words (a section's whole beats)."""
    return np.pad(words, (0, size - words.size))


def _block_slots(layout: ArenaLayout, csb: CSBMatrix, buffers: Sequence[Tuple[int, int]],
                 parts: int) -> Tuple[BlockSlots, ...]:
    """The slots of ``csb``'s non-empty blocks, their buffer words at ``buffers`` (already placed), every section in
    whole beats of ``parts`` words."""
    slots = []
    for block in csb.blocks():
        nnz = block.entries.stop - block.entries.start
        if not nnz:
            continue
        index, values = words_of_bytes(nnz, parts), padded(nnz, parts)
        iw = layout.put(np.zeros(2 * index, dtype=np.uint32))
        ig = layout.put(np.zeros(index + values, dtype=np.uint32))
        slots.append(BlockSlots(row=block.row, col=block.col, start=block.entries.start, nnz=nnz, iw=iw, ig=ig,
                                b=buffers[len(slots)], parts=parts))
    return tuple(slots)


def _stored_sizes(csb: CSBMatrix) -> List[int]:
    return [b.entries.stop - b.entries.start for b in csb.blocks() if b.entries.stop > b.entries.start]


def build_arena(spec: CsbSpec, layers: Sequence[int], batch: int, structures: Sequence[CSBMatrix], *,
                record_slots: int) -> CsbArena:
    """The arena of ``layers`` trained ``batch`` rows a step on ``spec`` with the stored ``structures`` (one
    CSB matrix a layer, ``(outputs, inputs)``); ``record_slots`` records. Refuses a spec the lists cannot run."""
    layers = tuple(int(f) for f in layers)
    if spec.block_rows != spec.block_cols or (spec.kernel, spec.out_h, spec.out_w) != (1, 1, 1):
        raise ValueError(f"the CSB step lists need square FC blocks (block_rows = block_cols, kernel 1, a 1 x 1 "
                         f"tile), not {spec}: a layer's output tile is then the next layer's input tile")
    if spec.batch > spec.block_cols:
        raise ValueError(f"batch lanes {spec.batch} above block_cols {spec.block_cols}: one SELECT could not take a "
                         "whole tile of accumulators (its capacity is the block's entries)")
    if len(structures) != len(layers) - 1 or batch < 1:
        raise ValueError(f"{len(structures)} structures for {len(layers) - 1} layers, batch {batch}")
    B, b, parts = spec.block_rows, spec.batch, spec.parts
    if B * b % (4 * parts):
        raise ValueError(f"a tile of {B} x {b} codes does not fill whole {spec.stream_bits}-bit beats")
    chunks, code, acc = -(-batch // b), words_of_bytes(B * b), B * b
    layout = ArenaLayout()
    tiles = [-(-width // B) for width in layers]
    # every x tile before every dy tile: WG reads x[l][c][k] and dy[l][r][k] as one block of two rows
    x = tuple(_tiles(layout, tiles[l], chunks, code) for l in range(len(layers) - 1))
    inputs = (x[0], _tiles(layout, tiles[0], chunks, code))
    z = tuple(_tiles(layout, tiles[l + 1], chunks, acc) for l in range(len(layers) - 1))
    dy = tuple(_tiles(layout, tiles[l + 1], chunks, code) for l in range(len(layers) - 1))
    # the buffers first: UPD reads a phase's buffer words and the gradients after them as one block of two rows
    buffers = [[tuple(layout.put(np.zeros(padded(nnz, parts), dtype=np.uint32)) for _ in range(2))
                for nnz in _stored_sizes(csb)] for csb in structures]
    blocks = tuple(_block_slots(layout, csb, slots, parts) for csb, slots in zip(structures, buffers))
    loss_in = tuple(layout.put(np.zeros(parts + b, dtype=np.uint32)) for _ in range(chunks)) \
        if loss_on_pe(spec, layers[-1]) and batch <= MAX_LOSS_BATCH else ()
    records = layout.reserve(RECORD_WORDS * max(record_slots, 1))
    return CsbArena(spec=spec, layers=layers, batch=batch, chunks=chunks, x=x, inputs=inputs, dy=dy, z=z,
                    blocks=blocks, records=records, record_slots=record_slots, image=layout.image(), loss_in=loss_in)


def loss_on_pe(spec: CsbSpec, classes: int) -> bool:
    """Whether a step's loss gradient runs on the PE: a build with the LOSS unit, and the classes one tile that
    one LOSS call takes."""
    return spec.loss and classes <= min(spec.block_rows, max_classes(spec))


__all__ = ["AccTiles", "BUFFER_EXTRA_BITS", "BlockSlots", "CsbArena", "build_arena", "loss_on_pe", "words_of_bytes"]
