"""The accelerator shell's HLS side: register map, rendering, and C-sim of the shell == golden, bit for bit."""

from __future__ import annotations

import re
import shutil
import subprocess

import numpy as np
import pytest

from codesign.shell import ip as accel
from codesign.shell.ip import SHELL_ARGS, ShellArg, register_map
from codesign.hw.aptypes import ap_types_dir
from codesign.hw.render import RenderError
from codesign.hw.target import BuildTarget
from codesign.pe import get_pe
from codesign.pe.csb.pe import CsbStimulusOptions
from codesign.pe.csb.spec import CsbSpec
from codesign.pe.fpmac_array.spec import FpmacArraySpec
from codesign.pe.fpmac_array.stimulus import FpmacArrayStimulusOptions
from codesign.pe.tt.spec import Tt1Spec, Tt2Spec, Tt3Spec
from codesign.pe.tt.stimulus import TtStimulusOptions

needs_gxx = pytest.mark.skipif(shutil.which("g++") is None, reason="g++ is not on PATH")

# Small specs and stimulus: every op of the PE, directed and random, in a few hundred words.
SMALL = {
    "csb": (CsbSpec(block_rows=3, block_cols=8, batch=2, acc_bits=16), CsbStimulusOptions(min_macs_per_op=300)),
    "tt1": (Tt1Spec(lanes=4, rows=3, a_bits=16, b_bits=16, acc_bits=16, max_j=5, max_k=9, max_l=7),
            TtStimulusOptions(min_macs=2000)),
    "tt2": (Tt2Spec(lanes=4, rows=3, a_bits=16, b_bits=16, acc_bits=16, max_j=5, max_k=9, max_l=7),
            TtStimulusOptions(min_macs=2000)),
    "tt3": (Tt3Spec(lanes=4, a_bits=4, b_bits=8, max_j=9), TtStimulusOptions(min_macs=2000)),
    "fpmac_array": (FpmacArraySpec(exp_bits=8, max_fb=7, rounding="toward_zero", rows=2, cols=4, max_m=7, max_n=9,
                                   max_k=16), FpmacArrayStimulusOptions(min_macs=2000)),
}


@pytest.fixture(scope="module")
def build_dir(tmp_path_factory):
    """One g++ build cache for the module: identical shell sources compile once."""
    return tmp_path_factory.mktemp("accel-build")


def small_project(name, directory, instance=None):
    """(pe, spec, stimulus, project dir) of the small configuration of ``name``."""
    pe = get_pe(name)
    spec, options = SMALL[name]
    stimulus = pe.build_stimulus(spec, options)
    accel.render_accel_project(pe, spec, instance or f"{name}_0", BuildTarget(), directory, stimulus=stimulus)
    return pe, spec, stimulus, directory


# -------------------------------------------------------------------------- register map


def test_register_map_is_the_vitis_hls_layout():
    # UG1399 s_axilite map with ap_ctrl_hs: 4 control words, then per argument its data words and one reserved word
    assert register_map() == {"CTRL": 0x00, "GIE": 0x04, "IER": 0x08, "ISR": 0x0C, "in": 0x10, "out": 0x1C,
                              "n_in": 0x28, "n_out": 0x30, "n_transactions": 0x38, "calls": 0x40, "n_calls": 0x4C}
    assert accel.register_span() == 0x54
    assert accel.control_address_bits() == 7


def test_register_map_sizes_each_argument_by_its_width():
    args = (ShellArg(name="a", kind="scalar", width=8), ShellArg(name="b", kind="scalar", width=64),
            ShellArg(name="p", kind="pointer", width=16, bundle="gmem0", direction="read"),
            ShellArg(name="c", kind="scalar", width=32))
    # 8-bit: 1 data + 1 reserved; 64-bit scalar: 2 + 1; pointer (64-bit address): 2 + 1
    assert register_map(args) == {"CTRL": 0, "GIE": 4, "IER": 8, "ISR": 12, "a": 0x10, "b": 0x18, "p": 0x24,
                                  "c": 0x30}


@pytest.mark.parametrize("fields, message", [
    ({"name": "In", "kind": "scalar", "width": 32}, "lower-case"),
    ({"name": "x", "kind": "stream", "width": 32}, "kind"),
    ({"name": "x", "kind": "scalar", "width": 12}, "width"),
    ({"name": "x", "kind": "pointer", "width": 32, "direction": "read"}, "bundle"),
    ({"name": "x", "kind": "pointer", "width": 32, "bundle": "gmem0"}, "direction"),
    ({"name": "x", "kind": "scalar", "width": 32, "bundle": "gmem0"}, "no bundle"),
])
def test_shell_arguments_are_validated(fields, message):
    with pytest.raises(ValueError, match=message):
        ShellArg(**fields)


def test_register_map_refuses_repeated_or_clashing_names():
    arg = ShellArg(name="n", kind="scalar", width=32)
    with pytest.raises(ValueError, match="repeat"):
        register_map((arg, arg))
    with pytest.raises(ValueError, match="lower-case"):
        register_map((ShellArg(name="CTRL", kind="scalar", width=32),))


def test_ip_identity():
    assert accel.accel_top("fpmac_array_0") == "fpmac_array_0_accel"
    assert accel.vlnv("csb_0") == "codesign:hls:csb_0_accel:1.0"
    assert accel.data_ports() == ["m_axi_gmem0", "m_axi_gmem1"]
    assert accel.ip_repo_relpath() == "codesign_prj/solution1/impl/ip"
    for bad in ("0pe", "Pe", "pe-1", "", None):
        with pytest.raises(ValueError, match="instance name"):
            accel.accel_top(bad)


# -------------------------------------------------------------------------- rendering


def test_project_is_byte_deterministic_and_names_every_argument(tmp_path):
    pe, spec, stimulus, project = small_project("tt1", tmp_path / "a")
    again = accel.render_accel(pe, spec, "tt1_0", BuildTarget(), stimulus=stimulus)
    for rel, data in again.files.items():
        assert (project / rel).read_bytes() == data, rel
    top = (project / "tt1_0_accel.cpp").read_text()
    signature = re.search(r"void tt1_0_accel\((.*)\) \{", top).group(1)
    assert [part.split()[-1].lstrip("*") for part in signature.split(", ")] == [a.name for a in SHELL_ARGS]
    for arg in SHELL_ARGS:
        assert f"s_axilite port = {arg.name} bundle = control" in top
        if arg.kind == "pointer":
            assert f"m_axi port = {arg.name} bundle = {arg.bundle} offset = slave" in top
    words = accel.buffer_words(stimulus)
    assert f"port = in bundle = gmem0 offset = slave depth = {words['in']}" in top
    assert "ap_ctrl_hs port = return" in top
    assert "run_shell<pe_t, stream_word_t>(in, out, n_in, n_out, n_transactions, calls, n_calls)" in top
    tcl = (project / "run_hls.tcl").read_text()
    assert "set_top tt1_0_accel" in tcl
    assert "-vendor codesign -library hls -ipname tt1_0_accel -version 1.0" in tcl
    assert "export_design -format ip_catalog" in tcl
    assert not (project / "tt1.cpp").exists()  # the PE's own stream top is not part of the IP


def test_csb_process_type_comes_from_its_kernel_header(tmp_path):
    _, _, _, project = small_project("csb", tmp_path / "p")
    assert "run_shell<pe_t, stream_word_t>" in (project / "csb_0_accel.cpp").read_text()


def test_bad_requests_fail_before_anything_is_written(tmp_path):
    pe, spec = get_pe("tt3"), SMALL["tt3"][0]
    out = tmp_path / "never"
    with pytest.raises(ValueError, match="stream PE"):
        accel.render_accel_project(get_pe("fpmac"), get_pe("fpmac").spec(), "f_0", None, out)
    with pytest.raises(ValueError, match="not 'other'"):
        accel.render_accel_project(pe, spec, "tt3_0", BuildTarget(top="other"), out)
    with pytest.raises(ValueError, match="m_axi"):
        accel.render_accel_project(pe, spec, "tt3_0", BuildTarget(interface="axis"), out)
    with pytest.raises(ValueError, match="instance name"):
        accel.render_accel_project(pe, spec, "TT3", None, out)
    with pytest.raises(TypeError):
        accel.render_accel_project(pe, CsbSpec(), "tt3_0", None, out)
    assert not out.exists()


def test_process_type_must_be_unique():
    pe = get_pe("tt1")
    with pytest.raises(RenderError, match="exactly one"):
        accel.process_type(pe, "typedef int a_pe_t;\ntypedef int b_pe_t;\n")
    with pytest.raises(RenderError, match="exactly one"):
        accel.process_type(pe, "typedef int word_t;\n")


# -------------------------------------------------------------------------- C simulation


@needs_gxx
@pytest.mark.parametrize("name", [pytest.param("csb", marks=pytest.mark.slow), pytest.param("tt1", marks=pytest.mark.long)])
def test_shell_compiles_without_warnings(tmp_path, name):
    """-Wall -Wextra -Werror on the shell top and its testbench.

    The ap_types headers come in with -isystem (their own warnings are not
    ours), HLS pragmas are unknown to g++ by nature (-Wno-unknown-pragmas),
    loop labels name loops in HLS reports and are never jumped to
    (-Wno-unused-label), and the check compiles at -O0: at -O2 GCC's inliner reports ap_private's
    default constructor (which leaves its value uninitialised by design) at
    ap_types' own lines.
    """
    _, _, _, project = small_project(name, tmp_path / "p")
    for source in (f"{name}_0_accel.cpp", f"{name}_0_accel_tb.cpp", f"{name}_0_accel_bridge.cpp"):
        done = subprocess.run(["g++", "-std=c++17", "-O0", "-Wall", "-Wextra", "-Werror", "-Wno-unknown-pragmas", "-Wno-unused-label",
                               "-isystem", str(ap_types_dir()), f"-I{project}", "-c", str(project / source),
                               "-o", str(tmp_path / (source + ".o"))], capture_output=True, text=True)
        assert done.returncode == 0, done.stderr[-3000:]


@needs_gxx
@pytest.mark.parametrize("name", [name if name == "tt1" else pytest.param(name, marks=pytest.mark.slow)
                                  for name in SMALL])  # tt1 stands for the shells in make test (5 to 7 s each)
def test_shell_csim_equals_golden(tmp_path, build_dir, name):
    pe, spec, stimulus, project = small_project(name, tmp_path / "p")
    result = accel.run_accel_csim(project, project / pe.vector_file, build_dir)
    assert (result.vectors, result.mismatches) == (len(stimulus), 0), result.first_mismatches
    print(f"\n[accel csim] {name}: {result.vectors} transactions, "
          f"{accel.buffer_words(stimulus)['out']} output words, 0 mismatches")


@needs_gxx
def test_shell_csim_reports_a_wrong_golden_word(tmp_path, build_dir):
    pe, spec, stimulus, project = small_project("tt3", tmp_path / "p")
    bad = [(words_in, words_out.copy()) for words_in, words_out in stimulus]
    last = len(bad) - 1
    bad[last][1][-1] ^= np.uint64(1)
    vectors = pe.write_vectors(spec, bad, tmp_path / "bad.txt")
    result = accel.run_accel_csim(project, vectors, build_dir)
    assert (result.vectors, result.mismatches) == (len(stimulus), 1)
    assert f"mismatch transaction={last} " in result.first_mismatches
