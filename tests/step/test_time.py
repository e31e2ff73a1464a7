"""The whole-step model: stages from the TT schedule, DDR and port time, host share, bottleneck and bounds."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

from codesign.boards import boards
from codesign.design import load_design
from codesign.design.families.tt import tt_setup_of
from codesign.step.time import (Stage, hidden_seconds, list_stages, list_step_time, port_bytes_per_s, stage_seconds,
                                step_time)
from codesign.step.tt.time import tt_stages, tt_step_time
from codesign.loops.host_share import measure_tt_host, measure_tt_host_seconds
from codesign.step.tt.schedule import StepHardware
from codesign.pe.tt.spec import Tt1Spec, Tt2Spec
from codesign.step.tt.step import step_plan
from codesign.step.tt.cycles import stage_loads, step_cycles

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.fixture(scope="module")
def setup():
    return tt_setup_of(load_design(EXAMPLES / "digits_tt.toml"))


def test_port_and_ddr_figures_come_from_the_board_files():
    zed, u96 = boards()["zedboard"], boards()["ultra96v2"]
    assert port_bytes_per_s(zed) == 64 / 8 * 100e6 and port_bytes_per_s(u96) == 128 / 8 * 100e6
    assert zed.ddr_peak_gbps == 4.2 and u96.ddr_peak_gbps == 4.26


def test_a_stage_waits_for_the_slower_of_its_pes_and_its_data():
    zed = boards()["zedboard"]
    # 1000 cycles at 100 MHz = 10 us; 1000 words in = 4000 bytes over 0.8 GB/s = 5 us: the PE bounds the stage
    assert stage_seconds(Stage(cycles=1000, words_in=1000, words_out=10), zed, 100.0) == pytest.approx((10e-6, 0.0))
    # 10 000 words out = 40 kB over 0.8 GB/s = 50 us: 40 us more than the PE's 10 us
    pe, extra = stage_seconds(Stage(cycles=1000, words_in=0, words_out=10_000), zed, 100.0)
    assert pe == pytest.approx(10e-6) and extra == pytest.approx(40e-6)
    timed = step_time([Stage(cycles=1000, words_in=0, words_out=10_000)] * 3, zed, clock_mhz=100.0, host_s=1e-6,
                      host_source="test", macs=1000, array_macs=10, calls=3, stream_cycles=30_000,
                      mac_energy_pj=1.0)
    assert timed.total_s == pytest.approx(3 * 50e-6 + 1e-6) and timed.bottleneck == "memory"
    assert timed.bounds["macs_s"] == pytest.approx(1000 / (10 * 100e6))
    # the same words over two ports, 6 000 through the busier: 30 us, 20 more than the PE; ZedBoard's DDR (4.27
    # GB/s) moves the 40 kB in 9.4 us, so the port still bounds the stage
    pe, extra = stage_seconds(Stage(cycles=1000, words_in=0, words_out=10_000, port_in=0, port_out=6_000), zed, 100.0)
    assert pe == pytest.approx(10e-6) and extra == pytest.approx(20e-6)


def test_host_work_beside_a_stage_is_hidden_as_far_as_the_stage_reaches():
    zed = boards()["zedboard"]
    stages = [Stage(cycles=1000, words_in=10, words_out=10), Stage(cycles=1000, words_in=0, words_out=10_000)]
    # 10 us of PE; 50 us of data out (40 us more than the PE's)
    assert hidden_seconds({0: 4e-6}, stages, zed, 100.0) == pytest.approx(4e-6)
    assert hidden_seconds({0: 30e-6, 1: 70e-6}, stages, zed, 100.0) == pytest.approx(10e-6 + 50e-6)
    for bad, match in (({2: 1e-6}, "2 stages"), ({0: -1e-6}, "negative")):
        with pytest.raises(ValueError, match=match):
            hidden_seconds(bad, stages, zed, 100.0)
    priced = {"a": 1000, "b": 1000, "words": {"a": (10, 10), "b": (0, 10_000)}, "macs": 100, "calls": 2}
    plain, beside = (list_step_time(priced, zed, clock_mhz=100.0, host_s=80e-6, host_source="test", array_macs=1,
                                    mac_energy_pj=1.0, beside=given) for given in (None, {0: 30e-6}))
    assert plain.host_s == pytest.approx(80e-6) and plain.total_s == pytest.approx(60e-6 + 80e-6)
    assert beside.host_s == pytest.approx(70e-6)  # of the 30 us beside the first stage, its 10 us are hidden
    with pytest.raises(ValueError, match="less than"):  # more work beside the stages than the host did in all
        list_step_time(priced, zed, clock_mhz=100.0, host_s=20e-6, host_source="test", array_macs=1,
                       mac_energy_pj=1.0, beside={0: 30e-6})


def test_a_phase_of_lists_waits_on_its_busiest_port():
    """A phase's k-th list runs on the PE's k-th IP, IP k on port k mod hp_ports: the phase's port words are its
    busiest port's, and on more ports the step waits less on data (the ZedBoard's 64-bit ports move two 32-bit
    words a cycle at 100 MHz)."""
    zed = boards()["zedboard"]
    priced = {"forward": 1000, "backward": 500, "macs": 1, "calls": 5,
              "words": {"forward": (9000, 300), "backward": (400, 40)},
              "list_words": {"forward": [(4000, 100), (3000, 100), (2000, 100)], "backward": [(400, 40)]}}
    one, two, three = (list_stages(priced, ports) for ports in (1, 2, 3))
    assert [(s.port_in, s.port_out) for s in one] == [(9000, 300), (400, 40)]
    assert [(s.port_in, s.port_out) for s in two] == [(6000, 200), (400, 40)]  # IPs 0 and 2 share port 0
    assert [(s.port_in, s.port_out) for s in three] == [(4000, 100), (400, 40)]
    assert all((s.cycles, s.words_in, s.words_out) == (t.cycles, t.words_in, t.words_out) for s, t in zip(one, three))
    assert list_stages({"a": 7, "words": {"a": (5, 6)}}, 2)[0].port_in == 5  # one IP's lists: one port
    times = [list_step_time(priced, zed, clock_mhz=100.0, host_s=0.0, host_source="test", array_macs=1,
                            mac_energy_pj=1.0, hp_ports=ports) for ports in (1, 2, 3)]
    assert times[0].memory_s > times[1].memory_s > times[2].memory_s and times[0].pe_s == times[2].pe_s
    for bad in (0, True):
        with pytest.raises(ValueError, match="hp_ports"):
            list_stages(priced, bad)


def test_stage_loads_price_each_pe_apart_and_combine_to_the_schedule(setup):
    """A stage's cycles are the longer of its PE1 and PE2 loads, and its words their sum, for any builds: what
    lets the explorer price PE1 and PE2 options separately."""
    rng = np.random.default_rng(0)
    for _ in range(6):
        hardware = StepHardware(pe1=Tt1Spec(a_bits=16, b_bits=8, lanes=int(rng.choice([2, 4, 8, 16])),
                                            rows=int(rng.choice([1, 2, 4]))), pe1_units=int(rng.integers(1, 4)),
                                pe2=Tt2Spec(a_bits=16, b_bits=4, lanes=int(rng.choice([2, 4, 8, 16])),
                                            rows=int(rng.choice([1, 2, 4])), max_j=128, max_l=64),
                                pe2_units=int(rng.integers(1, 4)))
        for index in range(len(setup.layers)):
            plan = step_plan(setup.layer_state(index, setup.initial_cores(index)), setup.batch_size, hardware)
            cycles = step_cycles(plan)
            first, second = stage_loads(plan, "tt1"), stage_loads(plan, "tt2")
            assert [max(a[0], b[0]) for a, b in zip(first, second)] == list(cycles.schedule.stage_cycles)
            assert [(a[1] + b[1], a[2] + b[2]) for a, b in zip(first, second)] == list(cycles.stage_words)
            assert sum(a[1] + b[1] for a, b in zip(first, second)) == cycles.sum_of("words_in")


def test_the_host_model_prices_calls_and_the_tt_step_of_the_example(setup):
    host = measure_tt_host(setup, source="here")
    seconds, calls = measure_tt_host_seconds(setup)
    # the split between fixed and per-call time moves with the machine's load; their sum for a step does not vanish
    assert host.fixed_s >= 0 and host.per_call_s >= 0 and host.seconds(calls) > 0 and host.source == "here"
    assert 0 < seconds and calls == tt_stages(setup, setup.hardware())[1]["calls"]
    u96 = boards()["ultra96v2"]
    timed = tt_step_time(setup, setup.hardware(), u96, clock_mhz=100.0, host=host)
    stages, totals = tt_stages(setup, setup.hardware())
    assert timed.stages == len(stages) and timed.calls == totals["calls"] and timed.macs == totals["macs"]
    assert timed.host_s == pytest.approx(host.fixed_s + host.per_call_s * totals["calls"])
    assert timed.pe_s == pytest.approx(sum(s.cycles for s in stages) / 100e6)
    assert timed.bytes == 4 * sum(s.words_in + s.words_out for s in stages)
    assert timed.total_s >= max(timed.bounds.values())  # no bound is beaten
    two = dataclasses.replace(setup, batch_size=2 * setup.batch_size)
    assert tt_step_time(two, two.hardware(), u96, clock_mhz=100.0, host=host).pe_s > timed.pe_s


def test_a_call_list_is_one_stage_of_its_cycles_and_the_words_it_moves():
    from codesign.contracts.calls import Block, Call
    from codesign.step.time import list_stage

    calls = [Call(header=1, segments=(Block(offset=0, words=10, rows=3, stride=64), Block(offset=512, words=5,
                  rows=1)), out=Block(offset=1024, words=7, rows=2, stride=64), count=14, record=2048),
             Call(header=None, segments=(), out=Block(), count=0, record=2080)]
    stage = list_stage(1234, calls)
    assert (stage.cycles, stage.words_in, stage.words_out) == (1234, 32 + 35 + 32, 14 + 8 + 8)
    with pytest.raises(ValueError, match="cycles"):
        list_stage(-1, calls)
