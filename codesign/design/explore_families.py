"""The explorer's families: for TT, FB-float and CSB designs, which PEs vary, their knob tables, and how a build's
work in one training step becomes stages.

A :class:`Family` is all :mod:`codesign.design.explore` needs to know of a
design's training loop. Knob tables are per PE (``{field: values}``, plus
``copies``): a value is offered to the PE's spec and kept only where the
spec's own validators accept it, so the tables may be generous. Copies
stay at 1 where the loop drives one IP of the PE (FB-float, CSB).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from codesign.boards import Board
from codesign.design.calibration import pe_resources
from codesign.design.explore import COPIES, DEFAULT_CAP, ENUMERATE_LIMIT, Loads, Option, Space, explore, pe_options
from codesign.step.time import Stage, StepTime
from codesign.step.tt.time import tt_mac_energy_pj, tt_stages, tt_step_time
from codesign.step.csb.time import CsbLayer, as_layers, csb_mac_energy_pj, csb_stages, csb_step_time
from codesign.step.fpmac_array.time import fb_mac_energy_pj, fb_stages, fb_step_time
from codesign.shell.ip import ip_shell_cost
from codesign.hw.resource_model import RESOURCES, fpga_counts
from codesign.loops.host_share import measure_tt_hosts
from codesign.step.host import GemmShape, HostModel
from codesign.loops.tt import TtTrainSetup
from codesign.pe import get_pe
from codesign.step.tt.schedule import MAX_UNITS, StepHardware
from codesign.step.tt.step import step_plan
from codesign.step.tt.cycles import copy_loads

# knob tables, one per PE: the spec fields a family varies and the values offered (the spec's validators decide)
TT_KNOBS = {"lanes": (2, 4, 8, 16), "rows": (1, 2, 4, 8), "stream_bits": (32, 64, 128), COPIES: (1, 2, 3, 4)}
FPMAC_ARRAY_KNOBS = {"rows": tuple(range(1, 17)), "cols": tuple(range(1, 17)), COPIES: (1,)}
CSB_KNOBS = {"block_rows": (4, 8, 16), "block_cols": (4, 8, 16), "batch": (1, 2, 4, 8, 12, 16),
             "parallel": (1, 2, 4), COPIES: (1,)}
CSB_TILE_KNOBS = {"out_h": (1, 2, 4, 8), "out_w": (1, 2, 4, 8)}  # a conv network's output tile (positions)
# PE3 (the dense route's outer products) is not varied: its one option is the design's build, one copy
KNOBS = {"tt1": TT_KNOBS, "tt2": TT_KNOBS, "tt3": {}, "fpmac_array": FPMAC_ARRAY_KNOBS, "csb": CSB_KNOBS}
FIELDS = {"tt1": "pe1", "tt2": "pe2", "tt3": "pe3"}
# paper 003's two-layer FashionMNIST network as the explorer prices it: batch, and (in_modes, out_modes) per layer
# (ours: the paper's factorisations are not legible in our copy; codesign.reproduce.tt_step_paper)
PAPER_BATCH = 64
PAPER_LAYERS = (((4, 8, 8, 4), (8, 4, 4, 4)), ((8, 4, 4, 4), (1, 1, 2, 5)))


@dataclass(frozen=True, kw_only=True)
class Family:
    """A design's training loop as the explorer sees it (see the module's docstring)."""

    name: str  # "tt", "fb", "csb"
    bases: dict[str, Any]  # varied PE -> the design's build, whose other fields the knobs keep
    loads: Loads  # (pe, spec, copies) -> ((stages, 3) cycles and words, PE calls of a step)
    # the whole step of one point, its IPs' data over ``hp_ports`` high-performance ports (keyword, default 1)
    step: Callable[..., StepTime]
    stages: Callable[[Sequence[Option]], list[Stage]]  # its stages (reports)
    describe: Callable[[Sequence[Option]], Any]  # its hardware, for reports
    host: HostModel
    macs: int
    mac_energy_pj: float
    fixed_builds: dict[str, Any] = field(default_factory=dict)  # PEs the space does not vary, once each
    max_copies: int = 1
    knobs: dict[str, dict[str, Sequence[int]]] = field(default_factory=dict)  # a PE's own knob table (else KNOBS)
    # several points' host seconds and PE calls per step, measured here side by side (the host model is a fit over
    # two schedules and counts PE calls only)
    measure_hosts: Callable[[Sequence[Sequence[Option]]], list[tuple[float, int]]] | None = None

    @property
    def pes(self) -> tuple[str, ...]:
        return tuple(self.bases)


def fixed_resources(builds: Mapping[str, Any], family: str) -> dict[str, float]:
    """Model resources of the IPs a space does not vary (each PE model plus its shell)."""
    out = dict.fromkeys(RESOURCES, 0.0)
    for pe, spec in builds.items():
        model, shell = pe_resources(pe, spec, family), fpga_counts(ip_shell_cost(get_pe(pe), spec, family))
        out = {k: out[k] + model[k] + shell[k] for k in RESOURCES}
    return out


def explore_family(family: Family, board: Board, *, clock_mhz: float,
                   knobs: Mapping[str, Mapping[str, Sequence[int]]] | None = None, cap: float = DEFAULT_CAP,
                   enumerate_limit: int = ENUMERATE_LIMIT, trials: int = 400, seed: int = 0,
                   progress: Callable[[str], None] | None = None) -> Space:
    """Price ``family``'s space on ``board`` (knob tables: ``knobs``, else the family's, else :data:`KNOBS` per
    PE)."""
    if not 0 < cap <= 1:
        raise ValueError(f"cap must be in (0, 1], got {cap}")
    knobs = knobs or {}
    tables = {pe: knobs.get(pe, family.knobs.get(pe, KNOBS[pe])) for pe in family.pes}
    options = [pe_options(pe, family.bases[pe], board.yosys_family, tables[pe], family.loads,
                          max_copies=family.max_copies, progress=progress) for pe in family.pes]
    return explore(options, board, pes=family.pes, clock_mhz=clock_mhz, host=family.host, macs=family.macs,
                   mac_energy_pj=family.mac_energy_pj, fixed=fixed_resources(family.fixed_builds, board.yosys_family),
                   cap=cap, enumerate_limit=enumerate_limit, trials=trials, seed=seed, family=family.name,
                   fixed_ips=len(family.fixed_builds))


def _loads(stages: Sequence[Stage]) -> np.ndarray:
    return np.array([(s.cycles, s.words_in, s.words_out) for s in stages], dtype=np.int64).reshape(-1, 3)


# ---------------------------------------------------------------------------- TT


def _hardware_fields(pe: str, spec, copies: int) -> dict[str, Any]:
    """``StepHardware`` fields of one PE's build and copies (PE3 has one copy)."""
    return {FIELDS[pe]: spec} if pe == "tt3" else {FIELDS[pe]: spec, f"{FIELDS[pe]}_units": copies}


def tt_hardware(options: Sequence[Option]) -> StepHardware:
    """The TT step hardware of a point's PE1 and PE2 (and, on the dense route, PE3) options; without a PE3 option,
    PE1 forms the dense weight gradient."""
    fields = {key: value for o in options for key, value in _hardware_fields(o.pe, o.spec, o.copies).items()}
    return StepHardware(**fields, outer_pe="tt3" if "pe3" in fields else "tt1")


def tt_family(setup: TtTrainSetup, *, bases: Mapping[str, Any], host: HostModel, macs: int, tt3=None) -> Family:
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
    return Family(name="tt", bases=varied, loads=loads,
                  step=lambda options, board, clock, hp_ports=1, forward_split=False: tt_step_time(
                      setup, dataclasses.replace(tt_hardware(options), forward_split=forward_split), board,
                      clock_mhz=clock, host=host, hp_ports=hp_ports),
                  stages=lambda options: tt_stages(setup, tt_hardware(options))[0],
                  describe=lambda options: tt_hardware(options).describe(), host=host, macs=macs,
                  mac_energy_pj=tt_mac_energy_pj(setup), fixed_builds={} if tt3 is None or dense else {"tt3": tt3},
                  max_copies=MAX_UNITS,
                  measure_hosts=lambda points: measure_tt_hosts([(setup, tt_hardware(options)) for options in points],
                                                                repeats=5))


def paper_setup(rank: int, precision: Mapping[str, Any], *, batch: int = PAPER_BATCH) -> TtTrainSetup:
    """Paper 003's two-layer network (:data:`codesign.step.tt.cycles.PAPER_LAYERS`, our modes) at inner rank
    ``rank`` as a TT loop set-up, for whole-step figures against the paper's 0.09 s. A rank above what the
    modes allow (the 10-output layer's first core has 8 values) is capped there, as its TT-SVD caps it."""
    layers = []
    for index, (in_modes, out_modes) in enumerate(PAPER_LAYERS):
        sizes = [m * n for m, n in zip(out_modes, in_modes)]
        # no inner rank above what a TT-SVD can give: the products of the mode sizes on either side
        ranks = (1, *(min(rank, math.prod(sizes[:k]), math.prod(sizes[k:])) for k in range(1, len(sizes))), 1)
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
    return explore_family(tt_family(setup, bases=bases, host=host, macs=macs, tt3=tt3), board, clock_mhz=clock_mhz,
                          knobs=knobs, cap=cap, enumerate_limit=enumerate_limit, trials=trials, seed=seed,
                          progress=progress)


# ---------------------------------------------------------------------------- FB-float and CSB


def fb_family(spec, shapes: Sequence[GemmShape], *, host: HostModel) -> Family:
    """The FB-float loop: one fpmac_array IP whose array shape varies; its GEMMs ``shapes`` (one step)."""

    def loads(pe: str, build, copies: int):
        stages, totals = fb_stages(build, list(shapes))
        return _loads(stages), totals["calls"]

    return Family(name="fb", bases={"fpmac_array": spec}, loads=loads,
                  # one IP a stage: the ports a design spreads its IPs over do not change a stage
                  step=lambda options, board, clock, hp_ports=1: fb_step_time(options[0].spec, list(shapes), board,
                                                                              clock_mhz=clock, host=host),
                  stages=lambda options: fb_stages(options[0].spec, list(shapes))[0],
                  describe=lambda options: {"fpmac_array": options[0].spec.to_dict()}, host=host,
                  macs=fb_stages(spec, list(shapes))[1]["macs"], mac_energy_pj=fb_mac_energy_pj(spec))


def csb_family(spec, layers: Sequence[CsbLayer | np.ndarray], batch: int, *, host: HostModel) -> Family:
    """The CSB loop: one csb IP whose block shape, lanes and groups vary (and, for a conv network, its output tile);
    ``layers`` are :class:`~codesign.step.csb.time.CsbLayer` records, or the kept weights of FC layers."""
    layers = as_layers(layers)

    def loads(pe: str, build, copies: int):
        stages, totals = csb_stages(build, layers, batch)
        return _loads(stages), totals["calls"]

    conv = any(layer.kernel > 1 or layer.height * layer.width > 1 for layer in layers)
    return Family(name="csb", bases={"csb": spec}, loads=loads,
                  step=lambda options, board, clock, hp_ports=1: csb_step_time(options[0].spec, layers, batch, board,
                                                                               clock_mhz=clock, host=host),
                  stages=lambda options: csb_stages(options[0].spec, layers, batch)[0],
                  describe=lambda options: {"csb": options[0].spec.to_dict()}, host=host,
                  macs=csb_stages(spec, layers, batch)[1]["macs"], mac_energy_pj=csb_mac_energy_pj(spec),
                  knobs={"csb": {**CSB_KNOBS, **CSB_TILE_KNOBS}} if conv else {})


__all__ = ["CSB_KNOBS", "CSB_TILE_KNOBS", "FPMAC_ARRAY_KNOBS", "Family", "KNOBS", "TT_KNOBS", "csb_family",
           "explore_family", "explore_tt", "fb_family", "fixed_resources", "paper_setup", "tt_family", "tt_hardware"]
