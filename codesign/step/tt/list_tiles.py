"""How a TT layer step's tensors lie in its call lists' arena, and how one contraction is cut into calls.

A tensor is packed rows of 16-bit operand slots (:class:`Rows`), read by a PE through 2-D or 3-D blocks; a
contraction's results are written where :class:`Out` says, rounded by the shell's stage to the next call's codes
or raw. A contraction longer than a PE's buffers is cut into accumulating chains whose sums the shell keeps exact
(:func:`contraction_calls`). :mod:`codesign.step.tt.step_lists` lays out a whole layer step with these.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Callable, Dict, List, Sequence, Tuple

from codesign.contracts.calls import ACC_DEPTH, RAW, RECORD_WORDS, ArenaLayout, Block, Call
from codesign.numerics.round_stage import RoundStageConfig
from codesign.pe.tt.contract import chunk_words, header_dims, header_word
from codesign.pe.tt.cycles import transaction_cycles
from codesign.step.tt.schedule import max_terms

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

    def block(self, i: Tuple[int, int], j: Tuple[int, int], k: Tuple[int, int], lanes: int, *,
              j_outer: bool = False) -> Block:
        """Rows ``i x j`` (planes ``i``, rows ``j``; with ``j_outer`` planes ``j``, rows ``i``) of the values ``k``
        (whole chunks from ``k[0]``). Rows back to back in the arena are one run of the shell's reads
        (:class:`~codesign.contracts.calls.Block`), so the order that walks the shorter step inner reads a tile
        in the fewest runs: PE1 built with ``b_order="jl"`` takes its ``B`` this way (``i`` is ``l``)."""
        if j_outer:
            return replace(self, i_step=self.j_step, j_step=self.i_step).block(j, i, k, lanes)
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


def rows_part(item: Contraction, start: int, stop: int, name: str) -> Contraction:
    """Rows ``start`` to ``stop`` of ``item``'s ``I`` as a contraction of its own, ``name``: its ``A`` rows and its
    results from there on. A result is one ``I`` row's, so the part's calls sum each of its results' products in
    the whole's order: the same bits, saturation included."""
    i_all, _, k_all, l_all = item.dims
    if not 0 <= start < stop <= i_all:
        raise ValueError(f"{item.name}: rows {start} to {stop} of its {i_all}")
    values, rv = start * l_all * (k_all if item.pe == "tt2" else 1), item.out.rounding.row_values
    if values % rv:
        raise ValueError(f"{item.name}: row {start}'s results do not start a row of {rv} values")
    return replace(item, name=name, dims=(stop - start, *item.dims[1:]),
                   a=replace(item.a, offset=item.a.offset + 4 * item.a.words * start * item.a.i_step),
                   out=replace(item.out, offset=item.out.offset + 4 * item.out.row_words * (values // rv)))


def list_products(calls: Sequence[Call]) -> int:
    """Products of TT calls (``I J K L`` of each header)."""
    return sum(math.prod(header_dims(call.header, 4)[0]) for call in calls)


LATER = " of the later samples"  # the name of a contraction's part for the batch's later samples


def split_last_forwards(made: Dict[str, Tuple[Contraction, Tuple[Call, ...]]], d: int, batch: int,
                        calls_of: Callable[[Contraction], Tuple[Call, ...]], least: int,
                        cycles: Callable[[Contraction], int]) -> int:
    """Where a layer's last two forward contractions (PE2's, then PE1's, each a phase of its own) end sooner cut at
    one sample, so that PE1's last forward of the first samples runs beside PE2's of the later ones (phases: PE2's
    first part; PE1's first part beside PE2's later one; PE1's later part), the cut that ends them soonest by the
    parts' ``cycles`` (their busiest copy's, whose result tiles may not share evenly): half the batch, or about
    ``B f / (f + g)`` of ``B`` samples (``f`` PE2's cycles, ``g`` PE1's), which balances the middle phase.
    ``made`` takes the parts, the first under the whole's name, the later under it and :data:`LATER`. Returns the
    first part's samples; 0 (nothing cut) where the batch has one sample, the last forward is short of ``least``
    products (the list starts would cost more), no cut ends sooner than the whole or none starts a row."""
    if batch < 2 or list_products(made["forward last"][1]) < least:
        return 0
    items = [made[name][0] for name in (f"forward {d - 2}", "forward last")]
    f, g = (cycles(item) for item in items)
    balanced = round(batch * f / (f + g))
    best, chosen = f + g, None  # the whole contractions, one after the other
    for first in sorted({batch // 2, *range(balanced - 2, balanced + 3)} & set(range(1, batch))):
        try:
            parts = [(rows_part(item, 0, cut, item.name), rows_part(item, cut, item.dims[0], item.name + LATER))
                     for item in items for cut in [first * (item.dims[0] // batch)]]  # I is the batch's rows
        except ValueError:
            continue
        (fa, fb), (ga, gb) = ((cycles(a), cycles(b)) for a, b in parts)
        if fa + max(fb, ga) + gb < best:
            best, chosen = fa + max(fb, ga) + gb, (first, parts)
    if chosen is None:
        return 0
    made.update((piece.name, (piece, calls_of(piece))) for pair in chosen[1] for piece in pair)
    return chosen[0]


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


def is_chained(pe: str, dims: Tuple[int, int, int, int], spec, bits: Tuple[int, int], name: str) -> bool:
    """Whether a contraction's sums span calls (an accumulating chain per result tile)."""
    j, k = _summed(pe, dims, spec, bits, name)
    return j < dims[1] or k < dims[2]


def call_tiles(item: Contraction, spec, pieces: int = 1, cut_l: bool = False, cut_k: bool = False
               ) -> Tuple[int, int, int, int]:
    """Tile lengths ``(I, J, K, L)`` of one call: the summed tiles (:func:`_summed`), ``K`` (PE2) and ``L`` in
    whole result rows within the buffers, the results of an accumulating call within the shell's buffer, and
    ``I`` cut in at least ``pieces`` tiles where it can be (so that copies of a PE can share the result tiles), or
    with ``cut_l`` ``L`` instead (:func:`l_cut`), with ``cut_k`` PE2's ``K`` (:func:`k_cut`)."""
    i_all, j_all, k_all, l_all = item.dims
    lanes, rv = spec.lanes, item.out.rounding.row_values
    j, k = _summed(item.pe, item.dims, spec, item.bits, item.name)
    if item.pe == "tt2":
        k_unit = lanes * rv // math.gcd(lanes, rv)  # whole chunks and whole result rows
        k = _fit(k_all, min(spec.max_k, MAX_ROWS), k_unit, f"{item.name}: K")
        if cut_k:
            k = min(k, -(-k_all // pieces // k_unit) * k_unit)
    k_rows = k if item.pe == "tt2" else 1
    l_unit = rv // math.gcd(rv, k_all if item.pe == "tt2" else 1) if k == k_all or item.pe == "tt1" else 1
    if not item.out.rounding.enable:  # raw results: an L tile's words are whole stream words
        parts = spec.stream_bits // 32
        words = item.out.row_words * (k_all if item.pe == "tt2" and k == k_all else 1)
        unit = parts // math.gcd(parts, words)
        l_unit = l_unit * unit // math.gcd(l_unit, unit)  # their lcm (math.lcm: Python 3.9, the board has 3.8)
    l = _fit(l_all, min(spec.max_l, MAX_ROWS), l_unit, f"{item.name}: L")
    if cut_l:
        l = min(l, -(-l_all // pieces // l_unit) * l_unit)
    chained = j < j_all or (item.pe == "tt1" and k < k_all)
    i = MAX_ROWS if not chained else min(MAX_ROWS, ACC_DEPTH // (l * k_rows))
    if i < 1:
        raise ValueError(f"{item.name}: {l} x {k_rows} results of one call exceed the {ACC_DEPTH}-sum buffer")
    return (i if cut_l or cut_k else min(i, -(-i_all // pieces))), j, k, l


def _chains(item: Contraction, spec, pieces: int, cut_l: bool, cut_k: bool = False):
    """Each result tile of a contraction: its ``I``, ``L`` and (PE2) ``K`` result ranges, and the ``(J, K)``
    ranges its calls sum in turn."""
    i_all, j_all, k_all, l_all = item.dims
    ti, tj, tk, tl = call_tiles(item, spec, pieces, cut_l, cut_k)
    for i in _ranges(i_all, ti):
        for l in _ranges(l_all, tl):
            k_out = _ranges(k_all, tk) if item.pe == "tt2" else [(0, 1)]
            for k_res in k_out:
                if item.pe == "tt2":
                    parts = [(j, k_res) for j in _ranges(j_all, tj)]
                else:
                    parts = [(j, k) for j in _ranges(j_all, tj) for k in _ranges(k_all, tk)]
                yield i, l, k_res, parts


def l_cut(item: Contraction, spec, pieces: int) -> bool:
    """Whether copies share ``item``'s result tiles cut along ``L`` rather than ``I``: where ``L`` gives
    ``pieces`` tiles, the calls' cycles (:func:`codesign.pe.tt.cycles.transaction_cycles`, each chain on the
    copy least loaded so far) end sooner, and the copies read no more operand words in all (the IPs share the
    memory's port). A PE1 call loads its ``B`` (``L`` rows) before it computes, so a core gradient of few ``I``
    rows (its ``(m, c)``) cut along ``I`` loads the same ``B`` on every copy; cut along ``L``, each copy loads its
    own part of it and reads all of ``A``. Where ``I`` has fewer tiles than ``pieces`` (a copy would idle: the
    last core's gradient, one row), ``L`` is cut where the busiest copy ends sooner even were every copy's
    operand words to pass one port a word a cycle. The pricing balances the contraction's chains alone, by
    cycles; the lists then share a phase's chains by products (:func:`codesign.step.tt.step_lists.share`), the
    same split where a phase holds one contraction a PE, as a core-gradient phase does."""
    if pieces < 2 or len(_ranges(item.dims[3], call_tiles(item, spec, pieces, cut_l=True)[3])) < pieces:
        return False
    (l_cycles, l_words), (i_cycles, i_words) = (copies_work(item, spec, pieces, cut_l=cut) for cut in (True, False))
    if len(_ranges(item.dims[0], call_tiles(item, spec, pieces, cut_l=False)[0])) < pieces:  # I leaves a copy idle
        return max(l_cycles, l_words) < max(i_cycles, i_words)  # the copies' words through one port, a word a cycle
    return l_cycles < i_cycles and l_words <= i_words


def k_cut(item: Contraction, spec, pieces: int) -> bool:
    """Whether PE2's copies share ``item``'s result tiles cut along ``K``: PE2 passes ``K`` through, so each copy
    can read its part of every ``A`` row and all of ``B``. Where ``I`` gives the copies fewer tiles than there are
    copies (the last core's gradient, one row), cut along ``L`` each copy reads all of ``A`` and fills only
    ``L / pieces`` of the PE's rows (paper 003's last core: 4 of 8); cut along ``K`` each reads ``A`` once
    between them and fills every row. ``K`` is cut where the busiest copy then ends sooner than with ``L`` (or
    ``I``) cut, every copy's operand words through one port a word a cycle."""
    if item.pe != "tt2" or pieces < 2 or not item.out.rounding.enable:  # raw results: K tiles of part beats
        return False
    try:
        tiles = call_tiles(item, spec, pieces, cut_k=True)
    except ValueError:  # no K tile of whole chunks and result rows
        return False
    if len(_ranges(item.dims[2], tiles[2])) < pieces or \
            len(_ranges(item.dims[0], call_tiles(item, spec, pieces)[0])) >= pieces:
        return False
    along_k = copies_work(item, spec, pieces, cut_k=True)
    return max(along_k) < max(copies_work(item, spec, pieces, cut_l=l_cut(item, spec, pieces)))


def cuts(item: Contraction, spec, pieces: int) -> Tuple[bool, bool]:
    """How copies share ``item``'s result tiles, as :func:`contraction_calls` takes it: ``(cut_l, cut_k)``, along
    ``K`` where :func:`k_cut` says so, else along ``L`` where :func:`l_cut` does, else along ``I``."""
    along_k = k_cut(item, spec, pieces)
    return not along_k and l_cut(item, spec, pieces), along_k


def copies_work(item: Contraction, spec, pieces: int, *, cut_l: bool = False, cut_k: bool = False,
                call_cycles: int = 0) -> Tuple[int, int]:
    """The cycles of the busiest of ``pieces`` copies (each chain of the contraction cut so on the copy least
    loaded so far; ``call_cycles`` more a call, the shell's beside the PE's), and the operand words all of them
    read."""
    load, words = [0] * pieces, 0
    for i, l, _, parts in _chains(item, spec, pieces, cut_l, cut_k):
        cycles = [transaction_cycles(spec, header_word(i[1] - i[0], j[1] - j[0], k[1] - k[0], l[1] - l[0]))
                  for j, k in parts]
        load[load.index(min(load))] += sum(c.total + call_cycles for c in cycles)
        words += sum(c.load for c in cycles)
    return max(load), words


def busiest_copy(item: Contraction, spec, pieces: int, call_cycles: int = 0) -> int:
    """:func:`copies_work`'s busiest copy of ``item`` cut among ``pieces`` copies as its calls are (:func:`cuts`)."""
    cut_l, cut_k = cuts(item, spec, pieces)
    return copies_work(item, spec, pieces, cut_l=cut_l, cut_k=cut_k, call_cycles=call_cycles)[0]


def contraction_calls(item: Contraction, spec, arena: ArenaLayout, pieces: int = 1, cut_l: bool = False,
                      cut_k: bool = False) -> List[Call]:
    """The calls of one contraction: tiles of ``I`` (at least ``pieces`` where ``I`` allows; with ``cut_l`` of
    ``L``, with ``cut_k`` of PE2's ``K`` instead), ``L`` (and PE2's ``K``), each summing its ``J`` (and PE1's
    ``K``) tiles in one accumulating chain when they are more than one."""
    lanes, b_jl = spec.lanes, item.pe == "tt1" and spec.b_jl
    calls = []
    for i, l, k_res, parts in _chains(item, spec, pieces, cut_l, cut_k):
        calls += _chain(item, i, l, k_res, parts, lanes, arena, b_jl)
    return calls


def _chain(item: Contraction, i, l, k_res, parts, lanes: int, arena: ArenaLayout, b_jl: bool = False
           ) -> List[Call]:
    """One result tile's calls: one call, or a chain holding, adding and finally draining its sums; PE1's ``B``
    ``j`` outer when its build takes it so (``b_jl``)."""
    _, _, k_all, l_all = item.dims
    calls = []
    for index, (j, k) in enumerate(parts):
        last, chained = index == len(parts) - 1, len(parts) > 1
        if item.pe == "tt2":
            segments = (item.b.block(l, (0, 1), j, lanes), item.a.block(i, j, k, lanes))
            count = (i[1] - i[0]) * (l[1] - l[0]) * (k[1] - k[0])
            out = item.out.block(i, l, k_res, l_all, k_all)
        else:
            segments = (item.b.block(l, j, k, lanes, j_outer=b_jl), item.a.block(i, j, k, lanes))
            count = (i[1] - i[0]) * (l[1] - l[0])
            out = item.out.block(i, l, (0, 1), l_all, 1)
        calls.append(Call(header=header_word(i[1] - i[0], j[1] - j[0], k[1] - k[0], l[1] - l[0]),
                          segments=segments, out=out if last else Block(), count=count,
                          record=arena.reserve(RECORD_WORDS), rounding=item.out.rounding if last else RAW,
                          acc_add=chained and index > 0, acc_hold=chained and not last))
    return calls


def chunk32(lanes: int, parts: int) -> int:
    """32-bit words of one chunk of ``lanes`` 16-bit slots on streams of ``parts`` 32-bit words (whole words)."""
    return chunk_words(lanes, SLOT_BITS, 32 * parts) * parts


def operand_rounding(shift: int, bits: int, row_values: int, lanes: int, parts: int) -> RoundStageConfig:
    """Codes for a PE operand: ``row_values`` to a row, in chunks of ``lanes`` 16-bit slots."""
    return RoundStageConfig(enable=True, shift=int(shift), bits=bits, lanes=lanes, group_words=chunk32(lanes, parts),
                            row_values=row_values, field_bits=SLOT_BITS)


def codes_rounding(shift: int, bits: int, row_values: int, parts: int) -> RoundStageConfig:
    """Codes for the host: rows of ``row_values`` 16-bit fields, packed a stream word (``parts`` 32-bit words)
    at a time, each row starting a new one."""
    return RoundStageConfig(enable=True, shift=int(shift), bits=bits, lanes=2 * parts, group_words=parts,
                            row_values=row_values, field_bits=SLOT_BITS)


def row_within(length: int, limit: int) -> int:
    """The longest row that tiles ``length`` within ``limit`` values (a code row a call writes whole)."""
    return max(d for d in range(1, min(length, limit) + 1) if length % d == 0)
