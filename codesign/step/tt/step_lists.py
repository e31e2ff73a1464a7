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
:mod:`codesign.loops.tt_lists`); :func:`codesign.step.tt.list_finish.finish` is
the host's part, which a board runs too: decode the outputs and move the
tracked scales on. :mod:`codesign.step.tt.list_tiles` lays out one
contraction's tensors and cuts it into calls.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Callable, Dict, List, Sequence, Tuple

import numpy as np

from codesign.contracts.calls import RAW, ArenaLayout, Call, check_list, check_side_by_side
from codesign.numerics.round_stage import GROUP_WORDS_RANGE, RoundStageConfig
from codesign.pe.tt.spec import Tt1Spec, Tt2Spec
from codesign.step.tt.first_forward import PE1_NAME, first_forward_share, pe1_part, transposed_input
from codesign.step.tt.list_layout import (HostInput, core_forward, core_input_grad, core_last_forward,
                                          core_last_input_grad, core_slots, put_rows, room_rows, write_rows)
from codesign.step.tt.list_reads import BackwardReads, read_only, reads_ending, split_at_last_phase
from codesign.step.tt.list_tiles import (LATER, MAX_ROWS, SLOT_BITS, Contraction, Out, Rows, busiest_copy, chunk32,
                                         codes_rounding, contraction_calls, cuts, is_chained, list_products,
                                         operand_rounding, row_within, split_last_forwards)

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
    """The arena before the step and the step's lists, in ``phases``: each phase ``(pe, calls)`` lists that run
    side by side, write disjoint words and read none another writes, a PE's lists on its copies in order (the
    first ``forward_phases`` phases are the forward's); ``contractions`` with their calls, by name;
    ``outputs``: byte offsets of the layer output ``y`` (rows of ``y_width`` values, the last core's ``m`` padded
    to whole stream words) and the input gradient ``grad_x`` (raw, ``words`` 32-bit words a value); ``codes``:
    byte offset and packing of each core gradient's codes; ``parts``: 32-bit words of the PEs' stream word."""

    arena: np.ndarray
    phases: Tuple[Tuple[Tuple[str, Tuple[Call, ...]], ...], ...]
    forward_phases: int
    contractions: Dict[str, Tuple[Contraction, Tuple[Call, ...]]]
    cores: Tuple[Tuple[int, ...], ...]
    batch: int
    outputs: Dict[str, Tuple[int, int]]
    codes: Dict[str, Tuple[int, RoundStageConfig]]
    inputs: Dict[str, HostInput]
    lanes: int
    parts: int
    y_width: int
    fracs: Fracs
    products: Tuple[Tuple[int, ...], ...]  # per phase, each list's products (its headers' I J K L; no shift moves them)
    # every core layout's 16-bit slots in the arena (indices into it viewed as uint16) and, per slot, 1 + the index of
    # its code among all cores' codes in order (0: a padding slot): the host writes every core in one gather
    core_slots: Tuple[np.ndarray, np.ndarray] = field(compare=False, repr=False)
    # the samples whose output the second-last forward phase completes, which the host may hand on beside the last
    # (the last forwards cut at one sample: list_tiles.split_last_forwards; 0: the last completes every sample's)
    early_samples: int = 0
    _kept: dict = field(default_factory=dict, compare=False, repr=False)  # per layout: some cores' slots, reads

    def holds(self, pe: str) -> bool:
        """Whether a call of ``pe``'s holds sums for a later one (a contraction longer than the PE's buffers): its
        IPs need the shell's accumulation buffer."""
        return any(call.accumulates for phase in self.phases for name, calls in phase if name == pe for call in calls)

    @property
    def y_rows(self) -> int:
        """Rows of the layer output as the last forward contraction writes it: ``(b, p)``."""
        return self.batch * math.prod(s[1] for s in self.cores[:-1])

    def write(self, arena: np.ndarray, *, x: np.ndarray | None = None, core_codes: np.ndarray | None = None,
              gy: np.ndarray | None = None, cores: Tuple[int, ...] | None = None,
              x_t: np.ndarray | None = None, x_cg: np.ndarray | None = None) -> List[Tuple[int, int]]:
        """The host's inputs written in place into ``arena`` (uint32 words): the input codes, the core codes in
        every layout a PE reads (``core_codes``: every core's codes flattened, core after core, as
        :func:`flat_cores` lays them out; ``cores``: only these cores', in increasing order, into an arena that
        holds every core's layouts already), the output-gradient codes (rows and transposed, before the backward
        lists), and ``x_t``: input codes as ``x``, of which PE1's share of the first forward reads its samples'
        transposed (:mod:`~codesign.step.tt.first_forward`; no such layout without a share), which only that
        phase reads, so the host may write a batch's beside the step before, as it may ``x``, which only the
        forward reads: the first core's gradient reads ``x_cg``, the same codes in a copy of their own, which the
        host writes while the forward computes. The lists stay as built: a step at the same shapes and scales
        reuses them. Returns the word ranges written, ``(start, words)``, which a board flushes."""
        given = {"x": x, "gy": gy, "x_t": x_t, "x_cg": x_cg}
        written = []
        if core_codes is not None:
            cores = tuple(range(len(self.cores))) if cores is None else tuple(cores)
            codes = np.asarray(core_codes).reshape(-1)
            if codes.size != sum(math.prod(self.cores[k]) for k in cores):
                raise ValueError(f"{codes.size} core codes for cores {[self.cores[k] for k in cores]}")
            slots = np.empty(codes.size + 1, "<u2")
            slots[0] = 0
            np.copyto(slots[1:], codes, casting="unsafe")  # two's complement, modulo 2^16: a 16-bit slot's bits
            dst, src = self.core_slots if len(cores) == len(self.cores) else self._slots_of(cores)
            arena.view("<u2")[dst] = slots[src]
            written += [(item.rows.offset // 4, item.words) for item in self._host_inputs(cores)]
        for item in self._host_inputs(("x", "gy", "x_t", "x_cg")) if any(v is not None for v in given.values()) else ():
            value = given[item.source]
            if value is not None:
                write_rows(arena, item, item.layout(np.asarray(value)), self.lanes)
                written.append((item.rows.offset // 4, item.words))
        return written

    def write_samples(self, arena: np.ndarray, x: np.ndarray, first: int) -> List[Tuple[int, int]]:
        """Input codes ``x`` of samples ``first`` on (``(n, N)``) written in place, as :meth:`write` writes a whole
        batch's: a sample's rows lie together. Not for lists that also read the input transposed (PE1's share of
        the first forward), which only a network's input has. Returns the word range written."""
        item, x = self.inputs["x"], np.asarray(x)
        per = item.words // item.rows.words // self.batch  # rows a sample
        if "x_t" in self.inputs or x.ndim != 2 or not 0 <= first < first + x.shape[0] <= self.batch:
            raise ValueError(f"samples {first} on of shape {x.shape}: not a part of these lists' input")
        part = replace(item, rows=replace(item.rows, offset=item.rows.offset + 4 * item.rows.words * per * first),
                       words=item.rows.words * per * x.shape[0])
        write_rows(arena, part, x.reshape(-1, item.rows.values), self.lanes)
        return [(part.rows.offset // 4, part.words)]

    def _keep(self, key: tuple, make: Callable[[], object]):
        """``make()`` kept per layout under ``key`` (the lists :func:`reshift` makes of these share it)."""
        if key not in self._kept:
            self._kept[key] = make()
        return self._kept[key]

    def _host_inputs(self, sources: Tuple[object, ...]) -> Tuple[HostInput, ...]:
        """The inputs the host writes from ``sources`` ("x", "gy", cores' indices), in order (a layer has some
        fifty, most of them cores' layouts)."""
        return self._keep(("inputs of", sources),
                          lambda: tuple(item for item in self.inputs.values() if item.source in sources))

    def _slots_of(self, cores: Tuple[int, ...]) -> Tuple[np.ndarray, np.ndarray]:
        """:attr:`core_slots` of ``cores`` alone (kept per lists and cores): their codes' slots, each numbered 1 +
        the code's index among those cores' codes in order (their padding slots, 0 in every write, left out)."""
        def slots() -> Tuple[np.ndarray, np.ndarray]:
            starts = np.cumsum([1, *(math.prod(shape) for shape in self.cores)])
            local = np.zeros(starts[-1], np.int64)  # a code's global number -> its number among ``cores``' codes
            first = 1
            for k in sorted(set(cores)):
                local[starts[k]:starts[k + 1]] = np.arange(first, first + starts[k + 1] - starts[k])
                first += starts[k + 1] - starts[k]
            dst, src = self.core_slots
            chosen = local[src] > 0
            return dst[chosen], local[src[chosen]]
        return self._keep(("slots", cores), slots)

    def _reads_cores(self, phases: slice, cores: Tuple[int, ...] | None) -> bool:
        """Whether a call of ``phases`` reads a word of the layouts of ``cores`` (None: every core's)."""
        read = [block.word_indices() for listed in self.phases[phases] for _, calls in listed for call in calls
                for block in call.segments]
        slots = self.core_slots[0] if cores is None else self._slots_of(cores)[0]
        return bool(read) and bool(np.isin(np.unique(slots // 2), np.concatenate(read)).any())

    def cores_unread_from(self, phase: int, cores: Tuple[int, ...] | None = None) -> bool:
        """Whether no call of phase ``phase`` or after reads a word of the layouts of ``cores`` (None: every core's):
        while they compute, the host may write the next step's codes of those it has updated (kept per layout)."""
        return self._keep(("unread from", phase, cores), lambda: not self._reads_cores(slice(phase, None), cores))

    def cores_read_in(self, phase: int) -> Tuple[int, ...]:
        """The cores of which some call of phase ``phase`` reads a word of a layout: the host must write their codes
        before it starts, the others' while it computes."""
        return self._keep(("read in", phase), lambda: tuple(
            k for k in range(len(self.cores)) if self._reads_cores(slice(phase, phase + 1), (k,))))

    def gradient_scales(self, cores: Tuple[int, ...]) -> Tuple[np.ndarray, np.ndarray]:
        """Per code of ``cores``' gradients (core after core), the value of its unit, 2^-f at the core's gradient
        fraction, and where each core's codes end (from 0); kept per layout at the :data:`KEPT_SCALES` latest."""
        fracs, kept = tuple(self.fracs.core_grad[k] for k in cores), self._keep(("scales", cores), dict)
        if fracs not in kept:
            sizes = [math.prod(self.cores[k]) for k in cores]
            kept[fracs] = read_only(np.repeat(np.ldexp(1.0, -np.asarray(fracs, np.int64)), sizes),
                                    np.cumsum([0, *sizes]))  # shared by the lists reshift makes of these
            if len(kept) > KEPT_SCALES:
                kept.pop(next(iter(kept)))  # the oldest
        return kept[fracs]

    def reads_ending(self, first: int, stop: int) -> BackwardReads:
        """:func:`~codesign.step.tt.list_reads.reads_ending` of these lists (kept per layout)."""
        return self._keep(("reads", first, stop), lambda: reads_ending(self, first, stop))

    def read_ranges(self, *, forward: bool, samples: Tuple[int, int] | None = None) -> List[Tuple[int, int]]:
        """The word ranges the host reads after the forward lists (the output; of ``samples``, first and stop,
        alone where given) or after the backward ones (the input gradient, the core gradients, the records whose
        sums move the scales), which a board invalidates."""
        if forward:
            offset, words = self.outputs["y"]
            first, stop = (0, self.batch) if samples is None else samples
            sample = words * self.y_rows // self.batch * self.y_width  # a sample's rows lie together
            return [(offset // 4 + sample * first, sample * (stop - first))]
        return list(self.backward_reads[0].ranges)

    @cached_property
    def backward_reads(self) -> Tuple[BackwardReads, BackwardReads, BackwardReads]:
        """What the host reads after the backward lists, and where (:func:`~codesign.step.tt.list_reads.
        split_at_last_phase`): all of it, what the phases before the last wrote, what the last writes; the
        layout's, which no rounding shift moves (kept per lists)."""
        return split_at_last_phase(self)


KEPT_SCALES = 8  # core gradients' scales kept per layout: tracked scales wander among a few
SHARE_PRODUCTS = 1 << 16  # products a shared list takes at least: ~1,000 cycles of an 8 x 8 array's MACs, and as
# many again or more of its loads and drains (a contraction this small is not compute-bound), some 20 us at 100 MHz,
# against the few register writes and the wait a list's start costs a board's host


def check_copies(copies) -> Tuple[int, int]:
    """``copies`` as (PE1's, PE2's) IPs the lists are shared among, each at least 1."""
    if (not isinstance(copies, (tuple, list)) or len(copies) != 2
            or any(isinstance(n, bool) or not isinstance(n, int) or n < 1 for n in copies)):
        raise ValueError(f"copies={copies!r} must be two positive ints: the PE1 and PE2 IPs the lists run on")
    return int(copies[0]), int(copies[1])


def share(calls: Sequence[Call], copies: int, least: int = SHARE_PRODUCTS) -> List[Tuple[Call, ...]]:
    """``calls`` shared among at most ``copies`` lists that run side by side, no list with fewer than ``least``
    products (a list's start costs the host register writes and a wait): whole chains (an accumulating chain
    sums in one IP's buffer), each to the list with the fewest products so far, in order."""
    chains: List[List[Call]] = []
    for call in calls:
        if call.acc_add:
            chains[-1].append(call)
        else:
            chains.append([call])
    copies = max(1, min(copies, len(chains), list_products(calls) // least))
    parts: List[List[Call]] = [[] for _ in range(copies)]
    load = [0] * copies
    for chain in chains:
        lightest = load.index(min(load))
        parts[lightest] += chain
        load[lightest] += list_products(chain)
    return [tuple(part) for part in parts if part]


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
    if chunk32(spec1.lanes, spec1.stream_bits // 32) > GROUP_WORDS_RANGE[1]:
        raise ValueError(f"{spec1.lanes} lanes of 16-bit slots make a {spec1.lanes * SLOT_BITS}-bit chunk; the "
                         f"rounding stage packs chunks of at most {32 * GROUP_WORDS_RANGE[1]} bits (<= 8 lanes)")
    return spec1.lanes


class _Builder:
    """The arena and contractions of one layer step (:func:`step_lists`), built in order."""

    def __init__(self, cores: Sequence[np.ndarray], batch: int, fracs: Fracs, spec1: Tt1Spec, spec2: Tt2Spec,
                 copies: Tuple[int, int] = (1, 1)) -> None:
        self.copies = copies
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
        laid = layout(value)
        rows = put_rows(self.arena, laid, self.lanes, self.parts, i_step, j_step)
        self.inputs[name] = HostInput(rows, source, layout, words=rows.words * (laid.size // laid.shape[-1]))
        return rows

    def state(self, k: int, rows: Rows | None = None) -> Rows:
        """Room for ``S_k`` (or ``rows`` given), as PE2's ``A`` reads it (PE1's for the last state)."""
        a, _, n, _ = self.shape(k)
        if k == self.d - 1:
            return rows or room_rows(self.arena, self.P[k], a * n, self.lanes, self.parts, 1, 0)
        return rows or room_rows(self.arena, self.P[k] * a * n, self.R[k], self.lanes, self.parts, a * n, 1)

    def forward(self, x_codes: np.ndarray) -> List[Rows]:
        """The input codes placed, every forward contraction, the output room; returns the states."""
        a, _, n, _ = self.shape(0)
        f = self.fracs
        shape = (self.batch * a * n, self.R[0]) if self.d > 1 else (self.batch, a * n)
        self.x_rows = (lambda x, shape=shape: np.asarray(x).reshape(shape), *((a * n, 1) if self.d > 1 else (1, 0)))
        states = [self.host("x", "x", self.x_rows[0], x_codes, *self.x_rows[1:])]
        for k in range(self.d - 1):
            a, m, n, c = self.shape(k)
            core = self.host(f"core {k} forward", k, core_forward, self.cores[k], 1, 0)
            nxt = self.state(k + 1)
            rounding = operand_rounding(shift_of(f, ("act_frac_bits", k + 1)), f.act_bits, nxt.values, self.lanes,
                                        self.parts)
            self.items.append(Contraction(f"forward {k}", "tt2", (self.P[k], a * n, self.R[k], m * c), states[k],
                                          core, Out(nxt.offset, rounding, nxt.words), ("act_frac_bits", k + 1),
                                          (f.act_bits, f.core_bits)))
            states.append(nxt)
        a, m, n, _ = self.shape(self.d - 1)
        dims, bits = (self.P[-1], 1, a * n, m), (f.act_bits, f.core_bits)
        beat = self.parts // math.gcd(self.parts, 2 if is_chained("tt1", dims, self.spec["tt1"], bits, "y") else 1)
        self.y_width = -(-m // beat) * beat  # y's rows padded (zero core rows) to whole stream words

        def layout(core, width=self.y_width):
            rows = core_last_forward(core)
            return np.pad(rows, ((0, width - rows.shape[0]), (0, 0)))

        core = self.host(f"core {self.d - 1} forward", self.d - 1, layout, self.cores[-1], 1, 0)
        dims = (self.P[-1], 1, a * n, self.y_width)
        self.items.append(Contraction("forward last", "tt1", dims, states[-1], core,
                                      self._raw(self.P[-1] * self.y_width, ("tt1", dims, bits), "y"), None, bits))
        return states

    def share_first_forward(self, x_codes: np.ndarray, pieces: Callable[[Contraction], int]) -> None:
        """The first forward's last samples given to PE1 where that ends it sooner
        (:func:`~codesign.step.tt.first_forward.first_forward_share`), over their input written transposed."""
        if self.d < 2:
            return
        pe2 = self.items[0]
        first = self.batch - first_forward_share(pe2, self.spec["tt1"], self.spec["tt2"], pieces)
        if first == self.batch:
            return
        layout = transposed_input(self.batch, pe2.dims[1], pe2.dims[2], first)
        x_t = self.host("x transposed", "x_t", layout, x_codes, 1, 0)
        self.items[0:1] = [replace(pe2, dims=(first, *pe2.dims[1:])), pe1_part(pe2, pe2.b, x_t, first)]

    def _raw(self, values: int, contraction, name: str) -> Out:
        """Room for raw results (two words a value when the contraction ``(pe, dims, bits)`` is summed across
        calls)."""
        pe, dims, bits = contraction
        words = 2 if is_chained(pe, dims, self.spec[pe], bits, name) else 1
        offset = self.arena.reserve(words * values)
        self.outputs[name] = (offset, words)
        return Out(offset, RAW, words)

    def codes(self, values: int, row: int, limit: int, k: int, share: int = 1) -> Out:
        """Room for core ``k``'s ``values`` gradient codes the host reads, in rows that tile ``row`` within ``limit``
        values; rows short enough that ``share`` copies can each write a part of a row where the rows and those
        parts are whole stream words (the same bytes either way: each row starts a stream word), so that the
        copies may share the contraction's ``L`` (PE1: :func:`~codesign.step.tt.list_tiles.l_cut`; a row is
        ``L``) or ``K`` (PE2: :func:`~codesign.step.tt.list_tiles.k_cut`; a row is ``K``)."""
        rows, word = row_within(row, limit), 2 * self.parts  # a stream word holds `word` codes
        if share > 1 and rows % word == 0:
            part = row_within(row, min(limit, -(-row // share)))
            rows = part if part % word == 0 else rows
        cfg = codes_rounding(shift_of(self.fracs, ("core_grad_frac_bits", k)), self.fracs.grad_bits, rows,
                             self.parts)
        offset = self.arena.reserve(cfg.words_out(values))
        self.codes_out[f"core_grad {k}"] = (offset, cfg)
        return Out(offset, cfg, cfg.groups_per_row * cfg.group_words)

    def backward(self, x_codes: np.ndarray, gy_codes: np.ndarray, states: List[Rows], need_grad_x: bool) -> None:
        """The output gradient placed (rows, and transposed), then every backward contraction, core by core. The
        first core's gradient reads the input from a copy of its own ("x core gradient"), so that no backward
        contraction reads the copy the forward does: the host may write the next batch's codes there while this
        step's backward computes, and this one's copy while its forward does."""
        f, d = self.fracs, self.d
        states = [self.host("x core gradient", "x_cg", self.x_rows[0], x_codes, *self.x_rows[1:]), *states[1:]]
        a, m, n, _ = self.shape(d - 1)
        bp = self.P[d - 1]
        rows = (bp, m)  # bound as defaults: a layout is called again on later steps
        gy_rows = self.host("gy", "gy", lambda g, rows=rows: np.asarray(g).reshape(rows), gy_codes, 1, 0)
        gy_t = self.host("gy transposed", "gy", lambda g, rows=rows: np.asarray(g).reshape(rows).T,
                         gy_codes, 1, 0)
        last = states[d - 1]
        self.items.append(Contraction(
            f"core gradient {d - 1}", "tt2", (1, bp, a * n, m), replace(last, i_step=0, j_step=1), gy_t,
            self.codes(m * a * n, a * n, min(self.spec["tt2"].max_k, MAX_ROWS), d - 1, self.copies[1]),
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
                self.codes(m * c * a * n, a * n, min(self.spec["tt1"].max_l, MAX_ROWS), k, self.copies[0]),
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
        return Rows(out.offset, out.rounding.row_values, out.row_words, i_step, j_step, chunk32(self.lanes, self.parts))

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
        room = room_rows(self.arena, self.P[k - 1] * m * c, self.R[k - 1], self.lanes, self.parts, m * c, 1)
        rounding = operand_rounding(shift_of(f, ("grad_frac_bits", k - 1)), f.grad_bits, self.R[k - 1], self.lanes,
                                    self.parts)
        return Out(room.offset, rounding, room.words), ("grad_frac_bits", k - 1)


def step_lists(x_codes: np.ndarray, cores: Sequence[np.ndarray], gy_codes: np.ndarray, fracs: Fracs, *,
               spec1: Tt1Spec, spec2: Tt2Spec, need_grad_x: bool = True, copies: Tuple[int, int] = (1, 1),
               share_products: int = SHARE_PRODUCTS, share_first: bool | None = None) -> StepLists:
    """The training step of a TT layer with core codes ``cores`` (each ``(a, m, n, c)``) on input codes
    ``x_codes`` (B, N) and output-gradient codes ``gy_codes`` (B, M), at ``fracs``, as call lists for
    ``copies`` IPs of PE1 and of PE2 (a contraction's result tiles shared among its PE's copies, at least
    ``share_products`` products a list: :func:`share`); with ``share_first``, PE1 takes some samples of the
    first forward contraction where that ends it sooner (:mod:`codesign.step.tt.first_forward`). By default only
    where the input is the network's (no ``need_grad_x``): the host writes that batch's codes beside the step
    before, a hidden layer's between the layers, where they would cost more than PE1's share saves. Where the
    forwards are shared a phase each, the last two are cut at one sample, PE1's first part beside PE2's later
    one (:func:`~codesign.step.tt.list_tiles.split_last_forwards`; ``early_samples``)."""
    check_copies(copies)
    x_codes = np.asarray(x_codes)

    def pieces(item: Contraction) -> int:  # I cut for the PE's copies, where they would share the contraction
        n = copies[0] if item.pe == "tt1" else copies[1]
        return max(1, min(n, math.prod(item.dims) // share_products))

    builder = _Builder(cores, int(x_codes.shape[0]), fracs, spec1, spec2, copies)
    states = builder.forward(x_codes)
    share_first = not need_grad_x if share_first is None else share_first
    if share_first:
        builder.share_first_forward(x_codes, pieces)
    builder.backward(x_codes, gy_codes, states, need_grad_x)

    def calls_of(item: Contraction) -> Tuple[Call, ...]:  # cut along I, L or K for the copies, whichever is faster
        spec, n = builder.spec[item.pe], pieces(item)
        return tuple(contraction_calls(item, spec, builder.arena, n, *cuts(item, spec, n)))

    made = {item.name: (item, calls_of(item)) for item in builder.items}
    d = builder.d

    def phase(pe1: Sequence[str], pe2: Sequence[str], *, one_list: bool = False):
        return tuple((pe, part) for pe, names, n in (("tt1", pe1, copies[0]), ("tt2", pe2, copies[1]))
                     for part in share(tuple(call for name in names if name in made for call in made[name][1]),
                                       1 if one_list else n, share_products))

    # a forward contraction reads the one before: shared among PE2's copies, each is a phase of its own
    shared = any(len(share(made[f"forward {k}"][1], copies[1], share_products)) > 1 for k in range(d - 1))
    if PE1_NAME in made and not shared and d > 2:  # its calls would race PE2's later forwards in one phase
        return step_lists(x_codes, cores, gy_codes, fracs, spec1=spec1, spec2=spec2, need_grad_x=need_grad_x,
                          copies=copies, share_products=share_products, share_first=False)
    forward = [([PE1_NAME] if k == 0 else [], [f"forward {k}"]) for k in range(d - 1)] if shared or d == 2 else \
        [([], [f"forward {k}" for k in range(d - 1)])]
    last, early = ["forward last"], 0
    if shared and d > 2:
        early = split_last_forwards(made, d, builder.batch, calls_of, share_products,
                                    lambda item: busiest_copy(item, builder.spec[item.pe], pieces(item)))
    if early:
        forward[-1:] = [([], [f"forward {d - 2}"]), (["forward last"], [f"forward {d - 2}{LATER}"])]
        last = [f"forward last{LATER}"]
    # all forwards in one phase are one list, on one IP: each reads what the one before wrote
    phases = [phase(*names, one_list=len(names[1]) > 1) for names in forward] + [phase(last, []),
                                                     phase([f"input gradient {d - 1}"], [f"core gradient {d - 1}"])]
    phases += [phase([f"core gradient {k}"], [f"input gradient {k}"]) for k in range(d - 2, -1, -1)]
    phases = [listed for listed in phases if listed]
    arena = builder.arena.image()
    where = f"core shapes {[core.shape for core in builder.cores]} on {32 * builder.parts}-bit streams"
    for index, listed in enumerate(phases):
        for pe, calls in listed:
            try:
                check_list(calls, 4 * arena.size, 32 * builder.parts)
            except ValueError as error:
                raise ValueError(f"{where}: {pe}'s list: {error}") from None
        try:
            check_side_by_side([calls for _, calls in listed], arena.size)
        except ValueError as error:
            raise ValueError(f"{where}: phase {index}: {error}") from None
    return StepLists(arena=arena, phases=tuple(phases), forward_phases=sum(bool(a or b) for a, b in forward) + 1,
                     contractions=made,
                     cores=tuple(core.shape for core in builder.cores), batch=builder.batch,
                     outputs=dict(builder.outputs), codes=dict(builder.codes_out), inputs=dict(builder.inputs),
                     lanes=builder.lanes, parts=builder.parts, y_width=builder.y_width, fracs=fracs,
                     products=tuple(tuple(list_products(calls) for _, calls in listed) for listed in phases),
                     core_slots=core_slots(builder.inputs, [core.shape for core in builder.cores], builder.lanes,
                                           builder.parts), early_samples=early)


def z_fracs(fracs: Fracs, d: int) -> Dict[Tuple[str, int], int]:
    """The fraction bits of the accumulators whose sums move each tracker."""
    out = {("act_frac_bits", k + 1): fracs.act[k] + fracs.core[k] for k in range(d - 1)}
    out.update({("grad_frac_bits", k - 1): fracs.grad[k] + fracs.core[k] for k in range(1, d)})
    out.update({("core_grad_frac_bits", k): fracs.grad[k] + fracs.act[k] for k in range(d)})
    return out


def shift_of(fracs: Fracs, stat: Tuple[str, int], z: Dict[Tuple[str, int], int] | None = None) -> int:
    """The rounding shift of the contraction whose results move tracker ``stat``: its codes' fraction bits less
    its accumulators' (``z``: :func:`z_fracs` of ``fracs``, worked out when not given)."""
    target = {"act_frac_bits": fracs.act, "grad_frac_bits": fracs.grad, "core_grad_frac_bits": fracs.core_grad}
    return int(target[stat[0]][stat[1]] - (z_fracs(fracs, len(fracs.core)) if z is None else z)[stat])


def reshift(lists: StepLists, fracs: Fracs) -> StepLists:
    """``lists`` at the scales ``fracs``: a scale is a rounding shift in the descriptors of the calls that round,
    so only those change (the layout, the tiles and the arena stay); equal to :func:`step_lists` at ``fracs``,
    at a fraction of its cost when a tracked scale moves."""
    if fracs == lists.fracs:
        return lists
    if (fracs.act_bits, fracs.grad_bits, fracs.core_bits) != (lists.fracs.act_bits, lists.fracs.grad_bits,
                                                              lists.fracs.core_bits):
        raise ValueError("code widths are part of the lists' rounding: build them again (step_lists)")
    renamed, contractions = {}, {}
    new_z, old_z = z_fracs(fracs, len(fracs.core)), z_fracs(lists.fracs, len(lists.fracs.core))
    for name, (item, calls) in lists.contractions.items():
        shift = None if item.stat is None else shift_of(fracs, item.stat, new_z)
        if shift is not None and shift != shift_of(lists.fracs, item.stat, old_z):  # only the calls whose shift moved
            configs = {config: replace(config, shift=shift)  # each rounding re-made once, shared by its calls
                       for config in {call.rounding for call in calls if call.rounding.enable}}
            new = tuple(call.with_rounding(configs[call.rounding]) if call.rounding.enable else call for call in calls)
            renamed.update((id(old), call) for old, call in zip(calls, new))
            calls = new
        contractions[name] = (item, calls)
    phases = tuple(tuple((pe, tuple(renamed.get(id(call), call) for call in calls)) for pe, calls in phase)
                   for phase in lists.phases)
    moved = replace(lists, contractions=contractions, phases=phases, fracs=fracs)
    if "backward_reads" in lists.__dict__:  # the layout's, which no shift moves: kept when worked out
        moved.__dict__["backward_reads"] = lists.__dict__["backward_reads"]
    return moved
