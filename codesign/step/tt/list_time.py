"""The whole-step model of a TT network trained as call lists (:mod:`codesign.step.tt.step_lists`): every layer's
lists priced by the list cycle model, and the host's work left per step, counted.

A list step's PE and DMA time is not the per-call model's (:mod:`codesign.step.tt.time`): the shell's movers
read operands where they lie, chains sum in the shell's buffer and the rounding stage writes codes, so each
list is priced by :func:`codesign.step.list_cycles.list_cycles`, which the RTL's cycles equal
(``tests/step/tt/test_step_lists_rtl.py``), under a DDR latency model (:class:`DdrTiming`). A phase's PE1
and PE2 lists run side by side, so a phase is one stage of the longer list's cycles; the stage model then
charges the port and DDR where the board's are slower than the cycle model's memory: each IP's words through
the high-performance port the block design gives it (:func:`list_ports`), all through the DDR.

The host's part is what :class:`codesign.loops.tt_lists.TtListTrainer` leaves it, counted here as
:class:`HostWork` (its seconds are measured where it runs, as a board's would be:
:func:`codesign.design.families.tt_list_step.measure_list_host`). Cycles do not depend on the values, the shifts
or the code widths, only on shapes and layouts, so the lists are built on zero codes.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from codesign.boards import Board
from codesign.pe.tt.cycles import transaction_cycles
from codesign.pe.tt.spec import Tt1Spec, Tt2Spec
from codesign.step.list_cycles import BOARD_DDR, DdrTiming, phase_cycles, phase_port_words
from codesign.step.model import check_hp_ports, hp_port_of
from codesign.step.time import Stage, StepTime, hidden_seconds, step_time
from codesign.step.tt.step_lists import Fracs, StepLists, check_specs, step_lists
from codesign.step.tt.time import TtLayers, tt_mac_energy_pj



@dataclass(frozen=True, kw_only=True)
class HostWork:
    """What the board's host does in one list step of a network, counted (values, bytes, runs), with no PE
    contraction among it:

    * ``quantized``: values the host rounds to codes (each layer's input and output gradient, each bias);
    * ``elementwise``: values of the bias adds, ReLU and its derivative, the input-gradient masks;
    * ``loss``: logits through softmax cross-entropy;
    * ``adam``: parameters Adam moves (cores and biases; the prior's λ per rank beside them);
    * ``lists`` and ``calls``: list runs started, and their calls (descriptors the host wrote once);
    * ``flushed_bytes`` / ``read_bytes``: what it writes into the arenas (inputs, output gradients, cores in
      every layout a PE reads) and reads back (outputs, input gradients, core gradients, records)."""

    quantized: int
    elementwise: int
    loss: int
    adam: int
    lists: int
    calls: int
    flushed_bytes: int
    read_bytes: int

    def to_dict(self) -> dict[str, int]:
        return {name: getattr(self, name) for name in self.__dataclass_fields__}


@dataclass(frozen=True, kw_only=True)
class PeWork:
    """Where a list step's PE cycles go, by the PEs' own cycle model (no stalls,
    :func:`~codesign.pe.tt.cycles.transaction_cycles`): per PE (``"tt1"``, ``"tt2"``, every copy's calls summed)
    the cycles spent taking operands (``load``; ``overlap`` of them beside the MAC loop and results: the PEs'
    loaders), in the MAC loop (``compute``) and sending results (``drain``; ``drain_overlap`` of them beside the
    MAC loop: PE2's output engine), headers included in none;
    ``stall_free``: the step's PE cycles, phase after phase its longest list's calls as the PEs run them without
    a stall (the list cycle model's phases take at least as long); ``overlapped``: the fewest cycles a PE with
    the same streams and MAC loop could take were it to overlap loading, computing and draining across its calls
    (double-buffered operands and results): phase after phase the longest list's busiest of its input stream
    (headers and operands, a word a cycle), its MAC loop and its output side (statuses and results). It bounds
    what more overlap could save; it is not a measurement. ``balanced``: the fewest cycles were every phase's
    calls, as they are, spread evenly over all ``ips`` of both PEs (a PE's work taken by the other's IPs as fast):
    phase after phase its lists' stall-free cycles summed over the IPs. PE1 idles through the later forwards and
    PE2 through much of the backward; sharing them needs layouts neither PE writes today (docs/tt_step.md, "What
    is left"), so this bounds what sharing phases across the PE types could save."""

    load: dict[str, int]
    compute: dict[str, int]
    drain: dict[str, int]
    overlap: dict[str, int]
    drain_overlap: dict[str, int]
    stall_free: int
    overlapped: int
    balanced: int

    def to_dict(self) -> dict:
        return {name: getattr(self, name) for name in self.__dataclass_fields__}


@dataclass(frozen=True, kw_only=True)
class ListStep:
    """A network's list step priced: ``time`` (the stage model; ``host_s`` the host's seconds as given less
    ``host_hidden_s``, those its phases hide), ``host`` (the work left),
    per layer its PE and DMA cycles (``layer_cycles``) and its phases' cycles (``phase_cycles``), its PE
    cycles by part (``pe_work``) and its phases as the stage model took them (``stages``)."""

    time: StepTime
    host: HostWork
    layer_cycles: tuple[int, ...]
    phase_cycles: tuple[tuple[int, ...], ...]
    pe_work: PeWork
    host_hidden_s: float = 0.0  # of the host's work, the seconds that ran while a phase's lists computed
    stages: tuple[Stage, ...] = ()


def zero_fracs(cores: Sequence[np.ndarray], precision) -> Fracs:
    """Fraction bits of 0 throughout at ``precision``'s code widths: the lists' layout and cycles do not depend on
    the scales (a scale is a rounding shift in a descriptor)."""
    zeros = (0,) * len(cores)
    return Fracs(act=zeros, grad=zeros, core_grad=zeros, core=zeros, act_bits=int(precision["activation_bits"]),
                 grad_bits=int(precision["grad_bits"]), core_bits=int(precision["core_bits"]))


def tt_list_plans(setup: TtLayers, spec1: Tt1Spec, spec2: Tt2Spec, copies: tuple[int, int] = (1, 1)
                  ) -> list[StepLists]:
    """Every layer's step lists at its initial ranks on ``copies`` IPs of the builds ``spec1`` and ``spec2``
    (zero codes)."""
    check_specs(spec1, spec2)
    plans = []
    for index, layer in enumerate(setup.layers):
        cores = [np.zeros(shape, np.int64) for shape in layer["core_shapes"]]
        batch = setup.batch_size
        plans.append(step_lists(np.zeros((batch, layer["in_features"]), np.int64), cores,
                                np.zeros((batch, layer["out_features"]), np.int64),
                                zero_fracs(cores, setup.precision), spec1=spec1, spec2=spec2,
                                need_grad_x=not layer["is_network_input"], copies=copies))
    return plans


def list_ports(copies: tuple[int, int], hp_ports: int = 1) -> dict[str, tuple[int, ...]]:
    """Per PE, the high-performance port of each of its IPs in a TT design, whose instances list PE1's copies,
    then PE2's (then PE3's, which no list uses; :func:`codesign.design.point.design_point`), spread round robin
    over ``hp_ports`` ports (:func:`codesign.step.model.hp_port_of`, the block design's rule)."""
    check_hp_ports(hp_ports)
    return {"tt1": tuple(hp_port_of(k, hp_ports) for k in range(copies[0])),
            "tt2": tuple(hp_port_of(copies[0] + k, hp_ports) for k in range(copies[1]))}


def phase_stages(lists: StepLists, spec1: Tt1Spec, spec2: Tt2Spec, *, ddr: DdrTiming = BOARD_DDR,
                 ports: dict[str, tuple[int, ...]] | None = None) -> list[Stage]:
    """One stage per phase of a layer's lists: the longest of its lists' cycles (they run side by side, each on
    its own IP), the words of all (:func:`codesign.step.list_cycles.phase_cycles`), and those of its busiest
    port, a PE's ``k``-th list of a phase on its ``k``-th IP (as the board's shell starts them) and that IP on
    its port in ``ports`` (:func:`list_ports`; None: every IP on one port)."""
    specs = {"tt1": spec1, "tt2": spec2}
    stages = []
    for phase in lists.phases:
        cycles, words_in, words_out = phase_cycles(phase, specs, lists.arena, ddr=ddr)
        port_in, port_out = (None, None) if ports is None else phase_port_words(phase, ports)
        stages.append(Stage(cycles=cycles, words_in=words_in, words_out=words_out, port_in=port_in,
                            port_out=port_out))
    return stages


def pe_work(plans: Sequence[StepLists], spec1: Tt1Spec, spec2: Tt2Spec, ips: int) -> PeWork:
    """:class:`PeWork` of the lists ``plans`` (a network's layers) on the builds ``spec1`` and ``spec2``, whose
    phases ``ips`` IPs of both PEs run (no phase has more lists)."""
    specs = {"tt1": spec1, "tt2": spec2}
    parts = {name: dict.fromkeys(specs, 0) for name in ("load", "compute", "drain", "overlap", "drain_overlap")}
    stall_free = overlapped = balanced = 0
    for lists in plans:
        for phase in lists.phases:
            if len(phase) > ips:
                raise ValueError(f"a phase of {len(phase)} lists on {ips} IPs")
            longest, total = [0, 0], 0  # the phase's longest list (one part after the other, and overlapped); all
            for pe, calls in phase:
                if any(call.header is None for call in calls):
                    raise ValueError("a TT step's calls carry their headers in their descriptors")
                cycles = [transaction_cycles(specs[pe], call.header) for call in calls]
                sums = {name: sum(getattr(c, name) for c in cycles) for name in parts}
                for name in parts:
                    parts[name][pe] += sums[name]
                heads = sum(c.header // 2 for c in cycles)  # a header word in, a status word out
                free = sum(c.total for c in cycles)
                longest = [max(longest[0], free),
                           max(longest[1], sums["load"] + heads, sums["compute"], sums["drain"] + heads)]
                total += free
            stall_free, overlapped = stall_free + longest[0], overlapped + longest[1]
            balanced += -(-total // ips)
    return PeWork(**parts, stall_free=stall_free, overlapped=overlapped, balanced=balanced)


def host_work(setup: TtLayers, plans: Sequence[StepLists]) -> HostWork:
    """The host's work per list step of ``setup`` (see :class:`HostWork`)."""
    batch, counts = setup.batch_size, dict.fromkeys(HostWork.__dataclass_fields__, 0)
    for layer, lists in zip(setup.layers, plans):
        n, m = layer["in_features"], layer["out_features"]
        counts["quantized"] += batch * (n + m) + (m if layer["bias"] else 0)
        counts["elementwise"] += batch * m * (2 if layer["bias"] else 1)
        counts["elementwise"] += 0 if layer["is_network_input"] else batch * n
        counts["adam"] += sum(math.prod(shape) for shape in layer["core_shapes"]) + (m if layer["bias"] else 0)
        counts["lists"] += sum(len(phase) for phase in lists.phases)
        counts["calls"] += sum(len(calls) for phase in lists.phases for _, calls in phase)
        x = np.zeros((batch, n), np.int64)  # its copy for the core gradient, its samples PE1 reads transposed (a share)
        written = lists.write(np.array(lists.arena), x=x, x_t=x, x_cg=x, gy=np.zeros((batch, m), np.int64),
                              core_codes=np.zeros(sum(math.prod(shape) for shape in lists.cores), np.int64))
        counts["flushed_bytes"] += 4 * sum(words for _, words in written)
        counts["read_bytes"] += 4 * sum(words for forward in (True, False)
                                        for _, words in lists.read_ranges(forward=forward))
    counts["loss"] = batch * setup.layers[-1]["out_features"]
    return HostWork(**counts)


def hidden_host_s(beside: Iterable[tuple[int, int, float]], phases: Sequence[Sequence[Stage]], board: Board,
                  clock_mhz: float) -> float:
    """Seconds of ``beside`` (``(layer, phase, seconds)`` each: the host's work while that phase's lists computed)
    the phases hide: each as far as its phase's PE and data-movement seconds reach; the rest still adds to the
    step."""
    firsts = np.cumsum([0] + [len(layer) for layer in phases])
    flat: dict = {}
    for layer, phase, seconds in beside:
        if not (0 <= layer < len(phases) and 0 <= phase < len(phases[layer])):
            raise ValueError(f"host work beside phase {phase} of layer {layer}: the step has no such phase")
        if int(firsts[layer]) + phase in flat:
            raise ValueError(f"host work beside phase {phase} of layer {layer} is given twice")
        if seconds < 0:
            raise ValueError(f"host work beside phase {phase} of layer {layer}: {seconds} s is negative")
        flat[int(firsts[layer]) + phase] = seconds
    return hidden_seconds(flat, [stage for layer in phases for stage in layer], board, clock_mhz)


def tt_list_step(setup: TtLayers, spec1: Tt1Spec, spec2: Tt2Spec, board: Board, *, clock_mhz: float,
                 host_s: float, host_source: str, ddr: DdrTiming = BOARD_DDR, copies: tuple[int, int] = (1, 1),
                 beside: Iterable[tuple[int, int, float]] = (), hp_ports: int = 1) -> ListStep:
    """The whole list step of ``setup`` on ``copies`` IPs of the PE builds ``spec1``/``spec2`` and ``board`` at
    ``clock_mhz``: every phase priced by the list cycle model under ``ddr``, the host's ``host_s`` (measured
    where it runs), of which ``beside`` (``(layer, phase, seconds)`` each, as
    :func:`codesign.shell.list_runner.host_per_list_step` gives it) ran while those phases' lists computed and
    is hidden as far as they reach (:func:`hidden_host_s`). Every IP's data move through one HP port's worth of
    memory model each (the list bench's), and the IPs share ``hp_ports`` of the board's ports as the block design
    spreads them (:func:`list_ports`)."""
    plans = tt_list_plans(setup, spec1, spec2, copies)
    ports = list_ports(copies, hp_ports)
    stages, layer_cycles, phase_cycles, by_layer = [], [], [], []
    for lists in plans:
        phases = phase_stages(lists, spec1, spec2, ddr=ddr, ports=ports)
        stages += phases
        by_layer.append(phases)
        layer_cycles.append(sum(stage.cycles for stage in phases))
        phase_cycles.append(tuple(stage.cycles for stage in phases))
    macs = sum(sum(products) for lists in plans for products in lists.products)
    host = host_work(setup, plans)
    hidden = hidden_host_s(beside, by_layer, board, clock_mhz)
    if hidden > host_s:
        raise ValueError(f"host_s={host_s} s is less than the {hidden} s of it run beside the phases")
    time = step_time(stages, board, clock_mhz=clock_mhz, host_s=host_s - hidden, host_source=host_source, macs=macs,
                     array_macs=copies[0] * spec1.lanes * spec1.rows + copies[1] * spec2.lanes * spec2.rows,
                     calls=host.calls, stream_cycles=sum(stage.words_in + stage.words_out for stage in stages)
                     // (spec1.stream_bits // 32), mac_energy_pj=tt_mac_energy_pj(setup))
    return ListStep(time=time, host=host, layer_cycles=tuple(layer_cycles), phase_cycles=tuple(phase_cycles),
                    pe_work=pe_work(plans, spec1, spec2, sum(copies)), host_hidden_s=hidden, stages=tuple(stages))


__all__ = ["BOARD_DDR", "HostWork", "ListStep", "PeWork", "hidden_host_s", "host_work", "list_ports", "pe_work",
           "phase_stages", "tt_list_plans", "tt_list_step", "zero_fracs"]
