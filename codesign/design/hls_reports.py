"""Vitis HLS synthesis reports read back into the fit, beside Yosys, where vitis_hls has run.

``csynth_design`` leaves ``<project>/<solution>/syn/report/csynth.xml`` (and
``<top>_csynth.xml``) under each IP's HLS project. Its documented structure,
the one hls4ml's reader walks (fastmachinelearning/hls4ml
``hls4ml/report/vivado_report.py``, ``parse_vivado_report``):
``UserAssignments`` (``Part``, ``TopModelName``, ``TargetClockPeriod``),
``PerformanceEstimates/SummaryOfTimingAnalysis/EstimatedClockPeriod`` and
``AreaEstimates/Resources`` (``BRAM_18K``, ``DSP`` -- ``DSP48E`` in older
Vivado HLS --, ``FF``, ``LUT``, ``URAM``). Those numbers are the HLS tool's own
estimate after C synthesis, before Vivado places anything: a second opinion
beside Yosys, reported as such and never mixed into the Yosys totals the fit
verdict is taken on. Nothing here runs a tool; where no report exists the fit
says nothing about HLS.
"""

from __future__ import annotations

import dataclasses
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

from codesign.design.fit import FitReport, write_fit
from codesign.hw.flow import SOLUTION_NAME
from codesign.shell.ip import HLS_PROJECT_NAME

REPORT_DIR = f"{HLS_PROJECT_NAME}/{SOLUTION_NAME}/syn/report"
RESOURCE_TAGS = {"lut": ("LUT",), "ff": ("FF",), "dsp": ("DSP", "DSP48E"), "bram_18k": ("BRAM_18K",),
                 "uram": ("URAM",)}


class HlsReportError(ValueError):
    """A csynth.xml that lacks what the documented structure promises (the message names the file and field)."""


@dataclass(frozen=True)
class HlsSynthesis:
    """One C synthesis as Vitis HLS reports it: top, part, target and estimated clock (ns), resources."""

    top: str
    part: str
    target_clock_ns: float
    estimated_clock_ns: float
    resources: dict[str, float]
    report: Path

    @property
    def meets_clock(self) -> bool:
        return self.estimated_clock_ns <= self.target_clock_ns

    def to_dict(self) -> dict:
        return {"top": self.top, "part": self.part, "target_clock_ns": self.target_clock_ns,
                "estimated_clock_ns": self.estimated_clock_ns, "meets_clock": self.meets_clock,
                "resources": dict(self.resources), "bram_36k": self.resources["bram_18k"] / 2,
                "report": str(self.report), "estimated_by": "Vitis HLS csynth_design (before Vivado)"}


def _text(root: ET.Element, path: str, report: Path) -> str:
    node = root.find(path)
    if node is None or node.text is None or not node.text.strip():
        raise HlsReportError(f"{report}: no {path} (not a Vitis HLS csynth.xml?)")
    return node.text.strip()


def _number(text: str, path: str, report: Path) -> float:
    try:
        return float(text)
    except ValueError:
        raise HlsReportError(f"{report}: {path} is {text!r}, not a number") from None


def parse_csynth(report: Path) -> HlsSynthesis:
    """Read one csynth.xml; :class:`HlsReportError` names what is missing."""
    report = Path(report)
    try:
        root = ET.parse(report).getroot()
    except ET.ParseError as error:
        raise HlsReportError(f"{report}: not readable XML: {error}") from None
    resources = {}
    for key, tags in RESOURCE_TAGS.items():
        found = next((root.find(f"./AreaEstimates/Resources/{tag}") for tag in tags
                      if root.find(f"./AreaEstimates/Resources/{tag}") is not None), None)
        path = f"./AreaEstimates/Resources/{tags[0]}"
        if found is None:
            if key == "uram":  # parts without UltraRAM may leave it out
                resources[key] = 0.0
                continue
            raise HlsReportError(f"{report}: no {path}")
        resources[key] = _number((found.text or "").strip(), path, report)
    timing = "./PerformanceEstimates/SummaryOfTimingAnalysis/EstimatedClockPeriod"
    return HlsSynthesis(top=_text(root, "./UserAssignments/TopModelName", report),
                        part=_text(root, "./UserAssignments/Part", report),
                        target_clock_ns=_number(_text(root, "./UserAssignments/TargetClockPeriod", report),
                                                "TargetClockPeriod", report),
                        estimated_clock_ns=_number(_text(root, timing, report), timing, report),
                        resources=resources, report=report)


def find_report(hls_project: Path, top: str) -> Path | None:
    """``csynth.xml`` of an IP's HLS project, else ``<top>_csynth.xml``; None where vitis_hls has not run."""
    for name in ("csynth.xml", f"{top}_csynth.xml"):
        path = Path(hls_project) / REPORT_DIR / name
        if path.is_file():
            return path
    return None


def read_hls_fit(build_dir: Path, manifest: dict) -> dict[str, dict]:
    """Every IP's C synthesis by IP name, for the IPs whose report exists; a report of another top is refused."""
    found = {}
    for ip in manifest["ips"]:
        path = find_report(Path(build_dir) / ip.get("hls_project", f"hls/{ip['name']}"), ip["top"])
        if path is None:
            continue
        synthesis = parse_csynth(path)
        if synthesis.top != ip["top"]:
            raise HlsReportError(f"{path}: reports top {synthesis.top!r}, IP {ip['name']} is {ip['top']!r}")
        found[ip["name"]] = synthesis.to_dict()
    return found


def refresh_fit(build_dir: Path, fit: FitReport, manifest: dict) -> bool:
    """Rewrite fit.json/fit.md/fit.png with the HLS reports beside Yosys; False (nothing written) without any."""
    hls = read_hls_fit(build_dir, manifest)
    if not hls:
        return False
    write_fit(dataclasses.replace(fit, hls=hls), Path(build_dir))
    return True
