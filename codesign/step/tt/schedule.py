"""The schedule of one TT layer's training step: its contractions, and their tiling into PE1/PE2 calls.

A training step of a TT layer (the trainer's ``TTLinear``, paper 003,
App. A) is a chain of contractions: the forward sweep over the cores
(Eqs. (8)-(10)), then, right to left, each core's gradient and the gradient
of the state entering it (Eqs. (11)-(12)). The host keeps every state and
every state gradient with the batch as the *last* axis, ``(P, r, n, R, B)``
with ``P`` the output modes produced and ``R`` the input modes not yet
consumed, so the last axis of every PE2 operand and result is ``R·B``, a
multiple of the batch (paper 003, Sec. 4: the last dimension of input and
output a multiple of 16), and every forward and input-gradient contraction
is PE2 on reshapes without permutation:

* forward ``k``: ``A`` = the state ``(P, r_{k-1}·n_k, R·B)``, ``B`` = the
  core as ``(m_k·r_k, r_{k-1}·n_k)``; the result ``(P, m_k·r_k, R·B)`` is the
  next state;
* input gradient ``k``: ``A`` = the gradient ``(P, m_k·r_k, R·B)``, ``B`` =
  the core as ``(r_{k-1}·n_k, m_k·r_k)``; the result ``(P, r_{k-1}·n_k,
  R·B)`` is the gradient of the state entering ``k``;
* core gradient ``k`` (the direct route of App. A.2 that the golden model
  takes): PE1 with ``A`` = the gradient as ``(m_k·r_k, T)`` and ``B`` = the
  saved state as ``(r_{k-1}·n_k, T)``, ``T = P·R·B`` the summed positions,
  folded into ``(J, K)`` rows with ``K`` a whole number of chunks and zero
  padding at the end. The host swaps the first two axes of both operands.

The batch enters as ``x^T`` and the output leaves as ``y^T``.

With ``core_grad_route="dense"`` (App. A.2's second route, the one the
paper takes; :mod:`codesign.numerics.tt_dense_route`) the core gradients
come from the dense weight gradient instead:

* outer products (PE3): ``A`` = one sample's input ``x_b`` (8-bit, streamed),
  ``B`` = its output gradient ``g_b`` (16-bit, cached), ``Z = x_b g_b^T``,
  ``(I, J, K, L) = (N, B, 1, M)`` with one sample per call; the host adds
  the samples' products, ``dW^T``, in 64 bits (a cut along a summed axis);
  or, with ``StepHardware.outer_pe = "tt1"``, PE1 as for a core gradient:
  ``A`` = the output gradient ``(M, B)``, ``B`` = the input ``(N, B)``, the
  batch folded, ``Z = dW`` ``(M, N)``;
* a left step of the route (PE2): ``A`` = the node as ``(1, r_lo·m·n,
  rest)``, ``B`` = core ``lo`` as ``(r_{lo+1}, r_lo·m·n)``, the result
  ``(1, r_{lo+1}, rest)`` the next node as it lies;
* a right step (PE1): ``A`` = the node as ``(rest, m·n, r_hi)``, ``B`` =
  core ``hi-1`` as it lies, ``(r_{hi-1}, m·n, r_hi)``, the result
  ``(rest, r_{hi-1})`` the next node as it lies.

The input-gradient chain is the direct route's.

With ``StepHardware.forward_split`` a forward contraction's calls are shared
between PE2 and PE1, whose copies would otherwise idle through the forward
stages: PE1 takes the tail ``[s, K)`` of the ``R·B`` axis, each position
``(i, k)`` of ``A`` a row of its own (a *swapped* call, ``(I·K, 1, J, L)``:
``A`` = the state's rows ``A[i, :, k]``, ``B`` = the core as ``(m_k·r_k, 1,
r_{k-1}·n_k)``, the result ``Z[(i, k), l]``), PE2 the head ``[0, s)`` as
before. ``s`` balances the two PEs' modelled cycles per copy
(:func:`forward_split_point`). The sums are the same exact integers, so
the step's numbers do not change.

A contraction larger than a PE's header fields (255) or buffers is cut into
calls; a cut along a summed axis leaves partial sums the host adds in 64
bits. The summed length of one call is also capped so that no accumulator
can saturate (:func:`max_terms`): every call's result is the exact sum, which
is what the golden model computes in float64, and the step is exact whatever
the data.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import Tuple
from dataclasses import dataclass

from codesign.numerics.formats import _check_int
from codesign.numerics.records import keyword_record
from codesign.numerics.tt_dense_route import ROUTES, RouteStep, dense_route, node_shape
from codesign.pe.tt.contract import MAX_DIM, chunks, header_word
from codesign.pe.tt.cycles import transaction_cycles
from codesign.pe.tt.spec import Tt1Spec, Tt2Spec, Tt3Spec

MAX_UNITS = 8  # copies of one PE build a step may use (each takes a stream pair and a memory port)
OUTER_PES = ("tt3", "tt1")  # the PEs that can form the dense weight gradient (StepHardware.outer_pe)
PE_NAMES = {"tt1": "PE1", "tt2": "PE2", "tt3": "PE3"}  # as paper 003 names them, for reports


@keyword_record
class StepHardware:
    """The PE builds a layer step runs on: PE1, PE2 and the PE3 (the dense route's outer products).

    PE1 computes the core gradients, 16-bit gradients against 8-bit states
    (``a_bits=16``, ``b_bits=8``); PE2 the forward and input-gradient
    contractions, 8-bit activations or 16-bit gradients (``a_bits=16``)
    against 4-bit cores. PE2 takes ``J`` up to 128 (``r_{k-1} n_k`` of
    rank-16 cores with 8 modes in one call): a call cut along ``J`` sends all
    its results once per piece, which at ``max_j = 16`` costs more cycles
    than the MACs (docs/tt_pe.md, "A layer's training step on the PEs").

    ``pe1_units`` and ``pe2_units`` are how many copies of each build work
    side by side, each with its own input and output stream (and memory
    port): the calls of one contraction are independent, so copies split
    them (:func:`codesign.step.tt.cycles.list_schedule`). Copies add
    stream bandwidth, which bounds a step more than the MACs do; so do wider
    streams, each build's ``stream_bits`` (32, 64 or 128), which the cycle
    and traffic models of :mod:`codesign.step.tt.cycles` take from the
    specs (:meth:`at_stream_bits` sets it on every build).

    ``outer_pe``: the PE that forms the dense weight gradient on the dense
    route. ``"tt3"`` is the paper's PE3: one sample's outer product a call,
    every product a word back to memory, the host adding the batch.
    ``"tt1"``: PE1 sums the products over the batch in its accumulators
    (``dW = g^T x`` is a contraction over the batch, like a core gradient's
    over its positions), so only the sums leave. Both give the same exact
    integers, so the numbers of the step do not depend on the choice.

    ``forward_split``: the forward contractions' calls are shared between
    the PE2 and the PE1 copies (the module docstring); else PE2 takes them
    all while PE1 waits for the backward stages.
    """

    pe1: Tt1Spec = Tt1Spec(a_bits=16, b_bits=8)
    pe2: Tt2Spec = Tt2Spec(a_bits=16, b_bits=4, max_j=128, max_l=64)
    pe3: Tt3Spec = Tt3Spec()
    pe1_units: int = 1
    pe2_units: int = 1
    outer_pe: str = "tt3"
    forward_split: bool = False

    def __post_init__(self) -> None:
        for name, kind in (("pe1", Tt1Spec), ("pe2", Tt2Spec), ("pe3", Tt3Spec)):
            if not isinstance(getattr(self, name), kind):
                raise TypeError(f"{name} must be a {kind.__name__}, got {type(getattr(self, name)).__name__}")
        if self.outer_pe not in OUTER_PES:
            raise ValueError(f"outer_pe must be one of {OUTER_PES}, got {self.outer_pe!r}")
        _check_int("pe1_units", self.pe1_units, 1, MAX_UNITS)
        _check_int("pe2_units", self.pe2_units, 1, MAX_UNITS)
        if not isinstance(self.forward_split, bool):
            raise TypeError(f"forward_split must be True or False, got {self.forward_split!r}")

    def spec(self, pe: str) -> Tt1Spec | Tt2Spec | Tt3Spec:
        return {"tt1": self.pe1, "tt2": self.pe2, "tt3": self.pe3}[pe]

    def units(self, pe: str) -> int:
        """Copies of ``pe``'s build (PE3 has one)."""
        return {"tt1": self.pe1_units, "tt2": self.pe2_units, "tt3": 1}[pe]

    def macs(self) -> int:
        """Multipliers of PE1 and PE2 copies together (PE3's, which only the dense route calls, not counted)."""
        return sum(self.units(pe) * self.spec(pe).lanes * self.spec(pe).rows for pe in ("tt1", "tt2"))

    def ip_index(self, pe: str, unit: int) -> int:
        """Where copy ``unit`` of ``pe`` stands in a design's list of IPs: the tt1 copies, the tt2 copies, the tt3
        (the order a TT design derives its instances in, which spreads them over the HP ports)."""
        return {"tt1": 0, "tt2": self.pe1_units, "tt3": self.pe1_units + self.pe2_units}[pe] + unit

    def at_stream_bits(self, stream_bits: int) -> StepHardware:
        """The same builds and copies with ``stream_bits``-wide streams (32, 64 or 128 bits) on every PE."""
        return dataclasses.replace(self, **{field: dataclasses.replace(self.spec(pe), stream_bits=stream_bits)
                                            for pe, field in HARDWARE_FIELDS.items()})

    def describe(self) -> str:
        """E.g. ``2 x tt1 16x2 + 4 x tt2 16x2`` (copies x PE lanes x rows), with ``, 64-bit streams`` after it
        where a build's streams are wider than 32 bits."""
        text = " + ".join(f"{self.units(pe)} x {pe} {self.spec(pe).lanes}x{self.spec(pe).rows}"
                          for pe in ("tt1", "tt2"))
        widths = sorted({self.spec(pe).stream_bits for pe in ("tt1", "tt2")})
        text = text if widths == [32] else f"{text}, {'/'.join(map(str, widths))}-bit streams"
        return f"{text}, forward split" if self.forward_split else text


@keyword_record
class LayerGeometry:
    """Shapes of a TT layer's step: modes, ranks ``(1, r_1, .., r_{d-1}, 1)`` and the batch (samples)."""

    in_modes: tuple[int, ...]
    out_modes: tuple[int, ...]
    ranks: tuple[int, ...]
    batch: int

    def __post_init__(self) -> None:
        d = len(self.in_modes)
        if d < 1 or len(self.out_modes) != d or len(self.ranks) != d + 1:
            raise ValueError(f"need d >= 1 in_modes, d out_modes and d + 1 ranks, got {self.in_modes}, "
                             f"{self.out_modes}, {self.ranks}")
        for name in ("in_modes", "out_modes", "ranks"):
            for value in getattr(self, name):
                _check_int(name, value, 1, 1 << 20)
        if self.ranks[0] != 1 or self.ranks[-1] != 1:
            raise ValueError(f"boundary ranks must be 1, got {self.ranks}")
        _check_int("batch", self.batch, 1, 1 << 20)

    @classmethod
    def of_cores(cls, cores, batch: int) -> LayerGeometry:
        """The geometry of cores ``(r_{k-1}, m_k, n_k, r_k)`` (NumPy arrays or tensors)."""
        return cls(in_modes=tuple(int(c.shape[2]) for c in cores), out_modes=tuple(int(c.shape[1]) for c in cores),
                   ranks=(1, *(int(c.shape[3]) for c in cores)), batch=batch)

    @property
    def order(self) -> int:
        return len(self.in_modes)

    def core(self, k: int) -> dict[str, int]:
        """Sizes of contraction ``k``: batch ``B``, produced ``P``, ``a = r_{k-1}``, ``m``, ``n``, ``c = r_k``,
        remaining ``R``."""
        return {"B": self.batch, "P": math.prod(self.out_modes[:k]), "a": self.ranks[k], "m": self.out_modes[k],
                "n": self.in_modes[k], "c": self.ranks[k + 1], "R": math.prod(self.in_modes[k + 1:])}


@dataclass(frozen=True)
class Contraction:
    """One contraction of the step as one PE computes it, before tiling.

    ``dims`` are the PE's ``(I, J, K, L)`` for the whole contraction; ``folded``
    (core gradients only) is the summed length ``T`` before it was folded into
    ``J x K``. ``a_bits``/``b_bits`` are the widths of the codes that go in
    (bits), which bound the products. ``stage``: contractions of one stage
    need nothing from each other (:func:`stages`). Phases: ``forward``,
    ``core_grad``, ``input_grad``, and on the dense route ``outer`` (PE3),
    ``dense_left`` (PE2) and ``dense_right`` (PE1), whose ``core`` is the
    core contracted (the outer products: 0) and ``route`` the route's step
    (source and target node) the contraction computes.
    """

    phase: str
    core: int
    pe: str
    dims: tuple[int, int, int, int]
    a_bits: int
    b_bits: int
    folded: int = 0
    stage: int = 0
    route: RouteStep | None = None

    @property
    def name(self) -> str:
        return f"{self.phase}[{self.core}]"

    @property
    def macs(self) -> int:
        """Useful products (folding padding not counted; PE3's ``J`` samples each give ``I x L``)."""
        i, j, k, l = self.dims
        return i * l * (self.folded if self.folded else j * k)


@dataclass(frozen=True)
class PeCall:
    """One PE transaction: contraction ``index`` of the plan restricted to half-open ranges of I, J, K, L.

    ``swapped``: a PE2 contraction's call run on PE1 with every ``(i, k)`` a
    row (``forward_split``, the module docstring)."""

    index: int
    pe: str
    i: tuple[int, int]
    j: tuple[int, int]
    k: tuple[int, int]
    l: tuple[int, int]
    swapped: bool = False

    @property
    def dims(self) -> tuple[int, int, int, int]:
        """The ranges' lengths, in the contraction's ``(I, J, K, L)``."""
        return tuple(stop - start for start, stop in (self.i, self.j, self.k, self.l))  # type: ignore[return-value]

    @property
    def header(self) -> int:
        """The call's header word: ``(I, J, K, L)``, PE3's ``(I, J)`` = this call's ``I`` and ``L``, a swapped
        call's ``(I·K, 1, J, L)``."""
        i, j, k, l = self.dims
        if self.swapped:
            return header_word(i * k, 1, j, l)
        return header_word(i, l) if self.pe == "tt3" else header_word(i, j, k, l)


@dataclass(frozen=True)
class StepPlan:
    """The contractions of a step in execution order and the PE calls each is cut into (in the same order)."""

    geometry: LayerGeometry
    hardware: StepHardware
    contractions: tuple[Contraction, ...]
    calls: tuple[PeCall, ...]

    def calls_of(self, index: int) -> list[PeCall]:
        return [call for call in self.calls if call.index == index]


def stages(plan: StepPlan) -> list[tuple[int, ...]]:
    """Indices of the contractions that may run at once, stage by stage, in the plan's order.

    A forward contraction needs the state the previous one produced (and the
    host's scale for it): a stage of its own. The core gradient and the
    input gradient of core ``k`` need only the gradient of the state leaving
    ``k``, the saved state and the core, so they share a stage; the next
    stage needs the input gradient (and the host's scale for it). On the
    dense route the outer products share the first backward stage, and the
    route's steps of depth ``t`` the stage after it with the next input
    gradient (:func:`contractions` numbers them; the plan lists each stage's
    contractions together).
    """
    out: list[tuple[int, ...]] = []
    for index, item in enumerate(plan.contractions):
        if out and plan.contractions[out[-1][0]].stage == item.stage:
            out[-1] = (*out[-1], index)
        else:
            out.append((index,))
    return out


def stage_numbers(plan: StepPlan) -> list[int]:
    """Each contraction's stage, numbered in the plan's order (:func:`stages`)."""
    numbers = [0] * len(plan.contractions)
    for number, group in enumerate(stages(plan)):
        for index in group:
            numbers[index] = number
    return numbers


def assign_calls(call_cycles: Sequence[int], copies: int) -> list[int]:
    """The copy (0..copies-1) of a PE that takes each call, in order: the one that falls free first, the lowest
    numbered on a tie, given every call's cycles. The host's rule for splitting one stage's calls of a PE over its
    copies (:func:`codesign.step.tt.cycles.list_schedule`, the board runtime's ``IpRunner``)."""
    return copy_totals(call_cycles, copies)[0]


def copy_totals(call_cycles: Sequence[int], copies: int) -> tuple[list[int], list[int]]:
    """:func:`assign_calls`'s copy of each call, and each copy's cycles (the calls it took, added)."""
    _check_int("copies", copies, 1, MAX_UNITS)
    free = [0] * copies
    out = []
    for cycles in call_cycles:
        unit = min(range(copies), key=lambda u: (free[u], u))
        free[unit] += int(cycles)
        out.append(unit)
    return out, free


def max_terms(acc_bits: int, a_bits: int, b_bits: int) -> int:
    """Products one accumulator may sum without any partial sum leaving ``acc_bits`` (signed), whatever the codes.

    The largest product of an ``a_bits`` and a ``b_bits`` code is
    ``2^(a_bits-1) · 2^(b_bits-1)`` (both at their most negative code).
    """
    return ((1 << (acc_bits - 1)) - 1) >> (a_bits + b_bits - 2)


def fold(total: int, spec: Tt1Spec) -> tuple[int, int]:
    """``(J, K)`` a summed length ``total`` is folded into (zero padding at the end): ``K`` whole chunks of
    ``lanes``, as many as the buffer takes and the length needs, and ``J = ceil(total / K)``."""
    k = spec.max_k // spec.lanes * spec.lanes or spec.max_k
    k = min(k, chunks(total, spec.lanes) * spec.lanes)
    return -(-total // k), k


def contractions(geometry: LayerGeometry, *, act_bits: int, grad_bits: int, core_bits: int, need_input_grad: bool,
                 hardware: StepHardware, core_grad_route: str = "direct") -> list[Contraction]:
    """The step's contractions in the golden model's order: forward 0..d-1, then for k = d-1..0 the core gradient
    and (except for k = 0 without ``need_input_grad``) the input gradient; on the dense route the input gradients
    with, stage by stage, the outer products and the route's steps (:func:`stages`)."""
    if core_grad_route not in ROUTES:
        raise ValueError(f"core_grad_route must be one of {ROUTES}, got {core_grad_route!r}")
    d = geometry.order
    out = []
    for k in range(d):
        s = geometry.core(k)
        out.append(Contraction("forward", k, "tt2", (s["P"], s["a"] * s["n"], s["R"] * s["B"], s["m"] * s["c"]),
                               act_bits, core_bits, stage=k))

    def input_grad(k: int, stage: int) -> Contraction:
        s = geometry.core(k)
        return Contraction("input_grad", k, "tt2", (s["P"], s["m"] * s["c"], s["R"] * s["B"], s["a"] * s["n"]),
                           grad_bits, core_bits, stage=stage)

    if core_grad_route == "direct":
        for k in range(d - 1, -1, -1):
            s = geometry.core(k)
            total = s["P"] * s["R"] * s["B"]
            j, kk = fold(total, hardware.pe1)
            stage = d + (d - 1 - k)
            out.append(Contraction("core_grad", k, "tt1", (s["m"] * s["c"], j, kk, s["a"] * s["n"]), grad_bits,
                                   act_bits, folded=total, stage=stage))
            if k > 0 or need_input_grad:
                out.append(input_grad(k, stage))
        return out
    in_features, out_features = math.prod(geometry.in_modes), math.prod(geometry.out_modes)
    route = dense_route(d)
    inputs = list(range(d - 1, -1, -1)) if need_input_grad else []  # the chain serves only the input gradient
    for depth in range(d):  # the route is d - 1 deep after the outer products; the chain has at most d steps
        stage = d + depth
        if depth < len(inputs):
            out.append(input_grad(inputs[depth], stage))
        if depth == 0 and hardware.outer_pe == "tt3":
            out.append(Contraction("outer", 0, "tt3", (in_features, geometry.batch, 1, out_features), act_bits,
                                   grad_bits, stage=stage))
        elif depth == 0:  # PE1, as a core gradient: the gradient (M, B) against the input (N, B), B folded
            j, kk = fold(geometry.batch, hardware.pe1)
            out.append(Contraction("outer", 0, "tt1", (out_features, j, kk, in_features), grad_bits, act_bits,
                                   folded=geometry.batch, stage=stage))
        for step in route:
            if step.depth == depth:
                out.append(_route_contraction(geometry, step, grad_bits, core_bits, stage))
    return out


def _route_contraction(geometry: LayerGeometry, step: RouteStep, grad_bits: int, core_bits: int, stage: int
                       ) -> Contraction:
    """One step of the dense route as a PE2 (left) or PE1 (right) contraction (the module docstring's layouts)."""
    a, m, n, c = (geometry.ranks[step.core], geometry.out_modes[step.core], geometry.in_modes[step.core],
                  geometry.ranks[step.core + 1])
    size = math.prod(node_shape(step.source, geometry.ranks, geometry.out_modes, geometry.in_modes))
    if step.side == "left":
        return Contraction("dense_left", step.core, "tt2", (1, a * m * n, size // (a * m * n), c), grad_bits,
                           core_bits, stage=stage, route=step)
    return Contraction("dense_right", step.core, "tt1", (size // (m * n * c), m * n, c, a), grad_bits, core_bits,
                       stage=stage, route=step)


def _ranges(length: int, step: int, start: int = 0) -> list[tuple[int, int]]:
    """``[start, length)`` in pieces of at most ``step``."""
    return [(first, min(first + step, length)) for first in range(start, length, step)]


def _terms(contraction: Contraction, pe: str, spec: Tt1Spec | Tt2Spec) -> int:
    """:func:`max_terms` of ``contraction``'s codes on ``pe``'s build ``spec``, refused where it cannot take them."""
    if contraction.a_bits > spec.a_bits or contraction.b_bits > spec.b_bits:
        raise ValueError(f"{contraction.name} needs {contraction.a_bits} x {contraction.b_bits}-bit operands, but "
                         f"{pe} is built for {spec.a_bits} x {spec.b_bits} bits")
    terms = max_terms(spec.acc_bits, contraction.a_bits, contraction.b_bits)
    if terms < 1:
        raise ValueError(f"{contraction.name}: one {contraction.a_bits} x {contraction.b_bits}-bit product can "
                         f"saturate {pe}'s {spec.acc_bits}-bit accumulator")
    return terms


def _tile_own(index: int, contraction: Contraction, hardware: StepHardware, k_to: int | None = None,
              k_step: int | None = None) -> list[PeCall]:
    """Calls of ``contraction`` on its own PE, over ``K`` up to ``k_to`` (default: all of it), PE2's ``K`` in
    pieces of ``k_step`` (default: its buffer's ``max_k``)."""
    spec = hardware.spec(contraction.pe)
    i, j, k, l = contraction.dims
    if contraction.pe == "tt3":  # one sample (J) a call, its products exact: no accumulator to protect
        return [PeCall(index, "tt3", ri, rj, (0, 1), rl) for rj in _ranges(j, 1) for ri in _ranges(i, MAX_DIM)
                for rl in _ranges(l, spec.max_j)]
    terms = _terms(contraction, contraction.pe, spec)
    if contraction.pe == "tt1":  # sums over J and K
        k_step = min(spec.max_k, terms)
        j_step = max(1, min(spec.max_j, terms // k_step))
    else:  # sums over J only; K runs through
        k_step = k_step or spec.max_k
        j_step = min(spec.max_j, terms)
    return [PeCall(index, contraction.pe, ri, rj, rk, rl)
            for ri in _ranges(i, MAX_DIM) for rl in _ranges(l, min(spec.max_l, MAX_DIM))
            for rk in _ranges(k if k_to is None else k_to, k_step) for rj in _ranges(j, j_step)]


def _tile_swapped(index: int, contraction: Contraction, hardware: StepHardware, k_from: int, k_step: int
                  ) -> list[PeCall]:
    """Swapped PE1 calls of a PE2 contraction over ``K`` from ``k_from`` on, ``k_step`` positions of ``K`` a call
    (at most 255 rows ``(i, k)``, ``k`` innermost), ``J`` (PE1's ``K``) within PE1's buffer and its
    accumulator's terms."""
    spec = hardware.pe1
    i, j, k, l = contraction.dims
    j_step = min(spec.max_k, _terms(contraction, "tt1", spec))
    k_step = max(1, min(k_step, MAX_DIM))
    return [PeCall(index, "tt1", ri, rj, rk, rl, swapped=True)
            for ri in _ranges(i, MAX_DIM // k_step) for rl in _ranges(l, min(spec.max_l, MAX_DIM))
            for rk in _ranges(k, k_step, k_from) for rj in _ranges(j, j_step)]


SPLIT_PIECES = 2  # pieces of K per copy that a split forward contraction is cut into at least, where K allows
SPLIT_TRIES = (0.5, 0.625, 0.75, 0.875, 1.0, 1.125, 1.25, 1.5)  # split points tried, as fractions of the estimate


def _split_calls(index: int, contraction: Contraction, hardware: StepHardware, split: int) -> list[PeCall]:
    """A forward contraction's calls with ``K`` split at ``split``: PE2 ``[0, split)``, PE1 ``[split, K)``, each
    range cut into at least :data:`SPLIT_PIECES` pieces per copy where it is long enough, so every copy works."""
    k = contraction.dims[2]
    lanes = hardware.pe2.lanes
    own_step = min(hardware.pe2.max_k, lanes * max(1, -(-split // (lanes * SPLIT_PIECES * hardware.pe2_units))))
    swapped_step = max(1, -(-(k - split) // (SPLIT_PIECES * hardware.pe1_units)))
    own = _tile_own(index, contraction, hardware, split, own_step)
    return own + _tile_swapped(index, contraction, hardware, split, swapped_step) if split < k else own


def _makespan(calls: Sequence[PeCall], hardware: StepHardware) -> int:
    """Cycles of a stage of ``calls``: each PE's calls on its copies (:func:`assign_calls`), the busiest copy."""
    return max(max(copy_totals([transaction_cycles(hardware.spec(pe), call.header).total for call in calls
                                if call.pe == pe], hardware.units(pe))[1])
               for pe in dict.fromkeys(call.pe for call in calls))


def forward_split_point(index: int, contraction: Contraction, hardware: StepHardware) -> int:
    """Where a forward contraction's ``K`` is split (PE2 ``[0, s)``, PE1 ``[s, K)``), in whole chunks of PE2 lanes.

    Each PE's cycles per copy for the whole axis, taken as even along
    ``K``, give the ``s`` at which both ends take the same time; around it
    (:data:`SPLIT_TRIES`) the point whose calls the copies finish soonest
    (:func:`_makespan`) is taken, the larger on a tie. A PE1 that cannot take
    the codes gets nothing."""
    k = contraction.dims[2]
    try:
        _terms(contraction, "tt1", hardware.pe1)
    except ValueError:
        return k
    per_copy = {}
    for pe, calls in (("tt2", _split_calls(index, contraction, hardware, k)),
                      ("tt1", _split_calls(index, contraction, hardware, 0))):
        per_copy[pe] = sum(transaction_cycles(hardware.spec(pe), call.header).total for call in calls) / \
            hardware.units(pe)
    estimate = k * per_copy["tt1"] / (per_copy["tt1"] + per_copy["tt2"])
    lanes = hardware.pe2.lanes
    tries = sorted({min(k, lanes * round(estimate * factor / lanes)) for factor in SPLIT_TRIES}, reverse=True)
    return min(tries, key=lambda split: _makespan(_split_calls(index, contraction, hardware, split), hardware))


def tile(index: int, contraction: Contraction, hardware: StepHardware) -> list[PeCall]:
    """Calls of one contraction: ``I`` in pieces of <= 255, the other axes within the build's limits, and the summed
    axes short enough that no accumulator saturates (:func:`max_terms`). Summed axes innermost, so a call's partial
    sum is followed by the rest of the same outputs. With ``hardware.forward_split`` a forward contraction's tail
    of ``K`` goes to PE1 as swapped calls (:func:`forward_split_point`, :func:`_split_calls`)."""
    if contraction.phase != "forward" or not hardware.forward_split:
        return _tile_own(index, contraction, hardware)
    return _split_calls(index, contraction, hardware, forward_split_point(index, contraction, hardware))


def plan_step(geometry: LayerGeometry, *, act_bits: int = 8, grad_bits: int = 16, core_bits: int = 4,
              need_input_grad: bool = True, hardware: StepHardware = StepHardware(),
              core_grad_route: str = "direct") -> StepPlan:
    """The schedule of one training step of a layer of ``geometry``: contractions and PE calls, shapes only."""
    for name, bits in (("act_bits", act_bits), ("grad_bits", grad_bits), ("core_bits", core_bits)):
        _check_int(name, bits, 2, 16)
    items = contractions(geometry, act_bits=act_bits, grad_bits=grad_bits, core_bits=core_bits,
                         need_input_grad=need_input_grad, hardware=hardware, core_grad_route=core_grad_route)
    calls = [call for index, item in enumerate(items) for call in tile(index, item, hardware)]
    return StepPlan(geometry=geometry, hardware=hardware, contractions=tuple(items), calls=tuple(calls))




HARDWARE_FIELDS = {"tt1": "pe1", "tt2": "pe2", "tt3": "pe3"}  # the StepHardware field of each TT PE
SPEC_CLASSES = {"tt1": Tt1Spec, "tt2": Tt2Spec, "tt3": Tt3Spec}


def hardware_of(builds: Sequence[Tuple[str, str, object]], *, design: str) -> StepHardware:
    """The PE builds a design's TT IPs give a step, from ``(IP name, PE, spec)`` of every IP (others ignored).

    tt1 and tt2 are required, each in copies of one build; tt3 at most once
    (it takes the outer products of the dense route, one call at a time;
    without it PE1 forms the dense weight gradient, ``outer_pe``). A spec may be a spec object or its
    ``to_dict()`` (design.json's form), so the desktop and the board share
    this rule. Raises ValueError naming the design and the IPs.
    """
    fields: dict = {}
    for pe, field in HARDWARE_FIELDS.items():
        found = [(name, spec if isinstance(spec, SPEC_CLASSES[pe]) else SPEC_CLASSES[pe](**spec))
                 for name, kind, spec in builds if kind == pe]
        if not found and pe != "tt3":
            raise ValueError(f"design {design!r} has no {pe} instance; the TT loop needs one")
        if len(found) > 1 and pe == "tt3":
            raise ValueError(f"design {design!r} has {len(found)} tt3 instances; the step runs PE3's calls on one, "
                             "so one is the most the TT loop takes")
        if any(spec != found[0][1] for _, spec in found):
            raise ValueError(f"design {design!r}: the {pe} instances {', '.join(name for name, _ in found)} are "
                             "different builds; copies of a PE must share one build")
        if found:
            fields[field] = found[0][1]
        if pe != "tt3":
            fields[f"{field}_units"] = len(found)
        else:
            fields["outer_pe"] = "tt3" if found else "tt1"  # without a PE3, PE1 forms the dense weight gradient
    return StepHardware(**fields)
