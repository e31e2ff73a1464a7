"""Explore a TT training set-up's accelerators on a board: every PE1/PE2 build and copy count, timed as whole steps.

The knobs are each contraction PE's ``lanes`` and ``rows`` and its number
of copies (:data:`TT_KNOBS`); a value the PE's spec refuses is not a point.
Every point is priced by models, never by synthesis:

- **time**: the whole-step model of :mod:`codesign.design.step_time` (PE
  cycles scheduled on the copies, DDR and port traffic, host work);
- **resources**: each PE's analytical model calibrated against Yosys
  (:mod:`codesign.design.calibration`) plus the accelerator shell per IP;
  PE3 is the design's own build, once;
- **energy**: the step's MACs and DDR bytes (45 nm table).

A PE's calls in a step depend on its own build only, so each (build,
copies) of PE1 and of PE2 is scheduled once (:func:`codesign.pe.tt.step_cycles.stage_loads`)
and the space is their product: a stage takes the longer of its PE1 and
PE2 loads, its words are both PEs' words. That makes the model vectorised
over the whole space. A space of more than ``enumerate_limit`` points is
searched with Optuna's NSGA-II sampler (constraints: the resource cap)
instead of enumerated.

A point is feasible when every resource stays within ``cap`` of the board.
The Pareto front is the feasible points no other feasible point matches or
beats on step time, energy, LUT, DSP and BRAM at once. Yosys then confirms
the chosen point (and the front's best few) through the fit cache, so a
chosen design is checked as ``codesign design`` checks it.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from codesign.boards import Board
from codesign.design.calibration import load_calibration, pe_resources
from codesign.design.step_time import WORD_BYTES, HostModel, port_bytes_per_s, tt_mac_energy_pj
from codesign.energy.table import horowitz_45nm
from codesign.hw.accel import shell_cost
from codesign.hw.resource_model import RESOURCES, fpga_counts
from codesign.loops.tt import TtTrainSetup
from codesign.pe.tt.schedule import MAX_UNITS, StepHardware
from codesign.pe.tt.spec import Tt3Spec
from codesign.pe.tt.step import step_plan
from codesign.pe.tt.step_cycles import PAPER_BATCH, PAPER_LAYERS, stage_loads

OBJECTIVES = ("time", "energy")
TT_KNOBS = {"lanes": (2, 4, 8, 16), "rows": (1, 2, 4, 8), "copies": (1, 2, 3, 4)}
DEFAULT_CAP = 0.8  # largest share of each board resource a point may use (AutoDSE's per-resource cap)
ENUMERATE_LIMIT = 20_000
FIELDS = {"tt1": "pe1", "tt2": "pe2"}


@dataclass(frozen=True, kw_only=True)
class Option:
    """One build and copy count of a contraction PE, with its per-stage loads and its resources (all copies)."""

    pe: str
    spec: Any
    copies: int
    cycles: np.ndarray  # (stages,) busiest copy's cycles
    words_in: np.ndarray
    words_out: np.ndarray
    calls: int  # PE calls of a step (the host prepares each)
    resources: dict[str, float]  # PE model + shell, times copies

    def label(self) -> str:
        return f"{self.copies} x {self.pe} {self.spec.lanes}x{self.spec.rows}"


def paper_setup(rank: int, precision: Mapping[str, Any], *, batch: int = PAPER_BATCH) -> TtTrainSetup:
    """Paper 003's two-layer network (:data:`codesign.pe.tt.step_cycles.PAPER_LAYERS`, our modes) at inner rank
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


def legal_specs(base, knobs: Mapping[str, Sequence[int]]) -> list:
    """The specs from ``base`` with every combination of the knobs' spec fields the spec's validators accept."""
    names = [name for name in knobs if name != "copies"]
    specs = []
    for values in itertools.product(*(knobs[name] for name in names)):
        try:
            specs.append(dataclasses.replace(base, **dict(zip(names, values))))
        except (TypeError, ValueError):
            continue
    return specs


def pe_options(setup: TtTrainSetup, pe: str, base, family: str, knobs: Mapping[str, Sequence[int]],
               progress: Callable[[str], None] | None = None) -> list[Option]:
    """Every legal build x copies of ``pe`` with its stage loads in a step of ``setup`` and its modelled resources."""
    calibration = load_calibration(pe, family)
    shell = fpga_counts(shell_cost(family))
    copies_values = [c for c in knobs.get("copies", (1,)) if 1 <= c <= MAX_UNITS]
    options = []
    specs = legal_specs(base, knobs)
    for index, spec in enumerate(specs, start=1):
        if progress is not None:
            progress(f"[{pe} {index}/{len(specs)}] scheduling lanes={spec.lanes} rows={spec.rows}")
        one = pe_resources(pe, spec, family, calibration)
        for copies in copies_values:
            hardware = StepHardware(**{FIELDS[pe]: spec, f"{FIELDS[pe]}_units": copies})
            loads, calls = [], 0
            for layer in range(len(setup.layers)):
                plan = step_plan(setup.layer_state(layer, setup.initial_cores(layer)), setup.batch_size, hardware)
                loads += stage_loads(plan, pe)
                calls += sum(call.pe == pe for call in plan.calls)
            array = np.array(loads, dtype=np.int64).reshape(-1, 3)
            options.append(Option(pe=pe, spec=spec, copies=copies, cycles=array[:, 0], words_in=array[:, 1],
                                  words_out=array[:, 2], calls=calls,
                                  resources={k: (one[k] + shell[k]) * copies for k in RESOURCES}))
    return options


@dataclass(frozen=True, kw_only=True)
class Space:
    """The priced space: one row per (PE1 option, PE2 option), step seconds split, energy, resources, feasibility."""

    pe1: list[Option]
    pe2: list[Option]
    index: np.ndarray  # (points, 2): option indices
    pe_s: np.ndarray
    memory_s: np.ndarray
    host_s: np.ndarray
    energy_pj: np.ndarray
    resources: dict[str, np.ndarray]
    budget: dict[str, int]
    cap: float
    searched: str  # "enumerated" or "optuna (n trials)"

    @property
    def total_s(self) -> np.ndarray:
        return self.pe_s + self.memory_s + self.host_s

    @property
    def feasible(self) -> np.ndarray:
        return np.all([self.resources[k] <= self.cap * self.budget[k] for k in RESOURCES], axis=0)

    def objectives(self) -> np.ndarray:
        """(points, 5): step seconds, energy, LUT, DSP, BRAM: all minimised."""
        return np.stack([self.total_s, self.energy_pj, self.resources["lut"], self.resources["dsp"],
                         self.resources["bram_36k"]], axis=1)

    def pareto(self) -> np.ndarray:
        """Indices of the feasible points that no other feasible point matches or beats on every objective."""
        values = self.objectives()
        candidates = np.flatnonzero(self.feasible)
        front = []
        for point in candidates:
            others = values[candidates]
            dominated = np.any(np.all(others <= values[point], axis=1) & np.any(others < values[point], axis=1))
            if not dominated:
                front.append(point)
        return np.array(front, dtype=np.int64)

    def best(self, objective: str) -> int:
        """The feasible point with the least step time (or energy); ties to fewer DSP, then LUT."""
        if objective not in OBJECTIVES:
            raise ValueError(f"objective must be one of {OBJECTIVES}, got {objective!r}")
        feasible = np.flatnonzero(self.feasible)
        if feasible.size == 0:
            raise ValueError(f"no point of the space fits {self.cap:.0%} of the board")
        key = self.total_s if objective == "time" else self.energy_pj
        order = np.lexsort((self.resources["lut"][feasible], self.resources["dsp"][feasible], key[feasible]))
        return int(feasible[order[0]])

    def point(self, index: int) -> dict[str, Any]:
        first, second = self.pe1[self.index[index, 0]], self.pe2[self.index[index, 1]]
        return {"tt1": {"lanes": first.spec.lanes, "rows": first.spec.rows, "copies": first.copies},
                "tt2": {"lanes": second.spec.lanes, "rows": second.spec.rows, "copies": second.copies},
                "label": f"{first.label()} + {second.label()}",
                "total_s": float(self.total_s[index]), "pe_s": float(self.pe_s[index]),
                "memory_s": float(self.memory_s[index]), "host_s": float(self.host_s[index]),
                "energy_pj": float(self.energy_pj[index]),
                **{k: float(self.resources[k][index]) for k in RESOURCES}, "feasible": bool(self.feasible[index])}


def price(pe1: list[Option], pe2: list[Option], pairs: np.ndarray, *, board: Board, clock_mhz: float,
          host: HostModel, macs: int, mac_energy_pj: float, fixed: Mapping[str, float]) -> dict[str, Any]:
    """Step seconds (PE, data movement, host), energy and resources of the option pairs ``pairs`` (points, 2)."""
    c1 = np.stack([o.cycles for o in pe1])[pairs[:, 0]]
    c2 = np.stack([o.cycles for o in pe2])[pairs[:, 1]]
    w_in = np.stack([o.words_in for o in pe1])[pairs[:, 0]] + np.stack([o.words_in for o in pe2])[pairs[:, 1]]
    w_out = np.stack([o.words_out for o in pe1])[pairs[:, 0]] + np.stack([o.words_out for o in pe2])[pairs[:, 1]]
    pe = np.maximum(c1, c2) / (clock_mhz * 1e6)
    port = port_bytes_per_s(board)
    moved = np.maximum.reduce([w_in * WORD_BYTES / port, w_out * WORD_BYTES / port,
                               (w_in + w_out) * WORD_BYTES / (board.ddr_peak_gbps * 1e9)])
    total_bytes = (w_in + w_out).sum(axis=1) * WORD_BYTES
    table = horowitz_45nm()
    resources = {k: np.array([o.resources[k] for o in pe1])[pairs[:, 0]]
                 + np.array([o.resources[k] for o in pe2])[pairs[:, 1]] + fixed[k] for k in RESOURCES}
    calls = np.array([o.calls for o in pe1])[pairs[:, 0]] + np.array([o.calls for o in pe2])[pairs[:, 1]]
    return {"pe_s": pe.sum(axis=1), "memory_s": np.maximum(moved - pe, 0).sum(axis=1), "host_s": host.seconds(calls),
            "energy_pj": macs * mac_energy_pj + total_bytes * 8 / 64 * table.dram_64b, "resources": resources}


def explore_tt(setup: TtTrainSetup, board: Board, *, bases: Mapping[str, Any], clock_mhz: float, host: HostModel,
               macs: int, tt3: Tt3Spec | None, knobs: Mapping[str, Mapping[str, Sequence[int]]] | None = None,
               cap: float = DEFAULT_CAP, enumerate_limit: int = ENUMERATE_LIMIT, trials: int = 400, seed: int = 0,
               progress: Callable[[str], None] | None = None) -> Space:
    """Price every PE1 x PE2 option of ``setup`` on ``board`` (Optuna past ``enumerate_limit`` points).

    ``bases`` holds the tt1 and tt2 builds the knobs vary (operand widths and
    buffers stay theirs); ``tt3`` is the design's PE3 (counted once) or None.
    """
    if not 0 < cap <= 1:
        raise ValueError(f"cap must be in (0, 1], got {cap}")
    knobs = knobs or {"tt1": TT_KNOBS, "tt2": TT_KNOBS}
    family = board.yosys_family
    pe1 = pe_options(setup, "tt1", bases["tt1"], family, knobs["tt1"], progress)
    pe2 = pe_options(setup, "tt2", bases["tt2"], family, knobs["tt2"], progress)
    fixed = dict.fromkeys(RESOURCES, 0.0)
    if tt3 is not None:
        shell, model = fpga_counts(shell_cost(family)), pe_resources("tt3", tt3, family)
        fixed = {k: model[k] + shell[k] for k in RESOURCES}
    budget = {k: board.resources[k] for k in RESOURCES}
    common = {"board": board, "clock_mhz": clock_mhz, "host": host, "macs": macs,
              "mac_energy_pj": tt_mac_energy_pj(setup), "fixed": fixed}
    size = len(pe1) * len(pe2)
    if size <= enumerate_limit:
        pairs = np.array(list(itertools.product(range(len(pe1)), range(len(pe2)))), dtype=np.int64)
        searched = "enumerated"
    else:
        pairs = _optuna_pairs(pe1, pe2, common, budget, cap, trials, seed)
        searched = f"optuna NSGA-II ({trials} trials of {size} points)"
    priced = price(pe1, pe2, pairs, **common)
    return Space(pe1=pe1, pe2=pe2, index=pairs, pe_s=priced["pe_s"], memory_s=priced["memory_s"],
                 host_s=priced["host_s"],
                 energy_pj=priced["energy_pj"], resources=priced["resources"], budget=budget, cap=cap,
                 searched=searched)


def _optuna_pairs(pe1, pe2, common, budget, cap, trials: int, seed: int) -> np.ndarray:
    """The option pairs Optuna's NSGA-II visits minimising step time and DSP under the resource cap."""
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)

    def objective(trial):
        pair = np.array([[trial.suggest_int("pe1", 0, len(pe1) - 1), trial.suggest_int("pe2", 0, len(pe2) - 1)]])
        priced = price(pe1, pe2, pair, **common)
        for k in RESOURCES:  # feasible when every value is at most 0
            trial.set_constraint(k, float(priced["resources"][k][0] - cap * budget[k]))
        seconds = priced["pe_s"][0] + priced["memory_s"][0] + priced["host_s"][0]
        return float(seconds), float(priced["resources"]["dsp"][0])

    sampler = optuna.samplers.NSGAIISampler(seed=seed)
    study = optuna.create_study(directions=["minimize", "minimize"], sampler=sampler)
    study.optimize(objective, n_trials=trials)
    seen = sorted({(t.params["pe1"], t.params["pe2"]) for t in study.trials if t.params})
    return np.array(seen, dtype=np.int64)


__all__ = ["DEFAULT_CAP", "OBJECTIVES", "Option", "Space", "TT_KNOBS", "explore_tt", "legal_specs", "paper_setup",
           "pe_options", "price"]
