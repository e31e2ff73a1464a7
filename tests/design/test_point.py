"""Design points: the hardware is derived from the training configuration; bad designs are refused by name."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from codesign.design import DesignError, design_from_dict, load_design
from codesign.pe import get_pe
from codesign.train.config import load_config

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _raw(name: str) -> dict:
    with (EXAMPLES / name).open("rb") as handle:
        return tomllib.load(handle)


def test_abvs_design_derives_the_fpmac_array_from_the_technique():
    """The number format from the technique; the array's shape and copies from the example's
    [design.pe.fpmac_array] table (two 3 x 4 arrays, the explorer's ZedBoard point)."""
    design = load_design(EXAMPLES / "digits_abvs.toml")
    abvs = design.training.techniques["abvs"]
    assert [(i.pe, i.name, i.top) for i in design.instances] == [
        ("fpmac_array", f"fpmac_array_{n}", f"fpmac_array_{n}_accel") for n in range(2)]
    for instance in design.instances:
        assert (instance.spec.exp_bits, instance.spec.max_fb, instance.spec.rounding) == (abvs.exp_bits, abvs.fb_max,
                                                                                           abvs.rounding)
        assert (instance.spec.rows, instance.spec.cols) == (3, 4)
    assert design.board.name == "zedboard" and design.clock_period_ns == pytest.approx(10.0)
    assert "fpmac_array_1" in design.describe()


def test_a_changed_technique_changes_the_hardware():
    raw = _raw("digits_abvs.toml")
    raw["techniques"]["abvs"].update(fb_max=12, exp_bits=5, rounding="toward_zero")
    spec = design_from_dict(raw).instances[0].spec
    assert (spec.exp_bits, spec.max_fb, spec.rounding) == (5, 12, "toward_zero")


def test_compressed_design_uses_the_csb_pe_with_the_models_kernel():
    design = load_design(EXAMPLES / "digits_compressed.toml", board_name="ultra96v2")
    (instance,) = design.instances
    assert instance.pe == "csb" and instance.spec.kernel == 3 and design.board.name == "ultra96v2"


def test_plain_fp32_training_runs_on_a_full_width_array():
    raw = _raw("digits_abvs.toml")
    del raw["techniques"]
    spec = design_from_dict(raw).instances[0].spec
    assert (spec.exp_bits, spec.max_fb) == (8, 23)


def test_host_side_techniques_need_no_pe():
    raw = _raw("digits_abvs.toml")
    raw["techniques"]["smd"] = {}
    design = design_from_dict(raw)
    assert [instance.pe for instance in design.instances] == ["fpmac_array"] * 2
    assert "host: smd -- mini-batch dropping is a host-side schedule, no PE" in design.describe()


def test_the_training_loader_ignores_the_design_table():
    assert set(load_config(EXAMPLES / "digits_abvs.toml").techniques) == {"abvs"}


@pytest.mark.parametrize("edit, message", [
    (lambda raw: raw["design"].update(board="arty"), "design.board: unknown board 'arty'"),
    (lambda raw: raw["design"].update(clock_mhz=1000), "design.clock_mhz"),
    (lambda raw: raw["design"].update(name="Bad Name"), "design.name"),
    (lambda raw: raw["design"].update(colour="red"), "design.colour: unknown field"),
    (lambda raw: raw["design"].update(pe={"fpmac_array": {"max_fb": 12}}), "design.pe.fpmac_array.max_fb: derived"),
    (lambda raw: raw["design"].update(pe={"fpmac_array": {"nonsense": 1}}), "design.pe.fpmac_array.nonsense: not a field"),
    (lambda raw: raw["design"].update(pe={"csb": {"kernel": 3}}), "design.pe.csb: the configuration does not use"),
    (lambda raw: raw["design"].update(pe={"fpmac_array": {"copies": 0}}), "design.pe.fpmac_array.copies: must be"),
    (lambda raw: raw["design"].update(pe={"fpmac_array": {"copies": 9}}), "design.pe.fpmac_array.copies: must be"),
    (lambda raw: raw["design"].update(pe={"fpmac_array": {"copies": True}}), "design.pe.fpmac_array.copies: must be"),
    (lambda raw: raw["design"].update(pe={"fpmac_array": {"copies": "2"}}), "design.pe.fpmac_array.copies: must be"),
    (lambda raw: raw["design"].update(pe={"fpmac_array": {"held_sums": 0}}), "design.pe.fpmac_array.held_sums: must be"),
    (lambda raw: raw["techniques"].update(cpt={}), "'fixed_mac_array' PE, which is not registered"),
    (lambda raw: raw["techniques"]["abvs"].update(exp_bits=9), "techniques.abvs.exp_bits"),
])
def test_bad_designs_are_refused_with_the_field(edit, message):
    raw = _raw("digits_abvs.toml")
    edit(raw)
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(".", r"\.")):
        design_from_dict(raw)


def test_an_ip_may_be_built_without_the_accumulation_buffer(tmp_path):
    """[design.pe.<pe>] held_sums: the instance, its fit (the lean shell's cost: no block RAM) and the manifest
    say so. The default is without the buffer for the PEs that chain their sums themselves (FP-MAC array, CSB)
    and with it for the TT PEs; a design may ask otherwise either way."""
    from codesign.design.fit import fit_design
    from codesign.design.manifest import design_manifest

    raw = _raw("digits_abvs.toml")
    raw["design"]["pe"]["fpmac_array"].update(held_sums=True)  # the example's build, two copies, with the buffer
    full, lean = design_from_dict(raw), design_from_dict(_raw("digits_abvs.toml"))
    assert [i.held_sums for i in full.instances] == [True, True]
    assert [i.held_sums for i in lean.instances] == [False, False]
    assert [i["held_sums"] for i in full.to_dict()["instances"]] == [True, True]
    fits = {name: fit_design(design, cache_dir=tmp_path) for name, design in (("lean", lean), ("full", full))}
    assert fits["lean"].per_ip["fpmac_array_0"]["shell"]["bram_36k"] == 0
    assert fits["full"].per_ip["fpmac_array_0"]["shell"]["bram_36k"] == 6
    assert [ip["held_sums"] for ip in design_manifest(full)["ips"]] == [True, True]
    assert [ip["held_sums"] for ip in design_manifest(lean)["ips"]] == [False, False]
    assert [(i.pe, i.held_sums) for i in design_from_dict(_raw("digits_compressed.toml")).instances] == [("csb", False)]
    tt = _raw("digits_tt.toml")
    assert {i.pe for i in design_from_dict(tt).instances} >= {"tt1", "tt2"}
    assert all(i.held_sums for i in design_from_dict(tt).instances)
    tt["design"]["pe"]["tt2"]["held_sums"] = False
    held = {i.pe: i.held_sums for i in design_from_dict(tt).instances}
    assert held.pop("tt2") is False and held and all(held.values())


@pytest.mark.parametrize("pe_name, bram", [("csb", 0), ("fpmac_array", 0), ("tt1", 6), ("tt2", 6)])
def test_the_explorer_prices_the_shell_each_pe_gets_by_default(pe_name, bram):
    """The explorer's shell cost with no held_sums given (ip_shell_cost, fixed_resources) is the shell the design
    flow builds: without the buffer's 6 BRAM36 for the PEs that chain their sums themselves; an instance made
    without held_sums takes the same default."""
    from codesign.design.explore_model import fixed_resources
    from codesign.design.point import PeInstance
    from codesign.shell.ip import ip_shell_cost

    pe = get_pe(pe_name)
    spec = pe.spec_class()
    assert ip_shell_cost(pe, spec, "xcup")["bram_36k"] == bram
    assert ip_shell_cost(pe, spec, "xcup", held_sums=True)["bram_36k"] == 6
    priced = fixed_resources({pe_name: spec}, "xcup")["bram_36k"]
    assert priced - fixed_resources({pe_name: spec}, "xcup", {pe_name: True})["bram_36k"] == bram - 6
    assert PeInstance(name="x_0", pe=pe_name, spec=spec, reason="test").held_sums == (bram == 6)


def test_compressed_operand_width_must_match_the_csb_contract():
    raw = _raw("digits_compressed.toml")
    raw["techniques"]["compress"]["bits"] = 6
    with pytest.raises(DesignError, match="techniques.compress.bits: the CSB PE implements 8-bit operands"):
        design_from_dict(raw)


def test_a_missing_design_file_is_a_clear_error(tmp_path):
    with pytest.raises(DesignError, match="does not exist"):
        load_design(tmp_path / "nope.toml")
