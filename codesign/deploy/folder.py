"""The part of a build folder the emulated board needs: design.json and one HLS project per IP.

``codesign build`` (:func:`codesign.design.build.write_build_folder`) writes
the whole folder, including the board fit and the Vivado Tcl. Emulation
needs only the manifest and the generated HLS C++ of every IP, so
:func:`write_emulation_folder` writes just those, with the same functions
(:func:`codesign.design.manifest.design_manifest`,
:func:`codesign.hw.accel.render_accel`): a folder it writes is a valid start
of a build folder, and ``codesign build`` may complete it later.
"""

from __future__ import annotations

from pathlib import Path

from codesign.design.build import check_build_dir
from codesign.design.manifest import MANIFEST_FILE, design_manifest
from codesign.hw import accel
from codesign.hw.render import write_project
from codesign.hw.reports import write_json_atomic
from codesign.hw.target import BuildTarget
from codesign.pe import get_pe


def write_emulation_folder(design, out_dir: Path) -> Path:
    """Render every IP of ``design`` (a :class:`~codesign.design.DesignPoint`), then write design.json and hls/<ip>/.

    Everything is rendered before the first file is written; ``out_dir``
    must be missing, empty or an earlier build folder. Returns ``out_dir``.
    """
    out_dir = Path(out_dir)
    check_build_dir(out_dir)
    target = BuildTarget(part=design.board.part, clock_period_ns=design.clock_period_ns)
    projects, buffers = {}, {}
    for instance in design.instances:
        pe = get_pe(instance.pe)
        stimulus = pe.build_stimulus(instance.spec, pe.stimulus_options())
        projects[instance.name] = accel.render_accel(pe, instance.spec, instance.name, target, stimulus=stimulus)
        buffers[instance.name] = accel.buffer_words(stimulus)
    manifest = design_manifest(design, buffers=buffers)
    out_dir.mkdir(parents=True, exist_ok=True)
    for name, project in projects.items():
        write_project(out_dir / "hls" / name, project)
    write_json_atomic(out_dir / MANIFEST_FILE, manifest)  # last: the folder is complete once it exists
    return out_dir
