"""A TT layer's whole training step as call lists: forward and backward on PE1 and PE2, data in place.

Paper 003 keeps forward and backward propagation on the PL and leaves its
ARM the update. Here is one layer's step as the shell runs it
(``docs/accelerator.md``, "Call lists"), every contraction of the direct
core-gradient route on a PE, every intermediate tensor rounded on the PE at
its *tracked* scale (:mod:`codesign.step.tt.scale_book`: known before the
step) and written where the next contraction reads it. The host writes the
input codes, the cores in the layouts the PEs read them, and the output
gradient; it reads back the layer output and the input gradient (raw
accumulators), the core gradients (codes) and every call's record, whose
sums of |acc| move the tracked scales on.

The layouts, batch first (core ``k`` is ``(a, m, n, c)``, ``P_k`` the
output modes before it, ``R_k`` the input modes after it):

* state ``S_k`` entering core ``k``: rows ``((b, p), (a, n))`` of ``R_k``
  values (the last state, ``k = d - 1``, rows ``(b, p)`` of ``a n``
  values); the forward contraction ``k`` on PE2 writes ``S_{k+1}``;
* gradient ``g_k`` of contraction ``k``'s result: rows ``((b, p), (m, c))``
  of ``R_k`` values, written by the input-gradient contraction of core
  ``k + 1`` (of the last core: PE1 on the output gradient);
* core gradient ``k < d - 1``: PE1 sums ``g_k`` and ``S_k`` over the batch
  and ``P_k`` rows and the ``R_k`` values of a row; both operands are read
  *transposed* through interleaved 3-D blocks (a plane per output row).
  The last core's gradient is PE2 over ``S_{d-1}`` and the transposed
  output gradient the host writes.

A contraction longer than a PE's buffers is cut into accumulating calls
(:class:`~codesign.contracts.calls.Call` ``acc_add``/``acc_hold``) whose sums
the shell keeps exact and rounds once. Both PEs must read 16-bit slots
(``a_bits = b_bits = 16``: a state feeds PE2 as ``A`` and PE1 as ``B``) with
the same lanes; a DSP multiplies 16 x 16 bits as cheaply as 16 x 4.

:func:`step_lists` builds the arena and the lists (a shell runs them:
:mod:`codesign.loops.tt_lists`); :func:`finish` is the host's part, which a
board runs too: decode the outputs and move the tracked scales on.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Callable, Dict, List, Sequence, Tuple

import numpy as np

from codesign.contracts.calls import ACC_DEPTH, RAW, RECORD, RECORD_WORDS, ArenaLayout, Block, Call, check_list
from codesign.numerics.round_stage import GROUP_WORDS_RANGE, RoundStageConfig
from codesign.pe.tt.contract import chunk_words, header_word, pack_rows, row_words
from codesign.pe.tt.spec import Tt1Spec, Tt2Spec
from codesign.step.tt.layer_state import TtLayerState
from codesign.step.tt.rounding import frac_of_values, quantize_values, to_values
from codesign.step.tt.schedule import max_terms
from codesign.step.tt.scale_book import ScaleBook
from codesign.step.tt.step import StepResult

SLOT_BITS = 16  # the operand slots both PEs read (states as 8-bit codes in 16-bit slots)
MAX_ROWS = 255  # I of one transaction (the header's 8 bits)


@dataclass(frozen=True)
class Rows:
    """A tensor in the arena as packed rows of ``values`` values (``words`` 32-bit words each, in chunks of
    ``chunk`` words): row ``(i, j)`` at byte ``offset + 4 * words * (i * i_step + j * j_step)``; a reader picks
    ``i`` and ``j`` by its strides."""

    offset: int
    values: int
    words: int
    i_step: int
    j_step: int
    chunk: int

    def block(self, i: Tuple[int, int], j: Tuple[int, int], k: Tuple[int, int], lanes: int) -> Block:
        """Rows ``i x j`` (planes ``i``, rows ``j``) of the values ``k`` (whole chunks from ``k[0]``)."""
        return Block(offset=self.offset + 4 * (self.words * (i[0] * self.i_step + j[0] * self.j_step)
                                               + k[0] // lanes * self.chunk),
                     words=-(-(k[1] - k[0]) // lanes) * self.chunk, rows=j[1] - j[0],
                     stride=4 * self.words * self.j_step, planes=i[1] - i[0], plane_stride=4 * self.words * self.i_step)


@dataclass(frozen=True)
class Out:
    """Where a contraction's results lie: in ``(i, l, k)`` order, rows of ``rounding.row_values`` values of
    ``row_words`` words each from byte ``offset`` (raw results: a value a row, 1 word, or 2 when drained)."""

    offset: int
    rounding: RoundStageConfig
    row_words: int

    def block(self, i: Tuple[int, int], l: Tuple[int, int], k: Tuple[int, int], l_all: int, k_all: int) -> Block:
        rv, rw = self.rounding.row_values, self.row_words
        if k == (0, k_all):  # a run over l per i
            start, run = l[0] * k_all, (l[1] - l[0]) * k_all
            if start % rv or run % rv or (l_all * k_all) % rv:
                raise ValueError(f"rows of {rv} values do not tile l {l} x k {k_all}")
            return Block(offset=self.offset + 4 * rw * ((i[0] * l_all * k_all + start) // rv), words=rw * run // rv,
                         rows=i[1] - i[0], stride=4 * rw * l_all * k_all // rv)
        if k_all % rv or k[0] % rv or (k[1] - k[0]) % rv:
            raise ValueError(f"rows of {rv} values do not tile k {k} of {k_all}")
        return Block(offset=self.offset + 4 * rw * (((i[0] * l_all + l[0]) * k_all + k[0]) // rv),
                     words=rw * (k[1] - k[0]) // rv, rows=l[1] - l[0], stride=4 * rw * k_all // rv,
                     planes=i[1] - i[0], plane_stride=4 * rw * l_all * k_all // rv)


@dataclass(frozen=True)
class Contraction:
    """One contraction of the step: ``pe`` ("tt1": ``Z[i,l] = sum_jk A B``; "tt2": ``Z[i,l,k] = sum_j A B``),
    its ``dims`` ``(I, J, K, L)``, operands and results; ``stat``: the tracker its results' sums move
    (``(name, index)``, or None); ``bits``: the widths of the codes in ``A`` and ``B`` (which bound a sum)."""

    name: str
    pe: str
    dims: Tuple[int, int, int, int]
    a: Rows
    b: Rows
    out: Out
    stat: Tuple[str, int] | None
    bits: Tuple[int, int]


def _ranges(length: int, step: int) -> List[Tuple[int, int]]:
    return [(start, min(start + step, length)) for start in range(0, length, step)]


def _fit(length: int, limit: int, unit: int, name: str) -> int:
    """The longest tile of ``length`` within ``limit`` made of whole ``unit``s (all of it when it fits)."""
    if length <= limit:
        return length
    step = limit // unit * unit
    if step == 0:
        raise ValueError(f"{name}: tiles of {unit} exceed the limit {limit}")
    return step


def _summed(pe: str, dims: Tuple[int, int, int, int], spec, bits: Tuple[int, int], name: str) -> Tuple[int, int]:
    """The summed tiles of one call, ``(J, K)`` on PE1 and ``(J, all of K)`` on PE2: within the buffers and the
    header's 255, ``J`` (PE2) and ``K`` (PE1) in whole chunks (operand rows are cut at chunk boundaries), and
    no more products than an accumulator of ``acc_bits`` sums without saturating whatever the codes
    (:func:`codesign.step.tt.schedule.max_terms`): a call's sum is exact, and a chain adds exact sums."""
    _, j_all, k_all, _ = dims
    terms = max_terms(spec.acc_bits, *bits)
    if pe == "tt2":
        return _fit(j_all, min(spec.max_j, MAX_ROWS, terms), spec.lanes, f"{name}: J"), k_all
    k = _fit(k_all, min(spec.max_k, MAX_ROWS, terms), spec.lanes, f"{name}: K")
    return min(j_all, spec.max_j, MAX_ROWS, terms // k), k


def _chained(pe: str, dims: Tuple[int, int, int, int], spec, bits: Tuple[int, int], name: str) -> bool:
    """Whether a contraction's sums span calls (an accumulating chain per result tile)."""
    j, k = _summed(pe, dims, spec, bits, name)
    return j < dims[1] or k < dims[2]


def _tiles(item: Contraction, spec) -> Tuple[int, int, int, int]:
    """Tile lengths ``(I, J, K, L)`` of one call: the summed tiles (:func:`_summed`), ``K`` (PE2) and ``L`` in
    whole result rows within the buffers, and the results of an accumulating call within the shell's buffer."""
    i_all, j_all, k_all, l_all = item.dims
    lanes, rv = spec.lanes, item.out.rounding.row_values
    j, k = _summed(item.pe, item.dims, spec, item.bits, item.name)
    if item.pe == "tt2":
        k = _fit(k_all, min(spec.max_k, MAX_ROWS), lanes * rv // math.gcd(lanes, rv), f"{item.name}: K")
    k_rows = k if item.pe == "tt2" else 1
    l_unit = rv // math.gcd(rv, k_all if item.pe == "tt2" else 1) if k == k_all or item.pe == "tt1" else 1
    if not item.out.rounding.enable:  # raw results: an L tile's words are whole stream words
        parts = spec.stream_bits // 32
        words = item.out.row_words * (k_all if item.pe == "tt2" and k == k_all else 1)
        l_unit = math.lcm(l_unit, parts // math.gcd(parts, words))
    l = _fit(l_all, min(spec.max_l, MAX_ROWS), l_unit, f"{item.name}: L")
    chained = j < j_all or (item.pe == "tt1" and k < k_all)
    i = MAX_ROWS if not chained else min(MAX_ROWS, ACC_DEPTH // (l * k_rows))
    if i < 1:
        raise ValueError(f"{item.name}: {l} x {k_rows} results of one call exceed the {ACC_DEPTH}-sum buffer")
    return min(i, i_all), j, k, l


def contraction_calls(item: Contraction, spec, arena: ArenaLayout) -> List[Call]:
    """The calls of one contraction: tiles of ``I``, ``L`` (and PE2's ``K``), each summing its ``J`` (and
    PE1's ``K``) tiles in one accumulating chain when they are more than one."""
    i_all, j_all, k_all, l_all = item.dims
    ti, tj, tk, tl = _tiles(item, spec)
    lanes = spec.lanes
    calls = []
    for i in _ranges(i_all, ti):
        for l in _ranges(l_all, tl):
            k_out = _ranges(k_all, tk) if item.pe == "tt2" else [(0, 1)]
            for k_res in k_out:
                if item.pe == "tt2":
                    parts = [(j, k_res) for j in _ranges(j_all, tj)]
                else:
                    parts = [(j, k) for j in _ranges(j_all, tj) for k in _ranges(k_all, tk)]
                calls += _chain(item, i, l, k_res, parts, lanes, arena)
    return calls


def _chain(item: Contraction, i, l, k_res, parts, lanes: int, arena: ArenaLayout) -> List[Call]:
    """One result tile's calls: one call, or a chain holding, adding and finally draining its sums."""
    _, _, k_all, l_all = item.dims
    calls = []
    for index, (j, k) in enumerate(parts):
        last, chained = index == len(parts) - 1, len(parts) > 1
        if item.pe == "tt2":
            segments = (item.b.block(l, (0, 1), j, lanes), item.a.block(i, j, k, lanes))
            count = (i[1] - i[0]) * (l[1] - l[0]) * (k[1] - k[0])
            out = item.out.block(i, l, k_res, l_all, k_all)
        else:
            segments = (item.b.block(l, j, k, lanes), item.a.block(i, j, k, lanes))
            count = (i[1] - i[0]) * (l[1] - l[0])
            out = item.out.block(i, l, (0, 1), l_all, 1)
        calls.append(Call(header=header_word(i[1] - i[0], j[1] - j[0], k[1] - k[0], l[1] - l[0]),
                          segments=segments, out=out if last else Block(), count=count,
                          record=arena.reserve(RECORD_WORDS), rounding=item.out.rounding if last else RAW,
                          acc_add=chained and index > 0, acc_hold=chained and not last))
    return calls


@dataclass(frozen=True)
class Fracs:
    """Fraction bits of the step's tensors, as the tracked scales give them before the step: ``act[k]`` of
    the state entering core ``k`` (``act[0]``: the input codes), ``grad[k]`` of contraction ``k``'s result's
    gradient (``grad[d - 1]``: the output gradient codes), ``core_grad[k]`` and ``core[k]``; code widths."""

    act: Tuple[int, ...]
    grad: Tuple[int, ...]
    core_grad: Tuple[int, ...]
    core: Tuple[int, ...]
    act_bits: int
    grad_bits: int
    core_bits: int


@dataclass(frozen=True)
class StepLists:
    """The arena before the step and the step's lists, in ``phases``: each phase a list for PE1 and one for
    PE2 (either may be empty) that may run side by side; ``contractions`` with their calls, by name;
    ``outputs``: byte offsets of the layer output ``y`` (rows of ``y_width`` values, the last core's ``m`` padded
    to whole stream words) and the input gradient ``grad_x`` (raw, ``words`` 32-bit words a value); ``codes``:
    byte offset and packing of each core gradient's codes; ``parts``: 32-bit words of the PEs' stream word."""

    arena: np.ndarray
    phases: Tuple[Tuple[Tuple[str, Tuple[Call, ...]], ...], ...]
    contractions: Dict[str, Tuple[Contraction, Tuple[Call, ...]]]
    cores: Tuple[Tuple[int, ...], ...]
    batch: int
    outputs: Dict[str, Tuple[int, int]]
    codes: Dict[str, Tuple[int, RoundStageConfig]]
    inputs: Dict[str, HostInput]
    lanes: int
    parts: int
    y_width: int

    FORWARD_PHASES = 2  # the forward's lists come first (PE2's, then PE1's); the backward's follow

    @property
    def y_rows(self) -> int:
        """Rows of the layer output as the last forward contraction writes it: ``(b, p)``."""
        return self.batch * math.prod(s[1] for s in self.cores[:-1])

    def write(self, arena: np.ndarray, *, x: np.ndarray | None = None, cores: Sequence[np.ndarray] | None = None,
              gy: np.ndarray | None = None) -> List[Tuple[int, int]]:
        """The host's inputs written in place into ``arena`` (uint32 words): the input codes, the core codes in
        every layout a PE reads, the output-gradient codes (rows and transposed, before the backward lists).
        The lists stay as built: a step at the same shapes and scales reuses them. Returns the word ranges
        written, ``(start, words)``, which a board flushes."""
        given = {"x": x, "gy": gy}
        written = []
        for item in self.inputs.values():
            value = given[item.source] if isinstance(item.source, str) else (
                None if cores is None else cores[item.source])
            if value is None:
                continue
            words = pack_rows(item.layout(np.asarray(value, np.int64)), self.lanes, SLOT_BITS,
                              stream_bits=32 * self.parts).astype(np.uint32)
            arena[item.rows.offset // 4:item.rows.offset // 4 + words.size] = words
            written.append((item.rows.offset // 4, words.size))
        return written

    def read_ranges(self, *, forward: bool) -> List[Tuple[int, int]]:
        """The word ranges the host reads after the forward lists (the output) or after the backward ones (the
        input gradient, the core gradients, the records whose sums move the scales), which a board invalidates."""
        sizes = {"y": self.y_rows * self.y_width, "grad_x": self.batch * math.prod(s[2] for s in self.cores)}
        if forward:
            offset, words = self.outputs["y"]
            return [(offset // 4, words * sizes["y"])]
        ranges = [(offset // 4, words * sizes[name]) for name, (offset, words) in self.outputs.items() if name != "y"]
        ranges += [(offset // 4, cfg.words_out(math.prod(self.cores[k])))
                   for k, (offset, cfg) in enumerate(self.codes[f"core_grad {k}"] for k in range(len(self.cores)))]
        for item, calls in self.contractions.values():
            if item.stat is not None:
                ranges += [(call.record // 4, RECORD_WORDS) for call in calls if not call.acc_hold]
        return ranges


def _chunk(lanes: int, parts: int) -> int:
    """32-bit words of one chunk of ``lanes`` 16-bit slots on streams of ``parts`` 32-bit words (whole words)."""
    return chunk_words(lanes, SLOT_BITS, 32 * parts) * parts


def _rounding(shift: int, bits: int, row_values: int, lanes: int, parts: int) -> RoundStageConfig:
    """Codes for a PE operand: ``row_values`` to a row, in chunks of ``lanes`` 16-bit slots."""
    return RoundStageConfig(enable=True, shift=int(shift), bits=bits, lanes=lanes, group_words=_chunk(lanes, parts),
                            row_values=row_values, field_bits=SLOT_BITS)


def _codes_out(shift: int, bits: int, row_values: int, parts: int) -> RoundStageConfig:
    """Codes for the host: rows of ``row_values`` 16-bit fields, packed a stream word (``parts`` 32-bit words)
    at a time, each row starting a new one."""
    return RoundStageConfig(enable=True, shift=int(shift), bits=bits, lanes=2 * parts, group_words=parts,
                            row_values=row_values, field_bits=SLOT_BITS)


def _divisor_within(length: int, limit: int) -> int:
    """The longest row that tiles ``length`` within ``limit`` values (a code row a call writes whole)."""
    return max(d for d in range(1, min(length, limit) + 1) if length % d == 0)


def unpack_codes(words: np.ndarray, cfg: RoundStageConfig, count: int) -> np.ndarray:
    """``count`` codes the rounding stage wrote as rows of ``cfg.row_values`` 16-bit fields (int64)."""
    row = cfg.groups_per_row * cfg.group_words
    fields = np.ascontiguousarray(words[:count // cfg.row_values * row], dtype=np.uint32).view(np.int16)
    return fields.reshape(-1, 2 * row)[:, :cfg.row_values].reshape(-1).astype(np.int64)


def core_forward(core: np.ndarray) -> np.ndarray:
    """PE2's ``B`` of a forward contraction: ``(m c, a n)``."""
    a, m, n, c = core.shape
    return core.transpose(1, 3, 0, 2).reshape(m * c, a * n)


def core_last_forward(core: np.ndarray) -> np.ndarray:
    """PE1's ``B`` of the last forward contraction: ``(m, a n)`` (``J = 1``)."""
    a, m, n, _ = core.shape
    return core[..., 0].transpose(1, 0, 2).reshape(m, a * n)


def core_input_grad(core: np.ndarray) -> np.ndarray:
    """PE2's ``B`` of an input-gradient contraction: ``(a n, m c)``."""
    a, m, n, c = core.shape
    return core.transpose(0, 2, 1, 3).reshape(a * n, m * c)


def core_last_input_grad(core: np.ndarray) -> np.ndarray:
    """PE1's ``B`` of the last core's input gradient: ``(a n, m)`` (``J = 1``)."""
    a, m, n, _ = core.shape
    return core[..., 0].transpose(0, 2, 1).reshape(a * n, m)


@dataclass(frozen=True)
class HostInput:
    """A tensor the host writes: where (``rows``), from which input (``"x"``, ``"gy"`` or a core's index), laid
    out by ``layout`` (values -> 2-D rows)."""

    rows: Rows
    source: object
    layout: Callable[[np.ndarray], np.ndarray]


def _put(arena: ArenaLayout, values: np.ndarray, lanes: int, parts: int, i_step: int, j_step: int) -> Rows:
    """Host codes ``values`` (..., K) packed as rows of the PEs' 16-bit slots on streams of ``parts`` words."""
    k = values.shape[-1]
    return Rows(offset=arena.put(pack_rows(values.reshape(-1, k), lanes, SLOT_BITS, stream_bits=32 * parts)),
                values=k, words=row_words(k, lanes, SLOT_BITS, 32 * parts) * parts, i_step=i_step, j_step=j_step,
                chunk=_chunk(lanes, parts))


def _room(arena: ArenaLayout, rows: int, values: int, lanes: int, parts: int, i_step: int, j_step: int) -> Rows:
    words = row_words(values, lanes, SLOT_BITS, 32 * parts) * parts
    return Rows(offset=arena.reserve(rows * words), values=values, words=words, i_step=i_step, j_step=j_step,
                chunk=_chunk(lanes, parts))


def check_specs(spec1: Tt1Spec, spec2: Tt2Spec) -> int:
    """The lanes both PEs share, or an error: the step's tensors are read by both in 16-bit slots, laid out
    for one stream width."""
    for name, spec in (("PE1", spec1), ("PE2", spec2)):
        if spec.a_bits != SLOT_BITS or spec.b_bits != SLOT_BITS:
            raise ValueError(f"{name} must take 16-bit A and B operands for the step's lists (states feed PE2 as A "
                             f"and PE1 as B), got a_bits={spec.a_bits}, b_bits={spec.b_bits}")
    if spec1.lanes != spec2.lanes or spec1.stream_bits != spec2.stream_bits:
        raise ValueError(f"PE1 and PE2 read the same tensors: their lanes and stream widths must agree (lanes "
                         f"{spec1.lanes} and {spec2.lanes}, stream_bits {spec1.stream_bits} and {spec2.stream_bits})")
    if _chunk(spec1.lanes, spec1.stream_bits // 32) > GROUP_WORDS_RANGE[1]:
        raise ValueError(f"{spec1.lanes} lanes of 16-bit slots make a {spec1.lanes * SLOT_BITS}-bit chunk; the "
                         f"rounding stage packs chunks of at most {32 * GROUP_WORDS_RANGE[1]} bits (<= 8 lanes)")
    return spec1.lanes


class _Builder:
    """The arena and contractions of one layer step (:func:`step_lists`), built in order."""

    def __init__(self, cores: Sequence[np.ndarray], batch: int, fracs: Fracs, spec1: Tt1Spec, spec2: Tt2Spec
                 ) -> None:
        self.cores = [np.asarray(core, dtype=np.int64) for core in cores]
        self.lanes = check_specs(spec1, spec2)
        self.parts = spec1.stream_bits // 32
        self.d, self.batch, self.fracs = len(self.cores), batch, fracs
        self.spec = {"tt1": spec1, "tt2": spec2}
        self.arena = ArenaLayout()
        self.outputs: Dict[str, Tuple[int, int]] = {}
        self.codes_out: Dict[str, Tuple[int, RoundStageConfig]] = {}
        self.inputs: Dict[str, HostInput] = {}
        shapes = [core.shape for core in self.cores]
        self.P = [batch * math.prod(s[1] for s in shapes[:k]) for k in range(self.d)]  # B * P_k
        self.R = [math.prod(s[2] for s in shapes[k + 1:]) for k in range(self.d)]
        self.items: List[Contraction] = []

    def shape(self, k: int) -> Tuple[int, int, int, int]:
        return self.cores[k].shape

    def host(self, name: str, source, layout, value: np.ndarray, i_step: int, j_step: int) -> Rows:
        """A tensor the host writes, placed and named (:meth:`StepLists.write` writes it again later)."""
        rows = _put(self.arena, layout(value), self.lanes, self.parts, i_step, j_step)
        self.inputs[name] = HostInput(rows, source, layout)
        return rows

    def state(self, k: int, rows: Rows | None = None) -> Rows:
        """Room for ``S_k`` (or ``rows`` given), as PE2's ``A`` reads it (PE1's for the last state)."""
        a, _, n, _ = self.shape(k)
        if k == self.d - 1:
            return rows or _room(self.arena, self.P[k], a * n, self.lanes, self.parts, 1, 0)
        return rows or _room(self.arena, self.P[k] * a * n, self.R[k], self.lanes, self.parts, a * n, 1)

    def forward(self, x_codes: np.ndarray) -> List[Rows]:
        """The input codes placed, every forward contraction, the output room; returns the states."""
        a, _, n, _ = self.shape(0)
        f = self.fracs
        shape = (self.batch * a * n, self.R[0]) if self.d > 1 else (self.batch, a * n)
        states = [self.host("x", "x", lambda x, shape=shape: np.asarray(x, np.int64).reshape(shape), x_codes,
                            *((a * n, 1) if self.d > 1 else (1, 0)))]
        for k in range(self.d - 1):
            a, m, n, c = self.shape(k)
            core = self.host(f"core {k} forward", k, core_forward, self.cores[k], 1, 0)
            nxt = self.state(k + 1)
            rounding = _rounding(f.act[k + 1] - f.act[k] - f.core[k], f.act_bits, nxt.values, self.lanes, self.parts)
            self.items.append(Contraction(f"forward {k}", "tt2", (self.P[k], a * n, self.R[k], m * c), states[k],
                                          core, Out(nxt.offset, rounding, nxt.words), ("act_frac_bits", k + 1),
                                          (f.act_bits, f.core_bits)))
            states.append(nxt)
        a, m, n, _ = self.shape(self.d - 1)
        dims, bits = (self.P[-1], 1, a * n, m), (f.act_bits, f.core_bits)
        beat = self.parts // math.gcd(self.parts, 2 if _chained("tt1", dims, self.spec["tt1"], bits, "y") else 1)
        self.y_width = -(-m // beat) * beat  # y's rows padded (zero core rows) to whole stream words

        def layout(core, width=self.y_width):
            rows = core_last_forward(core)
            return np.pad(rows, ((0, width - rows.shape[0]), (0, 0)))

        core = self.host(f"core {self.d - 1} forward", self.d - 1, layout, self.cores[-1], 1, 0)
        dims = (self.P[-1], 1, a * n, self.y_width)
        self.items.append(Contraction("forward last", "tt1", dims, states[-1], core,
                                      self._raw(self.P[-1] * self.y_width, ("tt1", dims, bits), "y"), None, bits))
        return states

    def _raw(self, values: int, contraction, name: str) -> Out:
        """Room for raw results (two words a value when the contraction ``(pe, dims, bits)`` is summed across
        calls)."""
        pe, dims, bits = contraction
        words = 2 if _chained(pe, dims, self.spec[pe], bits, name) else 1
        offset = self.arena.reserve(words * values)
        self.outputs[name] = (offset, words)
        return Out(offset, RAW, words)

    def codes(self, values: int, row: int, limit: int, shift: int, name: str) -> Out:
        """Room for ``values`` codes the host reads, in rows that tile ``row`` within ``limit`` values."""
        cfg = _codes_out(shift, self.fracs.grad_bits, _divisor_within(row, limit), self.parts)
        offset = self.arena.reserve(cfg.words_out(values))
        self.codes_out[name] = (offset, cfg)
        return Out(offset, cfg, cfg.groups_per_row * cfg.group_words)

    def backward(self, gy_codes: np.ndarray, states: List[Rows], need_grad_x: bool) -> None:
        """The output gradient placed (rows, and transposed), then every backward contraction, core by core."""
        f, d = self.fracs, self.d
        a, m, n, _ = self.shape(d - 1)
        bp = self.P[d - 1]
        rows = (bp, m)  # bound as defaults: a layout is called again on later steps
        gy_rows = self.host("gy", "gy", lambda g, rows=rows: np.asarray(g, np.int64).reshape(rows), gy_codes, 1, 0)
        gy_t = self.host("gy transposed", "gy", lambda g, rows=rows: np.asarray(g, np.int64).reshape(rows).T,
                         gy_codes, 1, 0)
        last = states[d - 1]
        self.items.append(Contraction(
            f"core gradient {d - 1}", "tt2", (1, bp, a * n, m), replace(last, i_step=0, j_step=1), gy_t,
            self.codes(m * a * n, a * n, min(self.spec["tt2"].max_k, MAX_ROWS),
                       f.core_grad[d - 1] - f.grad[d - 1] - f.act[d - 1], f"core_grad {d - 1}"),
            ("core_grad_frac_bits", d - 1), (f.act_bits, f.grad_bits)))
        core = self.host(f"core {d - 1} input gradient", d - 1, core_last_input_grad, self.cores[-1], 1, 0)
        dims, bits = (bp, 1, m, a * n), (f.grad_bits, f.core_bits)
        out, stat = self._gradient_out(d - 1, dims, bits)
        self.items.append(Contraction(f"input gradient {d - 1}", "tt1", dims, gy_rows, core, out, stat, bits))
        g = self._g(out, *(self._g_steps(d - 2) if d > 1 else (1, 0)))
        for k in range(d - 2, -1, -1):
            a, m, n, c = self.shape(k)
            s_k = states[k]
            self.items.append(Contraction(
                f"core gradient {k}", "tt1", (m * c, self.P[k], self.R[k], a * n),
                replace(g, i_step=1, j_step=m * c), replace(s_k, i_step=1, j_step=a * n),
                self.codes(m * c * a * n, a * n, min(self.spec["tt1"].max_l, MAX_ROWS),
                           f.core_grad[k] - f.grad[k] - f.act[k], f"core_grad {k}"),
                ("core_grad_frac_bits", k), (f.grad_bits, f.act_bits)))
            if k == 0 and not need_grad_x:
                break
            core = self.host(f"core {k} input gradient", k, core_input_grad, self.cores[k], 1, 0)
            dims, bits = (self.P[k], m * c, self.R[k], a * n), (f.grad_bits, f.core_bits)
            out, stat = self._gradient_out(k, dims, bits)
            self.items.append(Contraction(f"input gradient {k}", "tt2", dims, g, core, out, stat, bits))
            if k:
                g = self._g(out, *self._g_steps(k - 1))

    def _g(self, out: Out, i_step: int, j_step: int) -> Rows:
        """The gradient an input-gradient contraction wrote (``out``) as the next contractions read it."""
        return Rows(out.offset, out.rounding.row_values, out.row_words, i_step, j_step, _chunk(self.lanes, self.parts))

    def _g_steps(self, k: int) -> Tuple[int, int]:
        _, m, _, c = self.shape(k)
        return m * c, 1

    def _gradient_out(self, k: int, dims, bits: Tuple[int, int]) -> Tuple[Out, Tuple[str, int] | None]:
        """Where the input-gradient contraction of core ``k`` writes: the rounded gradient ``g_{k-1}``, or for the
        first core the layer's input gradient, raw."""
        f = self.fracs
        if k == 0:
            pe = "tt1" if self.d == 1 else "tt2"
            return self._raw(self.batch * math.prod(s[2] for s in (c.shape for c in self.cores)), (pe, dims, bits),
                             "grad_x"), None
        _, m, _, c = self.shape(k - 1)
        room = _room(self.arena, self.P[k - 1] * m * c, self.R[k - 1], self.lanes, self.parts, m * c, 1)
        rounding = _rounding(f.grad[k - 1] - f.grad[k] - f.core[k], f.grad_bits, self.R[k - 1], self.lanes, self.parts)
        return Out(room.offset, rounding, room.words), ("grad_frac_bits", k - 1)


def step_lists(x_codes: np.ndarray, cores: Sequence[np.ndarray], gy_codes: np.ndarray, fracs: Fracs, *,
               spec1: Tt1Spec, spec2: Tt2Spec, need_grad_x: bool = True) -> StepLists:
    """The training step of a TT layer with core codes ``cores`` (each ``(a, m, n, c)``) on input codes
    ``x_codes`` (B, N) and output-gradient codes ``gy_codes`` (B, M), at ``fracs``, as call lists."""
    x_codes = np.asarray(x_codes)
    builder = _Builder(cores, int(x_codes.shape[0]), fracs, spec1, spec2)
    states = builder.forward(x_codes)
    builder.backward(gy_codes, states, need_grad_x)
    made = {item.name: (item, tuple(contraction_calls(item, builder.spec[item.pe], builder.arena)))
            for item in builder.items}
    d = builder.d

    def phase(pe1: Sequence[str], pe2: Sequence[str]):
        return tuple((pe, tuple(call for name in names if name in made for call in made[name][1]))
                     for pe, names in (("tt1", pe1), ("tt2", pe2)) if any(name in made for name in names))

    phases = [phase([], [f"forward {k}" for k in range(d - 1)]), phase(["forward last"], []),
              phase([f"input gradient {d - 1}"], [f"core gradient {d - 1}"])]
    phases += [phase([f"core gradient {k}"], [f"input gradient {k}"]) for k in range(d - 2, -1, -1)]
    arena = builder.arena.image()
    for listed in phases:
        for pe, calls in listed:
            try:
                check_list(calls, 4 * arena.size, 32 * builder.parts)
            except ValueError as error:
                raise ValueError(f"core shapes {[core.shape for core in builder.cores]} on {32 * builder.parts}-bit "
                                 f"streams: {pe}'s list: {error}") from None
    return StepLists(arena=arena, phases=tuple(p for p in phases if p), contractions=made,
                     cores=tuple(core.shape for core in builder.cores), batch=builder.batch,
                     outputs=dict(builder.outputs), codes=dict(builder.codes_out), inputs=dict(builder.inputs),
                     lanes=builder.lanes, parts=builder.parts, y_width=builder.y_width)


def _words(arena: np.ndarray, offset: int, values: int, words: int) -> np.ndarray:
    """``values`` raw results from byte ``offset``: 32-bit words, or 64-bit (two words) when drained."""
    flat = np.ascontiguousarray(arena[offset // 4:offset // 4 + words * values], dtype=np.uint32)
    return (flat.view(np.int32) if words == 1 else flat.view(np.int64)).astype(np.int64)


def read_outputs(lists: StepLists, arena: np.ndarray) -> Dict[str, object]:
    """What the host reads after the step: ``y`` (B, M) and ``grad_x`` (B, N) accumulators, ``core_grads`` (each
    in the core's layout, codes), and ``stats``: per tracker, the records' sum of |acc| and the results' count."""
    d, batch = len(lists.cores), lists.batch
    n_all = math.prod(s[2] for s in lists.cores)
    found: Dict[str, object] = {"y": _y(lists, arena)}
    if "grad_x" in lists.outputs:
        found["grad_x"] = _words(arena, *_at(lists, "grad_x", batch * n_all)).reshape(batch, n_all)
    grads = []
    for k, (a, m, n, c) in enumerate(lists.cores):
        offset, cfg = lists.codes[f"core_grad {k}"]
        codes = unpack_codes(arena[offset // 4:offset // 4 + cfg.words_out(a * m * n * c)], cfg, a * m * n * c)
        grads.append(codes.reshape(m, a, n)[None].transpose(2, 1, 3, 0) if k == d - 1
                     else codes.reshape(m, c, a, n).transpose(2, 0, 3, 1))
    found["core_grads"] = grads
    stats = {}
    for item, calls in lists.contractions.values():
        if item.stat is not None:
            sent = [call for call in calls if not call.acc_hold]
            total = sum(int(arena[call.record // 4 + RECORD["sum_abs_lo"]])
                        | int(arena[call.record // 4 + RECORD["sum_abs_hi"]]) << 32 for call in sent)
            stats[item.stat] = (total, sum(call.count for call in sent))
    found["stats"] = stats
    return found


def _y(lists: StepLists, arena: np.ndarray) -> np.ndarray:
    """The layer output's accumulators (B, M), its rows' padding dropped."""
    offset, words = lists.outputs["y"]
    m = lists.cores[-1][1]
    rows = _words(arena, offset, lists.y_rows * lists.y_width, words).reshape(lists.y_rows, lists.y_width)
    return rows[:, :m].reshape(lists.batch, -1)


def _at(lists: StepLists, name: str, values: int) -> Tuple[int, int, int]:
    offset, words = lists.outputs[name]
    return offset, values, words


def z_fracs(fracs: Fracs, d: int) -> Dict[Tuple[str, int], int]:
    """The fraction bits of the accumulators whose sums move each tracker."""
    out = {("act_frac_bits", k + 1): fracs.act[k] + fracs.core[k] for k in range(d - 1)}
    out.update({("grad_frac_bits", k - 1): fracs.grad[k] + fracs.core[k] for k in range(1, d)})
    out.update({("core_grad_frac_bits", k): fracs.grad[k] + fracs.act[k] for k in range(d)})
    return out


def layer_output(layer: TtLayerState, lists: StepLists, arena: np.ndarray, book: ScaleBook, fracs: Fracs
                 ) -> np.ndarray:
    """The layer output (B, M) in float64 after the forward lists: the PE's accumulators plus the bias the host
    quantises at a scale aimed at it (its tracker moves in ``book``)."""
    d = len(layer.cores)
    y = to_values(_y(lists, arena), fracs.act[d - 1] + fracs.core[d - 1])
    if layer.bias is not None:
        bias = layer.bias.astype(np.float64)
        frac_b = frac_of_values(bias, bits=layer.bias_bits, headroom_bits=layer.activation_headroom_bits,
                                current=book.trackers["bias_frac_bits"][0], update=True)
        book.trackers["bias_frac_bits"][0] = frac_b
        y = y + to_values(quantize_values(bias, frac_b, layer.bias_bits), frac_b)
    return y


def finish(layer: TtLayerState, x: np.ndarray, g_top: np.ndarray, lists: StepLists, arena: np.ndarray,
           book: ScaleBook, fracs: Fracs, y: np.ndarray | None = None) -> StepResult:
    """The host's part after the lists: the layer output (plus the bias it writes), the input gradient masked
    where the input saturated, the core and bias gradients as values, and the tracked scales moved on by the
    records' sums. ``book`` holds the scales the host aimed before the step (the input's, the output
    gradient's); the result is the step :func:`codesign.step.tt.step.pe_step` takes under the tracked rule.
    ``y``: the layer output :func:`layer_output` gave after the forward lists (else it is read again)."""
    d = len(layer.cores)
    found = read_outputs(lists, arena)
    y = layer_output(layer, lists, arena, book, fracs) if y is None else y
    widths = {"act_frac_bits": (layer.activation_bits, layer.activation_headroom_bits),
              "grad_frac_bits": (layer.grad_bits, layer.grad_headroom_bits),
              "core_grad_frac_bits": (layer.grad_bits, layer.grad_headroom_bits)}
    sources = z_fracs(fracs, d)
    for (name, index), (total, count) in sorted(found["stats"].items()):
        bits, headroom = widths[name]
        book.observe(name, index, total, count, sources[(name, index)], bits=bits, headroom_bits=headroom)
    grad_x = None
    if "grad_x" in found and not layer.is_network_input:
        low, high = -(1 << (layer.activation_bits - 1)), (1 << (layer.activation_bits - 1)) - 1
        scaled = np.ldexp(x.astype(np.float64), fracs.act[0])
        grad_x = (to_values(found["grad_x"], fracs.grad[0] + fracs.core[0]) * ((scaled >= low) & (scaled <= high))
                  ).astype(np.float32)
    bias_grad = None
    if layer.bias is not None:
        _, codes = book.round("bias_grad_frac_bits", 0, g_top.sum(axis=0), fracs.grad[d - 1], bits=layer.grad_bits,
                              headroom_bits=layer.grad_headroom_bits)
        bias_grad = to_values(codes, book.frac("bias_grad_frac_bits", 0)).astype(np.float32)
    trackers, means = book.as_tuples()
    return StepResult(y=y.astype(np.float32), grad_x=grad_x, bias_grad=bias_grad, trackers=trackers, means=means,
                      core_grads=[to_values(codes, frac).astype(np.float32)
                                  for codes, frac in zip(found["core_grads"], fracs.core_grad)])
