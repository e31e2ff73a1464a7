"""The TT family: rank-adaptive low-precision tensor-train training (paper 003) of an MLP on PE1/PE2 (and PE3)
copies; golden loop :mod:`codesign.loops.tt`, board trainer :mod:`codesign.deploy.tt_training`.

Beyond pricing its space, the explorer settles three things at a TT point
(:func:`tt_refine`): whether the forward contractions are split between PE2
and idle PE1 copies, what keeping data on chip would save, and the best
point on the other core-gradient route.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from codesign.boards import Board
from codesign.design.explore import DEFAULT_CAP, ENUMERATE_LIMIT, Option, Space
from codesign.design.explore_model import ExploreModel, explore_family
from codesign.design.families import DesktopFamily, Refined, design_pes
from codesign.design.families.tt_list_step import (copies_of, list_points, list_step_report, runs_lists,
                                                   specs_of)
from codesign.design.point import DesignPoint, design_from_dict
from codesign.hw.resource_model import RESOURCES
from codesign.loops.common import HwTrainError
from codesign.loops.host_share import THIS_MACHINE, measure_tt_host, measure_tt_hosts
from codesign.loops.tt import TtTrainSetup
from codesign.numerics.tt_svd import svd_ranks
from codesign.step.host import HostModel
from codesign.step.tt.cycles import copy_loads
from codesign.step.tt.mode_order import order_cost, rank_orders
from codesign.step.tt.reuse import BRAM36_BYTES
from codesign.step.tt.schedule import MAX_UNITS, StepHardware
from codesign.step.tt.step import step_plan
from codesign.step.tt.time import tt_mac_energy_pj, tt_reuse, tt_stages, tt_step_time

KEY = "tt"
FIELDS = {"tt1": "pe1", "tt2": "pe2", "tt3": "pe3"}  # a TT PE's field of StepHardware
# paper 003's two-layer FashionMNIST network as the explorer prices it: batch, and (in_modes, out_modes) per layer
# (ours: the paper's factorisations are not legible in our copy; codesign.reproduce.tt_step_paper)
PAPER_BATCH = 64
PAPER_LAYERS = (((4, 8, 8, 4), (8, 4, 4, 4)), ((8, 4, 4, 4), (1, 1, 2, 5)))


def tt_setup_of(design: DesignPoint, **changes) -> TtTrainSetup:
    """The NumPy TT loop of a design with ``techniques.tt``: its layers as the step sees them (core shapes at the
    initial ranks, bias, which one takes the network's input), precision, Adam, schedule, rank prior, TT IPs."""
    training = design.training
    if "tt" not in training.techniques:
        raise HwTrainError("the TT loop trains a configuration with techniques.tt")
    if set(training.techniques) != {"tt"}:
        raise HwTrainError(f"the TT loop trains techniques.tt alone, not with {sorted(set(training.techniques) - {'tt'})}")
    from codesign.train.techniques.tt import tt_model_config
    from codesign.train.tt.model import TTMLP
    from codesign.train.tt.pe_check import layer_state

    model = tt_model_config(training)
    states = [layer_state(layer) for layer in TTMLP(model).layers]
    prior = training.techniques["tt"].prior
    optim = training.optim
    values = {"batch_size": optim.batch_size, "epochs": optim.epochs, "lr": optim.lr,
              "weight_decay": optim.weight_decay, "schedule": optim.schedule, "seed": training.seed,
              "precision": dataclasses.asdict(model.precision),
              "layers": tuple({"core_shapes": [list(core.shape) for core in state.cores], "bias": state.bias is not None,
                               "in_features": state.in_features, "out_features": state.out_features,
                               "is_network_input": index == 0} for index, state in enumerate(states)),
              "ips": tuple((i.name, i.pe, i.spec.to_dict()) for i in design.instances if i.pe.startswith("tt")),
              "prior_weight": prior.weight, "warmup_epochs": prior.warmup_epochs, "threshold": prior.threshold,
              "prune_from_epoch": prior.prune_from_epoch, "min_rank": prior.min_rank, "clip_shadow": prior.clip_shadow,
              "forward_split": design.forward_split}
    return TtTrainSetup(**{**values, **changes})


def _hardware_fields(pe: str, spec, copies: int) -> dict[str, Any]:
    """``StepHardware`` fields of one PE's build and copies (PE3 has one copy)."""
    return {FIELDS[pe]: spec} if pe == "tt3" else {FIELDS[pe]: spec, f"{FIELDS[pe]}_units": copies}


def tt_hardware(options: Sequence[Option]) -> StepHardware:
    """The TT step hardware of a point's PE1 and PE2 (and, on the dense route, PE3) options; without a PE3 option,
    PE1 forms the dense weight gradient."""
    fields = {key: value for o in options for key, value in _hardware_fields(o.pe, o.spec, o.copies).items()}
    return StepHardware(**fields, outer_pe="tt3" if "pe3" in fields else "tt1")


def tt_model(setup: TtTrainSetup, *, bases: Mapping[str, Any], host: HostModel, macs: int, tt3=None) -> ExploreModel:
    """The TT loop: PE1 and PE2 builds and copies vary, PE3 (the design's, or None) is counted once. On the dense
    route PE3 has calls of its own, so it is a PE of the space with one option (the design's build, one copy):
    its stage loads join the others'; a design without PE3 forms the dense weight gradient on PE1."""
    dense = setup.precision["core_grad_route"] == "dense" and tt3 is not None
    outer_pe = "tt3" if dense else "tt1"  # a dense route without the design's PE3 forms dW on PE1

    def loads(pe: str, spec, copies: int):
        hardware = StepHardware(**_hardware_fields(pe, spec, copies), outer_pe=outer_pe)
        stages, words, calls = [], [], 0
        for layer in range(len(setup.layers)):
            plan = step_plan(setup.layer_state(layer, setup.initial_cores(layer)), setup.batch_size, hardware)
            for per_copy, copy_words in copy_loads(plan, pe):
                stages.append((per_copy.max(), copy_words[:, 0].sum(), copy_words[:, 1].sum()))
                words.append(copy_words)
            calls += sum(call.pe == pe for call in plan.calls)
        return np.array(stages, dtype=np.int64).reshape(-1, 3), calls, np.array(words).reshape(-1, copies, 2)

    varied = {"tt1": bases["tt1"], "tt2": bases["tt2"], **({"tt3": tt3} if dense else {})}
    return ExploreModel(name=KEY, bases=varied, loads=loads,
                       step=lambda options, board, clock, hp_ports=1, forward_split=False: tt_step_time(
                           setup, dataclasses.replace(tt_hardware(options), forward_split=forward_split), board,
                           clock_mhz=clock, host=host, hp_ports=hp_ports),
                       stages=lambda options: tt_stages(setup, tt_hardware(options))[0],
                       describe=lambda options: tt_hardware(options).describe(), host=host, macs=macs,
                       mac_energy_pj=tt_mac_energy_pj(setup), fixed_builds={} if tt3 is None or dense else {"tt3": tt3},
                       max_copies=MAX_UNITS,
                       measure_hosts=lambda points: measure_tt_hosts(
                           [(setup, tt_hardware(options)) for options in points], repeats=5))


def paper_setup(rank: int, precision: Mapping[str, Any], *, batch: int = PAPER_BATCH,
                modes: Sequence[tuple[tuple[int, ...], tuple[int, ...]]] = PAPER_LAYERS) -> TtTrainSetup:
    """Paper 003's two-layer network (``modes``: :data:`PAPER_LAYERS`, ours, or another order of them,
    :mod:`codesign.step.tt.mode_order`) at inner rank ``rank`` as a TT loop set-up, for whole-step figures against
    the paper's 0.09 s. A rank above what the modes allow (the 10-output layer's first core has 8 values) is capped
    there, as its TT-SVD caps it."""
    layers = []
    for index, (in_modes, out_modes) in enumerate(modes):
        ranks = svd_ranks(in_modes, out_modes, rank)  # no inner rank above what a TT-SVD can give
        layers.append({"core_shapes": [[ranks[k], out_modes[k], in_modes[k], ranks[k + 1]] for k in range(len(in_modes))],
                            "bias": True, "in_features": math.prod(in_modes), "out_features": math.prod(out_modes),
                            "is_network_input": index == 0})
    return TtTrainSetup(layers=tuple(layers), precision=dict(precision), batch_size=batch, epochs=1, lr=1e-3,
                             weight_decay=0.0, schedule="constant", seed=0)


def explore_tt(setup: TtTrainSetup, board: Board, *, bases: Mapping[str, Any], clock_mhz: float, host: HostModel,
               macs: int, tt3=None, knobs: Mapping[str, Mapping[str, Sequence[int]]] | None = None,
               cap: float = DEFAULT_CAP, enumerate_limit: int = ENUMERATE_LIMIT, trials: int = 400, seed: int = 0,
               progress: Callable[[str], None] | None = None) -> Space:
    """Price every PE1 x PE2 option of ``setup`` on ``board``; ``bases`` holds the tt1 and tt2 builds the knobs
    vary (operand widths and buffers stay theirs); ``tt3`` is the design's PE3 (counted once) or None."""
    return explore_family(tt_model(setup, bases=bases, host=host, macs=macs, tt3=tt3), board, clock_mhz=clock_mhz,
                          knobs=knobs, cap=cap, enumerate_limit=enumerate_limit, trials=trials, seed=seed,
                          progress=progress)


def design_model(design: DesignPoint, setup: TtTrainSetup, *, host: HostModel | None) -> ExploreModel:
    """The explorer's model of ``setup`` on ``design``'s PE builds (PE3 counted once, or a PE of the dense route);
    ``host`` None: measured here."""
    specs = {instance.pe: instance.spec for instance in design.instances}
    return tt_model(setup, bases=specs, host=host or measure_tt_host(setup),
                    macs=tt_stages(setup, setup.hardware())[1]["macs"], tt3=specs.get("tt3"))


def tt_explorer(design, *, progress: Callable[[str], None] = print, host: HostModel | None = None) -> ExploreModel:
    """The explorer's model of ``design``'s TT step; the host's share measured here (the NumPy loop's host work,
    fitted per PE call) unless ``host`` is a board's figure."""
    progress(f"the host's share of a step: {host.source}" if host is not None else
             "measuring the host's share of a step (NumPy loop, this machine)")
    return design_model(design, tt_setup_of(design), host=host)


def tt_refine(raw, design: DesignPoint, chosen_toml: dict[str, Any], chosen_design: DesignPoint,
              options: Sequence[Option], point: Mapping[str, Any], *, objective: str, knobs, cap: float,
              measured_here: bool, space: Space | None = None, chosen: int | None = None,
              progress: Callable[[str], None] = print) -> Refined:
    """The forward split (measured side by side on this machine, as the shortlist; a board's host report keeps
    the file's choice), the on-chip budget of the chosen point, the other route's best point (not where the
    host is a board's report: it is one route's), and under tracked scales the step as call lists at the best
    points of ``space`` whose builds can run them."""
    split = other = None
    if measured_here:
        split = forward_split_choice(chosen_design, options, objective=objective,
                                     asked=raw.get("design", {}).get("forward_split"), progress=progress)
        if split["chosen"] != chosen_design.forward_split:
            chosen_toml = {**chosen_toml, "design": {**chosen_toml["design"], "forward_split": split["chosen"]}}
            chosen_design = design_from_dict(chosen_toml)
        other = other_route(design, objective=objective, knobs=knobs, cap=cap, progress=progress)
    setup = tt_setup_of(chosen_design)
    lists = instead = None
    if setup.precision["scale_rule"] == "tracked":
        progress("pricing the step as call lists (list cycle model; host measured here)")
        lists, instead = _list_step(setup, chosen_design, options, point, space, objective, progress, chosen)
    return Refined(chosen_toml=chosen_toml, chosen_design=chosen_design,
                   step_options={"forward_split": chosen_design.forward_split},
                   reports={"forward_split": split, "reuse": tt_reuse_report(chosen_design, options, point),
                            "other_route": other, "list_step": lists, "mode_orders": mode_order_report(setup)},
                   instead=instead)


def _list_step(setup: TtTrainSetup, design: DesignPoint, options: Sequence[Option], point: Mapping[str, Any],
               space: Space | None, objective: str, progress: Callable[[str], None], chosen: int | None = None
               ) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """The list step at the best few points of ``space`` whose builds run lists (:func:`list_points`; else at
    the chosen point, where the report says why not): the report of the one whose step wins by ``objective``
    (``points``: every point priced), and the steps the explorer may take instead, best first (None where no
    point's builds run lists), each priced on every HP port count for the explorer's port rule. The ``chosen``
    point (its index in ``space``) is priced among them where its builds run lists, for its board would run
    them: with the builds :func:`builds_choice` picks and, where that changes them, with its own builds too
    (the host measured once), which Yosys has confirmed already."""
    ats = list_points(space, setup, objective) if space is not None else []
    here = chosen is not None and runs_lists(setup, options)
    if here and chosen not in ats:
        ats.append(chosen)
    if not ats:
        report, _ = list_step_report(setup, *specs_of(options), design.board, clock_mhz=design.clock_mhz,
                                     per_call_total_s=point["total_s"], copies=copies_of(options),
                                     hp_ports=design.ports_used)
        return {**report, "label": point["label"], "chosen": space is None}, None  # priced at the chosen point
    priced = []
    for at in ats:
        progress(f"the step as call lists at {space.point(at)['label']}")
        priced.append(_list_point(setup, design, space, at))
        builds = priced[-1][1]["builds"]
        if at == chosen and builds.get("given", builds["chosen"]) != builds["chosen"]:
            progress(f"the step as call lists at {space.point(at)['label']}, its own builds")
            priced.append(_list_point(setup, design, space, at, host=priced[-1][1]["host_measured"]))
    figure = "total_s" if objective == "time" else "energy_pj"
    priced.sort(key=lambda found: getattr(found[2][found[1]["hp_ports"]].time, figure))
    points = [{"label": other["label"], "total_s": other["total_s"],
               "energy_pj": found[other["hp_ports"]].time.energy_pj} for _, other, found in priced]
    for _, report, _ in priced:
        report["points"] = points
    return priced[0][1], {"report": "list_step", "runs_at_chosen": here,
                          "candidates": [_list_candidate(space, *found) for found in priced]}


def _list_point(setup: TtTrainSetup, design: DesignPoint, space: Space, at: int,
                host: Mapping[str, Any] | None = None) -> tuple[int, dict[str, Any], dict[int, Any]]:
    """Point ``at`` of ``space`` priced as lists on every HP port count: with the builds :func:`builds_choice`
    picks within the point's room, or (``host`` given: measured on other builds of the point) its own builds."""
    at_point, at_options = space.point(at), space.chosen_options(at)
    room = None if host else {key: space.cap * space.budget[key] - at_point[key] for key in RESOURCES}
    report, steps = list_step_report(
        setup, *specs_of(at_options), design.board, clock_mhz=design.clock_mhz, per_call_total_s=at_point["total_s"],
        copies=copies_of(at_options), room=room, hp_ports=int(space.hp_ports[at]),
        other_ports=range(1, design.board.hp_ports + 1), host=host)
    label = at_point["label"] + (", its own builds" if host else "")
    return at, {**report, "label": label, "chosen": False}, steps


def _list_candidate(space: Space, at: int, report: dict[str, Any], steps: Mapping[int, Any]) -> dict[str, Any]:
    """A list step the explorer may take (:class:`Refined`'s ``instead`` candidates): the point, the build
    fields and ``[design]`` fields to set, its builds described, its step, host hidden beside the lists and
    stages by port count, its report."""
    chosen = report["builds"]["chosen"]
    fields = {"tt1": {"b_order": chosen["b_order"], "j_pairs": chosen["j_pairs"]},
              "tt2": {"row_pairs": chosen["row_pairs"]}}
    built = [dataclasses.replace(o, spec=dataclasses.replace(o.spec, **fields.get(o.pe, {})))
             for o in space.chosen_options(at)]
    extra = next((build["extra"] for build in report["builds"].get("builds", ())
                  if all(build[name] == value for name, value in chosen.items())), {})
    return {"index": at, "label": report["label"], "pe": fields, "design": {"forward_split": False},
            "hardware": tt_hardware(built).describe(), "reported": report,
            "resources": {key: space.point(at)[key] + extra.get(key, 0.0) for key in RESOURCES},
            "steps": {count: step.time for count, step in steps.items()},
            "host_hidden_s": {count: step.host_hidden_s for count, step in steps.items()},
            "stages": {count: step.stages for count, step in steps.items()}}


def mode_order_report(setup: TtTrainSetup) -> list[dict[str, Any]]:
    """Per TT layer its modes' order as configured and the order of the same modes with the fewest step products
    (:mod:`codesign.step.tt.mode_order`, ranks capped at the layer's largest inner rank): another order is another
    network (its cores pair the modes anew), so the report prices it and leaves the choice, and the retraining
    that measures its accuracy, to the user (``techniques.tt.in_modes`` / ``out_modes``)."""
    report = []
    for layer in setup.layers:
        shapes = layer["core_shapes"]
        ins, outs = tuple(shape[2] for shape in shapes), tuple(shape[1] for shape in shapes)
        rank = max(shape[3] for shape in shapes)
        grad_x = not layer["is_network_input"]
        ours = order_cost(ins, outs, max_rank=rank, batch=setup.batch_size, need_input_grad=grad_x)
        try:
            best = rank_orders(ins, outs, max_rank=rank, batch=setup.batch_size, need_input_grad=grad_x)[0]
        except ValueError as error:  # too many orders to rank one by one
            report.append({"ours": ours.to_dict(), "fewest": None, "why": str(error)})
            continue
        report.append({"ours": ours.to_dict(), "fewest": best.to_dict(), "times_fewer": ours.products / best.products})
    return report


def forward_split_choice(design: DesignPoint, options: Sequence[Option], *, objective: str, asked: bool | None,
                         progress: Callable[[str], None] = print) -> dict[str, Any]:
    """Whether the chosen TT point shares its forward contractions between PE2 and PE1 (``[design]
    forward_split``; :class:`codesign.step.tt.schedule.StepHardware`): its whole step both ways, the host measured
    side by side on this machine, since the split cuts the PE time and adds host work (swapped operands, more
    calls). The space prices every point without it: a split point's PE1 calls depend on the PE2 build, so the
    PEs could no longer be priced apart. ``asked`` (the file's ``forward_split``) wins where given."""
    setup = tt_setup_of(design)
    hardware = tt_hardware(options)
    progress("measuring the host's share with and without the forward split at the chosen point")
    variants = (False, True)
    hosts = measure_tt_hosts([(setup, dataclasses.replace(hardware, forward_split=split)) for split in variants],
                             repeats=5)
    steps = {}
    for split, (seconds, calls) in zip(variants, hosts):
        step = tt_step_time(setup, dataclasses.replace(hardware, forward_split=split), design.board,
                            clock_mhz=design.clock_mhz, host=HostModel(seconds, 0.0, THIS_MACHINE),
                            hp_ports=design.ports_used)
        steps[split] = {"pe_s": step.pe_s, "memory_s": step.memory_s, "host_s": step.host_s,
                        "total_s": step.total_s, "energy_pj": step.energy_pj, "calls": calls}
    key = "total_s" if objective == "time" else "energy_pj"
    chosen = bool(asked) if asked is not None else steps[True][key] < steps[False][key]
    return {"chosen": chosen, "asked": asked is not None, "steps": {str(split).lower(): values
                                                                    for split, values in steps.items()}}


def tt_reuse_report(design: DesignPoint, options: Sequence[Option], point: Mapping[str, Any]) -> dict[str, Any]:
    """What keeping data on chip would save the chosen TT point, within the BRAM its PEs leave of the board
    (:func:`codesign.step.tt.time.tt_reuse`; a bound: it takes the rounding such hardware needs as free), on the
    schedule ``design`` runs (its forward split)."""
    left = max(0, int(design.board.resources["bram_36k"] - math.ceil(point["bram_36k"])))
    hardware = dataclasses.replace(tt_hardware(options), forward_split=design.forward_split)
    budget = tt_reuse(tt_setup_of(design), hardware, bram_bytes=left * BRAM36_BYTES)
    hz = design.clock_mhz * 1e6
    return {"bram_36k_left": left, "bram_bytes": budget.bram_bytes, "words": budget.words,
            "words_kept": budget.words_kept, "state_words": budget.state_words, "core_words": budget.core_words,
            "pe_s": budget.cycles / hz, "pe_kept_s": budget.cycles_kept / hz,
            "largest_state_bytes": budget.largest_bytes, "states": len(budget.states),
            "states_kept": sum(budget.kept)}


def other_route(design: DesignPoint, *, objective: str, knobs: Mapping[str, Mapping[str, Any]] | None, cap: float,
                progress: Callable[[str], None] = print) -> dict[str, Any] | None:
    """The best point of the same TT space with the core gradients taken by the other route (paper 003, App. A.2:
    ``core_grad_route`` direct or dense), its host measured on this machine: the route is a training choice whose
    numbers differ in the last bits (docs/tt_pe.md), so the explorer reports it and does not take it. None where
    no point of it fits."""
    setup = tt_setup_of(design)
    route = "dense" if setup.precision["core_grad_route"] == "direct" else "direct"
    setup = dataclasses.replace(setup, precision={**setup.precision, "core_grad_route": route})
    progress(f"the same space on the {route} core-gradient route (measuring its host share)")
    space = explore_family(design_model(design, setup, host=None), design.board, clock_mhz=design.clock_mhz, knobs=knobs, cap=cap, progress=progress)
    try:
        best = space.best(objective)
    except ValueError:
        return None
    point = space.point(best)
    return {"core_grad_route": route, "outer_pe": tt_hardware(space.chosen_options(best)).outer_pe,
            **{key: point[key] for key in ("label", "total_s", "pe_s", "memory_s", "host_s", "energy_pj", *RESOURCES)}}


FAMILY = DesktopFamily(key=KEY, title="TT", detect=lambda design: bool(design_pes(design)) and all(
    pe.startswith("tt") for pe in design_pes(design)), setup_of=tt_setup_of, explorer=tt_explorer, refine=tt_refine)

__all__ = ["FAMILY", "PAPER_BATCH", "PAPER_LAYERS", "design_model", "explore_tt", "forward_split_choice",
           "other_route", "paper_setup", "tt_explorer", "tt_hardware", "tt_model", "tt_refine", "tt_reuse_report",
           "tt_setup_of"]
