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
from codesign.pe.tt.spec import Tt1Spec, Tt2Spec

TtSpec = Tt1Spec | Tt2Spec

Transaction = tuple[np.ndarray, np.ndarray]


@dataclass(frozen=True, kw_only=True)
class TtStimulusOptions:
    """What ``codesign verify tt*`` checks: directed cases plus random transactions until ``min_macs`` MACs."""

    min_macs: int = 10_000
    seed: int = 2026

    def __post_init__(self) -> None:
        if isinstance(self.min_macs, bool) or not isinstance(self.min_macs, int) or self.min_macs < 0:
            raise ValueError(f"min_macs must be an int >= 0, got {self.min_macs!r}")


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


def directed(spec: TtSpec, rng: np.random.Generator) -> list[Transaction]:
    s = spec
    out: list[Transaction] = []

    def case(i, j, k, l, a_mode="any", b_mode="any", noisy=False):
        a = _draw(rng, s.a_bits, (i, j, k), a_mode)
        b = _draw(rng, s.b_bits, golden.b_shape(s, j, k, l), b_mode)
        out.append(_pair(s, a, b, rng if noisy else None))

    ks = sorted({k for k in (1, s.lanes - 1, s.lanes, s.lanes + 1, 2 * s.lanes + 1, s.max_k) if 1 <= k <= s.max_k})
    ls = sorted({v for v in (1, s.rows - 1, s.rows, s.rows + 1, s.max_l) if 1 <= v <= s.max_l})
    case(1, 1, 1, 1)
    for k in ks:
        case(2, 1, k, min(3, s.max_l))
        case(1, min(2, s.max_j), k, min(s.rows, s.max_l), noisy=True)
    for v in ls:
        case(2, min(3, s.max_j), min(s.lanes + 1, s.max_k), v)
    case(2, s.max_j, s.max_k, s.max_l)  # every buffer full
    case(3, s.max_j, min(5, s.max_k), min(4, s.max_l), b_mode="zero")  # zero cores
    case(2, 2, s.max_k, 2, a_mode="zero")
    for a_mode, b_mode in (("min", "min"), ("max", "min"), ("min", "max"), ("max", "max"), ("ends", "ends")):
        case(2, s.max_j, s.max_k, min(s.rows + 1, s.max_l), a_mode, b_mode)
    # a positive run, then a negative one: with saturation the order of additions shows in the result
    j = s.max_j
    a = np.full((1, j, s.max_k), code_range(s.a_bits)[0], dtype=np.int64)
    b = np.full(golden.b_shape(s, j, s.max_k, 2), code_range(s.b_bits)[0], dtype=np.int64)
    b[:, j // 2:] = code_range(s.b_bits)[1]
    b[1] = b[1, ::-1]
    out.append(_pair(s, a, b))
    # ignored bits random everywhere
    case(2, min(3, s.max_j), s.max_k, min(s.rows + 1, s.max_l), noisy=True)
    # refused headers: the header is the whole transaction
    for index in range(4):
        dims = [1, 1, 1, 1]
        dims[index] = 0
        word = header_word(*dims)
        out.append((np.array([word], dtype=np.uint64), golden.refused(golden.status(s, word))))
    for index, limit in ((1, s.max_j), (2, s.max_k), (3, s.max_l)):
        if limit < MAX_DIM:
            dims = [1, 1, 1, 1]
            dims[index] = limit + 1
            word = header_word(*dims)
            out.append((np.array([word], dtype=np.uint64), golden.refused(golden.status(s, word))))
    return out


def random(spec: TtSpec, count: int, rng: np.random.Generator) -> list[Transaction]:
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


def count_macs(transactions) -> int:
    """MACs of the accepted PE1 or PE2 transactions (I * J * K * L each; padding lanes not counted)."""
    total = 0
    for words_in, words_out in transactions:
        if int(words_out[0]) != STATUS_OK:
            continue
        (i, j, k, l), _ = header_dims(int(words_in[0]), 4)
        total += i * j * k * l
    return total


def build(spec: TtSpec, options: TtStimulusOptions) -> list[Transaction]:
    """The directed set, then random transactions until at least ``options.min_macs`` MACs are checked."""
    rng = np.random.default_rng(options.seed)
    transactions = directed(spec, rng)
    while count_macs(transactions) < options.min_macs:
        transactions += random(spec, 8, rng)
    return transactions
