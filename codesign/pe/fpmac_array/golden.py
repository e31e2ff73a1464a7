"""Golden kernel of the FP-MAC array PE: an ordered FP-MAC GEMM on container words, and its word stream.

Every output is accumulated by the FP-MAC in one fixed order,
``acc <- fp_mac(A[i, k], B[k, j], acc)`` for ``k = 0 .. K-1``, starting from
``C_in[i, j]`` or +0, in the format ``(exp_bits, fb)``; operands and results
are containers of ``1 + exp_bits + max_fb`` bits (docs/numerics.md, "Run-time
fraction width"). :func:`gemm` is vectorised over ``M`` and ``N`` and loops
over ``K``, so training models can call it on whole layers.
"""

from __future__ import annotations

import numpy as np

from codesign.numerics import FloatFormat, fp_mac
from codesign.pe.fpmac.golden import from_container, to_container
from codesign.pe.fpmac_array.contract import STATUS_OK, Header
from codesign.pe.fpmac_array.spec import FpmacArraySpec


def _containers(name: str, words, width: int, ndim: int) -> np.ndarray:
    words = np.asarray(words)
    if words.ndim != ndim:
        raise ValueError(f"{name} must be {ndim}-D, got shape {words.shape}")
    if words.size and (not np.issubdtype(words.dtype, np.integer) or words.min() < 0):
        raise ValueError(f"{name} must hold non-negative integer container words")
    words = words.astype(np.uint64)
    if np.any(words >> np.uint64(width)):
        raise ValueError(f"{name} has bits above the {width}-bit container")
    return words


def gemm(a, b, c=None, *, fb: int, exp_bits: int, max_fb: int, rounding: str = "nearest_even") -> np.ndarray:
    """``C = A . B (+ C_in)`` on container words: ``A`` (M, K), ``B`` (K, N), ``c`` (M, N) or None; uint64 (M, N).

    Each ``C[i, j]`` is ``fp_mac`` applied for ``k = 0 .. K-1`` in order,
    starting from ``c[i, j]`` (or +0), in format ``(exp_bits, fb)``. Container
    bits below ``fb`` are ignored, as the hardware ignores them; ``fb`` must
    be in ``[1, max_fb]`` (the PE refuses other values).
    """
    if isinstance(fb, bool) or not isinstance(fb, (int, np.integer)) or not 1 <= int(fb) <= max_fb:
        raise ValueError(f"fb={fb!r} must be an int in [1, max_fb={max_fb}]")
    fb = int(fb)
    fmt = FloatFormat(exp_bits=exp_bits, frac_bits=fb, rounding=rounding)
    width = 1 + exp_bits + max_fb
    a = _containers("a", a, width, 2)
    b = _containers("b", b, width, 2)
    if a.shape[1] != b.shape[0]:
        raise ValueError(f"inner dimensions differ: a {a.shape}, b {b.shape}")
    shape = (a.shape[0], b.shape[1])
    if c is None:
        acc = np.zeros(shape, dtype=np.uint64)
    else:
        c = _containers("c", c, width, 2)
        if c.shape != shape:
            raise ValueError(f"c must be {shape}, got {c.shape}")
        acc = from_container(c, fb, max_fb=max_fb)
    a_codes = from_container(a, fb, max_fb=max_fb)
    b_codes = from_container(b, fb, max_fb=max_fb)
    for k in range(a.shape[1]):
        acc = fp_mac(a_codes[:, k:k + 1], b_codes[k:k + 1, :], acc, fmt)
    return to_container(acc, fb, max_fb=max_fb)


def spec_gemm(spec: FpmacArraySpec, a, b, c=None, *, fb: int, relu: bool = False) -> np.ndarray:
    """:func:`gemm` in ``spec``'s format; with ``relu`` each result is sent as :func:`relu_words` of it."""
    out = gemm(a, b, c, fb=fb, exp_bits=spec.exp_bits, max_fb=spec.max_fb, rounding=spec.rounding)
    return relu_words(out, spec.width) if relu else out


def relu_words(words: np.ndarray, width: int) -> np.ndarray:
    """ReLU on result containers of ``width`` bits: +0 where the sign bit is set, else the word (a GEMM's results
    have their bits below fb cleared, so this is the element-wise ReLU's "x where x is positive, else +0")."""
    words = np.asarray(words, dtype=np.uint64)
    return np.where(words >> np.uint64(width - 1) & np.uint64(1), np.uint64(0), words)


def words(spec: FpmacArraySpec, a, b, c=None, *, fb: int, trans_a: bool = False, trans_b: bool = False,
          relu: bool = False, high_noise: np.ndarray | None = None) -> np.ndarray:
    """Input words of one transaction computing ``a . b (+ c)``: header, A, B, then C_in (docs/fpmac_array.md).

    ``a`` is (M, K) and ``b`` (K, N) as computed; with ``trans_a`` the stream
    carries ``a.T`` row-major, with ``trans_b`` ``b.T``. ``high_noise`` (one
    value per operand word) fills the word bits above the container, which
    the PE ignores.
    """
    a = _containers("a", a, spec.width, 2)
    b = _containers("b", b, spec.width, 2)
    header = Header(m=a.shape[0], n=b.shape[1], k=a.shape[1], fb=fb, trans_a=trans_a, trans_b=trans_b,
                    accumulate=c is not None, relu=relu)
    if header.status(spec) != STATUS_OK or a.shape[1] != b.shape[0]:
        raise ValueError(f"a {a.shape}, b {b.shape} with fb={fb} do not fit {spec}")
    sections = [(a.T if trans_a else a).reshape(-1), (b.T if trans_b else b).reshape(-1)]
    if c is not None:
        sections.append(_containers("c", c, spec.width, 2).reshape(-1))
    operands = np.concatenate(sections)
    if high_noise is not None and spec.width < 32:
        operands = operands | (np.asarray(high_noise, dtype=np.uint64) << np.uint64(spec.width)) & np.uint64(
            0xFFFF_FFFF)
    return np.concatenate([np.array([header.word()], dtype=np.uint64), operands])


def output(spec: FpmacArraySpec, a, b, c=None, *, fb: int, relu: bool = False) -> np.ndarray:
    """Output words of an accepted transaction: status 0, then C row-major (containers, zero-extended; with
    ``relu``, ReLU of each)."""
    return np.concatenate([np.array([STATUS_OK], dtype=np.uint64),
                           spec_gemm(spec, a, b, c, fb=fb, relu=relu).reshape(-1)])


def refused(spec: FpmacArraySpec, header_word: int) -> np.ndarray:
    """Output of a refused header (a GEMM's or an element-wise operation's): its status word alone."""
    from codesign.pe.fpmac_array.vector import header_status

    status = header_status(spec, header_word)
    if status == STATUS_OK:
        raise ValueError(f"header {header_word:#010x} is accepted by {spec}")
    return np.array([status], dtype=np.uint64)


def transaction_output(spec: FpmacArraySpec, words_in) -> np.ndarray:
    """Output words of any one transaction (status first), by the vectorised golden kernels.

    Why: the independent reference (:mod:`codesign.pe.fpmac_array.reference`)
    runs exact-rational MACs one by one, far too slow for a golden *training*
    step of thousands of transactions; this reads the sections the header
    announces and runs :func:`gemm` or the element-wise golden
    (:mod:`codesign.pe.fpmac_array.vector`), which the golden level holds
    equal to the reference. Bits above the container are ignored, as the PE
    ignores them.
    """
    from codesign.pe.fpmac_array import vector

    words_in = np.asarray(words_in, dtype=np.uint64).reshape(-1)
    header_word = int(words_in[0])
    status = vector.header_status(spec, header_word)
    if status != STATUS_OK:
        return np.array([status], dtype=np.uint64)
    body = words_in[1:] & np.uint64((1 << spec.width) - 1)
    if vector.is_vector(header_word):
        head = vector.VectorHeader.parse(header_word)
        if body.size != head.input_words:
            raise ValueError(f"transaction has {words_in.size} words, the header announces {1 + head.input_words}")
        lead = vector.SCALARS[head.op]
        sections = body[lead:].reshape(vector.SECTIONS_IN[head.op], head.m, head.n)
        name = {code: op for op, code in vector.OPS.items()}[head.op]
        return vector.vector_output(spec, name, list(sections), fb=head.fb, scalars=body[:lead] if lead else None)
    head = Header.parse(header_word)
    if body.size != head.input_words:
        raise ValueError(f"transaction has {words_in.size} words, the header announces {1 + head.input_words}")
    m, n, k = head.m, head.n, head.k
    a = body[:m * k].reshape((k, m) if head.trans_a else (m, k))
    b = body[m * k:m * k + k * n].reshape((n, k) if head.trans_b else (k, n))
    c = body[m * k + k * n:].reshape(m, n) if head.accumulate else None
    return output(spec, a.T if head.trans_a else a, b.T if head.trans_b else b, c, fb=head.fb, relu=head.relu)
