"""The word stream of the FP-MAC array PE: the header word, its status rule and the section order (docs/fpmac_array.md).

One transaction in: the header, then ``A``, then ``B``, then ``C_in`` when the
header asks to accumulate, one container per 32-bit word. Out: one status
word, then (status 0 only) ``C`` row-major, with ReLU applied when the header
asks for it (a hidden layer's forward GEMM leaves its activations, not its
pre-activations, so no element-wise call has to read them again). A refused
header is the whole transaction: nothing follows it in either direction.
"""

from __future__ import annotations

from codesign.contracts.constants import STATUS_BAD_HEADER, STATUS_OK, WORD_BITS, status_code
from codesign.numerics.records import keyword_record
from codesign.pe.fpmac_array.spec import DIM_BITS, M_BITS, MAX_DIM, MAX_M, FpmacArraySpec

FB_SHIFT, FB_FIELD_BITS = 24, 5  # fb in bits 28..24 (0..31; 1..max_fb accepted)
RELU_BIT = M_BITS  # bit 7: ReLU on the results (M is bits 6..0)
TRANS_A_BIT, TRANS_B_BIT, ACCUMULATE_BIT = 29, 30, 31

# status words (codesign.contracts.constants): BAD_HEADER when M, N or K is 0, or fb is 0; TOO_LARGE when M, N or K
# is above its buffer, or fb above max_fb
STATUS_TOO_LARGE = status_code("fpmac_array", "TOO_LARGE")
__all__ = ["STATUS_BAD_HEADER", "STATUS_OK", "STATUS_TOO_LARGE", "WORD_BITS"]


@keyword_record
class Header:
    """The fields of one header word: dimensions (values), fraction bits, flags."""

    m: int
    n: int
    k: int
    fb: int
    trans_a: bool = False  # A arrives as A^T (K x M row-major)
    trans_b: bool = False  # B arrives as B^T (N x K row-major)
    accumulate: bool = False  # C_in (M x N row-major) follows B; otherwise every sum starts from +0
    relu: bool = False  # each result sent as ReLU of it: +0 where its sign bit is set

    def word(self) -> int:
        for name, value, limit in (("m", self.m, MAX_M), ("n", self.n, MAX_DIM), ("k", self.k, MAX_DIM),
                                   ("fb", self.fb, (1 << FB_FIELD_BITS) - 1)):
            if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= limit:
                raise ValueError(f"header field {name}={value!r} does not fit [0, {limit}]")
        return (self.m | self.n << DIM_BITS | self.k << 2 * DIM_BITS | self.fb << FB_SHIFT
                | int(bool(self.trans_a)) << TRANS_A_BIT | int(bool(self.trans_b)) << TRANS_B_BIT
                | int(bool(self.accumulate)) << ACCUMULATE_BIT | int(bool(self.relu)) << RELU_BIT)

    @classmethod
    def parse(cls, word: int) -> Header:
        word = int(word)
        return cls(m=word & MAX_M, n=(word >> DIM_BITS) & MAX_DIM, k=(word >> 2 * DIM_BITS) & MAX_DIM,
                   fb=(word >> FB_SHIFT) & ((1 << FB_FIELD_BITS) - 1), trans_a=bool(word >> TRANS_A_BIT & 1),
                   trans_b=bool(word >> TRANS_B_BIT & 1), accumulate=bool(word >> ACCUMULATE_BIT & 1),
                   relu=bool(word >> RELU_BIT & 1))

    def status(self, spec: FpmacArraySpec) -> int:
        """0 accepted; 1 a zero dimension or fb = 0; 2 a dimension above its buffer or fb above max_fb."""
        if 0 in (self.m, self.n, self.k, self.fb):
            return STATUS_BAD_HEADER
        if self.m > spec.max_m or self.n > spec.max_n or self.k > spec.max_k or self.fb > spec.max_fb:
            return STATUS_TOO_LARGE
        return STATUS_OK

    @property
    def input_words(self) -> int:
        """Operand words after an accepted header: M*K + K*N (+ M*N with accumulate)."""
        return self.m * self.k + self.k * self.n + (self.m * self.n if self.accumulate else 0)

    @property
    def macs(self) -> int:
        return self.m * self.n * self.k
