"""Arithmetic parameters of the TT processing elements (docs/tt_pe.md), validated before anything is generated.

Only what changes the numbers, the word stream or the buffer sizes lives
here; part, clock and top name are a :class:`codesign.hw.target.BuildTarget`.
"""

from __future__ import annotations

from codesign.numerics.formats import _check_int
from codesign.numerics.records import keyword_record
from codesign.pe.tt.contract import (
    MAX_BUFFER_CHUNKS,
    MAX_DIM,
    TtOperandSpec,
    TtSpecBase,
    chunks,
)

B_ORDERS = ("lj", "jl")  # PE1's B rows: l outer (the original stream), or j outer


@keyword_record
class _BufferedSpec(TtSpecBase):
    """Buffer limits of PE1 and PE2: a transaction may use any ``J <= max_j``, ``K <= max_k``, ``L <= max_l``."""

    max_j: int = 16
    max_k: int = 64
    max_l: int = 32

    def __post_init__(self) -> None:
        super().__post_init__()
        _check_int("max_j", self.max_j, 1, MAX_DIM)
        _check_int("max_k", self.max_k, 1, MAX_DIM)
        _check_int("max_l", self.max_l, 1, MAX_DIM)
        if self.b_chunks > MAX_BUFFER_CHUNKS:
            raise ValueError(f"max_l x max_j x max_k = {self.max_l} x {self.max_j} x {self.max_k} needs "
                             f"{self.b_chunks} chunks of B, more than the {MAX_BUFFER_CHUNKS} a build may cache")

    @property
    def max_kc(self) -> int:
        """Chunks of ``lanes`` values in the longest ``A`` row."""
        return chunks(self.max_k, self.lanes)

    @property
    def b_chunks(self) -> int:
        return self.bank_depth * self.rows

    @property
    def bank_depth(self) -> int:
        raise NotImplementedError


@keyword_record
class Tt1Spec(_BufferedSpec):
    """PE1, ``Z[i, l] = sum_j sum_k A[i, j, k] * B[l, j, k]``: the largest cached ``B`` is ``max_l x max_j x max_k``.

    ``A`` is streamed one ``i`` at a time (any ``I`` up to 255); ``B`` is
    cached in ``rows`` RAM banks of ``ceil(max_l / rows) * max_j *
    ceil(max_k / lanes)`` chunks each.

    ``b_order`` is the order in which ``B``'s rows arrive: ``"lj"`` (``l``
    outer, the original stream) or ``"jl"`` (``j`` outer). The header has no
    free bit, so the order is fixed when the PE is built (docs/tt_pe.md,
    "PE1's B order"); it moves no number, only which row lands where in the
    banks, and lets a caller whose ``B`` lies contiguous along ``l`` read it
    in long runs.

    ``j_pairs``: a transaction whose ``K`` fits half the lanes sums rows
    ``j = 2p`` and ``2p + 1`` in one chunk, the second row on the upper
    lanes, and adds that exact sum into the accumulator: ``ceil(J / 2)``
    MAC-loop cycles a row group instead of ``J``. The stream is the same; the
    sums are added in pairs, which moves a result only where a partial sum
    saturates (docs/tt_pe.md, "Row pairs along j").
    """

    b_order: str = "lj"
    j_pairs: bool = False

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.b_order not in B_ORDERS:
            raise ValueError(f"b_order={self.b_order!r} must be one of {B_ORDERS}")
        if not isinstance(self.j_pairs, bool):
            raise ValueError(f"j_pairs={self.j_pairs!r} must be True or False")

    def pairs(self, k: int) -> bool:
        """Whether a transaction with ``K = k`` sums rows ``j`` in pairs: the build has ``j_pairs`` and ``k`` fits
        half the lanes (docs/tt_pe.md, "Row pairs along j")."""
        return self.j_pairs and self.lanes > 1 and 2 * k <= self.lanes

    def loop_cycles(self, j: int, k: int) -> int:
        """MAC-loop cycles of one row group: ``J * KC``, or ``ceil(J / 2)`` where the transaction sums ``j`` in
        pairs (:meth:`pairs`)."""
        return -(-j // 2) if self.pairs(k) else j * chunks(k, self.lanes)

    @property
    def b_jl(self) -> bool:
        """Whether ``B``'s rows arrive ``j`` outer (the ``B_ORDER`` parameter of the C++ and the RTL is 1)."""
        return self.b_order == "jl"

    def to_dict(self) -> dict:
        """Every field, ``b_order`` only where it is not the original ``"lj"`` and ``j_pairs`` only where set: a
        build of the original stream keeps its vector-file metadata, cache keys and manifests as they were."""
        values = super().to_dict()
        if values["b_order"] == B_ORDERS[0]:
            del values["b_order"]
        if not values["j_pairs"]:
            del values["j_pairs"]
        return values

    @property
    def bank_depth(self) -> int:
        """Chunks one of the ``rows`` B banks holds."""
        return chunks(self.max_l, self.rows) * self.max_j * self.max_kc


@keyword_record
class Tt2Spec(_BufferedSpec):
    """PE2, ``Z[i, l, k] = sum_j A[i, j, k] * B[l, j]``: the largest cached ``B`` is ``max_l x max_j``.

    ``A`` is streamed one ``i`` at a time; ``B`` is cached in ``rows`` RAM
    banks of ``ceil(max_l / rows) * ceil(max_j / lanes)`` chunks each; the
    results wait in ``rows`` RAMs of two banks (a row group being summed, the
    one before it being sent) of ``ceil(max_k / lanes)`` words of
    ``lanes * acc_bits`` bits each.

    ``row_pairs``: a transaction whose ``K`` fits half the lanes runs row
    groups of ``2 * rows`` rows, each MAC row's lanes split between two rows
    of ``l`` (docs/tt_pe.md, "Row pairs"). It moves no number and no stream
    word, only cycles: such a transaction's MAC loop runs half as many groups.
    The upper rows' weights come from a second copy of each ``B`` bank.
    """

    row_pairs: bool = False

    def __post_init__(self) -> None:
        super().__post_init__()
        if not isinstance(self.row_pairs, bool):
            raise ValueError(f"row_pairs={self.row_pairs!r} must be True or False")

    def to_dict(self) -> dict:
        """Every field, ``row_pairs`` only where it is set: a build without row pairs keeps its vector-file
        metadata, cache keys and manifests as they were."""
        values = super().to_dict()
        if not values["row_pairs"]:
            del values["row_pairs"]
        return values

    def group_rows(self, k: int) -> int:
        """Rows of ``l`` one row group of a transaction with ``K = k`` computes: ``2 * rows`` where the build has
        row pairs and ``k`` fits half the lanes, else ``rows``."""
        return 2 * self.rows if self.row_pairs and self.lanes > 1 and k <= self.lanes // 2 else self.rows

    @property
    def max_jc(self) -> int:
        """Chunks of ``lanes`` values in the longest ``B`` row."""
        return chunks(self.max_j, self.lanes)

    @property
    def bank_depth(self) -> int:
        return chunks(self.max_l, self.rows) * self.max_jc


@keyword_record
class Tt3Spec(TtOperandSpec):
    """PE3, the outer product ``Z[i, j] = A[i] * B[j]``: ``lanes`` multipliers, ``B`` (up to ``max_j``) cached.

    Paper 003, Sec. 4: the first operand (the layer input, 8 bits) streams
    through, the second (the output gradient, 16 bits) is cached, and the
    products leave without being accumulated, so there is no accumulator: a
    product of two codes of at most 16 bits is exact in a 32-bit word.
    """

    a_bits: int = 8
    b_bits: int = 16
    max_j: int = 64

    def __post_init__(self) -> None:
        super().__post_init__()
        _check_int("max_j", self.max_j, 1, MAX_DIM)

    @property
    def max_jc(self) -> int:
        """Chunks of ``lanes`` values in the longest ``B``."""
        return chunks(self.max_j, self.lanes)
