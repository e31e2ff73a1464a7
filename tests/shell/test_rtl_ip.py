"""The RTL route: Vivado packages exactly the Verilog cocotb simulated (by sha256), and the block design uses it.

Everything here is the Tcl lint (recorded, not executed by Vivado): it shows which files the packaging
script adds and which IP the block design instantiates, not that Vivado's packager accepts them.
"""

from __future__ import annotations

import hashlib
import importlib.util
import shutil
import subprocess
from pathlib import Path

import pytest

from codesign.boards import board
from codesign.contracts.shell import register_map
from codesign.hw.render import write_project
from codesign.pe import get_pe
from codesign.shell import ip as accel
from codesign.shell.rtl_ip import included_headers, render_rtl_ip, rtl_vlnv
from codesign.shell.tcl_lint import lint_script, parse_tcl_list

needs_tclsh = pytest.mark.skipif(shutil.which("tclsh") is None or shutil.which("iverilog") is None,
                                 reason="tclsh or iverilog not installed (Debian packages tcl8.6, iverilog)")
CASES = [("tt1", {}), ("tt1", {"stream_bits": 64}), ("csb", {})]


def sha256(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def cocotb_sources(pe, spec, tmp_path, monkeypatch) -> list[Path]:
    """The files run_accel_rtl hands the simulator, caught at run_cocotb, and every file Icarus then reads to
    compile them with the include path every RTL run gets (its own dependency list, ``iverilog -M``): the
    headers come from the simulator, not from the packaging code's own scan."""
    import codesign.hw.rtlsim as rtlsim
    from codesign.hw.constants_gen import verilog_include_dir

    caught = {}

    class Caught(Exception):
        pass

    def record(*, sources, **_):
        caught["sources"] = [Path(s) for s in sources]
        raise Caught

    project = accel.render_accel(pe, spec, "x_0")
    vectors = tmp_path / "vectors" / pe.vector_file
    vectors.parent.mkdir(parents=True)
    vectors.write_bytes(project.files[pe.vector_file])
    monkeypatch.setattr(rtlsim, "run_cocotb", record)
    with pytest.raises(Caught):
        accel.run_accel_rtl(pe, spec, vectors, tmp_path / "sim")
    sources = caught["sources"]
    deps = tmp_path / "iverilog.deps"
    subprocess.run(["iverilog", "-g2005", "-I", str(verilog_include_dir()), "-s", accel.RTL_TOP, "-M", str(deps),
                    "-o", str(tmp_path / "a.out"), *map(str, sources)], check=True, capture_output=True)
    return sorted({Path(line) for line in deps.read_text().splitlines() if line})


def packaged_files(commands) -> list[Path]:
    (added,) = [c for c in commands if c.name == "add_files"]
    return [Path(path) for path in parse_tcl_list(added.args[-1])]


@needs_tclsh
@pytest.mark.parametrize("pe_name, options", CASES, ids=["tt1", "tt1-64", "csb"])
def test_the_packaged_files_are_the_simulated_files_by_hash(tmp_path, monkeypatch, pe_name, options):
    pe = get_pe(pe_name)
    spec = pe.spec(**options)
    write_project(tmp_path / "rtl" / "x_0", render_rtl_ip(pe, spec, "x_0", "xc7z020clg484-1"))
    commands = lint_script(tmp_path / "rtl" / "x_0" / "package_ip.tcl").commands
    packaged = packaged_files(commands)
    simulated = cocotb_sources(pe, spec, tmp_path, monkeypatch)
    assert sorted(map(sha256, packaged)) == sorted(map(sha256, simulated))
    assert sorted(p.name for p in packaged) == sorted(p.name for p in simulated)
    assert all(p.parent == tmp_path / "rtl" / "x_0" / "src" for p in packaged)
    # every module of rtl/accel, whatever it holds today (never a list of our own)
    assert {p.name for p in accel.shell_rtl_sources()} <= {p.name for p in packaged}


@needs_tclsh
def test_the_packaging_script_under_the_lint(tmp_path):
    pe = get_pe("tt1")
    write_project(tmp_path / "x_0", render_rtl_ip(pe, pe.spec(), "x_0", "xc7z020clg484-1"))
    commands = lint_script(tmp_path / "x_0" / "package_ip.tcl").commands
    names = [c.name for c in commands]
    order = ["create_project", "add_files", "update_compile_order", "ipx::package_project", "ipx::infer_bus_interfaces",
             "ipx::associate_bus_interfaces", "ipx::add_address_block", "ipx::save_core", "close_project"]
    assert [names.index(name) for name in order] == sorted(names.index(name) for name in order)
    package = next(c for c in commands if c.name == "ipx::package_project")
    assert (package.option("-root_dir"), package.option("-vendor"), package.option("-library")) == (
        str(tmp_path / "x_0" / "ip"), "codesign", "rtl")
    props = {(c.args[0], c.args[1]) for c in commands if c.name == "set_property" and c.args[-1] == "core"}
    vendor, library, name, version = rtl_vlnv("x_0").split(":")
    assert {("name", name), ("version", version)} <= props and (vendor, library) == ("codesign", "rtl")
    assert ("top", "accel_top") in {(c.args[0], c.args[1]) for c in commands if c.name == "set_property"}
    inferred = {c.args[0] for c in commands if c.name == "ipx::infer_bus_interface"}
    assert inferred == {"ap_clk", "ap_rst_n", "interrupt"}
    associated = [c.option("-busif") for c in commands if c.name == "ipx::associate_bus_interfaces"]
    assert associated[:-1] == ["s_axi_control", *accel.data_ports()] and associated[-1] is None
    # the address block the block design assigns (<ip>/s_axi_control/Reg), listing the shell's registers
    assert next(c for c in commands if c.name == "ipx::add_address_block").args[0] == "Reg"
    rows = [c.args[0] for c in commands if c.name == "ipx::add_register"]
    offsets = [int(c.args[1], 16) for c in commands if c.name == "set_property" and c.args[0] == "address_offset"]
    assert dict(zip(rows, offsets)) == register_map()


def stream_design():
    spec = importlib.util.spec_from_file_location("deploy_conftest", Path(__file__).parents[1] / "deploy" / "conftest.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.stream_design()


@needs_tclsh
def test_a_build_folder_packages_every_ip_before_the_block_design_uses_it(tmp_path):
    """The default route end to end under the lint: each IP's package_ip.tcl runs (its own project, closed again)
    before the design's project; the block design adds codesign:rtl:<ip>_accel:1.0 from rtl/<ip>/ip."""
    from codesign.design.build import render_ip_projects, write_ip_projects
    from codesign.shell import vivado

    design = stream_design()
    manifest, projects = render_ip_projects(design)
    assert manifest["ip_route"] == "rtl" and {ip["ip_route"] for ip in manifest["ips"]} == {"rtl"}
    write_ip_projects(tmp_path, manifest, projects)
    vivado.write_vivado(tmp_path, vivado.render_vivado(manifest, board("zedboard")))
    commands = lint_script(tmp_path / "vivado" / "build.tcl").commands
    names = [c.name for c in commands]
    design_project = next(i for i, c in enumerate(commands) if c.name == "create_project" and c.args[1] == design.name)
    packaged = [c.option("-root_dir") for c in commands[:design_project] if c.name == "ipx::package_project"]
    assert packaged == [str(tmp_path / ip["ip_repo"]) for ip in manifest["ips"]]
    assert names[:design_project].count("close_project") == len(manifest["ips"])
    repos = parse_tcl_list(next(c for c in commands if c.name == "set_property" and c.args[0] == "ip_repo_paths").args[1])
    assert sorted(repos) == sorted(packaged)
    cells = {c.args[-1]: c.option("-vlnv") for c in commands if c.name == "create_bd_cell"}
    for ip in manifest["ips"]:
        assert cells[ip["name"]] == ip["vlnv"] == rtl_vlnv(ip["name"])
        pe = get_pe(ip["pe"])
        spec = pe.spec(**ip["spec"])
        script = tmp_path / ip["rtl_project"] / "package_ip.tcl"
        files = packaged_files(lint_script(script).commands)
        with_headers = accel.render_accel_rtl(pe, spec, tmp_path / "scratch" / ip["name"], held_sums=ip["held_sums"])
        from codesign.hw.constants_gen import verilog_include_dir

        expected = [*with_headers, *included_headers(with_headers, verilog_include_dir())]
        assert sorted(map(sha256, files)) == sorted(map(sha256, expected))


def test_the_hls_route_stays_an_option(tmp_path):
    from codesign.design.build import render_ip_projects

    manifest, projects = render_ip_projects(stream_design(), "hls")
    assert {ip["vlnv"] for ip in manifest["ips"]} == {accel.vlnv(ip["name"]) for ip in manifest["ips"]}
    assert not any(rel.startswith("rtl/") for rel in projects)
    with pytest.raises(ValueError, match="IP route 'vhdl' is not one of rtl, hls"):
        render_ip_projects(stream_design(), "vhdl")
