"""The explorer's view of a training loop: which PEs vary, their knob tables, and how a build's work in one
training step becomes stages.

An :class:`ExploreModel` is all :mod:`codesign.design.explore` needs to know
of a design's training loop; each training family builds its own
(:mod:`codesign.design.families`). Knob tables are per PE (``{field:
values}``, plus ``copies``): a value is offered to the PE's spec and kept only where the
spec's own validators accept it, so the tables may be generous. Copies
stay at 1 where the loop drives one IP of the PE (the per-call steps); the
FB-float and CSB lists share a step's phases among copies.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from codesign.boards import Board
from codesign.design.calibration import pe_resources
from codesign.design.explore import COPIES, DEFAULT_CAP, ENUMERATE_LIMIT, Loads, Option, Space, explore, pe_options
from codesign.step.time import Stage, StepTime, list_stages
from codesign.shell.ip import ip_shell_cost
from codesign.hw.resource_model import RESOURCES, fpga_counts
from codesign.step.host import HostModel
from codesign.loops.host_share import THIS_MACHINE
from codesign.shell.list_runner import beside_seconds
from codesign.pe import get_pe

# knob tables, one per PE: the spec fields a family varies and the values offered (the spec's validators decide)
TT_KNOBS = {"lanes": (2, 4, 8, 16), "rows": (1, 2, 4, 8), "stream_bits": (32, 64, 128), COPIES: (1, 2, 3, 4)}
FPMAC_ARRAY_KNOBS = {"rows": tuple(range(1, 17)), "cols": tuple(range(1, 17)), COPIES: (1,)}
# the array's buffer depths (BRAM): deeper buffers take larger GEMM tiles a call, so fewer words stream in a list step
FPMAC_BUFFER_KNOBS = {"max_m": (32, 64), "max_n": (32, 64), "max_k": (32, 64)}
CSB_KNOBS = {"block_rows": (4, 8, 16), "block_cols": (4, 8, 16), "batch": (1, 2, 4, 8, 12, 16),
             "parallel": (1, 2, 4), COPIES: (1,)}
# the CSB step's lists (square blocks, lanes <= block_cols): smaller blocks and fewer lanes multiply the calls (4 x 4
# blocks on 4 lanes: 4.0 M cycles a digits_compressed_mlp step against 0.27 M at 16 x 16 on 16), dominated points
# that cost the cycle model seconds each
CSB_LIST_KNOBS = {"block_rows": (8, 16), "block_cols": (8, 16), "batch": (4, 8, 12, 16), "parallel": (1, 2, 4),
                  "stream_bits": (32, 64, 128), "loss": (False, True), COPIES: (1, 2, 3, 4)}
# IPs the explorer lets a step's phases share their lists among (a design may give more): past four, the MLP
# examples' phases have no more runs to deal (a 64-sample batch is four lane chunks, two or four row tiles)
MAX_LIST_COPIES = 4
CSB_TILE_KNOBS = {"out_h": (1, 2, 4, 8), "out_w": (1, 2, 4, 8)}  # a conv network's output tile (positions)
# PE3 (the dense route's outer products) is not varied: its one option is the design's build, one copy
KNOBS = {"tt1": TT_KNOBS, "tt2": TT_KNOBS, "tt3": {}, "fpmac_array": FPMAC_ARRAY_KNOBS, "csb": CSB_KNOBS}


@dataclass(frozen=True, kw_only=True)
class ExploreModel:
    """A design's training loop as the explorer sees it (see the module's docstring)."""

    name: str  # the training family's key (codesign.design.families)
    bases: dict[str, Any]  # varied PE -> the design's build, whose other fields the knobs keep
    loads: Loads  # (pe, spec, copies) -> ((stages, 3) cycles and words, PE calls of a step)
    # the whole step of one point, its IPs' data over ``hp_ports`` high-performance ports (keyword, default 1)
    step: Callable[..., StepTime]
    stages: Callable[[Sequence[Option]], list[Stage]]  # its stages (reports)
    describe: Callable[[Sequence[Option]], Any]  # its hardware, for reports
    host: HostModel
    macs: int
    mac_energy_pj: float
    # the host of a point by its first PE's build, where it differs among them (a CSB build with the LOSS unit
    # computes no loss gradient on the host); None: ``host`` for every point
    host_of: Callable[[Any], HostModel] | None = None
    fixed_builds: dict[str, Any] = field(default_factory=dict)  # PEs the space does not vary, once each
    max_copies: int = 1
    knobs: dict[str, dict[str, Sequence[int]]] = field(default_factory=dict)  # a PE's own knob table (else KNOBS)
    # several points' host seconds and PE calls per step, measured here side by side (the host model is a fit over
    # two schedules and counts PE calls only)
    measure_hosts: Callable[[Sequence[Sequence[Option]]], list[tuple[float, int]]] | None = None
    # (pe, build) -> whether the loop runs on that build (the spec's validators accept more: e.g. the CSB step's
    # lists need square blocks)
    runs: Callable[[str, Any], bool] = lambda pe, spec: True
    # whether a build's loads simulate its step (seconds each, as a conv network's lists): its two or more copies
    # past the cap are then not priced at all (``pe_options``' limit), as no such point can fit
    simulates: bool = False

    @property
    def pes(self) -> tuple[str, ...]:
        return tuple(self.bases)


def fixed_resources(builds: Mapping[str, Any], family: str, held_sums: Mapping[str, bool] | None = None,
                    price: Callable[[str, Any], Mapping[str, float]] | None = None) -> dict[str, float]:
    """Resources of the IPs a space does not vary, one of each build (each PE as ``price`` counts it, the
    calibrated model unless given, plus its shell's Yosys cost, with the accumulation buffer as ``held_sums``
    says for that PE, else as the design flow builds it)."""
    out = dict.fromkeys(RESOURCES, 0.0)
    for pe, spec in builds.items():
        held = (held_sums or {}).get(pe)
        model = price(pe, spec) if price else pe_resources(pe, spec, family)
        shell = fpga_counts(ip_shell_cost(get_pe(pe), spec, family, held_sums=held))
        out = {k: out[k] + model[k] + shell[k] for k in RESOURCES}
    return out


def explore_family(family: ExploreModel, board: Board, *, clock_mhz: float,
                   knobs: Mapping[str, Mapping[str, Sequence[int]]] | None = None, cap: float = DEFAULT_CAP,
                   enumerate_limit: int = ENUMERATE_LIMIT, trials: int = 400, seed: int = 0,
                   progress: Callable[[str], None] | None = None) -> Space:
    """Price ``family``'s space on ``board`` (knob tables: ``knobs``, else the family's, else :data:`KNOBS` per
    PE)."""
    if not 0 < cap <= 1:
        raise ValueError(f"cap must be in (0, 1], got {cap}")
    knobs = knobs or {}
    tables = {pe: knobs.get(pe, family.knobs.get(pe, KNOBS[pe])) for pe in family.pes}
    fixed = fixed_resources(family.fixed_builds, board.yosys_family)
    limit = {k: cap * board.resources[k] - fixed[k] for k in RESOURCES} if family.simulates else None
    options = [pe_options(pe, family.bases[pe], board.yosys_family, tables[pe], family.loads,
                          max_copies=family.max_copies, progress=progress,
                          runs=lambda spec, pe=pe: family.runs(pe, spec), limit=limit) for pe in family.pes]
    return explore(options, board, pes=family.pes, clock_mhz=clock_mhz, host=family.host, host_of=family.host_of,
                   macs=family.macs,
                   mac_energy_pj=family.mac_energy_pj, fixed=fixed,
                   cap=cap, enumerate_limit=enumerate_limit, trials=trials, seed=seed, family=family.name,
                   fixed_ips=len(family.fixed_builds))


def list_step_host(report: HostModel | None, measure: Callable[[], dict],
                   progress: Callable[[str], None]) -> HostModel:
    """The host of a list step: ``measure()`` (:func:`codesign.shell.list_runner.host_per_list_step`'s figure, timed
    on this machine: its seconds between the phases as ``fixed_s``, those beside them as ``beside_s``) where no
    board's ``report`` is given; a report of list steps timed with the IPs (``host_share --lists``, split alike)
    as it is; else that report's per-step part alone: a report that times the per-call loop
    (:mod:`codesign.deploy.host_share`), whose per-step part also counts work the lists move to the PE, so the
    figure errs high."""
    if report is None:
        progress("measuring the host's share of a list step (NumPy loop, this machine)")
        measured = measure()
        beside = beside_seconds(measured)
        return HostModel(fixed_s=measured["seconds"] - beside, per_call_s=0.0, source=THIS_MACHINE, beside_s=beside)
    if report.list_step:  # a list step timed with the IPs: the figure itself
        progress(f"the host's share of a list step: {report.source}")
        return report
    host = HostModel(fixed_s=report.fixed_s, per_call_s=0.0,
                     source=f"{report.source}; the per-call loop's per-step part, standing in for the list step's")
    progress(f"the host's share of a step: {host.source}")
    return host


def list_step_host_args(host: HostModel, priced: Mapping[str, Any]) -> dict[str, Any]:
    """A list family's host in its step (``priced``: the step's phases as the list cycle model gave them): all the
    host's seconds, of which its work beside the phases (``beside_s``: the loss and the next batch written beside
    the last, the batch's check beside the forward) the step hides behind the last phase as far as that phase
    reaches, as it would behind their own phases while the forward outlasts the check (7 us against 0.1 ms on
    the shipped CSB MLP); as the ``host_s``, ``host_source`` and ``beside`` keywords of the families' list step
    models."""
    return {"host_s": host.seconds(priced["calls"]) + host.beside_s, "host_source": host.source,
            "beside": {len(priced["words"]) - 1: host.beside_s}}


def stage_array(stages: Sequence[Stage]) -> np.ndarray:
    return np.array([(s.cycles, s.words_in, s.words_out) for s in stages], dtype=np.int64).reshape(-1, 3)


def phase_loads(priced: Mapping[str, Any], copies: int) -> tuple[np.ndarray, int, np.ndarray]:
    """A ``loads`` answer for a step priced phase by phase (:func:`codesign.step.share.phased_step_cycles`):
    its stages, its calls and each copy's words in and out a stage (``(stages, copies, 2)``; a phase with fewer
    lists than copies leaves the others' zero)."""
    words = np.zeros((len(priced["list_words"]), copies, 2), dtype=np.int64)
    for stage, lists in enumerate(priced["list_words"].values()):
        words[stage, :len(lists)] = lists
    return stage_array(list_stages(priced)), priced["calls"], words


__all__ = ["CSB_KNOBS", "CSB_LIST_KNOBS", "CSB_TILE_KNOBS", "ExploreModel", "FPMAC_ARRAY_KNOBS", "FPMAC_BUFFER_KNOBS",
           "KNOBS", "MAX_LIST_COPIES", "TT_KNOBS", "explore_family", "fixed_resources",
           "list_step_host", "list_step_host_args", "phase_loads", "stage_array"]
