"""The FB-float step's lists priced by the list cycle model: the PE's part is the PE cycle model's sum over the
calls, the parts add up, and a larger batch costs more."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

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
    from codesign.step.time import list_stages

    layers, target = (7, 5, 4), board("zedboard")
    priced = step_list_cycles(SPEC, layers, 7, ddr=DdrTiming())
    step = fb_list_step(SPEC, layers, 7, target, clock_mhz=50.0, host_s=1e-3, host_source="test", ddr=DdrTiming())
    assert step.stages == 2 and step.calls == priced["calls"] and step.macs == priced["macs"]
    # the stages are the two lists' cycles, exactly; their seconds are summed stage by stage (float rounding)
    assert [stage.cycles for stage in list_stages(priced)] == [priced["forward"], priced["backward"]]
    assert step.pe_s == pytest.approx((priced["forward"] + priced["backward"]) / 50e6, rel=1e-12)
    assert step.host_s == 1e-3
    assert priced["total"] > step_list_cycles(SPEC, layers, 7)["total"]  # DDR's latency on top of the AXI RAM's


@pytest.mark.parametrize("ddr", [None, pytest.param("board", marks=pytest.mark.slow)])  # 3 and 6 s
def test_the_explorer_s_fast_pricing_is_the_cycle_model_on_every_array_shape(ddr):
    """fast=True simulates a step shape once and re-prices other arrays by their compute cycles: equal to the
    full simulation, list by list and part by part, on every rows x cols of 1..5 at two buffer depths, under
    both memories (the explorer's knob table goes to 16 x 16; a 1-wide array and a tall one are here)."""
    from codesign.step.list_cycles import BOARD_DDR

    memory = BOARD_DDR if ddr else None
    layers = (9, 6, 4)
    for depth in (4, 6):
        for rows in range(1, 6):
            for cols in range(1, 6):
                spec = FpmacArraySpec(exp_bits=5, max_fb=7, rows=rows, cols=cols, max_m=depth, max_n=depth,
                                      max_k=depth)
                fast = step_list_cycles(spec, layers, 5, ddr=memory, fast=True)
                assert fast == step_list_cycles(spec, layers, 5, ddr=memory), (rows, cols, depth)


@pytest.mark.skipif(shutil.which("iverilog") is None, reason="Icarus Verilog is not on PATH")
@pytest.mark.slow
@pytest.mark.parametrize("copies", [1, 2])
def test_rtl_runs_the_example_step_bit_exact_in_the_modelled_cycles(tmp_path, copies):
    """digits_abvs (its network, batch 64 and FP-MAC array build): a step of the list trainer on the golden shell,
    each phase's arena before and after kept; every list on the RTL shell around the array's RTL gives the golden
    arena bit for bit in the cycles the model prices it at (docs/fpmac_array.md quotes them). On two IPs each list
    runs from its phase's arena (a phase's lists are independent), its chains' partial sums a third segment."""
    from codesign.design import load_design
    from codesign.design.families.fpmac_array import fb_setup_of
    from codesign.loops.fb_lists import FbListTrainer
    from codesign.pe import get_pe
    from codesign.shell.calls import ListCase, run_list_golden
    from codesign.shell.ip import held_by_default
    from codesign.shell.list_runner import GoldenListShell
    from codesign.shell.list_sim import run_list_rtl
    from codesign.step.list_cycles import list_cycles

    setup = fb_setup_of(load_design(Path(__file__).resolve().parents[3] / "examples" / "digits_abvs.toml"))
    shell = GoldenListShell({"fpmac_array": setup.spec}, units={"fpmac_array": copies})
    trainer, runs, golden_run = FbListTrainer(setup, shell), [], shell.run_phase

    def kept(phase, arena, beside=None):
        before = np.array(arena, copy=True)
        after = golden_run(phase, arena, beside=beside)
        runs.append((phase, before, np.array(after, copy=True)))
        return after

    shell.run_phase = kept
    rng = np.random.default_rng(4)
    for _ in range(2):  # the second step starts from the state the first left on the device
        trainer.train_step(rng.random((64, setup.layers[0])), rng.integers(0, setup.layers[-1], 64))
    priced = step_list_cycles(setup.spec, setup.layers, 64, copies=copies)
    pe = get_pe("fpmac_array")
    step = runs[len(runs) // 2:]  # the second step's phases
    names = [name for name in priced["words"]]  # forward, backward on one IP; forward, backward 1, 2 on two
    assert len(step) == len(names)
    for name, (phase, before, _) in zip(names, step):
        busy = []
        for index, (_, calls) in enumerate(phase):
            expected = run_list_golden(pe, setup.spec, before, calls)
            result = run_list_rtl(pe, setup.spec, ListCase(calls=calls, arena=before, expected=expected),
                                  tmp_path / f"{name}-{index}".replace(" ", "-"), held_sums=held_by_default(pe))
            model = list_cycles(pe, setup.spec, calls, before)
            print(f"\n[digits_abvs step on {copies} IP(s), {name}, list {index}] {len(calls)} calls, "
                  f"{result.mismatches} mismatches, model {model.total}, RTL busy {result.busy_cycles}")
            assert result.passed, result.first_mismatches
            assert model.total == result.busy_cycles
            busy.append(result.busy_cycles)
        assert max(busy) == priced[name]
