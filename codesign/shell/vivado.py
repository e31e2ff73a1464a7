"""The Vivado flow of one design on one board: block-design Tcl generated from design.json and boards/*.toml.

:func:`render_vivado_project` validates a design manifest (``design.json``,
format ``codesign-design`` version 1) against a :class:`~codesign.boards.Board`
and renders ``vivado/create_project.tcl`` and ``vivado/build.tcl`` into the
build folder. The scripts create the project (board part when the board files
are installed, the part and a full PS configuration from the board's TOML when
not), the block design (PS, an AXI interconnect for control, a SmartConnect
for data into the HP port, one clock and one reset domain, every accelerator
IP of the manifest), assign the manifest's fixed register addresses, validate,
make the HDL wrapper, run synthesis and implementation to the bitstream and
copy ``<design>.bit`` and ``<design>.hwh`` into the build folder.

:func:`plan_vivado_build` / :func:`run_vivado_build` run that where ``vivado``
is on PATH and say exactly what to run where it is not. Nothing here reports a
build it did not get: a run counts only when both files exist afterwards.
"""

from __future__ import annotations

import math
import re
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from codesign.boards import Board, boards
from codesign.shell.ip import data_ports
from codesign.shell.build import ToolFailed, ToolMissing
from codesign.io.jsonfile import JsonFileError, load_json
from codesign.hw.render import render_template
from codesign.step.model import hp_port_of
from codesign.contracts.shell import MANIFEST_FILE, MANIFEST_FORMAT, MANIFEST_VERSION
from codesign.io.reports import write_bytes_atomic
from codesign.shell.tcl_lint import LintResult, ShimOptions, lint_script
from codesign.shell.rtl_ip import IP_ROUTES
from codesign.shell.rtl_ip import SCRIPT as PACKAGE_SCRIPT

VIVADO_DIR = "vivado"
TEMPLATES = {"create_project.tcl": "vivado/create_project.tcl.j2", "build.tcl": "vivado/build.tcl.j2"}
BUILD_SCRIPT = f"{VIVADO_DIR}/build.tcl"
LOG_FILE = f"{VIVADO_DIR}/vivado.log"
MODE_FILE = f"{VIVADO_DIR}/build_mode.json"  # written by create_project.tcl: the mode it chose
CONTROL_INTERFACE = "s_axi_control"  # Vitis HLS names the s_axilite bundle "control" so
CLOCK_PIN, RESET_PIN = "ap_clk", "ap_rst_n"  # and these are its clock and active-low reset
CONTROL_IC, DATA_IC, RESET_CELL = "axi_control", "axi_data", "rst_pl"
MIN_RANGE = 4096  # bytes: the smallest address range Vivado assigns
MAX_DATA_PORTS = 16  # slave interfaces of one SmartConnect
DEFAULT_JOBS = 2

_TOP_KEYS = ("format", "version", "design", "board", "part", "clock_mhz", "control_port", "data_port", "ips")
_IP_KEYS = ("name", "top", "vlnv", "base_address", "address_range", "data_ports", "ip_repo")
_IDENT = re.compile(r"^[A-Za-z][A-Za-z0-9_]*$")
_VLNV = re.compile(r"^[A-Za-z0-9_.-]+:[A-Za-z0-9_.-]+:[A-Za-z][A-Za-z0-9_]*:[0-9]+(\.[0-9]+)*$")
_RELPATH = re.compile(r"^[A-Za-z0-9_.+-]+(/[A-Za-z0-9_.+-]+)*$")
_AUTOMATION = re.compile(r'^[A-Za-z0-9_ ",.]+$')


def fewest_hp_ports(links: list[int], most: int) -> int:
    """The fewest ports (at most ``most``) whose SmartConnects take every IP's data ports (``links``, per IP, in the
    design's order) with :func:`hp_port_of`, each SmartConnect within :data:`MAX_DATA_PORTS` slave interfaces."""
    for ports in range(1, most + 1):
        per_port = [0] * ports
        for index, count in enumerate(links):
            per_port[hp_port_of(index, ports)] += count
        if max(per_port) <= MAX_DATA_PORTS:
            return ports
    raise ValueError(f"{len(links)} IPs with {sum(links)} data ports do not fit {most} high-performance ports of "
                     f"{MAX_DATA_PORTS} SmartConnect slave interfaces each")


def shell_ips_hp_ports(ips: int, most: int) -> int:
    """:func:`fewest_hp_ports` of ``ips`` IPs in the accelerator shell (each with the shell's data ports)."""
    return fewest_hp_ports([len(data_ports())] * ips, most)


class ManifestError(ValueError):
    """design.json cannot be built on the board as it stands (nothing was written)."""


# ---------------------------------------------------------------------------- validation


def _ensure(condition: bool, message: str) -> None:
    if not condition:
        raise ManifestError(message)


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _check_relpath(value: object, what: str) -> str:
    _ensure(isinstance(value, str) and bool(_RELPATH.match(value)) and ".." not in PurePosixPath(value).parts,
            f"{what} {value!r} must be a relative POSIX path inside the build folder (letters, digits, _.+-)")
    return value


def validate_manifest(manifest: dict, board: Board) -> None:
    """Refuse a manifest the Vivado flow cannot build on ``board``, with a message naming the problem.

    Checks the format, the keys, that the board is known and is ``board``
    (same part, same control and data ports), and per IP: a C-identifier
    name, a unique name, a ``vendor:library:name:version`` VLNV whose name is
    the IP's top, a power-of-two address range of at least 4 KiB, a base
    aligned to its range and inside the board's control window, no overlap
    with another IP, data ports and a relative IP repository path; the
    high-performance ports it uses (``data_ports``) are the board's first
    ones, each IP's ``hp_port`` is one of them, and no port's SmartConnect
    takes more than :data:`MAX_DATA_PORTS` data ports.
    """
    used = _validate_top(manifest, board)
    _validate_ips(manifest["ips"], board, used)


def _validate_top(manifest: dict, board: Board) -> list:
    """The manifest's own fields against ``board``; the high-performance ports it uses."""
    _ensure(isinstance(manifest, dict), f"design manifest must be a JSON object, not {type(manifest).__name__}")
    missing = [key for key in _TOP_KEYS if key not in manifest]
    _ensure(not missing, f"design manifest lacks key(s) {', '.join(missing)}")
    _ensure(manifest["format"] == MANIFEST_FORMAT and manifest["version"] == MANIFEST_VERSION,
            f"not a {MANIFEST_FORMAT} version {MANIFEST_VERSION} manifest "
            f"(format {manifest['format']!r}, version {manifest['version']!r})")
    design = manifest["design"]
    _ensure(isinstance(design, str) and bool(_IDENT.match(design)),
            f"design name {design!r} must be a letter followed by letters, digits or underscores")
    known = boards()
    _ensure(manifest["board"] in known,
            f"unknown board {manifest['board']!r} in design.json; known boards: {', '.join(sorted(known))}")
    _ensure(manifest["board"] == board.name,
            f"design.json is for board {manifest['board']!r}, not {board.name!r}")
    _ensure(manifest["part"] == board.part,
            f"design.json names part {manifest['part']!r}, but board {board.name} has part {board.part!r}")
    facts = board.vivado
    _ensure(manifest["control_port"] == facts.control_port and manifest["data_port"] == facts.data_port,
            f"design.json ports {manifest['control_port']}/{manifest['data_port']} are not board {board.name}'s "
            f"{facts.control_port}/{facts.data_port}")
    used = manifest_data_ports(manifest)
    board_ports = [port.port for port in facts.data_ports]
    _ensure(isinstance(used, list) and 0 < len(used) <= len(board_ports) and used == board_ports[:len(used)],
            f"design.json data_ports {used!r} must be the first of board {board.name}'s high-performance ports "
            f"{board_ports}")
    clock = manifest["clock_mhz"]
    _ensure(not isinstance(clock, bool) and isinstance(clock, (int, float)) and math.isfinite(clock) and clock > 0,
            f"clock_mhz {clock!r} must be a positive number of MHz")
    for text in (facts.automation_board, facts.automation_part):
        _ensure(bool(_AUTOMATION.match(text)), f"board {board.name}: automation config {text!r} has unsafe characters")
    return used


def _validate_ips(ips: object, board: Board, used: list) -> None:
    """Every IP entry: name, VLNV, registers' place in the control window, data ports and their HP port."""
    facts = board.vivado
    _ensure(isinstance(ips, list) and len(ips) > 0, "design.json lists no IPs (ips must be a non-empty list)")
    window_end = facts.control_base + facts.control_window
    seen: dict[str, int] = {}
    spans: list[tuple[int, int, str]] = []
    per_port: dict[int, int] = {}
    for index, ip in enumerate(ips):
        _ensure(isinstance(ip, dict), f"ips[{index}] must be an object")
        missing = [key for key in _IP_KEYS if key not in ip]
        label = ip.get("name", f"ips[{index}]")
        _ensure(not missing, f"IP {label!r} lacks key(s) {', '.join(missing)}")
        name = ip["name"]
        _ensure(isinstance(name, str) and bool(_IDENT.match(name)), f"IP name {name!r} is not a C identifier")
        _ensure(name not in seen, f"duplicate IP name {name!r} (ips[{seen.get(name)}] and ips[{index}])")
        seen[name] = index
        _ensure(name not in (facts.ps_cell, CONTROL_IC, RESET_CELL, *map(data_ic_name, range(len(facts.data_ports)))),
                f"IP name {name!r} collides with a block-design cell codesign adds")
        _ensure(isinstance(ip["top"], str) and bool(_IDENT.match(ip["top"])), f"IP {name}: top {ip['top']!r}")
        vlnv = ip["vlnv"]
        _ensure(isinstance(vlnv, str) and bool(_VLNV.match(vlnv)) and vlnv.split(":")[2] == ip["top"],
                f"IP {name}: VLNV {vlnv!r} must be vendor:library:{ip['top']}:version")
        base, span = ip["base_address"], ip["address_range"]
        _ensure(_is_int(base) and _is_int(span), f"IP {name}: base_address and address_range must be integers")
        _ensure(span >= MIN_RANGE and span & (span - 1) == 0,
                f"IP {name}: address_range {span:#x} must be a power of two of at least {MIN_RANGE:#x} bytes")
        _ensure(base % span == 0, f"IP {name}: base_address {base:#x} is not aligned to its range {span:#x}")
        _ensure(facts.control_base <= base and base + span <= window_end,
                f"IP {name}: {base:#x}..{base + span - 1:#x} is outside the {facts.control_port} window "
                f"{facts.control_base:#x}..{window_end - 1:#x} of board {board.name}")
        for other_base, other_end, other in spans:
            _ensure(base + span <= other_base or other_end <= base,
                    f"IP {name}: {base:#x}..{base + span - 1:#x} overlaps IP {other} at {other_base:#x}..{other_end - 1:#x}")
        spans.append((base, base + span, name))
        ports = ip["data_ports"]
        _ensure(isinstance(ports, list) and len(ports) > 0 and len(set(ports)) == len(ports)
                and all(isinstance(p, str) and re.match(r"^m_axi_[A-Za-z0-9_]+$", p) for p in ports),
                f"IP {name}: data_ports {ports!r} must be distinct m_axi_* interface names")
        port = ip.get("hp_port", 0)
        _ensure(_is_int(port) and 0 <= port < len(used),
                f"IP {name}: hp_port {port!r} must index design.json's data_ports {used}")
        per_port[port] = per_port.get(port, 0) + len(ports)
        _check_relpath(ip["ip_repo"], f"IP {name}: ip_repo")
        if "hls_project" in ip:
            _check_relpath(ip["hls_project"], f"IP {name}: hls_project")
        _validate_route(ip, name)
    for port, count in sorted(per_port.items()):
        _ensure(count <= MAX_DATA_PORTS,
                f"{count} data ports on {used[port]}; its SmartConnect takes at most {MAX_DATA_PORTS} (spread the "
                "IPs over more high-performance ports: [design] hp_ports)")


def _validate_route(ip: dict, name: str) -> None:
    """An IP made by the RTL route names the folder its packaging script is in (``rtl_project``)."""
    route = ip.get("ip_route", "hls")  # a design.json written before the RTL route: the HLS export
    _ensure(route in IP_ROUTES, f"IP {name}: ip_route {route!r} is not one of {', '.join(IP_ROUTES)}")
    if route == "rtl":
        _ensure("rtl_project" in ip, f"IP {name}: the rtl route needs rtl_project (the folder of package_ip.tcl)")
        _check_relpath(ip["rtl_project"], f"IP {name}: rtl_project")


# ---------------------------------------------------------------------------- rendering


def manifest_data_ports(manifest: dict) -> list:
    """The high-performance ports design.json spreads its IPs over: ``data_ports``, or its one ``data_port`` (a
    design.json written before designs had several)."""
    return manifest.get("data_ports", [manifest["data_port"]])


def data_ic_name(port: int) -> str:
    """The SmartConnect in front of high-performance port ``port``."""
    return DATA_IC if port == 0 else f"{DATA_IC}{port}"


def _number(value: float) -> str:
    """A clock in MHz as Vivado properties take it: integral values without a fraction."""
    return str(int(value)) if float(value).is_integer() else repr(float(value))


def vivado_context(manifest: dict, board: Board) -> dict:
    """Everything the templates print; every name, count and address is computed here, none in Jinja."""
    facts = board.vivado
    ports = facts.data_ports[:len(manifest_data_ports(manifest))]
    ips = []
    data_ics = [{"name": data_ic_name(k), "port": port.port, "links": []} for k, port in enumerate(ports)]
    for index, ip in enumerate(manifest["ips"]):
        ips.append({
            "name": ip["name"], "vlnv": ip["vlnv"], "ip_repo": ip["ip_repo"],
            "hls_project": ip.get("hls_project", ip["ip_repo"]),
            "package_script": (f"{ip['rtl_project']}/{PACKAGE_SCRIPT}" if ip.get("ip_route") == "rtl" else None),
            "control_master": f"M{index:02d}_AXI",
            "offset": f"0x{ip['base_address']:08X}", "range": f"0x{ip['address_range']:08X}",
        })
        links = data_ics[ip.get("hp_port", 0)]["links"]
        for port in ip["data_ports"]:
            links.append({"source": f"{ip['name']}/{port}", "slave": f"S{len(links):02d}_AXI"})
    data_ics = [ic for ic in data_ics if ic["links"]]  # a port no IP uses stays off
    masters = [f"M{index:02d}" for index in range(len(ips))]
    used = {ic["port"] for ic in data_ics}
    clock_sinks = [f"{facts.ps_cell}/{facts.control_clock_pin}",
                   *(f"{facts.ps_cell}/{port.clock_pin}" for port in ports if port.port in used),
                   f"{CONTROL_IC}/ACLK", f"{CONTROL_IC}/S00_ACLK", *(f"{CONTROL_IC}/{m}_ACLK" for m in masters),
                   *(f"{ic['name']}/aclk" for ic in data_ics), f"{RESET_CELL}/slowest_sync_clk",
                   *(f"{ip['name']}/{CLOCK_PIN}" for ip in ips)]
    reset_sinks = [f"{CONTROL_IC}/S00_ARESETN", *(f"{CONTROL_IC}/{m}_ARESETN" for m in masters),
                   *(f"{ic['name']}/aresetn" for ic in data_ics), *(f"{ip['name']}/{RESET_PIN}" for ip in ips)]
    port_properties = [item for port in ports if port.port in used for item in port.properties.items()]
    return {
        "design": manifest["design"], "board": board.name, "display_name": board.display_name,
        "part": board.part, "board_part": board.board_part, "board_part_patterns": list(board.board_part_patterns),
        "clock_mhz": _number(manifest["clock_mhz"]),
        "ps": {key: getattr(facts, key) for key in (
            "ps_ip", "ps_cell", "automation_rule", "automation_board", "automation_part", "control_port",
            "data_port", "clock_pin", "reset_pin", "fclk_property")},
        "ports": [*facts.ports.items(), *port_properties], "part_config": list(facts.part_config.items()),
        "ips": ips, "ip_repos": sorted({ip["ip_repo"] for ip in ips}), "data_ics": data_ics,
        "data_port_names": ", ".join(ic["port"] for ic in data_ics),
        "clock_sinks": clock_sinks, "reset_sinks": reset_sinks, "control_interface": CONTROL_INTERFACE,
        "control_ic": CONTROL_IC, "reset_cell": RESET_CELL, "default_jobs": DEFAULT_JOBS,
    }


def render_vivado(manifest: dict, board: Board) -> dict[str, bytes]:
    """Validate ``manifest`` for ``board`` and render its Vivado scripts in memory (nothing is written).

    Returns the file contents by path relative to the build folder
    (``vivado/create_project.tcl``, ``vivado/build.tcl``). Same manifest and
    board, same bytes.
    """
    validate_manifest(manifest, board)
    context = vivado_context(manifest, board)
    return {f"{VIVADO_DIR}/{name}": render_template(template, context).encode()
            for name, template in TEMPLATES.items()}


def write_vivado(out_dir: Path, files: dict[str, bytes]) -> list[Path]:
    """Write what :func:`render_vivado` returned into the build folder ``out_dir``; each file atomically."""
    out_dir = Path(out_dir)
    if out_dir.exists() and not out_dir.is_dir():
        raise NotADirectoryError(f"{out_dir} exists and is not a directory")
    unknown = sorted(set(files) - {f"{VIVADO_DIR}/{name}" for name in TEMPLATES})
    if unknown:
        raise ValueError(f"not Vivado scripts of codesign: {', '.join(unknown)}")
    return [write_bytes_atomic(out_dir / rel, data) for rel, data in sorted(files.items())]


def render_vivado_project(manifest: dict, board: Board, out_dir: Path) -> list[Path]:
    """Validate ``manifest`` for ``board`` and write ``vivado/*.tcl`` into the build folder ``out_dir``.

    Everything is validated and rendered before the first byte is written.
    Returns the written paths.
    """
    return write_vivado(out_dir, render_vivado(manifest, board))


# ---------------------------------------------------------------------------- building


class VivadoBuildError(ToolFailed):
    """Vivado ran but did not produce both the bitstream and the hardware handoff."""


@dataclass(frozen=True)
class VivadoBuildPlan:
    """How to build one build folder (``project_dir``): the command, run there, and the two files it must produce."""

    project_dir: Path
    tool: str | None
    command: list[str]
    bitstream: Path | None
    handoff: Path | None

    def describe(self) -> str:
        return f"cd {self.project_dir} && {' '.join(self.command)}"


@dataclass(frozen=True)
class VivadoBuildResult:
    """A finished build: both files, the wall time (s) and the mode the script chose (``board`` or ``part``)."""

    bitstream: Path
    handoff: Path
    seconds: float
    mode: str


def read_manifest(build_dir: Path) -> dict:
    path = Path(build_dir) / MANIFEST_FILE
    if not path.is_file():
        raise FileNotFoundError(f"{build_dir} holds no {MANIFEST_FILE}: it is not a codesign build folder")
    try:
        return load_json(path, what="design manifest", required={"board": str, "design": str})
    except JsonFileError as error:
        raise ManifestError(str(error)) from None


def plan_vivado_build(build_dir: Path, *, check: bool = True) -> VivadoBuildPlan:
    """The Vivado command for ``build_dir``.

    With ``check`` (the default) the folder must be a build folder: its
    design.json valid for its board and the Vivado scripts rendered; the plan
    then names the two files the build must produce. ``check=False`` only
    spells the command (for a README written before the folder exists).
    """
    command = ["vivado", "-mode", "batch", "-notrace", "-source", BUILD_SCRIPT,
               "-log", LOG_FILE, "-journal", f"{VIVADO_DIR}/vivado.jou"]
    tool = shutil.which("vivado")
    if not check:
        return VivadoBuildPlan(Path(build_dir), tool, command, None, None)
    build_dir = Path(build_dir).resolve()
    manifest = read_manifest(build_dir)
    known = boards()
    board_name = manifest["board"]
    if board_name not in known:
        raise ManifestError(f"unknown board {board_name!r} in {build_dir / MANIFEST_FILE}; "
                            f"known boards: {', '.join(sorted(known))}")
    validate_manifest(manifest, known[board_name])
    for rel in TEMPLATES:
        if not (build_dir / VIVADO_DIR / rel).is_file():
            raise FileNotFoundError(f"{build_dir / VIVADO_DIR / rel} is missing; render the Vivado scripts first")
    design = manifest["design"]
    return VivadoBuildPlan(build_dir, tool, command, build_dir / f"{design}.bit", build_dir / f"{design}.hwh")


def first_error_line(log: Path) -> str | None:
    """The first ``ERROR:`` line of a Vivado log, or None."""
    if not Path(log).is_file():
        return None
    for line in Path(log).read_text(errors="replace").splitlines():
        if line.startswith("ERROR:"):
            return line.strip()
    return None


def run_vivado_build(plan: VivadoBuildPlan, *, timeout_s: float | None = None) -> VivadoBuildResult:
    """Run the plan; :class:`ToolMissing` with the exact command where Vivado is absent.

    Succeeds only when the bitstream and the hardware handoff both exist and
    were written by this run; otherwise :class:`VivadoBuildError` carries the
    first ``ERROR:`` line of ``vivado/vivado.log``.
    """
    if plan.tool is None:
        raise ToolMissing(f"vivado is not on PATH; install Vivado (2020.2 or later) and run: {plan.describe()}")
    if plan.bitstream is None or plan.handoff is None:
        raise ValueError("this plan was made with check=False; plan_vivado_build(build_dir) makes one to run")
    started = time.time()
    done = subprocess.run([plan.tool, *plan.command[1:]], cwd=plan.project_dir, check=False, timeout=timeout_s)
    fresh = [path for path in (plan.bitstream, plan.handoff) if path.is_file() and path.stat().st_mtime >= started]
    if done.returncode != 0 or len(fresh) != 2:
        error = first_error_line(plan.project_dir / LOG_FILE) or "no ERROR: line in the log"
        absent = [path.name for path in (plan.bitstream, plan.handoff) if path not in fresh]
        raise VivadoBuildError(f"vivado exited with status {done.returncode}"
                               + (f"; not written: {', '.join(absent)}" if absent else "")
                               + f"; first error: {error} (log: {plan.project_dir / LOG_FILE})")
    mode_file = plan.project_dir / MODE_FILE
    mode = (load_json(mode_file, what="Vivado build mode record", required={"mode": str})["mode"]
            if mode_file.is_file() else "unknown")
    return VivadoBuildResult(plan.bitstream, plan.handoff, time.time() - started, mode)


def lint_vivado_build(build_dir: Path, *, board_files: bool = True) -> LintResult:
    """Run ``vivado/build.tcl`` of ``build_dir`` under the Tcl lint (recorded, not executed by Vivado).

    ``board_files`` says whether the board part counts as installed, i.e.
    which of the two modes the script takes. No file of the build folder is
    written. The result's :meth:`~codesign.shell.tcl_lint.LintResult.describe`
    says what it is: a lint, never a build.
    """
    plan = plan_vivado_build(build_dir)
    board_part = boards()[read_manifest(plan.project_dir)["board"]].board_part
    options = ShimOptions(board_parts=(board_part,) if board_files else ())
    return lint_script(plan.project_dir / BUILD_SCRIPT, options)
