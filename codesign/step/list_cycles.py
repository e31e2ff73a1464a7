"""Cycle model of a whole call list on the RTL shell: the cycles from ``run_start`` to ``ap_done``.

A call list's time is not a sum of closed forms: the read mover's per-row runs
feed the PE only while it loads, the PE's results leave only as fast as the
rounding stage and the write mover (two bursts open at a time)
take them, and the sequencer adds a cycle at every plane, segment and phase. So
:func:`list_cycles` *simulates* the shell, cycle by cycle, at the level of its
handshakes: the sequencer's two FSMs (``rtl/accel/accel_seq.v``), the read and
write movers (``accel_mm2s.v``, ``accel_s2mm.v``), the rounding stage's
pipeline registers (``accel_round.v``; its busy time then equals
:func:`codesign.numerics.round_stage.latency_cycles`), the accumulation buffer's path (a holding call's results
taken one a cycle into the buffer in ``O_HOLD``, nothing sent to the stage or written; a raw drain's sums leaving
the stage as two words each; the buffer, read a cycle ahead, never stalls), and the PE as a sequence
of phases from its documented structure (``docs/tt_pe.md``, "Cycles", "Stream width"): take
``n`` words, compute ``n`` cycles, give ``n`` words. No data values move; only
the header words a PE decodes are read (from the descriptor, or from the arena
when the header is inline).

The memory is cocotbext-axi 0.1.28's ``AxiRam`` without random pauses (the
bench's ``pause=0``), modelled as its source behaves (``cocotbext/axi/axi_slave.py``,
``stream.py``), see :class:`MemoryTiming`; optionally with the list bench's
deterministic DDR latency and bandwidth model on top (:class:`DdrTiming`),
which the model follows pause for pause. A PE's compute phases are skipped
in one step when nothing else moves (the state is then a fixed point), so a
list costs about one Python step per word moved, once: a list whose calls have
the timing keys of a list priced before (another build of the other PE leaves
it so) takes that list's cycles, and each transaction's phases are worked out
once per PE, build and header.

Units: clock cycles of ``ap_clk`` throughout; byte addresses.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Dict, Mapping, NamedTuple, Optional, Sequence, Tuple

import numpy as np

from codesign.contracts.calls import DESCRIPTOR_BYTES, DESCRIPTOR_WORDS, RECORD_WORDS, Block, Call
from codesign.step.list_pe import IN, THROUGH, WAIT, pe_phases
from codesign.step.list_shell import WRITE_OPEN, Shell
from codesign.step.model import busiest_port

CONTROL_CYCLES = 2  # the run_start cycle, and the cycle after the sequencer falls idle (ap_done is registered)


@dataclass(frozen=True)
class MemoryTiming:
    """The memory behind both m_axi ports, as cocotbext-axi's ``AxiRam`` with no pause generator behaves.

    Derived from the source (``cocotbext/axi/axi_slave.py``, ``stream.py`` of 0.1.28), not fitted:

    * ``queue_limit``: every channel's queue holds 2 items (``queue_occupancy_limit = 2``, axi_slave.py lines
      54-58 and 225-227); a sink drops READY when its queue is full (stream.py ``StreamSink._run``), a source's
      ``send`` blocks when full (``StreamSource.send``).
    * ``read_latency``: cycles from the edge that takes an AR to the first cycle RVALID is high. The AR sink
      queues the AR at that edge; ``_process_read`` (line 276) wakes in the same time step and queues beats;
      the R source, asleep on its empty queue, wakes and drives the first beat at the *next* edge
      (``StreamSource._run``: drive only at a clock edge). So 1: a beat moves at the second edge after AR.
    * ``write_latency``: cycles from the edge that takes a burst's last W beat to the first cycle BVALID is
      high: ``_process_write`` (line 113) queues B in the time step of that edge (line 203), and the B source
      drives it at the next edge: 1.
    * bursts pipeline: ``_process_read`` takes the next queued AR as soon as the last beat of a burst is queued,
      so the beats of back-to-back bursts of one run follow each other with no idle cycle, and R stays valid
      while RREADY is low (up to one driven plus ``queue_limit`` queued beats).
    """

    queue_limit: int = 2
    read_latency: int = 1
    write_latency: int = 1

    def __post_init__(self) -> None:
        for name in ("queue_limit", "read_latency", "write_latency"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name}={value!r} must be a positive integer (cycles or queue entries)")
        _check_queue_limit(self.queue_limit)


def _check_queue_limit(limit: int) -> None:
    """The write mover keeps up to WRITE_OPEN bursts open: a memory whose B queue held fewer responses would stall
    W beats, which the model does not follow."""
    if limit < WRITE_OPEN:
        raise ValueError(f"queue_limit={limit!r} must be >= {WRITE_OPEN}: the write mover keeps {WRITE_OPEN} bursts "
                         f"open (accel_s2mm's MAX_OPEN), and the memory's B queue must hold their responses")


AXI_RAM = MemoryTiming()


@dataclass(frozen=True)
class DdrTiming:
    """A deterministic DDR latency and bandwidth model put on top of the AxiRam by the list bench's pacer
    (:class:`codesign.shell.list_bench.DdrPacer`, which only pauses the RAM's R and B sources through
    cocotbext-axi's ``pause`` attribute), and followed by the cycle model. Units: cycles of ``ap_clk``, AXI beats.

    * ``read_latency``: the first R beat of a burst is driven no earlier than this many edges after the edge that
      took its AR (RVALID high from that edge on). 1 is the AxiRam alone: it never drives sooner.
    * ``write_latency``: a burst's B response is driven no earlier than this many edges after the edge that took
      its last W beat. 1 is the AxiRam alone.
    * ``read_beats`` / ``read_window``: at most ``read_beats`` R beats are driven in any ``read_window``
      consecutive edges: a port or DDR slower than the PL's data bus (1/1: no limit).
    * ``write_beats`` / ``write_window``: the W sink is paused while the last ``write_window - 1`` edges (the
      next one included) took ``write_beats`` W beats (1/1: never). A throttle, not a hard cap: the sink reads
      its pause one or two edges late (cocotbext-axi's ``StreamSink`` samples it at the top of its loop), so a
      burst can pass ``write_beats`` beats in a window; the long-run rate is below one beat per cycle.

    Defaults, a Zynq-7000 HP port into PS DDR3 seen from a 100 MHz PL clock (assumptions, with their sources):
    ``read_latency`` = 30 cycles (300 ns): the DDR3 access (CL, tRCD ~ 14 ns each on DDR3-1066) plus the HP
    port's FIFOs, the memory interconnect and the DDRC's scheduler; measured figures are of this order (Manev et
    al., "Unexpected Diversity: Quantitative Memory Analysis for Zynq UltraScale+ Systems", FPT 2019, and its
    tool github.com/kmanev/ZynqUSp-AXI-Speedtest, report average HP read latencies of tens of PL cycles, e.g.
    68 cycles in issue #1 there). ``write_latency`` = 20 cycles: the HP port gives no early BRESP (the response
    comes back from the DDR controller; UG1085's note on the FIFO interface, UG585 chapter 5 alike), assumed
    shorter than a read as the controller posts writes. Bandwidth 1/1: UG585 (v1.11, section 22.3) gives 2,840
    MB/s per HP port for DDR reads, against 400 MB/s for a 32-bit beat per cycle at 100 MHz (800 MB/s at 64
    bits, 1,600 MB/s at 128 bits), so a single port does not limit the shell; ``read_beats`` < ``read_window``
    models a shared or faster-clocked port (e.g. 3/4 for a DDR at UG585's ~75 % controller efficiency).

    ``queue_limit``: the items every channel queue of the AxiRam holds (its ``queue_occupancy_limit``, which
    the list bench sets from this field), so the reads and writes the port accepts before it drops READY, and the
    beats it buffers. 8: UG1085 (v2.4, "AXI Interface Programming") gives the Zynq UltraScale+ HP ports' FIFO
    interface 8-deep read and write command queues and a command acceptance of eight, with 128-entry data FIFOs
    (so 8 buffered beats is the conservative side); for the Zynq-7000's HP ports (UG585 section 5.3, the same
    AFI block of command and data FIFOs) the figure is assumed equal, not checked. The AxiRam alone holds 2
    (:class:`MemoryTiming`), which kept a run of one-beat rows at about two reads in flight.
    """

    read_latency: int = 30
    write_latency: int = 20
    read_beats: int = 1
    read_window: int = 1
    write_beats: int = 1
    write_window: int = 1
    queue_limit: int = 8

    def __post_init__(self) -> None:
        for name in ("read_latency", "write_latency", "read_beats", "read_window", "write_beats", "write_window",
                     "queue_limit"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name}={value!r} must be a positive integer (cycles or beats)")
        _check_queue_limit(self.queue_limit)
        for side in ("read", "write"):
            beats, window = getattr(self, f"{side}_beats"), getattr(self, f"{side}_window")
            if beats > window:
                raise ValueError(f"{side}_beats={beats} must not exceed {side}_window={window}")


@dataclass(frozen=True)
class CallCycles:
    """One call's cycles (from its descriptor fetch's start pulse, or the one cycle that takes the descriptor read
    while the call before computed, to its end: its record's last B response and the next descriptor's last
    beat, both included), split by what the shell waited for:

    * ``fetch``: the descriptor read (I_FETCH_GO, I_FETCH): the list's first call's; one cycle for the others;
    * ``pe``: the PE working: taking its header or an operand word, giving its status or a result, computing;
    * ``stall``: the rest before the record: the PE waiting for a word the read mover has not brought (AR
      latency, a new row's run), or unable to give a result the rounding stage or write mover cannot take, and
      the output side draining after the PE's last word (rounding pipeline, last bursts, B responses);
    * ``record``: writing the 8-word record and waiting for its B response, and for the next call's descriptor
      where it is still coming in (O_REC, O_DONE).
    """

    fetch: int
    pe: int
    stall: int
    record: int
    status: int = 0

    def __post_init__(self) -> None:
        for name in ("fetch", "pe", "stall", "record", "status"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 0:
                raise ValueError(f"{name}={value!r} must be a non-negative integer")

    @property
    def total(self) -> int:
        return self.fetch + self.pe + self.stall + self.record


@dataclass(frozen=True)
class ListCycles:
    """A list's cycles from the cycle ``run_start`` is high to the cycle ``ap_done`` is high (``total``): the
    calls run (a refused call is the last one), plus :data:`CONTROL_CYCLES`. ``total`` is what the bench's
    ``busy_cycles`` measures; a host adds its register writes and polling on top."""

    calls: Tuple[CallCycles, ...]
    control: int = CONTROL_CYCLES
    # per call run, the cycles by which the next call's descriptor was in before the call's output side was done
    # (negative: the call's end waited for it; None: none fetched beside it); for fast_step_cycles
    spare: Tuple[Optional[int], ...] = field(default=(), compare=False, repr=False)

    def __post_init__(self) -> None:
        if not self.calls or not all(isinstance(call, CallCycles) for call in self.calls):
            raise ValueError("a list's cycles need one CallCycles per call run")
        if self.control < 0:
            raise ValueError(f"control={self.control} must be non-negative")

    @property
    def total(self) -> int:
        return self.control + sum(call.total for call in self.calls)

    def breakdown(self) -> Dict[str, int]:
        """Cycles summed over the calls by kind, plus the control cycles: they add up to ``total``."""
        parts = {name: sum(getattr(call, name) for call in self.calls) for name in ("fetch", "pe", "stall", "record")}
        return {**parts, "control": self.control}


def _stream_words(call: Call, parts: int) -> int:
    """Stream words (of ``parts`` 32-bit words) ``call`` sends the PE: its header (one), its segments' rows."""
    return (call.header is not None) + sum(-(-block.words // parts) * block.rows * block.planes
                                           for block in call.segments)


def _gather_word(arena: np.ndarray, call: Call, index: int, parts: int = 1) -> int:
    """Stream word ``index`` of what ``call`` streams into the PE (its header first, then its segments' rows)
    as one integer, its ``parts`` 32-bit words least significant first (a header decodes from the whole word)."""
    if call.header is not None:
        if index == 0:
            return int(call.header)
        index -= 1
    for block in call.segments:
        per_row = -(-block.words // parts)
        if index < per_row * block.rows * block.planes:
            row, col = divmod(index, per_row)
            at = int(block.row_offsets()[row]) // 4 + col * parts
            words = arena[at:at + min(parts, block.words - col * parts)]
            return sum(int(word) << (32 * p) for p, word in enumerate(words))
        index -= per_row * block.rows * block.planes
    raise IndexError(f"stream word {index} past the call's input")


def call_phases(pe, spec, arena: np.ndarray, call: Call) -> Tuple[list, int, tuple]:
    """The PE's phases for ``call``'s input words (one transaction per header the PE takes), the status of the
    first and the headers: ``([(kind, n, status), ...], status, headers)``. A call must hold whole transactions,
    and an accepted transaction's results must be the call's ``count`` (else the shell would hang or the PE
    would start the next call mid-transaction; the builders never do this). Positions count stream words of
    ``spec.stream_bits``."""
    parts = int(getattr(spec, "stream_bits", 32)) // 32
    total = _stream_words(call, parts)
    if not total:
        raise ValueError("a call with no input words never gets a status: the shell would wait for ever")
    phases: list = []
    headers: list = []
    position, first = 0, None
    while position < total:
        header = _gather_word(arena, call, position, parts)
        headers.append(header)
        steps, status, operand_words, results = _transaction_of(pe.name, spec, header)
        if first is None:
            first = status
            if status == 0 and results != call.count:
                raise ValueError(f"the PE gives {results} results for header {header:#010x}; the call takes "
                                 f"{call.count}")
        phases.extend(steps)
        position += 1 + operand_words
    if position != total:
        raise ValueError(f"the call streams {total} stream words, not whole transactions ({position})")
    return phases, 0 if first is None else first, tuple(headers)


@functools.lru_cache(maxsize=4096)
def _transaction_of(name: str, spec, header: int) -> tuple:
    """:func:`codesign.step.list_pe.pe_phases` of PE ``name``, each (PE, build, header) worked out once: a step's
    lists repeat a few headers over thousands of calls, and a transaction's phases list every result beat."""
    steps, status, operand_words, results = pe_phases(PeName(name), spec, header)
    return tuple(steps), status, operand_words, results


def _timing_key(call: Call, headers: tuple, arena_addr: int, descriptor_addr: int, parts: int = 1) -> tuple:
    """What a call's cycles depend on, from a quiet start: the headers the PE decodes, whether the header is
    sent from the descriptor, each block's shape and how its rows split into bursts (:func:`_bursts`), the result
    count, the rounding stage's packing (not its shift or width) and the bursts of the descriptor and record."""
    def block(b: Block) -> tuple:
        return (b.words, b.rows, b.planes) + _bursts(arena_addr + b.row_offsets(), b.words, parts, (
            b.stride & 0xFFF, b.plane_stride & 0xFFF, (arena_addr + b.offset) & 0xFFF))

    cfg = call.rounding
    record, descriptor = arena_addr + call.record, descriptor_addr
    return (headers, call.header is not None, tuple(block(b) for b in call.segments), block(call.out), call.count,
            bool(cfg.enable), cfg.lanes, cfg.group_words, cfg.row_values,
            _bursts(np.array([record]), RECORD_WORDS, parts, (record & 0xFFF,)),
            _bursts(np.array([descriptor]), DESCRIPTOR_WORDS, parts, (descriptor & 0xFFF,)), call.acc_add,
            call.acc_hold)


def _bursts(addresses: np.ndarray, words: int, parts: int, pages: tuple) -> tuple:
    """How the movers split runs of ``words`` 32-bit words from each of ``addresses`` (bytes) into bursts, as far
    as the cycles go: ``()`` where no run crosses a 4 KiB page, for then every run's bursts are ``MAX_BURST``
    beats and a short last whatever its address (``list_shell._burst``); else ``pages``, the addresses' offsets
    in their pages that fix every split. So calls of one shape at other addresses share a key, and a list is
    simulated once per shape, not once per address."""
    size = 4 * parts
    if not words or not addresses.size or np.all((addresses & -size & 0xFFF) + size * -(-words // parts) <= 4096):
        return ()
    return ("pages",) + pages


def list_cycles(pe, spec, calls: Sequence[Call], arena: np.ndarray, *, timing: MemoryTiming = AXI_RAM,
                arena_addr: int = 0x0010_0040, list_addr: int = 0x0020_0000,
                ddr: Optional[DdrTiming] = None) -> ListCycles:
    """Cycles of the shell running ``calls`` (one start) on ``arena`` at byte address ``arena_addr`` (``in`` and
    ``out``), the descriptors at ``list_addr`` (``calls``); defaults: the list bench's addresses. ``arena`` is
    read only for inline headers (a header an earlier call of the list writes is not seen). Stream words of
    ``spec.stream_bits`` (32, 64 or 128: the movers move beats of that width, accel_seq unpacks and packs).
    ``ddr``: the list bench's DDR latency and bandwidth model on top of the memory (None: the AxiRam alone, the
    bench's ``pause=0``)."""
    bits = int(getattr(spec, "stream_bits", 32))
    if bits not in (32, 64, 128):
        raise ValueError(f"the shell runs lists on 32-, 64- or 128-bit stream words, not {bits}")
    arena = np.asarray(arena, dtype=np.uint32)
    phases = [call_phases(pe, spec, arena, call) for call in calls]
    descriptors = [list_addr + DESCRIPTOR_BYTES * c for c in range(len(calls))]
    keys = [_timing_key(call, found[2], arena_addr, at, bits // 32)
            for call, found, at in zip(calls, phases, descriptors)]
    # a call fetches the next call's descriptor while it computes: its cycles depend on that fetch's bursts too
    ahead = [_bursts(np.array([at]), DESCRIPTOR_WORDS, bits // 32, (at & 0xFFF,)) for at in descriptors[1:]]
    keys = [(key, next_) for key, next_ in zip(keys, ahead + [None])]
    # what the whole list's cycles depend on: the PE and its build (they give each header's phases), the memory,
    # the width and every call's key in order. The shell starts a list from reset and each call's cycles follow
    # from the state the call before left and its own key, so lists of equal keys take equal cycles (another
    # IP's copy of a list, a list a build of the other PE leaves alone)
    whole = (pe.name, spec, timing, ddr, bits, tuple(keys))
    found = _LISTS.get(whole)
    if found is None:
        runs = Shell(timing, arena_addr, descriptors, ddr, bits // 32).run(calls, phases, keys)
        found = _keep(_LISTS, LISTS_KEEP, whole, ListCycles(
            calls=tuple(CallCycles(run["fetch"], run["pe"], run["stall"], run["record"], run["status"])
                        for run in runs), spare=tuple(run["spare"] for run in runs)))
    return found


_LISTS: Dict[tuple, ListCycles] = {}
LISTS_KEEP = 512  # lists whose cycles are kept (every list of a few builds of a large step; the oldest go first)


def _keep(cache: dict, most: int, key: tuple, value):
    """``value`` kept in ``cache`` under ``key``, the oldest entry dropped first once ``most`` are kept."""
    if len(cache) >= most:
        cache.pop(next(iter(cache)))
    cache[key] = value
    return value


BOARD_DDR = DdrTiming()  # the HP port's latency and bandwidth the list bench and the step models assume


class PeName(NamedTuple):
    """What the cycle model reads of a PE: its name. :func:`codesign.pe.get_pe` would load the PE's build code
    too, which a board's runtime does not have."""

    name: str


def list_words(calls: Sequence[Call]) -> Tuple[int, int]:
    """The 32-bit words a list moves over the port: in, every descriptor and operand row; out, every result and
    record (what a stage of it charges the port and DDR with)."""
    words_in = sum(DESCRIPTOR_WORDS + sum(block.total_words for block in call.segments) for call in calls)
    words_out = sum(call.out.total_words + RECORD_WORDS for call in calls)
    return words_in, words_out


def phase_cycles(phase: Sequence[Tuple[str, Sequence[Call]]], specs, arena: np.ndarray, *,
                 ddr: Optional[DdrTiming] = None) -> Tuple[int, int, int]:
    """``(cycles, words in, words out)`` of a phase's lists (``(pe, calls)`` each) run side by side, each on its
    own IP of the build ``specs[pe]``: the longest list's cycles (:func:`list_cycles` under ``ddr``), the words
    of all (:func:`list_words`)."""
    cycles = words_in = words_out = 0
    for pe, calls in phase:
        cycles = max(cycles, list_cycles(PeName(pe), specs[pe], calls, arena, ddr=ddr).total)
        moved = list_words(calls)
        words_in, words_out = words_in + moved[0], words_out + moved[1]
    return cycles, words_in, words_out


def phase_port_words(phase: Sequence[Tuple[str, Sequence[Call]]], ports: Mapping[str, Sequence[int]]
                     ) -> Tuple[int, int]:
    """Words in and out of a phase's busiest high-performance port: a PE's ``k``-th list of the phase on its
    ``k``-th IP (as the board's shell starts them), that IP on port ``ports[pe][k]``
    (:func:`codesign.step.model.busiest_port`)."""
    on = [ports[pe][sum(other == pe for other, _ in phase[:index])] for index, (pe, _) in enumerate(phase)]
    return busiest_port([list_words(calls) for _, calls in phase], on)


def step_cycles(pe: str, spec, lists: Mapping[str, Sequence[Call]], arena: np.ndarray, *,
                ddr: Optional[DdrTiming] = None) -> Dict[str, object]:
    """A step's lists run one after the other on one ``pe`` IP of the build ``spec`` (``lists``: name -> calls,
    e.g. forward and backward): each list's cycles under ``ddr`` (from ``run_start`` to ``ap_done``) by its
    name, their ``total``, their ``breakdown`` summed (fetch, pe, stall, record, control), ``calls``, and each
    list's ``words`` in and out over the port (:func:`list_words`)."""
    runs = {name: list_cycles(PeName(pe), spec, calls, arena, ddr=ddr) for name, calls in lists.items()}
    breakdown: Dict[str, int] = {}
    for run in runs.values():
        for key, value in run.breakdown().items():
            breakdown[key] = breakdown.get(key, 0) + value
    return {**{name: run.total for name, run in runs.items()}, "total": sum(run.total for run in runs.values()),
            "breakdown": breakdown, "calls": sum(len(calls) for calls in lists.values()),
            "words": {name: list_words(calls) for name, calls in lists.items()}}


def wait_cycles(pe: str, spec, calls: Sequence[Call], arena: np.ndarray) -> int:
    """Cycles the PE spends computing with no stream word moving (its WAIT phases) over ``calls`` on ``spec``."""
    return sum(n for call in calls for kind, n, _ in call_phases(PeName(pe), spec, arena, call)[0] if kind == WAIT)


def _shape(pe: str, spec, calls: Sequence[Call], arena: np.ndarray) -> Tuple[tuple, np.ndarray, np.ndarray]:
    """What a list's cycles depend on but its compute lengths (the calls and every phase but WAIT's length); every
    WAIT phase's length summed over the list, and per call over the WAIT phases after its last input word (the
    next call's descriptor is fetched beside those), in cycles."""
    waits, tails, streams = 0, [], []
    for call in calls:
        phases = call_phases(PeName(pe), spec, arena, call)[0]
        streams.append(tuple((kind, 0 if kind == WAIT else n, status) for kind, n, status in phases))
        last_in = max((at for at, (kind, _, _) in enumerate(phases) if kind in (IN, THROUGH)), default=-1)
        waits += sum(n for kind, n, _ in phases if kind == WAIT)
        tails.append(sum(n for kind, n, _ in phases[last_in + 1:] if kind == WAIT))
    return (tuple(calls), tuple(streams)), waits, np.array(tails, dtype=np.int64)


def _tail_bounds(run: ListCycles, calls: int) -> np.ndarray:
    """``(2, calls)``: per call the least and most change of its compute after its last input word (cycles) that
    shifts its cycles by that change alone. The next call's descriptor is fetched beside that compute and the
    call's end waits for it: where it came in ``spare`` cycles early the compute may be up to ``spare - 1``
    shorter (one cycle kept in hand); where the end waited (or could have), only as long. Calls after a refused
    one and the last call (nothing fetched beside it) are free."""
    if len(run.spare) != len(run.calls):
        raise ValueError(f"{len(run.spare)} spare figures for {len(run.calls)} calls run: not the shell model's")
    bounds = np.full((2, calls), np.inf)
    bounds[0] = -np.inf
    for index, spare in enumerate(run.spare):
        if spare is not None:
            bounds[:, index] = (min(0, 1 - spare), np.inf) if spare >= 0 else (0, 0)
    return bounds


_PRICED: Dict[tuple, tuple] = {}
PRICED_KEEP = 256  # step shapes whose exact cycles are kept (a knob table's classes; the oldest go first)


def fast_step_cycles(pe: str, spec, lists: Mapping[str, Sequence[Call]], arena: np.ndarray, *,
                     ddr: Optional[DdrTiming] = None) -> Dict[str, object]:
    """:func:`step_cycles` for a design-space search: the step is simulated once per *shape* (its calls and every
    PE phase but the compute phases' lengths, the stream width and ``ddr``); a build of the same shape (an array
    of other rows and columns, a CSB PE of more multipliers) is priced from it by its compute cycles alone.

    Why that is the cycle model's figure: the FP-MAC array and CSB PEs, which the explorer prices so, compute
    with their streams quiet (each transaction takes its operands, computes, then gives its results;
    :mod:`codesign.step.list_pe`; PE1 and PE2 load beside their MAC loops, so they are refused), so a compute
    phase adds exactly its length. One machine works beside a call's last computes: the shell fetches the next
    call's descriptor once the call's last input word is in, and the call ends only when both its results and
    that descriptor are in. So the simulated shape keeps, per call, how early the descriptor came in
    (:func:`_tail_bounds`), and a build whose computes after the last input word are shorter by that much or
    more (or, where the call's end waited for the descriptor, of any other length) is simulated itself
    (:func:`step_cycles`). The tests hold it to :func:`step_cycles` on every knob table point they sample.
    """
    if pe in ("tt1", "tt2"):
        raise ValueError(f"{pe} loads beside its MAC loop: its compute cycles do not add alone (use step_cycles)")
    shapes = {name: _shape(pe, spec, calls, arena) for name, calls in lists.items()}
    key = (pe, int(getattr(spec, "stream_bits", 32)), ddr, tuple((name, shapes[name][0]) for name in lists))
    found = _PRICED.get(key)
    if found is None:
        priced = step_cycles(pe, spec, lists, arena, ddr=ddr)
        bounds = {name: _tail_bounds(list_cycles(PeName(pe), spec, calls, arena, ddr=ddr), len(calls))
                  for name, calls in lists.items()}
        found = _keep(_PRICED, PRICED_KEEP, key, (priced, {name: shapes[name][1:] for name in lists}, bounds))
    priced, base, bounds = found
    for name in lists:
        change = shapes[name][2] - base[name][1]
        if not np.all((bounds[name][0] <= change) & (change <= bounds[name][1])):
            return step_cycles(pe, spec, lists, arena, ddr=ddr)
    shift = {name: shapes[name][1] - base[name][0] for name in lists}
    breakdown = dict(priced["breakdown"])
    breakdown["pe"] += sum(shift.values())
    return {**priced, **{name: priced[name] + shift[name] for name in lists},
            "total": priced["total"] + sum(shift.values()), "breakdown": breakdown}


def bench_poll_cycles(busy: int, poll_cycles: int = 16, read_cycles: int = 3, offset: int = 3,
                      lead: int = 2) -> int:
    """What the list bench reports as ``cycles`` for a list busy ``busy`` cycles: from the ap_start write's
    return to the return of the first CTRL read that sees ap_done. The bench reads CTRL, then waits
    ``poll_cycles`` (``POLL_CYCLES``): a poll every ``poll_cycles + read_cycles`` cycles, returning at
    ``offset`` + a multiple of that period; a poll sees ap_done when it returns at least ``lead`` cycles after
    the busy time. ``read_cycles``, ``offset`` and ``lead`` are *measured* on the bench (cocotbext-axi's
    AxiLiteMaster, Icarus; 20 lists, busy 66..46 745 cycles, every one exact), not derived from source."""
    period = poll_cycles + read_cycles
    return period * max(0, -(-(busy + lead - offset) // period)) + offset


__all__ = ["AXI_RAM", "BOARD_DDR", "CONTROL_CYCLES", "CallCycles", "DdrTiming", "ListCycles", "MemoryTiming",
           "bench_poll_cycles", "call_phases", "fast_step_cycles", "list_cycles", "list_words", "phase_cycles",
           "phase_port_words", "PeName", "step_cycles", "wait_cycles"]
