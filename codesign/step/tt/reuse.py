"""What keeping data on chip would save a TT layer's step, budgeted against the BRAM beside the PEs.

Every PE call of a step streams its operands in from DDR and its results out
(:mod:`codesign.step.tt.cycles` counts them), and the host rounds each
result before it goes back in as the next call's operand. Two kinds of data
come back:

- **intermediate states**: a contraction's result that a later contraction
  of the same layer reads (the forward states, the gradients of the states,
  the dense route's partial contractions of ``dW``; on the direct route the
  forward states again, as the core gradients' cached operand). Kept on
  chip, its producer would not send it and its consumers would not stream it
  in; the BRAM must hold it at the width the consumers read it at.
- **cores across calls**: a contraction cut into several calls resends its
  cached operand to every call. A PE copy whose previous call had the same
  cached operand could keep it.

The scales of the rounding are chosen from a whole tensor before any value
is rounded (docs/tt_pe.md), so keeping a state would also need the rounding
on chip; this model counts that as free, so its savings are an upper bound.
It does not change the hardware: it tells whether such hardware is worth
building on a board (:func:`reuse_budget`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from codesign.pe.tt.cycles import operand_words, stream_words, transaction_cycles
from codesign.step.tt.schedule import StepPlan, stage_numbers, stages

BRAM36_BYTES = 36 * 1024 // 8  # one 36 Kib block RAM


@dataclass(frozen=True)
class KeptState:
    """One intermediate state of a step: the contraction that makes it and those that read it (operand ``a`` or
    ``b``), its values and the width they read it at (bits)."""

    producer: int
    consumers: tuple[tuple[int, str], ...]
    values: int
    bits: int

    @property
    def bytes(self) -> int:
        """Bytes on chip at the consumers' width."""
        return math.ceil(self.values * self.bits / 8)


def state_flow(plan: StepPlan) -> list[KeptState]:
    """The intermediate states of ``plan``: which contraction (index) makes each and which read it, in plan order.

    The layer's input, its output, its input gradient and the core gradients
    leave the layer and are not intermediate states.
    """
    items = plan.contractions
    index = {(item.phase, item.core): i for i, item in enumerate(items) if item.route is None}
    maker = {item.route.target: i for i, item in enumerate(items) if item.route is not None}  # node -> contraction
    if ("outer", 0) in index:
        maker[(0, plan.geometry.order)] = index[("outer", 0)]  # dW
    readers: dict[int, list[tuple[int, str]]] = {}
    for i, item in enumerate(items):
        k = item.core
        if item.phase in ("forward", "input_grad", "core_grad"):
            source = {"forward": ("forward", k - 1), "input_grad": ("input_grad", k + 1),
                      "core_grad": ("input_grad", k + 1)}[item.phase]
            if source in index:
                readers.setdefault(index[source], []).append((i, "a"))
            if item.phase == "core_grad" and ("forward", k - 1) in index:  # the saved state entering core k
                readers.setdefault(index[("forward", k - 1)], []).append((i, "b"))
        if item.route is not None:  # a step of the dense route reads its source node
            readers.setdefault(maker[item.route.source], []).append((i, "a"))
    out = []
    for producer, consumers in sorted(readers.items()):
        i, _, k, l = items[producer].dims
        values = i * l * (k if items[producer].pe == "tt2" else 1)
        bits = max(items[c].a_bits if operand == "a" else items[c].b_bits for c, operand in consumers)
        out.append(KeptState(producer, tuple(consumers), values, bits))
    return out


def repeated_cores(plan: StepPlan, units: Sequence[int]) -> list[bool]:
    """Per call: whether its PE copy (``units``, as scheduled) ran a call of the same contraction with the same
    cached operand just before it, so it could keep that operand instead of receiving it again."""
    last: dict[tuple[str, int], tuple] = {}
    out = []
    for call, unit in zip(plan.calls, units):
        # the cached operand's ranges: PE1's B (L, J, K), PE2's B (L, J) (a swapped call's too: the same core
        # rows), PE3's one sample's gradient (J, L)
        kind = "tt2" if call.swapped else call.pe
        cached = (call.index, *{"tt1": (call.l, call.j, call.k), "tt2": (call.l, call.j), "tt3": (call.j, call.l)}[
            kind])
        out.append(last.get((call.pe, unit)) == cached)
        last[(call.pe, unit)] = cached
    return out


@dataclass(frozen=True)
class ReuseBudget:
    """A network step's data with and without keeping on chip what it reuses (:func:`reuse_budget`).

    Words are 32-bit (bytes / 4), cycles clock cycles of the step's stages
    with every call on the copy it has now. ``states`` are every layer's
    (layer index, state); ``kept`` says which are kept within ``bram_bytes``
    (:func:`keep_within`).
    """

    bram_bytes: int
    states: tuple[tuple[int, KeptState], ...]
    kept: tuple[bool, ...]
    words: int
    state_words: int  # the kept states' results and operand words
    core_words: int  # cached operands a copy already held
    cycles: int
    cycles_kept: int

    @property
    def words_kept(self) -> int:
        """The step's words once the kept states and the held cores stay on chip."""
        return self.words - self.state_words - self.core_words

    @property
    def largest_bytes(self) -> int:
        return max((state.bytes for _, state in self.states), default=0)


def step_timeline(plans: Sequence[StepPlan]) -> list[dict[int, int]]:
    """Per layer: its stages' positions in the network step, which runs every layer's forward stages in layer
    order, then every layer's backward stages from the last layer to the first."""
    maps: list[dict[int, int]] = [{} for _ in plans]
    position = 0
    for forward in (True, False):
        for layer in (range(len(plans)) if forward else reversed(range(len(plans)))):
            plan = plans[layer]
            for number, group in enumerate(stages(plan)):
                if all(plan.contractions[i].phase == "forward" for i in group) == forward:
                    maps[layer][number] = position
                    position += 1
    return maps


def keep_within(states: Sequence[KeptState], position: Sequence[int], bram_bytes: int) -> tuple[bool, ...]:
    """Which states to keep, first come first kept: a state lives from its producer's step position to its last
    reader's (``position`` of each contraction), and is kept when, at every position of its life, it fits beside
    the states kept before it that are alive then."""
    live: dict[int, int] = {}  # position -> bytes of kept states alive there
    out = []
    for state in states:
        life = range(position[state.producer], max(position[c] for c, _ in state.consumers) + 1)
        keep = all(live.get(stage, 0) + state.bytes <= bram_bytes for stage in life)
        if keep:
            for stage in life:
                live[stage] = live.get(stage, 0) + state.bytes
        out.append(keep)
    return tuple(out)


def reuse_budget(plans: Sequence[StepPlan], units: Sequence[Sequence[int]], *, bram_bytes: int) -> ReuseBudget:
    """The words and stage cycles of a network step (every layer's plan, its calls on copies ``units``) before
    and after keeping on chip the intermediate states that fit ``bram_bytes`` while alive (:func:`keep_within`,
    over the whole step: a direct route's forward states live until their layer's backward pass) and every cached
    operand a copy already holds.

    A kept state's producer sends no result words and drains no results;
    its consumers stream no words of it (operand ``A`` or ``B``). A held
    core's words are not streamed. The rounding such hardware needs is taken
    as free, and a removed drain as shortening the call by all of it that did
    not run beside the MAC loop (the next block's load beside it may then
    show), so ``cycles_kept`` is a lower
    bound of what it could reach. A removed ``A`` saves only its load cycles
    that did not run beside the MAC loop (``Cycles.overlap``).
    """
    timeline = step_timeline(plans)
    positions = [[timeline[layer][number] for number in stage_numbers(plan)] for layer, plan in enumerate(plans)]
    flows = [(layer, state) for layer, plan in enumerate(plans) for state in state_flow(plan)]
    offsets = [0]
    for plan in plans:
        offsets.append(offsets[-1] + len(plan.contractions))
    kept = keep_within([KeptState(offsets[layer] + state.producer,
                                  tuple((offsets[layer] + c, operand) for c, operand in state.consumers),
                                  state.values, state.bits) for layer, state in flows],
                       [p for layer_positions in positions for p in layer_positions], bram_bytes)
    words = state_words = core_words = 0
    before: dict[tuple[int, str, int], int] = {}
    after: dict[tuple[int, str, int], int] = {}
    for layer, (plan, copies) in enumerate(zip(plans, units)):
        mine = [(state, keep) for (owner, state), keep in zip(flows, kept) if owner == layer and keep]
        no_result = {state.producer for state, _ in mine}
        no_operand = {(c, operand) for state, _ in mine for c, operand in state.consumers}
        for call, unit, again in zip(plan.calls, copies, repeated_cores(plan, copies)):
            spec = plan.hardware.spec(call.pe)
            cycles = transaction_cycles(spec, call.header)
            a_words, b_words = operand_words(spec, call.header)
            moved_in, moved_out = stream_words(spec, call.header)
            results = moved_out - 1  # result words, less the status word
            words += (moved_in + moved_out) * spec.parts
            saved = 0
            if call.index in no_result:
                state_words += results * spec.parts
                saved += cycles.drain - cycles.drain_overlap
            for operand, count in (("a", a_words), ("b", b_words)):
                if (call.index, operand) in no_operand:
                    state_words += count * spec.parts
                    saved += count - (cycles.overlap if operand == "a" else 0)  # A's hidden loads saved nothing
                elif operand == "b" and again:
                    core_words += count * spec.parts
                    saved += count
            key = (positions[layer][call.index], call.pe, unit)
            before[key] = before.get(key, 0) + cycles.total
            after[key] = after.get(key, 0) + cycles.total - saved
    return ReuseBudget(bram_bytes=bram_bytes, states=tuple(flows), kept=kept, words=words, state_words=state_words,
                       core_words=core_words, cycles=_makespan(before), cycles_kept=_makespan(after))


def _makespan(loads: dict[tuple[int, str, int], int]) -> int:
    """Cycles of the stages one after another, each as long as its busiest copy."""
    per_stage: dict[int, int] = {}
    for (stage, _, _), cycles in loads.items():
        per_stage[stage] = max(per_stage.get(stage, 0), cycles)
    return sum(per_stage.values())


__all__ = ["BRAM36_BYTES", "KeptState", "ReuseBudget", "keep_within", "repeated_cores", "reuse_budget", "state_flow",
           "step_timeline"]
