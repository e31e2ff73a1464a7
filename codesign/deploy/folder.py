"""The part of a build folder the emulated board needs: design.json and one HLS project per IP.

``codesign build`` (:func:`codesign.design.build.write_build_folder`) writes
the whole folder, including the board fit and the Vivado Tcl. Emulation
needs only the manifest and the generated HLS C++ of every IP, so
:func:`write_emulation_folder` writes just those, with the same functions
(:func:`codesign.design.build.render_ip_projects`,
:func:`codesign.design.build.write_ip_projects`): a folder it writes is a valid start
of a build folder, and ``codesign build`` may complete it later.
"""

from __future__ import annotations

from pathlib import Path

from codesign.design.build import check_build_dir, render_ip_projects, write_ip_projects


def write_emulation_folder(design, out_dir: Path) -> Path:
    """Render every IP of ``design`` (a :class:`~codesign.design.DesignPoint`), then write design.json and hls/<ip>/.

    Everything is rendered before the first file is written; ``out_dir``
    must be missing, empty or an earlier build folder. Returns ``out_dir``.
    """
    out_dir = Path(out_dir)
    check_build_dir(out_dir)
    manifest, projects = render_ip_projects(design)
    write_ip_projects(out_dir, manifest, projects)
    return out_dir
