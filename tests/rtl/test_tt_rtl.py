"""rtl/tt (tt1_pe, tt2_pe, tt3_pe) under cocotb: every output word equals the golden model under input gaps and output backpressure, and
the stall-free cycle counts equal the cycle model (codesign.pe.tt.cycles) transaction by transaction, at 32-, 64- and
128-bit streams."""

from __future__ import annotations

import dataclasses
import shutil

import numpy as np
import pytest

from codesign.hw.flow import run_rtl
from codesign.pe import get_pe
from codesign.pe.tt.contract import STREAM_BITS_CHOICES
from codesign.pe.tt.spec import Tt1Spec, Tt2Spec, Tt3Spec
from codesign.pe.tt.stimulus import TtStimulusOptions
from codesign.pe.tt.step_cycles import PARALLEL_HARDWARE

pytest.importorskip("cocotb_tools.runner", reason="the RTL tests need cocotb 2.x (pip install codesign[verify])")
needs_icarus = pytest.mark.skipif(shutil.which("iverilog") is None, reason="Icarus Verilog (iverilog) is not on PATH")

CLEAN = {"STREAM_GAP_PROBABILITY": "0", "STREAM_BACKPRESSURE": "0"}
HEAVY = {"STREAM_GAP_PROBABILITY": "0.4", "STREAM_BACKPRESSURE": "0.6"}
PE1_QUICK = {
    "l4r3_a16b16_acc16": Tt1Spec(lanes=4, rows=3, a_bits=16, b_bits=16, acc_bits=16, max_j=5, max_k=9, max_l=7),
    "l16r8_a8b4_acc32_small": Tt1Spec(max_j=3, max_k=33, max_l=9),
}


def _check(name, spec, tmp_path, options=TtStimulusOptions(), *, stalls=True):
    pe = get_pe(name)
    stimulus = pe.build_stimulus(spec, options)
    vectors = pe.write_vectors(spec, stimulus, tmp_path / "vectors.txt")
    if stalls:
        heavy = run_rtl(pe, spec, vectors, tmp_path, seed=7, bench_env=HEAVY)
        assert (heavy.vectors, heavy.mismatches) == (len(stimulus), 0), heavy.first_mismatches
    clean = run_rtl(pe, spec, vectors, tmp_path, bench_env=CLEAN)
    assert clean.mismatches == 0, clean.first_mismatches
    predicted = [pe.transaction_cycles(spec, words_in) for words_in, _ in stimulus]  # the PE protocol's cycle model
    assert list(clean.cycles) == predicted  # exact, hence within the 5 % bound
    return pe, vectors


@needs_icarus
@pytest.mark.parametrize("name", list(PE1_QUICK))
def test_pe1_rtl_matches_golden_and_cycle_model(tmp_path, name):
    _check("tt1", PE1_QUICK[name], tmp_path)


PE2_QUICK = {
    "l4r3_a16b16_acc16": Tt2Spec(lanes=4, rows=3, a_bits=16, b_bits=16, acc_bits=16, max_j=5, max_k=9, max_l=7),
    "l16r8_a8b4_acc32_small": Tt2Spec(max_j=17, max_k=20, max_l=9),
}


@needs_icarus
@pytest.mark.parametrize("name", list(PE2_QUICK))
def test_pe2_rtl_matches_golden_and_cycle_model(tmp_path, name):
    _check("tt2", PE2_QUICK[name], tmp_path)


@needs_icarus
@pytest.mark.parametrize("name", ["tt1", pytest.param("tt2", marks=pytest.mark.slow)])
def test_parallel_array_builds_match_golden_and_cycle_model(tmp_path, name):
    """The 16 x 2 builds of the parallel array (docs/tt_pe.md) on the directed stimulus, full buffers included,
    without stalls (every word and every cycle count); `codesign verify` ran them on 10 007 transactions at every
    level with random gaps and backpressure (docs/tt_pe.md)."""
    _check(name, PARALLEL_HARDWARE.spec(name), tmp_path, TtStimulusOptions(min_macs=0), stalls=False)


PE3_QUICK = {"l4_a16b16": Tt3Spec(lanes=4, a_bits=16, b_bits=16, max_j=21)}


@needs_icarus
@pytest.mark.parametrize("name", list(PE3_QUICK))
def test_pe3_rtl_matches_golden_and_cycle_model(tmp_path, name):
    _check("tt3", PE3_QUICK[name], tmp_path)


@needs_icarus
def test_pe1_broken_expected_word_is_caught(tmp_path):
    pe = get_pe("tt1")
    spec = PE1_QUICK["l4r3_a16b16_acc16"]
    stimulus = pe.build_stimulus(spec, TtStimulusOptions(min_macs=0))[:3]
    stimulus[0][1][-1] ^= np.uint64(1)
    vectors = pe.write_vectors(spec, stimulus, tmp_path / "vectors.txt")
    result = run_rtl(pe, spec, vectors, tmp_path)
    assert result.mismatches == 1


WIDE_QUICK = {"tt1": PE1_QUICK["l4r3_a16b16_acc16"], "tt2": PE2_QUICK["l4r3_a16b16_acc16"],
              "tt3": PE3_QUICK["l4_a16b16"]}


@needs_icarus
@pytest.mark.parametrize("stream_bits", [64, 128])
@pytest.mark.parametrize("name", list(WIDE_QUICK))
def test_wide_stream_rtl_matches_golden_and_cycle_model(tmp_path, name, stream_bits):
    """The same small builds with 64- and 128-bit streams: chunks of several fields per word, results packed
    several to a word, refused headers with a bit set above bit 31."""
    _check(name, dataclasses.replace(WIDE_QUICK[name], stream_bits=stream_bits), tmp_path)


@pytest.mark.long
@needs_icarus
@pytest.mark.parametrize("stream_bits", STREAM_BITS_CHOICES)
@pytest.mark.parametrize("name", ["tt1", "tt2", "tt3"])
@pytest.mark.parametrize("index", range(5))
def test_grid_long(tmp_path, name, index, stream_bits):
    """The first five configurations of the grid at every stream width, 200 000 MACs each, stalls and cycles."""
    spec = dataclasses.replace(get_pe(name).verification_grid()[index].spec, stream_bits=stream_bits)
    _check(name, spec, tmp_path, TtStimulusOptions(min_macs=200_000, seed=11 + index))


def _layer_step(in_modes, out_modes, rank, batch):
    import math

    import torch

    from codesign.train.tt.layer import TTLinear
    from codesign.train.tt.precision import TTPrecision

    torch.manual_seed(0)
    layer = TTLinear(math.prod(in_modes), math.prod(out_modes), in_modes=in_modes, out_modes=out_modes,
                     max_rank=rank, precision=TTPrecision())
    rng = np.random.default_rng(1)
    x = np.maximum(rng.normal(size=(batch, layer.in_features)), 0).astype(np.float32)
    grad_y = (rng.normal(size=(batch, layer.out_features)) * 0.01).astype(np.float32)
    return layer, x, grad_y


LAYER_STEPS = [  # (in_modes, out_modes, rank, batch), the parallel array or one copy of each PE, stream width
    (((4, 4), (2, 5), 1, 17), False, 32),
    (((4, 4), (2, 5), 2, 40), True, 32),
    (((4, 4), (2, 5), 2, 40), True, 64),
    (((4, 4), (2, 5), 2, 24), True, 128),
    *(pytest.param(((2, 4, 4, 2), (4, 4, 4, 4), 4, 5), False, bits, marks=pytest.mark.slow)
      for bits in STREAM_BITS_CHOICES),
]


@needs_icarus
@pytest.mark.parametrize("shape, parallel, stream_bits", LAYER_STEPS)
def test_layer_step_on_rtl_matches_golden_and_step_cycle_model(tmp_path, shape, parallel, stream_bits):
    """Every call of a whole layer step through the RTL of the PEs at 32-, 64- and 128-bit streams: every word
    right, summed cycles as modelled, the step scheduled on the PE copies from the RTL's cycles as from the model's
    (the parallel array's 16 x 2 builds, two PE1 and four PE2 copies), and the words the RTL took and sent, per PE
    at its width and in bytes over the step, as the step's traffic model counts them."""
    from codesign.pe.tt.schedule import StepHardware
    from codesign.pe.tt.step import step_plan
    from codesign.pe.tt.step_cycles import PARALLEL_HARDWARE, rtl_check, step_cycles
    from codesign.train.tt.pe_check import layer_state

    hardware = (PARALLEL_HARDWARE if parallel else StepHardware()).at_stream_bits(stream_bits)
    layer, x, grad_y = _layer_step(*shape)
    state = layer_state(layer)
    check = rtl_check(state, x, grad_y, tmp_path, hardware=hardware)
    plan = step_plan(state, x.shape[0], hardware)
    model = step_cycles(plan)
    assert check.calls == len(plan.calls) and check.mismatches == 0
    assert check.model_cycles == model.total and check.model_makespan == model.makespan
    assert abs(check.deviation) <= 0.05
    assert check.rtl_cycles == check.model_cycles  # in fact exact
    assert check.rtl_makespan == check.model_makespan < check.rtl_cycles
    for pe, measured in check.per_pe.items():  # stream words at the PE's width, in and out
        mine = [c for c in model.contractions if c.pe == pe]
        assert measured["rtl_stream_words"] == (sum(c.stream_in for c in mine), sum(c.stream_out for c in mine))
    assert check.rtl_words == check.model_words == (model.sum_of("words_in"), model.sum_of("words_out"))
    assert sum(check.rtl_words) * 4 == model.bytes
