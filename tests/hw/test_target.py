"""Build targets: validated on construction, resolved per PE, and kept out of the arithmetic spec."""

import dataclasses

import pytest

from codesign.hw.target import BuildTarget
from codesign.pe.fpmac import FpmacSpec


def test_defaults_resolve_to_the_pe_first_interface_and_top():
    target = BuildTarget().resolve("demo", ("axis",))
    assert (target.interface, target.top, target.board.name) == ("axis", "demo_kernel", "zedboard")


def test_board_lookup_and_clock():
    target = BuildTarget.for_board("ultra96v2", clock_period_ns=5)
    assert target.part == "xczu3eg-sbva484-1-i" and target.board.yosys_family == "xcup"


@pytest.mark.parametrize("fields, message", [
    ({"part": "xc7a35t"}, "unknown FPGA part"),
    ({"clock_period_ns": 0.5}, "out of range"),
    ({"interface": "pcie"}, "is not one of"),
    ({"top": "3x"}, "not a C identifier"),
])
def test_bad_targets_are_refused(fields, message):
    with pytest.raises(ValueError, match=message):
        BuildTarget(**fields)


def test_an_interface_the_pe_lacks_is_refused():
    with pytest.raises(ValueError, match="supports interface"):
        BuildTarget(interface="m_axi").resolve("demo", ("axis",))


def test_the_arithmetic_spec_holds_no_target_field():
    names = {field.name for field in dataclasses.fields(FpmacSpec)}
    assert not names & {field.name for field in dataclasses.fields(BuildTarget)}
