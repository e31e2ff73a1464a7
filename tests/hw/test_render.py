"""The HLS project renderer: strict, deterministic, safe to point at a directory, and faithful to the spec."""

import dataclasses
import re
import shutil
import subprocess
from pathlib import Path

import jinja2
import pytest

from codesign.hw.render import (
    MANIFEST_NAME,
    ProjectDirError,
    ProjectFiles,
    RenderError,
    c_string,
    environment,
    read_manifest,
    render_template,
    tcl_quote,
    write_project,
)
from codesign.hw.flow import VECTORS_HEADER, generate_project, project_context, render_project
from codesign.hw.target import BuildTarget
from codesign.pe import get_pe
from codesign.pe.fpmac.pe import FILES
from codesign.pe.fpmac.spec import FpmacSpec
from codesign.pe.fpmac.stimulus import build_stimulus
from codesign.resources import data_dir

SMALL = FpmacSpec(exp_bits=5, max_fb=7, rounding="nearest_away")
PE = get_pe("fpmac")
TEMPLATES = {key: PE.templates[FILES[key]] for key in ("kernel_cpp", "kernel_h", "testbench_cpp", "tcl")}
PROJECT_FILES = {*FILES.values(), VECTORS_HEADER, "vectors.txt"}


def template_context(spec, target=BuildTarget()):
    return project_context(PE, spec, target.resolve(PE.name, PE.interfaces))


def render_fpmac_project(spec, target=None, **options):
    return render_project(PE, spec, target, **options)


def generate_fpmac_project(spec, out_dir, target=None, **options):
    return generate_project(PE, spec, out_dir, target, **options)


def small_stimulus(spec):
    return build_stimulus(spec, fb_values=[spec.max_fb], random_per_fb=50)


def tree(directory: Path) -> dict[str, bytes]:
    return {str(p.relative_to(directory)): p.read_bytes() for p in sorted(directory.rglob("*")) if p.is_file()}


# --- strictness -----------------------------------------------------------------------------


def test_strict_undefined_rejects_a_missing_variable():
    with pytest.raises(jinja2.UndefinedError):
        environment().from_string("part={{ part }}").render()
    context = template_context(SMALL)
    del context["fb_port"]
    with pytest.raises(RenderError, match="fb_port"):
        render_template(TEMPLATES["kernel_cpp"], context)


def test_every_template_renders_and_leaves_no_jinja_behind():
    context = template_context(SMALL)
    for name in TEMPLATES.values():
        text = render_template(name, context)
        assert text.endswith("\n")
        assert "{{" not in text and "{%" not in text, name


def test_unknown_template_is_a_render_error():
    with pytest.raises(RenderError, match="no template"):
        render_template("fpmac/nope.j2", {})


# --- determinism ----------------------------------------------------------------------------


@pytest.mark.parametrize("interface", ["m_axi", "axis"])
def test_same_spec_renders_byte_identical_projects(tmp_path, interface):
    spec, target = SMALL, BuildTarget(interface=interface)
    first = render_fpmac_project(spec, target, stimulus=small_stimulus(spec))
    second = render_fpmac_project(spec, target, stimulus=small_stimulus(spec))
    assert first.files == second.files
    assert first.manifest() == second.manifest()
    generate_fpmac_project(spec, tmp_path / "one", stimulus=small_stimulus(spec))
    generate_fpmac_project(spec, tmp_path / "two", stimulus=small_stimulus(spec))
    assert tree(tmp_path / "one") == tree(tmp_path / "two")


def test_project_is_self_contained_and_header_is_copied_verbatim(tmp_path):
    written = generate_fpmac_project(SMALL, tmp_path / "p", stimulus=small_stimulus(SMALL))
    names = {p.name for p in written}
    assert names == {MANIFEST_NAME, *PROJECT_FILES}
    header = data_dir("hls_templates") / "include" / "codesign_fpmac.h"
    assert (tmp_path / "p" / "codesign_fpmac.h").read_bytes() == header.read_bytes()
    assert not [p for p in (tmp_path / "p").iterdir() if p.name.startswith(".")], "temporary files left behind"
    manifest = read_manifest(tmp_path / "p")
    assert manifest["pe"] == "fpmac" and manifest["spec"] == SMALL.to_dict()
    assert manifest["files"] == sorted(PROJECT_FILES)


def test_no_floating_point_types_in_kernel_code():
    project = render_fpmac_project(SMALL, with_vectors=False)
    for name in (FILES["kernel_cpp"], FILES["kernel_h"], FILES["library_h"]):
        code = re.sub(r"//[^\n]*", "", project.files[name].decode())
        assert not re.search(r"\b(float|double|half)\b", code), name


# --- output directory safety ----------------------------------------------------------------


def test_refuses_a_non_project_directory_without_writing(tmp_path):
    target = tmp_path / "mine"
    target.mkdir()
    (target / "notes.txt").write_text("keep me\n")
    before = tree(target)
    with pytest.raises(ProjectDirError, match="not empty"):
        generate_fpmac_project(SMALL, target, stimulus=small_stimulus(SMALL))
    assert tree(target) == before
    a_file = tmp_path / "file.txt"
    a_file.write_text("x")
    with pytest.raises(ProjectDirError, match="not a directory"):
        generate_fpmac_project(SMALL, a_file, with_vectors=False)
    assert a_file.read_text() == "x"


def test_refuses_a_foreign_manifest(tmp_path):
    target = tmp_path / "p"
    target.mkdir()
    (target / MANIFEST_NAME).write_text('{"something": "else"}')
    with pytest.raises(ProjectDirError):
        generate_fpmac_project(SMALL, target, with_vectors=False)
    assert sorted(p.name for p in target.iterdir()) == [MANIFEST_NAME]


def test_empty_directory_and_earlier_project_are_accepted(tmp_path):
    target = tmp_path / "p"
    target.mkdir()
    generate_fpmac_project(SMALL, target, stimulus=small_stimulus(SMALL))
    assert (target / "vectors.txt").is_file()
    (target / "user_notes.txt").write_text("not generated\n")
    other = dataclasses.replace(SMALL, max_fb=6)
    generate_fpmac_project(other, target, BuildTarget(interface="axis", top="mac_axis"), with_vectors=False)
    assert read_manifest(target)["spec"] == other.to_dict()
    assert "mac_axis" in (target / FILES["kernel_cpp"]).read_text()
    assert not (target / "vectors.txt").exists(), "a file only the old project generated must be removed"
    assert (target / "user_notes.txt").read_text() == "not generated\n"


@pytest.mark.parametrize(
    "make_spec",
    [
        lambda: FpmacSpec(max_fb=30),
        lambda: BuildTarget(part="xc7a35ticsg324-1L"),
        lambda: BuildTarget(interface="pcie"),
        lambda: BuildTarget(top="not an identifier"),
        lambda: FpmacSpec(rounding="stochastic"),
    ],
)
def test_invalid_spec_fails_before_anything_is_written(tmp_path, make_spec):
    target = tmp_path / "p"
    with pytest.raises((ValueError, TypeError)):
        generate_fpmac_project(make_spec(), target)
    assert not target.exists()


def test_spec_that_slipped_past_validation_is_caught_before_writing(tmp_path):
    spec = FpmacSpec()
    object.__setattr__(spec, "max_fb", 30)  # 39-bit container: cannot travel in a 32-bit word
    with pytest.raises(RenderError, match="32-bit word"):
        generate_fpmac_project(spec, tmp_path / "p")
    assert not (tmp_path / "p").exists()
    with pytest.raises(TypeError):
        generate_fpmac_project(SMALL.to_dict(), tmp_path / "p")
    assert not (tmp_path / "p").exists()


def test_project_files_reject_escaping_paths():
    for bad in ("../x", "/abs", "a/../../b", "", "a\\b"):
        with pytest.raises(RenderError):
            ProjectFiles(pe="fpmac", spec={}, files={bad: b""})


def test_write_project_reports_written_paths(tmp_path):
    project = ProjectFiles(pe="demo", spec={"k": 1}, files={"sub/a.txt": b"A", "b.txt": b"B"})
    written = write_project(tmp_path / "out", project)
    assert [p.relative_to(tmp_path / "out").as_posix() for p in written] == [MANIFEST_NAME, "b.txt", "sub/a.txt"]
    assert (tmp_path / "out" / "sub" / "a.txt").read_bytes() == b"A"


# --- Tcl --------------------------------------------------------------------------------------


@pytest.mark.parametrize("part", ["xc7z020clg484-1", "xczu3eg-sbva484-1-i"])
def test_tcl_runs_every_step_for_the_spec_part(part):
    target = BuildTarget(part=part, clock_period_ns=6.5, top="my_mac")
    tcl = render_fpmac_project(FpmacSpec(), target, with_vectors=False).files[FILES["tcl"]].decode()
    lines = [line.strip() for line in tcl.splitlines() if line.strip() and not line.lstrip().startswith("#")]
    assert f"set_part {part}" in lines
    assert "set_top my_mac" in lines
    assert "create_clock -period 6.5 -name default" in lines
    order = ["open_project", "set_top", "add_files", "open_solution", "set_part", "create_clock", "csim_design",
             "csynth_design", "cosim_design", "export_design -format ip_catalog"]
    positions = [next(i for i, line in enumerate(lines) if line.startswith(step)) for step in order]
    assert positions == sorted(positions)
    assert "csim_design -argv $vectors" in lines and "cosim_design -argv $vectors" in lines
    assert any(line.startswith("add_files -tb") and "fpmac_tb.cpp" in line for line in lines)
    for name in (FILES["kernel_cpp"], FILES["kernel_h"], FILES["library_h"]):
        assert any(line.startswith("add_files [") and name in line for line in lines)


def test_tcl_quote_keeps_values_inert():
    assert tcl_quote("xc7z020clg484-1") == "xc7z020clg484-1"
    assert tcl_quote(10.0) == "10.0"
    assert tcl_quote("a b") == '"a b"'
    assert tcl_quote('x[exit]$y"z\\') == '"x\\[exit\\]\\$y\\"z\\\\"'
    assert tcl_quote("two\nlines") == '"two\\nlines"'
    assert tcl_quote("{brace") == '"{brace"'
    with pytest.raises(RenderError):
        tcl_quote("bell\x07")
    with pytest.raises(RenderError):
        tcl_quote(True)


@pytest.mark.skipif(shutil.which("tclsh") is None, reason="tclsh not installed")
def test_tcl_quote_round_trips_through_tclsh():
    values = ["plain", "with space", "x[exit 3]", "$env(HOME)", 'q"uote', "back\\slash", "{open", "close}", "semi;colon # hash", "nl\nx"]
    script = "".join(f"puts [string length {tcl_quote(v)}]\n" for v in values)
    done = subprocess.run(["tclsh"], input=script, capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    assert [int(n) for n in done.stdout.split()] == [len(v) for v in values]


def test_c_string():
    assert c_string('a"b\\c') == '"a\\"b\\\\c"'
    with pytest.raises(RenderError):
        c_string("new\nline")


# --- pragmas and signatures ---------------------------------------------------------------------


def _parameters(signature: str) -> list[str]:
    return [re.search(r"(\w+)\s*$", part.strip()).group(1) for part in signature.split(",")]


@pytest.mark.parametrize("interface", ["m_axi", "axis"])
def test_pragmas_name_the_real_arguments(interface):
    spec = FpmacSpec(max_vectors=4096)
    files = render_fpmac_project(spec, BuildTarget(interface=interface, top="pe_top"), with_vectors=False).files
    kernel = files[FILES["kernel_cpp"]].decode()
    header = files[FILES["kernel_h"]].decode()
    definition = re.search(r"^void pe_top\((.*)\) \{$", kernel, re.MULTILINE).group(1)
    declaration = re.search(r"^void pe_top\((.*)\);$", header, re.MULTILINE).group(1)
    assert definition == declaration
    params = _parameters(definition)
    assert params == ["a", "b", "c", "out", "n", "fb"]
    pragmas = re.findall(r"^#pragma HLS INTERFACE (\w+) port=(\w+)(.*)$", kernel, re.MULTILINE)
    ports = {port for _, port, _ in pragmas}
    assert ports == set(params) | {"return"}
    by_mode: dict[str, set[str]] = {}
    for mode, port, _ in pragmas:
        by_mode.setdefault(mode, set()).add(port)
    data = {"a", "b", "c", "out"}
    if interface == "m_axi":
        assert by_mode["m_axi"] == data
        assert by_mode["s_axilite"] == data | {"n", "fb", "return"}
        for mode, port, options in pragmas:
            if mode == "m_axi":
                assert "offset=slave" in options and "depth=4096" in options and f"bundle=gmem_{port}" in options
        assert "const word_t *a" in definition and "word_t *out" in definition
    else:
        assert by_mode["axis"] == data
        assert by_mode["s_axilite"] == {"n", "fb", "return"}
        assert "hls::stream<word_t> &out" in definition
    for mode, port, options in pragmas:
        if mode == "s_axilite":
            assert "bundle=control" in options
    assert "#pragma HLS PIPELINE II=1" in kernel
    assert "#pragma HLS LOOP_TRIPCOUNT min=1 max=4096" in kernel
    assert re.search(r"for \(count_t i = 0; i < n; \+\+i\)", kernel)
    testbench = files[FILES["testbench_cpp"]].decode()
    call = re.search(r"^\s*pe_top\((.*)\);$", testbench, re.MULTILINE).group(1)
    assert len(call.split(",")) == len(params)


def test_kernel_config_matches_spec():
    spec = FpmacSpec(exp_bits=4, max_fb=3, rounding="toward_zero")
    header = render_fpmac_project(spec, with_vectors=False).files[FILES["kernel_h"]].decode()
    for line in ("EXP_BITS = 4;", "MAX_FB = 3;", "ROUNDING = 2;", "WIDTH = 8;", "FB_BITS = 2;", "MAX_VECTORS = 65536;"):
        assert line in header


VITIS_COMMANDS = ("open_project", "set_top", "add_files", "open_solution", "set_part", "create_clock", "csim_design",
                  "csynth_design", "cosim_design", "export_design")


def _source_with_stubs(project: Path, env: dict | None = None) -> subprocess.CompletedProcess:
    """Source run_hls.tcl in plain tclsh with every Vitis command stubbed to print its arguments."""
    stubs = "".join(f'proc {cmd} args {{ puts "{cmd} $args" }}\n' for cmd in VITIS_COMMANDS)
    source = tcl_quote(str(project / FILES["tcl"]))
    script = stubs + "rename exit __exit\nproc exit args {}\n" + f"if {{[catch {{source {source}}} m]}} {{ puts stderr $m; __exit 1 }}\n"
    return subprocess.run(["tclsh"], input=script, capture_output=True, text=True, timeout=30, cwd="/", env=env)


@pytest.mark.skipif(shutil.which("tclsh") is None, reason="tclsh not installed")
def test_generated_tcl_runs_under_tclsh_with_stubbed_vitis(tmp_path):
    project = tmp_path / "p"
    generate_fpmac_project(SMALL, project, stimulus=small_stimulus(SMALL))
    done = _source_with_stubs(project)
    assert done.returncode == 0, done.stderr
    calls = done.stdout.splitlines()
    vectors = str((project / "vectors.txt").resolve())
    assert [line.split()[0] for line in calls] == [
        "open_project", "set_top", "add_files", "add_files", "add_files", "add_files", "add_files", "open_solution",
        "set_part",
        "create_clock", "csim_design", "csynth_design", "cosim_design", "export_design"]
    assert f"csim_design -argv {vectors}" in calls and f"cosim_design -argv {vectors}" in calls
    assert f"add_files -tb {project.resolve() / 'fpmac_tb.cpp'}" in calls
    assert f"add_files -tb {project.resolve() / VECTORS_HEADER}" in calls
    assert "export_design -format ip_catalog" in calls
    (project / "vectors.txt").unlink()
    done = _source_with_stubs(project)
    assert done.returncode != 0 and "does not exist" in done.stderr
    assert "csim_design" not in done.stdout
