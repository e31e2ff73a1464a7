"""The FB-float step's lists priced by the list cycle model: the PE's part is the PE cycle model's sum over the
calls, the parts add up, and a larger batch costs more."""

from __future__ import annotations

from codesign.pe.fpmac_array.cycles import transaction_cycles
from codesign.pe.fpmac_array.spec import FpmacArraySpec
from codesign.step.fpmac_array.list_time import step_list_cycles
from codesign.step.fpmac_array.lists import step_arena, step_lists

SPEC = FpmacArraySpec(exp_bits=5, max_fb=7, max_m=4, max_n=3, max_k=5)


def test_the_step_cycles_add_up_and_the_pe_part_is_the_pe_model():
    layers = (7, 5, 4)
    priced = step_list_cycles(SPEC, layers, 7)
    lists = step_lists(step_arena(SPEC, layers, 7), 7, SPEC.max_fb, 0)
    assert priced["calls"] == len(lists.forward) + len(lists.backward) and priced["macs"] == lists.macs
    assert priced["total"] == priced["forward"] + priced["backward"] == sum(priced["breakdown"].values())
    assert priced["breakdown"]["pe"] == sum(transaction_cycles(SPEC, call.header).total
                                            for call in lists.forward + lists.backward)
    assert step_list_cycles(SPEC, layers, 7, fb=3)["total"] == priced["total"]  # the FB changes no cycle
    assert step_list_cycles(SPEC, layers, 3)["total"] < priced["total"]


def test_the_list_step_is_its_two_lists_on_the_board():
    from codesign.boards import board
    from codesign.step.fpmac_array.list_time import fb_list_step
    from codesign.step.list_cycles import DdrTiming

    layers, target = (7, 5, 4), board("zedboard")
    priced = step_list_cycles(SPEC, layers, 7, ddr=DdrTiming())
    step = fb_list_step(SPEC, layers, 7, target, clock_mhz=50.0, host_s=1e-3, host_source="test", ddr=DdrTiming())
    assert step.stages == 2 and step.calls == priced["calls"] and step.macs == priced["macs"]
    assert step.pe_s == (priced["forward"] + priced["backward"]) / 50e6 and step.host_s == 1e-3
    assert priced["total"] > step_list_cycles(SPEC, layers, 7)["total"]  # DDR's latency on top of the AXI RAM's
