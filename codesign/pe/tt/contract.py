"""The numeric and word-stream contract shared by the three TT processing elements (docs/tt_pe.md).

Everything the three PEs have in common lives here once: operand code ranges
(the same signed fixed-point codes as TT training's, :func:`fixed_format`),
saturating accumulation in a declared order, the chunk packing of operand
rows into stream words of 32, 64 or 128 bits, the header word with its status
rule, and the validated spec base class.

A stream word of ``stream_bits`` bits is handled everywhere outside the
hardware (vector files, the board's DMA buffers) as ``stream_bits / 32``
consecutive 32-bit parts, least significant first: the little-endian layout
the word has in memory, so the arrays here hold 32-bit values at every width. The PE-specific parts (which contraction, which
sections) are in :mod:`codesign.pe.tt.golden`.
"""

from __future__ import annotations

import functools
from dataclasses import asdict

import numpy as np

from codesign.contracts.constants import STATUS_BAD_HEADER, STATUS_OK, WORD_BITS, status_code  # noqa: F401 (re-exported)
from codesign.numerics import FixedFormat
from codesign.numerics.formats import _check_int
from codesign.numerics.records import keyword_record

# WORD_BITS (codesign.contracts.constants): one part of a stream word, the unit of vector files and DMA buffers (and a
# whole word at 32 bits)
STREAM_BITS_CHOICES = (32, 64, 128)  # stream word widths (bits); 128 is an Ultra96-V2 HP port's data width
LANE_CHOICES = (1, 2, 4, 8, 16)  # MACs along the last dimension; powers of two so that chunks pack whole words
MAX_ROWS = 8  # MACs along the first dimension of the cached operand
OPERAND_BITS = (2, 16)  # operand code widths (bits): 4-bit cores, 8-bit activations, 16-bit gradients
ACC_BITS = (16, 32)  # accumulator and result width (bits); results are sign-extended into one 32-bit word
DIM_BITS = 8  # one header field per dimension
MAX_DIM = (1 << DIM_BITS) - 1
MAX_BUFFER_CHUNKS = 1 << 16  # cached-operand chunks per build (keeps a build within a few block RAMs per row)

# BAD_HEADER: a dimension is 0, or a field the PE does not use is not 0; TOO_LARGE: a dimension exceeds the
# buffer the PE was built with (codesign.contracts.constants, the one source of the status codes)
STATUS_TOO_LARGE = status_code("tt", "TOO_LARGE")


def fixed_format(bits: int, frac_bits: int, rounding: str = "nearest_even") -> FixedFormat:
    """Signed, saturating ``bits``-wide codes with step ``2**-frac_bits``: the TT PEs' and TT training's codes."""
    return FixedFormat(bits=bits, frac_bits=int(frac_bits), rounding=rounding, saturate=True)


@functools.lru_cache(maxsize=None)
def code_range(bits: int) -> tuple[int, int]:
    """Smallest and largest signed ``bits``-wide code: the range of :func:`fixed_format`."""
    fmt = fixed_format(bits, 0)
    return int(fmt.min_code), int(fmt.max_code)


def slot_bits(bits: int) -> int:
    """Stream field width (bits) of one ``bits``-wide operand: the smallest of 4, 8, 16 that holds it."""
    return next(slot for slot in (4, 8, 16) if bits <= slot)


def check_stream_bits(stream_bits: int) -> int:
    """``stream_bits`` if it is one of :data:`STREAM_BITS_CHOICES`, else a ValueError naming them."""
    if isinstance(stream_bits, bool) or not isinstance(stream_bits, int) or stream_bits not in STREAM_BITS_CHOICES:
        raise ValueError(f"stream_bits={stream_bits!r} must be one of {STREAM_BITS_CHOICES}")
    return stream_bits


def word_parts(stream_bits: int = WORD_BITS) -> int:
    """32-bit parts of one ``stream_bits``-wide stream word (1, 2 or 4)."""
    return check_stream_bits(stream_bits) // WORD_BITS


def chunk_words(lanes: int, bits: int, stream_bits: int = WORD_BITS) -> int:
    """``stream_bits``-wide words one chunk of ``lanes`` operands occupies (a chunk always starts a new word)."""
    return -(-lanes * slot_bits(bits) // check_stream_bits(stream_bits))


def row_words(length: int, lanes: int, bits: int, stream_bits: int = WORD_BITS) -> int:
    """Stream words of one operand row of ``length`` values of ``bits`` bits in chunks of ``lanes``."""
    return chunks(length, lanes) * chunk_words(lanes, bits, stream_bits)


def result_stream_words(count: int, stream_bits: int = WORD_BITS) -> int:
    """Stream words of ``count`` 32-bit results packed ``stream_bits / 32`` to a word (the last one zero-padded)."""
    return -(-count // word_parts(stream_bits))


def output_parts(results: int, stream_bits: int = WORD_BITS) -> int:
    """32-bit parts of an accepted transaction's output: the status word, then ``results`` results packed
    ``stream_bits / 32`` to a word (what a host reads back from the output buffer per transaction)."""
    return word_parts(stream_bits) * (1 + result_stream_words(results, stream_bits))


def words_at(values: int, value_bits: int, stream_bits: int = WORD_BITS) -> int:
    """Stream words ``values`` fields of ``value_bits`` bits fill when packed densely: a lower bound for any layout,
    and exactly :func:`result_stream_words` for 32-bit results (``value_bits = 32``)."""
    return -(-values * value_bits // check_stream_bits(stream_bits))


def chunks(length: int, lanes: int) -> int:
    """Chunks of ``lanes`` values a row of ``length`` values is padded to."""
    return -(-length // lanes)


def saturate(values, bits: int):
    """Clamp integers to the signed ``bits``-wide range."""
    low, high = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    return np.clip(values, low, high)


def saturating_scan(terms: np.ndarray, acc_bits: int) -> np.ndarray:
    """``acc = sat(acc + term)`` over the last axis, from 0, for every leading index at once.

    Saturation makes the order of additions part of the result; the last axis
    is that order. When no partial sum can leave the range the plain sum is
    the same number and is taken directly.
    """
    terms = np.asarray(terms, dtype=np.int64)
    limit = 1 << (acc_bits - 1)
    if terms.shape[-1] == 0:
        return np.zeros(terms.shape[:-1], dtype=np.int64)
    if int(np.abs(terms).sum(axis=-1).max()) < limit:
        return terms.sum(axis=-1)
    acc = np.zeros(terms.shape[:-1], dtype=np.int64)
    for step in range(terms.shape[-1]):
        acc = np.clip(acc + terms[..., step], -limit, limit - 1)
    return acc


def pad_last(values: np.ndarray, lanes: int) -> np.ndarray:
    """Zero-pad the last axis to a whole number of ``lanes``-wide chunks."""
    values = np.asarray(values, dtype=np.int64)
    extra = chunks(values.shape[-1], lanes) * lanes - values.shape[-1]
    return np.pad(values, [(0, 0)] * (values.ndim - 1) + [(0, extra)])


def pack_rows(values: np.ndarray, lanes: int, bits: int, rng: np.random.Generator | None = None,
              stream_bits: int = WORD_BITS) -> np.ndarray:
    """Stream words of ``values`` (..., K) as 32-bit parts: rows padded to chunks, chunks packed in slot fields.

    Lane ``v`` of a chunk is bits ``[v*slot, v*slot + bits)`` of the chunk's
    ``stream_bits``-wide words read as one little-endian bit string. With
    ``rng`` the bits the PE must ignore (slot bits above ``bits``, the padding
    lanes, unused high bits of a chunk's last word) are random instead of 0.
    """
    if rng is None:
        return _pack_plain(values, lanes, bits, stream_bits)
    values = np.asarray(values, dtype=np.int64)
    length = values.shape[-1]
    slot = slot_bits(bits)
    padded = pad_last(values, lanes).reshape(-1, lanes)  # one chunk per row
    count = padded.shape[0]
    codes = padded & ((1 << bits) - 1)
    if rng is not None:
        codes = codes | (rng.integers(0, 1 << slot, size=codes.shape) & ~((1 << bits) - 1) & ((1 << slot) - 1))
        lane_pos = (np.arange(count) % chunks(length, lanes))[:, None] * lanes + np.arange(lanes)[None, :]
        codes = np.where(lane_pos >= length, rng.integers(0, 1 << slot, size=codes.shape), codes)
    words_per_chunk = chunk_words(lanes, bits, stream_bits) * word_parts(stream_bits)  # 32-bit parts
    words = np.zeros((count, words_per_chunk), dtype=np.uint64)
    for lane in range(lanes):
        bit = lane * slot
        words[:, bit // WORD_BITS] |= (codes[:, lane].astype(np.uint64) << np.uint64(bit % WORD_BITS))
    if rng is not None:
        used = lanes * slot
        for word in range(words_per_chunk):
            low = used - word * WORD_BITS
            if low < WORD_BITS:
                noise = rng.integers(0, 1 << WORD_BITS, size=count, dtype=np.uint64)
                mask = np.uint64(((1 << WORD_BITS) - 1) ^ ((1 << max(low, 0)) - 1))
                words[:, word] |= noise & mask
    return words.reshape(-1)


def _pack_plain(values, lanes: int, bits: int, stream_bits: int) -> np.ndarray:
    """:func:`pack_rows` without noise, as a host packs operands for a board (uint32, a buffer's words): each
    chunk's fields are laid out as the little-endian bytes of its words (a 4-bit slot two to a byte, low lane
    first), so NumPy moves bytes instead of shifting one lane at a time; the same words, as the tests compare."""
    values = np.asarray(values)
    length = values.shape[-1]
    slot = slot_bits(bits)
    rows = values.reshape(int(np.prod(values.shape[:-1], dtype=np.int64)), length)
    count = rows.shape[0] * chunks(length, lanes)
    chunk_bytes = chunk_words(lanes, bits, stream_bits) * stream_bits // 8
    width = chunks(length, lanes) * lanes
    fields = (np.empty if width == length else np.zeros)((rows.shape[0], width), dtype="<u2" if slot == 16 else "u1")
    np.copyto(fields[:, :length], rows, casting="unsafe")  # two's complement, modulo the field type
    if bits < fields.dtype.itemsize * 8:
        np.bitwise_and(fields, fields.dtype.type((1 << bits) - 1), out=fields)  # the code's low ``bits`` bits
    fields = fields.reshape(count, lanes)
    if slot == 4:
        fields = fields if lanes == 1 else fields[:, 0::2] | (fields[:, 1::2] << 4)
    chunk = fields.view(np.uint8)
    if chunk.shape[1] != chunk_bytes:  # the chunk's words are not full: zero the rest
        full = np.zeros((count, chunk_bytes), dtype=np.uint8)
        full[:, :chunk.shape[1]] = chunk
        chunk = full
    return chunk.view("<u4").reshape(-1)  # uint32: a host's buffer words, not widened


def unpack_rows(parts, rows: int, length: int, lanes: int, bits: int, stream_bits: int = WORD_BITS) -> np.ndarray:
    """``rows`` operand rows of ``length`` signed ``bits``-bit codes (int64, ``(rows, length)``) from the first
    32-bit ``parts`` of a stream, as a PE reads them: what :func:`pack_rows` wrote, the bits it may fill with noise
    (slot bits above ``bits``, padding lanes, a chunk's unused high bits) ignored. A ValueError if ``parts`` is
    shorter."""
    slot, per_row = slot_bits(bits), chunks(length, lanes)
    chunk_bytes = chunk_words(lanes, bits, stream_bits) * stream_bits // 8
    need = rows * per_row * chunk_bytes // 4
    parts = np.asarray(parts)
    if parts.size < need:
        raise ValueError(f"{rows} rows of {length} {bits}-bit codes take {need} parts; {parts.size} left")
    data = np.ascontiguousarray(parts[:need], dtype="<u4").view(np.uint8).reshape(rows * per_row, chunk_bytes)
    if slot == 16:
        fields = data[:, :2 * lanes].copy().view("<u2")
    elif slot == 8:
        fields = data[:, :lanes]
    else:
        fields = np.stack([data & 15, data >> 4], axis=-1).reshape(len(data), -1)[:, :lanes]
    codes = fields.astype(np.int64) & ((1 << bits) - 1)
    codes -= (codes >> (bits - 1)) << bits  # two's complement from ``bits`` bits
    return codes.reshape(rows, per_row * lanes)[:, :length]


def result_words(values, stream_bits: int = WORD_BITS) -> np.ndarray:
    """Results as 32-bit parts (two's complement, sign-extended from the accumulator width), ``stream_bits / 32``
    to a stream word in row-major order, the last word's unused parts 0."""
    parts = np.asarray(values, dtype=np.int64).reshape(-1) & 0xFFFF_FFFF
    padded = result_stream_words(parts.size, stream_bits) * word_parts(stream_bits)
    return np.pad(parts, (0, padded - parts.size)).astype(np.uint64)


def stream_header(words_in, stream_bits: int = WORD_BITS) -> int:
    """The header of a transaction's input (32-bit parts) as one integer: its first ``stream_bits``-wide word."""
    parts = [int(part) for part in np.asarray(words_in, dtype=np.uint64)[:word_parts(stream_bits)]]
    return sum(part << (WORD_BITS * index) for index, part in enumerate(parts))


def single_word(value: int, stream_bits: int = WORD_BITS) -> np.ndarray:
    """One stream word holding ``value`` (a header or a status, below 2**32) as its 32-bit parts."""
    return np.array([value] + [0] * (word_parts(stream_bits) - 1), dtype=np.uint64)


def header_word(*dims: int) -> int:
    """The header: dimension ``n`` in bits ``[8n+7 : 8n]`` (up to four dimensions, each 0..255 representable)."""
    word = 0
    for index, dim in enumerate(dims):
        if not 0 <= dim <= MAX_DIM:
            raise ValueError(f"dimension {index} = {dim} does not fit an {DIM_BITS}-bit header field")
        word |= dim << (DIM_BITS * index)
    return word


def header_dims(word: int, count: int) -> tuple[tuple[int, ...], bool]:
    """The first ``count`` dimensions of a header and whether every other field (and every bit above them, in a
    stream word wider than 32 bits) is 0."""
    dims = tuple((word >> (DIM_BITS * index)) & MAX_DIM for index in range(count))
    return dims, (word >> (DIM_BITS * count)) == 0


@keyword_record
class TtOperandSpec:
    """What every TT PE has: MAC lanes along the last dimension and the two operand widths (bits).

    ``a_bits`` is the streamed operand (8-bit activations forward, 16-bit
    gradients backward), ``b_bits`` the cached one (4-bit cores for PE1 and
    PE2, 16-bit output gradients for PE3). ``stream_bits`` is the width of
    the input and output stream words (32, 64 or 128 bits): wider words carry
    more chunk fields and results per cycle; 32 is the original stream.
    """

    lanes: int = 16
    a_bits: int = 8
    b_bits: int = 4
    stream_bits: int = WORD_BITS

    def __post_init__(self) -> None:
        _check_int("lanes", self.lanes, LANE_CHOICES[0], LANE_CHOICES[-1])
        if self.lanes not in LANE_CHOICES:
            raise ValueError(f"lanes={self.lanes} must be one of {LANE_CHOICES}")
        _check_int("a_bits", self.a_bits, *OPERAND_BITS)
        _check_int("b_bits", self.b_bits, *OPERAND_BITS)
        check_stream_bits(self.stream_bits)

    @property
    def parts(self) -> int:
        """32-bit parts of one stream word."""
        return word_parts(self.stream_bits)

    @property
    def macs(self) -> int:
        """Multipliers working in one cycle."""
        return self.lanes

    def to_dict(self) -> dict:
        """Every field, as transaction-file metadata and template constants."""
        return asdict(self)


@keyword_record
class TtSpecBase(TtOperandSpec):
    """PE1 and PE2: ``lanes`` x ``rows`` MACs (16 x 8 = 128 in paper 003, Sec. 4), sums saturated to ``acc_bits``."""

    rows: int = 8
    acc_bits: int = 32

    def __post_init__(self) -> None:
        super().__post_init__()
        _check_int("rows", self.rows, 1, MAX_ROWS)
        _check_int("acc_bits", self.acc_bits, *ACC_BITS)

    @property
    def macs(self) -> int:
        return self.lanes * self.rows
