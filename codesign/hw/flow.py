"""The hardware flow, written once for every PE: render → C-sim → RTL sim → verify.

Each stage takes a registered :class:`~codesign.hw.protocol.ProcessingElement`
and an arithmetic spec (plus a :class:`~codesign.hw.target.BuildTarget`
where the HLS project depends on it). Nothing here knows a PE by name.

Levels of :func:`verify` (FINN's python / cppsim / rtlsim):

* ``golden``: the vector file's expected values against an independent
  reference model of the PE (:meth:`ProcessingElement.check_golden`);
* ``csim``: the generated HLS C++ compiled with g++ and the ap_types headers;
* ``rtl``: ``rtl/<pe>`` simulated under cocotb (Icarus by default).
"""

from __future__ import annotations

import json
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from codesign.hw.csim import CsimBuild, CsimError, CsimResult, compile_testbench, run_testbench
from codesign.hw.render import (
    ProjectDirError,
    ProjectFiles,
    include_header,
    read_manifest,
    render_template,
    write_project,
)
from codesign.io.reports import write_json_atomic, write_text_atomic
from codesign.hw.target import BuildTarget
from codesign.hw.vectors import MAGIC, TRANSACTION_MAGIC
from codesign.hw.protocol import LevelResult, ProcessingElement

LEVELS = ("golden", "csim", "rtl")
VECTORS_HEADER = "codesign_vectors.h"  # the shared, tested C++ vector-file reader of every testbench
SOLUTION_NAME = "solution1"


# ---------------------------------------------------------------------------- render


def project_context(pe: ProcessingElement, spec, target: BuildTarget) -> dict[str, Any]:
    """The PE's template context plus the names every template shares (files, target, magic lines)."""
    context = dict(pe.template_context(spec, target))
    context.update({
        "pe": pe.name,
        "spec": spec.to_dict(),
        "target": target.to_dict(),
        "kernel_files": list(pe.kernel_files),
        "testbench_file": pe.testbench_file,
        "vector_file": pe.vector_file,
        "vectors_header": VECTORS_HEADER,
        "column_magic": MAGIC,
        "transaction_magic": TRANSACTION_MAGIC,
        "project_name": f"{target.top}_prj",
        "solution_name": SOLUTION_NAME,
    })
    return context


def render_project(pe: ProcessingElement, spec, target: BuildTarget | None = None, *, stimulus=None,
                   with_vectors: bool = True) -> ProjectFiles:
    """Render every file of ``pe``'s HLS project in memory (nothing is written).

    With ``with_vectors`` the golden vectors (``stimulus``, by default the PE's
    default stimulus) go into the project for ``run_hls.tcl``'s C simulation
    and co-simulation.
    """
    pe.check_spec(spec)
    target = (target or BuildTarget()).resolve(pe.name, pe.interfaces)
    context = project_context(pe, spec, target)
    files = {name: render_template(template, context).encode() for name, template in pe.templates.items()}
    for header in (*pe.headers, VECTORS_HEADER):
        files[header] = include_header(header)
    if with_vectors:
        stimulus = stimulus if stimulus is not None else pe.build_stimulus(spec, pe.stimulus_options())
        with tempfile.TemporaryDirectory() as scratch:
            files[pe.vector_file] = pe.write_vectors(spec, stimulus, Path(scratch) / pe.vector_file).read_bytes()
    elif stimulus is not None:
        raise ValueError("stimulus given but with_vectors=False")
    return ProjectFiles(pe=pe.name, spec=spec.to_dict(), target=target.to_dict(), files=files)


def generate_project(pe: ProcessingElement, spec, out_dir: Path, target: BuildTarget | None = None, *,
                     stimulus=None, with_vectors: bool = True) -> list[Path]:
    """Render ``pe``'s HLS project and write it to ``out_dir``; return the written files.

    Everything is rendered before the first byte is written; ``out_dir`` must
    be missing, empty or an earlier codesign project.
    """
    project = render_project(pe, spec, target, stimulus=stimulus, with_vectors=with_vectors)
    return write_project(Path(out_dir), project)


# ---------------------------------------------------------------------------- C simulation


def _check_project(pe: ProcessingElement, spec, project_dir: Path) -> None:
    """The project must be ``pe``'s, generated from exactly this spec."""
    try:
        manifest = read_manifest(project_dir)
    except ProjectDirError as error:
        raise CsimError(str(error)) from None
    if manifest is None:
        raise CsimError(f"{project_dir} is not a codesign project (generate it first)")
    if manifest.get("pe") != pe.name:
        raise CsimError(f"{project_dir} holds a {manifest.get('pe')!r} project, not {pe.name!r}")
    if manifest.get("spec") != spec.to_dict():
        raise CsimError(f"{project_dir} was generated from spec {manifest.get('spec')}, not {spec.to_dict()}")


def build_csim(pe: ProcessingElement, spec, project_dir: Path, work_dir: Path) -> CsimBuild:
    """Compile the project's kernel and testbench with g++ (cached in ``work_dir`` by content hash)."""
    project_dir = Path(project_dir)
    _check_project(pe, spec, project_dir)
    sources = [project_dir / name for name in (*pe.kernel_files, pe.testbench_file) if name.endswith(".cpp")]
    return compile_testbench(sources, include_dirs=[project_dir], build_dir=Path(work_dir), name=f"{pe.name}_tb")


def run_csim(pe: ProcessingElement, spec, project_dir: Path, vectors: Path, work_dir: Path) -> CsimResult:
    """C-simulate ``project_dir`` on the vector file ``vectors``; builds go to ``work_dir``."""
    return run_testbench(build_csim(pe, spec, project_dir, work_dir), Path(vectors))


# ---------------------------------------------------------------------------- RTL simulation


@dataclass(frozen=True)
class RtlResult:
    """Outcome of one RTL run: results compared bit for bit, mismatches, wall time of build + simulation (s)."""

    simulator: str
    vectors: int
    mismatches: int
    seconds: float
    build_seconds: float
    first_mismatches: tuple[str, ...]
    build_dir: Path
    cycles: tuple[int, ...] = ()

    @property
    def passed(self) -> bool:
        return self.mismatches == 0


STREAM_BENCH = "codesign.hw.stream_bench"


def stream_build(pe: ProcessingElement, spec, vectors: Path, bench_env: dict[str, str]) -> dict[str, Any]:
    """:func:`~codesign.hw.rtlsim.run_cocotb`'s build of a stream PE: inside the harness, sized to ``vectors``, on
    the stream words its bench environment (``STREAM_WORD_PARTS``) gives."""
    from codesign.hw.bench_build import harness_build, vector_sizes

    parts = int(bench_env.get("STREAM_WORD_PARTS", "1"))
    words_in, transactions = vector_sizes(vectors, pe=bench_env.get("STREAM_PE", pe.name), word_parts=parts)
    build = harness_build(sources=pe.rtl_sources(), dut=pe.rtl_top, dut_parameters=pe.rtl_parameters(spec),
                          word_parts=parts, words_in=words_in, transactions=transactions)
    return asdict(build)


def run_rtl(pe: ProcessingElement, spec, vectors: Path, work_dir: Path, *, simulator: str = "icarus",
            seed: int = 1, bench_env: dict[str, str] | None = None) -> RtlResult:
    """Simulate ``rtl/<pe>`` with ``spec``'s parameters on every vector of ``vectors`` under cocotb.

    The vector file is read and checked before anything is built (a missing,
    short or mismatched file raises VectorFileError). ``work_dir`` receives one
    build directory per (simulator, parameter set). The bench ships inside the
    package, so an installed wheel verifies RTL as a checkout does.
    ``bench_env`` adds to (or overrides) the bench's environment.
    """
    from codesign.hw.rtlsim import CocotbTestFailure, build_dir_for, package_root, read_bench_summary, run_cocotb

    pe.check_spec(spec)
    vectors = Path(vectors).resolve()
    pe.check_vectors(spec, vectors)
    parameters = pe.rtl_parameters(spec)
    build = {"sources": pe.rtl_sources(), "toplevel": pe.rtl_top, "parameters": parameters, "build_args": ()}
    key = dict(parameters)  # what names the build directory
    if pe.bench_module == STREAM_BENCH:  # the PE inside the HDL harness that drives it
        build = stream_build(pe, spec, vectors, {**pe.bench_environment(spec, vectors, vectors, seed),
                                                 **(bench_env or {})})
        key.update({f"harness_{name}": value for name, value in build["parameters"].items()})
    build_dir = build_dir_for(Path(work_dir).resolve(), pe.rtl_top, simulator, key)
    summary_path = build_dir / "summary.json"
    summary_path.unlink(missing_ok=True)
    env = {**pe.bench_environment(spec, vectors, summary_path, seed), **(bench_env or {})}
    started = time.perf_counter()
    try:
        run = run_cocotb(test_module=pe.bench_module, build_dir=build_dir, python_paths=[package_root()],
                         extra_env=env, simulator=simulator, **build)
        build_seconds = run.build_seconds
    except CocotbTestFailure as failure:
        if not summary_path.is_file():
            raise  # the bench died before checking anything: nothing to count
        build_seconds = failure.build_seconds
        outcome = pe.rtl_outcome(spec, read_bench_summary(summary_path), vectors)
        if outcome.mismatches == 0:
            raise  # the bench failed for a reason the summary does not explain
    else:
        outcome = pe.rtl_outcome(spec, read_bench_summary(summary_path), vectors)
    return RtlResult(simulator=simulator, vectors=outcome.vectors, mismatches=outcome.mismatches,
                     seconds=time.perf_counter() - started, build_seconds=build_seconds,
                     first_mismatches=outcome.first_mismatches, build_dir=build_dir, cycles=outcome.cycles)


# ---------------------------------------------------------------------------- verify


@dataclass(frozen=True)
class VerifyReport:
    pe: str
    spec: dict
    vector_file: str
    results: list[LevelResult] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return bool(self.results) and all(r.mismatches == 0 and r.vectors > 0 for r in self.results)

    def table(self) -> str:
        rows = ["| level | vectors | mismatches | time (s) | note |", "|---|---:|---:|---:|---|"]
        for r in self.results:
            rows.append(f"| {r.level} | {r.vectors} | {r.mismatches} | {r.seconds:.2f} | {r.detail} |")
        return "\n".join(rows)

    def to_dict(self) -> dict:
        return {**asdict(self), "passed": self.passed}


def check_levels(levels) -> tuple[str, ...]:
    levels = tuple(levels)
    unknown = [level for level in levels if level not in LEVELS]
    if unknown:
        raise ValueError(f"unknown verification level(s) {unknown}; choose from {', '.join(LEVELS)}")
    if not levels:
        raise ValueError(f"no verification level given; choose from {', '.join(LEVELS)}")
    return levels


def verify(pe: ProcessingElement, spec, *, work_dir: Path, target: BuildTarget | None = None,
           levels=LEVELS, options=None, simulator: str = "icarus", progress=print) -> VerifyReport:
    """Build the stimulus, write the vectors, run each level on them; write verify.json / verify.md in ``work_dir``."""
    pe.check_spec(spec)
    levels = check_levels(levels)
    options = options if options is not None else pe.stimulus_options()
    work_dir = Path(work_dir)
    stimulus = pe.build_stimulus(spec, options)
    vectors = pe.write_vectors(spec, stimulus, work_dir / pe.vector_file)
    report = VerifyReport(pe=pe.name, spec=spec.to_dict(), vector_file=str(vectors))
    for level in levels:
        progress(f"[verify {pe.name}] {level} ...")
        if level == "golden":
            result = pe.check_golden(spec, vectors)
        elif level == "csim":
            project = work_dir / "hls_project"
            generate_project(pe, spec, project, target, stimulus=stimulus)
            outcome = run_csim(pe, spec, project, vectors, work_dir / "csim")
            result = LevelResult("csim", outcome.vectors, outcome.mismatches,
                                 outcome.compile_seconds + outcome.run_seconds,
                                 f"g++ compile {outcome.compile_seconds:.1f} s")
        else:
            outcome = run_rtl(pe, spec, vectors, work_dir / "rtl", simulator=simulator)
            result = LevelResult("rtl", outcome.vectors, outcome.mismatches, outcome.seconds, f"cocotb + {simulator}")
        report.results.append(result)
        progress(f"[verify {pe.name}] {level}: {result.vectors} vectors, {result.mismatches} mismatches, "
                 f"{result.seconds:.1f} s")
    write_json_atomic(work_dir / "verify.json", report.to_dict())
    write_text_atomic(work_dir / "verify.md",
                      f"# {pe.title} verification\n\nspec: `{json.dumps(report.spec)}`\n\n{report.table()}\n")
    return report
