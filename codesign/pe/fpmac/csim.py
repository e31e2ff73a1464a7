"""C simulation of a generated FP-MAC HLS project with g++, bit for bit against the golden vectors."""

from __future__ import annotations

from pathlib import Path

from codesign.hw.csim import CsimBuild, CsimError, CsimResult, compile_testbench, run_testbench
from codesign.hw.render import ProjectDirError, read_manifest
from codesign.pe.fpmac.generate import FILES, PE_NAME
from codesign.pe.fpmac.spec import FpmacSpec

__all__ = ["CsimError", "CsimResult", "build_csim", "run_csim"]


def _check_project(spec: FpmacSpec, project_dir: Path) -> None:
    """The project must be an FP-MAC project generated from exactly this spec."""
    try:
        manifest = read_manifest(project_dir)
    except ProjectDirError as error:
        raise CsimError(str(error)) from None
    if manifest is None:
        raise CsimError(f"{project_dir} is not a codesign project (generate it first)")
    if manifest.get("pe") != PE_NAME:
        raise CsimError(f"{project_dir} holds a {manifest.get('pe')!r} project, not {PE_NAME!r}")
    if manifest.get("spec") != spec.to_dict():
        raise CsimError(f"{project_dir} was generated from spec {manifest.get('spec')}, not {spec.to_dict()}")


def build_csim(spec: FpmacSpec, project_dir: Path, work_dir: Path) -> CsimBuild:
    """Compile the project's kernel and testbench (cached in ``work_dir`` by content hash)."""
    project_dir = Path(project_dir)
    _check_project(spec, project_dir)
    sources = [project_dir / FILES["kernel_cpp"], project_dir / FILES["testbench_cpp"]]
    return compile_testbench(sources, include_dirs=[project_dir], build_dir=Path(work_dir), name=f"{PE_NAME}_tb")


def run_csim(spec: FpmacSpec, project_dir: Path, vectors: Path, work_dir: Path) -> CsimResult:
    """C-simulate ``project_dir`` on the vector file ``vectors``; builds go to ``work_dir``."""
    return run_testbench(build_csim(spec, project_dir, work_dir), Path(vectors))
