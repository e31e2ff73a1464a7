"""Compressed sparse blocks (CSB): the storage of a kernel-wise pruned weight (docs/csb.md, "Storage").

A weight is a ``rows x cols`` matrix of *entries*: one int8 weight for an FC
layer (dense shape ``(rows, cols)``), one ``k x k`` int8 kernel for a CONV
layer (dense shape ``(rows, cols, k, k)``, ``weight[out, in]`` as torch holds
it). Values are the 8-bit codes the PE multiplies; the power-of-two scale is
the host's business. The matrix is cut into ``block_rows x block_cols`` blocks
(the last block row and column may be partial); blocks are stored in
row-major block order, the non-zero entries of a block in row-major order, each
with one index byte ``{y[3:0], x[3:0]}`` (``y`` row, ``x`` column inside the
block).

:meth:`CSBMatrix.transpose_view` is the transposed matrix EB needs, read from
the same arrays: blocks in column-major block order, ``x`` and ``y`` exchanged,
kernels unchanged (the EB operation itself does the spatial flip). Its
``to_dense()`` is therefore ``dense.swapaxes(0, 1)``: shape ``(cols, rows)``
or ``(cols, rows, k, k)`` with every kernel as stored.

DRAM image (:meth:`CSBMatrix.to_stream`, 32-bit words, bytes little-endian,
four to a word, every byte section starting on a new word as in the PE's
stream): word 0 ``rows[15:0] | cols[31:16]``; word 1 ``kernel[7:0] |
block_rows[15:8] | block_cols[23:16] | conv[24] | transposed[25]`` (other bits
0); one word per stored block with its entry count; then per stored block its
index bytes and its ``nnz * k * k`` value bytes (entry-major, taps row-major).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from codesign.numerics.formats import _check_int
from codesign.numerics.records import keyword_record
from codesign.pe.csb.spec import INDEX_NIBBLE, MAX_KERNEL

INT8_MIN, INT8_MAX = -128, 127
MAX_DIM = 0xFFFF  # rows and cols travel in 16-bit fields of the DRAM image
_GEOMETRY_FIELDS = 0x3FF_FFFF  # kernel, block dims, conv and transposed flags of word 1


@dataclass(frozen=True)
class Block:
    """One block as a view reads it: its block coordinates, where its entries are stored, and what they hold.

    ``ys``/``xs`` are in the view's orientation (exchanged for a transposed
    view); ``index`` are the stored bytes and ``values`` the stored kernels,
    both in stored order.
    """

    row: int
    col: int
    entries: slice
    ys: np.ndarray
    xs: np.ndarray
    index: np.ndarray
    values: np.ndarray

    @property
    def nnz(self) -> int:
        return int(self.ys.size)


def _readonly(array: np.ndarray) -> np.ndarray:
    view = array.view()
    view.flags.writeable = False
    return view


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


@keyword_record(eq=False)
class CSBMatrix:
    """A weight in CSB storage; ``transposed`` says how the same arrays are read (see the module docstring).

    ``shape``, ``block_rows``, ``block_cols`` always describe the *stored*
    matrix; :attr:`view_shape` and :attr:`view_block` the matrix as this view
    reads it. ``block_ptr[i]:block_ptr[i + 1]`` are the entries of stored block
    ``i`` (row-major block order); ``index`` holds one uint8 ``{y, x}`` per
    entry, ``values`` the int8 ``(nnz, k, k)`` kernels. The arrays are
    read-only views; a transposed view shares them.
    """

    shape: tuple[int, int]
    kernel: int
    block_rows: int
    block_cols: int
    block_ptr: np.ndarray
    index: np.ndarray
    values: np.ndarray
    conv: bool = False
    transposed: bool = False

    def __post_init__(self) -> None:
        if not (isinstance(self.shape, tuple) and len(self.shape) == 2):
            raise ValueError(f"shape must be a (rows, cols) tuple, got {self.shape!r}")
        _check_int("rows", self.shape[0], 1, MAX_DIM)
        _check_int("cols", self.shape[1], 1, MAX_DIM)
        _check_int("kernel", self.kernel, 1, MAX_KERNEL)
        _check_int("block_rows", self.block_rows, 1, INDEX_NIBBLE)
        _check_int("block_cols", self.block_cols, 1, INDEX_NIBBLE)
        for flag in ("conv", "transposed"):
            if not isinstance(getattr(self, flag), bool):
                raise TypeError(f"{flag} must be a bool")
        if not self.conv and self.kernel != 1:
            raise ValueError(f"an FC matrix has single-weight entries (kernel 1), got kernel={self.kernel}")
        ptr, index, values = (np.asarray(a) for a in (self.block_ptr, self.index, self.values))
        if ptr.dtype.kind not in "iu" or ptr.shape != (self.n_blocks + 1,):
            raise ValueError(f"block_ptr must be {self.n_blocks + 1} integers (one per block plus the end), "
                             f"got {ptr.dtype} {ptr.shape}")
        ptr = ptr.astype(np.int64, copy=False)
        if ptr[0] != 0 or np.any(np.diff(ptr) < 0):
            raise ValueError("block_ptr must start at 0 and never decrease")
        nnz = int(ptr[-1])
        if index.dtype != np.uint8 or index.shape != (nnz,):
            raise ValueError(f"index must be {nnz} uint8 bytes (block_ptr ends at {nnz}), got {index.dtype} {index.shape}")
        k = self.kernel
        if values.dtype != np.int8 or values.shape != (nnz, k, k):
            raise ValueError(f"values must be int8 of shape {(nnz, k, k)}, got {values.dtype} {values.shape}")
        block_of = np.repeat(np.arange(self.n_blocks), np.diff(ptr))
        brow, bcol = np.divmod(block_of, self.block_grid[1])
        height = np.minimum(self.block_rows, self.shape[0] - brow * self.block_rows)
        width = np.minimum(self.block_cols, self.shape[1] - bcol * self.block_cols)
        ys, xs = index >> 4, index & 15
        outside = (ys >= height) | (xs >= width)
        if np.any(outside):
            at = int(np.flatnonzero(outside)[0])
            raise ValueError(f"entry {at} (block {int(block_of[at])}) has index 0x{int(index[at]):02x}: "
                             f"outside its {int(height[at])} x {int(width[at])} block")
        key = block_of * 256 + index.astype(np.int64)  # (block, y, x) in stored order
        if np.any(np.diff(key) <= 0):
            at = int(np.flatnonzero(np.diff(key) <= 0)[0]) + 1
            raise ValueError(f"entry {at}: entries of a block must be distinct and stored in row-major order")
        object.__setattr__(self, "block_ptr", _readonly(ptr))
        object.__setattr__(self, "index", _readonly(index))
        object.__setattr__(self, "values", _readonly(values))

    # -- geometry ------------------------------------------------------------------
    @property
    def block_grid(self) -> tuple[int, int]:
        """Stored blocks per column and per row: ``(ceil(rows / block_rows), ceil(cols / block_cols))``."""
        return _ceil_div(self.shape[0], self.block_rows), _ceil_div(self.shape[1], self.block_cols)

    @property
    def n_blocks(self) -> int:
        grid = self.block_grid
        return grid[0] * grid[1]

    @property
    def nnz(self) -> int:
        """Stored entries (kernels for CONV)."""
        return int(self.index.size)

    @property
    def view_shape(self) -> tuple[int, int]:
        return self.shape[::-1] if self.transposed else self.shape

    @property
    def view_block(self) -> tuple[int, int]:
        """``(block_rows, block_cols)`` of this view."""
        return (self.block_cols, self.block_rows) if self.transposed else (self.block_rows, self.block_cols)

    # -- views -----------------------------------------------------------------------
    def transpose_view(self) -> CSBMatrix:
        """The transposed matrix on the same arrays (nothing copied); twice gives the original view."""
        return CSBMatrix(shape=self.shape, kernel=self.kernel, block_rows=self.block_rows, block_cols=self.block_cols,
                         block_ptr=self.block_ptr, index=self.index, values=self.values, conv=self.conv,
                         transposed=not self.transposed)

    def blocks(self) -> Iterator[Block]:
        """Every block in this view's order (row-major over the view's block grid), empty blocks included."""
        grid_rows, grid_cols = self.block_grid
        order = ((r, c) for c in range(grid_cols) for r in range(grid_rows)) if self.transposed else \
            ((r, c) for r in range(grid_rows) for c in range(grid_cols))
        for r, c in order:
            stored = r * grid_cols + c
            entries = slice(int(self.block_ptr[stored]), int(self.block_ptr[stored + 1]))
            index = self.index[entries]
            ys, xs = (index >> 4).astype(np.int64), (index & 15).astype(np.int64)
            if self.transposed:
                yield Block(row=c, col=r, entries=entries, ys=xs, xs=ys, index=index, values=self.values[entries])
            else:
                yield Block(row=r, col=c, entries=entries, ys=ys, xs=xs, index=index, values=self.values[entries])

    def entry_coordinates(self) -> tuple[np.ndarray, np.ndarray]:
        """Stored ``(row, col)`` of every entry in stored order (int64 arrays of length nnz)."""
        ptr = np.asarray(self.block_ptr)
        block_of = np.repeat(np.arange(self.n_blocks), np.diff(ptr))
        brow, bcol = np.divmod(block_of, self.block_grid[1])
        return (brow * self.block_rows + (self.index >> 4).astype(np.int64),
                bcol * self.block_cols + (self.index & 15).astype(np.int64))

    def to_dense(self) -> np.ndarray:
        """The int8 dense matrix of this view: the exact inverse of :func:`encode` (transposed for a transposed view)."""
        k = self.kernel
        dense = np.zeros((*self.shape, k, k), dtype=np.int8)
        rows, cols = self.entry_coordinates()
        dense[rows, cols] = self.values
        if self.transposed:
            dense = dense.swapaxes(0, 1).copy()
        return dense if self.conv else dense[:, :, 0, 0].copy()

    # -- DRAM image --------------------------------------------------------------------
    def to_stream(self) -> np.ndarray:
        """The whole matrix as 32-bit words (uint32), in the layout of the module docstring."""
        rows, cols = self.shape
        geometry = (self.kernel | self.block_rows << 8 | self.block_cols << 16 | int(self.conv) << 24
                    | int(self.transposed) << 25)
        counts = np.diff(np.asarray(self.block_ptr))
        parts = [np.array([rows | cols << 16, geometry], dtype=np.uint32), counts.astype(np.uint32)]
        flat = np.asarray(self.values).reshape(self.nnz, self.kernel * self.kernel)
        for stored in range(self.n_blocks):
            start, stop = int(self.block_ptr[stored]), int(self.block_ptr[stored + 1])
            parts.append(pack_bytes(self.index[start:stop]))
            parts.append(pack_bytes(flat[start:stop].reshape(-1).view(np.uint8)))
        return np.concatenate(parts)

    @classmethod
    def from_stream(cls, words) -> CSBMatrix:
        """Read a DRAM image back; a ValueError names what is wrong (truncated, extra words, bad fields, bad indices)."""
        words = np.asarray(words)
        if words.ndim != 1 or (words.dtype.kind not in "iu" and words.size):
            raise ValueError(f"a CSB image is a 1-D array of integer words, got {words.dtype} {words.shape}")
        if words.size and (words.min() < 0 or words.max() > 0xFFFF_FFFF):
            raise ValueError("a CSB image word is outside 0..2^32-1")
        words = words.astype(np.uint32)
        if words.size < 2:
            raise ValueError(f"CSB image truncated: {words.size} words, the two geometry words are missing")
        rows, cols = int(words[0]) & 0xFFFF, int(words[0]) >> 16
        geometry = int(words[1])
        if geometry & ~_GEOMETRY_FIELDS:
            raise ValueError(f"CSB image word 1 = 0x{geometry:08x} has reserved bits set")
        kernel, block_rows, block_cols = geometry & 0xFF, geometry >> 8 & 0xFF, geometry >> 16 & 0xFF
        conv, transposed = bool(geometry >> 24 & 1), bool(geometry >> 25 & 1)
        for name, value, high in (("rows", rows, MAX_DIM), ("cols", cols, MAX_DIM), ("kernel", kernel, MAX_KERNEL),
                                  ("block_rows", block_rows, INDEX_NIBBLE), ("block_cols", block_cols, INDEX_NIBBLE)):
            if not 1 <= value <= high:
                raise ValueError(f"CSB image: {name}={value} is out of range [1, {high}]")
        n_blocks = _ceil_div(rows, block_rows) * _ceil_div(cols, block_cols)
        if words.size < 2 + n_blocks:
            raise ValueError(f"CSB image truncated: {words.size} words, the {n_blocks} block counts need {2 + n_blocks}")
        counts = words[2:2 + n_blocks].astype(np.int64)
        if np.any(counts > block_rows * block_cols):
            raise ValueError(f"CSB image: a block count exceeds the block capacity {block_rows * block_cols}")
        kk = kernel * kernel
        at = 2 + n_blocks
        indices, values = [], []
        for count in counts.tolist():
            need = _ceil_div(count, 4) + _ceil_div(count * kk, 4)
            if at + need > words.size:
                raise ValueError(f"CSB image truncated: {words.size} words, the blocks need at least {at + need}")
            indices.append(unpack_bytes(words[at:at + _ceil_div(count, 4)], count))
            at += _ceil_div(count, 4)
            values.append(unpack_bytes(words[at:at + _ceil_div(count * kk, 4)], count * kk).view(np.int8))
            at += _ceil_div(count * kk, 4)
        if at != words.size:
            raise ValueError(f"CSB image has {words.size - at} words beyond its blocks")
        nnz = int(counts.sum())
        return cls(shape=(rows, cols), kernel=kernel, block_rows=block_rows, block_cols=block_cols,
                   block_ptr=np.concatenate([[0], np.cumsum(counts)]).astype(np.int64),
                   index=np.concatenate([np.zeros(0, np.uint8), *indices]),
                   values=np.concatenate([np.zeros(0, np.int8), *values]).reshape(nnz, kernel, kernel),
                   conv=conv, transposed=transposed)


def pack_bytes(values) -> np.ndarray:
    """Bytes (any integers, low 8 bits kept) four to a uint32 word, little-endian; the last word zero-padded."""
    raw = np.asarray(values).astype(np.int64).reshape(-1) & 0xFF
    padded = np.zeros(_ceil_div(raw.size, 4) * 4, dtype=np.uint32)
    padded[:raw.size] = raw
    lanes = padded.reshape(-1, 4)
    return lanes[:, 0] | lanes[:, 1] << 8 | lanes[:, 2] << 16 | lanes[:, 3] << 24


def unpack_bytes(words, count: int) -> np.ndarray:
    """The first ``count`` bytes (uint8) of little-endian 32-bit words; high bytes of the last word ignored."""
    words = np.asarray(words).astype(np.uint32).reshape(-1)
    if words.size * 4 < count:
        raise ValueError(f"{count} bytes need {_ceil_div(count, 4)} words, got {words.size}")
    shifts = np.array([0, 8, 16, 24], dtype=np.uint32)
    return ((words[:, None] >> shifts) & 0xFF).astype(np.uint8).reshape(-1)[:count]


def _check_block_dim(name: str, value: object) -> int:
    _check_int(name, value, 1, INDEX_NIBBLE)
    return value  # type: ignore[return-value]


def encode(dense, block: int = 16, *, block_rows: int | None = None, block_cols: int | None = None) -> CSBMatrix:
    """Store an int8-code weight in CSB: ``(rows, cols)`` FC weights or ``(rows, cols, k, k)`` CONV kernels.

    ``block`` sets both block dimensions unless ``block_rows``/``block_cols``
    are given (each 1..16: one index byte holds ``y`` and ``x`` in 4 bits). An
    entry is stored when any of its taps is non-zero. Values must be integer
    codes in -128..127 (the 8-bit compute part); anything else is refused.
    """
    rows_b = _check_block_dim("block_rows", block if block_rows is None else block_rows)
    cols_b = _check_block_dim("block_cols", block if block_cols is None else block_cols)
    array = np.asarray(dense)
    if array.dtype.kind not in "iu":
        raise ValueError(f"dense must hold integer codes, got dtype {array.dtype}")
    if array.ndim == 2:
        conv, kernel = False, 1
        kernels = array[:, :, None, None]
    elif array.ndim == 4:
        conv, kernel = True, array.shape[2]
        if array.shape[3] != kernel or not 1 <= kernel <= MAX_KERNEL:
            raise ValueError(f"CONV kernels must be square k x k with k in 1..{MAX_KERNEL}, got {array.shape[2:]}")
        kernels = array
    else:
        raise ValueError(f"dense must be (rows, cols) or (rows, cols, k, k), got shape {array.shape}")
    rows, cols = array.shape[:2]
    if not (1 <= rows <= MAX_DIM and 1 <= cols <= MAX_DIM):
        raise ValueError(f"rows and cols must be in 1..{MAX_DIM}, got {rows} x {cols}")
    if array.size and (int(array.min()) < INT8_MIN or int(array.max()) > INT8_MAX):
        raise ValueError(f"dense values must be int8 codes in [{INT8_MIN}, {INT8_MAX}], "
                         f"got [{int(array.min())}, {int(array.max())}]")
    kernels = kernels.astype(np.int64)
    r, c = np.nonzero(np.any(kernels != 0, axis=(2, 3)))
    grid_cols = _ceil_div(cols, cols_b)
    block_of = (r // rows_b) * grid_cols + c // cols_b
    ys, xs = r % rows_b, c % cols_b
    order = np.lexsort((xs, ys, block_of))
    r, c, block_of, ys, xs = r[order], c[order], block_of[order], ys[order], xs[order]
    n_blocks = _ceil_div(rows, rows_b) * grid_cols
    ptr = np.concatenate([[0], np.cumsum(np.bincount(block_of, minlength=n_blocks))]).astype(np.int64)
    return CSBMatrix(shape=(int(rows), int(cols)), kernel=int(kernel), block_rows=rows_b, block_cols=cols_b,
                     block_ptr=ptr, index=(ys << 4 | xs).astype(np.uint8),
                     values=kernels[r, c].astype(np.int8).reshape(-1, kernel, kernel), conv=conv)
