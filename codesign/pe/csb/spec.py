"""Arithmetic parameters of the sparse-CSB training PE (docs/csb.md), validated before anything is generated.

Only what changes the numbers or the word stream lives here; where the PE is
built (part, clock, top name) is a :class:`codesign.hw.target.BuildTarget`.
"""

from __future__ import annotations

from dataclasses import asdict, replace

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
STRIDES = (1, 2)  # a transaction steps over its input at stride 1, or at 2 on a PE built for it (header S2)
STREAM_BITS = (32, 64, 128)  # stream word widths: one, two or four 32-bit parts a beat


@keyword_record
class CsbSpec:
    """One CSB PE: block size, kernel, output tile, MAC lanes and groups, accumulator width (bits).

    ``out_h x out_w`` is the output tile in positions (1 x 1 for FC layers);
    at stride ``s`` the input tile is ``(s*(out_h - 1) + kernel) x (s*(out_w - 1) + kernel)``
    (:meth:`in_tile`) and must fit the ``MAX_IN_POS``-position channel buffer.
    ``max_stride`` 2 builds a PE that also runs stride-2 transactions (header
    flag ``S2``): its buffers hold the stride-2 input tile, so a stride-2
    convolution costs its useful MACs only. ``batch`` is the number of
    MAC lanes (one sample each), ``parallel`` the number of MAC groups that
    split the positions. Operand width (8 bits) and buffer width (24 bits) are
    fixed by the contract and exposed as properties. ``packed`` builds the
    MAC groups with two 8-bit products per DSP slice (``batch`` even; docs/csb.md,
    "Two products a DSP slice"): half the multipliers, the same results, FP and
    EB in the same cycles and a WG step in two. ``stream_bits`` is the width of
    the stream's words (beats): at 64 or 128 bits a beat carries two or four
    32-bit parts, every section starting a new beat (docs/csb.md, "Wide
    streams"), so loads and results take about a half or a quarter of the cycles;
    the lanes must be a multiple of the parts (a beat of sums is one position's
    lanes). ``loss`` builds the LOSS unit (element-wise op 3, docs/csb.md "The loss on the PE"): the loss
    gradient's codes from a tile of logits on the PE, for 1.1 to 2 k LUT, 4 DSP slices and half a BRAM36; a
    build without it refuses LOSS (status 1).
    """

    block_rows: int = 16
    block_cols: int = 16
    kernel: int = 1
    out_h: int = 1
    out_w: int = 1
    batch: int = 8
    parallel: int = 1
    acc_bits: int = 32
    max_stride: int = 1
    packed: bool = False
    stream_bits: int = 32
    loss: bool = False

    def __post_init__(self) -> None:
        _check_int("block_rows", self.block_rows, 1, INDEX_NIBBLE)
        _check_int("block_cols", self.block_cols, 1, INDEX_NIBBLE)
        _check_int("kernel", self.kernel, 1, MAX_KERNEL)
        _check_int("out_h", self.out_h, 1, MAX_IN_POS)
        _check_int("out_w", self.out_w, 1, MAX_IN_POS)
        _check_int("batch", self.batch, 1, MAX_BATCH)
        _check_int("parallel", self.parallel, 1, MAX_PARALLEL)
        _check_int("acc_bits", self.acc_bits, *ACC_BITS)
        _check_int("max_stride", self.max_stride, STRIDES[0], STRIDES[-1])
        if not isinstance(self.packed, bool):
            raise TypeError(f"packed={self.packed!r}: must be true or false")
        if self.packed and self.batch % 2:
            raise ValueError(f"packed=True needs an even batch (two lanes a DSP slice), got batch={self.batch}")
        if not isinstance(self.loss, bool):
            raise TypeError(f"loss={self.loss!r}: must be true or false")
        _check_int("stream_bits", self.stream_bits, STREAM_BITS[0], STREAM_BITS[-1])
        if self.stream_bits not in STREAM_BITS:
            raise ValueError(f"stream_bits={self.stream_bits!r} must be one of {STREAM_BITS}")
        if self.batch % self.parts:
            raise ValueError(f"stream_bits={self.stream_bits} needs lanes in multiples of its {self.parts} parts a "
                             f"beat (a beat of sums is one position's lanes), got batch={self.batch}")
        in_h, in_w = self.in_tile(self.max_stride)
        if in_h * in_w > MAX_IN_POS:
            raise ValueError(
                f"input tile {in_h} x {in_w} = {in_h * in_w} positions (out_h={self.out_h}, out_w={self.out_w}, "
                f"kernel={self.kernel}, stride {self.max_stride}) exceeds the {MAX_IN_POS}-position channel buffer"
            )

    @property
    def parts(self) -> int:
        """32-bit parts of one stream word (1, 2 or 4)."""
        return self.stream_bits // 32

    @property
    def data_bits(self) -> int:
        """Operand code width (bits), fixed by the contract."""
        return DATA_BITS

    @property
    def buffer_bits(self) -> int:
        """Weight buffer word width (bits), fixed by the contract."""
        return BUFFER_BITS

    def in_tile(self, stride: int = 1) -> tuple[int, int]:
        """``(in_h, in_w)`` in positions of the input tile a transaction at ``stride`` reads (FP, WG) or
        writes (EB); ValueError for a stride this PE does not run."""
        if isinstance(stride, bool) or stride not in STRIDES or stride > self.max_stride:
            raise ValueError(f"stride={stride!r}: this PE runs strides 1..{self.max_stride}")
        return stride * (self.out_h - 1) + self.kernel, stride * (self.out_w - 1) + self.kernel

    def run_as(self, *, kernel_one: bool) -> "CsbSpec":
        """The PE a transaction runs as: this one, or under header flag ``K1`` this one built with kernel 1 (one tap,
        the input tile ``s*(out - 1) + 1``): a 1 x 1 conv or a dense layer on a k x k build, without the
        ``k^2 - 1`` taps of zeros it would otherwise compute, load and update."""
        return replace(self, kernel=1) if kernel_one and self.kernel != 1 else self

    def in_pos_at(self, stride: int = 1) -> int:
        """Positions of the input tile at ``stride``."""
        in_h, in_w = self.in_tile(stride)
        return in_h * in_w

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
        """Elements one element-wise transaction (SELECT, SHR, RELU) takes: the wide weight buffer's words
        (``capacity * kk``), at most the 9-bit count field's 511."""
        return min(self.capacity * self.kk, 0x1FF)

    @property
    def acc_min(self) -> int:
        return -(1 << (self.acc_bits - 1))

    @property
    def acc_max(self) -> int:
        return (1 << (self.acc_bits - 1)) - 1

    def to_dict(self) -> dict:
        """The parameters, as transaction-file metadata and design files: the nine of every build, and ``packed``,
        ``stream_bits`` and ``loss`` where they differ from their defaults (so a file written for a build without them
        reads the same as before the options)."""
        values = asdict(self)
        if not self.packed:
            del values["packed"]
        if self.stream_bits == 32:
            del values["stream_bits"]
        if not self.loss:
            del values["loss"]
        return values
