"""Verification stimulus of the FP-MAC array's element-wise operations (ReLU, mask, momentum SGD), with answers.

Directed cases pin what uniform draws rarely hit: fb = 1 and fb = max_fb;
tiles of 1 x 1 and of the whole buffer; both zeros (ReLU and the mask keep
neither: -0 is not positive), the smallest subnormal, the largest value;
SGD scalars of 0, -0, 1, -1, the largest value and a subnormal, so each of
its three FP-MACs saturates, underflows, cancels to a signed zero or passes
its operand through; exact ties in each of the three FP-MACs (values around
1 with the scalar 1, so a product is exact and the sum lands half an ulp
over); random bits where the PE must ignore them (below fb, above the
container); and element-wise headers the PE must refuse. Random
transactions draw the op, the tile, fb and a value mode per section.
"""

from __future__ import annotations

import numpy as np

from codesign.pe.fpmac_array import golden, vector
from codesign.pe.fpmac_array.contract import FB_FIELD_BITS
from codesign.pe.fpmac_array.spec import MAX_DIM, FpmacArraySpec

Transaction = tuple[np.ndarray, np.ndarray]

MODES = ("any", "near", "near", "special")


class Codes:
    """Container words of ``spec`` in format ``(exp_bits, fb)``, drawn in several modes (the GEMM stimulus,
    :mod:`codesign.pe.fpmac_array.stimulus`, draws from it too: it imports this module, not the other way)."""

    def __init__(self, spec: FpmacArraySpec, fb: int, rng: np.random.Generator):
        self.spec, self.fb, self.rng = spec, fb, rng
        self.drop = spec.max_fb - fb
        self.sign = 1 << (spec.width - 1)
        self.bias = (1 << (spec.exp_bits - 1)) - 1

    def place(self, codes: np.ndarray, noisy: bool = False) -> np.ndarray:
        """Codes into the container; with ``noisy`` the ignored bits below fb are random."""
        words = codes.astype(np.uint64) << np.uint64(self.drop)
        if noisy and self.drop:
            words |= self.rng.integers(0, 1 << self.drop, size=words.shape, dtype=np.uint64)
        return words

    def code(self, negative: bool, field: int, frac: int) -> int:
        return (int(negative) << (self.spec.exp_bits + self.fb)) | (field << self.fb) | frac

    def specials(self) -> np.ndarray:
        top = (1 << self.spec.exp_bits) - 1
        frac_max = (1 << self.fb) - 1
        pool = [self.code(False, 0, 0), self.code(True, 0, 0), self.code(False, 0, 1), self.code(True, 0, frac_max),
                self.code(False, 1, 0), self.code(True, top, frac_max), self.code(False, top, frac_max),
                self.code(False, self.bias, 0), self.code(True, self.bias, 0)]
        return np.array(pool, dtype=np.uint64)

    def draw(self, shape, mode: str = "any") -> np.ndarray:
        fb, e = self.fb, self.spec.exp_bits
        size = int(np.prod(shape))
        sign = self.rng.integers(0, 2, size=size)
        frac = self.rng.integers(0, 1 << fb, size=size)
        if mode == "any":  # every exponent: overflow, underflow and subnormals are common
            field = self.rng.integers(0, 1 << e, size=size)
        elif mode == "near":  # values around 1: long accumulations, cancellation, ties
            field = np.clip(self.bias + self.rng.integers(-2, 3, size=size), 0, (1 << e) - 1)
        elif mode == "special":
            pool = self.specials()
            return pool[self.rng.integers(0, pool.size, size=size)].reshape(shape)
        elif mode == "zero":
            return np.where(sign == 1, self.sign >> self.drop, 0).astype(np.uint64).reshape(shape)
        else:
            raise ValueError(f"unknown mode {mode!r}")
        codes = (sign.astype(np.uint64) << np.uint64(e + fb)) | (field.astype(np.uint64) << np.uint64(fb)) \
            | frac.astype(np.uint64)
        return codes.reshape(shape)


def _transaction(spec: FpmacArraySpec, op: str, sections, *, fb: int, scalars=None, rng=None) -> Transaction:
    """One transaction; with ``rng`` the words carry random bits above the container."""
    high = None
    if rng is not None:
        count = vector.SCALARS[vector.OPS[op]] + sum(np.size(s) for s in sections)
        high = rng.integers(0, 1 << 32, size=count, dtype=np.uint64)
    return (vector.vector_words(spec, op, sections, fb=fb, scalars=scalars, high_noise=high),
            vector.vector_output(spec, op, sections, fb=fb, scalars=scalars))


def _case(spec: FpmacArraySpec, rng, op: str, m: int, n: int, fb: int, *, modes=("any",), scalar_mode="near",
          noisy=False) -> Transaction:
    codes = Codes(spec, fb, rng)
    count = vector.SECTIONS_IN[vector.OPS[op]]
    sections = [codes.place(codes.draw((m, n), modes[index % len(modes)]), noisy) for index in range(count)]
    scalars = codes.place(codes.draw((3,), scalar_mode), noisy) if op == "sgd" else None
    return _transaction(spec, op, sections, fb=fb, scalars=scalars, rng=rng if noisy else None)


def _scalar_corners(spec: FpmacArraySpec, fb: int, rng) -> list[Transaction]:
    """SGD with each scalar at a corner value in turn, the others near 1; operands of every kind."""
    codes = Codes(spec, fb, rng)
    pool = codes.specials()
    m, n = min(3, spec.max_m), min(4, spec.max_n)
    out = []
    for position in range(3):
        for corner in pool:
            scalars = codes.draw((3,), "near")
            scalars[position] = corner
            sections = [codes.place(codes.draw((m, n), mode)) for mode in ("special", "any", "near")]
            out.append(_transaction(spec, "sgd", sections, fb=fb, scalars=codes.place(scalars)))
    return out


def _sgd_ties(spec: FpmacArraySpec, fb: int) -> list[Transaction]:
    """Each FP-MAC of the chain lands exactly half an ulp above 1 or above 1 + ulp (both tie directions).

    With wd = mu = 1 and step = -1: g' = p + g ties for p = 1 or 1 + ulp and g = half an ulp; v' = v + g' ties
    for g' = 1 (g = 0, p = 1) and v = half an ulp. With wd = 0: g' = g = -(half an ulp) = v' (v = 0), and
    p' = p - v' ties for p = 1 or 1 + ulp.
    """
    codes = Codes(spec, fb, None)
    if codes.bias - fb - 1 < 1:  # half an ulp of 1 is below the normal range: no tie of this shape
        return []
    one, half = codes.code(False, codes.bias, 0), codes.code(False, codes.bias - fb - 1, 0)
    one_up, neg = codes.code(False, codes.bias, 1), codes.sign >> codes.drop
    cases = (((one, one, one | neg), [half, half, 0], [one, one_up, one], [0, 0, half]),
             ((0, one, one | neg), [neg | half, neg | half], [one, one_up], [0, 0]))
    return [_transaction(spec, "sgd", [codes.place(np.array([x], dtype=np.uint64)) for x in (g, p, v)], fb=fb,
                         scalars=codes.place(np.array(scalars, dtype=np.uint64)))
            for scalars, g, p, v in cases]


def _refused(spec: FpmacArraySpec) -> list[Transaction]:
    headers = [vector.VectorHeader(op=0, m=1, n=1, fb=1), vector.VectorHeader(op=4, m=1, n=1, fb=1),
               vector.VectorHeader(op=7, m=1, n=1, fb=1), vector.VectorHeader(op=1, m=0, n=1, fb=1),
               vector.VectorHeader(op=2, m=1, n=0, fb=1), vector.VectorHeader(op=3, m=1, n=1, fb=0)]
    for field, limit in (("m", spec.max_m), ("n", spec.max_n)):
        if limit < MAX_DIM:
            headers.append(vector.VectorHeader(**{"op": 3, "m": 1, "n": 1, "fb": 1, field: limit + 1}))
    # an element-wise M reads all 8 bits (a GEMM's bit 7 is its ReLU flag): M = 128 and 129 are above every build
    headers += [vector.VectorHeader(op=1, m=0x80, n=1, fb=1), vector.VectorHeader(op=2, m=0x81, n=1, fb=1)]
    if spec.max_fb < (1 << FB_FIELD_BITS) - 1:
        headers.append(vector.VectorHeader(op=1, m=1, n=1, fb=spec.max_fb + 1))
    return [(np.array([h.word()], dtype=np.uint64), golden.refused(spec, h.word())) for h in headers]


def directed(spec: FpmacArraySpec, rng: np.random.Generator) -> list[Transaction]:
    s = spec
    out: list[Transaction] = []
    for fb in sorted({1, s.max_fb}):
        for op in vector.OPS:
            out.append(_case(s, rng, op, 1, 1, fb))
            out.append(_case(s, rng, op, s.max_m, s.max_n, fb, modes=("near", "any", "special")))  # the whole buffer
            out.append(_case(s, rng, op, min(4, s.max_m), min(5, s.max_n), fb, modes=("special",),
                             scalar_mode="special"))
            out.append(_case(s, rng, op, min(3, s.max_m), min(2, s.max_n), fb, modes=("zero", "special"),
                             noisy=True))
        out += _scalar_corners(s, fb, rng)
        out += _sgd_ties(s, fb)
    return out + _refused(s)


def random(spec: FpmacArraySpec, count: int, rng: np.random.Generator) -> list[Transaction]:
    out = []
    for _ in range(count):
        op = str(rng.choice(list(vector.OPS)))
        m, n = int(rng.integers(1, spec.max_m + 1)), int(rng.integers(1, spec.max_n + 1))
        modes = tuple(str(mode) for mode in rng.choice(MODES, size=3))
        out.append(_case(spec, rng, op, m, n, int(rng.integers(1, spec.max_fb + 1)), modes=modes,
                         scalar_mode=str(rng.choice(MODES)), noisy=bool(rng.random() < 1 / 3)))
    return out


def count_elements(transactions) -> int:
    """Element results checked in the accepted element-wise transactions (M*N per output section)."""
    total = 0
    for words_in, words_out in transactions:
        if vector.is_vector(int(words_in[0])) and int(words_out[0]) == 0:
            total += vector.VectorHeader.parse(int(words_in[0])).output_words
    return total
