"""A training step shared among copies of one IP: drafted calls dealt into lists that run side by side.

Why: a step's batch tiles (lane chunks, row tiles) and its parameter tiles (stored blocks, weight tiles) are
independent work (a batch tile's activations go through every layer on their own; a parameter tile's gradient and
update touch that tile alone), so copies of the PE can take them at once, phase by phase, while every result keeps
the one-IP step's products in the same order: bit for bit the same.

A *phase* is lists that run side by side, ``(pe, calls)`` each on its own IP; they write disjoint words and read
none another writes. Before their records are placed, a list is *drafted*: ``(header, segments, out, count,
rounding)`` a call (:data:`Draft`). A family's builder (:mod:`codesign.step.csb.lists`,
:mod:`codesign.step.csb.conv_step`, :mod:`codesign.step.fpmac_array.lists`) drafts each phase as a list of drafted
lists; :func:`placed` turns them into phases of calls (on one IP, one list a direction), and :func:`phased_step_cycles`
prices them, a phase as its longest list.
"""

from __future__ import annotations

from typing import Callable, Dict, List, Optional, Sequence, Tuple

from codesign.contracts.calls import RECORD_WORDS, Block, Call, check_list, check_side_by_side
from codesign.numerics.round_stage import RoundStageConfig
from codesign.step.list_cycles import DdrTiming, fast_step_cycles, step_cycles

Draft = Tuple[int, Tuple[Block, ...], Block, int, RoundStageConfig]  # header, segments, out, results, rounding
Phase = Tuple[Tuple[str, Tuple[Call, ...]], ...]  # lists run side by side, ``(pe, calls)`` each on its own IP


def calls_of(items: Sequence[Draft], first_record: int) -> Tuple[Call, ...]:
    """The calls of drafted ``items``, their records one after another from ``first_record``."""
    return tuple(Call(header=header, segments=segments, out=out, count=count, rounding=rounding,
                      record=first_record + 4 * RECORD_WORDS * index)
                 for index, (header, segments, out, count, rounding) in enumerate(items))


def check_copies(copies) -> int:
    """``copies`` as the IPs a step's lists are shared among: a positive int."""
    if isinstance(copies, bool) or not isinstance(copies, int) or copies < 1:
        raise ValueError(f"copies={copies!r} must be a positive int: the IPs the lists run on")
    return copies


def runs(count: int, copies: int) -> List[range]:
    """``range(count)`` cut into at most ``copies`` runs of near-equal length, none empty."""
    parts = min(count, copies)
    edges = [count * i // parts for i in range(parts + 1)] if parts else [0]
    return [range(low, high) for low, high in zip(edges, edges[1:])]


def balanced(groups: Sequence[List[Draft]], copies: int, cost: Callable[[Draft], int]) -> List[List[Draft]]:
    """``groups`` of drafts (each to run in order on one IP) dealt to at most ``copies`` lists by their ``cost`` (a
    draft's cycles, as far as the family's PE model says), the costliest first to the least loaded; each list
    keeps its groups in the given order."""
    costs = [sum(cost(item) for item in group) for group in groups]
    loads, dealt = [0] * copies, [[] for _ in range(copies)]
    for index in sorted(range(len(groups)), key=lambda i: -costs[i]):
        least = loads.index(min(loads))
        loads[least] += costs[index]
        dealt[least].append(index)
    return [[item for index in sorted(part) for item in groups[index]] for part in dealt if part]


def placed(phases: Sequence[Sequence[List[Draft]]], copies: int, pe: str, first_record: int, record_slots: int,
           arena_bytes: int, stream_bits: int = 32) -> Tuple[Phase, ...]:
    """Drafted ``phases`` as phases of calls on ``copies`` IPs of ``pe``: on one IP, one list of them all in order;
    on several, the phases that have work, their lists writing their records one after another from
    ``first_record``; each checked against the arena (``arena_bytes``, blocks of whole ``stream_bits``-wide beats)
    and its ``record_slots``, and a phase's lists against each other
    (:func:`~codesign.contracts.calls.check_side_by_side`)."""
    if check_copies(copies) == 1:
        phases = [[[item for lists in phases for items in lists for item in items]]]
    else:
        phases = [[items for items in lists if items] for lists in phases if any(lists)]
    out = []
    for lists in phases:
        record, called = first_record, []
        for items in lists:
            called.append((pe, calls_of(items, record)))
            record += 4 * RECORD_WORDS * len(items)
        calls = sum(len(items) for items in lists)
        if calls > record_slots:
            raise ValueError(f"{calls} calls in a phase, {record_slots} record slots")
        for _, listed in called:
            check_list(listed, arena_bytes, stream_bits)
        check_side_by_side([listed for _, listed in called], arena_bytes // 4)
        out.append(tuple(called))
    return tuple(out)


def _one_list(phases: Tuple[Phase, ...]) -> Tuple[Call, ...]:
    if len(phases) != 1 or len(phases[0]) != 1:
        raise ValueError(f"the step runs as {sum(map(len, phases))} lists in {len(phases)} phases, not one list")
    return phases[0][0][1]


class PhasedLists:
    """A step's ``forward_phases`` and ``backward_phases`` (its record's fields): all its ``phases`` in order, and on
    one IP its ``forward`` and ``backward`` lists."""

    forward_phases: Tuple[Phase, ...]
    backward_phases: Tuple[Phase, ...]

    @property
    def phases(self) -> List[List[Tuple[str, Tuple[Call, ...]]]]:
        return [list(phase) for phase in (*self.forward_phases, *self.backward_phases)]

    @property
    def forward(self) -> Tuple[Call, ...]:
        """The forward list of a step on one IP."""
        return _one_list(self.forward_phases)

    @property
    def backward(self) -> Tuple[Call, ...]:
        """The backward list of a step on one IP."""
        return _one_list(self.backward_phases)


def phased_step_cycles(pe: str, spec, lists: PhasedLists, arena, *, ddr: Optional[DdrTiming] = None,
                       fast: bool = False) -> Dict[str, object]:
    """Cycles of a step's ``lists`` on IPs of ``pe`` built ``spec``, a phase its longest list's (they run side by
    side), each from ``run_start`` to ``ap_done``: by phase (``forward`` and ``backward`` where each is one phase,
    else ``forward 1``, ``backward 1``, ...), ``total``, the ``breakdown`` of each phase's longest list summed
    (fetch, pe, stall, record, control), ``calls``, each phase's ``words`` (all its lists') and ``list_words``
    (each list's, in the order of the IPs). ``ddr``: the list bench's DDR model (None: the AXI RAM alone).
    ``fast``: the same figure, each list simulated once per shape and re-priced by the PE's compute cycles
    (:func:`codesign.step.list_cycles.fast_step_cycles`; for the explorer)."""
    price = fast_step_cycles if fast else step_cycles
    out: Dict[str, object] = {"total": 0, "calls": 0, "words": {}, "list_words": {}}
    breakdown: Dict[str, int] = {}
    for part, phases in (("forward", lists.forward_phases), ("backward", lists.backward_phases)):
        for index, phase in enumerate(phases):
            name = part if len(phases) == 1 else f"{part} {index + 1}"
            priced = [price(pe, spec, {name: calls}, arena, ddr=ddr) for _, calls in phase]
            longest = max(priced, key=lambda run: run["total"])
            out[name] = longest["total"]
            out["total"] += longest["total"]
            out["calls"] += sum(run["calls"] for run in priced)
            out["list_words"][name] = [run["words"][name] for run in priced]
            out["words"][name] = tuple(sum(words[side] for words in out["list_words"][name]) for side in (0, 1))
            for key, value in longest["breakdown"].items():
                breakdown[key] = breakdown.get(key, 0) + value
    return {**out, "breakdown": breakdown}


__all__ = ["Draft", "Phase", "PhasedLists", "balanced", "calls_of", "check_copies", "phased_step_cycles", "placed",
           "runs"]
