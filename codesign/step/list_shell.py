"""The cycle-level machines behind :func:`codesign.step.list_cycles.list_cycles`: the RTL shell's sequencer, data
movers (and, at 64- or 128-bit stream words, accel_seq's unpacker and packer), the cocotbext-axi memory, and
around them the rounding stage (:mod:`codesign.step.list_round`) and the PE as phases (:mod:`codesign.step.list_pe`).

Each machine keeps the registers of its RTL module that decide *when* a word moves (counters, valid bits, FSM
states), never the data. A cycle computes the handshakes from the registers (as the RTL's combinational logic
does), then every machine steps to its state after the rising edge. Units: clock cycles, words of 32 bits (a mover's
count, the unpacker's and packer's parts), beats of the stream word's width (the movers' bursts), byte addresses.
"""

from __future__ import annotations

from collections import deque

from codesign.contracts.calls import DESCRIPTOR_WORDS, RECORD_WORDS
from codesign.step.list_pe import WAIT, Pe
from codesign.step.list_round import RoundStage

MAX_BURST = 16  # beats per burst (the shell's MAX_BURST, the AXI3 limit)
FIFO_BEATS = 2 * MAX_BURST  # accel_s2mm's FIFO
WRITE_OPEN = 2  # accel_s2mm's MAX_OPEN: bursts whose B response may be due at once (<= every memory's queue_limit)
HANG_CYCLES = 1 << 20  # stalled cycles in one call past which the model calls the shell hung


def _burst(addr: int, left: int, size: int) -> int:
    """Beats of the next burst: at most MAX_BURST, never across a 4 KiB boundary (beats of ``size`` bytes)."""
    return min(left, MAX_BURST, (4096 - (addr & 0xFFF)) // size)


class ReadPort:
    """accel_mm2s and the AxiRam's read side (AR sink, ``_process_read``, R source), one per shell (runs overlap:
    a run may start once the one before has asked for all its bursts, ``requesting``); with a DDR
    timing (:class:`codesign.step.list_cycles.DdrTiming`) the R source is paused as the list bench's pacer pauses
    it: the first beat of a burst not before ``read_latency`` edges after its AR, at most ``read_beats`` beats
    driven in any ``read_window`` edges."""

    __slots__ = ("limit", "arvalid", "to_request", "to_receive", "addr", "beats", "arready", "ar_q",
                 "pushing", "r_q", "rvalid", "asleep", "now", "paced", "latency", "most", "window", "bursts",
                 "drives", "size")

    def __init__(self, limit: int, ddr=None, parts: int = 1) -> None:
        self.limit, self.size = limit, 4 * parts  # size: bytes of a beat (parts 32-bit words)
        self.arvalid = False
        self.to_request = self.to_receive = self.addr = self.beats = 0
        self.arready, self.ar_q, self.pushing, self.r_q, self.rvalid, self.asleep = True, deque(), 0, 0, False, True
        self.now, self.paced = 0, ddr is not None  # now: the number of the last edge
        self.latency, self.most, self.window = (ddr.read_latency, ddr.read_beats, ddr.read_window) if ddr else (1, 1, 1)
        self.bursts: deque = deque()  # [beats not yet driven, beats, earliest edge of the first] per AR taken
        self.drives: deque = deque()  # edges that drove a beat, the last window's

    def state(self) -> tuple:
        timing = ()
        if self.paced:  # relative to the next edge, so that a quiet stretch is a fixed point
            timing = (tuple((b[0], b[1], max(0, b[2] - self.now)) for b in self.bursts),
                      tuple(self.now - d for d in self.drives if d > self.now + 1 - self.window))
        return (self.arvalid, self.to_request, self.to_receive, self.arready, tuple(self.ar_q),
                self.pushing, self.r_q, self.rvalid, self.asleep, timing)

    def settled(self) -> bool:
        """No burst waiting and no drive recent enough to limit the next edge's."""
        return not self.bursts and all(d <= self.now + 1 - self.window for d in self.drives)

    def _allowed(self, now: int) -> bool:
        """The pacer lets the R source drive at edge ``now``: fewer than ``most`` drives in the window, and the
        next beat not the first of a burst whose latency has not passed."""
        drives = self.drives
        while drives and drives[0] <= now - self.window:
            drives.popleft()
        if len(drives) >= self.most:
            return False
        burst = self.bursts[0]
        return burst[0] != burst[1] or now >= burst[2]

    def _drive(self, now: int) -> None:
        self.drives.append(now)
        burst = self.bursts[0]
        burst[0] -= 1
        if not burst[0]:
            self.bursts.popleft()

    def _push(self) -> bool:
        """``_process_read``: beats into the R queue while it has room, the next AR when a burst is queued."""
        pushed = False
        while True:
            if not self.pushing:
                if not self.ar_q:
                    return pushed
                self.pushing = self.ar_q.popleft()
            if self.r_q >= self.limit:
                return pushed
            self.r_q += 1
            self.pushing -= 1
            pushed = True

    def edge(self, start: bool, addr: int, n: int, rready: bool) -> None:
        moved = self.rvalid and rready
        taken = self.arvalid and self.arready  # the AR handshake of this edge, on the signals before it
        self.now += 1
        # the R source samples its handshake, drives its next beat unless paused (a paused source with beats
        # queued stays awake), or goes to sleep on an empty queue
        if not self.asleep and (moved or not self.rvalid):
            if self.r_q and (not self.paced or self._allowed(self.now)):
                self.r_q -= 1
                self.rvalid = True
                if self.paced:
                    self._drive(self.now)
            else:
                self.rvalid = False
                self.asleep = not self.r_q
        # the AR sink (woken by the same edge) queues the burst; READY falls while its queue is full. The
        # coroutines the edge's handshakes wake (_process_read) run after both, in cocotb's order
        if taken:
            self.ar_q.append(self.beats)
            if self.paced:
                self.bursts.append([self.beats, self.beats, self.now + self.latency])
        self.arready = len(self.ar_q) < self.limit
        if self._push():
            self.asleep = False  # a queued beat wakes the R source: it drives at the next edge
        self._mover(start, addr, n, moved, taken)

    @property
    def busy(self) -> bool:
        """accel_mm2s's ``busy``: beats of a started run still to move."""
        return self.to_receive != 0

    @property
    def requesting(self) -> bool:
        """accel_mm2s's ``requesting``: a run still has bursts to ask for, other than the last one if the AR
        channel takes it this cycle (a new run may start once it is low, in the cycle of that handshake)."""
        if self.arvalid:
            return not (self.arready and self.to_request == self.beats)
        return self.to_request != 0

    def _mover(self, start: bool, addr: int, n: int, moved: bool, taken: bool) -> None:
        n = -(-n // (self.size // 4)) if start else 0  # words to beats
        if start:  # only while not requesting: earlier runs' beats may still be on their way
            self.addr, self.to_request = addr & -self.size, n
            self.arvalid = n != 0  # the first burst is asked for from the next cycle on
            if n:
                self.beats = _burst(self.addr, n, self.size)
        elif taken:
            self.arvalid = False
            self.addr += self.size * self.beats
            self.to_request -= self.beats
        elif not self.arvalid and self.to_request:
            self.arvalid, self.beats = True, _burst(self.addr, self.to_request, self.size)
        self.to_receive += n - int(moved)


class WritePort:
    """accel_s2mm and the AxiRam's write side (``_process_write``, B source). AWREADY and WREADY stay high: the
    mover sends a burst's W beats only after its AW and one burst at a time, and keeps at most ``WRITE_OPEN``
    bursts open, so no queue fills (the B queue would at ``queue_limit`` responses: every timing's is >= 2). Runs
    overlap: a start is taken once the run before has taken all its beats; while that run still issues or sends
    bursts the new one waits (``pending``), its beats entering the FIFO behind, and open bursts stay counted. With a DDR
    timing the B source is paused as the list bench's pacer pauses it: a burst's B not before ``write_latency``
    edges after the edge that took its last W beat; and with ``write_beats`` < ``write_window`` the W sink is
    paused while the last ``write_window - 1`` edges took ``write_beats`` beats, WREADY then following the
    sink's ``_run`` loop (``stream.py`` ``StreamSink``): it samples ``pause`` at the top of its loop, drives
    READY from that sample at the next edge, and sleeps (READY held) while WVALID is low or it is paused, until
    WVALID or READY rises, ``_process_write`` takes a beat, or ``pause`` changes."""

    __slots__ = ("limit", "busy", "count", "to_take", "to_write", "open", "beats", "beat", "in_burst", "awvalid",
                 "addr", "w_left", "b_q", "bvalid", "asleep", "now", "paced", "latency", "due", "w_paced", "w_most",
                 "w_window", "takes", "wready", "w_sample", "w_awake", "w_pause", "size", "pending")

    def __init__(self, limit: int, ddr=None, parts: int = 1) -> None:
        self.limit, self.size = limit, 4 * parts  # size: bytes of a beat (parts 32-bit words)
        self.busy = self.in_burst = self.awvalid = self.bvalid = False
        self.count = self.to_take = self.to_write = self.open = self.beats = self.beat = self.addr = 0
        self.w_left, self.b_q, self.asleep = 0, 0, True
        self.pending = None  # (byte address, beats) of a run started while the one before still sends
        self.now, self.paced, self.latency = 0, ddr is not None, ddr.write_latency if ddr else 1
        self.due: deque = deque()  # earliest edge of each queued B response
        self.w_most, self.w_window = (ddr.write_beats, ddr.write_window) if ddr else (1, 1)
        self.w_paced = self.w_most < self.w_window
        self.takes: deque = deque()  # edges that took a W beat, the last window's
        # the W sink settled after reset: READY high, asleep (WVALID low), not paused
        self.wready, self.w_sample, self.w_awake, self.w_pause = True, False, False, False

    def state(self) -> tuple:
        timing = tuple(max(0, due - self.now) for due in self.due) if self.paced else ()
        if self.w_paced:
            timing += (self.wready, self.w_sample, self.w_awake, self.w_pause,
                       tuple(self.now - d for d in self.takes if d > self.now + 2 - self.w_window))
        return (self.busy, self.count, self.to_take, self.to_write, self.open, self.beat, self.in_burst,
                self.awvalid, self.w_left, self.b_q, self.bvalid, self.asleep, self.pending, timing)

    def settled(self) -> bool:
        """The W sink back in its state after reset, and no W beat recent enough to pause it again."""
        return not self.w_paced or (self.wready and not self.w_sample and not self.w_awake and not self.w_pause
                                    and all(d <= self.now + 2 - self.w_window for d in self.takes))

    def _w_sink(self, taken: bool, valid: bool) -> None:
        """The W sink at this edge (WVALID was ``valid``), then the wakes of the edge's time step: a beat taken
        (``_process_write`` dequeues it), READY or WVALID rising; a woken sink samples ``pause`` at once."""
        rose = False
        if self.w_awake:
            sleep = (not valid or self.w_sample) and self.w_sample == self.w_pause
            rose = not self.w_sample and not self.wready
            self.wready = not self.w_sample
            if sleep:
                self.w_awake = False
            else:
                self.w_sample = self.w_pause
        if not self.w_awake and (taken or rose or (self.in_burst and not valid)):
            self.w_awake, self.w_sample = True, self.w_pause

    def _w_pacer(self) -> None:
        """The bench's pacer after the edge: paused while the edges from ``now + 2 - write_window`` to the next
        one take ``write_beats`` beats (the next one's beat counted when WVALID and WREADY are high); a change
        of ``pause`` wakes a sleeping sink, which samples it."""
        if self.in_burst and self.wready:
            self.takes.append(self.now + 1)
        while self.takes and self.takes[0] <= self.now + 1 - (self.w_window - 1):
            self.takes.popleft()
        pause = len(self.takes) >= self.w_most
        if pause != self.w_pause:
            self.w_pause = pause
            if not self.w_awake:
                self.w_awake, self.w_sample = True, pause

    def ready(self) -> bool:
        return self.busy and self.to_take != 0 and self.count != FIFO_BEATS

    @property
    def requesting(self) -> bool:
        """A start would not be taken: the run still takes beats, or a run waits for the one before to send its
        own (accel_s2mm holds one run besides the one sending)."""
        return self.busy and (self.to_take != 0 or self.pending is not None)

    def edge(self, start: bool, addr: int, n: int, push: bool) -> None:
        pop, aw_done, b_done = self.in_burst and self.wready, self.awvalid, self.bvalid
        valid = self.in_burst
        last = pop and self.beat == self.beats - 1
        self.now += 1
        if not self.asleep:  # the B source: BREADY is always high; paused with a B queued, it stays awake
            if self.b_q and (not self.paced or self.now >= self.due[0]):
                self.b_q -= 1
                self.bvalid = True
                if self.paced:
                    self.due.popleft()
            else:
                self.bvalid, self.asleep = False, not self.b_q
        if pop:
            self.w_left -= 1
            if not self.w_left:  # the burst's last beat: its B response is queued
                self.b_q += 1
                self.asleep = False
                if self.paced:
                    self.due.append(self.now + self.latency)
        if aw_done:
            self.w_left = self.beats
        self._mover(push, pop, last, aw_done, b_done, start, addr, n)
        if self.w_paced:
            self._w_sink(pop, valid)
            self._w_pacer()

    def _mover(self, push: bool, pop: bool, last: bool, aw_done: bool, b_done: bool, start: bool, addr: int,
               n: int) -> None:
        sending = bool(self.to_write or self.in_burst or self.awvalid)
        beats = _burst(self.addr, self.to_write, self.size)
        issue = (self.busy and not self.in_burst and not self.awvalid and self.to_write and self.count >= beats
                 and self.open < WRITE_OPEN)
        done = self.busy and not sending and self.pending is None and self.open == b_done
        if push:
            self.to_take -= 1
        self.count += push - pop
        if issue:
            self.awvalid, self.beats = True, beats
        elif aw_done:
            self.awvalid, self.in_burst, self.beat = False, True, 0
            self.addr += self.size * self.beats
            self.to_write -= self.beats
        if pop:
            self.beat += 1
            if last:
                self.in_burst = False
        self.open += aw_done - b_done
        if start:  # only while not requesting: the run before has taken all its beats
            n = -(-n // (self.size // 4))  # words to beats
            self.to_take = n
            if sending:  # it waits until the run before has sent them
                self.pending = (addr & -self.size, n)
            else:
                self.addr, self.to_write = addr & -self.size, n
            self.busy = n != 0 or sending or self.open != 0
        elif self.pending is not None and not sending:
            (self.addr, self.to_write), self.pending = self.pending, None
        elif done:
            self.busy = False


# ---- the sequencer around them ----------------------------------------------------------------------------

I_FETCH_GO, I_FETCH, I_HEADER, I_ROWS, I_DONE = 1, 2, 3, 4, 6
PRE_NONE, PRE_GO, PRE_FETCH, PRE_READY = 0, 1, 2, 3  # the next call's descriptor (accel_seq's pre)
O_IDLE, O_STATUS, O_ROWS, O_DRAIN, O_REC_GO, O_REC, O_DONE, O_HOLD = 0, 1, 2, 4, 5, 6, 7, 8
RESULTS = (O_ROWS, O_DRAIN, O_HOLD)


class Shell:
    """accel_seq in list mode with its movers, rounding stage, memory and PE. :meth:`run` counts the cycles of
    each call by kind (see :class:`codesign.step.list_cycles.CallCycles`). Accumulating calls: a holding call's
    results go from the PE (or the unpacker) into the buffer, one 32-bit part a cycle, in ``O_HOLD`` until
    ``acc_n`` (accel_seq's count of parts taken) reaches ``count``; a drain runs the stage with 64-bit raw fields.
    At ``parts`` > 1 (stream words of ``32 * parts`` bits) it keeps accel_seq's unpacker (``unpack_left``,
    ``to_load``: result parts held, results not yet taken from the PE), its packer (``pack_have``: words of the
    beat) and the record's word counter."""

    def __init__(self, timing, arena_addr: int, descriptor_addrs: list, ddr=None, parts: int = 1) -> None:
        limit = timing.queue_limit if ddr is None else ddr.queue_limit  # the bench sets the AxiRam's from ddr
        self.rd, self.wr = ReadPort(limit, ddr, parts), WritePort(limit, ddr, parts)
        self.parts, self.unpack_left, self.to_load, self.pack_have, self.rec_word = parts, 0, 0, 0, RECORD_WORDS
        self.round, self.pe = RoundStage(parts), Pe()
        self.arena, self.descriptors = arena_addr, descriptor_addrs
        self.ist, self.ost, self.rd_go, self.wr_go, self.round_go = I_FETCH_GO, O_IDLE, True, False, False
        self.pre = PRE_NONE
        self.hold_go, self.acc_n = False, 0  # a holding call's start pulse; results the call took (accel_seq)
        self.seg = self.in_row = self.out_row = self.in_plane = self.out_plane = self.status = 0
        self.index, self.call, self.running = 0, None, True
        self.counts: dict = {}
        # cycles into the call when the next call's descriptor was in (PRE_READY), when its output side was done
        self.ready_at = self.done_at = None
        self.busy = (False, False, False, False, False)

    def state(self) -> tuple:
        return (self.rd.state(), self.wr.state(), self.round.state(), self.ist, self.ost, self.rd_go, self.wr_go,
                self.round_go, self.seg, self.in_row, self.out_row, self.in_plane, self.out_plane, self.unpack_left,
                self.to_load, self.pack_have, self.rec_word, self.hold_go, self.acc_n, self.pre)

    def run(self, calls, phases, keys) -> list:
        """Cycles of every call run, by kind, with its status and ``spare``: the cycles by which the next call's
        descriptor came in before the call's output side was done (negative: the call's end waited for it; None:
        no descriptor was fetched beside the call); the list stops after a refused call.

        A call that starts with every machine quiet (nothing in flight, the PE waiting for a header) takes
        cycles that depend only on its ``keys`` entry (its headers, block shapes, how its runs split into
        bursts, rounding packing), and it leaves the machines quiet again: such a call is simulated once per key."""
        runs, seen = [], {}
        while self.running and self.index < len(calls):
            index, start = self.index, self.quiet()
            if start and (start, keys[index]) in seen:
                run, end = seen[start, keys[index]]
                runs.append(run)
                self.index += 1
                self.running = run["status"] == 0 and self.index < len(calls)
                self._enter(end)
                continue
            self.call = calls[index]
            self.pe.phases.extend(phases[index][0])
            self.ready_at = self.done_at = None
            self.pe.advance()
            self.counts = {"fetch": 0, "pe": 0, "stall": 0, "record": 0}
            while self.running and self.index == index:
                self._cycle(len(calls))
                if self.counts["stall"] > HANG_CYCLES:
                    raise RuntimeError(f"call {index} stalls for {HANG_CYCLES} cycles: the shell would hang")
            spare = None if self.ready_at is None else self.done_at - self.ready_at
            runs.append({**self.counts, "status": phases[index][1], "spare": spare})
            end = self.quiet() if self.running else "stopped"
            if start and end:
                seen[start, keys[index]] = (runs[-1], end)
        return runs

    def _enter(self, start) -> None:
        """The machines as a call that ended quiet leaves them: the next call's descriptor, fetched while the call
        computed, taken (``"loaded"``: one I_FETCH cycle next; a list's first call alone starts ``"fetch"``)."""
        if start == "loaded":
            self.ist, self.rd_go = I_FETCH, False

    def quiet(self):
        """Every machine idle with empty queues, the PE between transactions, and the sequencer about to fetch a
        descriptor (``"fetch"``) or about to take one fetched while the call before computed (``"loaded"``): the
        states every call of a list starts from (registers left over hold data only); else None."""
        rd, wr, rs, pe = self.rd, self.wr, self.round, self.pe
        if self.ist == I_FETCH_GO and self.rd_go:
            start = "fetch"
        elif self.ist == I_FETCH and not self.rd_go:
            start = "loaded"
        else:
            return None
        idle = (self.ost == O_IDLE and self.pre == PRE_NONE and not self.wr_go
                and not self.round_go and not self.hold_go and not self.acc_n
                and not rd.busy and not rd.arvalid and not rd.to_request and rd.arready
                and not rd.ar_q and not rd.pushing and not rd.r_q and not rd.rvalid and rd.asleep
                and not wr.busy and not wr.count and not wr.in_burst and not wr.awvalid and not wr.w_left
                and not wr.b_q and not wr.bvalid and wr.asleep and not wr.open and wr.pending is None
                and not rs.busy and not rs.a and not rs.b and not rs.c and not rs.g_full and not rs.o_left
                and pe.kind is None and not pe.phases and not pe.side and not pe.jobs and rd.settled() and wr.settled()
                and not self.unpack_left and not self.to_load and not self.pack_have)
        return start if idle else None

    def _segment(self) -> tuple:
        segments = self.call.segments
        return segments[self.seg] if self.seg < len(segments) else None

    def _sends(self, index: int) -> bool:
        """Whether segment ``index`` of the call has words to send."""
        segments = self.call.segments
        return index < len(segments) and segments[index].words != 0 and segments[index].rows != 0

    def _rows_left(self) -> bool:
        """The current plane of the segment being sent has rows still to start (accel_seq: ``!plane_done``)."""
        block = self._segment()
        return block is not None and block.words != 0 and self.in_row < block.rows

    def _out_rows_left(self) -> bool:
        """The out block's current plane has rows still to start (accel_seq: ``!out_plane_done``)."""
        out = self.call.out
        return out.words != 0 and self.out_row < out.rows

    def _cycle(self, n_calls: int) -> None:
        """One clock cycle: the handshakes from the registers, then every machine's edge; a compute phase with
        nothing else moving is a fixed point and is skipped to its last cycle."""
        pe, rd, wr, rs = self.pe, self.rd, self.wr, self.round
        before = self.state() if pe.kind == WAIT and pe.left > 2 and not pe.side and not pe.jobs else None
        out_valid = pe.out_valid
        results = not self.round_go and not self.hold_go and self.ost in RESULTS
        hold = self.call.acc_hold  # a holding call's results go into the buffer alone: always taken
        wr_ready = wr.ready()
        dropping = self.ost == O_REC_GO and self.status != 0
        if self.parts == 1:  # the unpacker and packer are wires
            shakes = rs.handshakes(int(results and self.ost == O_ROWS and wr_ready))
            acc_take = int(results and out_valid and (hold or shakes[0] != 0))
            give = out_valid and (self.ost == O_STATUS or dropping or acc_take)
            round_take = 0 if hold else acc_take
            push = wr_ready and (self.ost == O_REC or shakes[2] != 0)
            moves = None
        else:
            shakes, give, moves = self._parts_handshakes(results, out_valid, dropping, wr_ready, hold)
            acc_take = moves[1]
            round_take, push = 0 if hold else acc_take, moves[3]
        in_ready = pe.takes(give)  # the output side's handshakes come from registers alone
        # a row's beats flow while later rows are asked for (not the next call's descriptor's)
        rows = self.ist in (I_ROWS, I_DONE) and self.pre != PRE_FETCH
        rvalid = rd.rvalid and rd.busy
        rready = (self.ist == I_FETCH or self.pre == PRE_FETCH or (rows and in_ready)) and rd.busy
        take = in_ready and (self.ist == I_HEADER or (rows and rvalid))
        self._count(take, give)
        self.busy = (rd.busy, wr.busy, rs.busy, rd.requesting, wr.requesting)  # read before the edge
        rd_row = self.ist == I_ROWS and not self.busy[3] and self._rows_left()
        wr_row = self.ost == O_ROWS and not self.busy[4] and self._out_rows_left()
        rd_args, wr_args = self._mover_args()
        rd.edge(self.rd_go or rd_row or self.pre == PRE_GO, *rd_args, rready)
        wr.edge(self.wr_go or wr_row, *wr_args, push)
        if self.round_go:
            rs.start(self.call.rounding, self.call.count, self.call.acc_add)
        else:
            rs.edge(round_take, shakes)
        status = pe.status if out_valid else None
        pe.edge(take, give)
        if moves is not None:
            self._parts_edge(*moves)
        self._sequence(in_ready, out_valid, status, n_calls, rd_row, wr_row)
        self.acc_n = 0 if not results else self.acc_n + acc_take  # after the FSMs: they read it before the edge
        if before is not None and pe.kind == WAIT and not pe.side and not pe.jobs and self.state() == before:
            skipped = pe.left - 1
            pe.left -= skipped
            rd.now += skipped
            wr.now += skipped
            self.counts["pe"] += skipped

    def _parts_handshakes(self, results: bool, out_valid: bool, dropping: bool, wr_ready: bool,
                          hold: bool = False) -> tuple:
        """The g_parts handshakes of this cycle: (the rounding stage's, the PE gives a word, (a PE word loaded
        into the unpacker, the parts moved on (to the stage, or into the buffer when ``hold``; an accumulating
        call's one a cycle), the words into the packer (the stage's, or the record's one), a beat out to the write
        mover))."""
        parts, ost, have = self.parts, self.ost, self.unpack_left
        beat_out = self.pack_have == parts and wr_ready
        pack_room = parts - self.pack_have if self.pack_have != parts else parts if beat_out else 0
        shakes = self.round.handshakes(pack_room if results and ost == O_ROWS else 0)
        offer = 0 if not results else min(have, 1) if hold or self.call.acc_add else have
        part_moves = offer if hold else min(offer, shakes[0])
        results_ready = self.to_load != 0 and (have == 0 or have == part_moves)
        give = out_valid and (ost == O_STATUS or dropping or (results and results_ready))
        load = results and out_valid and results_ready
        taken = min(int(self.rec_word != RECORD_WORDS), pack_room) if ost == O_REC else shakes[2]
        return shakes, give, (load, part_moves, taken, beat_out)

    def _parts_edge(self, load: bool, part_moves: int, taken: int, beat_out: bool) -> None:
        """The unpacker, the packer and the record's word counter at the edge (before the FSMs move)."""
        if self.round_go or self.hold_go:
            self.unpack_left, self.to_load = 0, self.call.count
        elif load:
            self.unpack_left = min(self.to_load, self.parts)
            self.to_load = max(0, self.to_load - self.parts)
        elif part_moves:
            self.unpack_left -= part_moves
        self.pack_have = (0 if beat_out else self.pack_have) + taken
        if taken and self.ost == O_REC:
            self.rec_word += 1

    def _count(self, take: bool, give: bool) -> None:
        if self.ist in (I_FETCH_GO, I_FETCH):
            kind = "fetch"
        elif self.ost in (O_REC, O_DONE):
            kind = "record"
        else:
            kind = "pe" if self.pe.works(take, give) else "stall"
        self.counts[kind] += 1

    def _mover_args(self) -> tuple:
        """(address, words) each mover latches if started this cycle."""
        if self.ist == I_FETCH_GO:
            rd_args = (self.descriptors[self.index], DESCRIPTOR_WORDS)
        elif self.pre == PRE_GO:
            rd_args = (self.descriptors[self.index + 1], DESCRIPTOR_WORDS)
        else:
            block = self._segment()
            rd_args = (self.arena + block.offset + self.in_plane * block.plane_stride + self.in_row * block.stride,
                       block.words) if block else (0, 0)
        call = self.call
        if self.ost == O_REC:
            wr_args = (self.arena + call.record, RECORD_WORDS)
        else:
            out = call.out
            wr_args = (self.arena + out.offset + self.out_plane * out.plane_stride + self.out_row * out.stride,
                       out.words)
        return rd_args, wr_args

    def _sequence(self, in_ready: bool, out_valid: bool, status, n_calls: int, rd_row: bool, wr_row: bool) -> None:
        """accel_seq's two FSMs at the edge (the fetch's and the record's start pulses last one cycle; a row's
        run starts in any cycle of I_ROWS / O_ROWS in which the mover takes a start, ``rd_row`` / ``wr_row``)."""
        wr_go, round_go, hold_go = self.wr_go, self.round_go, self.hold_go
        self.rd_go = self.wr_go = self.round_go = self.hold_go = False
        ist, ost, call, pre = self.ist, self.ost, self.call, self.pre
        if pre == PRE_NONE and ist == I_DONE and not self.busy[0] and self.index + 1 < n_calls:
            self.pre = PRE_GO
        elif pre == PRE_GO:
            self.pre = PRE_FETCH
        elif pre == PRE_FETCH and not self.busy[0]:
            self.pre, self.ready_at = PRE_READY, sum(self.counts.values())
        if ist == I_FETCH_GO:
            self.ist = I_FETCH
        elif ist == I_FETCH and not self.busy[0]:
            self.ist = I_HEADER if call.header is not None else I_ROWS
            self.ost, self.seg, self.in_row, self.out_row, self.status = O_STATUS, 0, 0, 0, 0
            self.in_plane = self.out_plane = 0
        elif ist == I_HEADER and in_ready:
            self.ist = I_ROWS
        elif ist == I_ROWS:
            block = self._segment()
            if rd_row:
                self.in_row += 1
            elif self._rows_left():
                pass  # the mover still asks for the row before
            elif block is not None and block.words and self.in_plane + 1 < block.planes:
                self.in_plane, self.in_row = self.in_plane + 1, 0  # a cycle between planes
            else:  # the next segment a cycle later; an empty segment 2 takes none (accel_seq: seg2_empty)
                if self.seg == 2 or (self.seg == 1 and not self._sends(2)):
                    self.ist = I_DONE
                self.seg, self.in_row, self.in_plane = self.seg + 1, 0, 0
        self._output(ost, ist, out_valid, status, wr_go, round_go, n_calls, hold_go, wr_row, pre)

    def _output(self, ost: int, ist: int, out_valid: bool, status, wr_go: bool, round_go: bool,
                n_calls: int, hold_go: bool, wr_row: bool, pre: int) -> None:
        call = self.call
        if ost == O_STATUS and out_valid:
            self.status = status
            if status != 0 or call.count == 0:
                self.ost = O_REC_GO
            elif call.acc_hold:  # into the buffer: nothing to the stage, nothing written
                self.hold_go, self.ost = True, O_HOLD
            else:
                self.round_go, self.ost = True, O_ROWS
        elif ost == O_ROWS:
            if wr_row:
                self.out_row += 1
            elif self._out_rows_left():
                pass  # the mover still takes the row before's beats
            elif call.out.words and self.out_plane + 1 < call.out.planes:
                self.out_plane, self.out_row = self.out_plane + 1, 0  # a cycle between planes
            elif not self.busy[4]:  # the last row's beats are all taken: the stage's words stop here
                self.ost = O_DRAIN
        elif ost == O_DRAIN and not self.busy[2] and not round_go:
            self.ost = O_REC_GO
        elif ost == O_HOLD and not hold_go and self.acc_n == call.count:
            self.ost = O_REC_GO
        elif ost == O_REC_GO and ist == I_DONE and (not self.busy[0] or pre == PRE_FETCH) and not self.busy[1]:
            self.wr_go, self.ost, self.rec_word = True, O_REC, 0
        elif ost == O_REC and not wr_go and not self.busy[1]:
            self.ost, self.done_at = O_DONE, sum(self.counts.values())
        elif ost == O_DONE and pre not in (PRE_GO, PRE_FETCH):  # the next descriptor's reads end first
            self.index += 1
            if self.status != 0 or self.index == n_calls:
                self.running, self.pre = False, PRE_NONE
            else:  # PRE_READY: the record's start asked for the next descriptor (accel_seq)
                self.ist, self.ost, self.pre = I_FETCH, O_IDLE, PRE_NONE
