"""The family registry of codesign.deploy.trainers: every family's example design trains with that family's loop."""

from __future__ import annotations

import pytest

from codesign.deploy.trainers import FAMILIES, QUICK_CHANGES
from codesign.design import load_design
from codesign.design.loops import loop_entry
from codesign.resources import data_dir


@pytest.mark.parametrize("name", list(FAMILIES))
def test_example_design_records_its_family(name):
    family = FAMILIES[name]
    assert family.name == name
    design = load_design(data_dir("examples") / family.example)
    entry = loop_entry(design)
    assert entry is not None and entry["family"] == name
    assert family.setup.from_dict(entry["setup"]).to_dict() == entry["setup"]


def test_every_family_has_quick_changes():
    assert set(QUICK_CHANGES) == set(FAMILIES)
