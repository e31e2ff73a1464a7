"""Paper reproductions: ``run(out_dir, *, seeds, smoke) -> results dict`` and ``headline(payload) -> str`` each.

``smoke=True`` shrinks every budget to seconds for the test suite; the full
runs are ``codesign reproduce NAME`` / ``make reproduce``. ``headline`` reads
a written ``results.json`` back into the one figure of the reproduction's row
of ``results/README.md`` (:mod:`codesign.reproduce.readme`).

Shared by every reproduction, one job per module: the one path from runs to
cached sweep tasks (:mod:`~codesign.reproduce.common`), the fixed seeds and
splits (:mod:`~codesign.reproduce.protocol`), arms and dotted settings
(:mod:`~codesign.reproduce.arms`), the choice on the validation split
(:mod:`~codesign.reproduce.tuning`), the shared study
(:mod:`~codesign.reproduce.study`), charged cost, paired summaries, statistics,
texts and the report (:mod:`~codesign.reproduce.cost`,
:mod:`~codesign.reproduce.summary`, :mod:`~codesign.reproduce.stats`,
:mod:`~codesign.reproduce.texts`, :mod:`~codesign.reproduce.report`), the
machine record (:mod:`~codesign.reproduce.machine`) and the rerun check
(:mod:`~codesign.reproduce.check`). A reproduction too large for one module
keeps its parts beside it (``abvs_*``, ``tt_*``).
"""

from __future__ import annotations

import importlib
import json
from pathlib import Path

from codesign.io import outdir
from codesign.io.outdir import OUTPUT_MARKER, read_output_marker

COMMAND = "reproduce"  # the command named in a report folder's marker
REPRODUCTIONS = ("smd", "slu", "psg", "e2train", "cpt", "abvs", "compressed", "csb-utilisation", "tt", "tt-fashion")


def reproduction(name: str):
    if name not in REPRODUCTIONS:
        raise ValueError(f"unknown reproduction {name!r}; expected one of {', '.join(REPRODUCTIONS)}")
    return importlib.import_module(f"codesign.reproduce.{name.replace('-', '_')}")  # module names use _


def is_report_dir(path: Path) -> bool:
    """A reproduction's report folder: marked by `codesign reproduce`, or (written before markers) one holding
    a reproduction's results.json."""
    path = Path(path)
    if read_output_marker(path) == COMMAND:
        return True
    if (path / OUTPUT_MARKER).exists():
        return False
    try:
        body = json.loads((path / "results.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(body, dict) and body.get("name") in REPRODUCTIONS and "all_targets_met" in body


def check_report_dir(path: Path) -> Path:
    """The output-folder rule (:mod:`codesign.io.outdir`) for a report folder, without writing anything."""
    return outdir.check_output_dir(Path(path), COMMAND, is_own=is_report_dir)


def check_output_dir(path: Path) -> Path:
    """Apply the output-folder rule to a report folder, then create it and mark it (before any training)."""
    return outdir.claim_output_dir(Path(path), COMMAND, is_own=is_report_dir)
