"""The TT PEs (and the FP-MAC array, :func:`fpmac_array_phases`) as phases for the list cycle model (:mod:`codesign.step.list_shell`): per transaction, the header
taken, the status given, the loads, the compute cycles and the result words, from the PEs' documented structure
(docs/tt_pe.md, "Stream width", "Cycles" and "Results beside the MAC loop"; rtl/tt, tt_pack_out.v), at 32-, 64- or
128-bit stream words.

A phase is ``(kind, n, status)``: IN takes ``n`` stream words (one a cycle while the shell offers them), WAIT
spends ``n`` cycles, OUT gives ``n`` stream words (one a cycle while the shell takes them). PE1's and PE2's
loader runs beside the MAC loop: BESIDE hands ``n`` stream words to it, taken while the phases after it run, and
SYNC waits until it has them all (rtl/tt: ``A[i+1]`` loads while ``A[i]`` computes). PE2's output engine runs
beside its MAC loop too: DRAIN hands it a row group's results (a job: one RAM read, then the group's beats; it
starts ``n`` edges later, once the engine has finished the job before), GATE holds the next group's MAC loop
until at most one job is left (the result RAMs hold two groups), and END holds the transaction until the engine
has sent everything. The CSB PE's element-wise ops stream: THROUGH starts with the status in the output
register, takes ``n`` words one a cycle while that register is free or given, and ends with the last result
given (``n + 1`` cycles without stalls). At a width of ``P``
32-bit parts the PE hands its results to its output packer in *beats* (PE3: one result; PE1: up to
``min(P, rows)``, a power of two, of one row group; PE2: up to ``min(P, lanes)`` of one chunk); a beat that
closes no word is taken at once (a WAIT cycle), one that closes a
word waits for the stream (an OUT word), and a last beat that overfills its word leaves the rest as a word of
its own a cycle later (one more OUT word, the ``S`` of PE1's and PE2's formulas). Units: clock cycles, stream words.
"""

from __future__ import annotations

from collections import deque

IN, WAIT, OUT = 0, 1, 2  # PE phase kinds: take n words, compute n cycles, give n words
BESIDE, SYNC = 3, 4  # the loader takes n words beside the next phases; wait until it has
DRAIN, GATE, END = 5, 6, 7  # PE2: a group's results to the output engine; wait for a free bank; for the engine
THROUGH = 8  # the CSB PE's element-wise ops: each word taken gives a result word through the output register
# cycles from a PE2 group's last MAC-loop cycle to its RAM read: its sums are stored at the next edge, and the
# engine, idle, sees the group whole in that cycle (rtl/tt/tt2_pe.v: glast1, O_IDLE -> O_RD)
DRAIN_DELAY = 2


def pe_phases(pe, spec, header: int) -> tuple:
    """One transaction of a TT PE: ``(phases, status, operand stream words after the header, results)``: the
    phases as the module says, operand words ``spec.stream_bits`` wide, results 32-bit (``P`` to a word)."""
    from codesign.pe.tt.contract import STATUS_OK, chunk_words, chunks, header_dims
    from codesign.pe.tt.cycles import pe1_beat, pe2_beat
    from codesign.pe.tt.golden import status as tt_status

    if pe.name == "fpmac_array":
        return fpmac_array_phases(spec, header)
    if pe.name == "csb":
        return csb_phases(spec, header)
    if pe.name not in ("tt1", "tt2", "tt3"):
        raise NotImplementedError(f"the list cycle model knows the TT, FP-MAC array and CSB PEs' phases, not "
                                  f"{pe.name}'s")
    width = int(getattr(spec, "stream_bits", 32))
    status = tt_status(spec, header)
    steps = [(IN, 1, None), (OUT, 1, status)]
    if status != STATUS_OK:
        return steps, status, 0, 0
    cwa, cwb = chunk_words(spec.lanes, spec.a_bits, width), chunk_words(spec.lanes, spec.b_bits, width)
    if pe.name == "tt3":
        raw, operands, results = _tt3(spec, header_dims(header, 2)[0], cwa, cwb, chunks)
        beat = 1
    else:
        raw, operands, results = _tt12(pe.name == "tt1", spec, header_dims(header, 4)[0], cwa, cwb, chunks)
        beat = pe1_beat(spec) if pe.name == "tt1" else pe2_beat(spec)
    steps.extend(_packed(raw, width // 32, beat))
    return steps, status, operands, results


def fpmac_array_phases(spec, header: int) -> tuple:
    """One FP-MAC array transaction (32-bit words), GEMM or element-wise: the RTL does one thing at a time
    (rtl/fpmac_array: S_HDR, S_STATUS, the loads, the compute or the element unit, the results), so its phases
    are its cycle model's (:func:`codesign.pe.fpmac_array.cycles.transaction_cycles`) in order: the header, the
    status, ``load`` operand words, ``compute`` cycles, ``drain`` result words."""
    from codesign.pe.fpmac_array.cycles import transaction_cycles
    from codesign.pe.fpmac_array.vector import header_status

    status = header_status(spec, header)
    steps = [(IN, 1, None), (OUT, 1, status)]
    if status:
        return steps, status, 0, 0
    cycles = transaction_cycles(spec, header)
    for kind, n in ((IN, cycles.load), (WAIT, cycles.compute), (OUT, cycles.drain)):
        _append(steps, kind, n)
    return steps, status, cycles.load, cycles.drain


def csb_phases(spec, header: int) -> tuple:
    """One CSB transaction (stream words of ``spec.stream_bits``: a wide build's every section starts a new beat and
    its results go ``parts`` to a beat, docs/csb.md "Wide streams"; ``operands`` counts beats after the header,
    ``results`` the 32-bit parts it sends after its status, the last beat's unused ones, 0, too: a list's call
    takes them all, so its out block is whole beats): rtl/csb/csb_pe.v takes the header and every operand word,
    then writes a ``ZERO`` transaction's zero section itself (``in_ready`` low), computes, loads its output register
    and sends the status and the results: the phases of its cycle model (:mod:`codesign.pe.csb.cycles`) in that
    order. An element-wise op loads the status into its output register after its header (and SELECT's ``V``),
    then streams its last section through it (THROUGH: a word taken a cycle while the register is free or given,
    its result given from the next). A refused header (status 1, 2) is followed by the register load and the
    status alone. Index bytes are not seen here (the header is): a list's calls hold indices inside the block
    (status 3 is the builders' error), and a ``CARRY`` follows the ``HOLD`` of its chain (else the PE answers
    status 1, which ends the list)."""
    from codesign.pe.csb.beats import beats
    from codesign.pe.csb.cycles import compute_cycles, zero_words
    from codesign.pe.csb.stream import (FLAG_BITS, FLAG_EW, FLAG_ZERO, EwOp, chain_held, header_status,
                                         result_count, run_as, stride_of, transaction_sections)

    op, nnz, flags = header & 3, header >> 16 & 0x1FF, header & FLAG_BITS
    chain, parts = chain_held(spec, header), spec.parts
    status = header_status(spec, header, chain)
    if status:
        return [(IN, 1, None), (WAIT, 1, None), (OUT, 1, status)], status, 0, 0
    operands = sum(beats(words, parts) for words in transaction_sections(spec, header, chain)[1:])
    sent = beats(result_count(spec, op, nnz, flags), parts)  # result beats
    results = parts * sent
    if flags & FLAG_EW and op == EwOp.LOSS:
        return [(IN, 1, None), (IN, operands, None)] + loss_steps(spec, nnz, sent, status), status, operands, results
    if flags & FLAG_EW and results:  # V (SELECT without CARRY), the status loaded, then the streamed section
        streamed = operands - sent
        steps = [(IN, 1, None)] + ([(IN, streamed, None)] if streamed else [])
        return steps + [(WAIT, 1, None), (THROUGH, sent, status)], status, operands, results
    runs = run_as(spec, flags)  # K1: the kernel-1 PE's tile and taps
    zeros = zero_words(runs, op=op, nnz=nnz, stride=stride_of(flags)) if flags & FLAG_ZERO else 0
    compute = 0 if flags & FLAG_EW else compute_cycles(runs, op=op, nnz=nnz)
    steps = [(IN, 1, None)]
    for kind, n in ((IN, operands), (WAIT, zeros + compute + 1)):
        _append(steps, kind, n)
    steps.append((OUT, 1, status))  # the status phase keeps its status (not merged with the results)
    if results:
        steps.append((OUT, sent, None))
    return steps, status, operands, results


def loss_steps(spec, classes: int, sent: int, status: int) -> list:
    """A LOSS's phases after its load (rtl/csb/csb_loss.v): the E pass, the divider and the status load as one
    WAIT; the status given; then the O pass, a pipeline of three stages that moves while the output register is
    free or given: its first beat loads ``parts + 2`` cycles after the status's, each later one ``parts`` cycles
    after the one before (a beat of ``parts`` codes, an element a cycle)."""
    from codesign.pe.csb.cycles import LOSS_LANE_CYCLES, LOSS_QUOTIENT_CYCLES

    parts, elements = spec.parts, classes * spec.batch
    steps = [(WAIT, elements + 2 + LOSS_QUOTIENT_CYCLES + LOSS_LANE_CYCLES * spec.batch + 1, None),
             (OUT, 1, status), (WAIT, parts + 1, None), (OUT, 1, None)]
    for _ in range(sent - 1):
        if parts > 1:
            steps.append((WAIT, parts - 1, None))
        steps.append((OUT, 1, None))
    return steps


def stall_free_cycles(steps) -> int:
    """Cycles of a transaction's phases (IN, WAIT, OUT, THROUGH) with every word offered and taken at once: each
    phase's ``n``, a THROUGH's ``n + 1`` (its last result leaves the cycle after its last word came in)."""
    return sum(n + (kind == THROUGH) for kind, n, _ in steps)


def _tt12(pe1: bool, spec, dims: tuple, cwa: int, cwb: int, chunks) -> tuple:
    """PE1 and PE2 as raw phases (results as ``(OUT, results, row length)``, PE2's as ``(DRAIN, ...)``): B's words,
    then per row i of A its words and per group of ``rows`` rows (PE2 with row pairs: ``2 * rows`` where K fits
    half the lanes) the MAC loop and the group's results. PE1: J*KC MAC cycles (ceil(J/2) summing rows j in
    pairs) and a flush, then one row of results; PE2: a GATE, KC*J MAC cycles (the chunks back to back), then
    rows of K to the output engine, which sends them while the next group computes; END after the last. Each
    takes ``A[i+1]`` beside ``A[i]``'s MAC loops (BESIDE ... SYNC)."""
    i, j, k, cols = dims  # cols: the header's L
    group_rows = spec.rows if pe1 else spec.group_rows(k)
    kc, groups = chunks(k, spec.lanes), chunks(cols, group_rows)
    load_b = cols * j * kc * cwb if pe1 else cols * chunks(j, spec.lanes) * cwb
    block = j * kc * cwa
    steps = [(IN, load_b, None)]
    for row in range(i):
        beside = row + 1 < i
        if not row:
            steps.append((IN, block, None))
        if beside:
            steps.append((BESIDE, block, None))
        for group in range(groups):
            rows = min(group_rows, cols - group * group_rows)
            if pe1:
                steps.extend([(WAIT, spec.loop_cycles(j, k) + 1, None), (OUT, rows, rows)])
            else:
                steps.extend([(GATE, 1, None), (WAIT, kc * j, None), (DRAIN, rows * k, k)])
        if beside:
            steps.append((SYNC, 1, None))
    if not pe1:
        steps.append((END, 1, None))
    return steps, load_b + i * block, i * cols * (1 if pe1 else k)


def _tt3(spec, dims: tuple, cwa: int, cwb: int, chunks) -> tuple:
    """PE3 as raw phases: B's chunks, then per chunk of A its words and per row i of it, per chunk of B, a RAM
    read, the multiplies (two cycles) and one result per product."""
    i, j = dims
    jc, ic = chunks(j, spec.lanes), chunks(i, spec.lanes)
    steps = [(IN, jc * cwb, None)]
    for a_chunk in range(ic):
        steps.append((IN, cwa, None))
        for _ in range(min(spec.lanes, i - a_chunk * spec.lanes)):
            for b_chunk in range(jc):
                steps.append((WAIT, 2, None))
                steps.append((OUT, min(spec.lanes, j - b_chunk * spec.lanes), 1))
    return steps, jc * cwb + ic * cwa, i * j


def _beats(results: int, row: int, beat: int):
    """The beats of ``results`` results in rows of ``row``: per row ``beat`` at a time, the last beat of a row
    short when ``beat`` does not divide it (rtl/tt/tt1_pe.v and tt2_pe.v: ``beat_n``; no beat spans two rows)."""
    for _ in range(results // row):
        yield from [beat] * ((row - 1) // beat)
        yield (row - 1) % beat + 1


def _packed(raw: list, parts: int, beat: int) -> list:
    """Raw phases with their results as tt_pack_out gives them at ``parts`` results a word: a beat that closes a
    word (fills it, or the transaction's last) an OUT word, any other a WAIT cycle; a spilling last beat one
    more OUT word. A DRAIN's results become its job (a RAM-read cycle, then its beats) and the DRAIN
    ``(DRAIN, DRAIN_DELAY, job)``. Consecutive IN, WAIT or OUT phases are merged (the PE does the same in either
    split); the others are kept as they are."""
    total = sum(n for kind, n, _ in raw if kind in (OUT, DRAIN))
    steps, packer = [], [0, 0]  # the packer's fill and the results sent, across the transaction
    for kind, n, row in raw:
        if kind == OUT:
            _pack_beats(steps, n, row, beat, parts, packer, total)
        elif kind == DRAIN:
            job = [(WAIT, 1, None)]
            _pack_beats(job, n, row, beat, parts, packer, total)
            steps.append((DRAIN, DRAIN_DELAY, tuple(job)))
        else:
            _append(steps, kind, n)
    return steps


def _pack_beats(steps: list, results: int, row: int, beat: int, parts: int, packer: list, total: int) -> None:
    """Appends the phases of ``results`` results in rows of ``row`` (see :func:`_packed`); ``packer`` holds the
    packer's fill and the results sent before, and is moved on."""
    fill, sent = packer
    for size in _beats(results, row, beat):
        sent += size
        last = sent == total
        fill += size
        closes = fill >= parts or last
        _append(steps, OUT if closes else WAIT, 1)
        if fill > parts and last:
            _append(steps, OUT, 1)  # the rest, a word of its own a cycle later
        fill = fill - parts if closes and fill > parts else 0 if closes else fill
    packer[:] = [fill, sent]


def _append(steps: list, kind: int, n: int) -> None:
    if not n:
        return
    if steps and steps[-1][0] == kind and kind in (IN, WAIT, OUT):
        steps[-1] = (kind, steps[-1][1] + n, None)
    else:
        steps.append((kind, n, None))


class Pe:
    """The PE's current phase and the words or cycles left in it, the words its loader still takes beside it
    (``side``) and the jobs of PE2's output engine (``jobs``: ``[edges until it may start, its phases as
    [kind, left]]``, the first the one it works on); between transactions it waits for a header."""

    __slots__ = ("phases", "kind", "left", "status", "side", "jobs", "held")

    def __init__(self) -> None:
        self.phases: deque = deque()
        self.kind, self.left, self.status, self.side = None, 0, None, 0
        self.jobs: deque = deque()
        self.held = False  # THROUGH: the output register holds a word (the status, then each result)

    @property
    def in_ready(self) -> bool:
        """Ready before the cycle's output handshake is known: a THROUGH phase takes a word while its output
        register is empty, and also while it gives that register's word (:meth:`takes`)."""
        return self.kind == IN or self.side != 0 or (self.kind == THROUGH and self.left != 0 and not self.held)

    def takes(self, give: bool) -> bool:
        """``in_ready`` given the cycle's output handshake (rtl/csb/csb_pe.v: ``!out_valid || out_ready``)."""
        return self.in_ready or (self.kind == THROUGH and self.left != 0 and give)

    @property
    def _engine(self):
        """The output engine's current phase, or None while it has no job it may start."""
        return self.jobs[0][1][0] if self.jobs and not self.jobs[0][0] else None

    @property
    def out_valid(self) -> bool:
        engine = self._engine
        return self.kind == OUT or self.held or (engine is not None and engine[0] == OUT)

    @property
    def computing(self) -> bool:
        """The PE works this cycle without the stream: its MAC loop, or the output engine reading a group's
        results or taking a beat that closes no word, or a group's sums on their way to it (a PE waiting only
        for the stream to take a word, or give one, is not)."""
        engine = self._engine
        return (self.kind == WAIT or (engine is not None and engine[0] == WAIT)
                or (engine is None and bool(self.jobs)))

    def works(self, take: bool, give: bool) -> bool:
        """The cycle counts as the PE's (a word moved, or it computed), not a stall. In a THROUGH phase a cycle is
        the PE's where it takes a word or gives its last result (its ``n + 1`` stall-free cycles; a word given
        with none taken is the stream's delay, as the cycle model counts them)."""
        if self.kind == THROUGH:
            return take or (give and self.left == 0)
        return take or give or self.computing

    def advance(self) -> None:
        """The next phase, or none (the PE waits in S_HDR for the next call's words). A BESIDE phase starts the
        loader and a DRAIN hands a job to the engine, neither taking a cycle; a SYNC the loader has finished, a
        GATE with at most one job left and an END with none take none either."""
        while not self.left and self.phases:
            self.kind, self.left, self.status = self.phases.popleft()
            if self.kind == BESIDE:
                self.side, self.left = self.left, 0
            elif self.kind == DRAIN:
                self.jobs.append([self.left, deque([kind, n] for kind, n, _ in self.status)])
                self.left, self.status = 0, None
            elif ((self.kind == SYNC and not self.side) or (self.kind == GATE and len(self.jobs) <= 1)
                  or (self.kind == END and not self.jobs)):
                self.left = 0
            elif self.kind == THROUGH:
                self.held = True  # the status, loaded by the WAIT before
        if not self.left:
            self.kind = None

    def edge(self, take: bool, give: bool = False) -> None:
        """The clock edge: a word taken goes to the phase if it takes words, else to the loader; a word given
        comes from the phase if it gives words, else from the output engine. The MAC loop's side moves first
        (a GATE reads the jobs as they were in the cycle), then the engine's (an END sees its last job gone)."""
        if self.kind == THROUGH:
            self._through_edge(take, give)
            return
        engine_gives = give and self.kind != OUT
        self._main_edge(take, give and not engine_gives)
        self._engine_edge(engine_gives)
        if self.kind == END and not self.jobs:
            self.left = 0
            self.advance()

    def _main_edge(self, take: bool, give: bool) -> None:
        if take and self.kind != IN:
            if not self.side:
                raise RuntimeError("a word was taken while the PE takes none")
            self.side, take = self.side - 1, False
            if not self.side and self.kind == SYNC:  # the next phase starts at this edge
                self.left = 0
                self.advance()
                return
        if self.kind == GATE and len(self.jobs) <= 1:
            self.left = 0
            self.advance()
        elif self.kind == WAIT or take or give:
            self.left -= 1
            if not self.left:
                self.advance()

    def _through_edge(self, take: bool, give: bool) -> None:
        """A THROUGH edge: the register's word given (the status first, then results), a word taken into it; the
        phase ends once every word is taken and the last result given."""
        if (give and not self.held) or (take and not self.takes(give)):
            raise RuntimeError("a word moved that the PE's element-wise stream does not move")
        if give:
            self.held, self.status = False, None
        if take:
            self.left, self.held = self.left - 1, True
        if not self.left and not self.held:
            self.advance()

    def _engine_edge(self, give: bool) -> None:
        """The output engine's edge: its phase moves on (a WAIT each cycle, an OUT per word given), a finished
        job leaves, and every job not yet started comes an edge closer to its start."""
        engine = self._engine
        if engine is not None and (engine[0] == WAIT or give):
            engine[1] -= 1
            if not engine[1]:
                phases = self.jobs[0][1]
                phases.popleft()
                if not phases:
                    self.jobs.popleft()
        elif give:
            raise RuntimeError("a word was given while the PE gives none")
        for job in self.jobs:
            if job[0]:
                job[0] -= 1


__all__ = ["BESIDE", "DRAIN", "END", "GATE", "IN", "OUT", "Pe", "SYNC", "THROUGH", "WAIT", "csb_phases",
           "fpmac_array_phases", "pe_phases", "stall_free_cycles"]
