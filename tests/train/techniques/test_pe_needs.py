"""Techniques declare the PEs they need; a design point collects them in one order, each PE once."""

from __future__ import annotations

from pathlib import Path

import pytest

from codesign.design import load_design
from codesign.design.point import derived_pe_fields
from codesign.train.config import load_config
from codesign.train.techniques import PE_ORDER, TECHNIQUES, pe_needs, technique_module

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"


def test_every_technique_with_arithmetic_declares_its_pes_and_host_techniques_none():
    declaring = {name for name in TECHNIQUES if hasattr(technique_module(name), "pe_needs")}
    assert declaring == set(PE_ORDER) == {"abvs", "cpt", "psg", "tt", "compress"}


@pytest.mark.parametrize(("example", "pes", "instances"), [
    ("digits_abvs.toml", ["fpmac_array"], ["fpmac_array"] * 2),  # two copies of the array, from its PE table
    ("digits_tt.toml", ["tt1", "tt2", "tt3"], ["tt1", "tt2", "tt3"]),
    ("digits_compressed_mlp.toml", ["csb"], ["csb"] * 4)])  # four csb IPs share each step
def test_the_shipped_examples_need_their_pes(example, pes, instances):
    training = load_config(EXAMPLES / example)
    assert [need[0] for need in pe_needs(training)] == pes
    assert [instance.pe for instance in load_design(EXAMPLES / example).instances] == instances


def test_two_techniques_needing_one_pe_give_it_once_from_the_first_in_order():
    training = load_config(EXAMPLES / "digits_abvs.toml")
    both = training.replace(techniques={**training.techniques, "psg": technique_module("psg").Config(),
                                        "cpt": technique_module("cpt").Config()})
    needs = pe_needs(both)
    assert [need[0] for need in needs] == ["fpmac_array", "fixed_mac_array"]
    assert needs[1][2] == "techniques.cpt (fixed-point MACs)"  # cpt comes before psg in PE_ORDER
    assert derived_pe_fields(training.replace(techniques={}))[0][2] == "FP32 training (no reduced-precision technique)"
