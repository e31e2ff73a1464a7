"""The accelerator IP packaged from the RTL that cocotb verified, the default route of the Vivado flow.

The shell cocotb simulates (:func:`codesign.shell.ip.run_accel_rtl`) is
``rtl/accel/*.v``, the generated ``accel_top.v`` and the PE's own
``rtl/<pe>/*.v``, compiled with ``rtl/include`` on the include path. This
module writes exactly those files -- the list :func:`codesign.shell.ip.render_accel_rtl`
returns, never a list of its own, plus the headers they include -- into
``rtl/<ip>/src/`` of the build folder, and renders ``rtl/<ip>/package_ip.tcl``,
which packages them with Vivado's IP packager as
``codesign:rtl:<ip>_accel:1.0`` into ``rtl/<ip>/ip``. So the bitstream is
built from the Verilog that was verified, byte for byte
(``tests/shell/test_rtl_ip.py`` holds the two lists equal by sha256).

The packaging script's shape follows public scripts, read for shape, not
copied: Xilinx/finn ``src/finn/transformation/fpgadataflow/create_stitched_ip.py``
(``ipx::package_project -root_dir -vendor -library -taxonomy /UserIP
-import_files``, one memory map with one address block per AXI4-Lite slave,
the m_axi aperture segment removed) and ``src/finn/custom_op/fpgadataflow/templates.py``
(``ip_package_tcl``: ``ipx::infer_bus_interface`` for ``ap_clk``/``ap_rst_n``,
``ipx::associate_bus_interfaces -clock``, ``create_xgui_files``,
``update_checksums``, ``save_core``).

The Vitis HLS route (``hls/<ip>/run_hls.tcl`` exports ``codesign:hls:...``)
stays available as an option (:data:`IP_ROUTES`).
"""

from __future__ import annotations

import re
import tempfile
from dataclasses import dataclass
from pathlib import Path

from codesign.contracts.shell import SHELL_ARGS, AXI_WORD_BITS, CONTROL_BUNDLE, register_map
from codesign.hw.render import ProjectFiles, RenderError, render_template
from codesign.shell import ip as accel

IP_ROUTES = ("rtl", "hls")  # rtl: packaged from the verified Verilog (default); hls: exported by vitis_hls
DEFAULT_ROUTE = "rtl"
RTL_LIBRARY = "rtl"
RTL_DIR = "rtl"  # rtl/<ip>/ in the build folder
SOURCES_DIR = "src"
PACKAGED_DIR = "ip"  # where ipx::package_project leaves component.xml: the IP repository
SCRIPT = "package_ip.tcl"
TEMPLATE = "vivado/package_ip.tcl.j2"
ADDRESS_BLOCK = "Reg"  # the block design assigns <ip>/s_axi_control/Reg, as it does for an HLS IP
MIN_BLOCK_RANGE = 4096  # bytes: the smallest address block Vivado assigns
_INCLUDE = re.compile(r'^\s*`include\s+"([^"]+)"', re.MULTILINE)


def check_route(route: str) -> str:
    if route not in IP_ROUTES:
        raise ValueError(f"IP route {route!r} is not one of {', '.join(IP_ROUTES)} (rtl: packaged from the verified "
                         "RTL, the default; hls: exported by Vitis HLS)")
    return route


def rtl_vlnv(instance_name: str) -> str:
    """The packaged RTL IP's identifier, ``codesign:rtl:<instance>_accel:1.0`` (same name as the HLS export's)."""
    return f"{accel.IP_VENDOR}:{RTL_LIBRARY}:{accel.accel_top(instance_name)}:{accel.IP_VERSION}"


def rtl_project(instance_name: str) -> str:
    """The IP's RTL folder, relative to the build folder."""
    return f"{RTL_DIR}/{accel.check_instance_name(instance_name)}"


def route_fields(instance_name: str, route: str) -> dict:
    """The route's part of an IP's design.json entry: VLNV, IP repository, and the folder that makes it."""
    if check_route(route) == "rtl":
        return {"ip_route": route, "vlnv": rtl_vlnv(instance_name), "rtl_project": rtl_project(instance_name),
                "ip_repo": f"{rtl_project(instance_name)}/{PACKAGED_DIR}"}
    return {"ip_route": route, "vlnv": accel.vlnv(instance_name),
            "ip_repo": f"hls/{instance_name}/{accel.ip_repo_relpath()}"}


def included_headers(sources: list[Path], include_dir: Path) -> list[Path]:
    """The headers of ``include_dir`` that ``sources`` include (what the simulators find through ``-I``)."""
    names = sorted({name for path in sources for name in _INCLUDE.findall(path.read_text(errors="replace"))})
    missing = [name for name in names if not (include_dir / name).is_file()]
    if missing:
        raise RenderError(f"the RTL includes {', '.join(missing)}, which {include_dir} does not hold")
    return [include_dir / name for name in names]


def simulated_sources(pe, spec, work_dir: Path, *, held_sums: bool = True) -> list[Path]:
    """Every file the cocotb run of the shell around ``pe`` compiles: :func:`~codesign.shell.ip.render_accel_rtl`'s
    sources (the wrapper written into ``work_dir``) and the headers they include from the shared include path."""
    from codesign.hw.constants_gen import verilog_include_dir

    sources = accel.render_accel_rtl(pe, spec, Path(work_dir), held_sums=held_sums)
    return [*sources, *included_headers(sources, verilog_include_dir())]


@dataclass(frozen=True)
class RegisterRow:
    """One register of the packaged IP's address block: name, byte offset, size in bits."""

    name: str
    offset: int
    bits: int


def register_rows() -> list[RegisterRow]:
    """The shell's registers as the IP-XACT address block lists them (so the .hwh can list them for PYNQ)."""
    bits = {arg.name: -(-arg.register_bits // AXI_WORD_BITS) * AXI_WORD_BITS for arg in SHELL_ARGS}
    return [RegisterRow(name, offset, bits.get(name, AXI_WORD_BITS)) for name, offset in register_map().items()]


def package_context(pe, spec, instance_name: str, part: str, sources: list[str], headers: list[str]) -> dict:
    span = accel.register_span()
    return {
        "instance": instance_name, "pe": pe.name, "title": pe.title, "part": part,
        "summary": ", ".join(f"{key}={value}" for key, value in spec.to_dict().items()),
        "project": f"{instance_name}_package", "top": accel.RTL_TOP, "sources_dir": SOURCES_DIR,
        "sources": sources, "headers": headers, "packaged_dir": PACKAGED_DIR,
        "vendor": accel.IP_VENDOR, "library": RTL_LIBRARY, "ip_name": accel.accel_top(instance_name),
        "version": accel.IP_VERSION, "vlnv": rtl_vlnv(instance_name),
        "control": f"s_axi_{CONTROL_BUNDLE}", "data_ports": accel.data_ports(), "clock": "ap_clk",
        "reset": "ap_rst_n", "interrupt": "interrupt", "address_block": ADDRESS_BLOCK,
        "block_range": max(MIN_BLOCK_RANGE, 1 << (span - 1).bit_length()), "registers": register_rows(),
    }


def render_rtl_ip(pe, spec, instance_name: str, part: str, *, held_sums: bool = True) -> ProjectFiles:
    """``rtl/<ip>/``'s files in memory: ``src/`` (the simulated sources, by name) and ``package_ip.tcl``; the shell
    without the accumulation buffer when ``held_sums`` is False."""
    with tempfile.TemporaryDirectory(prefix="codesign-rtl-ip-") as scratch:
        paths = simulated_sources(pe, spec, Path(scratch), held_sums=held_sums)
        files: dict[str, bytes] = {}
        for path in paths:
            rel = f"{SOURCES_DIR}/{path.name}"
            if rel in files and files[rel] != path.read_bytes():
                raise RenderError(f"two RTL sources of {pe.name} are named {path.name}: the IP's src/ holds one")
            files[rel] = path.read_bytes()
    names = [rel.split("/", 1)[1] for rel in files]
    headers = [name for name in names if name.endswith(".vh")]
    context = package_context(pe, spec, instance_name, part, [n for n in names if n not in headers], headers)
    files[SCRIPT] = render_template(TEMPLATE, context).encode()
    return ProjectFiles(pe=pe.name, spec=spec.to_dict(), files=files,
                        target={"part": part, "top": accel.RTL_TOP, "vlnv": rtl_vlnv(instance_name)})
