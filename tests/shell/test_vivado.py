"""The Vivado flow per board: manifest validation, deterministic Tcl, and the Tcl lint of the block design.

The lint (recorded, not executed by Vivado) checks order and arguments of the
calls; only the `vendor` test at the end runs Vivado itself.
"""

import copy
import json
import os
import shutil
from pathlib import Path

import pytest

from codesign.boards import board
from codesign.shell.build import ToolMissing
from codesign.shell.tcl_lint import ShimOptions, TclLintError, lint_script, parse_tcl_list, tcl_dict
from codesign.shell.vivado import (
    ManifestError,
    fewest_hp_ports,
    hp_port_of,
    VivadoBuildPlan,
    first_error_line,
    lint_vivado_build,
    plan_vivado_build,
    render_vivado,
    render_vivado_project,
    run_vivado_build,
    validate_manifest,
    write_vivado,
)

needs_tclsh = pytest.mark.skipif(shutil.which("tclsh") is None, reason="tclsh not installed (Debian package tcl8.6)")

# The accelerator shell's s_axilite layout (control 0x00, GIE 0x04, IER 0x08, ISR 0x0c, then the arguments:
# 64-bit pointers take 12 bytes, 32-bit scalars 8), written out here by hand for the example.
REGISTERS = {"CTRL": 0, "GIE": 4, "IER": 8, "ISR": 12, "in": 16, "out": 28, "n_in": 40, "n_out": 48,
             "n_transactions": 56, "calls": 64, "n_calls": 76}
BOARDS = {
    "zedboard": {"part": "xc7z020clg484-1", "ports": ("M_AXI_GP0", "S_AXI_HP0"), "base": 0x4000_0000,
                 "ps": "ps7", "clock": "FCLK_CLK0", "reset": "FCLK_RESET0_N",
                 "fclk": "CONFIG.PCW_FPGA0_PERIPHERAL_FREQMHZ", "board_part": "avnet.com:zedboard:part0:1.4"},
    "ultra96v2": {"part": "xczu3eg-sbva484-1-i", "ports": ("M_AXI_HPM0_FPD", "S_AXI_HP0_FPD"), "base": 0xA000_0000,
                  "ps": "zynq_ps", "clock": "pl_clk0", "reset": "pl_resetn0",
                  "fclk": "CONFIG.PSU__CRL_APB__PL0_REF_CTRL__FREQMHZ",
                  "board_part": "avnet.com:ultra96v2:part0:1.2"},
    "kv260": {"part": "xck26-sfvc784-2LV-c", "ports": ("M_AXI_HPM0_FPD", "S_AXI_HP0_FPD"), "base": 0xA000_0000,
              "ps": "zynq_ps", "clock": "pl_clk0", "reset": "pl_resetn0",
              "fclk": "CONFIG.PSU__CRL_APB__PL0_REF_CTRL__FREQMHZ", "board_part": "xilinx.com:kv260_som:part0:1.4"},
}


def example_manifest(board_name="zedboard"):
    """Two accelerator IPs (tt1_0, csb_0) at the first two 64 KiB slots of the board's control window."""
    facts = BOARDS[board_name]
    ips = []
    for slot, (name, pe) in enumerate((("tt1_0", "tt1"), ("csb_0", "csb"))):
        top = f"{name}_accel"
        ips.append({
            "name": name, "pe": pe, "top": top, "vlnv": f"codesign:hls:{top}:1.0",
            "base_address": facts["base"] + slot * 0x1_0000, "address_range": 0x1_0000, "registers": dict(REGISTERS),
            "data_ports": ["m_axi_gmem0", "m_axi_gmem1"], "hls_project": f"hls/{name}",
            "ip_repo": f"hls/{name}/codesign_prj/solution1/impl/ip", "spec": {},
            "buffers": {"in": {"dtype": "uint32", "max_words": 1024}, "out": {"dtype": "uint32", "max_words": 1024}},
        })
    return {"format": "codesign-design", "version": 2, "design": "demo", "board": board_name, "part": facts["part"],
            "clock_mhz": 100.0, "control_port": facts["ports"][0], "data_port": facts["ports"][1], "ips": ips}


def tree(directory: Path) -> dict[str, bytes]:
    return {str(p.relative_to(directory)): p.read_bytes() for p in sorted(directory.rglob("*")) if p.is_file()}


def rendered(tmp_path, board_name, manifest=None):
    build_dir = tmp_path / board_name
    render_vivado_project(manifest or example_manifest(board_name), board(board_name), build_dir)
    return build_dir


# --- rendering ----------------------------------------------------------------------------------


def test_render_writes_the_two_scripts_and_is_byte_deterministic(tmp_path):
    for board_name in BOARDS:
        first = render_vivado_project(example_manifest(board_name), board(board_name), tmp_path / "a" / board_name)
        render_vivado_project(example_manifest(board_name), board(board_name), tmp_path / "b" / board_name)
        assert [p.relative_to(tmp_path / "a" / board_name).as_posix() for p in first] == [
            "vivado/build.tcl", "vivado/create_project.tcl"]
        assert tree(tmp_path / "a" / board_name) == tree(tmp_path / "b" / board_name)
        text = (tmp_path / "a" / board_name / "vivado" / "create_project.tcl").read_text()
        assert "{{" not in text and "{%" not in text
    moved = example_manifest("zedboard")
    moved["ips"][1]["base_address"] = 0x4002_0000
    render_vivado_project(moved, board("zedboard"), tmp_path / "c")
    assert tree(tmp_path / "c") != tree(tmp_path / "a" / "zedboard")


# --- manifest validation: a clear error before anything is written --------------------------------


def _mutate(path, value):
    def change(manifest):
        target = manifest
        for key in path[:-1]:
            target = target[key]
        if value is _DELETE:
            del target[path[-1]]
        else:
            target[path[-1]] = value
    return change


_DELETE = object()


def _duplicate(manifest):
    manifest["ips"][1]["name"] = "tt1_0"


def _overlap(manifest):
    manifest["ips"][1]["base_address"] = 0x4000_0000
    manifest["ips"][1]["address_range"] = 0x2_0000


INVALID = {
    "unknown board": (_mutate(("board",), "pynq-z9"), "unknown board 'pynq-z9'"),
    "other board": (_mutate(("board",), "ultra96v2"), "design.json is for board 'ultra96v2', not 'zedboard'"),
    "part mismatch": (_mutate(("part",), "xczu3eg-sbva484-1-i"), "names part 'xczu3eg-sbva484-1-i'"),
    "port mismatch": (_mutate(("data_port",), "S_AXI_HP1"), "are not board zedboard's M_AXI_GP0/S_AXI_HP0"),
    "missing key": (_mutate(("clock_mhz",), _DELETE), "lacks key.*clock_mhz"),
    "missing IP key": (_mutate(("ips", 0, "ip_repo"), _DELETE), "IP 'tt1_0' lacks key.*ip_repo"),
    "format": (_mutate(("format",), "something"), "not a codesign-design version 2 manifest"),
    "version": (_mutate(("version",), 1), "not a codesign-design version 2 manifest"),
    "design name": (_mutate(("design",), "my design"), "design name 'my design'"),
    "no IPs": (_mutate(("ips",), []), "lists no IPs"),
    "duplicate": (_duplicate, "duplicate IP name 'tt1_0'"),
    "overlap": (_overlap, "overlaps IP tt1_0"),
    "misaligned": (_mutate(("ips", 1, "base_address"), 0x4000_8000), "0x40008000 is not aligned to its range 0x10000"),
    "not a power of two": (_mutate(("ips", 0, "address_range"), 0x3000), "must be a power of two"),
    "too small": (_mutate(("ips", 0, "address_range"), 0x800), "of at least 0x1000 bytes"),
    "below the window": (_mutate(("ips", 0, "base_address"), 0x3FFF_0000), "outside the M_AXI_GP0 window"),
    "above the window": (_mutate(("ips", 1, "base_address"), 0x8000_0000), "outside the M_AXI_GP0 window"),
    "vlnv": (_mutate(("ips", 0, "vlnv"), "codesign:hls:other_accel:1.0"), "must be vendor:library:tt1_0_accel:"),
    "bool address": (_mutate(("ips", 0, "base_address"), True), "must be integers"),
    "ip_repo escapes": (_mutate(("ips", 0, "ip_repo"), "../elsewhere"), "relative POSIX path inside the build"),
    "ip_repo absolute": (_mutate(("ips", 0, "ip_repo"), "/abs/ip"), "relative POSIX path"),
    "data ports": (_mutate(("ips", 0, "data_ports"), ["gmem0"]), "m_axi_\\* interface names"),
    "clock": (_mutate(("clock_mhz",), 0), "clock_mhz 0 must be a positive number"),
    "cell clash": (_mutate(("ips", 0, "name"), "ps7"), "collides with a block-design cell"),
    "data ports not the board's first": (_mutate(("data_ports",), ["S_AXI_HP1"]),
                                         "must be the first of board zedboard's high-performance ports"),
    "more data ports than the board has": (_mutate(("data_ports",), [f"S_AXI_HP{k}" for k in range(5)]),
                                           "must be the first of board zedboard's"),
    "hp_port beyond data_ports": (_mutate(("ips", 1, "hp_port"), 1), "IP csb_0: hp_port 1 must index"),
    "hp_port not an integer": (_mutate(("ips", 1, "hp_port"), "1"), "IP csb_0: hp_port '1' must index"),
}


@pytest.mark.parametrize("case", sorted(INVALID))
def test_invalid_manifests_are_refused_before_anything_is_written(tmp_path, case):
    change, message = INVALID[case]
    manifest = copy.deepcopy(example_manifest("zedboard"))
    change(manifest)
    if case == "cell clash":  # a consistent IP whose only fault is its name
        manifest["ips"][0].update(top="ps7", vlnv="codesign:hls:ps7:1.0")
    with pytest.raises(ValueError, match=message):
        render_vivado_project(manifest, board("zedboard"), tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_too_many_data_ports_for_one_smartconnect():
    manifest = example_manifest("zedboard")
    manifest["ips"][0]["data_ports"] = [f"m_axi_gmem{i}" for i in range(15)]
    with pytest.raises(ManifestError, match="17 data ports on S_AXI_HP0; its SmartConnect takes at most 16"):
        validate_manifest(manifest, board("zedboard"))


def many_ip_manifest(board_name, ips, ports):
    """``ips`` copies of the example's tt1 IP, spread round robin over the board's first ``ports`` HP ports."""
    manifest = example_manifest(board_name)
    template, base = manifest["ips"][0], BOARDS[board_name]["base"]
    manifest["ips"] = [{**copy.deepcopy(template), "name": f"tt1_{i}", "top": f"tt1_{i}_accel",
                        "vlnv": f"codesign:hls:tt1_{i}_accel:1.0", "base_address": base + i * 0x1_0000,
                        "hls_project": f"hls/tt1_{i}", "ip_repo": f"hls/tt1_{i}/codesign_prj/solution1/impl/ip",
                        "hp_port": hp_port_of(i, ports)} for i in range(ips)]
    manifest["data_ports"] = [port.port for port in board(board_name).vivado.data_ports[:ports]]
    return manifest


def test_the_fewest_ports_fit_every_smartconnect():
    assert [hp_port_of(i, 3) for i in range(7)] == [0, 1, 2, 0, 1, 2, 0]
    assert [fewest_hp_ports([2] * n, 4) for n in (1, 8, 9, 16, 17, 24, 25, 32)] == [1, 1, 2, 2, 3, 3, 4, 4]
    assert fewest_hp_ports([15, 1, 2], 4) == 3  # round robin over two puts 15 + 2 on the first
    with pytest.raises(ValueError, match="33 IPs with 66 data ports do not fit 4 high-performance ports"):
        fewest_hp_ports([2] * 33, 4)
    with pytest.raises(ManifestError, match="18 data ports on S_AXI_HP0"):  # nine IPs through one port
        validate_manifest(many_ip_manifest("zedboard", 9, 1), board("zedboard"))
    validate_manifest(many_ip_manifest("zedboard", 9, 2), board("zedboard"))


def test_the_example_manifests_are_valid():
    for board_name in BOARDS:
        validate_manifest(example_manifest(board_name), board(board_name))


# --- the block design under the Tcl lint, per board and mode --------------------------------------

EXPECTED_COMMANDS = {
    "get_board_parts", "open", "create_project", "current_project", "set_property", "update_ip_catalog",
    "get_ipdefs", "get_property", "create_bd_design", "create_bd_cell", "apply_bd_automation", "get_bd_intf_pins",
    "connect_bd_intf_net", "get_bd_pins", "connect_bd_net", "get_bd_addr_spaces", "get_bd_addr_segs",
    "assign_bd_address", "validate_bd_design", "save_bd_design", "get_files", "generate_target", "make_wrapper",
    "add_files", "current_fileset", "launch_runs", "wait_on_run", "get_runs", "file copy",
}
MODES = {"board": lambda b: (BOARDS[b]["board_part"],), "part": lambda b: ()}


def first(commands, name, predicate=lambda c: True):
    return next(i for i, c in enumerate(commands) if c.name == name and predicate(c))


def last(commands, name):
    return max(i for i, c in enumerate(commands) if c.name == name)


@needs_tclsh
@pytest.mark.parametrize("mode", sorted(MODES))
@pytest.mark.parametrize("board_name", sorted(BOARDS))
def test_block_design_under_the_lint(tmp_path, board_name, mode):
    facts, manifest = BOARDS[board_name], example_manifest(board_name)
    build_dir = rendered(tmp_path, board_name, manifest)
    result = lint_script(build_dir / "vivado" / "build.tcl", ShimOptions(board_parts=MODES[mode](board_name)))
    commands = result.commands
    names = [c.name for c in commands]
    assert set(names) <= EXPECTED_COMMANDS, set(names) - EXPECTED_COMMANDS

    # the mode, chosen by the Tcl-side board-part check, is recorded
    assert json.loads(result.written["build_mode.json"]) == {
        "mode": mode, "board_part": facts["board_part"] if mode == "board" else "", "part": facts["part"]}

    # project first, with the part; the board part only in board mode
    project = first(commands, "create_project")
    assert commands[project].option("-part") == facts["part"] and commands[project].args[1] == "demo"
    board_part_sets = [c for c in commands if c.name == "set_property" and c.args[0] == "board_part"]
    assert [c.args[1] for c in board_part_sets] == ([facts["board_part"]] if mode == "board" else [])
    repos = parse_tcl_list(next(c for c in commands if c.name == "set_property" and c.args[0] == "ip_repo_paths").args[1])
    assert repos == sorted(str(build_dir / ip["ip_repo"]) for ip in manifest["ips"])

    # block design after the project; the PS before its automation; the automation's preset follows the mode
    design = first(commands, "create_bd_design")
    ps_cell = first(commands, "create_bd_cell", lambda c: c.args[-1] == facts["ps"])
    automation = first(commands, "apply_bd_automation")
    assert project < design < ps_cell < automation
    assert commands[automation].args[-1] == f"/{facts['ps']}"
    assert f'apply_board_preset "{1 if mode == "board" else 0}"' in commands[automation].option("-config")

    # PS properties: the full configuration only without board files; ports and the 100 MHz clock always
    ps_dicts = [tcl_dict(c.option("-dict")) for c in commands
                if c.name == "set_property" and c.option("-dict") and c.args[-1] == f"/{facts['ps']}"]
    config = board(board_name).vivado
    assert ps_dicts[-1] == {**config.ports, facts["fclk"]: "100"}
    assert (ps_dicts[0] == dict(config.part_config)) == (mode == "part")
    assert len(ps_dicts) == (2 if mode == "part" else 1)

    # every IP of the manifest, by its VLNV, checked in the catalog and placed in the design
    cells = {c.args[-1]: c.option("-vlnv") for c in commands if c.name == "create_bd_cell"}
    for ip in manifest["ips"]:
        assert cells[ip["name"]] == ip["vlnv"]
        assert any(c.name == "get_ipdefs" and c.args == ("-quiet", ip["vlnv"]) for c in commands)

    # Xilinx IPs at whatever version Vivado offers in IP integrator (the shim answers 1.0)
    xilinx = [c for c in commands if c.name == "get_ipdefs" and c.args[-1].startswith("xilinx.com:")]
    assert {c.args[-1] for c in xilinx} == {f"{config.ps_ip}:*", "xilinx.com:ip:axi_interconnect:*",
                                            "xilinx.com:ip:smartconnect:*", "xilinx.com:ip:proc_sys_reset:*"}
    assert all(c.option("-filter") == "design_tool_contexts =~ *IPI*" for c in xilinx)
    assert cells[facts["ps"]] == f"{config.ps_ip}:1.0"

    # control through the interconnect, data through the SmartConnect into the HP port
    intf = [c.args for c in commands if c.name == "connect_bd_intf_net"]
    control_port, data_port = facts["ports"]
    assert (f"/{facts['ps']}/{control_port}", "/axi_control/S00_AXI") in intf
    assert ("/axi_data/M00_AXI", f"/{facts['ps']}/{data_port}") in intf
    for slot, ip in enumerate(manifest["ips"]):
        assert (f"/axi_control/M{slot:02d}_AXI", f"/{ip['name']}/s_axi_control") in intf
        for port in ip["data_ports"]:
            assert any(a[0] == f"/{ip['name']}/{port}" and a[1].startswith("/axi_data/S") for a in intf)
    assert len({a[1] for a in intf if a[1].startswith("/axi_data/S")}) == 4

    # one clock from the PS into every clock pin, one reset through proc_sys_reset
    nets = [c.args for c in commands if c.name == "connect_bd_net"]
    clocked = {sink for source, sink in nets if source == f"/{facts['ps']}/{facts['clock']}"}
    for ip in manifest["ips"]:
        assert f"/{ip['name']}/ap_clk" in clocked
        assert ("/rst_pl/peripheral_aresetn", f"/{ip['name']}/ap_rst_n") in nets
    assert {"/axi_control/ACLK", "/axi_data/aclk", "/rst_pl/slowest_sync_clk"} <= clocked
    assert (f"/{facts['ps']}/{facts['reset']}", "/rst_pl/ext_reset_in") in nets

    # the manifest's exact offsets and ranges, on the PS data space
    assigned = [c for c in commands if c.name == "assign_bd_address" and c.option("-offset")]
    assert [(c.option("-offset"), c.option("-range"), c.args[-2]) for c in assigned] == [
        (f"0x{ip['base_address']:08X}", f"0x{ip['address_range']:08X}", f"/{ip['name']}/s_axi_control/Reg")
        for ip in manifest["ips"]]
    assert all(c.option("-target_address_space") == f"/{facts['ps']}/Data" for c in assigned)

    # addresses, validation, wrapper, runs, then the copies of .bit and .hwh under the design's name
    validate, wrapper = first(commands, "validate_bd_design"), first(commands, "make_wrapper")
    runs, wait = first(commands, "launch_runs"), first(commands, "wait_on_run")
    assert last(commands, "assign_bd_address") < validate < wrapper < runs < wait < first(commands, "file copy")
    assert commands[runs].args[:3] == ("impl_1", "-to_step", "write_bitstream")
    copies = [c.args for c in commands if c.name == "file copy"]
    project_dir = build_dir / "vivado" / "project"
    assert copies == [
        ("-force", str(project_dir / "demo.runs" / "impl_1" / "demo_wrapper.bit"), str(build_dir / "demo.bit")),
        ("-force", str(project_dir / "demo.gen" / "sources_1" / "bd" / "demo" / "hw_handoff" / "demo.hwh"),
         str(build_dir / "demo.hwh")),
    ]


@needs_tclsh
def test_an_installed_older_board_part_is_used(tmp_path):
    build_dir = rendered(tmp_path, "zedboard")
    result = lint_script(build_dir / "vivado" / "build.tcl",
                         ShimOptions(board_parts=("avnet.com:zedboard:part0:1.2", "avnet.com:zedboard:part0:1.3")))
    assert json.loads(result.written["build_mode.json"])["board_part"] == "avnet.com:zedboard:part0:1.3"


@needs_tclsh
@pytest.mark.parametrize("installed, chosen", [
    (("em.avnet.com:zed:part0:1.3",), "em.avnet.com:zed:part0:1.3"),
    (("em.avnet.com:zed:part0:1.3", "em.avnet.com:zed:part0:1.4"), "em.avnet.com:zed:part0:1.4"),
    (("em.avnet.com:zed:part0:1.4", "avnet.com:zedboard:part0:1.3"), "avnet.com:zedboard:part0:1.3"),
    (("em.avnet.com:zed:part0:1.4", "avnet.com:zedboard:part0:1.4"), "avnet.com:zedboard:part0:1.4"),
])
def test_the_zedboard_under_its_other_board_part_names_builds_in_board_mode(tmp_path, installed, chosen):
    """An install that names the ZedBoard em.avnet.com:zed (boards/zedboard.toml board_part_patterns) still gets
    board mode; the TOML's own name wins where both are installed."""
    build_dir = rendered(tmp_path, "zedboard")
    result = lint_script(build_dir / "vivado" / "build.tcl", ShimOptions(board_parts=installed))
    assert json.loads(result.written["build_mode.json"]) == {"mode": "board", "board_part": chosen,
                                                              "part": BOARDS["zedboard"]["part"]}
    assert [c.args[1] for c in result.commands if c.name == "set_property" and c.args[0] == "board_part"] == [chosen]
    asked = [c.args[-1] for c in result.commands if c.name == "get_board_parts"]
    assert asked[0] == "avnet.com:zedboard:part0:*"


@needs_tclsh
@pytest.mark.parametrize("installed, chosen", [
    (("xilinx.com:kv260_som:part0:1.2", "xilinx.com:kv260_som:part0:1.3"), "xilinx.com:kv260_som:part0:1.3"),
    (("xilinx.com:kv260:part0:1.1",), "xilinx.com:kv260:part0:1.1"),
    (("xilinx.com:kv260:part0:1.1", "xilinx.com:kv260_som:part0:1.3"), "xilinx.com:kv260_som:part0:1.3"),
])
def test_the_kv260_under_an_older_or_first_board_part_name_builds_in_board_mode(tmp_path, installed, chosen):
    """An older Vivado has the K26 SOM's board files at an older version, or under their first name
    xilinx.com:kv260 (boards/kv260.toml board_part_patterns): still board mode, kv260_som preferred."""
    build_dir = rendered(tmp_path, "kv260")
    result = lint_script(build_dir / "vivado" / "build.tcl", ShimOptions(board_parts=installed))
    assert json.loads(result.written["build_mode.json"]) == {"mode": "board", "board_part": chosen,
                                                              "part": BOARDS["kv260"]["part"]}
    assert [c.args[1] for c in result.commands if c.name == "set_property" and c.args[0] == "board_part"] == [chosen]


@needs_tclsh
def test_part_mode_can_be_forced(tmp_path):
    build_dir = rendered(tmp_path, "ultra96v2")
    result = lint_script(build_dir / "vivado" / "build.tcl", ShimOptions(
        board_parts=(BOARDS["ultra96v2"]["board_part"],), env={"CODESIGN_VIVADO_MODE": "part"}))
    assert json.loads(result.written["build_mode.json"])["mode"] == "part"
    assert not any(c.name == "set_property" and c.args[0] == "board_part" for c in result.commands)


@needs_tclsh
@pytest.mark.parametrize("status, progress", [("write_bitstream ERROR", "100%"), ("Running route_design...", "80%")])
def test_an_incomplete_run_stops_the_script_before_any_copy(tmp_path, status, progress):
    build_dir = rendered(tmp_path, "zedboard")
    with pytest.raises(TclLintError, match="implementation of demo did not complete"):
        lint_script(build_dir / "vivado" / "build.tcl", ShimOptions(run_status=status, run_progress=progress))


# --- building: plan and run -------------------------------------------------------------------------


def build_folder(tmp_path, board_name="zedboard"):
    build_dir = rendered(tmp_path, board_name)
    (build_dir / "design.json").write_text(json.dumps(example_manifest(board_name)))
    return build_dir


def test_plan_names_the_command_and_the_two_outputs(tmp_path):
    build_dir = build_folder(tmp_path)
    plan = plan_vivado_build(build_dir)
    assert plan.command[:6] == ["vivado", "-mode", "batch", "-notrace", "-source", "vivado/build.tcl"]
    assert plan.bitstream == build_dir.resolve() / "demo.bit" and plan.handoff == build_dir.resolve() / "demo.hwh"


def test_run_refuses_without_vivado_and_gives_the_command(tmp_path, monkeypatch):
    monkeypatch.setattr(shutil, "which", lambda name: None)
    build_dir = build_folder(tmp_path)
    plan = plan_vivado_build(build_dir)
    assert plan.tool is None
    with pytest.raises(ToolMissing, match=r"vivado is not on PATH.*run: cd .* && vivado -mode batch -notrace "
                                          r"-source vivado/build.tcl -log vivado/vivado.log"):
        run_vivado_build(plan)
    assert not plan.bitstream.exists()


def test_an_unchecked_plan_only_spells_the_command(tmp_path):
    plan = plan_vivado_build(Path("."), check=False)
    assert plan.describe().startswith("cd . && vivado -mode batch") and plan.bitstream is None
    if plan.tool is not None:
        with pytest.raises(ValueError, match="check=False"):
            run_vivado_build(plan)


def test_write_vivado_takes_only_the_rendered_scripts(tmp_path):
    files = render_vivado(example_manifest("zedboard"), board("zedboard"))
    assert sorted(files) == ["vivado/build.tcl", "vivado/create_project.tcl"]
    with pytest.raises(ValueError, match="not Vivado scripts"):
        write_vivado(tmp_path, {**files, "design.json": b"{}"})
    assert not any(tmp_path.iterdir())


@pytest.mark.parametrize("record", ['{"mode": "bo', "", '{"mode": 1}'], ids=["truncated", "empty", "mode_not_a_string"])
def test_a_broken_build_mode_record_names_the_file(tmp_path, record):
    """Vivado's mode record is read back through the one JSON loader: a broken one is named, not a KeyError."""
    import dataclasses
    import stat

    from codesign.io.jsonfile import JsonFileError

    build_dir = build_folder(tmp_path)
    fake = tmp_path / "fake-vivado"
    fake.write_text(f"#!/bin/sh\nsleep 0.05\ntouch demo.bit demo.hwh\nprintf '%s' '{record}' > vivado/build_mode.json\n")
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    plan = dataclasses.replace(plan_vivado_build(build_dir), tool=str(fake))
    with pytest.raises(JsonFileError, match=r"build_mode\.json: Vivado build mode record: "):
        run_vivado_build(plan)


def test_plan_refuses_a_folder_that_is_not_a_build(tmp_path):
    with pytest.raises(FileNotFoundError, match="no design.json"):
        plan_vivado_build(tmp_path)
    build_dir = build_folder(tmp_path)
    (build_dir / "vivado" / "build.tcl").unlink()
    with pytest.raises(FileNotFoundError, match="render the Vivado scripts first"):
        plan_vivado_build(build_dir)
    (build_dir / "design.json").write_text(json.dumps({**example_manifest("zedboard"), "board": "nope"}))
    with pytest.raises(ManifestError, match="unknown board 'nope'"):
        plan_vivado_build(build_dir)


@needs_tclsh
def test_lint_of_a_build_folder_in_both_modes_writes_nothing(tmp_path):
    build_dir = build_folder(tmp_path)
    before = tree(build_dir)
    for board_files, mode in ((True, "board"), (False, "part")):
        result = lint_vivado_build(build_dir, board_files=board_files)
        assert json.loads(result.written["build_mode.json"])["mode"] == mode
        assert result.describe().startswith("Tcl lint (recorded, not executed by Vivado)")
    assert tree(build_dir) == before


def test_first_error_line_of_a_log(tmp_path):
    log = tmp_path / "vivado.log"
    log.write_text("INFO: [Common 17-206] Exiting\nWARNING: x\nERROR: [BD 41-237] FREQ_HZ mismatch\nERROR: second\n")
    assert first_error_line(log) == "ERROR: [BD 41-237] FREQ_HZ mismatch"
    assert first_error_line(tmp_path / "absent.log") is None


@pytest.mark.vendor
@pytest.mark.skipif(shutil.which("vivado") is None, reason="vivado not on PATH")
@pytest.mark.skipif("CODESIGN_VIVADO_BUILD_DIR" not in os.environ,
                    reason="set CODESIGN_VIVADO_BUILD_DIR to a build folder whose HLS IPs are exported")
def test_real_vivado_builds_bitstream_and_handoff():
    plan = plan_vivado_build(Path(os.environ["CODESIGN_VIVADO_BUILD_DIR"]))
    assert isinstance(plan, VivadoBuildPlan) and plan.tool is not None
    result = run_vivado_build(plan)
    assert result.bitstream.stat().st_size > 0 and result.handoff.stat().st_size > 0
    assert result.bitstream.stem == result.handoff.stem and result.mode in ("board", "part")


# --- the contract with the accelerator shell: what run_hls.tcl exports is what the block design adds ----


def test_the_hand_written_example_follows_the_shell_contract():
    from codesign.shell import ip as accel

    for ip in example_manifest("zedboard")["ips"]:
        fields = accel.ip_fields(ip["name"])
        assert ip["registers"] == fields["registers"] == accel.register_map()
        assert (ip["top"], ip["vlnv"], ip["data_ports"]) == (fields["top"], fields["vlnv"], fields["data_ports"])
        assert ip["ip_repo"] == f"{ip['hls_project']}/{fields['ip_repo_relpath']}"


@needs_tclsh
@pytest.mark.parametrize("name, pe_name", [("csb_0", "csb"), ("tt1_0", "tt1")])
def test_the_exported_ip_is_the_one_the_block_design_adds(tmp_path, name, pe_name):
    from codesign.shell import ip as accel
    from codesign.hw.render import write_project
    from codesign.hw.target import BuildTarget
    from codesign.pe import get_pe

    manifest = example_manifest("zedboard")
    ip = next(entry for entry in manifest["ips"] if entry["name"] == name)
    pe = get_pe(pe_name)
    spec = pe.spec()
    target = BuildTarget(part=manifest["part"], clock_period_ns=1000.0 / manifest["clock_mhz"])
    project = accel.render_accel(pe, spec, name, target, stimulus=pe.build_stimulus(spec, pe.stimulus_options()))
    build_dir = tmp_path / "build"
    write_project(build_dir / ip["hls_project"], project)
    hls = lint_script(build_dir / ip["hls_project"] / "run_hls.tcl").commands
    export = next(c for c in hls if c.name == "config_export")
    exported = ":".join(export.option(flag) for flag in ("-vendor", "-library", "-ipname", "-version"))
    assert exported == ip["vlnv"]
    assert [n for n in (c.name for c in hls) if n in ("config_export", "export_design")] == [
        "config_export", "export_design"]
    # Vitis HLS puts the exported IP at <project>/<solution>/impl/ip: the manifest's ip_repo
    project_name = next(c for c in hls if c.name == "open_project").args[-1]
    solution = next(c for c in hls if c.name == "open_solution").args[1]
    assert ip["ip_repo"] == f"{ip['hls_project']}/{project_name}/{solution}/impl/ip"
    assert next(c for c in hls if c.name == "set_part").args == (manifest["part"],)

    render_vivado_project(manifest, board("zedboard"), build_dir)
    vivado_commands = lint_script(build_dir / "vivado" / "build.tcl").commands
    assert any(c.name == "create_bd_cell" and c.option("-vlnv") == exported and c.args[-1] == name
               for c in vivado_commands)
    repos = parse_tcl_list(next(c for c in vivado_commands if c.name == "set_property"
                                and c.args[0] == "ip_repo_paths").args[1])
    assert str(build_dir / ip["ip_repo"]) in repos


@needs_tclsh
@pytest.mark.parametrize("board_name", sorted(BOARDS))
def test_a_block_design_over_several_hp_ports_under_the_lint(tmp_path, board_name):
    """Twelve IPs over three HP ports: one SmartConnect per port, each IP on its round-robin port, every port
    enabled on the PS and clocked, every SmartConnect clocked and reset."""
    facts, manifest = BOARDS[board_name], many_ip_manifest(board_name, 12, 3)
    build_dir = rendered(tmp_path, board_name, manifest)
    commands = lint_script(build_dir / "vivado" / "build.tcl", ShimOptions(board_parts=())).commands
    ports = board(board_name).vivado.data_ports[:3]
    ics = ["axi_data", "axi_data1", "axi_data2"]
    smartconnects = [c.args[-1] for c in commands if c.name == "create_bd_cell" and "smartconnect" in str(c.args)]
    assert smartconnects == ics
    sizes = [tcl_dict(c.option("-dict")) for c in commands
             if c.name == "set_property" and c.option("-dict") and "CONFIG.NUM_SI" in c.option("-dict")]
    assert [s["CONFIG.NUM_SI"] for s in sizes] == ["8", "8", "8"]  # four IPs of two data ports each
    intf = [c.args for c in commands if c.name == "connect_bd_intf_net"]
    for k, (ic, port) in enumerate(zip(ics, ports)):
        assert (f"/{ic}/M00_AXI", f"/{facts['ps']}/{port.port}") in intf
        for ip in manifest["ips"][k::3]:
            for data_port in ip["data_ports"]:
                assert any(a[0] == f"/{ip['name']}/{data_port}" and a[1].startswith(f"/{ic}/S") for a in intf)
    ps_dicts = [tcl_dict(c.option("-dict")) for c in commands
                if c.name == "set_property" and c.option("-dict") and c.args[-1] == f"/{facts['ps']}"]
    enabled = {key: value for port in ports for key, value in port.properties.items()}
    assert enabled and enabled.items() <= ps_dicts[-1].items()
    assert not set(board(board_name).vivado.data_ports[3].properties) & set(ps_dicts[-1])  # the fourth stays off
    nets = [c.args for c in commands if c.name == "connect_bd_net"]
    clocked = {sink for source, sink in nets if source == f"/{facts['ps']}/{facts['clock']}"}
    assert {f"/{facts['ps']}/{port.clock_pin}" for port in ports} | {f"/{ic}/aclk" for ic in ics} <= clocked
    assert {("/rst_pl/peripheral_aresetn", f"/{ic}/aresetn") for ic in ics} <= set(nets)
