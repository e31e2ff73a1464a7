"""The list step's model (codesign.step.tt.list_time) against a list step run: the host work it counts equals what
a TtListTrainer step asks of its shell, and its cycles are the list cycle model's, phase by phase."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

from codesign.boards import board
from codesign.design import load_design
from codesign.design.families.tt import tt_setup_of
from codesign.loops.tt_lists import TtListTrainer
from codesign.pe import get_pe
from codesign.pe.tt.cycles import transaction_cycles
from codesign.pe.tt.spec import Tt1Spec, Tt2Spec
from codesign.shell.list_runner import GoldenListShell
from codesign.step.list_cycles import list_cycles
from codesign.step.time import Stage
from codesign.step.list_cycles import list_words
from codesign.step.tt.list_time import (BOARD_DDR, hidden_host_s, list_ports, pe_work, phase_stages, tt_list_plans,
                                       tt_list_step)

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"
SPECS = dict(lanes=4, rows=2, a_bits=16, b_bits=16, max_j=8, max_k=16, max_l=8)


@pytest.fixture(scope="module")
def setup():
    found = tt_setup_of(load_design(EXAMPLES / "digits_tt.toml"))
    return dataclasses.replace(found, precision={**found.precision, "scale_rule": "tracked"})


def _stepped(setup, steps: int = 3):
    """A list trainer after ``steps`` steps on random data, and what its shell counted in the last one."""
    shell = GoldenListShell({"tt1": Tt1Spec(**SPECS), "tt2": Tt2Spec(**SPECS)})
    trainer = TtListTrainer(setup, shell)
    rng = np.random.default_rng(5)
    for index in range(steps):
        if index == steps - 1:
            before = (shell.lists, shell.calls, shell.flushed, shell.read, trainer.runner.macs)
        trainer.train_step(rng.random((setup.batch_size, 64)).astype(np.float32), rng.integers(0, 10, setup.batch_size))
    return trainer, [now - then for now, then in zip((shell.lists, shell.calls, shell.flushed, shell.read,
                                                      trainer.runner.macs), before)]


@pytest.mark.slow  # 8 to 12 s
def test_the_host_work_counted_is_what_a_list_step_asks_of_its_shell(setup):
    trainer, (lists, calls, flushed, read, macs) = _stepped(setup)
    assert trainer.list_steps == 2 and calls > 0
    step = tt_list_step(setup, Tt1Spec(**SPECS), Tt2Spec(**SPECS), board("zedboard"), clock_mhz=100.0, host_s=1e-3,
                        host_source="given", beside=[(0, 1, 1e-9)])  # far shorter than the phase: all hidden
    work = step.host
    assert (work.lists, work.calls, work.flushed_bytes, work.read_bytes) == (lists, calls, 4 * flushed, 4 * read)
    assert step.time.macs == macs and step.time.calls == calls
    assert work.adam == sum(np.prod(s) for layer in setup.layers for s in layer["core_shapes"]) + 64 + 10
    assert work.loss == setup.batch_size * 10
    assert step.host_hidden_s == 1e-9 and step.time.host_s == 1e-3 - 1e-9
    assert step.time.total_s == pytest.approx(step.time.pe_s + step.time.memory_s + 1e-3 - 1e-9)


def test_host_work_beside_a_phase_is_hidden_as_far_as_the_phase_reaches():
    ultra96 = board("ultra96v2")
    phases = [[Stage(cycles=1000, words_in=0, words_out=0), Stage(cycles=3000, words_in=0, words_out=0)]]
    assert hidden_host_s([(0, 1, 10e-6), (0, 0, 20e-6)], phases, ultra96, 100.0) == pytest.approx(20e-6)
    assert hidden_host_s([(0, 1, 40e-6)], phases, ultra96, 100.0) == pytest.approx(30e-6)
    for beside, why in (([(1, 0, 0.0)], "no such phase"), ([(0, 2, 0.0)], "no such phase"),
                        ([(0, 0, -1.0)], "negative"), ([(0, 1, 1e-6), (0, 1, 1e-6)], "given twice")):
        with pytest.raises(ValueError, match=why):
            hidden_host_s(beside, phases, ultra96, 100.0)


@pytest.fixture(scope="module")
def priced(setup):
    """The list step on the small builds at 100 MHz, its lists, and each list's cycles from the list cycle model
    (per layer, per phase, one per list): priced once for the tests that read them."""
    spec1, spec2 = Tt1Spec(**SPECS), Tt2Spec(**SPECS)
    step = tt_list_step(setup, spec1, spec2, board("ultra96v2"), clock_mhz=100.0, host_s=0.0, host_source="given")
    plans = tt_list_plans(setup, spec1, spec2)
    cycles = [[[list_cycles(get_pe(pe), spec1 if pe == "tt1" else spec2, calls, lists.arena, ddr=BOARD_DDR)
                for pe, calls in phase] for phase in lists.phases] for lists in plans]
    return step, plans, cycles


@pytest.mark.slow  # with pricing every list of the step: 18 to 22 s
def test_each_phase_costs_its_longer_list(priced):
    step, plans, cycles = priced
    for lists, phases, found in zip(plans, step.phase_cycles, cycles):
        assert len(phases) == len(lists.phases) == len(found)
        for phase, each in zip(phases, found):
            each = [listed.total for listed in each]
            assert phase == max(each)
            if len(each) == 2:
                assert phase < sum(each), "PE1's and PE2's lists of a phase run side by side"
    assert step.layer_cycles == tuple(sum(p) for p in step.phase_cycles)
    assert step.time.pe_s == pytest.approx(sum(step.layer_cycles) / 100e6)


@pytest.mark.slow
def test_the_pe_work_is_the_cycles_the_list_model_finds_the_pes_busy(priced):
    """PeWork's parts from the PEs' cycle formulas against the list cycle model's busy cycles (a PE part or its
    loader moved): a list whose loads all run on their own is busy exactly its calls' stall-free cycles; where
    a loader works beside the MAC loop, a stall can push loads past it, so the list is busy at least that
    long and at most its parts one after the other. The overlapped bound (each list's busiest of its input
    stream, MAC loop and output side) lies below; so does the balanced one (each phase's stall-free cycles over
    the two IPs)."""
    step, plans, listed = priced
    specs = {"tt1": Tt1Spec(**SPECS), "tt2": Tt2Spec(**SPECS)}
    busy, longest, alone, overlaps, balanced = [], 0, 0, {"tt1": 0, "tt2": 0}, 0
    for lists, phases in zip(plans, listed):
        for phase, each in zip(lists.phases, phases):
            found, free_of = [], []
            for (pe, calls), list_run in zip(phase, each):
                cycles = [transaction_cycles(specs[pe], call.header) for call in calls]
                found.append(list_run.breakdown()["pe"])
                free, overlap = sum(c.total for c in cycles), sum(c.overlap for c in cycles)
                assert free <= found[-1] <= free + overlap
                if not overlap:
                    assert found[-1] == free
                    alone += 1
                free_of.append(free)
                overlaps[pe] += overlap
            busy.append(max(found))
            longest += max(free_of)
            balanced += -(-sum(free_of) // 2)
    work = step.pe_work
    assert work.balanced == balanced < work.stall_free
    assert alone and work.overlap == overlaps and overlaps["tt1"] > 0 and overlaps["tt2"] > 0
    assert work.stall_free == longest <= sum(busy) < sum(step.layer_cycles)
    parts = sum(work.load[pe] + work.compute[pe] + work.drain[pe] for pe in ("tt1", "tt2"))
    assert work.overlapped < work.stall_free <= parts + 2 * step.host.calls
    assert all(work.load[pe] > 0 and work.compute[pe] > 0 and work.drain[pe] > 0 for pe in ("tt1", "tt2"))


def test_the_balanced_bound_spreads_each_phase_over_every_ip(setup):
    """PeWork's ``balanced``: each phase's calls' stall-free cycles summed over its lists and spread over the IPs of
    both PEs (rounded up), phase after phase; never above the longest lists' and, where the PEs' lists of some
    phase differ in length, below them. A phase of more lists than IPs is refused."""
    spec1, spec2 = Tt1Spec(**SPECS), Tt2Spec(**SPECS)
    plans = tt_list_plans(setup, spec1, spec2, (2, 2))
    specs = {"tt1": spec1, "tt2": spec2}
    free = [[sum(transaction_cycles(specs[pe], call.header).total for call in calls) for pe, calls in phase]
            for lists in plans for phase in lists.phases]
    work = pe_work(plans, spec1, spec2, 4)
    assert work.balanced == sum(-(-sum(each) // 4) for each in free)
    assert work.stall_free == sum(max(each) for each in free) > work.balanced
    assert pe_work(plans, spec1, spec2, 9).balanced < work.balanced
    with pytest.raises(ValueError, match="lists on 1 IPs"):
        pe_work(plans, spec1, spec2, 1)


def test_each_ip_moves_its_words_through_the_port_the_block_design_gives_it(setup):
    """PE1's copies come first in a TT design's instances, then PE2's, round robin over the ports; a phase's
    busiest port carries the words of the lists on it, a PE's k-th list on its k-th IP. On one port every word
    passes it; on more the step waits on data no longer, as its memory seconds say."""
    assert list_ports((2, 2), 1) == {"tt1": (0, 0), "tt2": (0, 0)}
    assert list_ports((2, 2), 2) == {"tt1": (0, 1), "tt2": (0, 1)}
    assert list_ports((2, 3), 4) == {"tt1": (0, 1), "tt2": (2, 3, 0)}
    for bad in (0, True, 1.0):
        with pytest.raises(ValueError, match="hp_ports"):
            list_ports((1, 1), bad)
    spec1, spec2 = Tt1Spec(**SPECS), Tt2Spec(**SPECS)
    lists = tt_list_plans(setup, spec1, spec2, (2, 2))[0]
    ports = list_ports((2, 2), 4)
    shared = 0
    for phase, one, two in zip(lists.phases, phase_stages(lists, spec1, spec2),
                               phase_stages(lists, spec1, spec2, ports=ports)):
        assert (one.cycles, one.words_in, one.words_out) == (two.cycles, two.words_in, two.words_out)
        assert (one.port_in, one.port_out) == (None, None)
        by_port: dict = {}
        for index, (pe, calls) in enumerate(phase):
            port = ports[pe][sum(other == pe for other, _ in phase[:index])]
            by_port[port] = [a + b for a, b in zip(by_port.get(port, (0, 0)), list_words(calls))]
        assert (two.port_in, two.port_out) == tuple(max(words[side] for words in by_port.values()) for side in (0, 1))
        shared += two.port_in < two.words_in
    assert shared > 0  # some phase's lists run on IPs of different ports
    target = board("ultra96v2")
    steps = [tt_list_step(setup, spec1, spec2, target, clock_mhz=100.0, host_s=0.0, host_source="none",
                          copies=(2, 2), hp_ports=ports) for ports in (1, 4)]
    assert steps[0].time.pe_s == steps[1].time.pe_s and steps[1].time.memory_s <= steps[0].time.memory_s


def test_builds_that_cannot_run_lists_are_refused_with_the_reason(setup):
    with pytest.raises(ValueError, match="lanes and stream widths must agree"):
        tt_list_plans(setup, Tt1Spec(**SPECS), Tt2Spec(**{**SPECS, "lanes": 8}))
