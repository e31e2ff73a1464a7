"""Cycle model of the TT PEs' RTL (rtl/tt), per transaction, without input gaps or output backpressure.

Counted as the stream bench counts (:mod:`codesign.hw.stream_bench`): from the
cycle the header is taken to the cycle the last result word leaves, both
included. PE3 does one thing at a time (load, compute, send), so its count
is a sum of phases; PE1 and PE2 load the next block of ``A`` while they
compute and send one (``overlap``). docs/tt_pe.md gives the same formulas.

The stream width enters through the words per chunk (``CWA``, ``CWB``, in
``spec.stream_bits``-wide words) and, for PE2, through its *beats*: PE2
sends up to ``beat`` = min(``stream_bits / 32``, ``lanes``) results of one
chunk a cycle into its output packer, which passes a word on when it is
full or the transaction ends; PE1 up to min(``stream_bits / 32``, ``rows``)
(a power of two) of one row group. PE3 sends one result a cycle, so its
drain phase counts results, not words.
"""

from __future__ import annotations

from dataclasses import dataclass

from codesign.pe.tt.contract import STATUS_OK, chunk_words, chunks, header_dims, result_stream_words, stream_header
from codesign.pe.tt.golden import status
from codesign.pe.tt.spec import Tt1Spec, Tt2Spec, Tt3Spec


@dataclass(frozen=True)
class Cycles:
    """Cycles (clock cycles) of one transaction by phase."""

    header: int  # header in, status out
    load: int  # operand words taken
    compute: int  # MAC-loop issue cycles plus one pipeline flush per row group
    drain: int  # result words sent
    overlap: int = 0  # load cycles spent while computing or sending (PE1's and PE2's loader beside the MAC loop)
    drain_overlap: int = 0  # drain cycles spent while computing (PE2's output engine beside the MAC loop)

    @property
    def total(self) -> int:
        return self.header + self.load + self.compute + self.drain - self.overlap - self.drain_overlap


def _chunk_words(spec: Tt1Spec | Tt2Spec | Tt3Spec) -> tuple[int, int]:
    """Stream words of one chunk of ``A`` and of ``B`` (``CWA``, ``CWB``) at the build's stream width."""
    return (chunk_words(spec.lanes, spec.a_bits, spec.stream_bits),
            chunk_words(spec.lanes, spec.b_bits, spec.stream_bits))


def operand_words(spec: Tt1Spec | Tt2Spec | Tt3Spec, header: int) -> tuple[int, int]:
    """Stream words (``spec.stream_bits`` wide) of the streamed operand ``A`` and of the cached ``B`` in one accepted
    transaction: PE1 ``I*J*KC*CWA`` and ``L*J*KC*CWB``, PE2 ``I*J*KC*CWA`` and ``L*JC*CWB``, PE3 ``IC*CWA`` and
    ``JC*CWB`` (one word a load cycle)."""
    cwa, cwb = _chunk_words(spec)
    if isinstance(spec, Tt3Spec):
        (i, j), _ = header_dims(header, 2)
        return chunks(i, spec.lanes) * cwa, chunks(j, spec.lanes) * cwb
    (i, j, k, l), _ = header_dims(header, 4)
    kc = chunks(k, spec.lanes)
    b_rows = j * kc if isinstance(spec, Tt1Spec) else chunks(j, spec.lanes)
    return i * j * kc * cwa, l * b_rows * cwb


def pe1_beat(spec: Tt1Spec) -> int:
    """Results PE1 sends a cycle: up to one output word's worth of a row group's results, a power of two (the
    packer's beats)."""
    most = min(spec.stream_bits // 32, spec.rows)
    return 4 if most >= 4 else 2 if most >= 2 else 1


def _spill(results: int, last: int, per_word: int) -> int:
    """1 when a transaction's last beat of ``last`` results overfills its output word (the rest leaves a cycle
    later): the words fill in order, so the beat starts at ``(results - last) % per_word``."""
    return int((results - last) % per_word + last > per_word)


def _overlapped(i: int, block: int, body: int) -> int:
    """Load cycles a transaction of ``i`` blocks of ``A`` (``block`` words each) spends beside the MAC loops and
    results (``body`` cycles a block): ``A[i+1]`` loads into the other bank while ``A[i]`` computes and sends,
    and its loop starts when both are done."""
    return max(i - 1, 0) * min(block, body)


def pe1_cycles(spec: Tt1Spec, header: int) -> Cycles:
    """Cycles of one PE1 transaction: ``2 + L*J*KC*CWB + LA + (I - 1)*max(LA, Y) + Y + S``, ``LA = J*KC*CWA``
    the words of one block ``A[i]`` and ``Y = G*(J*KC + 1) + (G-1)*ceil(ROWS/BEAT) + ceil(L'/BEAT)`` its loops and
    results, ``L'`` the last row group's rows (:func:`pe1_beat`; ``S`` as PE2's; the overlap as PE2's); a loop of
    ``ceil(J/2)`` cycles in place of ``J*KC`` where the build sums rows ``j`` in pairs
    (:meth:`Tt1Spec.loop_cycles`)."""
    if status(spec, header) != STATUS_OK:
        return Cycles(2, 0, 0, 0)
    (i, j, k, l), _ = header_dims(header, 4)
    kc, loop = chunks(k, spec.lanes), spec.loop_cycles(j, k)  # J*KC, or ceil(J/2) summing rows j in pairs
    groups = chunks(l, spec.rows)
    beat, tail = pe1_beat(spec), l - (groups - 1) * spec.rows
    beats = (groups - 1) * chunks(spec.rows, beat) + chunks(tail, beat)
    spill = _spill(i * l, (tail - 1) % beat + 1, spec.stream_bits // 32)
    return Cycles(2, sum(operand_words(spec, header)), i * groups * (loop + 1), i * beats + spill,
                  overlap=_overlapped(i, j * kc * _chunk_words(spec)[0], groups * (loop + 1) + beats))


def pe2_beat(spec: Tt2Spec) -> int:
    """Results PE2 sends a cycle: one output word's worth, within one chunk of ``lanes`` (both powers of two)."""
    return min(spec.stream_bits // 32, spec.lanes)


def pe2_cycles(spec: Tt2Spec, header: int) -> Cycles:
    """Cycles of one PE2 transaction, following its MAC loop, its loader and its output engine group by group.

    After the header, the status and ``B`` (``L*JC*CWB`` words) the loader takes ``A[0]`` (``LA = J*KC*CWA``
    words); the MAC loop then runs the row groups (``G = ceil(L / GR)`` a block, ``GR`` = ``2*ROWS`` for a
    transaction with ``K <= LANES/2`` on a build with row pairs, else ``ROWS``: :meth:`Tt2Spec.group_rows`) back to
    back, ``KC*J`` cycles each (a chunk's and a group's sums go to the result RAMs as their last product is added,
    one pipeline cycle later). The result RAMs hold two banks: the output engine sends a group (one RAM read, then per result row
    ``ceil(K / BEAT)`` beats) from one while the MAC loop fills the other, so a group's loop waits only for the
    group two before it to have been sent, and a block's first group also for its ``A`` (the loader takes
    ``A[i+1]`` once ``A[i]`` is in and the loop works on block ``i``). ``S`` = 1 when the last beat overfills its
    output word (the rest leaves a cycle later). Group ``q`` (over the transaction), from the first MAC-loop cycle
    at ``2 + L*JC*CWB + LA``::

        start(q) = max(end(q-1), loaded(block) if q opens a block, sent(q-2) + 1) + 1
        end(q) = start(q) + KC*J - 1
        read(q) = max(end(q) + 2, sent(q-1) + 1)
        sent(q) = read(q) + rows(q) * ceil(K / BEAT)

    and the transaction's last cycle is ``sent(last) + S``. ``overlap``: the loads beside the MAC loop and the
    engine, less the cycles a block's loop waits for its ``A``; ``drain_overlap``: the rest of what the phases
    one after the other over-count (the engine beside the MAC loop).
    """
    if status(spec, header) != STATUS_OK:
        return Cycles(2, 0, 0, 0)
    (i, j, k, l), _ = header_dims(header, 4)
    rows_of_group = spec.group_rows(k)  # 2 * rows for a row-pair build's transaction with K <= lanes / 2
    kc, groups, beat = chunks(k, spec.lanes), chunks(l, rows_of_group), pe2_beat(spec)
    load, block = sum(operand_words(spec, header)), j * kc * _chunk_words(spec)[0]
    spill = _spill(i * l * k, (k - 1) % beat + 1, spec.stream_bits // 32)
    loaded = [1 + load - (i - 1) * block]  # per block, the cycle its last word of A is taken
    end, sent, waited = loaded[0], [-2, -2], 0  # sent: the last beat's cycle of the groups q-2 and q-1
    for row in range(i):
        if row + 1 < i:  # A[row+1] loads after A[row], once the loop is on block row
            loaded.append(max(loaded[row] + 1, end + 1 if row else 0) + block - 1)
        for group in range(groups):
            free = max(end, sent[0] + 1) + 1
            start = free if group else max(free, loaded[row] + 1)
            waited += start - free
            end = start + kc * j - 1
            rows = min(rows_of_group, l - group * rows_of_group)
            sent = [sent[1], max(end + 2, sent[1] + 1) + rows * chunks(k, beat)]
    total = sent[1] + spill + 1
    compute, drain = i * groups * kc * j + 1, i * (groups + l * chunks(k, beat)) + spill
    overlap = (i - 1) * block - waited
    return Cycles(2, load, compute, drain, overlap=overlap,
                  drain_overlap=2 + load + compute + drain - overlap - total)


def pe3_cycles(spec: Tt3Spec, header: int) -> Cycles:
    """Cycles of one PE3 transaction: ``2 + JC*CWB + IC*CWA + I*(2*JC + J)``.

    Per row ``i`` and chunk of ``B``: one cycle to read the chunk, one for the
    ``lanes`` multipliers, then one cycle per product sent.
    """
    if status(spec, header) != STATUS_OK:
        return Cycles(2, 0, 0, 0)
    (i, j), _ = header_dims(header, 2)
    return Cycles(2, sum(operand_words(spec, header)), i * 2 * chunks(j, spec.lanes), i * j)


def transaction_cycles(spec: Tt1Spec | Tt2Spec | Tt3Spec, header: int) -> Cycles:
    """The cycle model of ``spec``'s PE."""
    if isinstance(spec, Tt3Spec):
        return pe3_cycles(spec, header)
    return pe1_cycles(spec, header) if isinstance(spec, Tt1Spec) else pe2_cycles(spec, header)


def stream_cycles(spec: Tt1Spec | Tt2Spec | Tt3Spec, words_in) -> int:
    """Total cycles of the transaction ``words_in`` (32-bit file words; the PE registry's cycle-model entry):
    its header, the first ``spec.stream_bits``-wide word, decides."""
    return transaction_cycles(spec, stream_header(words_in, spec.stream_bits)).total


def stream_words(spec: Tt1Spec | Tt2Spec | Tt3Spec, header: int) -> tuple[int, int]:
    """``spec.stream_bits``-wide words one transaction moves (in, out): header and operand words, status and
    result words (results ``stream_bits / 32`` to a word; bytes are words times ``stream_bits / 8``).

    At one word per cycle on each stream these are the fewest cycles any
    PE with this stream contract can spend, however well it overlaps
    loading, computing and sending (why :mod:`codesign.step.tt.cycles`
    reports them beside the model).
    """
    if status(spec, header) != STATUS_OK:
        return 1, 1
    load = transaction_cycles(spec, header).load  # one operand word taken per load cycle
    if isinstance(spec, Tt3Spec):
        (i, j), _ = header_dims(header, 2)
        return 1 + load, 1 + result_stream_words(i * j, spec.stream_bits)
    (i, _, k, l), _ = header_dims(header, 4)
    results = i * l * (1 if isinstance(spec, Tt1Spec) else k)
    return 1 + load, 1 + result_stream_words(results, spec.stream_bits)
