"""The golden model of a call list, and call lists to verify the shell with.

:func:`run_list_golden` is what the shell must do to an arena for a list of
:class:`~codesign.contracts.calls.Call` (``codesign/contracts/calls.py`` is the
contract): gather each call's words where they lie, run the PE's golden
transaction, pass its results raw or through the rounding stage's golden
(:mod:`codesign.numerics.round_stage`), scatter them into the out block and
write the record. The RTL shell (cocotb, :mod:`codesign.shell.list_bench`),
the HLS shell (C-sim through the bridge) and the emulated board are each held
equal to it over the *whole* arena, so a stray write anywhere is a mismatch.

:func:`tt_chain` builds a list whose second call reads, in place, the codes the
first call's rounding stage wrote: the data-in-place path a TT step takes.
:func:`chain_list` builds random PE1 lists of 3-D blocks and accumulating
chains (``docs/accelerator.md``, "3-D blocks", "Accumulating calls").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from codesign.contracts.calls import (RAW, RECORD, RECORD_DONE, RECORD_WORDS, ArenaLayout, Block,
                                      Call, CallListError, check_list, encode_list)
from codesign.contracts.constants import STATUS_OK
from codesign.numerics.round_stage import RoundStageConfig, round_held, round_stage
from codesign.shell.ip import stream_word_bits


def gather(arena: np.ndarray, block: Block) -> np.ndarray:
    """The words of ``block`` in the arena (uint32 words), rows in order."""
    return arena[block.word_indices()]


def scatter(arena: np.ndarray, block: Block, words: np.ndarray) -> None:
    arena[block.word_indices()] = np.asarray(words, dtype=np.uint32).reshape(-1)


def call_words_in(arena: np.ndarray, call: Call, parts: int = 1) -> np.ndarray:
    """The 32-bit words a call streams into the PE: its header (one stream word of ``parts`` words, zero above
    the first), then every row of its segments."""
    head = [np.array([call.header] + [0] * (parts - 1), dtype=np.uint32)] if call.header is not None else []
    return np.concatenate(head + [gather(arena, block) for block in call.segments] + [np.zeros(0, np.uint32)])


def run_list_golden(pe, spec, arena: np.ndarray, calls: Sequence[Call], *, fast: bool = False,
                    held_sums: bool = True) -> np.ndarray:
    """The arena after the shell has run ``calls`` on it (a new uint32 array; ``arena`` is left as it was).

    The PE starts the list holding nothing (a list's ``HOLD``/``CARRY`` chains end inside it). Each transaction's
    output comes from the PE's independent reference, or with ``fast`` from its fastest golden
    (:meth:`~codesign.pe.stream.StreamPE.golden_session`, held equal to the reference at the golden level): the
    model a golden training step runs, whose thousands of float transactions the exact-rational reference
    would take minutes over.

    A call whose status is not 0 writes its record and ends the list, as the shell does. Accumulating calls
    (``acc_add``, ``acc_hold``) sum their results exactly in int64 (the shell's buffer holds 48-bit sums, which
    :data:`~codesign.contracts.calls.MAX_CHAIN` keeps exact). ``held_sums`` False is a shell built without the
    buffer (:func:`codesign.shell.ip.render_accel_rtl`): a list with accumulating calls is refused."""
    arena = np.array(arena, dtype=np.uint32)
    bits = stream_word_bits(pe, spec)
    check_list(calls, 4 * arena.size, bits, held_sums=held_sums)
    parts = bits // 32
    answer = pe.golden_session(spec) if fast else pe.reference_session(spec)
    outputs: dict = {}  # a transaction repeated in a list is computed once (a float PE's golden is slow)
    held = None  # the shell's accumulation buffer
    for call in calls:
        words_in = call_words_in(arena, call, parts)
        key = words_in.tobytes()
        if pe.stateful:  # the answer depends on the calls before: nothing to reuse
            out = np.asarray(answer(words_in), dtype=np.uint32)
        else:
            if key not in outputs:
                outputs[key] = np.asarray(answer(words_in), dtype=np.uint32)
            out = outputs[key]
        status = int(out[0])
        record = np.zeros(RECORD_WORDS, dtype=np.uint32)
        record[RECORD["status"]], record[RECORD["words_in"]] = status, words_in.size
        given = out.size - parts  # result words after the status, the last stream word's padding included
        if status == STATUS_OK and given != -(-call.count // parts) * parts:
            raise CallListError(f"the PE gives {given} result words; the call takes {call.count}: the rest would "
                                "stay in the PE's stream for the next call, or the shell would wait for words "
                                "that never come")
        if status == STATUS_OK and call.count:
            results = out[parts:parts + call.count]
            if call.accumulates:
                values = results.astype(np.uint32).view(np.int32).astype(np.int64)
                held = values if not call.acc_add else held + values
                words, stats = (np.zeros(0, np.uint32), round_stage(np.zeros(0, np.uint32), RAW)[1]) \
                    if call.acc_hold else round_held(held, call.rounding)
                if not call.acc_hold:
                    held = None
            else:
                words, stats = round_stage(results, call.rounding)
            scatter(arena, call.out, words)
            record[RECORD["saturated"]] = stats.saturated
            record[RECORD["sum_abs_lo"]] = stats.sum_abs & 0xFFFF_FFFF
            record[RECORD["sum_abs_hi"]] = stats.sum_abs >> 32
            record[RECORD["words_out"]] = words.size
        record[RECORD["done"]] = RECORD_DONE
        arena[call.record // 4:call.record // 4 + RECORD_WORDS] = record
        if status != STATUS_OK:
            break
    return arena


@dataclass(frozen=True)
class ListCase:
    """A call list with its arena before and after (golden), for a shell at any level."""

    calls: tuple
    arena: np.ndarray
    expected: np.ndarray

    @property
    def descriptors(self) -> np.ndarray:
        return encode_list(self.calls)


def tt_chain(pe, spec, rng: np.random.Generator, *, i: int = 3, j: int = 2, k: int = 5, l: int = 4, l2: int = 3,
             shift: int = -4) -> ListCase:
    """Two PE1 calls: ``Z = A·B`` rounded on the PE to ``a_bits`` codes packed as PE1's A rows (row length L,
    ``spec.lanes`` to a chunk), then ``Z2 = Z·B2`` reading those codes where the first call wrote them (J = 1,
    K = L), raw. The first call's B rows are read with a stride (a block inside a larger buffer)."""
    from codesign.pe.tt.contract import chunk_words, code_range, header_word, pack_rows

    if pe.name != "tt1":
        raise ValueError("tt_chain builds PE1 calls")
    a_low, a_high = code_range(spec.a_bits)
    b_low, b_high = code_range(spec.b_bits)
    a = rng.integers(a_low, a_high + 1, size=(i, j, k))
    b = rng.integers(b_low, b_high + 1, size=(l, j, k))
    b2 = rng.integers(b_low, b_high + 1, size=(l2, 1, l))
    width = spec.stream_bits
    parts = width // 32
    arena = ArenaLayout()
    b_words = pack_rows(b, spec.lanes, spec.b_bits, stream_bits=width).astype(np.uint32).reshape(l * j, -1)
    row = b_words.shape[1]
    padded = np.full((l * j, row + 3 * parts), 0x5A5A_5A5A, dtype=np.uint32)  # B's rows inside a wider buffer
    padded[:, :row] = b_words
    b_at = arena.put(padded.reshape(-1))
    a_words = pack_rows(a, spec.lanes, spec.a_bits, stream_bits=width).astype(np.uint32)
    a_at = arena.put(a_words)
    b2_words = pack_rows(b2, spec.lanes, spec.b_bits, stream_bits=width).astype(np.uint32)
    b2_at = arena.put(b2_words)
    rounding = RoundStageConfig(enable=True, shift=shift, bits=spec.a_bits, lanes=spec.lanes,
                                group_words=chunk_words(spec.lanes, spec.a_bits, width) * parts, row_values=l)
    z_words = rounding.words_out(i * l)
    z_at = arena.reserve(z_words)
    if (i * l2) % parts:
        raise ValueError(f"I*L2 = {i * l2} results do not fill whole {width}-bit beats; pick I or L2 so they do")
    z2_at = arena.reserve(i * (l2 + 2 * parts))
    records = arena.reserve(2 * RECORD_WORDS)
    first = Call(header=header_word(i, j, k, l),
                 segments=(Block(offset=b_at, words=row, rows=l * j, stride=4 * (row + 3 * parts)),
                           Block(offset=a_at, words=int(a_words.size), rows=1)),
                 out=Block(offset=z_at, words=z_words, rows=1), count=i * l, record=records, rounding=rounding)
    # at 32 bits a strided row per i; wider, one block of whole beats (a row of L2 results may end mid-beat)
    rows_out = (Block(offset=z2_at, words=l2, rows=i, stride=4 * (l2 + 2)) if parts == 1 else
                Block(offset=z2_at, words=i * l2, rows=1))
    second = Call(header=header_word(i, 1, l, l2),
                  segments=(Block(offset=b2_at, words=int(b2_words.size), rows=1),
                            Block(offset=z_at, words=z_words, rows=1)),
                  out=rows_out, count=i * l2, record=records + 4 * RECORD_WORDS)
    image = arena.image()
    calls = (first, second)
    return ListCase(calls=calls, arena=image, expected=run_list_golden(pe, spec, image, calls))


def random_rounding(rng: np.random.Generator, count: int) -> RoundStageConfig:
    """A rounding stage run over ``count`` results with random fields: a width, a shift that rounds some values
    and saturates others, a packing, and a row length dividing ``count``."""
    bits = int(rng.integers(2, 17))
    slot = 4 if bits <= 4 else 8 if bits <= 8 else 16
    lanes = int(rng.integers(1, min(16, 128 // slot) + 1))  # a group of at most four words
    needed = -(-lanes * slot // 32)
    divisors = [d for d in range(1, min(count, 0xFFFF) + 1) if count % d == 0]
    return RoundStageConfig(enable=True, shift=int(rng.integers(-40, 9)), bits=bits, lanes=lanes,
                            group_words=int(rng.integers(needed, 5)), row_values=int(rng.choice(divisors)))


def stimulus_list(pe, spec, transactions, rng: np.random.Generator, *, min_values: int = 0,
                  raw_every: int = 4) -> ListCase:
    """A list of one call per accepted transaction of a stream PE: each call's words one segment in the arena (its
    header among them), its results (every 32-bit part its answer sends after the status beat) through the
    rounding stage with random fields (:func:`random_rounding`, in whole beats on a wide stream; every
    ``raw_every``-th call raw), written back to back after the operands, its record after them. Transactions
    repeat until the rounded calls hold ``min_values`` results. The list that verifies the shell and the rounding
    stage behind every PE."""
    parts = stream_word_bits(pe, spec) // 32
    if parts > 1 and not pe.sends_whole_beats:
        raise ValueError(f"stimulus_list builds wide-stream lists of PEs whose calls take whole result beats, not "
                         f"{pe.name}'s (its wide path is tt_chain's)")
    accepted = [(np.asarray(w_in, np.uint32), len(w_out) - parts) for w_in, w_out in transactions
                if int(w_out[0]) == STATUS_OK and len(w_out) > parts]
    if not accepted:
        raise ValueError(f"no accepted transaction with results among the {pe.name} stimulus")
    chosen, rounded = [], 0
    while rounded < min_values or not chosen:
        for pair in accepted:
            rounded += pair[1] * (len(chosen) % raw_every != raw_every - 1)
            chosen.append(pair)
    arena = ArenaLayout()
    inputs = [arena.put(w_in) for w_in, _ in chosen]
    calls = []
    for index, ((w_in, count), at) in enumerate(zip(chosen, inputs)):
        raw = index % raw_every == raw_every - 1
        rounding = RAW if raw else (random_rounding(rng, count) if parts == 1 else beat_rounding(rng, count, parts))
        words = rounding.words_out(count)
        out = arena.reserve(words)
        calls.append(Call(header=None, segments=(Block(offset=at, words=len(w_in), rows=1),),
                          out=Block(offset=out, words=words, rows=1), count=count,
                          record=arena.reserve(RECORD_WORDS), rounding=rounding))
    image = arena.image()
    return ListCase(calls=tuple(calls), arena=image, expected=run_list_golden(pe, spec, image, calls))


def tt_transactions(pe, spec, rng: np.random.Generator, calls: int, *, i: int = 40, j: int = 2, k: int = 16,
                    l: int = 32) -> list:
    """``calls`` random transactions of a TT PE1 or PE2 with many results for their input words (a stage of a
    layer's forward contractions has this shape): (input words, golden output words)."""
    from codesign.pe.tt import golden as tt
    from codesign.pe.tt.contract import code_range

    made = []
    for _ in range(calls):
        a = rng.integers(*_closed(code_range(spec.a_bits)), size=(i, j, k))
        b = rng.integers(*_closed(code_range(spec.b_bits)), size=tt.b_shape(spec, j, k, l))
        made.append((tt.words(spec, a, b), tt.output(spec, a, b)))
    return made


def _closed(bounds) -> tuple:
    return bounds[0], bounds[1] + 1


def _divisors(n: int) -> list:
    return [d for d in range(1, n + 1) if n % d == 0]


def beat_rounding(rng: np.random.Generator, count: int, parts: int) -> RoundStageConfig:
    """:func:`random_rounding` whose groups are whole stream words of ``parts`` 32-bit words (``group_words`` raised
    to a multiple of ``parts``), so the words it sends fill whole beats."""
    cfg = random_rounding(rng, count)
    return RoundStageConfig(enable=True, shift=cfg.shift, bits=cfg.bits, lanes=cfg.lanes,
                            group_words=-(-cfg.group_words // parts) * parts, row_values=cfg.row_values)


def operand_rows(arena: ArenaLayout, rng: np.random.Generator, values: np.ndarray, lanes: int, bits: int,
                 width: int, *, transposed: bool):
    """Place an (outer, J, K) operand's packed rows in the arena and return ``rows(j0, jp, o0=0, o1=outer)``: the
    3-D block of rows ``j0 .. j0 + jp`` of outer indices ``o0 .. o1``, in the order a TT PE takes them (outer, then
    j). Stored outer-major with rows padded by 1..2 beats (planes one after another, rows strided), or
    ``transposed`` (J-major, rows padded by 0..2 beats): then a plane's rows are ``outer`` rows apart and the
    planes interleave."""
    from codesign.pe.tt.contract import pack_rows

    outer, jt = values.shape[:2]
    parts = width // 32
    rows = pack_rows(values, lanes, bits, stream_bits=width).astype(np.uint32).reshape(outer, jt, -1)
    row = rows.shape[2]
    pitch = row + parts * int(rng.integers(0 if transposed else 1, 3))
    if transposed:
        rows = rows.transpose(1, 0, 2)
    padded = np.full(rows.shape[:2] + (pitch,), 0x5A5A_5A5A, dtype=np.uint32)
    padded[..., :row] = rows
    at = arena.put(padded.reshape(-1))
    if transposed:
        return lambda j0, jp, o0=0, o1=outer: Block(offset=at + 4 * (j0 * outer + o0) * pitch, words=row, rows=jp,
                                                    stride=4 * outer * pitch, planes=o1 - o0, plane_stride=4 * pitch)
    return lambda j0, jp, o0=0, o1=outer: Block(offset=at + 4 * (o0 * jt + j0) * pitch, words=row, rows=jp,
                                                stride=4 * pitch, planes=o1 - o0, plane_stride=4 * jt * pitch)


def out_block(arena: ArenaLayout, rng: np.random.Generator, words: int, parts: int) -> Block:
    """Room for ``words`` result words as a random 3-D block of whole ``parts``-word beats, with gaps between rows
    and planes, its planes one after another or interleaved (the gaps keep the arena's reserved marks, so a stray
    write shows)."""
    w = int(rng.choice([d for d in _divisors(words) if d % parts == 0]))
    r = int(rng.choice(_divisors(words // w)))
    p = words // w // r
    beat = 4 * parts
    if p > 1 and r > 1 and rng.integers(2):  # interleaved: row r of every plane, then row r + 1
        plane_stride = 4 * w + beat * int(rng.integers(0, 2))
        stride = p * plane_stride + beat * int(rng.integers(0, 2))
    else:
        stride = 4 * w + beat * int(rng.integers(0, 3))
        plane_stride = (r - 1) * stride + 4 * w + beat * int(rng.integers(0, 3))
    span = (p - 1) * plane_stride + (r - 1) * stride + 4 * w
    return Block(offset=arena.reserve(span // 4), words=w, rows=r, stride=stride, planes=p, plane_stride=plane_stride)


def _chain_job(pe, spec, rng: np.random.Generator, arena: ArenaLayout, index: int, chains: bool,
               three: bool) -> list:
    """One contraction ``Z = sum_j A B`` of PE1 with random I, L, K and J: a plain call (every third job, or every
    job without ``chains``), or a chain of 2..4 accumulating calls, each over a random run of J; operands in 3-D
    blocks (A transposed on even jobs, B on odd ones; with ``three``, A's outer indices cut in two segments at a
    random point), the out block 3-D; raw or rounded (a chain drains raw on every other chain)."""
    from codesign.pe.tt.contract import code_range, header_word

    parts = spec.stream_bits // 32
    n = 1 if index % 3 == 1 or not chains else int(rng.integers(2, 5))
    split = [int(x) for x in rng.integers(1, min(spec.max_j, 4) + 1, size=n)]
    i, l, k = 4 * int(rng.integers(1, 4)), int(rng.integers(2, min(spec.max_l, 16) + 1)), int(rng.integers(1, 33))
    a = rng.integers(*code_range(spec.a_bits), size=(i, sum(split), k), endpoint=True)
    b = rng.integers(*code_range(spec.b_bits), size=(l, sum(split), k), endpoint=True)
    a_rows = operand_rows(arena, rng, a, spec.lanes, spec.a_bits, spec.stream_bits, transposed=index % 2 == 0)
    b_rows = operand_rows(arena, rng, b, spec.lanes, spec.b_bits, spec.stream_bits, transposed=index % 2 == 1)
    count = i * l
    raw = (n > 1 and index % 6 in (0, 2)) or (n == 1 and index % (6 if chains else 3) == 1)
    rounding = RAW if raw else beat_rounding(rng, count, parts)
    out = out_block(arena, rng, 2 * count if raw and n > 1 else rounding.words_out(count), parts)
    cut = int(rng.integers(1, i)) if three else i

    def segments(j0: int, jp: int) -> tuple:
        return (b_rows(j0, jp), a_rows(j0, jp, 0, cut)) + ((a_rows(j0, jp, cut, i),) if three else ())

    calls, j0 = [], 0
    for part, jp in enumerate(split):
        last = part == n - 1
        calls.append(Call(header=header_word(i, jp, k, l), segments=segments(j0, jp),
                          out=out if last else Block(), count=count, record=arena.reserve(RECORD_WORDS),
                          rounding=rounding if last else RAW, acc_add=n > 1 and part > 0, acc_hold=n > 1 and not last))
        j0 += jp
    return calls


def chain_list(pe, spec, rng: np.random.Generator, *, min_values: int = 10_000, chains: bool = True,
               three: bool = False) -> ListCase:
    """A PE1 list at ``spec.stream_bits`` of plain calls and chains of accumulating calls (raw and rounded drains),
    every operand and out block 3-D (planes one after another or interleaved), a plain call between two calls of
    a chain where one is at hand, until the calls have taken ``min_values`` results: the list that verifies 3-D
    blocks and the accumulation buffer at every level (``chains`` False: plain calls only, 3-D blocks alone;
    ``three``: every call's A in two segments, so three in all)."""
    if pe.name != "tt1":
        raise ValueError("chain_list builds PE1 calls")
    arena = ArenaLayout()
    jobs, values = [], 0
    while values < min_values or len(jobs) < 6:
        jobs.append(_chain_job(pe, spec, rng, arena, len(jobs), chains, three))
        values += sum(call.count for call in jobs[-1])
    plain = [job[0] for job in jobs if len(job) == 1]
    calls = []
    for job in (job for job in jobs if len(job) > 1):
        for part, call in enumerate(job):
            calls.append(call)
            if part < len(job) - 1 and plain and rng.integers(2):
                calls.append(plain.pop())  # between a chain's calls: it must leave the held sums alone
    calls += plain
    image = arena.image()
    return ListCase(calls=tuple(calls), arena=image, expected=run_list_golden(pe, spec, image, calls))
