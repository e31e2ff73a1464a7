"""What a conv network's list step costs: its useful and dense MACs by hand, its cycles independent of the scales
(header and descriptor fields, not lengths), the fast pricing equal to the cycle model's at another multiplier
count, and the whole step's stages and counts."""

from __future__ import annotations

import dataclasses

import numpy as np

from codesign.boards import board
from codesign.pe.csb import CsbSpec
from codesign.step.csb.conv_list_time import conv_list_step, conv_step_list_cycles, conv_step_macs
from codesign.step.csb.conv_net import net_shapes
from codesign.step.csb.conv_step import conv_structures, net_arena, net_lists
from codesign.step.csb.lists import PE, CsbStepScales
from codesign.step.list_cycles import BOARD_DDR, step_cycles

SPEC = CsbSpec(block_rows=4, block_cols=4, kernel=3, out_h=2, out_w=2, batch=4, max_stride=2)
IMAGE, CONVS, CLASSES, BATCH = (1, 4, 4), ((4, 1), (6, 2)), 3, 8


def masks(seed: int = 0) -> list:
    rng = np.random.default_rng(seed)
    shapes = net_shapes(SPEC, IMAGE, CONVS, CLASSES)
    return [rng.random((s.outputs, s.channels)) < 0.6 for s in shapes[:-1]] + [np.ones((CLASSES, 6 * 2 * 2), bool)]


def test_the_macs_are_the_kept_kernels_taps_over_the_positions():
    kept = masks()
    counts = conv_step_macs(SPEC, IMAGE, CONVS, CLASSES, BATCH, kept)
    # layer 0: 4 x 4 positions, FP and WG; layer 1: 2 x 2 positions, FP, WG, EB; the head: 1 tap, FP, WG, EB
    useful = (kept[0].sum() * 9 * 16 * 2 + kept[1].sum() * 9 * 4 * 3 + 3 * 24 * 3) * BATCH
    dense = (4 * 9 * 16 * 2 + 24 * 9 * 4 * 3 + 3 * 24 * 3) * BATCH
    assert counts == {"macs": useful, "dense_macs": dense}


def test_the_scales_change_no_cycle_and_the_fast_price_is_the_cycle_models():
    kept = masks()
    structures = conv_structures(SPEC, kept)
    priced = conv_step_list_cycles(SPEC, IMAGE, CONVS, CLASSES, BATCH, structures, ddr=BOARD_DDR)
    net = net_arena(SPEC, net_shapes(SPEC, IMAGE, CONVS, CLASSES), BATCH, structures)
    scaled = net_lists(net, BATCH, CsbStepScales(relu=(-3, 2), mask=(0, -4, 1), upd=((2, False), (3, True), (0, False))),
                       1)
    again = step_cycles(PE, SPEC, {"forward": scaled.forward, "backward": scaled.backward}, net.image, ddr=BOARD_DDR)
    assert again["total"] == priced["total"] > 0 and again["calls"] == priced["calls"]
    wider = dataclasses.replace(SPEC, parallel=2)
    fast = conv_step_list_cycles(wider, IMAGE, CONVS, CLASSES, BATCH, structures, ddr=BOARD_DDR, fast=True)
    exact = conv_step_list_cycles(wider, IMAGE, CONVS, CLASSES, BATCH, structures, ddr=BOARD_DDR)
    assert fast["total"] == exact["total"] < priced["total"]


def test_the_whole_step_is_its_two_lists_and_the_hosts_seconds():
    kept = masks()
    step = conv_list_step(SPEC, IMAGE, CONVS, CLASSES, BATCH, kept, board("ultra96v2"), clock_mhz=100.0,
                          host_s=1e-4, host_source="here", ddr=BOARD_DDR)
    priced = conv_step_list_cycles(SPEC, IMAGE, CONVS, CLASSES, BATCH, conv_structures(SPEC, kept), ddr=BOARD_DDR)
    counts = conv_step_macs(SPEC, IMAGE, CONVS, CLASSES, BATCH, kept)
    assert step.stages == 2 and step.calls == priced["calls"]
    assert (step.macs, step.dense_macs) == (counts["macs"], counts["dense_macs"])
    assert step.host_s == 1e-4 and step.total_s > step.host_s + priced["total"] / 100e6 * 0.99
