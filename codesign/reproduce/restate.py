"""``codesign reproduce restate``: rewrite the committed reports from their recorded runs, without training.

Why: the seed as the unit of replication, margins relative to the baseline's
error, every test pass charged and labels taken from what ran
(:mod:`codesign.reproduce.replication`) are all read from the per-run rows a
report already records; training again would spend hours to reproduce
numbers the reports hold. For every reproduction with a committed
``OUT/NAME/results.json`` (but those whose own analysis does it already,
:data:`~codesign.reproduce.replication.OWN_ANALYSIS`) this sets its ``replication`` section (and, where
its module has one, its README label from what ran), puts the same section
into its ``table.md`` between markers, then regenerates the README's table
(:mod:`codesign.reproduce.readme`). Every write is atomic; a file that would
not change is not written, so a second run changes nothing.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from codesign.io.jsonfile import read_text_file
from codesign.io.reports import write_json_atomic, write_text_atomic
from codesign.reproduce import REPRODUCTIONS
from codesign.reproduce.readme import committed, current_section, update_readme
from codesign.reproduce.replication import OWN_ANALYSIS, module_of, replication, section, with_section


def restated(payload: Mapping[str, Any], module: Any) -> dict[str, Any]:
    """``payload`` with its README label from what ran (the module's ``readme_label``, when it has one) and its
    ``replication`` section computed from its recorded runs; as JSON has it (tuples as lists)."""
    out = dict(payload)
    label = getattr(module, "readme_label", None)
    if label is not None and isinstance(out.get("readme"), dict):
        out["readme"] = {**out["readme"], "reproduction": label(payload)}
    out["replication"] = replication(out, module)
    return json.loads(json.dumps(out))


def checked_restatement(results_dir: Path, name: str) -> tuple[dict[str, Any], dict[str, Any], str]:
    """The committed report of ``name``, its restatement and its ``table.md``; a report that cannot be restated (a
    smoke run, a missing field, no table) is refused with its path."""
    path = Path(results_dir) / name / "results.json"
    payload = committed(results_dir, name)  # refuses a smoke run and a report without its README entry
    if payload is None:
        raise ValueError(f"{path}: no committed report of {name} to restate")
    table = read_text_file(path.with_name("table.md"), what=f"table of `codesign reproduce {name}`")
    try:
        return payload, restated(payload, module_of(name)), table
    except (KeyError, IndexError, TypeError, ValueError) as error:
        raise ValueError(f"{path}: cannot restate {name} from its recorded runs ({type(error).__name__}: "
                         f"{error})") from None


def restate_report(results_dir: Path, name: str) -> list[str]:
    """Restate ``results_dir/name``: its ``results.json`` and ``table.md``; returns the files it rewrote."""
    folder = Path(results_dir) / name
    payload, new, table = checked_restatement(results_dir, name)
    table_path = folder / "table.md"
    new_table = with_section(table, section(new["replication"]))
    written = []
    if new != payload:
        write_json_atomic(folder / "results.json", new)
        written.append(str(folder / "results.json"))
    if new_table != table:
        write_text_atomic(table_path, new_table)
        written.append(str(table_path))
    return written


def restate(results_dir: Path, readme: Path | None = None) -> list[str]:
    """Restate every committed report under ``results_dir`` (in :data:`REPRODUCTIONS` order), then the README's
    table when ``readme`` is given; returns the files rewritten. Every report is computed before any is written."""
    results_dir = Path(results_dir)
    names = [name for name in REPRODUCTIONS if (results_dir / name / "results.json").is_file()
             and name not in OWN_ANALYSIS]
    if not names:
        raise ValueError(f"--out {results_dir}: holds no reproduction's report (OUT/NAME/results.json); nothing "
                         "to restate")
    for name in names:  # every report restates before any file is written: a failure leaves all as they were
        checked_restatement(results_dir, name)
    if readme is not None and Path(readme).exists():
        current_section(Path(readme))  # a page without its markers is refused before anything is written
    written = [path for name in names for path in restate_report(results_dir, name)]
    if readme is not None and update_readme(Path(readme), results_dir):
        written.append(str(readme))
    return written
