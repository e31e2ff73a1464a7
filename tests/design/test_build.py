"""The build folder of a design point: complete, deterministic, linted, and refused on bad input."""

from __future__ import annotations

import json
import shutil

import pytest

from codesign.cli import main
from codesign.design import load_design
from codesign.design.build import BuildFolderError, write_build_folder
from codesign.design.build_steps import read_records, run_steps
from codesign.design.fit import DesignDoesNotFit
from codesign.shell.vivado import lint_vivado_build, validate_manifest

pytestmark = pytest.mark.slow

# a small array, so the Yosys fit runs in seconds; the derived fields still come from techniques.abvs
DESIGN = """
seed = 0
[model]
name = "mlp"
hidden = [16]
[techniques.abvs]
fb_min = 4
fb_max = 7
[design]
name = "tiny_abvs"
[design.pe.fpmac_array]
rows = 1
cols = 2
max_m = 4
max_n = 4
max_k = 4
"""


@pytest.fixture(scope="module")
def workspace(tmp_path_factory):
    root = tmp_path_factory.mktemp("build")
    (root / "tiny.toml").write_text(DESIGN)
    return root


def _tree(root):
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("board_name", ["zedboard", "ultra96v2", "pynqz2", "kv260"])
def test_build_folder_is_complete_deterministic_and_lints(workspace, board_name):
    design = load_design(workspace / "tiny.toml", board_name=board_name)
    out = workspace / board_name
    folder = write_build_folder(design, out, cache_dir=workspace / "cache")
    manifest = json.loads((out / "design.json").read_text())
    validate_manifest(manifest, design.board)
    (ip,) = manifest["ips"]
    assert ip["name"] == "fpmac_array_0" and ip["vlnv"] == "codesign:rtl:fpmac_array_0_accel:1.0"
    assert (ip["ip_route"], ip["ip_repo"]) == ("rtl", "rtl/fpmac_array_0/ip")  # the default: the verified RTL
    assert ip["base_address"] == design.board.vivado.control_base
    assert ip["spec"]["max_fb"] == 7 and ip["spec"]["cols"] == 2  # derived and hardware-only fields
    assert ip["registers"]["in"] == 0x10 and ip["registers"]["out"] == 0x1C
    assert manifest["clock_mhz"] == 100.0 and manifest["board"] == board_name
    for rel in ("hls/fpmac_array_0/run_hls.tcl", "hls/fpmac_array_0/fpmac_array_0_accel.cpp", "vivado/build.tcl",
                "rtl/fpmac_array_0/package_ip.tcl", "rtl/fpmac_array_0/src/accel_top.v",
                "fit.json", "fit.md", "fit.png", "README.md"):
        assert (out / rel).is_file(), rel
    assert folder.fit.fits and json.loads((out / "fit.json").read_text())["fits"] is True
    assert "vivado/build.tcl packages rtl/fpmac_array_0/src" in (out / "README.md").read_text()
    for board_files in (True, False):
        lint = lint_vivado_build(out, board_files=board_files)
        assert lint.describe().startswith("Tcl lint (recorded, not executed by Vivado)")
        names = [command.name for command in lint.commands]
        assert "create_bd_cell" in names and "launch_runs" in names
    before = _tree(out)
    write_build_folder(design, out, cache_dir=workspace / "cache")
    assert _tree(out) == before  # byte-deterministic, and an earlier build folder may be overwritten


def test_a_folder_that_is_not_ours_is_refused_before_anything_is_written(workspace, tmp_path):
    (tmp_path / "notes.txt").write_text("mine")
    design = load_design(workspace / "tiny.toml")
    with pytest.raises(BuildFolderError, match="holds no design.json"):
        write_build_folder(design, tmp_path, cache_dir=workspace / "cache")
    assert [p.name for p in tmp_path.iterdir()] == ["notes.txt"]
    users = tmp_path / "users"
    write_build_folder(design, users, cache_dir=workspace / "cache")  # a build folder...
    (users / "thesis.tex").write_text("mine")  # ...that a user's file now shares
    before = _tree(users)
    with pytest.raises(BuildFolderError, match="also thesis.tex, which codesign build does not write"):
        write_build_folder(design, users, cache_dir=workspace / "cache")
    assert _tree(users) == before


def test_a_design_over_the_limit_is_refused_with_numbers_and_nothing_written(workspace, tmp_path):
    design = load_design(workspace / "tiny.toml")
    with pytest.raises(DesignDoesNotFit, match=r"does not fit zedboard: LUT \d+ of 53200"):
        write_build_folder(design, tmp_path / "out", cache_dir=workspace / "cache", limit_percent=0.1)
    assert not (tmp_path / "out").exists()


@pytest.mark.skipif(shutil.which("vitis_hls") is not None, reason="vitis_hls is installed: the build would run")
def test_without_vitis_hls_the_build_says_which_commands_to_run(workspace):
    design = load_design(workspace / "tiny.toml")
    out = workspace / "hls-route"
    folder, records = run_steps(design, out, cache_dir=workspace / "cache", limit_percent=90, route="hls",
                                progress=None)
    assert "vitis_hls -f run_hls.tcl" in (out / "README.md").read_text()
    assert [(record.step, record.status) for record in records] == [("folder", "done"), ("hls", "tool missing")]
    assert "vitis_hls is not on PATH" in records[1].detail and "vitis_hls -f run_hls.tcl" in records[1].detail
    assert read_records(out)["hls"]["status"] == "tool missing"


@pytest.mark.skipif(shutil.which("vivado") is not None, reason="vivado is installed: the build would run")
def test_the_rtl_route_needs_vivado_only(workspace):
    design = load_design(workspace / "tiny.toml")
    folder, records = run_steps(design, workspace / "zedboard", cache_dir=workspace / "cache", limit_percent=90,
                                route="rtl", progress=None)
    assert folder.hls_commands == []  # no vitis_hls on the default route: Vivado packages the verified RTL
    assert [(record.step, record.status) for record in records] == [("folder", "done"), ("hls", "done"),
                                                                     ("vivado", "tool missing")]
    assert records[1].detail == "no IP on the HLS route" and "vivado -mode batch" in records[2].detail


def test_cli_design_and_build(workspace, capsys):
    cache = str(workspace / "cache")
    assert main(["design", str(workspace / "tiny.toml"), "--board", "ultra96v2", "--cache", cache]) == 0
    assert "fpmac_array_0" in capsys.readouterr().out
    out = workspace / "cli"
    assert main(["build", str(workspace / "tiny.toml"), "--out", str(out), "--cache", cache, "--dry-run"]) == 0
    assert (out / "design.json").is_file() and (out / "rtl" / "fpmac_array_0" / "package_ip.tcl").is_file()
    hls = workspace / "cli-hls"
    assert main(["build", str(workspace / "tiny.toml"), "--out", str(hls), "--cache", cache, "--dry-run",
                 "--ip-route", "hls"]) == 0
    assert json.loads((hls / "design.json").read_text())["ip_route"] == "hls" and not (hls / "rtl").exists()
    with pytest.raises(SystemExit) as refused:  # argparse's type check names the flag
        main(["build", str(workspace / "tiny.toml"), "--board", "arty", "--cache", cache])
    assert refused.value.code == 2 and "argument --board: unknown board 'arty'" in capsys.readouterr().err


def test_build_steps_are_named_recorded_and_a_done_step_with_unchanged_inputs_is_skipped(workspace, tmp_path, capsys):
    """The step record's bookkeeping (no vendor tool runs here): a step recorded done, whose inputs hash the same
    and whose outputs are there, is skipped; changed inputs run it again; the CLI lists the steps and refuses an
    order that runs backwards."""
    import json

    from codesign.design.build_steps import selected_steps, step_inputs

    design = load_design(workspace / "tiny.toml")
    out = tmp_path / "build"
    folder, records = run_steps(design, out, cache_dir=workspace / "cache", steps=("folder",), limit_percent=90,
                                route="hls", progress=None)
    assert [(r.step, r.status) for r in records] == [("folder", "done")] and read_records(out)["folder"]["seconds"] > 0
    (folder.root / "hls" / "fpmac_array_0" / "codesign_prj" / "solution" / "impl" / "ip").mkdir(parents=True)
    inputs = step_inputs(folder, "hls")
    steps = {**read_records(out), "hls": {"step": "hls", "status": "done", "seconds": 3600.0, "ended": 0.0,
                                          "inputs": inputs, "detail": "1 IP(s)"}}
    (out / "build_steps.json").write_text(json.dumps({"steps": steps}))
    _, again = run_steps(design, out, cache_dir=workspace / "cache", steps=("hls",), limit_percent=90, route="hls",
                         progress=None)
    assert [(r.step, r.status) for r in again] == [("hls", "unchanged")]  # no vitis_hls asked for
    (folder.root / "hls" / "fpmac_array_0" / "codesign_vectors.h").write_text("// changed\n")
    assert step_inputs(folder, "hls") != inputs
    assert selected_steps("hls") == ("hls", "vivado") and selected_steps(to_step="hls") == ("folder", "hls")
    assert main(["build", str(workspace / "tiny.toml"), "--out", str(out), "--steps"]) == 0
    listing = capsys.readouterr().out
    assert "folder " in listing and "co-simulation (optional)" in listing and "[unchanged, 0.0 s]" in listing
    assert main(["build", str(workspace / "tiny.toml"), "--out", str(out), "--from-step", "vivado",
                 "--to-step", "hls"]) == 2
    assert "--from-step vivado comes after --to-step hls" in capsys.readouterr().err
    assert "CODESIGN_SKIP_COSIM" in (folder.root / "hls" / "fpmac_array_0" / "run_hls.tcl").read_text()
