"""The energy side of the ``abvs`` reproduction: the FP-MAC cost report, Eq. (2), and the delay model's sensitivity.

Energy: the target compares Eq. (2) energies — the FP-MAC energy summed over
all MACs, the ledger's ``compute_pj`` (every epoch does the same MACs, so this
is ``sum_i T_epoch * P(i) * N_epoch(i)``) — of ABVS and of the fixed-``L`` arm,
per seed, with a 95 % bootstrap interval. The per-MAC energy (pJ) scales the
supply with the FP-MAC's critical-path delay, weighted per cell type
(:data:`codesign.energy.abvs_cost.PER_CELL_DELAYS`); the report gives the
saving under the earlier uniform model (a DSP counts like a LUT) and with each
cell type's delay halved and increased by half.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from codesign.energy.abvs_cost import (ANCHOR_FB, PATH_CATEGORIES, PER_CELL_DELAYS, UNIFORM_DELAYS, DelayModel,
                                       fpmac_energy_model)
from codesign.reproduce.stats import bootstrap_interval

FAMILY = "xc7"  # the FPGA family whose Yosys report prices the FP-MAC
DELAY_FACTORS = (0.5, 1.5)  # each cell type's delay x these, one at a time (sensitivity)


def _portable(path: Path) -> str:
    """``path`` relative to the working directory when inside it (``results/abvs/fpmac_cost/fpmac_cost.json`` from
    the repository), else absolute: the cost report's name goes into every run's configuration and the committed
    report, which must not name the machine's folders. Training tasks resolve it from the same working directory
    (a local Dask cluster's workers inherit it)."""
    import os

    path = Path(path).resolve()
    cwd = Path.cwd().resolve()
    return os.path.relpath(path, cwd) if cwd in path.parents else str(path)


def ensure_cost_report(cost_dir: Path, fbs: set[int], *, allow_synthesis: bool, progress: bool) -> dict[str, Any]:
    """A ``fpmac_cost.json`` covering ``fbs`` (xc7): reused if valid, current and complete, else synthesised.

    Returns ``{"path": str ('' = fallback table), "status": ..., "seconds": ...}``.
    """
    from codesign.hw.yosys import YosysError
    from codesign.pe.fpmac.estimate import JSON_NAME, FpmacCostError, estimate_fpmac, load_fpmac_cost

    started = time.perf_counter()
    path = Path(cost_dir) / JSON_NAME
    have: set[int] = set()
    if path.is_file():
        try:
            cost = load_fpmac_cost(path)
            if cost.sources_match():
                have = {e.max_fb for e in cost.series(FAMILY, exp_bits=8, rounding="nearest_even")}
                if fbs <= have:
                    return {"path": _portable(path), "status": "reused (RTL unchanged, all FBs present)",
                            "fbs": sorted(have), "seconds": time.perf_counter() - started}
        except (FpmacCostError, KeyError, FileNotFoundError):
            have = set()
    if not allow_synthesis:
        return {"path": "", "status": "fallback table (smoke run: no synthesis, no usable report)", "fbs": [],
                "seconds": time.perf_counter() - started}
    wanted = sorted(fbs | have)
    try:
        estimate_fpmac(families=(FAMILY,), max_fb_values=wanted, out_dir=Path(cost_dir), workers=2,
                       progress=progress)
    except (YosysError, FileNotFoundError) as error:
        return {"path": "", "status": f"fallback table (synthesis unavailable: {error})", "fbs": [],
                "seconds": time.perf_counter() - started}
    return {"path": _portable(path), "status": f"synthesised now ({len(wanted)} Yosys runs, xc7)", "fbs": wanted,
            "seconds": time.perf_counter() - started}


def eq2_ratio(epochs_per_fb: dict[str, int], reference_fb: int, energy) -> float:
    """Eq. (2) energy of an FB trace over that of training every epoch at ``reference_fb`` (same MACs per epoch)."""
    epochs = sum(epochs_per_fb.values())
    return sum(n * energy(int(fb)) for fb, n in epochs_per_fb.items()) / (epochs * energy(reference_fb))


def delay_variants(family: str = FAMILY) -> dict[str, DelayModel]:
    """The delay models of the sensitivity study: uniform, the per-cell model, and each cell type x 0.5 and x 1.5."""
    per_cell = PER_CELL_DELAYS[family]
    variants = {"uniform (a DSP counts like a LUT)": UNIFORM_DELAYS, "per-cell": per_cell}
    for category in PATH_CATEGORIES:
        if category == "other":
            continue
        for factor in DELAY_FACTORS:
            variants[f"per-cell, {category} x{factor:g}"] = per_cell.scaled(category, factor)
    return variants


def delay_sensitivity(epochs_per_fb: list[dict[str, int]], *, fb_max: int, cost_report: str) -> dict[str, Any]:
    """Eq. (2) saving of ABVS vs fixed ``fb_max`` under each delay model (per seed, from the FB traces), with CIs."""
    out = {}
    used = sorted({int(fb) for trace in epochs_per_fb for fb in trace} | {fb_max})
    for name, delay in delay_variants().items():
        model = fpmac_energy_model(cost_report or None, timing_fb=fb_max, family=FAMILY, delay=delay)
        entry: dict[str, Any] = {"delay_ns": delay.describe()["ns"]}
        try:
            savings = [1 - eq2_ratio(trace, fb_max, model) for trace in epochs_per_fb]
            entry |= {"per_seed": savings, "saving": bootstrap_interval(savings).as_dict(),
                      "supply_v": {str(fb): model.supply_v(fb) for fb in used}}
        except ValueError as error:  # a narrower FB's path is slower than FB_max's even at max_supply_v
            entry |= {"per_seed": None, "saving": None, "infeasible": str(error)}
        out[name] = entry
    return out


def other_sensitivity(epochs_per_fb: list[dict[str, int]], *, fb_max: int, cost_report: str) -> dict[str, Any]:
    """Eq. (2) saving under other energy-model choices: timing FB, area metric, no voltage scaling."""
    variants = {}
    for timing in sorted({fb_max, ANCHOR_FB}):
        for metric in ("lut", "weighted"):
            model = fpmac_energy_model(cost_report or None, timing_fb=timing, family=FAMILY, area_metric=metric)
            variants[f"timing_fb={timing}, area={metric}"] = [1 - eq2_ratio(t, fb_max, model) for t in epochs_per_fb]
    area = fpmac_energy_model(cost_report or None, timing_fb=fb_max, family=FAMILY).area  # energy ∝ area at V0
    variants["bit-width scaling only (every FB at V0), area=lut"] = [1 - eq2_ratio(t, fb_max, area)
                                                                     for t in epochs_per_fb]
    return {name: {"per_seed": values, "saving": bootstrap_interval(values).as_dict()}
            for name, values in variants.items()}
