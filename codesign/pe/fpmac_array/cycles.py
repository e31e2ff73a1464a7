"""Cycle model of the FP-MAC array PE's RTL (rtl/fpmac_array), per transaction, without input gaps or backpressure.

Counted as the stream bench counts (:mod:`codesign.hw.stream_bench`): from the
cycle the header is taken to the cycle the last word of C leaves, both
included. The RTL does one thing at a time (header, load, compute, send), so
the count is a sum of phases; docs/fpmac_array.md gives the same formula.
"""

from __future__ import annotations

from dataclasses import dataclass

from codesign.pe.fpmac.spec import LATENCY
from codesign.pe.fpmac_array.contract import STATUS_OK, Header
from codesign.pe.fpmac_array.spec import FpmacArraySpec, ceil_div
from codesign.pe.fpmac_array.vector import OP_MASK, OP_RELU, OP_SGD, VectorHeader, is_vector

SLOTS = LATENCY  # output tiles in flight: a MAC's result returns when the same tile's next step issues
# compute cycles after the last valid tile step is read: the MAC's issue stage, its pipeline, the store of the
# last results, one cycle to see the pipeline empty, one read of the first word of C
COMPUTE_OVERHEAD = 1 + LATENCY + 2


@dataclass(frozen=True)
class Cycles:
    """Clock cycles of one transaction by phase."""

    header: int  # header in, status out
    load: int  # operand words taken: M*K + K*N (+ M*N)
    compute: int  # SLOTS * (K - 1) + 1 issue cycles per group of SLOTS tiles (less the last group's empty slots) + 7
    drain: int  # words of C sent: M*N (an element-wise operation: its output words)

    @property
    def total(self) -> int:
        return self.header + self.load + self.compute + self.drain


def tiles(spec: FpmacArraySpec, m: int, n: int) -> int:
    """Output tiles (``rows`` x ``cols`` outputs each, the last ones partial) of an M x N result."""
    return ceil_div(m, spec.rows) * ceil_div(n, spec.cols)


def groups(spec: FpmacArraySpec, m: int, n: int) -> int:
    """Groups of SLOTS output tiles worked together."""
    return ceil_div(tiles(spec, m, n), SLOTS)


def stream_cycles(spec: FpmacArraySpec, words_in) -> int:
    """Total cycles of the transaction ``words_in`` (the PE registry's cycle-model entry): its header decides."""
    return transaction_cycles(spec, int(words_in[0])).total


# cycles between an element-wise operation's last input word and its first output word: SGD's stage reading g and
# p, its three FP-MACs of LATENCY each, one cycle to see the chain empty and one to read the first result; ReLU and
# the mask only read the first result (rtl/fpmac_array/fpmac_array_vector.v)
VECTOR_GAP = {OP_SGD: 1 + 3 * LATENCY + 1 + 1, OP_RELU: 1, OP_MASK: 1}


def vector_cycles(spec: FpmacArraySpec, header: VectorHeader) -> Cycles:
    """An element-wise operation: ``2 + input words + gap + output words`` (:data:`VECTOR_GAP`); 2 when refused."""
    if header.status(spec) != STATUS_OK:
        return Cycles(2, 0, 0, 0)
    return Cycles(2, header.input_words, VECTOR_GAP[header.op], header.output_words)


def transaction_cycles(spec: FpmacArraySpec, header_word: int) -> Cycles:
    """``2 + M*K + K*N (+ M*N) + 4*G*(K-1) + T + 7 + M*N``; 2 for a refused header; an element-wise header (K = 0)
    is :func:`vector_cycles`'.

    ``T = ceil(M/rows) * ceil(N/cols)`` tiles, ``G = ceil(T/4)`` groups. A
    group issues one tile step a cycle, four slots per ``k``; the drain after
    the last valid step overlaps the empty slots of the last group, so the
    compute phase lasts until ``COMPUTE_OVERHEAD`` cycles after step
    ``4*G*(K-1) + T - 1``.
    """
    if is_vector(header_word):
        return vector_cycles(spec, VectorHeader.parse(header_word))
    header = Header.parse(header_word)
    if header.status(spec) != STATUS_OK:
        return Cycles(2, 0, 0, 0)
    m, n, k = header.m, header.n, header.k
    return Cycles(2, header.input_words, SLOTS * groups(spec, m, n) * (k - 1) + tiles(spec, m, n) + COMPUTE_OVERHEAD,
                  m * n)
