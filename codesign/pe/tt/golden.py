"""Golden kernels of the TT PEs: exact NumPy integers in the order docs/tt_pe.md fixes, and their word streams.

PE1 (paper 003, Eq. (5)) contracts the last two axes of two 3-D operands,
``Z[i, l] = sum_j sum_k A[i, j, k] B[l, j, k]``. The ``lanes`` products of one
chunk ``k = c*lanes .. c*lanes + lanes - 1`` are summed exactly; the chunk
sums are then added into the accumulator with saturation, ``j`` outer, ``c``
inner (a build with ``j_pairs`` adds the sums of rows ``2p`` and ``2p + 1``
as one where ``K`` fits half the lanes). Where no partial sum saturates, the
result is the plain contraction that the trainer's TT forward sweep
(``tt_forward``) computes, and
:func:`last_core_operands` maps a TT forward step onto PE1's operands.

PE3 is the outer product ``Z[i, j] = A[i] B[j]`` of the dense weight
gradient (paper 003, App. A.2): exact products, no accumulation.

PE2 (Eq. (6)) contracts one axis that is not the last,
``Z[i, l, k] = sum_j A[i, j, k] B[l, j]``; every product is added with
saturation, ``j`` in order, each ``(i, l, k)`` on its own.
:func:`inner_core_operands` maps an inner TT forward step onto it.
"""

from __future__ import annotations

import math
from typing import Tuple

import numpy as np

from codesign.pe.tt.contract import (
    STATUS_BAD_HEADER,
    STATUS_OK,
    STATUS_TOO_LARGE,
    code_range,
    header_dims,
    header_word,
    pack_rows,
    pad_last,
    result_words,
    row_words,
    saturating_scan,
    single_word,
    stream_header,
    unpack_rows,
    word_parts,
)
from codesign.pe.tt.spec import Tt1Spec, Tt2Spec, Tt3Spec

TtSpec = Tt1Spec | Tt2Spec | Tt3Spec


def _codes(name: str, values, bits: int, ndim: int, *, widen: bool = True) -> np.ndarray:
    """``values`` checked as ``ndim``-D signed ``bits``-wide codes (int64 with ``widen``, else as given: packing
    needs no wider type). An integer type no wider than ``bits`` holds codes only, so its range is not scanned."""
    values = np.asarray(values)
    if values.ndim != ndim:
        raise ValueError(f"{name} must be {ndim}-D, got shape {values.shape}")
    if values.size and not np.issubdtype(values.dtype, np.integer):
        if not np.array_equal(values, np.round(values)):
            raise ValueError(f"{name} must hold integer codes")
        values = values.astype(np.int64)
    if values.size and not (values.dtype.kind == "i" and values.dtype.itemsize * 8 <= bits):
        low, high = code_range(bits)
        if values.min() < low or values.max() > high:
            raise ValueError(f"{name} holds codes outside the {bits}-bit range [{low}, {high}]")
    return values.astype(np.int64, copy=False) if widen else values


def contract_last(a, b, *, lanes: int, acc_bits: int, a_bits: int = 16, b_bits: int = 16,
                  j_pairs: bool = False) -> np.ndarray:
    """PE1's result ``Z`` (I, L) for ``A`` (I, J, K) and ``B`` (L, J, K), saturating to ``acc_bits`` in contract order;
    with ``j_pairs`` and ``K <= lanes / 2`` the chunk sums of rows ``2p`` and ``2p + 1`` are added as one."""
    a = _codes("a", a, a_bits, 3)
    b = _codes("b", b, b_bits, 3)
    if a.shape[1:] != b.shape[1:]:
        raise ValueError(f"b must share the last two dimensions of a {a.shape[1:]}, got {b.shape[1:]}")
    i, j, _ = a.shape
    ap, bp = pad_last(a, lanes), pad_last(b, lanes)
    kc = ap.shape[2] // lanes
    terms = np.einsum("ijcv,ljcv->iljc", ap.reshape(i, j, kc, lanes), bp.reshape(b.shape[0], j, kc, lanes))
    terms = terms.reshape(i, b.shape[0], j * kc)
    if j_pairs and lanes > 1 and 2 * a.shape[2] <= lanes:  # one chunk a row: rows 2p and 2p + 1 in one sum
        terms = np.concatenate([terms, np.zeros_like(terms[:, :, : j % 2])], axis=2)
        terms = terms.reshape(i, b.shape[0], -(-j // 2), 2).sum(axis=3)
    return saturating_scan(terms, acc_bits)


def contract_middle(a, b, *, acc_bits: int, a_bits: int = 16, b_bits: int = 16) -> np.ndarray:
    """PE2's result ``Z`` (I, L, K) for ``A`` (I, J, K) and ``B`` (L, J): every product saturated in, ``j`` in order."""
    a = _codes("a", a, a_bits, 3)
    b = _codes("b", b, b_bits, 2)
    if a.shape[1] != b.shape[1]:
        raise ValueError(f"b must have J = {a.shape[1]} columns (the second dimension of a), got shape {b.shape}")
    return saturating_scan(np.einsum("ijk,lj->ilkj", a, b), acc_bits)


def outer(a, b, *, a_bits: int = 16, b_bits: int = 16) -> np.ndarray:
    """PE3's result ``Z`` (I, J) = ``A[i] * B[j]`` for ``A`` (I,) and ``B`` (J,): exact products, nothing summed."""
    return np.multiply.outer(_codes("a", a, a_bits, 1), _codes("b", b, b_bits, 1))


def kernel(spec: TtSpec, a, b) -> np.ndarray:
    """The contraction ``spec``'s PE computes, in contract order."""
    if isinstance(spec, Tt3Spec):
        return outer(a, b, a_bits=spec.a_bits, b_bits=spec.b_bits)
    widths = dict(acc_bits=spec.acc_bits, a_bits=spec.a_bits, b_bits=spec.b_bits)
    if isinstance(spec, Tt1Spec):
        return contract_last(a, b, lanes=spec.lanes, j_pairs=spec.j_pairs, **widths)
    return contract_middle(a, b, **widths)


# ---------------------------------------------------------------------------- word streams
def status(spec: TtSpec, header: int) -> int:
    """Status of a header (the whole first stream word): dims (I, J, K, L) (PE3: (I, J)), each 1..255, within the
    buffers, every bit above the fields 0 (PE3: bits 16 up; PE1, PE2: bits 32 up of a wider word)."""
    if isinstance(spec, Tt3Spec):
        (i, j), clean = header_dims(header, 2)
        if not clean or i == 0 or j == 0:
            return STATUS_BAD_HEADER
        return STATUS_TOO_LARGE if j > spec.max_j else STATUS_OK
    (i, j, k, l), clean = header_dims(header, 4)
    if not clean or 0 in (i, j, k, l):
        return STATUS_BAD_HEADER
    if j > spec.max_j or k > spec.max_k or l > spec.max_l:
        return STATUS_TOO_LARGE
    return STATUS_OK


def b_shape(spec: Tt1Spec | Tt2Spec, j: int, k: int, l: int) -> tuple[int, ...]:
    """Shape of the cached operand: (L, J, K) for PE1, (L, J) for PE2."""
    return (l, j, k) if isinstance(spec, Tt1Spec) else (l, j)


def _checked(spec: TtSpec, a, b, stacked: int = 0) -> tuple[int, np.ndarray, np.ndarray]:
    """The header and checked codes of a transaction (``stacked`` leading axes: that many equal transactions)."""
    if isinstance(spec, Tt3Spec):
        a = _codes("a", a, spec.a_bits, 1 + stacked, widen=False)
        b = _codes("b", b, spec.b_bits, 1 + stacked, widen=False)
        header = header_word(a.shape[-1], b.shape[-1])
    else:
        a = _codes("a", a, spec.a_bits, 3 + stacked, widen=False)
        b = _codes("b", b, spec.b_bits, len(b_shape(spec, 1, 1, 1)) + stacked, widen=False)
        i, j, k = a.shape[stacked:]
        if b.shape[stacked + 1:] != b_shape(spec, j, k, 0)[1:]:
            raise ValueError(f"b must have shape {b_shape(spec, j, k, 0)[1:]} after its first axis, "
                             f"got {b.shape[stacked:]}")
        header = header_word(i, j, k, b.shape[stacked])
    if status(spec, header) != STATUS_OK:
        raise ValueError(f"a {a.shape[stacked:]} and b {b.shape[stacked:]} do not fit {spec}")
    return header, a, b


def b_stream(spec: TtSpec, b: np.ndarray) -> np.ndarray:
    """``B`` (..., L, J, K for PE1) with its rows in the order they are streamed: PE1 built with ``b_order``
    ``"jl"`` takes them ``j`` outer, so its ``L`` and ``J`` axes swap; every other PE and order as given."""
    return np.swapaxes(b, -3, -2) if isinstance(spec, Tt1Spec) and spec.b_jl else b


def words(spec: TtSpec, a, b, rng: np.random.Generator | None = None) -> np.ndarray:
    """Input words of one transaction as 32-bit parts: header, ``B`` rows, then ``A`` rows (i, j); docs/tt_pe.md.

    ``B``'s rows run along its last axis (``k`` for PE1, ``j`` for PE2), ``A``'s along ``k``; PE1's ``B`` rows
    come ``(l, j)`` or, built with ``b_order="jl"``, ``(j, l)`` (:func:`b_stream`).
    PE3 has one row each: ``B`` (J values), then ``A`` (I values). Each
    ``spec.stream_bits``-wide word is ``spec.parts`` consecutive parts.
    """
    header, a, b = _checked(spec, a, b)
    width = spec.stream_bits
    return np.concatenate([single_word(header, width), pack_rows(b_stream(spec, b), spec.lanes, spec.b_bits, rng,
                                                                 width),
                           pack_rows(a, spec.lanes, spec.a_bits, rng, width)])


def stacked_words(spec: TtSpec, a, b) -> np.ndarray:
    """Input words of ``n`` transactions of equal shapes at once: ``a`` and ``b`` carry a leading axis of the
    ``n`` calls, and row ``t`` is ``words(spec, a[t], b[t])`` as uint32 (what a DMA buffer holds). A step cuts
    a contraction into many equal calls, and one NumPy pass for all of them leaves a host less per call than
    ``n`` passes."""
    header, a, b = _checked(spec, a, b, stacked=1)
    width, count = spec.stream_bits, a.shape[0]
    head = np.broadcast_to(single_word(header, width).astype(np.uint32), (count, word_parts(width)))
    return np.concatenate([head, pack_rows(b_stream(spec, b), spec.lanes, spec.b_bits, None, width).reshape(count, -1),
                           pack_rows(a, spec.lanes, spec.a_bits, None, width).reshape(count, -1)], axis=1)


def output(spec: TtSpec, a, b) -> np.ndarray:
    """Output words as 32-bit parts: the status word (0), then ``Z`` row-major, each result sign-extended to 32
    bits and ``spec.parts`` results to a word, the last word's unused parts 0 (``Z[i]`` follows ``A[i]``)."""
    return output_words(spec, kernel(spec, a, b))


def output_words(spec: TtSpec, z) -> np.ndarray:
    """:func:`output` of a transaction whose result ``z`` is already known."""
    return np.concatenate([single_word(STATUS_OK, spec.stream_bits), result_words(z, spec.stream_bits)])


def refused(status_word: int, stream_bits: int = 32) -> np.ndarray:
    """Output of a refused header: the status word alone (as ``stream_bits / 32`` parts)."""
    return single_word(status_word, stream_bits)


def answer(spec: TtSpec, words_in) -> np.ndarray:
    """Output words (32-bit parts) of one transaction from its input parts: the header checked as :func:`status`
    does, the operand rows read as the PE reads them (:func:`~codesign.pe.tt.contract.unpack_rows`), the
    contraction in contract order (:func:`kernel`). A golden list runner asks this of a PE for every call of a
    step; it is held equal to the plain-loop reference word for word (``tests/pe/tt/test_tt_golden_answer.py``)."""
    words_in = np.asarray(words_in, dtype=np.uint64)
    width, parts = spec.stream_bits, word_parts(spec.stream_bits)
    header = stream_header(words_in, width)
    code = status(spec, header)
    if code != STATUS_OK:
        return refused(code, width)
    if isinstance(spec, Tt3Spec):
        (i, j), _ = header_dims(header, 2)
        b_rows, b_length, a_rows, a_length = 1, j, 1, i
    else:
        (i, j, k, l), _ = header_dims(header, 4)
        b_rows, b_length = (l * j, k) if isinstance(spec, Tt1Spec) else (l, j)
        a_rows, a_length = i * j, k
    body = words_in[parts:]
    b_parts = b_rows * row_words(b_length, spec.lanes, spec.b_bits, width) * parts
    a_parts = a_rows * row_words(a_length, spec.lanes, spec.a_bits, width) * parts
    if body.size != b_parts + a_parts:
        raise ValueError(f"header {header:#x} takes {b_parts + a_parts} operand parts, the transaction has {body.size}")
    b = unpack_rows(body, b_rows, b_length, spec.lanes, spec.b_bits, width)
    a = unpack_rows(body[b_parts:], a_rows, a_length, spec.lanes, spec.a_bits, width)
    if isinstance(spec, Tt3Spec):
        a, b = a[0], b[0]
    elif isinstance(spec, Tt1Spec):
        b = b.reshape(j, l, k).swapaxes(0, 1) if spec.b_jl else b.reshape(l, j, k)
        a = a.reshape(i, j, k)
    else:
        a = a.reshape(i, j, k)
    return output_words(spec, kernel(spec, a, b))


# ---------------------------------------------------------------------------- TT mapping
def last_core_operands(state, core) -> tuple[np.ndarray, np.ndarray]:
    """PE1 operands of the last forward contraction of a TT layer (paper 003, Eq. (10)).

    ``state`` is what enters it in the trainer's ``tt_forward``,
    shape (B, P, r_prev, n, 1); ``core`` is (r_prev, m, n, 1). Returns ``A``
    (B*P, r_prev, n), a reshape without permutation, and ``B`` (m, r_prev, n),
    the core's stored layout for PE1. ``Z`` (B*P, m) reshaped to (B, P*m) is
    the layer output.
    """
    core = np.asarray(core)
    if core.ndim != 4 or min(core.shape) < 1:
        raise ValueError(f"core must be 4-D (r_prev, m, n, r_next) with every rank and mode >= 1, got {core.shape}")
    if core.shape[3] != 1:
        raise ValueError(f"core must be the last core (r_next = 1), got shape {core.shape}")
    state = np.asarray(state)
    if state.ndim != 5 or state.shape[2:] != (core.shape[0], core.shape[2], 1):
        raise ValueError(f"state must be (B, P, {core.shape[0]}, {core.shape[2]}, 1), got {state.shape}")
    a = state.reshape(state.shape[0] * state.shape[1], core.shape[0], core.shape[2])
    b = np.ascontiguousarray(core[:, :, :, 0].transpose(1, 0, 2))
    return a, b


def inner_core_operands(state, core) -> tuple[np.ndarray, np.ndarray]:
    """PE2 operands of forward contraction ``k`` of a TT layer (paper 003, Eqs. (8)-(9)).

    ``state`` (B, P, r_prev, n, R) is what enters the contraction in the
    trainer's ``tt_forward``; ``core`` is (r_prev, m, n, r).
    Returns ``A`` (B*P, r_prev*n, R), a reshape without permutation, and ``B``
    (m*r, r_prev*n), the core's stored layout for PE2. ``Z`` (B*P, m*r, R)
    reshaped to (B, P*m, r, R) is the state entering the next contraction.
    """
    core = np.asarray(core)
    if core.ndim != 4 or min(core.shape) < 1:
        raise ValueError(f"core must be 4-D (r_prev, m, n, r_next) with every rank and mode >= 1, got {core.shape}")
    state = np.asarray(state)
    if state.ndim != 5 or state.shape[2:4] != (core.shape[0], core.shape[2]):
        raise ValueError(f"state must be (B, P, {core.shape[0]}, {core.shape[2]}, R), got {state.shape}")
    r_prev, m, n, r = core.shape
    a = state.reshape(state.shape[0] * state.shape[1], r_prev * n, state.shape[4])
    b = np.ascontiguousarray(core.transpose(1, 3, 0, 2)).reshape(m * r, r_prev * n)
    return a, b


def result_shape(pe: str, a: np.ndarray, b: np.ndarray) -> Tuple[int, ...]:
    """Shape of a call's result: (I, L) for PE1, (I, L, K) for PE2, (I, J) for PE3."""
    return result_shape_of(pe, a.shape, b.shape)


def result_shape_of(pe: str, a_shape: Tuple[int, ...], b_shape: Tuple[int, ...]) -> Tuple[int, ...]:
    """:func:`result_shape` from the operands' shapes alone."""
    if pe == "tt1":
        return a_shape[0], b_shape[0]
    return (a_shape[0], b_shape[0], a_shape[2]) if pe == "tt2" else (math.prod(a_shape), math.prod(b_shape))
