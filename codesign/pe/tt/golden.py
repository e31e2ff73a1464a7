"""Golden kernels of the TT PEs: exact NumPy integers in the order docs/tt_pe.md fixes, and their word streams.

PE1 (paper 003, Eq. (5)) contracts the last two axes of two 3-D operands,
``Z[i, l] = sum_j sum_k A[i, j, k] B[l, j, k]``. The ``lanes`` products of one
chunk ``k = c*lanes .. c*lanes + lanes - 1`` are summed exactly; the chunk
sums are then added into the accumulator with saturation, ``j`` outer, ``c``
inner. Where no partial sum saturates, the result is the plain contraction
that :func:`codesign.train.tt.ttm.tt_forward` computes, and
:func:`last_core_operands` maps a TT forward step onto PE1's operands.
"""

from __future__ import annotations

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
    saturating_scan,
)
from codesign.pe.tt.spec import Tt1Spec


def _codes(name: str, values, bits: int, ndim: int) -> np.ndarray:
    values = np.asarray(values)
    if values.ndim != ndim:
        raise ValueError(f"{name} must be {ndim}-D, got shape {values.shape}")
    if values.size and not np.issubdtype(values.dtype, np.integer):
        if not np.array_equal(values, np.round(values)):
            raise ValueError(f"{name} must hold integer codes")
    values = values.astype(np.int64)
    low, high = code_range(bits)
    if values.size and (values.min() < low or values.max() > high):
        raise ValueError(f"{name} holds codes outside the {bits}-bit range [{low}, {high}]")
    return values


def contract_last(a, b, *, lanes: int, acc_bits: int, a_bits: int = 16, b_bits: int = 16) -> np.ndarray:
    """PE1's result ``Z`` (I, L) for ``A`` (I, J, K) and ``B`` (L, J, K), saturating to ``acc_bits`` in contract order."""
    a = _codes("a", a, a_bits, 3)
    b = _codes("b", b, b_bits, 3)
    if a.shape[1:] != b.shape[1:]:
        raise ValueError(f"b must share the last two dimensions of a {a.shape[1:]}, got {b.shape[1:]}")
    i, j, _ = a.shape
    ap, bp = pad_last(a, lanes), pad_last(b, lanes)
    kc = ap.shape[2] // lanes
    terms = np.einsum("ijcv,ljcv->iljc", ap.reshape(i, j, kc, lanes), bp.reshape(b.shape[0], j, kc, lanes))
    return saturating_scan(terms.reshape(i, b.shape[0], j * kc), acc_bits)


# ---------------------------------------------------------------------------- PE1 word stream
def pe1_status(spec: Tt1Spec, header: int) -> int:
    """Status of a PE1 header: dims (I, J, K, L), each 1..255, J, K, L within the build's buffers."""
    (i, j, k, l), _ = header_dims(header, 4)
    if 0 in (i, j, k, l):
        return STATUS_BAD_HEADER
    if j > spec.max_j or k > spec.max_k or l > spec.max_l:
        return STATUS_TOO_LARGE
    return STATUS_OK


def pe1_words(spec: Tt1Spec, a, b, rng: np.random.Generator | None = None) -> np.ndarray:
    """Input words of one PE1 transaction: header, ``B`` rows (l, j), then ``A`` rows (i, j); see docs/tt_pe.md."""
    a = _codes("a", a, spec.a_bits, 3)
    b = _codes("b", b, spec.b_bits, 3)
    if a.shape[1:] != b.shape[1:]:
        raise ValueError(f"b must share the last two dimensions of a {a.shape[1:]}, got {b.shape[1:]}")
    header = header_word(a.shape[0], a.shape[1], a.shape[2], b.shape[0])
    if pe1_status(spec, header) != STATUS_OK:
        raise ValueError(f"a {a.shape} and b {b.shape} do not fit {spec}")
    return np.concatenate([np.array([header], dtype=np.uint64), pack_rows(b, spec.lanes, spec.b_bits, rng),
                           pack_rows(a, spec.lanes, spec.a_bits, rng)])


def pe1_output(spec: Tt1Spec, a, b) -> np.ndarray:
    """Output words: status 0, then ``Z[i, l]`` row-major, sign-extended to 32 bits."""
    z = contract_last(a, b, lanes=spec.lanes, acc_bits=spec.acc_bits, a_bits=spec.a_bits, b_bits=spec.b_bits)
    return np.concatenate([np.array([STATUS_OK], dtype=np.uint64), result_words(z)])


def refused(status: int) -> np.ndarray:
    """Output of a refused header: the status word alone."""
    return np.array([status], dtype=np.uint64)


# ---------------------------------------------------------------------------- TT mapping
def last_core_operands(state, core) -> tuple[np.ndarray, np.ndarray]:
    """PE1 operands of the last forward contraction of a TT layer (paper 003, Eq. (10)).

    ``state`` is what enters it in :func:`codesign.train.tt.ttm.tt_forward`,
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
