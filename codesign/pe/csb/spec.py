"""Arithmetic parameters of the sparse-CSB training PE (docs/csb.md), validated before anything is generated.

Only what changes the numbers or the word stream lives here; where the PE is
built (part, clock, top name) is a :class:`codesign.hw.target.BuildTarget`.
"""

from __future__ import annotations

from dataclasses import asdict

from codesign.numerics.formats import _check_int
from codesign.numerics.records import keyword_record

INDEX_NIBBLE = 16  # one index byte {y[3:0], x[3:0]} bounds a block at 16 x 16 entries
DATA_BITS = 8  # operands (weights' compute part, activations, errors) are 8-bit codes
BUFFER_BITS = 24  # weight buffer words: the compute part is their top 8 bits
MAX_KERNEL = 7
MAX_BATCH = 16  # MAC lanes; 16 lane products of 2^14 sum exactly below 2^19
MAX_PARALLEL = 8
ACC_BITS = (16, 32)
MAX_IN_POS = 1024  # input tile positions one channel buffer holds (in_h * in_w)


@keyword_record
class CsbSpec:
    """One CSB PE: block size, kernel, output tile, MAC lanes and groups, accumulator width (bits).

    ``out_h x out_w`` is the output tile in positions (1 x 1 for FC layers);
    the input tile is ``(out_h + kernel - 1) x (out_w + kernel - 1)`` and must
    fit the ``MAX_IN_POS``-position channel buffer. ``batch`` is the number of
    MAC lanes (one sample each), ``parallel`` the number of MAC groups that
    split the positions. Operand width (8 bits) and buffer width (24 bits) are
    fixed by the contract and exposed as properties.
    """

    block_rows: int = 16
    block_cols: int = 16
    kernel: int = 1
    out_h: int = 1
    out_w: int = 1
    batch: int = 8
    parallel: int = 1
    acc_bits: int = 32

    def __post_init__(self) -> None:
        _check_int("block_rows", self.block_rows, 1, INDEX_NIBBLE)
        _check_int("block_cols", self.block_cols, 1, INDEX_NIBBLE)
        _check_int("kernel", self.kernel, 1, MAX_KERNEL)
        _check_int("out_h", self.out_h, 1, MAX_IN_POS)
        _check_int("out_w", self.out_w, 1, MAX_IN_POS)
        _check_int("batch", self.batch, 1, MAX_BATCH)
        _check_int("parallel", self.parallel, 1, MAX_PARALLEL)
        _check_int("acc_bits", self.acc_bits, *ACC_BITS)
        if self.in_pos > MAX_IN_POS:
            raise ValueError(
                f"input tile {self.in_h} x {self.in_w} = {self.in_pos} positions (out_h={self.out_h}, "
                f"out_w={self.out_w}, kernel={self.kernel}) exceeds the {MAX_IN_POS}-position channel buffer"
            )

    @property
    def data_bits(self) -> int:
        """Operand code width (bits), fixed by the contract."""
        return DATA_BITS

    @property
    def buffer_bits(self) -> int:
        """Weight buffer word width (bits), fixed by the contract."""
        return BUFFER_BITS

    @property
    def in_h(self) -> int:
        return self.out_h + self.kernel - 1

    @property
    def in_w(self) -> int:
        return self.out_w + self.kernel - 1

    @property
    def kk(self) -> int:
        """Taps per entry (k * k)."""
        return self.kernel * self.kernel

    @property
    def out_pos(self) -> int:
        return self.out_h * self.out_w

    @property
    def in_pos(self) -> int:
        return self.in_h * self.in_w

    @property
    def capacity(self) -> int:
        """Entries one block holds, hence the largest accepted ``nnz``."""
        return self.block_rows * self.block_cols

    @property
    def ew_capacity(self) -> int:
        """Elements one element-wise transaction (SELECT, SHR) takes: the wide weight buffer's words
        (``capacity * kk``), at most the 9-bit count field's 511."""
        return min(self.capacity * self.kk, 0x1FF)

    @property
    def acc_min(self) -> int:
        return -(1 << (self.acc_bits - 1))

    @property
    def acc_max(self) -> int:
        return (1 << (self.acc_bits - 1)) - 1

    def to_dict(self) -> dict:
        """The eight parameters, as transaction-file metadata and template constants."""
        return asdict(self)
