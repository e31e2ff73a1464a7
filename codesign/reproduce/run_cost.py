"""What a reproduction costs to run, from its cached training runs: CPU hours, and hours on two idle cores.

Why from the cache: a reproduction resumes across sessions (every finished
run is kept under ``<report dir>/tasks/``), often on a shared machine, so the
wall time of the invocation that writes the report says little. Each cached
run records the wall and CPU seconds it took where it ran
(:func:`codesign.sweep.task_costs`). Every training run is single-threaded
(:data:`~codesign.reproduce.machine.TRAINING_THREADS`), so the runs' CPU
seconds summed, divided by two, is the wall time the training takes on two
idle cores with two workers; the runs' wall seconds summed show how much a
shared machine stretched them. Work done outside the runs (the report, any
model evaluated in the calling process) is not counted: it is seconds
beside the runs' minutes to hours.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

CORES = 2  # the machine the cost is stated for: the project's reference desktop and CI runner


def run_cost(out_dir: Path, *, model_s: float = 0.0) -> dict[str, Any]:
    """The cost of every cached run of the reproduction whose report folder is ``out_dir``, as ``results.json``
    records it: runs, runs with a recorded cost, and their CPU and wall seconds summed; ``model_s`` is the wall
    time of a reproduction that trains nothing and models in its own process (``csb-utilisation``)."""
    from codesign.sweep import task_costs

    return {**task_costs(Path(out_dir) / "tasks").to_dict(), "cores": CORES, "model_s": float(model_s)}


def _hours(seconds: float) -> str:
    """Seconds as a person reads a duration: s under 1.5 min, min under 1.5 h, else h."""
    if seconds < 90:
        return f"{seconds:.0f} s"
    return f"{seconds / 60:.0f} min" if seconds < 5400 else f"{seconds / 3600:.1f} h"


def cost_text(cost: Mapping[str, Any] | None) -> str:
    """One sentence on a recorded :func:`run_cost`; a report without one (written before costs were recorded)
    says so."""
    if not cost:
        return "not recorded: the report predates cost records"
    if not cost["runs"]:
        return f"no training runs; {cost.get('model_s', 0.0):.0f} s of modelling in one process"
    runs, recorded, cores = int(cost["runs"]), int(cost["recorded"]), int(cost["cores"])
    if not recorded:
        return f"not recorded: its {runs} training runs were cached before runs recorded their cost"
    text = (f"{_hours(cost['cpu_s'])} CPU in {recorded} single-threaded training runs, about "
            f"{_hours(cost['cpu_s'] / cores)} on {cores} idle cores ({_hours(cost['wall_s'])} of run wall time "
            "where they ran)")
    if recorded < runs:
        text += f"; {runs - recorded} more runs were cached before costs were recorded and are not counted"
    return text


def cost_cell(cost: Mapping[str, Any] | None) -> str:
    """The README's short form: hours on two idle cores, or why there is none."""
    if not cost:
        return "not recorded"
    if not cost["runs"]:
        return f"{cost.get('model_s', 0.0):.0f} s, no training"
    if not cost["recorded"]:
        return "not recorded"
    partial = " (partial)" if int(cost["recorded"]) < int(cost["runs"]) else ""
    return f"{_hours(cost['cpu_s'] / int(cost['cores']))}{partial}"
