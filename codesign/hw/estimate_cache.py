"""Yosys estimates of one (PE, spec, family) from a cache keyed by the RTL's content, or from reports the repository ships.

A synthesis of a large PE takes minutes; its result depends only on the
PE's Verilog, the spec's parameters, the family and the Yosys flow. The
cache key (:func:`cache_key`) hashes the Verilog sources (names and bytes),
the PE's name, the family and the spec, so an RTL change is never answered
from a stale entry.

:func:`cached_report` looks in three places, in order:

1. ``cache_dir/<pe>-<family>-<key16>/<pe>_cost.json``: an earlier run on this
   machine (``codesign design``, ``build`` and ``demo`` fill it);
2. ``rtl/yosys-reports/<pe>-<family>-<key16>.json`` (:data:`SHIPPED_DIR`): reports
   shipped with the repository, each labelled with the Yosys version that made
   it, the full cache key and the SHA-256 of the RTL. Both hashes are checked
   against the RTL here before a report is used; a report whose hashes do not
   match is never used (Yosys runs instead, and the reason is given);
3. Yosys itself (:func:`codesign.hw.estimate.estimate`), whose report is
   labelled the same way and stored in ``cache_dir``.

:func:`ship` copies labelled cache entries into :data:`SHIPPED_DIR`
(``codesign demo --full --ship-reports``, i.e. ``make yosys-reports``).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from codesign.hw.constants_gen import verilog_include_dir
from codesign.hw.estimate import estimate
from codesign.io.jsonfile import load_json
from codesign.hw.protocol import ProcessingElement
from codesign.io.reports import write_json_atomic
from codesign.resources import data_dir

SHIPPED_DIR = data_dir("rtl") / "yosys-reports"
LABEL_FIELDS = ("cache_key", "rtl_sha256")


INCLUDE_LINE = re.compile(rb'^\s*`include\s+"([^"]+)"', re.M)


def hashed_sources(pe: ProcessingElement) -> list[Path]:
    """The PE's Verilog sources (:meth:`rtl_sources` order), then the files they include from the shared
    include directory (name order): everything Yosys reads. A PE that includes nothing hashes as before."""
    sources = pe.rtl_sources()
    included = sorted({name.decode() for path in sources for name in INCLUDE_LINE.findall(path.read_bytes())})
    return [*sources, *(verilog_include_dir() / name for name in included if (verilog_include_dir() / name).is_file())]


def _digest(pe: ProcessingElement):
    digest = hashlib.sha256()
    for path in hashed_sources(pe):
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    return digest


def rtl_sha256(pe: ProcessingElement) -> str:
    """SHA-256 over the PE's Verilog sources and includes (file names and contents, :func:`hashed_sources`)."""
    return _digest(pe).hexdigest()


def cache_key(pe: ProcessingElement, spec, family: str) -> str:
    """The full hex key of one (PE, spec, family) estimate: the RTL sources, the PE's name, the family, the spec."""
    digest = _digest(pe)
    digest.update(json.dumps([pe.name, family, spec.to_dict()], sort_keys=True).encode())
    return digest.hexdigest()


def entry_name(pe: ProcessingElement, family: str, key: str) -> str:
    return f"{pe.name}-{family}-{key[:16]}"


@dataclass(frozen=True)
class CachedReport:
    """A one-entry ``<pe>_cost.json`` report and where it came from: ``cache``, ``shipped`` or ``yosys`` (run now)."""

    report: dict
    origin: str
    path: Path
    note: str = ""

    @property
    def entry(self) -> dict:
        return self.report["entries"][0]

    @property
    def yosys_version(self) -> str:
        return self.report["tool"]["version"]


class ShippedReportMismatch(ValueError):
    """A shipped report's recorded hashes differ from the RTL's (the report is not used)."""


def check_label(report: dict, path: Path, *, key: str, rtl: str) -> None:
    """Raise :class:`ShippedReportMismatch` unless ``report`` records exactly ``key`` and ``rtl``."""
    recorded = {name: report.get(name) for name in LABEL_FIELDS}
    expected = {"cache_key": key, "rtl_sha256": rtl}
    wrong = [name for name in LABEL_FIELDS if recorded[name] != expected[name]]
    if wrong:
        raise ShippedReportMismatch(
            f"{path}: recorded {', '.join(f'{n}={recorded[n]!r}' for n in wrong)} but the RTL here gives "
            f"{', '.join(f'{n}={expected[n]!r}' for n in wrong)}")


def load_report(path: Path) -> dict:
    return load_json(path, what="Yosys estimate report (delete it to re-run Yosys)",
                     required={"entries.0.counts": dict, "tool.version": str})


def lookup(pe: ProcessingElement, spec, family: str, cache_dir: Path, *,
           shipped_dir: Path | None = SHIPPED_DIR) -> tuple[CachedReport | None, str]:
    """The report of ``spec`` on ``family`` from ``cache_dir`` or ``shipped_dir`` (never Yosys), or None and why."""
    key, rtl = cache_key(pe, spec, family), rtl_sha256(pe)
    name = entry_name(pe, family, key)
    local = Path(cache_dir) / name / f"{pe.name}_cost.json"
    if local.is_file():
        report = load_report(local)
        if all(field in report for field in LABEL_FIELDS):  # entries written before labels carry only the key prefix
            check_label(report, local, key=key, rtl=rtl)
        return CachedReport(report, "cache", local), ""
    if shipped_dir is None:
        return None, ""
    shipped = Path(shipped_dir) / f"{name}.json"
    if not shipped.is_file():
        return None, f"no shipped report for this RTL and spec ({shipped.name})"
    report = load_report(shipped)
    try:
        check_label(report, shipped, key=key, rtl=rtl)
    except ShippedReportMismatch as mismatch:
        return None, f"shipped report not used ({mismatch})"
    return CachedReport(report, "shipped", shipped), ""


def cached_report(pe: ProcessingElement, spec, family: str, cache_dir: Path, *, shipped_dir: Path | None = SHIPPED_DIR,
                  progress: bool = False) -> CachedReport:
    """The Yosys report of ``spec`` on ``family``: from ``cache_dir``, else a matching shipped report, else Yosys."""
    found, why = lookup(pe, spec, family, cache_dir, shipped_dir=shipped_dir)
    if found is not None:
        return found
    key = cache_key(pe, spec, family)
    local = Path(cache_dir) / entry_name(pe, family, key) / f"{pe.name}_cost.json"
    estimate(pe, [spec], families=(family,), out_dir=local.parent, plot=False, progress=progress)
    report = {**load_report(local), "cache_key": key, "rtl_sha256": rtl_sha256(pe)}
    write_json_atomic(local, report)
    return CachedReport(report, "yosys", local, f"{why}; ran Yosys" if why else "")


def merged_report(pe: ProcessingElement, parts: list[CachedReport]) -> dict:
    """One ``<pe>_cost.json`` report of several one-entry reports (as :func:`estimate` writes for many specs).

    Every entry keeps where it came from (``origin``, the Yosys version, the
    report file); ``tool.version`` lists every Yosys version involved.
    """
    if not parts:
        raise ValueError("no reports to merge")
    entries = [{**part.entry, "origin": part.origin, "yosys_version": part.yosys_version, "report": str(part.path)}
               for part in parts]
    versions = sorted({part.yosys_version for part in parts})
    return {**parts[0].report, "pe": pe.name, "top": pe.rtl_top,
            "tool": {**parts[0].report["tool"], "version": " + ".join(versions)}, "entries": entries,
            "cache_key": None, "rtl_sha256": rtl_sha256(pe)}


def ship(cache_dir: Path, shipped_dir: Path = SHIPPED_DIR, *, current: Mapping[str, str] | None = None) -> list[Path]:
    """Copy every labelled entry of ``cache_dir`` not shipped yet to ``shipped_dir/<entry>.json``; the copies
    written.

    ``current`` maps PE names to their RTL's :func:`rtl_sha256`: given, only entries of that RTL are copied (the
    cache keeps entries of older RTL, which a repository must not carry)."""
    written = []
    for path in sorted(Path(cache_dir).glob("*/*_cost.json")):
        report = load_report(path)
        if not all(isinstance(report.get(field), str) for field in LABEL_FIELDS):
            continue  # an entry from before reports were labelled: re-run it to ship it
        if current is not None and current.get(report.get("pe")) != report["rtl_sha256"]:
            continue
        target = Path(shipped_dir) / f"{path.parent.name}.json"
        if target.is_file() and load_report(target).get("cache_key") == report["cache_key"]:
            continue  # shipped already: the same synthesis, a rerun would only change its wall time
        written.append(write_json_atomic(target, report))
    return written
