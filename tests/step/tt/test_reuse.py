"""Keeping data on chip: the states a step reuses, who reads them, the BRAM budget over the step, what it saves."""

from __future__ import annotations

import dataclasses

import pytest

from codesign.step.tt.reuse import BRAM36_BYTES, KeptState, keep_within, repeated_cores, reuse_budget, state_flow
from codesign.step.tt.schedule import LayerGeometry, StepHardware, plan_step
from codesign.step.tt.cycles import step_cycles

GEOMETRY = LayerGeometry(in_modes=(4, 8, 4), out_modes=(4, 4, 8), ranks=(1, 8, 8, 1), batch=64)
HARDWARE = StepHardware(pe1=StepHardware().pe1, pe1_units=2, pe2_units=3, outer_pe="tt1")


def _plan(route, need_input_grad=True, geometry=GEOMETRY):
    return plan_step(geometry, hardware=HARDWARE, core_grad_route=route, need_input_grad=need_input_grad)


@pytest.mark.parametrize("route", ["direct", "dense"])
def test_every_state_is_read_whole_by_its_readers(route):
    """A reader's operand is the state itself: its (I, J, K) (or, for a folded core gradient, I or L times the
    summed length) multiply to the state's values."""
    plan = _plan(route)
    names = {plan.contractions[s.producer].name: [plan.contractions[c].name for c, _ in s.consumers]
             for s in state_flow(plan)}
    d = GEOMETRY.order
    for k in range(d - 1):
        assert f"forward[{k + 1}]" in names[f"forward[{k}]"]
    assert f"forward[{d - 1}]" not in names  # the layer's output leaves it
    if route == "direct":
        assert names["forward[0]"] == ["forward[1]", "core_grad[1]"] and names["input_grad[2]"] == [
            "core_grad[1]", "input_grad[1]"]
    else:
        assert names["outer[0]"] and all(n.startswith("dense") for n in names["outer[0]"])
        assert not any(n.startswith("core_grad") for n in names)
    for state in state_flow(plan):
        for c, operand in state.consumers:
            item = plan.contractions[c]
            i, j, k, l = item.dims
            if item.folded:
                assert (i if operand == "a" else l) * item.folded == state.values
            else:
                assert operand == "a" and i * j * k == state.values
            assert state.bits == (item.a_bits if operand == "a" else item.b_bits)


def test_a_network_input_has_no_input_gradient_state():
    plan = _plan("direct", need_input_grad=False)
    producers = {plan.contractions[s.producer].name for s in state_flow(plan)}
    assert "input_grad[1]" in producers and "input_grad[0]" not in producers


def test_states_are_kept_first_come_while_they_fit_beside_the_live_ones():
    states = [KeptState(0, ((1, "a"),), 600, 8), KeptState(1, ((2, "a"),), 500, 8), KeptState(2, ((3, "a"),), 400, 8),
              KeptState(3, ((4, "a"),), 2000, 8)]
    # lives 0-1, 1-2, 2-3, 3-4: 600 + 500 meet at position 1, 500 + 400 at 2
    assert keep_within(states, [0, 1, 2, 3, 4], 1000) == (True, False, True, False)
    assert keep_within(states, [0, 1, 2, 3, 4], 1100) == (True, True, True, False)
    # contraction 1 later: 600 lives 0-2, 500 only at 2 beside it (1100), so 400 no longer fits at 2
    assert keep_within(states, [0, 2, 2, 3, 4], 1100) == (True, True, False, False)
    assert keep_within(states, [0, 1, 2, 3, 4], 0) == (False,) * 4


def test_a_copy_keeps_the_core_its_last_call_had():
    geometry = LayerGeometry(in_modes=(2, 64), out_modes=(2, 2), ranks=(1, 2, 1), batch=64)
    plan = plan_step(geometry, hardware=StepHardware(pe2=dataclasses.replace(StepHardware().pe2, max_k=16)))
    first = [call for call in plan.calls if call.index == 0]  # forward[0]: K = 64 * 64 cut in pieces of 16
    assert len(first) > 1 and len({(c.l, c.j) for c in first}) == 1
    units = step_cycles(plan).schedule.units
    repeated = repeated_cores(plan, units)
    assert repeated[:len(first)] == [False] + [True] * (len(first) - 1)
    assert repeated_cores(plan, [0] * len(plan.calls))[:len(first)] == repeated[:len(first)]


@pytest.mark.parametrize("route", ["direct", "dense"])
def test_the_budget_counts_the_steps_words_and_cycles_and_what_keeping_saves(route):
    plans = [_plan(route, need_input_grad=False),
             _plan(route, geometry=LayerGeometry(in_modes=(4, 4, 8), out_modes=(2, 5, 1), ranks=(1, 8, 8, 1),
                                                 batch=64))]
    cycles = [step_cycles(plan) for plan in plans]
    units = [c.schedule.units for c in cycles]
    none = reuse_budget(plans, units, bram_bytes=0)
    assert none.words == sum(w_in + w_out for c in cycles for w_in, w_out in c.stage_words)
    assert none.cycles == sum(c.makespan for c in cycles)
    assert not any(none.kept) and none.state_words == 0
    assert none.cycles_kept < none.cycles or none.core_words == 0
    everything = reuse_budget(plans, units, bram_bytes=1 << 40)
    assert all(everything.kept) and everything.state_words > 0
    assert everything.words_kept < none.words_kept and everything.cycles_kept < none.cycles_kept
    assert everything.core_words == none.core_words and everything.words == none.words
    device = reuse_budget(plans, units, bram_bytes=216 * BRAM36_BYTES)  # the xczu3eg's BRAM, nothing else in it
    assert none.words_kept >= device.words_kept >= everything.words_kept


def test_stage_loads_are_keyed_by_stage_pe_and_copy_and_a_stage_lasts_its_busiest():
    """Directed: loads of one stage on different PEs or copies run side by side (the stage is the busiest), loads of
    different stages one after another; the same key adds up."""
    from codesign.step.tt.reuse import _makespan

    loads = {(0, "tt1", 0): 10, (0, "tt2", 0): 30, (0, "tt2", 1): 20, (1, "tt1", 0): 5, (1, "tt1", 1): 7}
    assert _makespan(loads) == 30 + 7
    assert _makespan({(0, "tt1", 0): 10}) == 10 and _makespan({}) == 0
