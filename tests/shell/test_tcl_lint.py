"""The Tcl lint (recorded, not executed by Vivado): the shim records calls in order, and catches what tclsh can."""

import json
import shutil
import subprocess

import pytest

from codesign.shell.build import ToolMissing
from codesign.hw.flow import generate_project
from codesign.shell.tcl_lint import (
    LINT_LABEL,
    SHIM,
    ShimOptions,
    TclLintError,
    lint_script,
    lint_tcl,
    parse_tcl_list,
    tcl_dict,
)
from codesign.pe import get_pe, pe_names

pytestmark = pytest.mark.skipif(shutil.which("tclsh") is None, reason="tclsh not installed (Debian package tcl8.6)")


def write(tmp_path, text, name="script.tcl"):
    path = tmp_path / name
    path.write_text(text)
    return path


def test_commands_are_recorded_in_order_with_substituted_arguments(tmp_path):
    script = write(tmp_path, """
create_project demo ./prj -part xc7z020clg484-1
create_bd_design top
set ps [create_bd_cell -type ip -vlnv xilinx.com:ip:processing_system7:5.5 ps7]
set_property -dict [list CONFIG.A {1 2} CONFIG.B "x y"] $ps
connect_bd_net [get_bd_pins ps7/FCLK_CLK0] [get_bd_pins ps7/M_AXI_GP0_ACLK]
""")
    commands = lint_tcl(script)
    assert [c.name for c in commands] == ["create_project", "create_bd_design", "create_bd_cell", "set_property",
                                          "get_bd_pins", "get_bd_pins", "connect_bd_net"]
    assert commands[0].args == ("demo", "./prj", "-part", "xc7z020clg484-1")
    assert commands[2].option("-vlnv") == "xilinx.com:ip:processing_system7:5.5"
    assert commands[3].args[2] == "/ps7"  # the handle create_bd_cell returned
    assert tcl_dict(commands[3].option("-dict")) == {"CONFIG.A": "1 2", "CONFIG.B": "x y"}
    assert commands[-1].args == ("/ps7/FCLK_CLK0", "/ps7/M_AXI_GP0_ACLK")


def test_a_misspelt_command_fails_the_lint(tmp_path):
    script = write(tmp_path, "create_project demo . -part xc7z020clg484-1\ncreate_bd_desing top\n")
    with pytest.raises(TclLintError, match='invalid command name "create_bd_desing"') as caught:
        lint_tcl(script)
    assert LINT_LABEL in str(caught.value)


def test_a_tcl_syntax_error_fails_the_lint(tmp_path):
    script = write(tmp_path, "create_project demo . -part xc7z020clg484-1\nif {1} {\n  puts unbalanced\n")
    with pytest.raises(TclLintError, match="missing close-brace"):
        lint_tcl(script)


def test_a_cell_used_before_it_is_created_fails_the_lint(tmp_path):
    script = write(tmp_path, "create_project demo . -part p\ncreate_bd_design top\nget_bd_pins ps7/FCLK_CLK0\n")
    with pytest.raises(TclLintError, match="no block-design cell named 'ps7'"):
        lint_tcl(script)
    script = write(tmp_path, "create_bd_design top\n", "early.tcl")
    with pytest.raises(TclLintError, match="no open project"):
        lint_tcl(script)


def test_board_parts_and_run_status_are_lint_switches(tmp_path):
    script = write(tmp_path, """
puts [get_board_parts -quiet avnet.com:zedboard:part0:*]
create_project demo . -part p
puts [get_property STATUS [get_runs impl_1]]
""")
    present = lint_script(script, ShimOptions(board_parts=("avnet.com:zedboard:part0:1.4", "other:b:part0:1.0")))
    assert present.stdout.splitlines() == ["avnet.com:zedboard:part0:1.4", "write_bitstream Complete!"]
    absent = lint_script(script, ShimOptions(run_status="synth_design ERROR"))
    assert absent.stdout.splitlines() == ["", "synth_design ERROR"]


def test_writes_are_sandboxed_and_copies_only_recorded(tmp_path):
    target = tmp_path / "copied.bit"
    script = write(tmp_path, f"""
set f [open {tmp_path / 'mode.json'} w]
puts $f hello
close $f
file copy -force {tmp_path / 'nowhere.bit'} {target}
""")
    result = lint_script(script)
    assert result.written == {"mode.json": "hello\n"}
    assert not (tmp_path / "mode.json").exists() and not target.exists()
    assert [c.name for c in result.commands] == ["open", "file copy"]
    assert LINT_LABEL in result.describe()


def test_exit_with_a_failure_status_fails_the_lint(tmp_path):
    with pytest.raises(TclLintError, match="exit 2"):
        lint_tcl(write(tmp_path, "exit 2\n"))


def test_missing_tclsh_names_the_package(tmp_path, monkeypatch):
    monkeypatch.setattr(shutil, "which", lambda name: None)
    with pytest.raises(ToolMissing, match="tcl8.6"):
        lint_tcl(write(tmp_path, "puts hi\n"))


def test_shim_options_refuse_a_bare_string():
    with pytest.raises(ValueError, match="board_parts"):
        ShimOptions(board_parts="avnet.com:zedboard:part0:1.4")


@pytest.mark.parametrize("text", [
    'a {b c} "d e" f\\ g', "{a {b {c}}} x", 'CONFIG.X "MIO 48 .. 49" CONFIG.Y -0.073', '"q\\"uote" {}', "",
])
def test_tcl_list_parser_agrees_with_tclsh(tmp_path, text):
    program = write(tmp_path, "set out {}\nforeach x [lindex $argv 0] { lappend out \"\\\"[string map {\\\\ \\\\\\\\ \\\" \\\\\\\"} $x]\\\"\" }\n"
                              "puts \"\\[[join $out ,]\\]\"\n", "split.tcl")
    done = subprocess.run(["tclsh", str(program), text], capture_output=True, text=True, check=True)
    assert parse_tcl_list(text) == json.loads(done.stdout)


def test_tcl_list_parser_refuses_unbalanced_input():
    with pytest.raises(ValueError, match="braces"):
        parse_tcl_list("a {b")
    with pytest.raises(ValueError, match="odd"):
        tcl_dict("a b c")


def test_the_shim_ships_beside_the_module():
    assert SHIM.is_file() and "recorded, not executed by Vivado" in SHIM.read_text()


# --- the HLS scripts `codesign generate` renders, for every registered PE --------------------------

HLS_COMMANDS = {"open_project", "set_top", "add_files", "open_solution", "set_part", "create_clock",
                "csim_design", "csynth_design", "cosim_design", "export_design", "exit"}


@pytest.mark.parametrize("name", pe_names())
def test_run_hls_of_every_pe_passes_the_lint(tmp_path, name):
    pe = get_pe(name)
    spec = pe.spec()
    generate_project(pe, spec, tmp_path / name)
    commands = lint_tcl(tmp_path / name / "run_hls.tcl")
    names = [c.name for c in commands]
    assert set(names) <= HLS_COMMANDS, set(names) - HLS_COMMANDS
    order = ["open_project", "set_top", "open_solution", "set_part", "create_clock", "csim_design",
             "csynth_design", "cosim_design", "export_design", "exit"]
    assert [n for n in names if n != "add_files"] == order
    by_name = {c.name: c for c in commands}
    assert by_name["set_top"].args == (f"{name}_kernel",)
    assert by_name["set_part"].args == ("xc7z020clg484-1",)
    assert by_name["create_clock"].args == ("-period", "10.0", "-name", "default")
    assert by_name["export_design"].args == ("-format", "ip_catalog")
    added = [c.args[-1] for c in commands if c.name == "add_files"]
    for source in (*pe.kernel_files, pe.testbench_file):
        assert str(tmp_path / name / source) in added
    vectors = str(tmp_path / name / pe.vector_file)
    assert by_name["csim_design"].args == ("-argv", vectors) == by_name["cosim_design"].args


def test_run_hls_refuses_a_missing_vector_file_under_the_lint(tmp_path):
    pe = get_pe("csb")
    generate_project(pe, pe.spec(), tmp_path / "csb")
    (tmp_path / "csb" / pe.vector_file).unlink()
    with pytest.raises(TclLintError, match="golden vector file .* does not exist"):
        lint_tcl(tmp_path / "csb" / "run_hls.tcl")


# --- the accelerator shell's run_hls.tcl: 64-bit pointers always, the alignment beside a widened port -----


@pytest.mark.parametrize("pe_name, options, alignment", [("csb", {}, None), ("tt1", {}, None),
                                                         ("tt1", {"stream_bits": 64}, "8")])
def test_accel_run_hls_keeps_64_bit_pointers_and_aligns_widened_ports(tmp_path, pe_name, options, alignment):
    """`config_interface -m_axi_addr64=true` holds the register map of codesign/contracts/shell.py (64-bit
    pointers: `out` at 0x1c, not 0x18) on every Vitis HLS version; a PE whose stream word is wider than 32 bits
    gets max_widen_bitwidth in its pragma and the matching m_axi_alignment_byte_size (its bytes) here."""
    from codesign.contracts.shell import POINTER_BITS, register_map
    from codesign.hw.render import write_project
    from codesign.shell.ip import render_accel, stream_word_bits

    pe = get_pe(pe_name)
    spec = pe.spec(**options)
    project = render_accel(pe, spec, "x_0")
    write_project(tmp_path / "x_0", project)
    commands = lint_tcl(tmp_path / "x_0" / "run_hls.tcl")
    names = [c.name for c in commands]
    configs = [c.args for c in commands if c.name == "config_interface"]
    assert ("-m_axi_addr64=true",) in configs and POINTER_BITS == 64 and register_map()["out"] == 0x1c
    aligned = [args[1] for args in configs if args[0] == "-m_axi_alignment_byte_size"]
    assert aligned == ([] if alignment is None else [alignment])
    # solution-level settings: after open_solution, before synthesis
    solution, synthesis = names.index("open_solution"), names.index("csynth_design")
    assert all(solution < i < synthesis for i, c in enumerate(commands) if c.name == "config_interface")
    pragmas = project.files["x_0_accel.cpp"].decode()
    widened = f"max_widen_bitwidth = {stream_word_bits(pe, spec)}" in pragmas
    assert widened == (alignment is not None)
    if alignment is not None:
        assert int(alignment) * 8 == stream_word_bits(pe, spec)
