"""The TT step as call lists priced at a design point: the PE and DMA time of every layer's lists (the list cycle
model, :mod:`codesign.step.tt.list_time`), and the host's share of a list step measured on this machine.

The explorer's space prices the per-call step (the host cuts and rounds every call). Under the tracked scale
rule PE builds of equal lanes and stream width can run the whole step as lists
(:class:`codesign.loops.tt_lists.TtListTrainer`), so the explorer prices that step beside it at the best points
whose builds can (:func:`list_points`, :func:`list_step_report`): what the host has left per step, counted and
timed, and where the PE time goes. PE1 there takes ``B`` ``j`` outer (``b_order="jl"``) and PE2 and PE1 run
pairs where that is faster and fits under the cap, chosen together (:func:`builds_choice`): the per-call step
sends each call's ``B`` itself and gains nothing from the order, so the space keeps the design's. The explorer
then takes the first of those points, ranked on the ports each would take, whose step wins and whose builds fit
(:func:`codesign.design.explore_run.instead_choice`).
"""

from __future__ import annotations

import itertools
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from codesign.boards import Board
from codesign.design.calibration import pe_resources
from codesign.hw.resource_model import RESOURCES
from codesign.loops.host_share import THIS_MACHINE
from codesign.loops.tt import TtTrainSetup
from codesign.loops.tt_lists import TtListTrainer
from codesign.pe.tt.spec import B_ORDERS, Tt1Spec, Tt2Spec
from codesign.shell.list_runner import HOST_REPEATS, GoldenListShell, host_per_list_step
from codesign.step.tt.list_time import ListStep, tt_list_plans, tt_list_step
from codesign.step.tt.step_lists import check_specs


Price = Callable[[str, Any], Mapping[str, float]]  # (PE name, build) -> resources of one IP's PE (no shell)


def model_price(board: Board) -> Price:
    """The calibrated resource model on ``board``'s family (:func:`codesign.design.calibration.pe_resources`): what
    the explorer's space counts a build at."""
    return lambda pe, spec: pe_resources(pe, spec, board.yosys_family)


def measure_list_host(setup: TtTrainSetup, spec1: Tt1Spec, spec2: Tt2Spec, *, copies: tuple[int, int] = (1, 1),
                      repeats: int = HOST_REPEATS, seed: int = 0) -> dict[str, float]:
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


PAIRS_FIELD = {"tt1": "j_pairs", "tt2": "row_pairs"}  # per PE, the build field that runs its pairs
CHOICES = ("b_order", "row_pairs", "j_pairs")  # the build fields the list step chooses (PE1's, PE2's, PE1's)


def builds_choice(setup: TtTrainSetup, spec1: Tt1Spec, spec2: Tt2Spec, board: Board, *, clock_mhz: float,
                  copies: tuple[int, int] = (1, 1), room: Mapping[str, float] | None = None,
                  price: Price | None = None, fixed: Mapping[str, Any] | None = None, hp_ports: int = 1
                  ) -> dict[str, Any]:
    """PE1's ``B`` order and both PEs' pairs for the list step, chosen together (docs/tt_pe.md: "PE1's B order",
    "Row pairs", "Row pairs along j"): of the eight builds (``B`` l or j outer, PE2's row pairs or not, PE1's j pairs
    or not) the one whose lists' PE and DMA seconds (the IPs on ``hp_ports`` high-performance ports, as the step
    runs) are fewest among those whose extra over ``spec1``/``spec2`` (as ``price`` counts a build, the
    calibrated model on ``board``'s family unless given, times each PE's IPs) fits ``room`` (resource -> what
    the point may still add); of equal seconds, the builds given, then the fewest extra LUTs. Where none fits
    (the builds given are over the room already) it chooses among the builds that add to no resource. Chosen
    together because each takes logic the others then lack (on the TT benchmark's build PE2's pairs fit only
    beside ``B`` l outer). None moves a word or a list (the lists are built once; only cycles differ), so the
    host's work is the same for all.
    ``fixed``: fields of :data:`CHOICES` not to choose (only builds with these values are priced). ``room``
    None keeps the builds given, unpriced. Returns the builds chosen (``spec1``, ``spec2``), their fields
    (``chosen``), those of the builds given (``given``) and every build priced (``builds``: its fields,
    ``pe_dma_s``, ``extra``, ``fits``)."""
    given = {"spec1": spec1, "spec2": spec2, "chosen": _fields(spec1, spec2)}
    if room is None:
        return given
    price = price or model_price(board)
    base = {"tt1": price("tt1", spec1), "tt2": price("tt2", spec2)}
    runs_pairs = _runs_pairs(setup, spec1, spec2, copies)
    seconds: dict[tuple, float] = {}  # per build whose pairs some call runs: a pair build no call runs in pairs
    builds = []  # takes its plain twin's cycles, so it is priced once
    for order, row_pairs, j_pairs in itertools.product(B_ORDERS, (False, True), (False, True)):
        fields = dict(zip(CHOICES, (order, row_pairs, j_pairs)))
        if any(fields[name] != value for name, value in (fixed or {}).items()):
            continue
        twins = _twins(spec1, spec2, order, row_pairs, j_pairs)
        cost = {pe: price(pe, spec) for pe, spec in twins.items()}
        extra = {key: sum(ips * (cost[pe][key] - base[pe][key]) for pe, ips in zip(("tt1", "tt2"), copies))
                 for key in RESOURCES}
        effective = (order, row_pairs and runs_pairs["tt2"], j_pairs and runs_pairs["tt1"])
        if effective not in seconds:
            seconds[effective] = _pe_dma_s(setup, *_twins(spec1, spec2, *effective).values(), board, clock_mhz,
                                           copies, hp_ports)
        builds.append({**fields, "twins": twins, "extra": extra, "fits": all(extra[key] <= room[key] for key in room),
                       "pe_dma_s": seconds[effective]})
    best = min(_candidates(builds, fixed), key=lambda build: (
        build["pe_dma_s"], any(build[name] != value for name, value in given["chosen"].items()),
        build["extra"]["lut"]))
    return {"spec1": best["twins"]["tt1"], "spec2": best["twins"]["tt2"],
            "chosen": {name: best[name] for name in CHOICES}, "given": given["chosen"],
            "builds": [{key: value for key, value in build.items() if key != "twins"} for build in builds]}


def _candidates(builds: list[dict[str, Any]], fixed: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    """The builds to choose among: those that fit the room, else (the builds given are over it already) those
    that add nothing to any resource, the builds given among them unless ``fixed`` excludes them."""
    candidates = [build for build in builds if build["fits"]] or [
        build for build in builds if all(value <= 0 for value in build["extra"].values())]
    if not candidates:
        raise ValueError(f"no build with {dict(fixed or {})} fits the room, and each adds to a resource over the "
                         "builds given: give builds that fit, or fix fewer fields")
    return candidates


def _fields(spec1: Tt1Spec, spec2: Tt2Spec) -> dict[str, Any]:
    return {"b_order": spec1.b_order, "row_pairs": spec2.row_pairs, "j_pairs": spec1.j_pairs}


def _twins(spec1: Tt1Spec, spec2: Tt2Spec, order: str, row_pairs: bool, j_pairs: bool) -> dict[str, Any]:
    return {"tt1": Tt1Spec(**{**spec1.to_dict(), "b_order": order, "j_pairs": j_pairs}),
            "tt2": Tt2Spec(**{**spec2.to_dict(), "row_pairs": row_pairs})}


def _runs_pairs(setup: TtTrainSetup, spec1: Tt1Spec, spec2: Tt2Spec, copies: tuple[int, int]) -> dict[str, bool]:
    """Per PE, whether a call of its lists would run in pairs on a build with them (``K`` fits half the lanes,
    docs/tt_pe.md): pairs move no word, so the lists of the builds given answer for every build."""
    half, plans = spec1.lanes // 2, tt_list_plans(setup, spec1, spec2, copies)
    return {pe: any(call.header >> 16 & 255 <= half for lists in plans for phase in lists.phases
                    for name, calls in phase if name == pe for call in calls) for pe in ("tt1", "tt2")}


def _pe_dma_s(setup: TtTrainSetup, spec1: Tt1Spec, spec2: Tt2Spec, board: Board, clock_mhz: float,
              copies: tuple[int, int], hp_ports: int) -> float:
    """The PE and DMA seconds of the list step on these builds, their IPs on ``hp_ports`` ports (no host)."""
    step = tt_list_step(setup, spec1, spec2, board, clock_mhz=clock_mhz, host_s=0.0, host_source="not counted",
                        copies=copies, hp_ports=hp_ports)
    return step.time.pe_s + step.time.memory_s


def list_step_report(setup: TtTrainSetup, spec1: Tt1Spec, spec2: Tt2Spec, board: Board, *, clock_mhz: float,
                     per_call_total_s: float, copies: tuple[int, int] = (1, 1),
                     room: Mapping[str, float] | None = None, hp_ports: int = 1, other_ports: Sequence[int] = (),
                     host: Mapping[str, Any] | None = None) -> tuple[dict[str, Any], dict[int, ListStep]]:
    """The list step on ``copies`` IPs of the PE builds ``spec1``/``spec2``: its time split (PE and DMA, memory,
    host measured here: ``host_s`` what the lists do not hide, ``host_hidden_s`` what ran while they computed),
    the host's work left, each layer's PE and DMA seconds, beside the per-call step's
    ``per_call_total_s``; PE1's ``B`` order and both PEs' pairs as :func:`builds_choice` picks them within
    ``room``; the IPs on ``hp_ports`` high-performance ports (:func:`codesign.step.tt.list_time.list_ports`).
    Returns the report and the step priced on ``hp_ports`` and each of ``other_ports`` (the host measured once,
    the lists priced once: only the ports' sharing differs), by port count. ``host``: the host measured for the
    same set-up and IPs on other builds (a report's ``host_measured``: no build moves a word or a list), else it
    is measured here.
    ``({"priced": False, "why": ...}, {})`` where these builds or this set-up cannot run as lists."""
    why = _cannot(setup, spec1, spec2)
    if why:
        return {"priced": False, "why": why}, {}
    builds = builds_choice(setup, spec1, spec2, board, clock_mhz=clock_mhz, copies=copies, room=room,
                           hp_ports=hp_ports)
    spec1, spec2 = builds.pop("spec1"), builds.pop("spec2")
    host = dict(host or measure_list_host(setup, spec1, spec2, copies=copies))
    steps = {ports: tt_list_step(setup, spec1, spec2, board, clock_mhz=clock_mhz, host_s=host["seconds"],
                                 host_source=THIS_MACHINE, copies=copies, beside=host["beside"], hp_ports=ports)
             for ports in sorted({hp_ports, *other_ports})}
    step, hz = steps[hp_ports], clock_mhz * 1e6
    return {"priced": True, "pe_s": step.time.pe_s, "memory_s": step.time.memory_s, "host_s": step.time.host_s,
            "host_hidden_s": step.host_hidden_s,
            "total_s": step.time.total_s, "host_share": step.time.host_s / step.time.total_s,
            "layers_s": [cycles / hz for cycles in step.layer_cycles], "macs": step.time.macs,
            "macs_s": step.time.bounds["macs_s"], "host_work": step.host.to_dict(), "host_measured": host,
            "per_call_total_s": per_call_total_s, "copies": list(copies), "builds": builds,
            "hp_ports": hp_ports}, steps


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


LIST_POINTS = 3  # the best points by the space's figure whose builds run lists, priced as lists


def runs_lists(setup: TtTrainSetup, options: Sequence[Any]) -> bool:
    """Whether a point's builds (its options) can run ``setup``'s step as lists."""
    return not _cannot(setup, *specs_of(options))


def list_points(space, setup: TtTrainSetup, objective: str, count: int = LIST_POINTS) -> list[int]:
    """The ``count`` best feasible points of ``space`` (by ``objective``'s per-call figure) whose PE1 and PE2
    builds can run the step as lists (equal lanes and stream widths, 16-bit operands), best first. The space
    ranks points per call, where the host's work per call dominates; as lists that work is gone, so the best
    per-call point need not be the best list point and a few are priced."""
    key = space.total_s if objective == "time" else space.energy_pj
    found = []
    for index in np.flatnonzero(space.feasible)[np.argsort(key[space.feasible], kind="stable")]:
        if len(found) == count:
            break
        if runs_lists(setup, space.chosen_options(int(index))):
            found.append(int(index))
    return found


def specs_of(options: Sequence[Any]) -> tuple[Any, Any]:
    """The tt1 and tt2 builds of a point's options (None where it has none)."""
    found = {option.pe: option.spec for option in options}
    return found.get("tt1"), found.get("tt2")


def copies_of(options: Sequence[Any]) -> tuple[int, int]:
    """The tt1 and tt2 IPs of a point's options."""
    found = {option.pe: int(getattr(option, "copies", 1)) for option in options}
    return found.get("tt1", 1), found.get("tt2", 1)


__all__ = ["CHOICES", "LIST_POINTS", "PAIRS_FIELD", "builds_choice", "copies_of", "list_points", "list_step_report",
           "measure_list_host", "model_price", "runs_lists", "specs_of"]
