"""A TT layer's forward pass as call lists: every contraction on the PEs, every state left in place, rounded on the PE.

Paper 003 keeps forward propagation on the PL. Here is that pass as the
shell runs it (``docs/accelerator.md``, "Call lists"): one list for the PE2
IP (the inner contractions, Eqs. (8)-(9)) and one for the PE1 IP (the last,
Eq. (10)), over one arena holding the input codes, the cores in the PEs'
layouts, every state between contractions and the layer output.

Why it needs no host between calls: contraction ``k`` yields ``Z[i, l, q]``
with ``i = (b, p)``, ``l = (m_k, r_k)`` and ``q = (n_{k+1}, R_{k+1})`` in
that order, and the next contraction reads ``A[(b, p, m_k), (r_k, n_{k+1}),
R_{k+1}]``: the same values in the same order, cut into rows of ``R_{k+1}``
(``n_d`` before the last core). So the rounding stage, packing rows of that
length into the next PE's chunks, writes the next call's operand exactly
where it will be read. Each contraction is cut into calls over ``I``
(at most 255 rows), ``L`` (at most the PE's ``max_l``) and, on PE2, ``K``
(which PE2 passes through: whole chunks in, whole next-operand rows out); a
contraction whose ``J`` (or PE1's ``K``) exceeds the PE's buffers would need
partial sums across calls, which a list does not add, and is refused.

The shifts are the states' scales, known before the pass (the tracked
scales of paper 003, Sec. 4): ``shifts[k]`` rounds contraction ``k``'s
accumulators (fraction bits ``frac_from``) to the next state's codes
(``frac_to``), ``shift = frac_to - frac_from``. The codes are ``bits`` wide
(the activations' precision, paper 003: 8) in the slots of the reading PE's
``a_bits`` (a PE built for 16-bit gradients reads 8-bit states in 16-bit
slots: the stage's ``field_bits``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import List, Sequence, Tuple

import numpy as np

from codesign.contracts.calls import RECORD_WORDS, ArenaLayout, Block, Call
from codesign.numerics.round_stage import RoundStageConfig
from codesign.pe.tt.contract import chunk_words, header_word, pack_rows, row_words
from codesign.pe.tt.golden import inner_core_operands, last_core_operands
from codesign.pe.tt.spec import Tt1Spec, Tt2Spec

MAX_ROWS = 255  # I of one transaction (the header's 8 bits)


@dataclass(frozen=True)
class ForwardLists:
    """The arena before the pass, the PE2 list and the PE1 list, and where the layer output lands: ``out``,
    ``batch x outputs`` signed 32-bit accumulators, row-major from byte ``out``."""

    arena: np.ndarray
    pe2_calls: Tuple[Call, ...]
    pe1_calls: Tuple[Call, ...]
    out: int
    out_shape: Tuple[int, int]


def _ranges(length: int, step: int) -> List[Tuple[int, int]]:
    return [(start, min(start + step, length)) for start in range(0, length, step)]


def _fits(spec, j: int, k: int, name: str) -> None:
    if j > spec.max_j or k > spec.max_k:
        raise ValueError(f"{name}: J={j}, K={k} exceed the PE's buffers (max_j={spec.max_j}, max_k={spec.max_k}); "
                         "a call list cannot add partial sums across calls")


def _state_shapes(cores: Sequence[np.ndarray], batch: int) -> List[Tuple[int, ...]]:
    """The state entering each contraction, (B, P_k, r_{k-1}, n_k, R_k)."""
    shapes, produced = [], 1
    for k, core in enumerate(cores):
        rest = int(np.prod([c.shape[2] for c in cores[k + 1:]], dtype=np.int64))
        shapes.append((batch, produced, core.shape[0], core.shape[2], rest))
        produced *= core.shape[1]
    return shapes


def _next_row(cores: Sequence[np.ndarray], k: int) -> int:
    """Values in one row of the operand contraction ``k + 1`` reads: ``R_{k+1}``, or ``n_d`` before the last."""
    return int(np.prod([c.shape[2] for c in cores[k + 2:]], dtype=np.int64)) if k + 2 < len(cores) \
        else int(cores[-1].shape[2])


def forward_lists(x_codes: np.ndarray, cores: Sequence[np.ndarray], shifts: Sequence[int], *, spec2: Tt2Spec,
                  spec1: Tt1Spec, bits: int = 8) -> ForwardLists:
    """The forward pass of a TT layer on input codes ``x_codes`` (B, N) and core codes ``cores`` (each
    (r_{k-1}, m_k, n_k, r_k)), states rounded by ``shifts`` (one per state after the first, ``len(cores) - 1``)
    to ``bits``-wide codes (at most the PEs' ``a_bits``). 32-bit stream words."""
    cores = [np.asarray(core, dtype=np.int64) for core in cores]
    d, batch = len(cores), int(x_codes.shape[0])
    if d < 2 or len(shifts) != d - 1:
        raise ValueError(f"need >= 2 cores and one shift per inner state, got {d} cores and {len(shifts)} shifts")
    if spec1.stream_bits != 32 or spec2.stream_bits != 32:
        raise ValueError("forward_lists lays out 32-bit stream words")
    shapes = _state_shapes(cores, batch)
    arena = ArenaLayout()
    dummy = [np.zeros(shape, dtype=np.int64) for shape in shapes]
    a0, _ = inner_core_operands(np.asarray(x_codes, dtype=np.int64).reshape(shapes[0]), cores[0])
    state_at = arena.put(pack_rows(a0, spec2.lanes, spec2.a_bits))
    pe2_calls: List[Call] = []
    for k in range(d - 1):
        a_shape = inner_core_operands(dummy[k], cores[k])[0].shape
        b = inner_core_operands(dummy[k], cores[k])[1]
        b_at = arena.put(pack_rows(b, spec2.lanes, spec2.b_bits))
        next_spec = spec2 if k + 2 < d else spec1
        if bits > next_spec.a_bits:
            raise ValueError(f"{bits}-bit states do not fit the {next_spec.a_bits}-bit operands of the PE reading "
                             f"contraction {k}'s result")
        rounding = RoundStageConfig(enable=True, shift=int(shifts[k]), bits=bits, lanes=next_spec.lanes,
                                    group_words=chunk_words(next_spec.lanes, next_spec.a_bits),
                                    row_values=_next_row(cores, k), field_bits=next_spec.a_bits)
        calls, state_at = _inner_calls(arena, spec2, a_shape, b.shape, state_at, b_at, rounding,
                                       name=f"contraction {k}")
        pe2_calls += calls
    a_shape = last_core_operands(dummy[-1], cores[-1])[0].shape
    b = last_core_operands(dummy[-1], cores[-1])[1]
    b_at = arena.put(pack_rows(b, spec1.lanes, spec1.b_bits))
    pe1_calls, out = _last_calls(arena, spec1, a_shape, b.shape, state_at, b_at)
    return ForwardLists(arena=arena.image(), pe2_calls=tuple(pe2_calls), pe1_calls=tuple(pe1_calls), out=out,
                        out_shape=(batch, int(a_shape[0] // batch * b.shape[0])))


def _k_step(spec: Tt2Spec, k: int, row_values: int, name: str) -> int:
    """The K of one PE2 call: all of K when it fits the buffers, else the largest multiple of both the chunk
    (``lanes``) and the next operand's row (``row_values``) that does; PE2 sums nothing over K, so its calls
    over K ranges need no partial sums, only whole chunks in and whole rows out."""
    if k <= spec.max_k:
        return k
    unit = spec.lanes * row_values // math.gcd(spec.lanes, row_values)
    step = spec.max_k // unit * unit
    if step == 0 or k % unit:
        raise ValueError(f"{name}: K={k} exceeds max_k={spec.max_k} and cannot be cut into whole chunks of "
                         f"{spec.lanes} and rows of {row_values}")
    return step


def _inner_calls(arena: ArenaLayout, spec: Tt2Spec, a_shape, b_shape, a_at: int, b_at: int,
                 rounding: RoundStageConfig, *, name: str) -> Tuple[List[Call], int]:
    """PE2 calls of one inner contraction over I, L and K tiles, each writing its rounded rows where the next
    contraction reads them; returns the calls and the next state's offset. K is cut only when L is whole (the
    out block of a call stays two-dimensional)."""
    rows, j, k = a_shape
    l_all = b_shape[0]
    _fits(spec, j, 1, name)
    k_step = _k_step(spec, k, rounding.row_values, name)
    if k_step < k and l_all > spec.max_l:
        raise ValueError(f"{name}: K={k} > max_k={spec.max_k} and L={l_all} > max_l={spec.max_l}; cut one of "
                         "them only (raise max_l or max_k)")
    a_row, b_row = row_words(k, spec.lanes, spec.a_bits), row_words(j, spec.lanes, spec.b_bits)
    chunk = chunk_words(spec.lanes, spec.a_bits)
    per_l = rounding.words_out(k)  # the words one (i, l) pair's K results become
    per_value_row = per_l // (k // rounding.row_values)  # the words one next-operand row becomes
    out_at = arena.reserve(rows * l_all * per_l)
    calls = []
    for i0, i1 in _ranges(rows, MAX_ROWS):
        for l0, l1 in _ranges(l_all, spec.max_l):
            for k0, k1 in _ranges(k, k_step):
                a_block = Block(offset=a_at + 4 * (i0 * j * a_row + k0 // spec.lanes * chunk),
                                words=row_words(k1 - k0, spec.lanes, spec.a_bits), rows=(i1 - i0) * j,
                                stride=4 * a_row)
                out_rows = (i1 - i0) * (l1 - l0) if k_step < k else i1 - i0
                out_words = (k1 - k0) // rounding.row_values * per_value_row if k_step < k else (l1 - l0) * per_l
                calls.append(Call(
                    header=header_word(i1 - i0, j, k1 - k0, l1 - l0),
                    segments=(Block(offset=b_at + 4 * l0 * b_row, words=(l1 - l0) * b_row, rows=1), a_block),
                    out=Block(offset=out_at + 4 * ((i0 * l_all + l0) * per_l + k0 // rounding.row_values
                                                   * per_value_row),
                              words=out_words, rows=out_rows, stride=4 * (per_l if k_step < k else l_all * per_l)),
                    count=(i1 - i0) * (l1 - l0) * (k1 - k0), record=arena.reserve(RECORD_WORDS),
                    rounding=rounding))
    return calls, out_at


def _last_calls(arena: ArenaLayout, spec: Tt1Spec, a_shape, b_shape, a_at: int, b_at: int) -> Tuple[List[Call], int]:
    """PE1 calls of the last contraction over I and L tiles, the layer output raw (32-bit accumulators)."""
    rows, j, k = a_shape
    l_all = b_shape[0]
    _fits(spec, j, k, "the last contraction")
    a_row, b_row = row_words(k, spec.lanes, spec.a_bits), row_words(k, spec.lanes, spec.b_bits)
    out_at = arena.reserve(rows * l_all)
    calls = []
    for i0, i1 in _ranges(rows, MAX_ROWS):
        for l0, l1 in _ranges(l_all, spec.max_l):
            b_block = Block(offset=b_at + 4 * l0 * j * b_row, words=(l1 - l0) * j * b_row, rows=1)
            if spec.b_jl:  # the build takes B j outer: a plane per j, its rows l interleaved with the others'
                b_block = Block(offset=b_at + 4 * l0 * j * b_row, words=b_row, rows=l1 - l0, stride=4 * j * b_row,
                                planes=j, plane_stride=4 * b_row)
            calls.append(Call(
                header=header_word(i1 - i0, j, k, l1 - l0),
                segments=(b_block,
                          Block(offset=a_at + 4 * i0 * j * a_row, words=(i1 - i0) * j * a_row, rows=1)),
                out=Block(offset=out_at + 4 * (i0 * l_all + l0), words=l1 - l0, rows=i1 - i0, stride=4 * l_all),
                count=(i1 - i0) * (l1 - l0), record=arena.reserve(RECORD_WORDS)))
    return calls, out_at
