"""``codesign explore``: a TT, FB-float or CSB design's space on its board, the chosen point confirmed by Yosys, and the reports.

Reports, named as FINN names its estimates:

- ``estimate_network_performance.json``: the chosen point's whole step (PE,
  memory and host seconds, bottleneck, bounds, energy), with the paper's
  figure where the set-up is the paper network, and its HP ports
  (``hp_ports``: the step at each count); for a TT design also the host
  measured at the model's fastest points (``host_measured``), the best
  point on the other core-gradient route (``other_route``) and what keeping
  data on chip would save (``reuse``);
- ``estimate_layer_cycles.json``: the chosen point's stages (cycles, words);
- ``estimate_layer_resources.json``: per IP of the chosen point, the
  analytical model and Yosys, and the fit verdict;
- ``explore_points.csv`` (every point priced) and ``pareto.json`` /
  ``pareto.csv`` (the front, infeasible points excluded and counted);
- ``pareto.png`` (step time against DSP, infeasible points shown) and
  ``roofline.png`` (the board's compute and memory roofs with the points);
- ``chosen.toml``: the configuration with the chosen ``[design.pe.*]`` and
  ``[design] hp_ports``, which ``codesign design`` and ``codesign build``
  accept.

Where a family prices a step the space does not, as the board would run it
(a TT design's call lists), the explorer takes that step's point where it
wins (:func:`instead_choice`); the step, stages and ports reported are then
that step's.
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from codesign.boards import Board
from codesign.design.explore import DEFAULT_CAP, PORT_GAIN, Option, Space, port_choice
from codesign.design.explore_model import ExploreModel, explore_family
from codesign.design.families import family_of, family_names, get_family
from codesign.design.fit import fit_design, pe_cost
from codesign.design.point import DesignPoint, design_from_dict
from codesign.hw.resource_model import RESOURCES
from codesign.io.reports import write_figure_png, write_json_atomic, write_text_atomic
from codesign.pe import get_pe
from codesign.shell.vivado import shell_ips_hp_ports
from codesign.step.host import HostModel
from codesign.step.tt.schedule import PE_NAMES

CONFIRMED = 3  # front points confirmed by Yosys beside the chosen one
SHORTLIST = 4  # the fastest points by the model whose host share is measured before one is chosen
# paper 002 (Sec. 6.3, Table 5): 641.1 GOP/s "equivalent" (dense operations, 2 per MAC) of training on 1024 DSP
# slices at 200 MHz, what a sparse accelerator's equivalent ops per DSP slice and cycle are set against
REFERENCE_THROUGHPUT = {"reference": "paper 002: 641.1 GOP/s equivalent, 1024 DSP, 200 MHz",
                        "reference_ops_per_dsp_cycle": 641.1e9 / (1024 * 200e6)}


class ExploreError(ValueError):
    """A configuration the explorer cannot explore (no modelled training loop, no point that fits); the message
    says why."""


def design_of_point(raw: Mapping[str, Any], design: DesignPoint, point: Mapping[str, Any]) -> tuple[dict, DesignPoint]:
    """The configuration (plain TOML data) with the point's ``[design.pe.<pe>]`` fields (every entry of ``point``
    that is a table: a PE's knobs and copies), and its design point."""
    table = {**raw.get("design", {})}
    pe = {name: dict(values) for name, values in table.get("pe", {}).items()}
    for name, values in point.items():
        if isinstance(values, Mapping):
            pe[name] = {**pe.get(name, {}), **values}
    table["pe"] = pe
    table["board"] = design.board.name
    chosen = {**raw, "design": table}
    return chosen, design_from_dict(chosen)


def cost_task(*, pe: str, family: str, cache_dir: str, spec: dict) -> dict:
    """Yosys resources of one PE build into the estimate cache ``cache_dir`` (a :mod:`codesign.sweep` task, so the
    explorer's confirmations can run on a Dask cluster whose workers share that folder)."""
    return pe_cost(pe, get_pe(pe).spec(**spec), family, Path(cache_dir))


def distinct_builds(designs: Sequence[DesignPoint]) -> list[tuple[str, Any]]:
    """The (PE, spec) builds of ``designs``, each once, in order."""
    seen: dict[tuple[str, str], tuple[str, Any]] = {}
    for point_design in designs:
        for instance in point_design.instances:
            seen.setdefault((instance.pe, repr(instance.spec)), (instance.pe, instance.spec))
    return list(seen.values())


def explore_design(raw: Mapping[str, Any], design: DesignPoint, *, objective: str = "time", cap: float = DEFAULT_CAP,
                   cache_dir: Path, knobs: Mapping[str, Mapping[str, Any]] | None = None,
                   synthesize: Callable[[list[tuple[str, Any]]], None] | None = None,
                   progress: Callable[[str], None] = print, host: HostModel | None = None) -> dict[str, Any]:
    """Explore ``design``'s training loop on its board; Yosys confirms the chosen point and the front's best.

    ``knobs`` maps a varied PE to the values of each knob (default
    :data:`codesign.design.explore_model.KNOBS`). ``synthesize``, given
    the distinct PE builds to confirm, fills ``cache_dir`` first (``codesign
    explore --scheduler`` runs them on Dask); otherwise Yosys runs here, one
    build after another, where the cache and the shipped reports lack one. ``host`` prices the host with a
    figure measured on the board (a host report; the family's ``explorer``, :mod:`codesign.design.families`).
    """
    desktop = family_of(design)
    if desktop is None:
        raise ExploreError(f"design {design.name}: the explorer covers the {', '.join(family_names())} training "
                           f"families; PEs {sorted({i.pe for i in design.instances})} given")
    family = desktop.explorer(design, progress=progress, host=host)
    space = explore_family(family, design.board, clock_mhz=design.clock_mhz, knobs=knobs, cap=cap, progress=progress)
    try:
        chosen = space.best(objective)
    except ValueError as error:
        raise ExploreError(f"design {design.name}: {error}") from None
    shortlist = None
    if family.measure_hosts is not None and host is None:  # a board's report is not re-measured on this machine
        chosen, shortlist = measured_choice(family, space, objective, progress)
    front = space.pareto()
    key = space.total_s if objective == "time" else space.energy_pj
    confirm = [chosen] + [int(i) for i in front[np.argsort(key[front])] if int(i) != chosen][:CONFIRMED]
    designs = [design_of_point(raw, design, space.point(index))[1] for index in confirm]
    if synthesize is not None:
        synthesize(distinct_builds(designs))
    confirmed = []
    for index, point_design in zip(confirm, designs):
        point = space.point(index)
        progress(f"Yosys: {point['label']}")
        fit = fit_design(point_design, cache_dir=cache_dir, limit_percent=100 * cap)
        confirmed.append(yosys_entry(point, fit))
    chosen, passed_over = confirmed_choice(confirm, confirmed, progress)
    chosen_toml, chosen_design = design_of_point(raw, design, space.point(chosen))
    ports = hp_port_choice(family, space.chosen_options(chosen), chosen_design,
                           asked=bool(raw.get("design", {}).get("hp_ports")))
    if ports["chosen"] != chosen_design.ports_used:
        chosen_toml = {**chosen_toml, "design": {**chosen_toml["design"], "hp_ports": ports["chosen"]}}
        chosen_design = design_from_dict(chosen_toml)
    refined = desktop.refine(raw, design, chosen_toml, chosen_design, space.chosen_options(chosen),
                             space.point(chosen), objective=objective, knobs=knobs, cap=cap,
                             measured_here=host is None, space=space, chosen=chosen, progress=progress)
    chosen_toml, chosen_design = refined.chosen_toml, refined.chosen_design
    step = family.step(space.chosen_options(chosen), design.board, design.clock_mhz, hp_ports=ports["chosen"],
                       **refined.step_options)
    reports, instead = dict(refined.reports), None
    if refined.instead is not None:
        taken = instead_choice(raw, design, space, chosen, step, refined.instead, objective=objective,
                               cache_dir=cache_dir, cap=cap, progress=progress)
        confirmed += taken["confirmed"]
        key = refined.instead["report"]
        reports[key] = {**taken.get("candidate", refined.instead["candidates"][0])["reported"], **taken["report"]}
        if taken["report"]["chosen"]:
            chosen, chosen_toml, chosen_design = taken["candidate"]["index"], taken["toml"], taken["design"]
            ports, step, shortlist = taken["hp_ports"], taken["step"], None
            instead = {"stages": taken["stages"], "hardware": taken["hardware"],
                       "resources": taken["candidate"]["resources"]}
            reports.update(forward_split=None, reuse=None)  # the per-call step's: the lists split no forward
    host_measured = None
    mine = next((entry for entry in shortlist or () if entry["index"] == chosen), None)
    if mine is not None:
        host_measured = {"seconds": mine["host_s"], "calls": mine["calls"], "model_s": step.host_s,
                         "source": step.host_source, "shortlist": shortlist}
    return {"space": space, "chosen": chosen, "front": front, "confirmed": confirmed, "step": step,
            "family": family, "chosen_toml": chosen_toml, "chosen_design": chosen_design, "objective": objective,
            "host_measured": host_measured, "hp_ports": ports, "passed_over": passed_over, "instead": instead,
            **reports}


def instead_choice(raw: Mapping[str, Any], design: DesignPoint, space: Space, chosen: int, step: Any,
                   instead: Mapping[str, Any], *, objective: str, cache_dir: Path, cap: float,
                   progress: Callable[[str], None]) -> dict[str, Any]:
    """Whether the explorer takes one of the steps a family priced as the board would run them at points of the
    space (:class:`codesign.design.families.Refined`, ``instead``: a TT design's call lists) over the chosen
    point's step, and which. Each candidate's HP ports come first: the fewest that fit its IPs plus more only
    where the step gets faster (the space's rule), or those ``[design] hp_ports`` asks for (a candidate whose
    IPs need more is passed over). On those ports the candidates are ranked by ``objective``'s figure, and the
    first that Yosys puts within the cap is taken where its step is faster (``time``) or takes less energy
    (``energy``) than the chosen point's, or whatever its figure where the chosen point's builds run that step
    too (its board runs it there; the chosen point is among the candidates, with its own builds where others
    were chosen for it, which Yosys has confirmed). Returns the Yosys entries it ran (``confirmed``) and the
    report (``chosen``; ``why``: the best candidate's reason where none was taken; ``tried``: each candidate
    passed over and why; ``instead_of``; where taken, its ports, figures and resources) and, where taken, the
    candidate, configuration, design, ports report, step and stages."""
    instead_of = {"index": chosen, "label": space.point(chosen)["label"], "total_s": step.total_s,
                  "energy_pj": step.energy_pj}
    figure = "total_s" if objective == "time" else "energy_pj"
    placed = [(candidate, _candidate_ports(raw, design, space, candidate)) for candidate in instead["candidates"]]
    placed.sort(key=lambda found: getattr(found[1]["step"], figure) if isinstance(found[1], dict) else math.inf)
    confirmed: list[dict[str, Any]] = []
    tried: list[dict[str, str]] = []
    for candidate, ported in placed:
        why, entry = (ported if isinstance(ported, str) else ""), None
        if not why and not instead["runs_at_chosen"] and not getattr(ported["step"], figure) < getattr(step, figure):
            why = "the chosen point's step is " + ("faster" if objective == "time" else "less energy")
        if not why:
            progress(f"Yosys: {candidate['label']} as call lists")
            fit = fit_design(ported["design"], cache_dir=cache_dir, limit_percent=100 * cap)
            entry = yosys_entry({**space.point(candidate["index"]), **candidate["resources"],
                                 "label": f"{candidate['label']} as call lists"}, fit)
            confirmed.append(entry)
            why = "" if fit.fits else "Yosys puts its builds over the cap: " + ", ".join(fit.over)
        if why:
            tried.append({"label": candidate["label"], "why": why})
            continue
        other, ports = ported["step"], ported["hp_ports"]["chosen"]
        progress(f"chose {candidate['label']} as call lists: {other.total_s * 1e3:.3f} ms a step")
        report = {"chosen": True, "why": None, "tried": tried, "instead_of": instead_of, "index": candidate["index"],
                  "hp_ports": ports, "total_s": other.total_s, "pe_s": other.pe_s, "memory_s": other.memory_s,
                  "host_s": other.host_s, "host_hidden_s": candidate["host_hidden_s"][ports],
                  "host_share": other.host_s / other.total_s,
                  "resources": {"model": candidate["resources"], "yosys": entry["yosys_total"]}}
        return {**ported, "stages": candidate["stages"][ports], "hardware": candidate["hardware"],
                "candidate": candidate, "confirmed": confirmed, "report": report}  # on the ports taken
    return {"confirmed": confirmed, "report": {"chosen": False, "why": tried[0]["why"] if tried else None,
                                               "tried": tried, "instead_of": instead_of}}


def _candidate_ports(raw: Mapping[str, Any], design: DesignPoint, space: Space,
                     candidate: Mapping[str, Any]) -> str | dict[str, Any]:
    """A candidate of :func:`instead_choice` on the HP ports it would take: its configuration, design, ports
    report and step there; or why it cannot take the ports ``[design] hp_ports`` asks for."""
    point = space.point(candidate["index"])
    fewest_first = {**raw, "design": {**raw.get("design", {}), **candidate["design"], "hp_ports": 0}}  # 0: fewest
    toml, least = design_of_point(fewest_first, design, {**point, **{name: {**point[name], **fields}
                                                                      for name, fields in candidate["pe"].items()}})
    fewest = least.ports_used
    asked = int(raw.get("design", {}).get("hp_ports") or 0)  # 0: not asked
    if asked and asked < fewest:
        return f"[design] hp_ports = {asked} asks for fewer than its IPs need ({fewest})"
    steps = {count: other for count, other in candidate["steps"].items() if count >= fewest}
    ports = asked or int(port_choice({count: np.array([other.total_s]) for count, other in steps.items()})[0])
    toml = {**toml, "design": {**toml["design"], "hp_ports": ports}}
    return {"toml": toml, "design": design_from_dict(toml), "step": candidate["steps"][ports], "hp_ports": {
        "chosen": ports, "asked": bool(asked), "fewest": fewest, "steps": {
            count: {"memory_s": priced.memory_s, "total_s": priced.total_s} for count, priced in steps.items()}}}


def yosys_entry(point: Mapping[str, Any], fit) -> dict[str, Any]:
    """A point as Yosys confirmed it (``fit``: :func:`codesign.design.fit.fit_design`'s report), as
    ``estimate_layer_resources.json`` and the summary list it."""
    return {"point": point, "yosys_total": fit.total, "fits": fit.fits, "over": fit.over, "per_ip": fit.per_ip}


def confirmed_choice(confirm: list[int], confirmed: list[dict[str, Any]], progress: Callable[[str], None]
                     ) -> tuple[int, dict[str, Any] | None]:
    """The point the explorer chooses once Yosys has confirmed ``confirm`` (the model's choice first, then the
    front's best; ``confirmed`` their fits): the model's choice where Yosys puts it within the cap, else the first
    confirmed point that is (the resource model is a few percent off a synthesis near the cap), else the model's
    choice still. Returns the index and, where the model's choice was passed over, its label and what Yosys put
    over the cap."""
    if confirmed[0]["fits"]:
        return confirm[0], None
    for index, entry in zip(confirm[1:], confirmed[1:]):
        if entry["fits"]:
            passed = {"label": confirmed[0]["point"]["label"], "over": list(confirmed[0]["over"])}
            progress(f"Yosys puts {passed['label']} over the cap ({', '.join(passed['over'])}): chose "
                     f"{entry['point']['label']}, the best point it confirms within it")
            return index, passed
    return confirm[0], None


def measured_choice(family: ExploreModel, space: Space, objective: str, progress: Callable[[str], None]
                    ) -> tuple[int, list[dict[str, Any]]]:
    """The chosen point with the host measured: the host's work depends on the builds as well as on the number of
    PE calls the host model counts (a PE of fewer lanes packs more words, for one), so for a ``time`` objective
    the :data:`SHORTLIST` fastest feasible points by the model have their host share measured side by side on
    this machine and the least measured whole step wins; for ``energy`` the chosen point's host is measured.
    Returns the chosen index and the shortlist (index, label, model and measured seconds)."""
    feasible = np.flatnonzero(space.feasible)
    if objective == "time":
        order = np.lexsort((space.resources["lut"][feasible], space.resources["dsp"][feasible],
                            space.total_s[feasible]))
        candidates = [int(i) for i in feasible[order[:SHORTLIST]]]
    else:
        candidates = [space.best(objective)]
    progress(f"measuring the host's share at {len(candidates)} point(s): "
             + "; ".join(space.point(i)["label"] for i in candidates))
    measured = family.measure_hosts([space.chosen_options(i) for i in candidates])
    shortlist = [{"index": i, "label": space.point(i)["label"], "model_total_s": float(space.total_s[i]),
                  "model_host_s": float(space.host_s[i]), "host_s": seconds, "calls": calls,
                  "measured_total_s": float(space.pe_s[i] + space.memory_s[i] + seconds)}
                 for i, (seconds, calls) in zip(candidates, measured)]
    if objective != "time":
        return candidates[0], shortlist
    return min(shortlist, key=lambda entry: entry["measured_total_s"])["index"], shortlist


def hp_port_choice(family: ExploreModel, options: Sequence[Option], design: DesignPoint, *, asked: bool) -> dict[str, Any]:
    """How many high-performance ports the chosen point's IPs get: the fewest whose SmartConnects fit them
    plus more only where the whole-step model says the step gets faster (:func:`codesign.design.explore.port_choice`);
    the ports ``[design] hp_ports`` asks for when ``asked``.

    The space prices every point by the same rule (:func:`codesign.design.explore.price`); this prices the
    chosen point's whole step at each count again, for the report.
    """
    board = design.board
    least = shell_ips_hp_ports(len(design.instances), board.hp_ports)
    steps = {ports: family.step(options, board, design.clock_mhz, hp_ports=ports)
             for ports in range(least, board.hp_ports + 1)}
    chosen = design.ports_used if asked else int(port_choice(
        {ports: np.array([step.total_s]) for ports, step in steps.items()})[0])
    return {"chosen": chosen, "asked": asked, "fewest": least,
            "steps": {ports: {"memory_s": step.memory_s, "total_s": step.total_s} for ports, step in steps.items()}}


# ---------------------------------------------------------------------------- reports


def _csv(rows: list[dict[str, Any]]) -> str:
    buffer = io.StringIO()
    if rows:
        writer = csv.DictWriter(buffer, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    return buffer.getvalue()


def _flat(point: Mapping[str, Any]) -> dict[str, Any]:
    out = {}
    for key, value in point.items():
        if isinstance(value, Mapping):
            out.update({f"{key}_{k}": v for k, v in value.items()})
        else:
            out[key] = value
    return out


def write_reports(result: Mapping[str, Any], out: Path, *, board: Board) -> list[Path]:
    """Every report of the module docstring, each written atomically into ``out``."""
    import tomli_w

    space: Space = result["space"]
    chosen, front, step = result["chosen"], result["front"], result["step"]
    points = [_flat(space.point(i)) for i in range(space.index.shape[0])]
    family: ExploreModel = result["family"]
    options = space.chosen_options(chosen)
    taken = result.get("instead")  # a step the family priced itself (a TT design's call lists), else the space's
    stages, hardware = (taken["stages"], taken["hardware"]) if taken else (family.stages(options),
                                                                           family.describe(options))
    written = [
        write_json_atomic(out / "estimate_network_performance.json", {
            "design": result["chosen_design"].name, "board": board.name, "objective": result["objective"],
            "chosen": space.point(chosen), "step": step.to_dict(), "searched": space.searched,
            "throughput": {**step.throughput(chosen_resources(result)["dsp"]), **REFERENCE_THROUGHPUT},
            "points": len(points), "feasible": int(space.feasible.sum()), "pareto": int(front.size),
            "host_measured": result.get("host_measured"), "other_route": result.get("other_route"),
            "hp_ports": result.get("hp_ports"), "reuse": result.get("reuse"),
            "passed_over": result.get("passed_over"),
            "forward_split": result.get("forward_split"), "list_step": result.get("list_step"),
            "mode_orders": result.get("mode_orders")}),
        write_json_atomic(out / "estimate_layer_cycles.json", {
            "hardware": hardware, "clock_mhz": step.clock_mhz,
            "stages": [{"cycles": s.cycles, "words_in": s.words_in, "words_out": s.words_out} for s in stages]}),
        write_json_atomic(out / "estimate_layer_resources.json", {
            "cap": space.cap, "budget": space.budget, "confirmed": [
                {"label": c["point"]["label"], "model": {k: c["point"][k] for k in RESOURCES},
                 "yosys": c["yosys_total"], "fits": c["fits"], "over": c["over"], "per_ip": c["per_ip"]}
                for c in result["confirmed"]]}),
        write_text_atomic(out / "explore_points.csv", _csv(points)),
        write_json_atomic(out / "pareto.json", [space.point(int(i)) for i in front]),
        write_text_atomic(out / "pareto.csv", _csv([_flat(space.point(int(i))) for i in front])),
        plot_pareto(space, chosen, front, out / "pareto.png", board=board,
                    lists=(chosen_resources(result)["dsp"], step.total_s) if taken else None),
        plot_roofline(space, chosen, out / "roofline.png", board=board, macs=step.macs, clock_mhz=step.clock_mhz),
        write_text_atomic(out / "chosen.toml", tomli_w.dumps(result["chosen_toml"])),
    ]
    return written


def plot_pareto(space: Space, chosen: int, front: np.ndarray, path: Path, *, board: Board,
                lists: tuple[float, float] | None = None) -> Path:
    """Step time against DSP slices of every point; ``lists``: the chosen point's DSP slices and step (seconds) as
    call lists, where the explorer took them over the point's per-call builds and step the space prices."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, ax = plt.subplots(figsize=(6.5, 4.2), constrained_layout=True)
    dsp, seconds, feasible = space.resources["dsp"], space.total_s * 1e3, space.feasible
    ax.scatter(dsp[~feasible], seconds[~feasible], s=8, c="lightgrey", label="over the cap")
    ax.scatter(dsp[feasible], seconds[feasible], s=8, c="tab:blue", alpha=0.5, label="fits")
    ax.scatter(dsp[front], seconds[front], s=22, c="tab:orange", label="Pareto front")
    ax.scatter([dsp[chosen]], [seconds[chosen]], s=80, marker="*", c="red",
               label="chosen" if lists is None else "chosen, per call")
    if lists is not None:
        ax.scatter([lists[0]], [lists[1] * 1e3], s=80, marker="P", c="darkred", label="chosen, as call lists")
    ax.axvline(space.cap * space.budget["dsp"], color="red", linestyle="--", linewidth=1,
               label=f"{space.cap:.0%} of {board.display_name}'s DSP")
    ax.set_xlabel("DSP slices (model)")
    ax.set_ylabel("whole training step (ms)")
    ax.set_yscale("log")
    ax.set_title(f"{get_family(space.family).title} accelerators on {board.display_name}: {space.searched}",
                 fontsize=9)
    ax.legend(fontsize=7)
    ax.grid(True, alpha=0.3)
    return write_figure_png(figure, path, dpi=110)


def plot_roofline(space: Space, chosen: int, path: Path, *, board: Board, macs: int, clock_mhz: float) -> Path:
    """Attained MACs/s of every feasible point against MACs per DDR byte, under the board's roofs: on the PE and
    memory time, and on the whole step with the host's time (where a host-bound step sits far under its roof)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from codesign.step.time import port_bytes_per_s

    figure, ax = plt.subplots(figsize=(6.5, 4.2), constrained_layout=True)
    feasible = np.flatnonzero(space.feasible)
    words = np.array([space.words(int(index)) for index in feasible])
    intensity = macs / (words * 4)
    attained = macs / (space.pe_s[feasible] + space.memory_s[feasible])
    whole = macs / (space.pe_s[feasible] + space.memory_s[feasible] + space.host_s[feasible])
    ax.scatter(intensity, attained, s=8, alpha=0.5, label="feasible points (PE + memory time)")
    ax.scatter(intensity, whole, s=8, alpha=0.5, marker="x", label="the same, host time included (the whole step)")
    position = int(np.flatnonzero(feasible == chosen)[0]) if chosen in feasible else None
    if position is not None:
        ax.scatter([intensity[position]], [attained[position]], s=80, marker="*", c="red", label="chosen")
        ax.scatter([intensity[position]], [whole[position]], s=80, marker="*", c="darkred",
                   label="chosen, with its host")
    peak_macs = space.cap * space.budget["dsp"] * clock_mhz * 1e6  # one MAC per DSP slice a cycle
    memory = min(2 * port_bytes_per_s(board), board.ddr_peak_gbps * 1e9)
    x = np.logspace(np.log10(intensity.min() / 2), np.log10(intensity.max() * 2), 100)
    ax.plot(x, np.minimum(peak_macs, memory * x), color="black", linewidth=1,
            label=f"roofs: {peak_macs / 1e9:.1f} GMAC/s, {memory / 1e9:.2f} GB/s")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("MACs per DDR byte")
    ax.set_ylabel("MACs per second")
    ax.set_title(f"Roofline of {board.display_name} ({space.cap:.0%} of its DSP at {clock_mhz:g} MHz)", fontsize=9)
    ax.legend(fontsize=7)
    ax.grid(True, alpha=0.3, which="both")
    return write_figure_png(figure, path, dpi=110)


def chosen_resources(result: Mapping[str, Any]) -> Mapping[str, float]:
    """The chosen design's resources by the model: its point's, or the builds of the step the explorer took
    instead (a TT point as call lists, with PE1's ``B`` order and the pairs chosen for them)."""
    taken = result.get("instead")
    return taken["resources"] if taken else result["space"].point(result["chosen"])


def summary(result: Mapping[str, Any]) -> str:
    """The chosen point, its step split and bound, and the front, as text for people."""
    space: Space = result["space"]
    step = result["step"]
    point, resources = space.point(result["chosen"]), chosen_resources(result)
    lines = [f"explored {space.index.shape[0]} points ({space.searched}): {int(space.feasible.sum())} fit "
             f"{space.cap:.0%} of the board, {result['front'].size} on the Pareto front",
             f"chosen ({result['objective']}): {point['label']}"
             + _as_lists_words(result.get("list_step")) + (
                 f" (Yosys put the model's choice, {result['passed_over']['label']}, over the cap: "
                 f"{', '.join(result['passed_over']['over'])})" if result.get("passed_over") else ""),
             f"  step {step.total_s * 1e3:.3f} ms = PE {step.pe_s * 1e3:.3f} + memory {step.memory_s * 1e3:.3f} + host "
             f"{step.host_s * 1e3:.3f} ms ({step.host_source}); bottleneck: {step.bottleneck}",
             f"  bounds: streams {step.bounds['streams_s'] * 1e3:.3f} ms, DDR peak {step.bounds['ddr_peak_s'] * 1e3:.3f} "
             f"ms, MACs {step.bounds['macs_s'] * 1e3:.3f} ms; energy {step.energy_pj / 1e6:.2f} uJ per step",
             f"  resources (model{', its builds as call lists' if result.get('instead') else ''}): "
             + ", ".join(f"{k} {resources[k]:g}" for k in RESOURCES)]
    rates = step.throughput(resources["dsp"])
    lines.insert(4, f"  throughput over the PEs' time: {rates['useful_gops_pe']:.3f} GOP/s done, "
                    f"{rates['equivalent_gops_pe']:.3f} GOP/s dense-equivalent, "
                    f"{rates['equivalent_ops_per_dsp_cycle']:.3f} ops per DSP and cycle "
                    f"({REFERENCE_THROUGHPUT['reference']}: {REFERENCE_THROUGHPUT['reference_ops_per_dsp_cycle']:.2f})")
    ports = result.get("hp_ports")
    if ports:
        why = ("as [design] hp_ports asks" if ports["asked"] else
               f"the fewest within {PORT_GAIN:.0%} of the best step; {ports['fewest']} fit the IPs' SmartConnects")
        lines.append(f"  data over {ports['chosen']} of the board's {max(ports['steps'])} high-performance ports "
                     f"({why}): " + ", ".join(f"{p} port{'s' if p > 1 else ''} memory {v['memory_s'] * 1e3:.3f}, "
                                              f"step {v['total_s'] * 1e3:.3f} ms" for p, v in ports["steps"].items()))
    split = result.get("forward_split")
    if split:
        why = "as [design] forward_split asks" if split["asked"] else "the least measured whole step"
        lines.append(f"  forward contractions {'shared between PE2 and PE1' if split['chosen'] else 'on PE2 alone'} "
                     f"({why}): " + "; ".join(
                         f"{'split' if name == 'true' else 'PE2 alone'} {v['total_s'] * 1e3:.3f} ms = PE "
                         f"{v['pe_s'] * 1e3:.3f} + memory {v['memory_s'] * 1e3:.3f} + host {v['host_s'] * 1e3:.3f} "
                         f"(measured)" for name, v in split["steps"].items()))
    reuse = result.get("reuse")
    if reuse:
        lines.append(f"  kept on chip (a bound, rounding on chip taken as free): {reuse['states_kept']} of "
                     f"{reuse['states']} intermediate states fit the {reuse['bram_36k_left']} BRAM36 left (largest "
                     f"{reuse['largest_state_bytes'] / 1024:.0f} KiB); words per step {reuse['words'] / 1e6:.2f} M -> "
                     f"{reuse['words_kept'] / 1e6:.2f} M, PE {reuse['pe_s'] * 1e3:.3f} -> "
                     f"{reuse['pe_kept_s'] * 1e3:.3f} ms")
    measured = result.get("host_measured")
    if measured:
        lines.append(f"  host measured at this point: {measured['seconds'] * 1e3:.3f} ms for {measured['calls']} PE "
                     f"calls (the model's {measured['model_s'] * 1e3:.3f} ms)")
        if len(measured["shortlist"]) > 1:
            lines.append("  the model's fastest points, host measured: " + "; ".join(
                f"{entry['label']} {entry['measured_total_s'] * 1e3:.3f} ms (model {entry['model_total_s'] * 1e3:.3f})"
                for entry in measured["shortlist"]))
    other = result.get("other_route")
    if other:
        notes = [f"dW formed on {PE_NAMES[other['outer_pe']]}"] if other["core_grad_route"] == "dense" else []
        notes.append("the gradients' last bits differ")
        lines.append(f"  on the {other['core_grad_route']} core-gradient route ({'; '.join(notes)}): "
                     f"{other['total_s'] * 1e3:.3f} ms = PE {other['pe_s'] * 1e3:.3f} + memory "
                     f"{other['memory_s'] * 1e3:.3f} + host {other['host_s'] * 1e3:.3f} ms at {other['label']}")
    lines += _list_step_lines(result.get("list_step"))
    lines += _mode_order_lines(result.get("mode_orders"))
    for confirmed in result["confirmed"]:
        lines.append(f"  Yosys {confirmed['point']['label']}: " + ", ".join(
            f"{k} {confirmed['yosys_total'][k]:g}" for k in RESOURCES) + (" fits" if confirmed["fits"] else
                                                                           f" over: {confirmed['over']}"))
    return "\n".join(lines)


def _as_lists_words(found: Mapping[str, Any] | None) -> str:
    """The summary's words on a chosen point taken as call lists: the space's own choice it replaced, per call."""
    if not found or not found.get("chosen"):
        return ""
    over = found["instead_of"]
    replaced = "" if over["index"] == found["index"] else f"over {over['label']}, "
    return f", its step as call lists ({replaced}per call {over['total_s'] * 1e3:.3f} ms)"


def _list_step_lines(found: Mapping[str, Any] | None) -> list[str]:
    """The summary's line on the step as call lists (a TT design under tracked scales), in ms."""
    if not found:
        return []
    if not found["priced"]:
        return [f"  the step as call lists: not priced ({found['why']})"]
    work, ms = found["host_work"], {key: found[key] * 1e3 for key in ("total_s", "pe_s", "memory_s", "host_s",
                                                                        "per_call_total_s", "macs_s")}
    priced = len(found.get("points", ()))
    where = "the chosen point" if found["chosen"] else f"{found['label']}, " + (
        f"the fastest as lists of the {priced} best points per call whose builds run them" if priced > 1 else
        "the best point whose builds run lists") + (f" (not chosen: {found['why']})" if found.get("why") else "")
    passed = found.get("tried", [])[0 if found["chosen"] else 1:]  # the first not chosen is the why above
    layers = ", ".join(f"{s * 1e3:.3f}" for s in found["layers_s"])
    return [f"  the step as call lists at {where} (host left with the loss, bias, ReLU and Adam): "
            f"{ms['total_s']:.3f} ms = PE and DMA {ms['pe_s']:.3f} + memory {ms['memory_s']:.3f} + host "
            f"{ms['host_s']:.3f} (measured, {found['host_share']:.0%}), against {ms['per_call_total_s']:.3f} ms per "
            f"call; layers {layers} ms; MAC bound {ms['macs_s']:.3f} ms; per step {work['lists']} lists, "
            f"{work['calls']} calls, {work['flushed_bytes'] / 1024:.1f} KiB flushed, "
            f"{work['read_bytes'] / 1024:.1f} KiB read{_builds_words(found.get('builds'))}{_others_words(found)}"
            + ("; passed over: " + "; ".join(f"{entry['label']} ({entry['why']})" for entry in passed)
               if passed else "")]


def _others_words(found: Mapping[str, Any]) -> str:
    """The other points the list step was priced at (:func:`codesign.design.families.tt._list_step`), in ms."""
    others = [entry for entry in found.get("points", ()) if entry["label"] != found["label"]]
    return "; as lists also " + ", ".join(f"{entry['label']} {entry['total_s'] * 1e3:.3f} ms"
                                         for entry in others) if others else ""


def _mode_order_lines(layers: Sequence[Mapping[str, Any]] | None) -> list[str]:
    """The summary's line on the TT layers' mode orders: where another order of the same modes takes fewer step
    products (another network: its accuracy is the user's run to measure)."""
    if not layers:
        return []

    def order(found: Mapping[str, Any]) -> str:
        return f"{tuple(found['in_modes'])} -> {tuple(found['out_modes'])}"

    parts = [f"layer {index} {order(layer['ours'])} {layer['ours']['products'] / 1e6:.1f} M" + (
        f" (not ranked: {layer['why']})" if layer["fewest"] is None else
        " (the fewest)" if layer["times_fewer"] <= 1 else
        f", fewest {order(layer['fewest'])} {layer['fewest']['products'] / 1e6:.1f} M ({layer['times_fewer']:.1f}x "
        f"fewer; {layer['fewest']['parameters']:,} core values against {layer['ours']['parameters']:,})")
        for index, layer in enumerate(layers)]
    return ["  step products by mode order (another order is another network: set techniques.tt.in_modes / "
            "out_modes and retrain to compare): " + "; ".join(parts)]


def _builds_words(choice: Mapping[str, Any] | None) -> str:
    """PE1's ``B`` order and the PEs' pairs the list step chose where several builds were priced
    (:func:`codesign.design.families.tt_list_step.builds_choice`), for the summary."""
    if not choice or not choice.get("builds"):
        return ""
    builds, chosen = choice["builds"], choice["chosen"]
    mine, given = (next((build for build in builds if all(build[name] == fields[name] for name in fields)), None)
                   for fields in (chosen, choice["given"]))
    cost = ", ".join(f"{round(mine['extra'][key], 1):+g} {key}" for key in RESOURCES if round(mine["extra"][key], 1))
    with_ = {name: "with" if chosen[name] else "without" for name in ("row_pairs", "j_pairs")}
    return (f"; PE1 takes B {'j' if chosen['b_order'] == 'jl' else 'l'} outer, PE2 {with_['row_pairs']} row pairs, "
            f"PE1 {with_['j_pairs']} j pairs (PE and DMA {1e3 * mine['pe_dma_s']:.3f} ms at {cost or 'no cost'}"
            + ("" if given is None else f", the point's builds {1e3 * given['pe_dma_s']:.3f} ms")
            + f"; {sum(build['fits'] for build in builds)} of {len(builds)} builds priced fit the cap)")


__all__ = ["ExploreError", "cost_task", "design_of_point", "distinct_builds", "explore_design", "hp_port_choice",
           "measured_choice", "summary", "write_reports"]
