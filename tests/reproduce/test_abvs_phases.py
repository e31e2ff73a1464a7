"""The ABVS phases' records: what the preliminary phase chose is read off its scan, cost and schedule records."""

import dataclasses

import pytest

from codesign.reproduce.abvs_budget import SMOKE
from codesign.reproduce.abvs_phases import Preliminary


def test_the_preliminary_record_reads_its_choices_off_the_selection_records():
    p = Preliminary(budget=SMOKE, scan={"least_sufficient_fb": 6}, lsfb=6, cost={"path": ""},
                    schedule={"fb_min": 3, "check_every_epochs": 4}, notes=())
    assert (p.report, p.fb_min, p.check_every) == ("", 3, 4)
    with pytest.raises(dataclasses.FrozenInstanceError):
        p.lsfb = 5
