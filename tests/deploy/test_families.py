"""The training families' two registries (board side codesign.deploy.families, desktop side
codesign.design.families): the same keys, each family's example design training with its own loop, quick changes
that are set-up fields, and the host measured from design.json's loop entry."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from types import SimpleNamespace

import pytest

from codesign.deploy import families as board
from codesign.deploy.manifest import DeployError
from codesign.design import families as desktop
from codesign.design import load_design
from codesign.design.families import loop_entry
from codesign.resources import data_dir

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def test_both_halves_name_the_same_families_in_the_same_order():
    assert board.family_names() == desktop.family_names() == ("fpmac_array", "csb", "csb_conv", "tt")
    for key in board.family_names():
        assert board.get_family(key).key == desktop.get_family(key).key == key


@pytest.mark.parametrize("key", board.family_names())
def test_example_design_records_its_family(key):
    family = board.get_family(key)
    design = load_design(data_dir("examples") / family.example)
    assert desktop.family_of(design).key == key
    entry = loop_entry(design)
    assert entry is not None and entry["family"] == key
    assert family.setup.from_dict(entry["setup"]).to_dict() == entry["setup"]


@pytest.mark.parametrize("key", board.family_names())
def test_quick_changes_are_fields_of_the_families_set_up(key):
    family = board.get_family(key)
    fields = {field.name for field in dataclasses.fields(family.setup)}
    assert family.quick_changes and set(family.quick_changes) <= fields


def test_an_unknown_family_is_refused_naming_the_known_ones():
    for half in (board, desktop):
        with pytest.raises(ValueError, match="unknown training family 'fb'; registered training families: "
                                             "fpmac_array, csb, csb_conv, tt"):
            half.get_family("fb")
    with pytest.raises(DeployError, match="records no loop"):
        board.family_of({"design": "x"})


def test_a_design_of_no_family_has_no_loop_entry():
    instances = [SimpleNamespace(pe=pe) for pe in ("tt1", "tt2", "csb")]  # PEs of two families
    mixed = SimpleNamespace(name="mixed", instances=instances)
    assert desktop.family_of(mixed) is None and loop_entry(mixed) is None
    assert desktop.family_of(SimpleNamespace(name="none", instances=[])) is None


@pytest.fixture(scope="module")
def tt_loop():
    return loop_entry(load_design(EXAMPLES / "digits_tt.toml"))


def test_measuring_a_loop_entry_times_its_host_work(tt_loop):
    host = board.measure_loop_host(tt_loop, source="here")
    assert host.source == "here" and host.fixed_s >= 0 and host.per_call_s >= 0 and host.seconds(100) > 0
    with pytest.raises(ValueError, match="needs its data set"):
        board.measure_loop_host({"family": "csb", "setup": {}})
    with pytest.raises(DeployError, match="'fpmac' loop; the board runtime trains the fpmac_array, csb, csb_conv, tt loops"):
        board.measure_loop_host({"family": "fpmac", "setup": {}})


def test_the_fb_loop_is_measured_from_its_entry():
    loop = loop_entry(load_design(EXAMPLES / "digits_abvs.toml"))
    assert loop["family"] == "fpmac_array"
    host = board.measure_loop_host(loop)
    assert host.fixed_s > 0 and host.per_call_s > 0 and "this machine" in host.source
    assert dataclasses.replace(host, source="x").seconds(0) == host.fixed_s
