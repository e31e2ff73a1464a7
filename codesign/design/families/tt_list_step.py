"""The TT step as call lists priced at a design point: the PE and DMA time of every layer's lists (the list cycle
model, :mod:`codesign.step.tt.list_time`), and the host's share of a list step measured on this machine.

The explorer's space prices the per-call step (the host cuts and rounds every call). Under the tracked scale
rule PE builds of equal lanes and stream width can run the whole step as lists
(:class:`codesign.loops.tt_lists.TtListTrainer`), so the explorer prices that step beside it at the best point
whose builds can (:func:`list_point`, :func:`list_step_report`): what the host has left per step, counted and
timed, and where the PE time goes. PE1 there takes ``B`` ``j`` outer (``b_order="jl"``) where that is faster and
its extra multiplier and address logic fit under the cap (:func:`b_order_choice`): the per-call step sends each
call's ``B`` itself and gains nothing from it, so the space keeps the design's order. PE2 and PE1 there run
pairs where that is faster and fits (:func:`pairs_choice`).
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np

from codesign.boards import Board
from codesign.design.calibration import pe_resources
from codesign.hw.resource_model import RESOURCES
from codesign.loops.host_share import THIS_MACHINE
from codesign.loops.tt import TtTrainSetup
from codesign.loops.tt_lists import TtListTrainer
from codesign.pe.tt.spec import Tt1Spec, Tt2Spec
from codesign.shell.list_runner import GoldenListShell, host_per_list_step
from codesign.step.tt.list_time import tt_list_step
from codesign.step.tt.step_lists import check_specs


def measure_list_host(setup: TtTrainSetup, spec1: Tt1Spec, spec2: Tt2Spec, *, copies: tuple[int, int] = (1, 1),
                      repeats: int = 3, seed: int = 0) -> dict[str, float]:
    """The host's seconds per list step of ``setup`` on this machine: a :class:`TtListTrainer` step on random
    data less the golden shell's seconds (what the IPs compute instead), the least of ``repeats`` steps after
    the two that aim every scale and build the lists (other work on the machine only adds). Also the words the
    host flushed and read, and the lists it started, per step."""
    shell = GoldenListShell({"tt1": spec1, "tt2": spec2}, copies)
    trainer = TtListTrainer(setup, shell)
    rng = np.random.default_rng(seed)
    first, last = setup.layers[0], setup.layers[-1]
    batches = [(rng.random((setup.batch_size, first["in_features"])).astype(np.float32),
                rng.integers(0, last["out_features"], setup.batch_size)) for _ in range(2 + repeats)]
    return host_per_list_step(trainer, shell, batches, warm_steps=2)


def b_order_choice(setup: TtTrainSetup, spec1: Tt1Spec, spec2: Tt2Spec, board: Board, *, clock_mhz: float,
                   copies: tuple[int, int] = (1, 1), room: Mapping[str, float] | None = None) -> dict[str, Any]:
    """PE1's ``B`` order for the list step on these builds: ``"jl"`` where its lists' PE and DMA seconds are
    fewer and what a jl build adds (an 8 x 8 multiplier and two address registers: the calibrated resource
    model on ``board``'s family, times PE1's IPs) fits ``room`` (resource -> what the point may still add),
    else ``"lj"``. ``room`` None keeps ``spec1``'s order unpriced. The host's work does not depend on the order
    (the lists are built once; only the runs a call's ``B`` is read in differ)."""
    if room is None:
        return {"chosen": spec1.b_order, "spec1": spec1}
    twins = {order: Tt1Spec(**{**spec1.to_dict(), "b_order": order}) for order in ("lj", "jl")}
    seconds = {order: _pe_dma_s(setup, spec, spec2, board, clock_mhz, copies) for order, spec in twins.items()}
    extra, fits = _extra_fits("tt1", twins["lj"], twins["jl"], board, copies[0], room)
    chosen = "jl" if fits and seconds["jl"] < seconds["lj"] else "lj"
    return {"chosen": chosen, "spec1": twins[chosen], "pe_dma_s": seconds, "jl_extra": extra, "jl_fits": fits}


PAIRS_FIELD = {"tt1": "j_pairs", "tt2": "row_pairs"}  # per PE, the build field that runs its pairs


def pairs_choice(setup: TtTrainSetup, spec1: Tt1Spec, spec2: Tt2Spec, board: Board, *, pe: str, clock_mhz: float,
                 copies: tuple[int, int] = (1, 1), room: Mapping[str, float] | None = None) -> dict[str, Any]:
    """``pe``'s build with pairs for the list step (docs/tt_pe.md: PE2's "Row pairs", PE1's "Row pairs along j"):
    where its lists' PE and DMA seconds are fewer (phases of contractions whose ``K`` fits half the lanes) and
    what the pairs add (PE2: a second copy of each ``B`` bank and the upper lanes' selects; PE1: the half-chunk
    writes; the calibrated model, times ``pe``'s IPs) fits ``room``; ``room`` None keeps the build as it is,
    unpriced. ``spec`` is ``pe``'s build chosen. Pairs move no word, so the host's work is the same either way."""
    field, pe1 = PAIRS_FIELD[pe], pe == "tt1"
    spec = spec1 if pe1 else spec2
    if room is None:
        return {"chosen": getattr(spec, field), "spec": spec}
    twins = {pairs: type(spec)(**{**spec.to_dict(), field: pairs}) for pairs in (False, True)}
    seconds = {pairs: _pe_dma_s(setup, twin if pe1 else spec1, spec2 if pe1 else twin, board, clock_mhz, copies)
               for pairs, twin in twins.items()}
    extra, fits = _extra_fits(pe, twins[False], twins[True], board, copies[0 if pe1 else 1], room)
    chosen = fits and seconds[True] < seconds[False]
    return {"chosen": chosen, "spec": twins[chosen], "pe_dma_s": {"plain": seconds[False], "pairs": seconds[True]},
            "pairs_extra": extra, "pairs_fits": fits}


def pairs_choices(setup: TtTrainSetup, spec1: Tt1Spec, spec2: Tt2Spec, board: Board, *, clock_mhz: float,
                  copies: tuple[int, int] = (1, 1), room: Mapping[str, float] | None = None) -> tuple:
    """PE2's and then PE1's pairs by :func:`pairs_choice`, what the first takes out of ``room`` left to the second
    (PE2's first: alone they shorten its ``K = R`` phases, which PE1's then bound): the builds chosen and, per PE,
    its choice's figures."""
    pairs = {}
    for pe in ("tt2", "tt1"):
        found = pairs[pe] = pairs_choice(setup, spec1, spec2, board, pe=pe, clock_mhz=clock_mhz, copies=copies,
                                         room=room)
        spec1, spec2 = (found.pop("spec"), spec2) if pe == "tt1" else (spec1, found.pop("spec"))
        if room is not None and found["chosen"]:
            room = {key: room[key] - found["pairs_extra"].get(key, 0.0) for key in room}
    return spec1, spec2, pairs


def _pe_dma_s(setup: TtTrainSetup, spec1: Tt1Spec, spec2: Tt2Spec, board: Board, clock_mhz: float,
              copies: tuple[int, int]) -> float:
    """The PE and DMA seconds of the list step on these builds (no host)."""
    step = tt_list_step(setup, spec1, spec2, board, clock_mhz=clock_mhz, host_s=0.0, host_source="not counted",
                        copies=copies)
    return step.time.pe_s + step.time.memory_s


def _extra_fits(pe: str, plain, featured, board: Board, ips: int, room: Mapping[str, float]
                ) -> tuple[dict[str, float], bool]:
    """What ``ips`` IPs of ``featured`` add over ``plain`` (the calibrated model on ``board``'s family), and
    whether that fits ``room``."""
    priced = [pe_resources(pe, spec, board.yosys_family) for spec in (plain, featured)]
    extra = {key: ips * (priced[1][key] - priced[0][key]) for key in RESOURCES}
    return extra, all(extra[key] <= room[key] for key in room)


def list_step_report(setup: TtTrainSetup, spec1: Tt1Spec, spec2: Tt2Spec, board: Board, *, clock_mhz: float,
                     per_call_total_s: float, copies: tuple[int, int] = (1, 1),
                     room: Mapping[str, float] | None = None, hp_ports: int = 1) -> dict[str, Any]:
    """The list step on ``copies`` IPs of the PE builds ``spec1``/``spec2``: its time split (PE and DMA, memory,
    host measured here: ``host_s`` what the lists do not hide, ``host_hidden_s`` what ran while they computed),
    the host's work left, each layer's PE and DMA seconds, beside the per-call step's
    ``per_call_total_s``; PE1 in the ``B`` order :func:`b_order_choice` picks within ``room``, PE2 and then PE1
    with pairs where :func:`pairs_choices` picks them within what is left; the IPs on
    ``hp_ports`` high-performance ports (:func:`codesign.step.tt.list_time.list_ports`).
    ``{"priced": False, "why": ...}`` where these builds or this set-up cannot run as lists."""
    why = _cannot(setup, spec1, spec2)
    if why:
        return {"priced": False, "why": why}
    order = b_order_choice(setup, spec1, spec2, board, clock_mhz=clock_mhz, copies=copies, room=room)
    spec1 = order.pop("spec1")
    left = None if room is None else {key: room[key] - order.get("jl_extra", {}).get(key, 0.0) * (
        order["chosen"] == "jl") for key in room}
    spec1, spec2, pairs = pairs_choices(setup, spec1, spec2, board, clock_mhz=clock_mhz, copies=copies, room=left)
    host = measure_list_host(setup, spec1, spec2, copies=copies)
    step = tt_list_step(setup, spec1, spec2, board, clock_mhz=clock_mhz, host_s=host["seconds"],
                        host_source=THIS_MACHINE, copies=copies, beside=host["beside"], hp_ports=hp_ports)
    hz = clock_mhz * 1e6
    return {"priced": True, "pe_s": step.time.pe_s, "memory_s": step.time.memory_s, "host_s": step.time.host_s,
            "host_hidden_s": step.host_hidden_s,
            "total_s": step.time.total_s, "host_share": step.time.host_s / step.time.total_s,
            "layers_s": [cycles / hz for cycles in step.layer_cycles], "macs": step.time.macs,
            "macs_s": step.time.bounds["macs_s"], "host_work": step.host.to_dict(), "host_measured": host,
            "per_call_total_s": per_call_total_s, "copies": list(copies), "b_order": order, "pairs": pairs,
            "hp_ports": hp_ports}


def _cannot(setup: TtTrainSetup, spec1: Tt1Spec, spec2: Tt2Spec) -> str:
    """Why ``setup`` on these builds cannot train as call lists ('' when it can)."""
    precision: Mapping[str, Any] = setup.precision
    if precision["scale_rule"] != "tracked":
        return "the step runs as call lists under precision.scale_rule = 'tracked' only (a PE rounds at a scale " \
               "known before the step)"
    if precision["core_grad_route"] != "direct":
        return "the step's call lists take the direct core-gradient route"
    if spec1 is None or spec2 is None:
        return "the step's call lists run on a tt1 and a tt2 IP"
    try:
        check_specs(spec1, spec2)
    except ValueError as error:
        return str(error)
    return ""


def list_point(space, setup: TtTrainSetup, objective: str) -> int | None:
    """The best feasible point of ``space`` (by ``objective``'s per-call figure) whose PE1 and PE2 builds can run
    the step as lists (equal lanes and stream widths, 16-bit operands); None where there is none."""
    key = space.total_s if objective == "time" else space.energy_pj
    for index in np.flatnonzero(space.feasible)[np.argsort(key[space.feasible], kind="stable")]:
        if not _cannot(setup, *specs_of(space.chosen_options(int(index)))):
            return int(index)
    return None


def specs_of(options: Sequence[Any]) -> tuple[Any, Any]:
    """The tt1 and tt2 builds of a point's options (None where it has none)."""
    found = {option.pe: option.spec for option in options}
    return found.get("tt1"), found.get("tt2")


def copies_of(options: Sequence[Any]) -> tuple[int, int]:
    """The tt1 and tt2 IPs of a point's options."""
    found = {option.pe: int(getattr(option, "copies", 1)) for option in options}
    return found.get("tt1", 1), found.get("tt2", 1)


__all__ = ["PAIRS_FIELD", "b_order_choice", "copies_of", "list_point", "list_step_report", "measure_list_host",
           "pairs_choice", "pairs_choices", "specs_of"]
