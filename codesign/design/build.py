"""The build folder of a design point for one board, and the vendor tools run on it where installed.

Layout of ``<out>``::

    design.json            every IP: VLNV, base address, registers, buffers, spec (codesign.design.manifest)
    fit.json fit.md fit.png  Yosys resources against the board budget
    hls/<ip>/              one Vitis HLS project per IP (shell top + PE kernel + golden vectors + run_hls.tcl)
    rtl/<ip>/              the RTL route (default): the verified Verilog in src/ and package_ip.tcl (codesign.shell.rtl_ip)
    vivado/                block design, implementation and bitstream Tcl (codesign.shell.vivado)
    README.md              the commands, in order

Everything is checked before the first file is written: the design, its fit
on the board, the manifest (addresses, names) and every rendered file. The
folder must be missing, empty or an earlier build folder of codesign.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from codesign.design.fit import DEFAULT_LIMIT_PERCENT, DesignDoesNotFit, FitReport, fit_design, write_fit
from codesign.design.manifest import MANIFEST_FILE, MANIFEST_FORMAT, design_manifest
from codesign.design.point import DesignPoint
from codesign.shell import ip as accel
from codesign.shell import vivado
from codesign.shell.rtl_ip import DEFAULT_ROUTE, check_route, render_rtl_ip, rtl_project
from codesign.io.jsonfile import JsonFileError, load_json
from codesign.io.outdir import OutputDirError, check_output_dir
from codesign.hw.render import ProjectFiles, write_project
from codesign.io.reports import write_json_atomic, write_text_atomic
from codesign.hw.target import BuildTarget
from codesign.pe import get_pe


class BuildFolderError(OutputDirError):
    """The output folder cannot take a build folder (nothing was written)."""


@dataclass(frozen=True)
class BuildFolder:
    """What :func:`write_build_folder` wrote, and the commands that turn it into a bitstream."""

    root: Path
    manifest: dict
    fit: FitReport
    written: list[Path] = field(default_factory=list)

    @property
    def hls_commands(self) -> list[tuple[Path, list[str]]]:
        """vitis_hls per IP whose Vivado IP is the HLS export (none on the RTL route, where Vivado packages it)."""
        return [(self.root / ip["hls_project"], ["vitis_hls", "-f", "run_hls.tcl"]) for ip in self.manifest["ips"]
                if ip.get("ip_route", "hls") == "hls"]

    @property
    def vivado_command(self) -> tuple[Path, list[str]]:
        plan = vivado.plan_vivado_build(self.root)
        return plan.project_dir, plan.command


def is_build_dir(out_dir: Path) -> bool:
    """True when ``out_dir`` holds a codesign design manifest; a design.json that is not one is refused."""
    marker = Path(out_dir) / MANIFEST_FILE
    if not marker.is_file():
        return False
    try:
        body = load_json(marker, what="design manifest", required={"format": str})
    except JsonFileError as error:
        raise BuildFolderError(f"{error}; refusing to write into {out_dir}") from None
    if body["format"] != MANIFEST_FORMAT:
        raise BuildFolderError(f"{marker} is not a codesign design manifest: refusing to write into {out_dir}")
    return True


BUILD_ENTRIES = (MANIFEST_FILE, "README.md", "fit.json", "fit.md", "fit.png", "hls", "rtl", "vivado", "build_steps.json")


def check_build_dir(out_dir: Path) -> None:
    """The output-folder rule (:mod:`codesign.io.outdir`): missing, empty or an earlier build folder, and writable.

    An earlier build folder holds only what a build writes (:data:`BUILD_ENTRIES`, ``<design>.bit`` and
    ``<design>.hwh``): a design.json that happens to match among a user's other files is not one, and is refused
    rather than written over."""
    out_dir = Path(out_dir)
    check_output_dir(out_dir, "build", marker=MANIFEST_FILE, is_own=is_build_dir, error=BuildFolderError)
    if is_build_dir(out_dir):
        design = load_json(out_dir / MANIFEST_FILE, what="design manifest").get("design")
        ours = set(BUILD_ENTRIES) | {f"{design}.bit", f"{design}.hwh"}
        foreign = sorted(entry.name for entry in out_dir.iterdir() if entry.name not in ours)
        if foreign:
            raise BuildFolderError(f"{out_dir} holds a design.json and also {', '.join(foreign[:5])}, which codesign "
                                   "build does not write: refusing to write among them (move them, or give another "
                                   "--out)")


def _readme(design: DesignPoint, manifest: dict, fit: FitReport) -> str:
    lines = [f"# Build folder of design `{design.name}` for {design.board.display_name}", "",
             f"Part {design.board.part}, PL clock {design.clock_mhz:g} MHz. Written by `codesign build`; "
             "nothing here was built by Vivado unless `vivado/` holds a `.bit` and a `.hwh`.", "",
             "## IPs", "", "| IP | PE | VLNV | base address | why |", "|---|---|---|---|---|"]
    for ip in manifest["ips"]:
        lines.append(f"| {ip['name']} | {ip['pe']} | `{ip['vlnv']}` | {ip['base_address']:#010x} | {ip['reason']} |")
    lines += ["", "## Commands, in order", "", "```sh"]
    for ip in manifest["ips"]:
        if ip.get("ip_route", "hls") == "hls":
            lines.append(f"(cd {ip['hls_project']} && vitis_hls -f run_hls.tcl)   # C-sim, synthesis, co-sim, IP export")
        else:
            lines.append(f"# {ip['name']}: vivado/build.tcl packages {ip['rtl_project']}/src (the RTL cocotb verified)")
    plan = vivado.plan_vivado_build(Path("."), check=False)
    lines.append(f"(cd {plan.project_dir} && {' '.join(plan.command)})   # block design, implementation, bitstream")
    lines += ["```", "", "`codesign build` runs these itself where `vitis_hls` and `vivado` are on PATH.", "",
              "## Fit (Yosys, before place and route)", "", fit.table()]
    return "\n".join(lines) + "\n"


def render_ip_projects(design: DesignPoint, route: str = DEFAULT_ROUTE) -> tuple[dict, dict[str, ProjectFiles]]:
    """design.json and every IP's projects in memory, by folder relative to the build folder: its HLS project
    (``hls/<ip>``: shell around the PE kernel, golden vectors; the emulated board runs it) and, on the RTL route,
    ``rtl/<ip>`` (the verified Verilog and its packaging script)."""
    target = BuildTarget(part=design.board.part, clock_period_ns=design.clock_period_ns)
    projects, buffers = {}, {}
    for instance in design.instances:
        pe = get_pe(instance.pe)
        stimulus = pe.build_stimulus(instance.spec, pe.stimulus_options())
        projects[f"hls/{instance.name}"] = accel.render_accel(pe, instance.spec, instance.name, target,
                                                              stimulus=stimulus)
        if check_route(route) == "rtl":
            projects[rtl_project(instance.name)] = render_rtl_ip(pe, instance.spec, instance.name, design.board.part,
                                                                    held_sums=instance.held_sums)
        buffers[instance.name] = accel.buffer_words(stimulus)
    return design_manifest(design, buffers=buffers, route=route), projects


def write_ip_projects(out_dir: Path, manifest: dict, projects: dict[str, ProjectFiles]) -> list[Path]:
    """design.json first (it marks the folder as a build folder, so an interrupted write may be redone), then hls/
    and rtl/."""
    out_dir.mkdir(parents=True, exist_ok=True)
    written = [write_json_atomic(out_dir / MANIFEST_FILE, manifest)]
    for rel, project in projects.items():
        written += write_project(out_dir / rel, project)
    return written


def write_build_folder(design: DesignPoint, out_dir: Path, *, cache_dir: Path,
                       limit_percent: float = DEFAULT_LIMIT_PERCENT, progress: bool = False,
                       route: str = DEFAULT_ROUTE) -> BuildFolder:
    """Check ``design`` (fit, manifest, every file), then write its build folder into ``out_dir``.

    ``route`` (``rtl``, the default, or ``hls``) is how Vivado gets the IPs (:mod:`codesign.shell.rtl_ip`).
    """
    out_dir = Path(out_dir)
    check_route(route)
    check_build_dir(out_dir)
    fit = fit_design(design, cache_dir=cache_dir, limit_percent=limit_percent, progress=progress)
    if not fit.fits:
        raise DesignDoesNotFit(fit.refusal())
    manifest, projects = render_ip_projects(design, route)
    vivado_files = vivado.render_vivado(manifest, design.board)  # validates the manifest; nothing written yet
    written = write_ip_projects(out_dir, manifest, projects)
    written += vivado.write_vivado(out_dir, vivado_files)
    written += write_fit(fit, out_dir)
    written.append(write_text_atomic(out_dir / "README.md", _readme(design, manifest, fit)))
    return BuildFolder(out_dir, manifest, fit, written)


def write_emulation_folder(design, out_dir: Path) -> Path:
    """Render every IP of ``design`` (a :class:`~codesign.design.DesignPoint`), then write design.json and hls/<ip>/.

    Everything is rendered before the first file is written; ``out_dir``
    must be missing, empty or an earlier build folder. Returns ``out_dir``.
    """
    out_dir = Path(out_dir)
    check_build_dir(out_dir)
    manifest, projects = render_ip_projects(design, "hls")  # the folder holds hls/<ip>/ only, what the board runs
    write_ip_projects(out_dir, manifest, projects)
    return out_dir
