"""The CSB step's lists on the RTL shell around the CSB PE's RTL: the whole arena equals the golden lists' bit for
bit, and the list cycle model gives the RTL's busy cycles exactly, on the AXI RAM and under the list bench's DDR
model; the priced step adds up and its PE part is the PE cycle model's."""

from __future__ import annotations

import shutil

import numpy as np
import pytest

from codesign.pe import get_pe
from codesign.pe.csb import CsbSpec, encode
from codesign.pe.csb.cycles import stream_cycles
from codesign.pe.csb.loss import param_word
from codesign.shell.calls import ListCase, call_words_in, run_list_golden
from codesign.shell.ip import held_by_default
from codesign.step.csb.list_time import step_list_cycles
from codesign.step.csb.lists import CsbStepScales, step_arena, step_lists
from codesign.step.list_cycles import DdrTiming, list_cycles

SPEC = CsbSpec(block_rows=4, block_cols=4, batch=3)
WIDE = {bits: CsbSpec(block_rows=4, block_cols=4, batch=4, stream_bits=bits) for bits in (64, 128)}
LOSS = {bits: CsbSpec(block_rows=4, block_cols=4, batch=4 if bits > 32 else 3, stream_bits=bits, loss=True)
        for bits in (32, 64, 128)}
LAYERS = (8, 8, 4)
needs_icarus = pytest.mark.skipif(shutil.which("iverilog") is None, reason="Icarus Verilog is not on PATH")


def step_case(seed: int = 0, spec: CsbSpec = SPEC):
    """A filled arena (encoded state, batch and loss-gradient codes, or on a build with the LOSS unit the labels and
    ``P`` its LOSS calls read) and one step's two lists (6 samples: two lane chunks; a LEFT and a right-shift UPD)."""
    rng = np.random.default_rng(seed)
    masks = [rng.random((o, i)) < 0.6 for i, o in zip(LAYERS[:-1], LAYERS[1:])]
    csbs = [encode(m.astype(np.int8), block_rows=4, block_cols=4) for m in masks]
    arena = step_arena(spec, LAYERS, 6, csbs)
    image = arena.image.copy()
    for layer, csb in enumerate(csbs):
        arena.write_state(image, layer, csb, rng.integers(-(1 << 23), 1 << 23, csb.nnz), 0)
    arena.write_codes(image, arena.x[0], rng.integers(-128, 128, (6, 8)))
    arena.write_codes(image, arena.dy[-1], rng.integers(-128, 128, (6, 4)))
    loss = ()
    if spec.loss:
        labels = rng.integers(0, 4, 6)
        arena.write_loss_inputs(image, labels, param_word(recip_shift=int(rng.integers(40, 49)), batch=6))
        loss = (4, int(rng.integers(6, 14)))
    scales = CsbStepScales(relu=(-3,), mask=(0, -5), upd=((2, False), (3, True)), loss=loss)
    return csbs, image, step_lists(arena, 6, scales, 0)


@needs_icarus
@pytest.mark.parametrize("spec, ddr", [(SPEC, None), pytest.param(SPEC, DdrTiming(), marks=pytest.mark.slow),
                                       (WIDE[64], None), (WIDE[128], DdrTiming()), (LOSS[32], DdrTiming()),
                                       (LOSS[64], None), pytest.param(LOSS[128], DdrTiming(), marks=pytest.mark.slow)],
                         ids=["axi-ram", "ddr", "w64-axi-ram", "w128-ddr", "loss-ddr", "loss-w64-axi-ram",
                              "loss-w128-ddr"])
def test_rtl_runs_the_step_lists_bit_exact_in_the_modelled_cycles(tmp_path, spec, ddr):
    """On a 32-bit stream and on 64- and 128-bit ones (every arena section in whole beats); on builds with the LOSS
    unit the backward starts with LOSS per lane chunk (the loss gradient's codes on the PE)."""
    from codesign.shell.list_sim import run_list_rtl

    pe = get_pe("csb")
    _, image, lists = step_case(spec=spec)
    for name, calls in (("forward", lists.forward), ("backward", lists.backward)):
        case = ListCase(calls=calls, arena=image, expected=run_list_golden(pe, spec, image, calls))
        result = run_list_rtl(pe, spec, case, tmp_path / name, ddr=ddr, held_sums=held_by_default(pe))
        model = list_cycles(pe, spec, calls, image, ddr=ddr)
        print(f"\n[csb step {name}, {spec.stream_bits} bits] {len(calls)} calls, {result.mismatches} mismatches, "
              f"model {model.total}, RTL busy {result.busy_cycles}; {model.breakdown()}")
        assert result.passed, result.first_mismatches
        assert model.total == result.busy_cycles
        image = case.expected


@pytest.mark.parametrize("ddr", [None, DdrTiming()], ids=["axi-ram", "ddr"])
def test_the_explorer_s_fast_pricing_is_the_cycle_model_and_multipliers_do_not_speed_an_mlp(ddr):
    """fast=True (a step shape simulated once, other builds re-priced by their compute cycles) equals the full
    simulation at every block, lane and multiplier count the lists run on for this network. An FC layer's block
    has one output position, so ``parallel`` (positions a cycle) changes no cycle: the explorer's extra
    multipliers cost resources and buy nothing here (the FB test re-prices arrays whose compute does change)."""
    rng = np.random.default_rng(3)
    masks = [rng.random((o, i)) < 0.5 for i, o in zip(LAYERS[:-1], LAYERS[1:])]
    for block in (4, 8):
        csbs = [encode(m.astype(np.int8), block_rows=block, block_cols=block) for m in masks]
        for lanes in (1, 2, 3, 4):
            totals = set()
            for parallel in (1, 2, 4):
                spec = CsbSpec(block_rows=block, block_cols=block, batch=lanes, parallel=parallel)
                fast = step_list_cycles(spec, LAYERS, 6, csbs, ddr=ddr, fast=True)
                assert fast == step_list_cycles(spec, LAYERS, 6, csbs, ddr=ddr), (block, lanes, parallel)
                totals.add(fast["total"])
            assert len(totals) == 1


@pytest.mark.parametrize("bits", [64, 128])
def test_the_fast_pricing_holds_on_wide_streams(bits):
    """fast=True against the full simulation on 64- and 128-bit streams (their shapes priced apart from the 32-bit
    one's: a beat moves more words), groups varied."""
    rng = np.random.default_rng(4)
    masks = [rng.random((o, i)) < 0.5 for i, o in zip(LAYERS[:-1], LAYERS[1:])]
    csbs = [encode(m.astype(np.int8), block_rows=4, block_cols=4) for m in masks]
    narrow = step_list_cycles(CsbSpec(block_rows=4, block_cols=4, batch=4), LAYERS, 6, csbs, fast=True)
    for parallel in (1, 2, 4):
        spec = CsbSpec(block_rows=4, block_cols=4, batch=4, parallel=parallel, stream_bits=bits)
        fast = step_list_cycles(spec, LAYERS, 6, csbs, fast=True)
        assert fast == step_list_cycles(spec, LAYERS, 6, csbs), parallel
        assert fast["total"] < narrow["total"]  # fewer beats in and out


def test_the_priced_step_adds_up_and_its_pe_part_is_the_pe_model():
    csbs, image, lists = step_case()
    priced = step_list_cycles(SPEC, LAYERS, 6, csbs)
    assert priced["calls"] == len(lists.forward) + len(lists.backward) and priced["macs"] == lists.macs
    assert priced["total"] == priced["forward"] + priced["backward"] == sum(priced["breakdown"].values())
    # the PE's part: every transaction's stall-free cycles (first word in to last word out), the PE cycle model's
    pe_cycles = sum(stream_cycles(SPEC, call_words_in(image, call)) for call in lists.forward + lists.backward)
    assert priced["breakdown"]["pe"] == pe_cycles
    assert step_list_cycles(SPEC, LAYERS, 3, csbs)["total"] < priced["total"]  # one lane chunk fewer


@needs_icarus
@pytest.mark.slow
@pytest.mark.parametrize("loss", [False, True], ids=["loss-on-host", "loss-on-pe"])
def test_rtl_runs_the_example_step_in_the_modelled_cycles(tmp_path, loss):
    """digits_compressed_mlp (64-64-32-10, batch 64, 16 x 16 blocks, 16 lanes) pruned as its golden loop prunes it
    after the warm-up: both lists of a step on the RTL shell equal the golden arena and take the model's cycles
    (docs/csb.md quotes these figures); with and without the LOSS unit (its backward then starts with LOSS on the
    four lane chunks, their labels and ``P`` in the arena)."""
    from dataclasses import replace
    from pathlib import Path

    from codesign.design import load_design
    from codesign.design.families.csb import csb_setup_of
    from codesign.loops.csb import CsbMlpTrainer
    from codesign.loops.loss_codes import loss_config
    from codesign.shell.list_sim import run_list_rtl
    from codesign.train.data import load_digits_dataset

    setup = csb_setup_of(load_design(Path(__file__).resolve().parents[3] / "examples" / "digits_compressed_mlp.toml"))
    trainer = CsbMlpTrainer(setup)
    trainer.fit(load_digits_dataset(validation_fraction=0.2), epochs=setup.warmup_epochs, progress=False)
    spec, layers, rng = replace(setup.spec, loss=loss), setup.layers, np.random.default_rng(5)
    arena = step_arena(spec, layers, setup.batch_size, trainer._structure)
    image = arena.image.copy()
    for layer, csb in enumerate(trainer._structure):
        arena.write_state(image, layer, csb, trainer.buffers[layer], 0)
    arena.write_codes(image, arena.x[0], rng.integers(-128, 128, (64, 64)))
    arena.write_codes(image, arena.dy[-1], rng.integers(-128, 128, (64, 10)))
    if loss:
        last = trainer.frac_bits[-1]
        config = loss_config(64, 10, last["weight"] + last["activation"], last["error"])
        arena.write_loss_inputs(image, rng.integers(0, 10, 64), param_word(recip_shift=config.recip_shift, batch=64))
    lists = step_lists(arena, 64, CsbStepScales.of(trainer.frac_bits, ((2, True),) * 3, 10 if loss else 0), 0)
    priced = step_list_cycles(spec, layers, setup.batch_size, trainer._structure)
    print(f"\n[example step] kept {[int(m.sum()) for m in trainer.masks]}, {priced}")
    pe = get_pe("csb")
    for name, calls in (("forward", lists.forward), ("backward", lists.backward)):
        case = ListCase(calls=calls, arena=image, expected=run_list_golden(pe, spec, image, calls))
        result = run_list_rtl(pe, spec, case, tmp_path / name, held_sums=held_by_default(pe))
        model = list_cycles(pe, spec, calls, image)
        print(f"[example step {name}] {len(calls)} calls, model {model.total}, RTL busy {result.busy_cycles}")
        assert result.passed, result.first_mismatches
        assert model.total == result.busy_cycles == priced[name]
        image = case.expected
