"""Generate the Vitis HLS project of the FP-MAC PE from ``hls_templates/fpmac``.

The project is flat and self-contained: the kernel, its header, the copied
arithmetic header ``codesign_fpmac.h``, the C testbench, the golden vector
file and ``run_hls.tcl`` sit side by side, so ``vitis_hls -f run_hls.tcl``
and :mod:`codesign.pe.fpmac.csim` (g++) compile the same sources.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from codesign.hw.render import ProjectFiles, RenderError, include_header, render_template, write_project
from codesign.hw.vectors import MAGIC, write_vectors
from codesign.pe.fpmac.spec import WORD_BITS, FpmacSpec
from codesign.pe.fpmac.stimulus import COLUMNS, Stimulus, build_stimulus

PE_NAME = "fpmac"
LIBRARY_HEADER = "codesign_fpmac.h"
# Project file names (relative to the project directory) and the template each comes from.
FILES = {
    "kernel_cpp": "fpmac.cpp",
    "kernel_h": "fpmac.h",
    "library_h": LIBRARY_HEADER,
    "testbench_cpp": "fpmac_tb.cpp",
    "tcl": "run_hls.tcl",
    "vectors": "vectors.txt",
}
TEMPLATES = {
    "kernel_cpp": "fpmac/kernel.cpp.j2",
    "kernel_h": "fpmac/kernel.h.j2",
    "testbench_cpp": "fpmac/testbench.cpp.j2",
    "tcl": "fpmac/run_hls.tcl.j2",
}
# Top-function arguments in order. Signature, INTERFACE pragmas and the testbench call
# are all rendered from this list, so they cannot name different ports.
COUNT_PORT, FB_PORT, OUTPUT_PORT = "n", "fb", "out"
PORTS = (
    {"name": "a", "role": "input"},
    {"name": "b", "role": "input"},
    {"name": "c", "role": "input"},
    {"name": OUTPUT_PORT, "role": "output"},
    {"name": COUNT_PORT, "role": "scalar", "ctype": "count_t"},
    {"name": FB_PORT, "role": "scalar", "ctype": "fb_t"},
)


def template_context(spec: FpmacSpec) -> dict[str, object]:
    """Everything the templates may use; derived numbers come from the spec, not from Jinja."""
    if spec.width > WORD_BITS:
        raise RenderError(f"a {spec.width}-bit container does not fit a {WORD_BITS}-bit word")
    return {
        "spec": spec.to_dict(),
        "width": spec.width,
        "fb_bits": spec.fb_bits,
        "rounding_code": spec.rounding_code,
        "word_bits": WORD_BITS,
        "ports": [dict(port) for port in PORTS],
        "count_port": COUNT_PORT,
        "fb_port": FB_PORT,
        "output_port": OUTPUT_PORT,
        "files": dict(FILES),
        "pe": PE_NAME,
        "magic": MAGIC,
        "columns": list(COLUMNS),
        "project_name": f"{spec.top}_prj",
        "solution_name": "solution1",
    }


def vector_meta(spec: FpmacSpec) -> dict[str, object]:
    """The metadata line of FP-MAC vector files; the testbench checks it against its build."""
    return {"exp_bits": spec.exp_bits, "max_fb": spec.max_fb, "rounding": spec.rounding}


def write_fpmac_vectors(spec: FpmacSpec, stimulus: Stimulus, path: Path) -> Path:
    """Write ``stimulus`` as an FP-MAC golden vector file (atomically)."""
    return write_vectors(Path(path), pe=PE_NAME, columns=stimulus.columns(), meta=vector_meta(spec))


def _vector_bytes(spec: FpmacSpec, stimulus: Stimulus) -> bytes:
    with tempfile.TemporaryDirectory() as scratch:
        return write_fpmac_vectors(spec, stimulus, Path(scratch) / FILES["vectors"]).read_bytes()


def render_fpmac_project(spec: FpmacSpec, *, stimulus: Stimulus | None = None, with_vectors: bool = True) -> ProjectFiles:
    """Render every file of the project in memory (nothing is written).

    With ``with_vectors`` the golden vectors (``stimulus``, by default
    ``build_stimulus(spec)``) go into ``vectors.txt`` for ``run_hls.tcl``.
    """
    if not isinstance(spec, FpmacSpec):
        raise TypeError(f"expected an FpmacSpec, got {type(spec).__name__}")
    context = template_context(spec)
    files = {FILES[key]: render_template(template, context).encode() for key, template in TEMPLATES.items()}
    files[LIBRARY_HEADER] = include_header(LIBRARY_HEADER)
    if with_vectors:
        files[FILES["vectors"]] = _vector_bytes(spec, stimulus if stimulus is not None else build_stimulus(spec))
    elif stimulus is not None:
        raise ValueError("stimulus given but with_vectors=False")
    return ProjectFiles(pe=PE_NAME, spec=spec.to_dict(), files=files)


def generate_fpmac_project(
    spec: FpmacSpec, out_dir: Path, *, stimulus: Stimulus | None = None, with_vectors: bool = True
) -> list[Path]:
    """Render the FP-MAC HLS project and write it to ``out_dir``; return the written files.

    Everything is rendered before the first byte is written; ``out_dir`` must
    be missing, empty or an earlier codesign project.
    """
    project = render_fpmac_project(spec, stimulus=stimulus, with_vectors=with_vectors)
    return write_project(Path(out_dir), project)
