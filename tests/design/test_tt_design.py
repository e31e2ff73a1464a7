"""Design points of TT training: techniques.tt derives PE1, PE2 and PE3 from its precision; fit and build folders.

The derivation tests are quick; the fit and build tests synthesise tiny TT
PEs with Yosys (``slow``), and the shipped examples/digits_tt.toml's own PEs
on both boards (``long``, minutes of Yosys).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from codesign.cli import main
from codesign.design import load_design
from codesign.design.build import write_build_folder
from codesign.design.point import DesignError, design_from_dict, design_point
from codesign.shell.vivado import lint_vivado_build
from codesign.pe.tt.spec import Tt1Spec, Tt2Spec, Tt3Spec
from codesign.train.config import config_from_dict, read_toml

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "digits_tt.toml"
RAW = {"model": {"name": "mlp", "hidden": [16]}, "techniques": {"tt": {"max_rank": 2, "order": 2}}}
# PEs of a few MACs and small buffers, so Yosys takes seconds; the operand widths still come from the precision
TINY = {"tt1": {"lanes": 2, "rows": 1, "max_j": 4, "max_k": 8, "max_l": 8},
        "tt2": {"lanes": 2, "rows": 1, "max_j": 4, "max_k": 8, "max_l": 8},
        "tt3": {"lanes": 1, "max_j": 4}}


def _design(techniques=None, **changes):
    raw = {**RAW, "techniques": {"tt": {**RAW["techniques"]["tt"], **(techniques or {})}}, **changes}
    return design_from_dict(raw, default_name="tt_test")


def test_the_example_derives_the_three_tt_pes_from_its_precision():
    design = load_design(EXAMPLE)
    assert [(i.name, i.pe) for i in design.instances] == [("tt1_0", "tt1"), ("tt2_0", "tt2"), ("tt3_0", "tt3")]
    specs = {i.pe: i.spec for i in design.instances}
    assert specs["tt1"] == Tt1Spec(lanes=8, rows=4, a_bits=16, b_bits=8)  # gradients x activations
    assert specs["tt2"] == Tt2Spec(lanes=8, rows=4, a_bits=16, b_bits=4)  # activations or gradients x cores
    assert specs["tt3"] == Tt3Spec(lanes=8, a_bits=8, b_bits=16)  # activations x gradients
    text = design.describe()
    assert "TT core gradients: 16-bit gradients x 8-bit states" in text
    assert "4x4x4 <- 4x4x4; 5x2x1 <- 4x4x4, ranks <= 4" in text
    assert "does not call it" in text  # PE3 is there, and the description says the step schedule leaves it idle


def test_copies_are_instances_of_one_build_with_their_own_names():
    raw = read_toml(EXAMPLE)
    raw["design"]["pe"]["tt2"]["copies"] = 3
    design = design_from_dict(raw)
    tt2 = [i for i in design.instances if i.pe == "tt2"]
    assert [i.name for i in tt2] == ["tt2_0", "tt2_1", "tt2_2"] and len({i.top for i in tt2}) == 3
    assert all(i.spec == load_design(EXAMPLE).instances[1].spec for i in tt2)
    assert [i.name for i in design.instances if i.pe != "tt2"] == ["tt1_0", "tt3_0"]


def test_an_array_of_many_ips_spreads_over_the_fewest_hp_ports_that_fit():
    """Twelve TT IPs have 24 data ports, more than one SmartConnect's 16: two HP ports by default, round robin,
    and design.json says so to the block design, which takes it."""
    from codesign.design.manifest import design_manifest
    from codesign.shell.vivado import validate_manifest

    raw = read_toml(EXAMPLE)
    raw["design"]["pe"]["tt1"]["copies"] = 8
    raw["design"]["pe"]["tt2"]["copies"] = 3
    design = design_from_dict(raw, board_name="ultra96v2")
    assert (len(design.instances), design.hp_ports, design.ports_used) == (12, 0, 2)
    assert "data through 2 of its 4 high-performance ports" in design.describe()
    manifest = design_manifest(design)
    assert manifest["data_ports"] == ["S_AXI_HP0_FPD", "S_AXI_HP1_FPD"]
    assert [ip["hp_port"] for ip in manifest["ips"]] == [0, 1] * 6
    validate_manifest(manifest, design.board)
    raw["design"]["hp_ports"] = 4
    assert design_manifest(design_from_dict(raw, board_name="ultra96v2"))["data_ports"][-1] == "S_AXI_HP3_FPD"
    for hp_ports, message in ((1, "12 IPs with 24 data ports need at least 2 high-performance ports"),
                              (5, r"must be an integer in \[0, 4\]"), (True, "must be an integer")):
        raw["design"]["hp_ports"] = hp_ports
        with pytest.raises(DesignError, match=f"design.hp_ports: .*{message}"):
            design_from_dict(raw, board_name="ultra96v2")
    raw["design"]["hp_ports"] = 0
    raw["design"]["pe"]["tt2"]["copies"] = 8
    raw["design"]["pe"]["tt1"]["copies"] = 8
    assert design_from_dict(raw, board_name="ultra96v2").ports_used == 3  # 17 IPs, 34 data ports


def test_the_parallel_example_is_the_array_of_the_paper_comparison():
    from codesign.step.tt.cycles import PARALLEL_HARDWARE
    from codesign.train.hw_golden_tt import design_hardware

    design = load_design(EXAMPLE.with_name("digits_tt_parallel.toml"))
    assert design.board.name == "ultra96v2" and design_hardware(design) == PARALLEL_HARDWARE
    assert [i.name for i in design.instances] == ["tt1_0", "tt1_1", "tt2_0", "tt2_1", "tt2_2", "tt2_3", "tt3_0"]


def test_a_changed_precision_changes_the_hardware():
    design = _design({"precision": {"core_bits": 3, "activation_bits": 6, "grad_bits": 12}})
    specs = {i.pe: i.spec for i in design.instances}
    assert (specs["tt1"].a_bits, specs["tt1"].b_bits) == (12, 6)
    assert (specs["tt2"].a_bits, specs["tt2"].b_bits) == (12, 3)
    assert (specs["tt3"].a_bits, specs["tt3"].b_bits) == (6, 12)


@pytest.mark.parametrize("techniques, changes, message", [
    ({"precision": {"grad_bits": 20}}, {}, r"^techniques\.tt\.precision\.grad_bits: the TT PEs take codes of at most 16"),
    ({"precision": {"rounding": "toward_zero"}}, {}, r"^techniques\.tt\.precision\.rounding: the TT PEs' host rounds"),
    ({"precision": {"quantize_intermediates": False}}, {}, r"^techniques\.tt\.precision\.quantize_intermediates:"),
    ({"in_modes": [[8, 8], [4, 4]], "out_modes": [[4, 4], [5, 3]]}, {},
     r"^techniques\.tt\.out_modes\[1\]: product 15 .* != layer 1's outputs 10"),
    ({}, {"model": {"name": "resnet"}}, r"^model\.name: techniques\.tt trains an MLP"),
    ({}, {"design": {"pe": {"tt2": {"b_bits": 8}}}}, r"^design\.pe\.tt2\.b_bits: derived from the training"),
    ({}, {"design": {"pe": {"tt1": {"lanes": 3}}}}, r"^design\.pe\.tt1: lanes=3 must be one of"),
    ({}, {"design": {"pe": {"fpmac_array": {"rows": 2}}}}, r"^design\.pe\.fpmac_array: the configuration does not use"),
])
def test_bad_tt_designs_are_refused_with_the_field(techniques, changes, message):
    with pytest.raises(DesignError, match=message):
        _design(techniques, **changes)


def test_hardware_choices_may_be_overridden():
    design = design_point(config_from_dict(RAW), name="big", overrides={"tt2": {"max_j": 128, "max_l": 64}})
    tt2 = next(i.spec for i in design.instances if i.pe == "tt2")
    assert (tt2.max_j, tt2.max_l, tt2.a_bits) == (128, 64, 16)


@pytest.fixture(scope="module")
def tiny_toml(tmp_path_factory):
    root = tmp_path_factory.mktemp("tt_design")
    lines = ['seed = 0', '[model]', 'name = "mlp"', 'hidden = [16]', '[techniques.tt]', 'max_rank = 2', 'order = 2',
             '[design]', 'name = "tiny_tt"']
    for pe, fields in TINY.items():
        lines.append(f"[design.pe.{pe}]")
        lines += [f"{key} = {value}" for key, value in fields.items()]
        if pe == "tt2":
            lines.append("copies = 2")  # two IPs of one build
    path = root / "tiny_tt.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


def _fits_and_builds(tiny_toml, board_name, tmp_path_factory, cache) -> None:
    design = load_design(tiny_toml, board_name=board_name)
    folder = write_build_folder(design, tmp_path_factory.mktemp(board_name), cache_dir=cache)
    assert folder.fit.fits and set(folder.fit.per_ip) == {"tt1_0", "tt2_0", "tt2_1", "tt3_0"}
    assert all(folder.fit.per_ip[ip]["pe"]["lut"] > 0 for ip in folder.fit.per_ip)
    assert folder.fit.per_ip["tt2_1"]["pe"] == folder.fit.per_ip["tt2_0"]["pe"]  # a copy costs what the build does
    assert [ip["pe"] for ip in folder.manifest["ips"]] == ["tt1", "tt2", "tt2", "tt3"]
    for ip in folder.manifest["ips"]:
        assert (folder.root / ip["hls_project"] / "run_hls.tcl").is_file()
    names = [command.name for command in lint_vivado_build(folder.root).commands]
    assert names.count("create_bd_cell") >= 4 and "launch_runs" in names  # one cell per IP at least


@pytest.mark.slow
def test_tiny_tt_design_fits_builds_and_the_cli_prints_it(tiny_toml, tmp_path_factory, capsys):
    """One board in the suite (three Yosys runs, then the CLI reads the same cache); both boards with the long tests."""
    cache = tmp_path_factory.mktemp("tt-estimate-cache")
    _fits_and_builds(tiny_toml, "zedboard", tmp_path_factory, cache)
    assert main(["design", str(tiny_toml), "--board", "zedboard", "--cache", str(cache)]) == 0
    out = capsys.readouterr().out
    assert "tt1_0: TT PE1" in out and "tt2_0: TT PE2" in out and "tt2_1: TT PE2" in out and "tt3_0: TT PE3" in out
    assert "Verdict: fits." in out


@pytest.mark.long
def test_tiny_tt_design_fits_and_builds_on_ultra96(tiny_toml, tmp_path_factory):
    _fits_and_builds(tiny_toml, "ultra96v2", tmp_path_factory, tmp_path_factory.mktemp("tt-estimate-cache-xcup"))


@pytest.mark.long
@pytest.mark.parametrize("board_name", ["zedboard", "ultra96v2"])
def test_the_shipped_example_builds_on_both_boards(board_name, tmp_path_factory):
    """The 8 x 4 MAC PEs of examples/digits_tt.toml (Yosys of tt2 takes minutes)."""
    design = load_design(EXAMPLE, board_name=board_name)
    folder = write_build_folder(design, tmp_path_factory.mktemp(f"example-{board_name}"),
                                cache_dir=tmp_path_factory.getbasetemp() / "tt-example-cache")
    assert folder.fit.fits and folder.fit.total["dsp"] >= 64
    assert "launch_runs" in [command.name for command in lint_vivado_build(folder.root).commands]


def test_a_forward_split_is_asked_in_the_design_table_and_reaches_the_loop_and_the_hardware():
    """[design] forward_split: the design describes it, design.json's design and loop set-up carry it, the loop's
    and the desktop trainer's step hardware take it; anything but a boolean, or a design without tt1 and tt2,
    is refused naming the field."""
    from codesign.design.families import loop_entry
    from codesign.design.families.tt import tt_setup_of
    from codesign.loops.tt import HwTrainError, TtTrainSetup
    from codesign.train.hw_golden_tt import design_hardware

    raw = read_toml(EXAMPLE)
    assert not design_from_dict(raw).forward_split
    raw["design"]["forward_split"] = True
    design = design_from_dict(raw)
    assert design.forward_split and "forward contractions shared between PE2 and PE1" in design.describe()
    assert design.to_dict()["forward_split"] is True
    setup = tt_setup_of(design)
    assert setup.forward_split and setup.hardware().forward_split and design_hardware(design).forward_split
    assert loop_entry(design)["setup"]["forward_split"] is True
    assert TtTrainSetup.from_dict(setup.to_dict()) == setup
    with pytest.raises(HwTrainError, match="forward_split must be a bool"):
        TtTrainSetup.from_dict({**setup.to_dict(), "forward_split": "yes"})
    raw["design"]["forward_split"] = 1
    with pytest.raises(DesignError, match="design.forward_split: must be true or false, got 1"):
        design_from_dict(raw)
    other = read_toml(EXAMPLE.with_name("digits_abvs.toml"))
    other.setdefault("design", {})["forward_split"] = True
    with pytest.raises(DesignError, match=r"design.forward_split: only a TT design \(tt1 and tt2 PEs\)"):
        design_from_dict(other)
