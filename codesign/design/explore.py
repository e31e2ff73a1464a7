"""Explore a training set-up's accelerators on a board: every legal build and copy count of its PEs, timed as
whole steps.

The explorer is one core over *families* (:mod:`codesign.design.explore_model`):
a family names the PEs whose builds vary, a knob table per PE (the values
each spec field may take; a value the PE's spec refuses is not a point),
and how a build's work in one training step is cut into stages (TT: the
contraction stages of PE1 and PE2 copies; FB-float: the FP-MAC array's
IP calls per GEMM; CSB: the csb IP's calls per layer op). Every point is
priced by models, never by synthesis:

- **time**: the whole-step model of :mod:`codesign.step.time` (a
  stage takes the longer of its PE cycles and its words over the port and
  DDR; the host's work per step and per PE call, measured);
- **resources**: each PE's analytical model calibrated against Yosys
  (:mod:`codesign.design.calibration`) plus the accelerator shell per IP;
  PEs the family does not vary (TT's PE3) are the design's own builds, once;
- **energy**: the step's MACs and DDR bytes (45 nm table).

A PE's stage loads depend on its own build only, so each (build, copies)
of every varied PE is priced once (an :class:`Option`) and the space is the
product of the PEs' options: a stage takes the longest of its PEs' cycles,
its words are all PEs' words. That makes the model vectorised over the
whole space. Each option also keeps every copy's words per stage, so a
point's IPs are spread over the board's high-performance ports as its
design would spread them (IP ``i`` on port ``i mod ports``, the varied PEs'
copies in order, then the fixed IPs): each point is priced at every port
count from the fewest whose SmartConnects fit its IPs to the board's, with
each stage's busiest port, and takes the fewest within :data:`PORT_GAIN` of
its best (``Space.hp_ports``). A space of more than ``enumerate_limit`` points is searched
with Optuna's NSGA-II sampler (constraints: the resource cap) instead.

A point is feasible when every resource stays within ``cap`` of the board.
The Pareto front is the feasible points no other feasible point matches or
beats on step time, energy, LUT, DSP and BRAM at once.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from codesign.boards import Board
from codesign.design.calibration import load_calibration, pe_resources
from codesign.step.time import WORD_BYTES, port_bytes_per_s
from codesign.energy.table import horowitz_45nm
from codesign.shell.ip import ip_shell_cost
from codesign.hw.resource_model import RESOURCES, fpga_counts
from codesign.shell.vivado import shell_ips_hp_ports
from codesign.step.host import HostModel
from codesign.pe import get_pe

OBJECTIVES = ("time", "energy")
DEFAULT_CAP = 0.8  # largest share of each board resource a point may use (AutoDSE's per-resource cap)
ENUMERATE_LIMIT = 20_000
COPIES = "copies"

# Loads of one build: (stages, 3) int array of (cycles of the busiest copy, words in, words out), the PE calls
# (transactions) of a step the host prepares, and optionally (stages, copies, 2) words in and out of each copy (a
# build without it has its stage's words on its first copy)
Loads = Callable[[str, Any, int], tuple]
PRICE_CELLS = 1 << 20  # points x stages priced at once (each dense array of them 8 MiB)
PORT_GAIN = 0.01  # a high-performance port more is taken for at least this share of the whole step


@dataclass(frozen=True, kw_only=True)
class Option:
    """One build and copy count of a PE, with its per-stage loads and its resources (all copies)."""

    pe: str
    spec: Any
    copies: int
    knobs: tuple[str, ...]  # the spec fields the knob table varies
    cycles: np.ndarray  # (stages,) busiest copy's cycles
    words_in: np.ndarray
    words_out: np.ndarray
    calls: int  # PE calls of a step (the host prepares each)
    resources: dict[str, float]  # PE model + shell, times copies
    copy_words: np.ndarray  # (stages, copies, 2): words in and out of each copy

    def label(self) -> str:
        return " ".join([f"{self.copies} x {self.pe}", *(["x".join(str(getattr(self.spec, k)) for k in self.knobs)]
                                                          if self.knobs else [])])

    def values(self) -> dict[str, int]:
        """The knobs' values (and the copies): the ``[design.pe.<pe>]`` fields of this option."""
        return {**{k: getattr(self.spec, k) for k in self.knobs}, COPIES: self.copies}


def legal_specs(base, knobs: Mapping[str, Sequence[int]]) -> list:
    """The specs from ``base`` with every combination of the knobs' spec fields the spec's validators accept."""
    names = [name for name in knobs if name != COPIES]
    specs = []
    for values in itertools.product(*(knobs[name] for name in names)):
        try:
            specs.append(dataclasses.replace(base, **dict(zip(names, values))))
        except (TypeError, ValueError):
            continue
    return specs


def pe_options(pe: str, base, family: str, knobs: Mapping[str, Sequence[int]], loads: Loads, *,
               max_copies: int, progress: Callable[[str], None] | None = None,
               runs: Callable[[Any], bool] = lambda spec: True,
               limit: Mapping[str, float] | None = None) -> list[Option]:
    """Every legal build x copies of ``pe`` that the loop ``runs`` on, with its stage loads
    (``loads(pe, spec, copies)``) and resources. ``limit``: the resources one PE's copies may take in a design
    that fits (the cap's share of the board, less the IPs the space does not vary); two or more copies past it
    are left out before their loads are worked out, which for a list step means simulating it (one copy is
    always priced, so a space where nothing fits still says by how much)."""
    calibration = load_calibration(pe, family)
    copies_values = [c for c in knobs.get(COPIES, (1,)) if 1 <= c <= max_copies]
    names = tuple(name for name in knobs if name != COPIES)
    options = []
    specs = [spec for spec in legal_specs(base, knobs) if runs(spec)]
    for index, spec in enumerate(specs, start=1):
        if progress is not None:
            progress(f"[{pe} {index}/{len(specs)}] " + " ".join(f"{k}={getattr(spec, k)}" for k in names))
        one = pe_resources(pe, spec, family, calibration)
        shell = fpga_counts(ip_shell_cost(get_pe(pe), spec, family))
        for copies in copies_values:
            resources = {k: (one[k] + shell[k]) * copies for k in RESOURCES}
            if copies > 1 and limit is not None and any(resources[k] > limit[k] for k in RESOURCES):
                continue
            array, calls, *split = loads(pe, spec, copies)
            array = np.asarray(array, dtype=np.int64).reshape(-1, 3)
            if split:
                copy_words = np.asarray(split[0], dtype=np.int64).reshape(-1, copies, 2)
            else:  # the stage's words on the first copy
                copy_words = np.zeros((array.shape[0], copies, 2), dtype=np.int64)
                copy_words[:, 0] = array[:, 1:]
            options.append(Option(pe=pe, spec=spec, copies=copies, knobs=names, cycles=array[:, 0],
                                  words_in=array[:, 1], words_out=array[:, 2], calls=calls, resources=resources,
                                  copy_words=copy_words))
    return options


def _stacked(options: Sequence[Option], field: str, width: int) -> np.ndarray:
    """(options, ``width``) of one load field, shorter stage lists padded with empty stages (they cost nothing)."""
    out = np.zeros((len(options), width), dtype=np.int64)
    for row, option in enumerate(options):
        values = getattr(option, field)
        out[row, :len(values)] = values
    return out


@dataclass(frozen=True, kw_only=True)
class Space:
    """The priced space: one row per combination of the PEs' options, step seconds split, energy, resources."""

    pes: tuple[str, ...]
    options: tuple[list[Option], ...]  # per varied PE
    index: np.ndarray  # (points, PEs): option indices
    pe_s: np.ndarray
    memory_s: np.ndarray
    host_s: np.ndarray
    energy_pj: np.ndarray
    resources: dict[str, np.ndarray]
    budget: dict[str, int]
    cap: float
    searched: str  # "enumerated" or "optuna (n trials)"
    hp_ports: np.ndarray  # (points,): the HP ports each point's IPs are priced over
    family: str = "tt"

    @property
    def pe1(self) -> list[Option]:
        return self.options[0]

    @property
    def pe2(self) -> list[Option]:
        return self.options[1]

    @property
    def total_s(self) -> np.ndarray:
        return self.pe_s + self.memory_s + self.host_s

    @property
    def feasible(self) -> np.ndarray:
        return np.all([self.resources[k] <= self.cap * self.budget[k] for k in RESOURCES], axis=0)

    def chosen_options(self, index: int) -> list[Option]:
        return [options[i] for options, i in zip(self.options, self.index[index])]

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

    def words(self, index: int) -> int:
        """32-bit words in and out of every PE of point ``index`` in one step."""
        return int(sum(o.words_in.sum() + o.words_out.sum() for o in self.chosen_options(index)))

    def point(self, index: int) -> dict[str, Any]:
        chosen = self.chosen_options(index)
        return {**{o.pe: o.values() for o in chosen}, "label": " + ".join(o.label() for o in chosen),
                "total_s": float(self.total_s[index]), "pe_s": float(self.pe_s[index]),
                "memory_s": float(self.memory_s[index]), "host_s": float(self.host_s[index]),
                "energy_pj": float(self.energy_pj[index]),
                **{k: float(self.resources[k][index]) for k in RESOURCES}, "feasible": bool(self.feasible[index])}


def price(options: Sequence[list[Option]], pairs: np.ndarray, **common: Any) -> dict[str, Any]:
    """Step seconds (PE, data movement, host), energy, resources and HP ports of the option combinations ``pairs``
    (points, PEs), :func:`_price`'s, a slice of the points at a time: its arrays are points x stages, and a step
    priced one IP call a stage (the pruned ResNet-8's) has thousands of stages, so the whole space at once took
    13.8 GB for 5,184 points."""
    width = max(max(len(o.cycles) for o in per_pe) for per_pe in options)
    step = max(1, PRICE_CELLS // width)
    if len(pairs) <= step:
        return _price(options, pairs, width, **common)
    parts = [_price(options, pairs[at:at + step], width, **common) for at in range(0, len(pairs), step)]
    return {key: ({k: np.concatenate([part[key][k] for part in parts]) for k in RESOURCES} if key == "resources"
                  else np.concatenate([part[key] for part in parts])) for key in parts[0]}


def _used(per_pe: list[Option], chosen: np.ndarray) -> tuple[list[Option], np.ndarray]:
    """The options ``chosen`` names, once each, and ``chosen`` as indices into them (so that stacking them takes
    the points' own options, not every option of the space)."""
    used, at = np.unique(chosen, return_inverse=True)
    return [per_pe[j] for j in used], at.reshape(-1)


def _price(options: Sequence[list[Option]], pairs: np.ndarray, width: int, *, board: Board, clock_mhz: float,
           host: HostModel, macs: int, mac_energy_pj: float, fixed: Mapping[str, float],
           fixed_ips: int = 0, host_of=None) -> dict[str, Any]:
    """:func:`price` of the points ``pairs``, every stage list padded to ``width``; ``fixed_ips`` IPs the space
    does not vary stand after its PEs' copies; ``host_of``: a point's host by its first PE's build (else
    ``host``)."""
    cycles = w_in = w_out = calls = None
    resources = {k: np.full(pairs.shape[0], float(fixed[k])) for k in RESOURCES}
    ips = np.full(pairs.shape[0], fixed_ips, dtype=np.int64)
    for column, per_pe in enumerate(options):
        chosen = pairs[:, column]
        used, at = _used(per_pe, chosen)
        c, i, o = (_stacked(used, f, width)[at] for f in ("cycles", "words_in", "words_out"))
        cycles = c if cycles is None else np.maximum(cycles, c)
        w_in, w_out = (i, o) if w_in is None else (w_in + i, w_out + o)
        n = np.array([opt.calls for opt in per_pe])[chosen]
        calls = n if calls is None else calls + n
        ips += np.array([opt.copies for opt in per_pe])[chosen]
        for k in RESOURCES:
            resources[k] = resources[k] + np.array([opt.resources[k] for opt in per_pe])[chosen]
    pe = cycles / (clock_mhz * 1e6)
    if host_of is None:
        host_s = host.seconds(calls)
    else:
        hosts = [host_of(option.spec) for option in options[0]]
        host_s = np.array([hosts[j].seconds(n) for j, n in zip(pairs[:, 0], calls)], dtype=np.float64)
    port = port_bytes_per_s(board)
    ddr = (w_in + w_out) * WORD_BYTES / (board.ddr_peak_gbps * 1e9)
    counts = {int(n): shell_ips_hp_ports(int(n), board.hp_ports) for n in np.unique(ips)}
    fewest = np.array([counts[int(n)] for n in ips], dtype=np.int64)
    copies = _copy_words(options, pairs, width)
    memory = {}  # ports -> (points,) seconds the data movement adds; inf where the IPs need more ports
    for ports in range(1, board.hp_ports + 1):
        busiest = _busiest_ports(copies, ports)
        moved = np.maximum.reduce([busiest[..., 0] * WORD_BYTES / port, busiest[..., 1] * WORD_BYTES / port, ddr])
        memory[ports] = np.where(fewest <= ports, np.maximum(moved - pe, 0).sum(axis=1), np.inf)
    base = pe.sum(axis=1) + host_s
    hp_ports = port_choice({ports: base + seconds for ports, seconds in memory.items()})
    total_bytes = (w_in + w_out).sum(axis=1) * WORD_BYTES
    table = horowitz_45nm()
    return {"pe_s": pe.sum(axis=1), "memory_s": np.choose(hp_ports - 1, [memory[p] for p in sorted(memory)]),
            "host_s": host_s, "energy_pj": macs * mac_energy_pj + total_bytes * 8 / 64 * table.dram_64b,
            "resources": resources, "hp_ports": hp_ports}


def port_choice(totals: Mapping[int, np.ndarray]) -> np.ndarray:
    """Per point, the fewest HP ports whose whole step (``totals``: port count -> seconds per point) is within
    :data:`PORT_GAIN` of the best count's: a port more is taken only where it pays."""
    best = np.min(list(totals.values()), axis=0)
    chosen = np.zeros(best.shape, dtype=np.int64)
    for ports in sorted(totals, reverse=True):  # the fewest that qualifies is set last
        chosen = np.where(totals[ports] <= best * (1 + PORT_GAIN), ports, chosen)
    return chosen


def _copy_words(options: Sequence[list[Option]], pairs: np.ndarray, width: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """Per varied PE: the points' copies' words (points, stages, copies, 2; a point's missing copies zero) and their
    copy counts (points,)."""
    out = []
    for column, per_pe in enumerate(options):
        used, at = _used(per_pe, pairs[:, column])
        stacked = np.zeros((len(used), width, max(o.copies for o in used), 2), dtype=np.int64)
        for row, option in enumerate(used):
            stacked[row, :option.copy_words.shape[0], :option.copies] = option.copy_words
        out.append((stacked[at], np.array([o.copies for o in used])[at]))
    return out


def _busiest_ports(copies: Sequence[tuple[np.ndarray, np.ndarray]], ports: int) -> np.ndarray:
    """(points, stages, 2): the words in and out of each stage's busiest port when the points' IPs (the PEs' copies
    in order, :func:`_copy_words`) go round robin over ``ports`` ports (each direction's busiest on its own)."""
    points, width = copies[0][0].shape[:2]
    acc = np.zeros((points, ports, width, 2), dtype=np.int64)
    offset = np.zeros(points, dtype=np.int64)
    rows = np.arange(points)
    for words, count in copies:
        for unit in range(words.shape[2]):
            acc[rows, (offset + unit) % ports] += words[:, :, unit]
        offset += count
    return acc.max(axis=1)


def explore(options: Sequence[list[Option]], board: Board, *, pes: Sequence[str], clock_mhz: float,
            host: HostModel, macs: int, mac_energy_pj: float, fixed: Mapping[str, float] | None = None,
            cap: float = DEFAULT_CAP, enumerate_limit: int = ENUMERATE_LIMIT, trials: int = 400, seed: int = 0,
            family: str = "tt", fixed_ips: int = 0, host_of=None) -> Space:
    """Price every combination of the PEs' ``options`` on ``board`` (Optuna past ``enumerate_limit`` points);
    ``fixed`` is the resources of the ``fixed_ips`` IPs the space does not vary."""
    if not 0 < cap <= 1:
        raise ValueError(f"cap must be in (0, 1], got {cap}")
    if any(not per_pe for per_pe in options):
        raise ValueError("a PE has no legal build among its knob values")
    fixed = fixed or dict.fromkeys(RESOURCES, 0.0)
    budget = {k: board.resources[k] for k in RESOURCES}
    common = {"board": board, "clock_mhz": clock_mhz, "host": host, "macs": macs, "mac_energy_pj": mac_energy_pj,
              "fixed": fixed, "fixed_ips": fixed_ips, "host_of": host_of}
    size = int(np.prod([len(per_pe) for per_pe in options]))
    if size <= enumerate_limit:
        pairs = np.array(list(itertools.product(*(range(len(per_pe)) for per_pe in options))), dtype=np.int64)
        searched = "enumerated"
    else:
        pairs = _optuna_pairs(options, common, budget, cap, trials, seed)
        searched = f"optuna NSGA-II ({trials} trials of {size} points)"
    priced = price(options, pairs, **common)
    return Space(pes=tuple(pes), options=tuple(options), index=pairs, pe_s=priced["pe_s"], hp_ports=priced["hp_ports"],
                 memory_s=priced["memory_s"], host_s=priced["host_s"], energy_pj=priced["energy_pj"],
                 resources=priced["resources"], budget=budget, cap=cap, searched=searched, family=family)


def _optuna_pairs(options, common, budget, cap, trials: int, seed: int) -> np.ndarray:
    """The option combinations Optuna's NSGA-II visits minimising step time and DSP under the resource cap."""
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    names = [f"pe{column + 1}" for column in range(len(options))]

    def objective(trial):
        pair = np.array([[trial.suggest_int(name, 0, len(per_pe) - 1) for name, per_pe in zip(names, options)]])
        priced = price(options, pair, **common)
        for k in RESOURCES:  # feasible when every value is at most 0
            trial.set_constraint(k, float(priced["resources"][k][0] - cap * budget[k]))
        seconds = priced["pe_s"][0] + priced["memory_s"][0] + priced["host_s"][0]
        return float(seconds), float(priced["resources"]["dsp"][0])

    sampler = optuna.samplers.NSGAIISampler(seed=seed)
    study = optuna.create_study(directions=["minimize", "minimize"], sampler=sampler)
    study.optimize(objective, n_trials=trials)
    seen = sorted({tuple(t.params[name] for name in names) for t in study.trials if t.params})
    return np.array(seen, dtype=np.int64)


__all__ = ["COPIES", "DEFAULT_CAP", "OBJECTIVES", "Option", "PORT_GAIN", "Space", "explore", "legal_specs",
           "pe_options", "port_choice", "price"]
