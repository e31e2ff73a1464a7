"""Verification stimulus of the FP-MAC array PE: directed corner cases plus random GEMMs, with golden answers.

Directed cases pin what uniform draws rarely hit: fb = 1 and fb = max_fb;
M, N, K at 1, at the buffer limits and one off a multiple of the array shape
(partial tiles, groups of fewer than four tiles); every transpose and
accumulate combination; operands from a pool of special codes (both zeros,
the smallest subnormal, the largest subnormal, the smallest normal, the
largest finite value, so products overflow to it and underflow to zero);
exact ties of the accumulation (1 + half an ulp); cancellation to an exact
zero (and the sign rule of a zero sum with -0 accumulators); ReLU on the
results (negative sums, -0 and +0 among them); random bits
where the PE must ignore them (below fb in the container, above the
container in the word); and headers the PE must refuse. Random transactions
draw every dimension, fb and transpose and accumulate flag uniformly within the build's limits, and ReLU one time
in four.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from codesign.pe.fpmac_array import golden, stimulus_vector
from codesign.pe.fpmac_array.contract import FB_FIELD_BITS, STATUS_OK, Header
from codesign.pe.fpmac_array.spec import MAX_DIM, MAX_M, FpmacArraySpec
from codesign.pe.fpmac_array.stimulus_vector import Codes
from codesign.numerics.inputs import check_seed

Transaction = tuple[np.ndarray, np.ndarray]


@dataclass(frozen=True, kw_only=True)
class FpmacArrayStimulusOptions:
    """What ``codesign verify fpmac_array`` checks: the directed sets, then random GEMMs until ``min_macs`` MACs
    and random element-wise operations until ``min_elements`` element results."""

    min_macs: int = 10_000
    min_elements: int = 10_000
    seed: int = 2026

    def __post_init__(self) -> None:
        check_seed(self.seed)
        for name in ("min_macs", "min_elements"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"{name} must be an int >= 0, got {value!r}")


def _transaction(spec, a, b, c, *, fb, trans_a=False, trans_b=False, relu=False, high_noise=None) -> Transaction:
    return (golden.words(spec, a, b, c, fb=fb, trans_a=trans_a, trans_b=trans_b, relu=relu, high_noise=high_noise),
            golden.output(spec, a, b, c, fb=fb, relu=relu))


def _case(spec, rng, m, n, k, fb, *, mode="any", c_mode=None, trans_a=False, trans_b=False, relu=False,
          noisy=False):
    codes = Codes(spec, fb, rng)
    a = codes.place(codes.draw((m, k), mode), noisy)
    b = codes.place(codes.draw((k, n), mode), noisy)
    c = None if c_mode is None else codes.place(codes.draw((m, n), c_mode), noisy)
    high = rng.integers(0, 1 << 32, size=a.size + b.size + (0 if c is None else c.size), dtype=np.uint64) \
        if noisy else None
    return _transaction(spec, a, b, c, fb=fb, trans_a=trans_a, trans_b=trans_b, relu=relu, high_noise=high)


def _ties(spec: FpmacArraySpec, fb: int) -> Transaction:
    """Accumulations that land exactly half an ulp above 1 and above 1 + ulp (both tie directions) and below -1."""
    codes = Codes(spec, fb, None)
    one, half_ulp = codes.code(False, codes.bias, 0), codes.code(False, codes.bias - fb - 1, 0)
    one_up = codes.code(False, codes.bias, 1)
    if codes.bias - fb - 1 < 1:  # half an ulp of 1 is below the normal range of this format: a smaller tie
        half_ulp = 1
        one = codes.code(False, 1, 0) if fb > 1 else codes.code(False, 0, 1)
    a = np.array([[one, half_ulp], [one_up, half_ulp], [one | codes.sign >> codes.drop, half_ulp]], dtype=np.uint64)
    b = np.array([[one, one | codes.sign >> codes.drop], [one, one]], dtype=np.uint64)
    a, b = codes.place(a), codes.place(b)
    return _transaction(spec, a, b, None, fb=fb)


def _cancellation(spec: FpmacArraySpec, fb: int, rng) -> list[Transaction]:
    """x*y - x*y = +0 from +0 and from -0 accumulators; C_in = -(x*y) cancels too; -0 products on -0 keep -0."""
    codes = Codes(spec, fb, rng)
    m, n = min(3, spec.max_m), min(2, spec.max_n)
    x = codes.draw((m, 1), "near")
    y = codes.draw((1, n), "near")
    neg = np.uint64(codes.sign >> codes.drop)
    a = codes.place(np.concatenate([x, x], axis=1))
    b = codes.place(np.concatenate([y, y ^ neg], axis=0))
    product = golden.spec_gemm(spec, a[:, :1], b[:1, :], fb=fb)
    out = [_transaction(spec, a, b, None, fb=fb),
           _transaction(spec, a, b, np.full((m, n), codes.place(np.array([neg]))[0], dtype=np.uint64), fb=fb),
           _transaction(spec, a[:, :1], b[:1, :], product ^ np.uint64(codes.sign), fb=fb)]
    zeros = codes.place(codes.draw((m, 2), "zero"))
    out.append(_transaction(spec, zeros, b, np.full((m, n), codes.place(np.array([neg]))[0], dtype=np.uint64),
                            fb=fb))
    # ReLU on the results: the same sums, -0 from -0 accumulators (sent as +0) and +0 among them
    out.append(_transaction(spec, a, b, None, fb=fb, relu=True))
    out.append(_transaction(spec, zeros, b, np.full((m, n), codes.place(np.array([neg]))[0], dtype=np.uint64),
                            fb=fb, relu=True))
    return out


def directed(spec: FpmacArraySpec, rng: np.random.Generator) -> list[Transaction]:
    s = spec
    out: list[Transaction] = []
    fbs = sorted({1, s.max_fb})
    for fb in fbs:
        out.append(_case(s, rng, 1, 1, 1, fb))
        out.append(_case(s, rng, 1, 1, 1, fb, c_mode="any"))
        out.append(_case(s, rng, s.max_m, s.max_n, s.max_k, fb, mode="near", c_mode="near"))  # every buffer full
        out.append(_case(s, rng, min(5, s.max_m), min(4, s.max_n), s.max_k, fb, mode="special", c_mode="special"))
        out.append(_case(s, rng, min(4, s.max_m), min(5, s.max_n), min(6, s.max_k), fb, mode="special"))
        out.append(_ties(s, fb) if s.max_m >= 3 and s.max_k >= 2 and s.max_n >= 2 else _case(s, rng, 1, 1, 1, fb))
        if s.max_m >= 3 and s.max_n >= 2 and s.max_k >= 2:
            out += _cancellation(s, fb, rng)
        for trans_a in (False, True):
            for trans_b in (False, True):
                out.append(_case(s, rng, min(3, s.max_m), min(5, s.max_n), min(4, s.max_k), fb, mode="near",
                                 c_mode="near" if trans_a == trans_b else None, trans_a=trans_a, trans_b=trans_b,
                                 relu=trans_a != trans_b, noisy=True))
        out.append(_case(s, rng, s.max_m, s.max_n, min(3, s.max_k), fb, mode="special", c_mode="special", relu=True))
    # partial tiles: M and N one off a multiple of the array shape, and fewer tiles than a group
    for m in sorted({v for v in (1, s.rows - 1, s.rows, s.rows + 1, 2 * s.rows + 1, s.max_m) if 1 <= v <= s.max_m}):
        for n in sorted({v for v in (1, s.cols - 1, s.cols + 1, s.max_n) if 1 <= v <= s.max_n}):
            out.append(_case(s, rng, m, n, int(rng.integers(1, min(4, s.max_k) + 1)),
                             int(rng.integers(1, s.max_fb + 1)), mode="near"))
    # refused headers: the header is the whole transaction
    bad = [Header(m=0, n=1, k=1, fb=1), Header(m=1, n=0, k=1, fb=1, accumulate=True),
           Header(m=1, n=1, k=1, fb=0, trans_b=True), Header(m=0, n=1, k=1, fb=1, relu=True)]
    # (K = 0 selects an element-wise op: stimulus_vector's)
    for field, limit in (("m", s.max_m), ("n", s.max_n), ("k", s.max_k)):
        if limit < (MAX_M if field == "m" else MAX_DIM):
            bad.append(Header(**{"m": 1, "n": 1, "k": 1, "fb": 1, field: limit + 1, "accumulate": True}))
    if s.max_m < MAX_M:
        bad.append(Header(m=s.max_m + 1, n=1, k=1, fb=1, relu=True))
    if s.max_fb < (1 << FB_FIELD_BITS) - 1:
        bad.append(Header(m=1, n=1, k=1, fb=s.max_fb + 1))
    for header in bad:
        word = header.word()
        out.append((np.array([word], dtype=np.uint64), golden.refused(s, word)))
    return out


def random(spec: FpmacArraySpec, count: int, rng: np.random.Generator) -> list[Transaction]:
    s = spec
    out = []
    for _ in range(count):
        m, n, k = (int(rng.integers(1, limit + 1)) for limit in (s.max_m, s.max_n, s.max_k))
        fb = int(rng.integers(1, s.max_fb + 1))
        mode = str(rng.choice(["any", "near", "near", "special"]))
        c_mode = None if rng.random() < 0.5 else mode
        out.append(_case(s, rng, m, n, k, fb, mode=mode, c_mode=c_mode, trans_a=bool(rng.random() < 0.5),
                         trans_b=bool(rng.random() < 0.5), relu=bool(rng.random() < 0.25),
                         noisy=bool(rng.random() < 1 / 3)))
    return out


def count_macs(transactions) -> int:
    """FP-MACs checked in the accepted transactions (M*N*K each)."""
    return sum(Header.parse(int(words_in[0])).macs for words_in, words_out in transactions
               if int(words_out[0]) == STATUS_OK)


def build(spec: FpmacArraySpec, options: FpmacArrayStimulusOptions) -> list[Transaction]:
    """The directed sets, then random GEMMs until at least ``options.min_macs`` MACs are checked and random
    element-wise operations until ``options.min_elements`` element results are."""
    rng = np.random.default_rng(options.seed)
    transactions = directed(spec, rng) + stimulus_vector.directed(spec, rng)
    macs, elements = count_macs(transactions), stimulus_vector.count_elements(transactions)
    while macs < options.min_macs:  # counted as they come: a large goal stays linear in its transactions
        added = random(spec, 1, rng)
        transactions += added
        macs += count_macs(added)
    while elements < options.min_elements:
        added = stimulus_vector.random(spec, 1, rng)
        transactions += added
        elements += stimulus_vector.count_elements(added)
    return transactions
