"""PE1's share of a layer's first forward contraction (codesign.step.tt.first_forward): where its results go, that
the step with any share equals the per-call step bit for bit, how many samples PE1 is given, and that the call
overhead the choice charges is the board memory model's."""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

import numpy as np
import pytest

from codesign.numerics.round_stage import RoundStageConfig
from codesign.pe.tt.spec import Tt1Spec, Tt2Spec
from codesign.step.list_cycles import BOARD_DDR, PeName, list_cycles
from codesign.step.tt import step_lists as step_lists_module
from codesign.step.tt.first_forward import CALL_CYCLES, PE1_NAME, SampledOut, transposed_input
from codesign.step.tt.list_tiles import Out
from codesign.step.tt.list_time import tt_list_plans, phase_stages, list_ports
from codesign.step.tt.step import GoldenRunner, compare_steps, pe_step
from codesign.train.tt.pe_check import layer_state

sys.path.insert(0, str(Path(__file__).parent))
from test_step_lists import SHAPES, SMALL, WIDE, batch, lists_step, warmed  # noqa: E402

ROWS16 = RoundStageConfig(enable=True, shift=0, bits=8, lanes=8, group_words=4, row_values=16, field_bits=16)


def test_a_call_writes_its_sample_where_pe2_would():
    """Sample ``first + s``'s row ``i`` of ``r`` values lies at value ``((first + s) rows + i) values + r``: a tile
    of rows ``i`` and values ``r`` is a 2-D block of rows ``values`` apart."""
    out = SampledOut(pe2=Out(1024, ROWS16, 8), first=3, rows=32, values=128)
    block = out.block((4, 20), (128 + 32, 128 + 64), (0, 1), 2 * 128, 1)  # sample 1 (the batch's 4th), r 32..63
    assert block.offset == 1024 + 4 * 8 * (((3 + 1) * 32 + 4) * 128 + 32) // 16
    assert (block.words, block.rows, block.stride) == (8 * 32 // 16, 16, 4 * 8 * 128 // 16)


@pytest.mark.parametrize("tile", [((0, 1), (120, 136)), ((0, 1), (8, 24)), ((1, 2), (0, 16))])
def test_a_tile_across_samples_or_rows_is_refused(tile):
    out = SampledOut(pe2=Out(0, ROWS16, 8), first=0, rows=32, values=128)
    with pytest.raises(ValueError, match="within one sample"):
        out.block((0, 4), tile[1], tile[0], 2 * 128, 1)


def test_the_transposed_input_is_each_of_pe1s_samples_r_rows_of_a_n():
    x = np.arange(5 * 3 * 4).reshape(5, 12)
    laid = transposed_input(5, 3, 4, first=3)(x)
    assert laid.shape == (2 * 4, 3)
    assert np.array_equal(laid[4 + 2], x.reshape(5, 3, 4)[4, :, 2])  # sample 4, r = 2: its a n values


@pytest.mark.parametrize("samples", [1, 2, 5, 16])
@pytest.mark.parametrize("stream", [32, 128])
def test_the_step_with_any_share_equals_the_per_call_step(monkeypatch, samples, stream):
    """PE1 given 1 to 16 of the 17 samples (its calls tiled in ``L`` by small buffers): output, gradients,
    trackers and means bit for bit; the share's records move the next state's tracker with PE2's."""
    shape = SHAPES["rank1_b17"]
    specs = tuple(dataclasses.replace(spec, stream_bits=stream) for spec in SMALL)
    layer = warmed(shape)
    state = layer_state(layer)
    x, grad_y = batch(layer, shape[3], seed=3, extremes=True)
    monkeypatch.setattr(step_lists_module, "first_forward_share", lambda *args: samples)
    lists, got = lists_step(state, x, grad_y, specs, copies=(2, 2), share_products=1, share_first=True)
    pe1 = lists.contractions[PE1_NAME]
    assert pe1[0].dims[3] == samples * pe1[0].out.values and len(pe1[1]) >= samples
    assert lists.contractions["forward 0"][0].dims[0] == shape[3] - samples
    assert {pe for pe, _ in lists.phases[0]} == {"tt1", "tt2"}
    mismatches = compare_steps(pe_step(state, x, grad_y, GoldenRunner()), got)
    assert sum(mismatches.values()) == 0, mismatches


@pytest.mark.parametrize("samples", [1, 2, 4])
def test_a_share_of_a_four_core_layer_equals_the_per_call_step(monkeypatch, samples):
    """Four cores: a sample's ``R`` values are several rounded rows of the next state (32 values, rows of 8), so
    PE1's tiles write rows within a sample; bit for bit the per-call step with 1, 2 or 4 of 5 samples PE1's."""
    shape = SHAPES["digits_first_layer_r4_b5"]
    specs = tuple(dataclasses.replace(spec, stream_bits=128) for spec in WIDE)
    layer = warmed(shape)
    state = layer_state(layer)
    x, grad_y = batch(layer, shape[3], seed=3, extremes=True)
    monkeypatch.setattr(step_lists_module, "first_forward_share", lambda *args: samples)
    lists, got = lists_step(state, x, grad_y, specs, copies=(2, 2), share_products=1, share_first=True)
    pe1 = lists.contractions[PE1_NAME][0]
    assert pe1.out.values > pe1.out.rounding.row_values and pe1.dims[3] == samples * pe1.out.values
    mismatches = compare_steps(pe_step(state, x, grad_y, GoldenRunner()), got)
    assert sum(mismatches.values()) == 0, mismatches


@pytest.mark.parametrize("name, shared", [("digits_first_layer_r4_b5", False), ("rank1_b17", True)])
def test_a_forward_in_one_phase_keeps_a_share_only_where_it_is_the_only_forward(monkeypatch, name, shared):
    """One PE2 copy runs every forward but the last in one list: with three or more cores PE1's writes would race
    that list's later forwards, so no share; with two, that list is the first forward alone."""
    shape = SHAPES[name]
    specs = tuple(dataclasses.replace(spec, stream_bits=128) for spec in WIDE)
    layer = warmed(shape)
    state = layer_state(layer)
    x, grad_y = batch(layer, shape[3], seed=3)
    monkeypatch.setattr(step_lists_module, "first_forward_share", lambda *args: 1)
    lists, got = lists_step(state, x, grad_y, specs, copies=(1, 1), share_products=1, share_first=True)
    assert (PE1_NAME in lists.contractions) == shared
    assert sum(compare_steps(pe_step(state, x, grad_y, GoldenRunner()), got).values()) == 0


def test_by_default_only_the_networks_input_layer_shares_its_first_forward():
    """A hidden layer's input codes are written between the layers, on the step's critical path (8 of paper 003's
    64 samples, 512 codes each, at rank 16 took the host about 30 us there, against 11 us of PE cycles saved): no
    share unless asked for; the network's input is staged beside the step before."""
    shape = SHAPES["rank1_b17"]
    x, grad_y = batch(warmed(shape), shape[3], seed=3)
    for network_input in (False, True):
        state = layer_state(warmed(shape, network_input=network_input))
        lists, _ = lists_step(state, x, grad_y, SMALL, copies=(2, 2), share_products=1)
        assert (PE1_NAME in lists.contractions) == network_input


def paper_first_layer(rank):
    """Paper 003's network on its fewest-products modes, and the TT list benchmark's builds (two copies of
    each PE, pairs, PE1's B j outer, 128-bit streams)."""
    sys.path.insert(0, str(Path(__file__).parents[3] / "benchmarks"))
    from bench_tt_step_lists import BUFFERS, network
    import argparse
    _, setup = network(argparse.Namespace(modes="cheapest", rank=rank, hand_off="float32"))
    build = {**BUFFERS, "stream_bits": 128}
    return setup, (Tt1Spec(**build, max_j=64, max_k=32, max_l=32, b_order="jl", j_pairs=True),
                   Tt2Spec(**build, max_j=128, max_k=64, max_l=64, row_pairs=True))


@pytest.mark.slow
def test_the_chosen_share_ends_the_first_phase_soonest_under_the_boards_memory(monkeypatch):
    """At rank 8 PE1 takes 18 of the 64 samples, and of the counts around it the board memory model (two HP
    ports) ends the phase soonest there, 27 % sooner than PE2 alone."""
    setup, specs = paper_first_layer(8)

    def first_phase(samples=None):
        if samples is not None:
            monkeypatch.setattr(step_lists_module, "first_forward_share", lambda *args: samples)
        lists = tt_list_plans(setup, *specs, (2, 2))[0]
        return lists, phase_stages(lists, *specs, ports=list_ports((2, 2), 2))[0].cycles

    lists, chosen = first_phase()
    assert lists.contractions[PE1_NAME][0].dims[3] == 18 * lists.contractions[PE1_NAME][0].out.values
    around = {samples: first_phase(samples)[1] for samples in (0, 16, 17, 19, 20)}
    assert chosen <= min(around.values()) and chosen < 0.75 * around[0], (chosen, around)


@pytest.mark.slow
def test_the_call_cycles_charged_are_the_board_memory_models():
    """:data:`CALL_CYCLES` is what the list model under the board's memory adds to each of PE1's share calls
    (descriptor, latencies, record), within 5 %."""
    setup, specs = paper_first_layer(8)
    lists = tt_list_plans(setup, *specs, (2, 2))[0]
    runs = [list_cycles(PeName("tt1"), specs[0], calls, lists.arena, ddr=BOARD_DDR)
            for pe, calls in lists.phases[0] if pe == "tt1"]
    beside = [call.fetch + call.stall + call.record for run in runs for call in run.calls]
    assert len(runs) == 2
    assert abs(np.mean(beside) - CALL_CYCLES) <= 0.05 * CALL_CYCLES, np.mean(beside)
