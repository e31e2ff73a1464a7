"""Verification stimulus of the TT PEs: directed corner cases plus random transactions, with golden answers.

Directed cases pin what uniform draws rarely hit: every dimension at 1 (rank
1 and single modes), the last dimension one below, at and one above a whole
chunk and at the buffer limit (padding edges), ``L`` around a multiple of
``rows`` (partial row groups), all-zero cores, operands at both ends of their
code ranges (the largest products, saturation in both directions, with the
order of additions visible when a positive run is followed by a negative
one), random bits wherever the PE must ignore them, and headers the PE must
refuse (a zero dimension, a dimension above its buffer). Random transactions
draw every dimension uniformly within the build's limits.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from codesign.pe.tt import golden
from codesign.pe.tt.contract import MAX_DIM, STATUS_OK, code_range, header_dims, header_word
from codesign.pe.tt.spec import Tt1Spec, Tt2Spec, Tt3Spec
from codesign.numerics.inputs import check_seed

TtSpec = Tt1Spec | Tt2Spec | Tt3Spec

Transaction = tuple[np.ndarray, np.ndarray]


@dataclass(frozen=True, kw_only=True)
class TtStimulusOptions:
    """What ``codesign verify tt*`` checks: directed cases, random transactions until ``min_macs`` MACs, then small
    random transactions until ``min_contractions`` accepted transactions (contractions) in all."""

    min_macs: int = 10_000
    min_contractions: int = 0
    seed: int = 2026

    def __post_init__(self) -> None:
        check_seed(self.seed)
        for name in ("min_macs", "min_contractions"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"{name} must be an int >= 0, got {value!r}")


def _draw(rng: np.random.Generator, bits: int, shape, mode: str = "any") -> np.ndarray:
    low, high = code_range(bits)
    if mode == "zero":
        return np.zeros(shape, dtype=np.int64)
    if mode == "min":
        return np.full(shape, low, dtype=np.int64)
    if mode == "max":
        return np.full(shape, high, dtype=np.int64)
    if mode == "ends":
        return np.where(rng.random(shape) < 0.5, low, high).astype(np.int64)
    return rng.integers(low, high + 1, size=shape)


# ---------------------------------------------------------------------------- PE1 and PE2
def _pair(spec: TtSpec, a, b, rng=None) -> Transaction:
    return golden.words(spec, a, b, rng), golden.output(spec, a, b)


TOP_BIT = (MAX_DIM + 1) // 2  # the highest bit of an 8-bit dimension field


def directed(spec: Tt1Spec | Tt2Spec, rng: np.random.Generator) -> list[Transaction]:
    s = spec
    out: list[Transaction] = []

    def case(i, j, k, l, a_mode="any", b_mode="any", noisy=False):
        a = _draw(rng, s.a_bits, (i, j, k), a_mode)
        b = _draw(rng, s.b_bits, golden.b_shape(s, j, k, l), b_mode)
        out.append(_pair(s, a, b, rng if noisy else None))

    ks = sorted({k for k in (1, s.lanes - 1, s.lanes, s.lanes + 1, 2 * s.lanes + 1, s.max_k) if 1 <= k <= s.max_k})
    ls = sorted({v for v in (1, s.rows - 1, s.rows, s.rows + 1, s.max_l) if 1 <= v <= s.max_l})
    case(1, 1, 1, 1)
    case(MAX_DIM, 1, min(2, s.max_k), 1)  # I at the top of its header field
    for index, limit in ((1, s.max_j), (2, s.max_k), (3, s.max_l)):  # a field's top bit alone: 128 reads as 0
        if limit >= TOP_BIT:
            dims = [2, 1, 1, 1]
            dims[index] = TOP_BIT
            case(*dims)
    for k in ks:
        case(2, 1, k, min(3, s.max_l))
        case(1, min(2, s.max_j), k, min(s.rows, s.max_l), noisy=True)
    for v in ls:
        case(2, min(3, s.max_j), min(s.lanes + 1, s.max_k), v)
    case(2, s.max_j, s.max_k, s.max_l)  # every buffer full
    for j, k, l in _pair_sizes(s):  # PE2's groups of 2 x rows, PE1's rows j in pairs (odd and even J)
        case(3, j, k, l, noisy=k == 1)
        case(2, j if isinstance(s, Tt1Spec) else 1, k, l, "ends", "ends")
    case(3, s.max_j, min(5, s.max_k), min(4, s.max_l), b_mode="zero")  # zero cores
    case(2, min(2, s.max_j), s.max_k, min(2, s.max_l), a_mode="zero")
    for a_mode, b_mode in (("min", "min"), ("max", "min"), ("min", "max"), ("max", "max"), ("ends", "ends")):
        case(2, s.max_j, s.max_k, min(s.rows + 1, s.max_l), a_mode, b_mode)
    # a positive run, then a negative one: with saturation the order of additions shows in the result (again
    # with rows j summed in pairs where the build does)
    j = s.max_j
    for k in sorted({s.max_k} | ({min(s.lanes // 2, s.max_k)} if getattr(s, "j_pairs", False) else set())):
        a = np.full((1, j, k), code_range(s.a_bits)[0], dtype=np.int64)
        b = np.full(golden.b_shape(s, j, k, 2), code_range(s.b_bits)[0], dtype=np.int64)
        b[:, j // 2:] = code_range(s.b_bits)[1]
        b[1] = b[1, ::-1]
        out.append(_pair(s, a, b))
    # ignored bits random everywhere
    case(2, min(3, s.max_j), s.max_k, min(s.rows + 1, s.max_l), noisy=True)
    # refused headers: the header is the whole transaction
    for index in range(4):
        dims = [1, 1, 1, 1]
        dims[index] = 0
        out.append(refusal(s, header_word(*dims)))
    for index, limit in ((1, s.max_j), (2, s.max_k), (3, s.max_l)):
        if limit < MAX_DIM:
            dims = [1, 1, 1, 1]
            dims[index] = limit + 1
            out.append(refusal(s, header_word(*dims)))
    out += wide_refusals(s, header_word(1, 1, 1, 1))
    return out


def _pair_sizes(spec: Tt1Spec | Tt2Spec) -> list[tuple[int, int, int]]:
    """``(J, K, L)`` of directed transactions that run pairs on a build with them (none otherwise), ``K`` 1 and
    half the lanes: PE2 with row pairs, ``L`` around one and two row groups of ``2 * rows`` and at the buffer's
    top; PE1 with ``j`` pairs, ``J`` odd and even around the lanes and at the buffer's top."""
    pe1 = isinstance(spec, Tt1Spec)
    if not getattr(spec, "j_pairs" if pe1 else "row_pairs", False) or spec.lanes < 2:
        return []
    rows, half = spec.rows, spec.lanes // 2
    ks = [k for k in sorted({1, half}) if k <= spec.max_k]
    if pe1:
        js = {1, 2, 3, spec.lanes, spec.lanes + 1, spec.max_j}
        return [(j, k, min(rows + 1, spec.max_l)) for k in ks for j in sorted(js) if j <= spec.max_j]
    ls = {1, rows, rows + 1, 2 * rows - 1, 2 * rows, 2 * rows + 1, 4 * rows + 1, spec.max_l}
    return [(min(spec.lanes + 1, spec.max_j), k, l) for k in ks for l in sorted(ls) if 1 <= l <= spec.max_l]


def refusal(spec: TtSpec, header: int) -> Transaction:
    """A transaction of one refused header word (an integer of up to ``spec.stream_bits`` bits) and its status."""
    parts = [(header >> (32 * index)) & 0xFFFF_FFFF for index in range(spec.parts)]
    return np.array(parts, dtype=np.uint64), golden.refused(golden.status(spec, header), spec.stream_bits)


def wide_refusals(spec: TtSpec, header: int) -> list[Transaction]:
    """In a word wider than 32 bits, a valid header with one bit set above bit 31 (the lowest, one in every
    further part, the highest) is refused: no part but the first may be taken for 0 unread."""
    return [refusal(spec, header | 1 << bit) for bit in range(32, spec.stream_bits, 32)] + (
        [refusal(spec, header | 1 << (spec.stream_bits - 1))] if spec.stream_bits > 32 else [])


def random(spec: Tt1Spec | Tt2Spec, count: int, rng: np.random.Generator) -> list[Transaction]:
    s = spec
    out = []
    for _ in range(count):
        i = int(rng.integers(1, 5))
        j, k, l = (int(rng.integers(1, limit + 1)) for limit in (s.max_j, s.max_k, s.max_l))
        mode = str(rng.choice(["any", "any", "ends"]))
        a = _draw(rng, s.a_bits, (i, j, k), mode)
        b = _draw(rng, s.b_bits, golden.b_shape(s, j, k, l), mode)
        out.append(_pair(s, a, b, rng if rng.random() < 1 / 3 else None))
    return out


def _small(rng: np.random.Generator, limit: int) -> int:
    """A dimension in 1..limit, log-uniform: mostly small, every size reachable."""
    return min(limit, int(np.exp(rng.uniform(0.0, np.log(limit + 1)))))


def small_random(spec: TtSpec, count: int, rng: np.random.Generator) -> list[Transaction]:
    """Many cheap contractions: dimensions log-uniform up to two chunks plus one along the lanes, two row groups
    (four with row pairs) plus one along the rows, 8 along ``J`` (PE3: 2 chunks plus one of both operands), within
    the build's limits, so chunk edges and partial row groups come up often; codes anywhere in their range or at
    its ends, random ignored bits in a third of them. The large sizes are the directed set's and :func:`random`'s."""
    out = []
    edge = 2 * spec.lanes + 1
    for _ in range(count):
        mode = str(rng.choice(["any", "any", "ends"]))
        if isinstance(spec, Tt3Spec):
            a = _draw(rng, spec.a_bits, (_small(rng, edge),), mode)
            b = _draw(rng, spec.b_bits, (_small(rng, min(edge, spec.max_j)),), mode)
        else:
            i, j = _small(rng, 2), _small(rng, min(8, spec.max_j))
            groups = 4 if getattr(spec, "row_pairs", False) else 2  # row pairs: groups of 2 x rows
            k, l = _small(rng, min(edge, spec.max_k)), _small(rng, min(groups * spec.rows + 1, spec.max_l))
            a = _draw(rng, spec.a_bits, (i, j, k), mode)
            b = _draw(rng, spec.b_bits, golden.b_shape(spec, j, k, l), mode)
        out.append(_pair(spec, a, b, rng if rng.random() < 1 / 3 else None))
    return out


# ---------------------------------------------------------------------------- PE3
def pe3_directed(spec: Tt3Spec, rng: np.random.Generator) -> list[Transaction]:
    """Single values, ``I`` and ``J`` around chunk edges and at the limits, zeros, both code-range ends, random
    ignored bits, refused headers (a zero dimension, a bit above the two fields, ``J`` above the cache)."""
    s = spec
    out: list[Transaction] = []

    def case(i, j, a_mode="any", b_mode="any", noisy=False):
        a, b = _draw(rng, s.a_bits, (i,), a_mode), _draw(rng, s.b_bits, (j,), b_mode)
        out.append(_pair(s, a, b, rng if noisy else None))

    edges = (1, s.lanes - 1, s.lanes, s.lanes + 1, 2 * s.lanes + 1)
    for i in sorted({v for v in (*edges, MAX_DIM) if 1 <= v <= MAX_DIM}):
        case(i, min(3, s.max_j))
    for j in sorted({v for v in (*edges, s.max_j) if 1 <= v <= s.max_j}):
        case(2, j)
        case(3, j, noisy=True)
    case(5, s.max_j, "zero", "any")
    case(5, s.max_j, "any", "zero")
    for a_mode, b_mode in (("min", "min"), ("max", "min"), ("min", "max"), ("max", "max"), ("ends", "ends")):
        case(s.lanes + 1, s.max_j, a_mode, b_mode)
    for word in (header_word(0, 1), header_word(1, 0), header_word(1, 1) | 1 << 16, header_word(1, 1) | 1 << 31):
        out.append(refusal(s, word))
    if s.max_j < MAX_DIM:
        out.append(refusal(s, header_word(1, s.max_j + 1)))
    out += wide_refusals(s, header_word(1, 1))
    return out


def pe3_random(spec: Tt3Spec, count: int, rng: np.random.Generator) -> list[Transaction]:
    out = []
    for _ in range(count):
        i, j = int(rng.integers(1, 65)), int(rng.integers(1, spec.max_j + 1))
        mode = str(rng.choice(["any", "any", "ends"]))
        a, b = _draw(rng, spec.a_bits, (i,), mode), _draw(rng, spec.b_bits, (j,), mode)
        out.append(_pair(spec, a, b, rng if rng.random() < 1 / 3 else None))
    return out


# ---------------------------------------------------------------------------- all PEs
def count_macs(spec: TtSpec, transactions) -> int:
    """Products checked in the accepted transactions: I*J*K*L (PE1, PE2; padding lanes not counted), I*J (PE3)."""
    total = 0
    for words_in, words_out in transactions:
        if int(words_out[0]) != STATUS_OK:
            continue
        if isinstance(spec, Tt3Spec):
            (i, j), _ = header_dims(int(words_in[0]), 2)
            total += i * j
        else:
            (i, j, k, l), _ = header_dims(int(words_in[0]), 4)
            total += i * j * k * l
    return total


def count_contractions(transactions) -> int:
    """Accepted transactions: each is one contraction (PE3: one outer product)."""
    return sum(int(words_out[0]) == STATUS_OK for _, words_out in transactions)


def build(spec: TtSpec, options: TtStimulusOptions) -> list[Transaction]:
    """The directed set, random transactions until at least ``options.min_macs`` MACs are checked, then small
    random ones until at least ``options.min_contractions`` contractions are."""
    rng = np.random.default_rng(options.seed)
    pe3 = isinstance(spec, Tt3Spec)
    transactions = pe3_directed(spec, rng) if pe3 else directed(spec, rng)
    while count_macs(spec, transactions) < options.min_macs:
        transactions += pe3_random(spec, 2, rng) if pe3 else random(spec, 8, rng)
    missing = options.min_contractions - count_contractions(transactions)
    if missing > 0:
        transactions += small_random(spec, missing, rng)
    return transactions
