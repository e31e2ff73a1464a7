"""Golden ≡ C-sim ≡ RTL for the FP-MAC PE, on one vector file, with a summary people and machines can read.

Levels:
* ``golden``: the vectorised golden kernel against the exact rational
  reference (``codesign.numerics.reference``) on a deterministic sample;
* ``csim``: the generated HLS C++ compiled with g++ against the ap_types headers;
* ``rtl``: ``rtl/fpmac`` simulated under cocotb (Icarus by default).
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from codesign.hw.reports import write_json_atomic, write_text_atomic
from codesign.hw.vectors import read_vectors
from codesign.numerics import FloatFormat
from codesign.numerics.reference import reference_mac
from codesign.pe.fpmac.generate import generate_fpmac_project, write_fpmac_vectors
from codesign.pe.fpmac.golden import clamp_fb, from_container, to_container
from codesign.pe.fpmac.spec import FpmacSpec
from codesign.pe.fpmac.stimulus import COLUMNS, build_stimulus

LEVELS = ("golden", "csim", "rtl")


@dataclass(frozen=True)
class LevelResult:
    """Outcome of one level: vectors compared bit for bit, how many differed, wall time (s)."""

    level: str
    vectors: int
    mismatches: int
    seconds: float
    detail: str = ""


@dataclass(frozen=True)
class VerifyReport:
    spec: dict
    vector_file: str
    fb_values: list[int]
    results: list[LevelResult] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return bool(self.results) and all(r.mismatches == 0 and r.vectors > 0 for r in self.results)

    def table(self) -> str:
        rows = ["| level | vectors | mismatches | time (s) | note |", "|---|---:|---:|---:|---|"]
        for r in self.results:
            rows.append(f"| {r.level} | {r.vectors} | {r.mismatches} | {r.seconds:.2f} | {r.detail} |")
        return "\n".join(rows)


def check_golden_against_reference(spec: FpmacSpec, vectors: Path, *, sample: int = 3000) -> LevelResult:
    """Check the file's expected column against the exact rational reference on a deterministic sample."""
    start = time.perf_counter()
    columns, _ = read_vectors(vectors, pe="fpmac", columns=COLUMNS)
    count = columns["a"].size
    picks = np.unique(np.linspace(0, count - 1, min(sample, count)).astype(np.int64))
    mismatches = 0
    for index in picks:
        fb = int(clamp_fb(int(columns["fb"][index]), spec.max_fb))
        fmt = FloatFormat(exp_bits=spec.exp_bits, frac_bits=fb, rounding=spec.rounding)
        a, b, c = (int(from_container(columns[name][index], fb, max_fb=spec.max_fb)) for name in "abc")
        expected = int(to_container(reference_mac(a, b, c, fmt), fb, max_fb=spec.max_fb))
        mismatches += expected != int(columns["expected"][index])
    return LevelResult("golden", int(picks.size), mismatches, time.perf_counter() - start, "vs exact Fraction reference")


def verify_fpmac(
    spec: FpmacSpec,
    *,
    work_dir: Path,
    levels: tuple[str, ...] = LEVELS,
    fb_values: list[int] | None = None,
    random_per_fb: int = 10_000,
    seed: int = 2024,
    simulator: str = "icarus",
    progress=print,
) -> VerifyReport:
    """Generate vectors, run each requested level on them, and write verify.json / verify.md in ``work_dir``."""
    unknown = [level for level in levels if level not in LEVELS]
    if unknown:
        raise ValueError(f"unknown verification level(s) {unknown}; choose from {', '.join(LEVELS)}")
    if isinstance(random_per_fb, bool) or not isinstance(random_per_fb, int) or random_per_fb < 1:
        raise ValueError(f"random_per_fb must be a positive int, got {random_per_fb!r}")
    work_dir = Path(work_dir)
    stimulus = build_stimulus(spec, fb_values=fb_values, random_per_fb=random_per_fb, seed=seed)
    vectors = write_fpmac_vectors(spec, stimulus, work_dir / "vectors.txt")
    stimulus_fbs = sorted({int(v) for v in stimulus.fb})
    report = VerifyReport(spec=spec.to_dict(), vector_file=str(vectors), fb_values=stimulus_fbs)
    for level in levels:
        progress(f"[verify fpmac] {level} ...")
        if level == "golden":
            result = check_golden_against_reference(spec, vectors)
        elif level == "csim":
            from codesign.pe.fpmac.csim import run_csim

            project = work_dir / "hls_project"
            generate_fpmac_project(spec, project, stimulus=stimulus)
            outcome = run_csim(spec, project, vectors, work_dir / "csim")
            result = LevelResult("csim", outcome.vectors, outcome.mismatches, outcome.compile_seconds + outcome.run_seconds,
                                 f"g++ compile {outcome.compile_seconds:.1f} s")
        else:
            from codesign.pe.fpmac.rtl import run_rtl

            outcome = run_rtl(spec, vectors, work_dir / "rtl", simulator=simulator)
            result = LevelResult("rtl", outcome.vectors, outcome.mismatches, outcome.seconds, f"cocotb + {simulator}")
        report.results.append(result)
        progress(f"[verify fpmac] {level}: {result.vectors} vectors, {result.mismatches} mismatches, {result.seconds:.1f} s")
    write_json_atomic(work_dir / "verify.json", {**asdict(report), "passed": report.passed})
    write_text_atomic(work_dir / "verify.md", f"# FP-MAC verification\n\nspec: `{json.dumps(report.spec)}`\n\n{report.table()}\n")
    return report
