"""The FP-MAC array's element-wise operations: ReLU, the ReLU mask and the momentum-SGD update, on container words.

Why on the PE: a training step whose weights, velocities and activations stay
in device memory needs the three element-wise steps the host did between
GEMMs (:class:`codesign.loops.fb.FbMlpTrainer`): the ReLU of a hidden layer,
the mask of a gradient by the ReLU's input, and SGD with momentum and weight
decay. (The list step takes the ReLU on its GEMMs' results instead, the
header's ``relu`` flag, and calls the mask and the update here.) Each update is three FP-MACs of the array's own arithmetic,
``round(round(a*b) + c)`` (:func:`codesign.numerics.fp_mac`), so the PE
computes it bit for bit as the host did.

The stream (docs/fpmac_array.md, "Element-wise operations"): a header with
``K = 0`` (which a GEMM never has) selects an operation by bits 31..29
(:data:`OPS`); ``M`` x ``N`` is the element tile, ``fb`` the fraction width.

========  ======================================  ==========================
op        in after the header                     out after the status word
========  ======================================  ==========================
RELU (1)  X (M*N)                                 Y (M*N)
MASK (2)  X (M*N), then Z (M*N)                   Y (M*N)
SGD  (3)  wd, mu, step (3 words), G, P, V (M*N)   P', V' (M*N each)
========  ======================================  ==========================

* RELU: ``y = x`` where ``x`` is positive, else +0;
* MASK: ``y = x`` where ``z`` is positive, else +0;
* SGD: ``g = fp_mac(wd, p, G)``, ``v' = fp_mac(mu, v, g)``,
  ``p' = fp_mac(step, v', p)`` (``step`` is minus the learning rate).

"Positive" is a code with sign bit 0 that is not +0, at ``fb`` (bits below fb
are ignored, as everywhere in the PE). Results are the codes placed in the
container, their bits below fb cleared. Refused (BAD_HEADER): op 0 or 4..7,
``M``, ``N`` or ``fb`` 0; TOO_LARGE: ``M`` above max_m, ``N`` above max_n,
``fb`` above max_fb.
"""

from __future__ import annotations

import numpy as np

from codesign.contracts.constants import STATUS_BAD_HEADER, STATUS_OK
from codesign.numerics import FloatFormat, fp_mac
from codesign.numerics.records import keyword_record
from codesign.pe.fpmac.golden import from_container, to_container
from codesign.pe.fpmac_array.contract import FB_FIELD_BITS, FB_SHIFT, STATUS_TOO_LARGE, Header
from codesign.pe.fpmac_array.spec import DIM_BITS, MAX_DIM, FpmacArraySpec

OP_SHIFT = 29  # bits 31..29: the GEMM's A^T, B^T and accumulate flags, free when K = 0
OP_RELU, OP_MASK, OP_SGD = 1, 2, 3
OPS = {"relu": OP_RELU, "mask": OP_MASK, "sgd": OP_SGD}
SCALARS = {OP_RELU: 0, OP_MASK: 0, OP_SGD: 3}  # words before the element sections
SECTIONS_IN = {OP_RELU: 1, OP_MASK: 2, OP_SGD: 3}  # element sections of M*N words in
SECTIONS_OUT = {OP_RELU: 1, OP_MASK: 1, OP_SGD: 2}  # and out


def is_vector(header_word: int) -> bool:
    """Whether a header word selects an element-wise operation (its K field is 0)."""
    return (int(header_word) >> 2 * DIM_BITS) & MAX_DIM == 0


def header_status(spec: FpmacArraySpec, header_word: int) -> int:
    """The status word any header gets: a GEMM's (:class:`Header`) or, with K = 0, an element-wise one's."""
    if is_vector(header_word):
        return VectorHeader.parse(header_word).status(spec)
    return Header.parse(header_word).status(spec)


@keyword_record
class VectorHeader:
    """An element-wise operation's header: the op, the M x N element tile and the fraction width."""

    op: int
    m: int
    n: int
    fb: int

    def word(self) -> int:
        for name, value, limit in (("op", self.op, 7), ("m", self.m, MAX_DIM), ("n", self.n, MAX_DIM),
                                   ("fb", self.fb, (1 << FB_FIELD_BITS) - 1)):
            if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= limit:
                raise ValueError(f"header field {name}={value!r} does not fit [0, {limit}]")
        return self.m | self.n << DIM_BITS | self.fb << FB_SHIFT | self.op << OP_SHIFT

    @classmethod
    def parse(cls, word: int) -> VectorHeader:
        word = int(word)
        if not is_vector(word):
            raise ValueError(f"header {word:#010x} has K > 0: a GEMM, not an element-wise operation")
        return cls(op=word >> OP_SHIFT & 7, m=word & MAX_DIM, n=(word >> DIM_BITS) & MAX_DIM,
                   fb=(word >> FB_SHIFT) & ((1 << FB_FIELD_BITS) - 1))

    def status(self, spec: FpmacArraySpec) -> int:
        """0 accepted; 1 an unknown op, a zero dimension or fb = 0; 2 a dimension above its buffer or fb above
        max_fb."""
        if self.op not in SCALARS or 0 in (self.m, self.n, self.fb):
            return STATUS_BAD_HEADER
        if self.m > spec.max_m or self.n > spec.max_n or self.fb > spec.max_fb:
            return STATUS_TOO_LARGE
        return STATUS_OK

    @property
    def elements(self) -> int:
        return self.m * self.n

    @property
    def input_words(self) -> int:
        """Words after an accepted header: the scalars, then the element sections."""
        return SCALARS[self.op] + SECTIONS_IN[self.op] * self.elements

    @property
    def output_words(self) -> int:
        """Words after the status word."""
        return SECTIONS_OUT[self.op] * self.elements

    @property
    def macs(self) -> int:
        """FP-MACs the operation runs: three an element for SGD, none for the selections."""
        return 3 * self.elements if self.op == OP_SGD else 0


def _codes(spec: FpmacArraySpec, fb: int, words) -> np.ndarray:
    words = np.asarray(words)
    if words.size and (not np.issubdtype(words.dtype, np.integer) or words.min() < 0):
        raise ValueError("operands must hold non-negative integer container words")
    words = words.astype(np.uint64)
    if np.any(words >> np.uint64(spec.width)):
        raise ValueError(f"operands have bits above the {spec.width}-bit container")
    return from_container(words, fb, max_fb=spec.max_fb)


def _check_fb(spec: FpmacArraySpec, fb) -> int:
    if isinstance(fb, bool) or not isinstance(fb, (int, np.integer)) or not 1 <= int(fb) <= spec.max_fb:
        raise ValueError(f"fb={fb!r} must be an int in [1, max_fb={spec.max_fb}]")
    return int(fb)


def positive(spec: FpmacArraySpec, words, *, fb: int) -> np.ndarray:
    """Where a container word's value at ``fb`` is above zero: sign bit 0 and a code that is not +0."""
    codes = _codes(spec, _check_fb(spec, fb), words)
    return (codes >> np.uint64(spec.exp_bits + fb) == 0) & (codes != 0)


def relu(spec: FpmacArraySpec, x, *, fb: int) -> np.ndarray:
    """``x`` where it is positive, else +0, as container words (bits below ``fb`` cleared)."""
    return mask(spec, x, x, fb=fb)


def mask(spec: FpmacArraySpec, x, z, *, fb: int) -> np.ndarray:
    """``x`` where ``z`` is positive, else +0, as container words (bits below ``fb`` cleared)."""
    fb = _check_fb(spec, fb)
    x_codes = _codes(spec, fb, x)
    if np.shape(z) != x_codes.shape:
        raise ValueError(f"the mask's shape {np.shape(z)} differs from the operand's {x_codes.shape}")
    kept = np.where(positive(spec, z, fb=fb), x_codes, np.uint64(0))
    return to_container(kept, fb, max_fb=spec.max_fb)


def sgd(spec: FpmacArraySpec, scalars, g, p, v, *, fb: int) -> tuple[np.ndarray, np.ndarray]:
    """Momentum SGD with weight decay on container words: ``(p', v')``.

    ``scalars`` = (wd, mu, step) container words, ``step`` being minus the
    learning rate; ``g``, ``p`` and ``v`` are the gradient, the parameter and
    its velocity, one shape. Per element: ``g' = fp_mac(wd, p, g)``,
    ``v' = fp_mac(mu, v, g')``, ``p' = fp_mac(step, v', p)`` in format
    ``(exp_bits, fb)`` with the spec's rounding.
    """
    fb = _check_fb(spec, fb)
    wd, mu, step = (_codes(spec, fb, np.uint64(s)) for s in np.asarray(scalars, dtype=np.uint64).reshape(3))
    g, p, v = (_codes(spec, fb, operand) for operand in (g, p, v))
    if not g.shape == p.shape == v.shape:
        raise ValueError(f"g {g.shape}, p {p.shape} and v {v.shape} must have one shape")
    fmt = FloatFormat(exp_bits=spec.exp_bits, frac_bits=fb, rounding=spec.rounding)
    decayed = fp_mac(wd, p, g, fmt)
    velocity = fp_mac(mu, v, decayed, fmt)
    param = fp_mac(step, velocity, p, fmt)
    return to_container(param, fb, max_fb=spec.max_fb), to_container(velocity, fb, max_fb=spec.max_fb)


def vector_words(spec: FpmacArraySpec, op: str, sections, *, fb: int, scalars=None,
                 high_noise: np.ndarray | None = None) -> np.ndarray:
    """Input words of one element-wise transaction: header, scalars (SGD), then each M x N section row-major.

    ``sections``: the operands as (M, N) arrays in the op's order (X; X, Z; G, P, V). ``high_noise`` (one value
    per word after the header) fills the word bits above the container, which the PE ignores.
    """
    if op not in OPS:
        raise ValueError(f"op {op!r}: one of {', '.join(OPS)}")
    code = OPS[op]
    arrays = [np.asarray(s) for s in sections]
    if len(arrays) != SECTIONS_IN[code] or any(a.ndim != 2 or a.shape != arrays[0].shape for a in arrays):
        raise ValueError(f"{op} takes {SECTIONS_IN[code]} sections of one (M, N) shape")
    header = VectorHeader(op=code, m=arrays[0].shape[0], n=arrays[0].shape[1], fb=fb)
    if header.status(spec) != STATUS_OK:
        raise ValueError(f"{op} on {arrays[0].shape} at fb={fb} does not fit {spec}")
    lead = np.asarray(scalars if SCALARS[code] else [], dtype=np.uint64).reshape(-1)
    if lead.size != SCALARS[code]:
        raise ValueError(f"{op} takes {SCALARS[code]} scalar words, got {lead.size}")
    operands = np.concatenate([lead] + [a.astype(np.uint64).reshape(-1) for a in arrays])
    if np.any(operands >> np.uint64(spec.width)):
        raise ValueError(f"operands have bits above the {spec.width}-bit container")
    if high_noise is not None and spec.width < 32:
        operands = operands | (np.asarray(high_noise, dtype=np.uint64) << np.uint64(spec.width)) & np.uint64(
            0xFFFF_FFFF)
    return np.concatenate([np.array([header.word()], dtype=np.uint64), operands])


def vector_output(spec: FpmacArraySpec, op: str, sections, *, fb: int, scalars=None) -> np.ndarray:
    """Output words of an accepted element-wise transaction: status 0, then its result sections row-major."""
    if op == "relu":
        results = [relu(spec, sections[0], fb=fb)]
    elif op == "mask":
        results = [mask(spec, sections[0], sections[1], fb=fb)]
    elif op == "sgd":
        results = list(sgd(spec, scalars, *sections, fb=fb))
    else:
        raise ValueError(f"op {op!r}: one of {', '.join(OPS)}")
    return np.concatenate([np.array([STATUS_OK], dtype=np.uint64)] + [r.reshape(-1) for r in results])
