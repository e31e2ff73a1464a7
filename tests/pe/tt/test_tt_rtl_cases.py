"""rtl/tt (tt1_pe, tt2_pe, tt3_pe) under cocotb: the TT-specific cases beside the generic stream-PE RTL tests
(tests/pe/test_stream_rtl.py, which run every grid point at 32-, 64- and 128-bit streams with stalls and the cycle
model, and show the bench catches a wrong or missing word): the parallel array's builds, the grid's first five
configurations with 200 000 MACs at every width (``long``), and whole layer steps through the RTL of the PEs, word
for word and cycle for cycle against the step's cycle and traffic models."""

from __future__ import annotations

import dataclasses
import shutil

import numpy as np
import pytest

from codesign.hw.flow import run_rtl
from codesign.pe import get_pe
from codesign.pe.tt.contract import STREAM_BITS_CHOICES
from codesign.pe.tt.stimulus import TtStimulusOptions
from codesign.step.tt.cycles import PARALLEL_HARDWARE

pytest.importorskip("cocotb_tools.runner", reason="the RTL tests need cocotb 2.x (pip install codesign[verify])")
needs_icarus = pytest.mark.skipif(shutil.which("iverilog") is None, reason="Icarus Verilog (iverilog) is not on PATH")

CLEAN = {"STREAM_GAP_PROBABILITY": "0", "STREAM_BACKPRESSURE": "0"}
HEAVY = {"STREAM_GAP_PROBABILITY": "0.4", "STREAM_BACKPRESSURE": "0.6"}


def _check(name, spec, tmp_path, options=TtStimulusOptions(), *, stalls=True):
    pe = get_pe(name)
    stimulus = pe.build_stimulus(spec, options)
    vectors = pe.write_vectors(spec, stimulus, tmp_path / "vectors.txt")
    if stalls:
        heavy = run_rtl(pe, spec, vectors, tmp_path, seed=7, bench_env=HEAVY)
        assert (heavy.vectors, heavy.mismatches) == (len(stimulus), 0), heavy.first_mismatches
    clean = run_rtl(pe, spec, vectors, tmp_path, bench_env=CLEAN)
    assert (clean.vectors, clean.mismatches) == (len(stimulus), 0), clean.first_mismatches
    predicted = [pe.transaction_cycles(spec, words_in) for words_in, _ in stimulus]  # the PE protocol's cycle model
    assert list(clean.cycles) == predicted  # exact, hence within the 5 % bound


@needs_icarus
@pytest.mark.parametrize("name", ["tt1", pytest.param("tt2", marks=pytest.mark.slow)])
def test_parallel_array_builds_match_golden_and_cycle_model(tmp_path, name):
    """The 16 x 2 builds of the parallel array (docs/tt_pe.md) on the directed stimulus, full buffers included,
    without stalls (every word and every cycle count); `codesign verify` ran them on 10 007 transactions at every
    level with random gaps and backpressure (docs/tt_pe.md)."""
    _check(name, PARALLEL_HARDWARE.spec(name), tmp_path, TtStimulusOptions(min_macs=0), stalls=False)


@pytest.mark.long
@needs_icarus
@pytest.mark.parametrize("stream_bits", STREAM_BITS_CHOICES)
@pytest.mark.parametrize("name", ["tt1", "tt2", "tt3"])
@pytest.mark.parametrize("index", range(5))
def test_grid_long(tmp_path, name, index, stream_bits):
    """The first five configurations of the grid at every stream width, 200 000 MACs each, stalls and cycles."""
    spec = dataclasses.replace(get_pe(name).verification_grid()[index].spec, stream_bits=stream_bits)
    _check(name, spec, tmp_path, TtStimulusOptions(min_macs=200_000, seed=11 + index))


def _layer_step(in_modes, out_modes, rank, batch, route="direct", outer_pe="tt3"):
    import math

    import torch

    from codesign.train.tt.layer import TTLinear
    from codesign.train.tt.precision import TTPrecision

    torch.manual_seed(0)
    layer = TTLinear(math.prod(in_modes), math.prod(out_modes), in_modes=in_modes, out_modes=out_modes,
                     max_rank=rank, precision=TTPrecision(core_grad_route=route))
    rng = np.random.default_rng(1)
    x = np.maximum(rng.normal(size=(batch, layer.in_features)), 0).astype(np.float32)
    grad_y = (rng.normal(size=(batch, layer.out_features)) * 0.01).astype(np.float32)
    return layer, x, grad_y


# 3 to 5 s each: make test runs five (direct at 32 and 128 bits, dense at 32 and on PE1 at 64, the split)
SLOW = pytest.mark.slow
LAYER_STEPS = [  # (in_modes, out_modes, rank, batch[, route]), the parallel array or one of each PE, stream width
    (((4, 4), (2, 5), 1, 17), False, 32),
    pytest.param(((4, 4), (2, 5), 2, 40), True, 32, marks=SLOW),
    pytest.param(((4, 4), (2, 5), 2, 40), True, 64, marks=SLOW),
    (((4, 4), (2, 5), 2, 24), True, 128),
    (((4, 4), (2, 5), 2, 17, "dense"), False, 32),  # PE3's outer products and the dense route on PE1 and PE2
    pytest.param(((4, 4), (2, 5), 2, 24, "dense"), True, 128, marks=SLOW),
    (((4, 4), (2, 5), 2, 40, "dense", "tt1"), True, 64),  # dW summed over the batch on PE1 instead
    *(pytest.param(((2, 4, 4, 2), (4, 4, 4, 4), 4, 5), False, bits, marks=pytest.mark.slow)
      for bits in STREAM_BITS_CHOICES),
    pytest.param(((2, 4, 4, 2), (4, 4, 4, 4), 4, 5, "dense"), False, 64, marks=pytest.mark.slow),
]


@needs_icarus
@pytest.mark.parametrize("shape, parallel, stream_bits, split", [
    *(pytest.param(*case.values, False, marks=case.marks) if hasattr(case, "marks") else (*case, False)
      for case in LAYER_STEPS),
    (((4, 4), (2, 5), 2, 40), True, 64, True),  # forward split: PE1 copies take swapped forward calls
    pytest.param(((4, 4), (2, 5), 2, 40, "dense", "tt1"), True, 32, True, marks=SLOW),
])
def test_layer_step_on_rtl_matches_golden_and_step_cycle_model(tmp_path, shape, parallel, stream_bits, split):
    """Every call of a whole layer step through the RTL of the PEs at 32-, 64- and 128-bit streams: every word
    right, summed cycles as modelled, the step scheduled on the PE copies from the RTL's cycles as from the model's
    (the parallel array's 16 x 2 builds, two PE1 and four PE2 copies), and the words the RTL took and sent, per PE
    at its width and in bytes over the step, as the step's traffic model counts them."""
    from codesign.step.tt.schedule import StepHardware
    from codesign.step.tt.step import step_plan
    from codesign.step.tt.cycles import PARALLEL_HARDWARE, rtl_check, step_cycles
    from codesign.train.tt.pe_check import layer_state

    hardware = (PARALLEL_HARDWARE if parallel else StepHardware()).at_stream_bits(stream_bits)
    hardware = dataclasses.replace(hardware, outer_pe=shape[5] if len(shape) > 5 else "tt3", forward_split=split)
    layer, x, grad_y = _layer_step(*shape)
    state = layer_state(layer)
    check = rtl_check(state, x, grad_y, tmp_path, hardware=hardware)
    plan = step_plan(state, x.shape[0], hardware)
    model = step_cycles(plan)
    assert check.calls == len(plan.calls) and check.mismatches == 0
    assert any(call.swapped for call in plan.calls) == split
    assert check.model_cycles == model.total and check.model_makespan == model.makespan
    assert abs(check.deviation) <= 0.05
    assert check.rtl_cycles == check.model_cycles  # in fact exact
    assert check.rtl_makespan == check.model_makespan < check.rtl_cycles
    for pe, measured in check.per_pe.items():  # stream words at the PE's width, in and out
        assert measured["rtl_stream_words"] == model.per_pe_stream_words()[pe]
    assert check.rtl_words == check.model_words == (model.sum_of("words_in"), model.sum_of("words_out"))
    assert sum(check.rtl_words) * 4 == model.bytes
