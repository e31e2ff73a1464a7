"""A TT layer's training step as PE calls (codesign.step.tt.step) against the golden layer's own step, bit for bit.

The expected values are the golden TTLinear's forward and backward in
training mode (codesign.train.tt.pe_check.golden_step); the PE side, on the
layer's NumPy description (codesign.train.tt.pe_check.layer_state), computes every
contraction on the golden PE kernels and on the generated HLS C++ (g++),
with integer host work between the calls. Host arithmetic is checked
against exact rational arithmetic (fractions.Fraction).
"""

from __future__ import annotations

import dataclasses
import math
import os
import shutil
from fractions import Fraction

import numpy as np
import pytest
import torch

from codesign.numerics.scales import mean_abs_frac_bits
from codesign.step.tt.schedule import StepHardware, stages
from codesign.step.tt.rounding import BLOCK as STEP_BLOCK
from codesign.pe.tt.spec import Tt1Spec, Tt2Spec
from codesign.step.tt.layer_state import TRACKERS
from codesign.step.tt.step import GoldenRunner, checked_values, compare_steps, forward_sweep, pe_step, step_plan
from codesign.step.tt.rounding import choose_frac, floor_log2_ratio, rescale, scale_and_round
from codesign.train.tt.layer import TTLinear
from codesign.train.tt.pe_check import golden_step, layer_state
from codesign.train.tt.precision import UNSET, TTPrecision

needs_cxx = pytest.mark.skipif(shutil.which(os.environ.get("CXX", "g++")) is None,
                               reason="no C++ compiler: g++ (or $CXX) is not on PATH")

# (in_modes, out_modes, max_rank, batch): rank 1, one core, modes that leave padding lanes (3, 5, 17, 7),
# a remaining-input axis above PE2's max_k (85 > 64), batches that are no multiple of 16
SHAPES = {
    "digits_first_layer_r4_b5": ((2, 4, 4, 2), (4, 4, 4, 4), 4, 5),
    "rank1_b17": ((4, 4), (2, 5), 1, 17),
    "one_core_b3": ((8,), (5,), 1, 3),
    "padding_edges_b33": ((3, 5, 17), (7, 2, 3), (2, 3), 33),
    "square_r3_b16": ((4, 4), (4, 4), 3, 16),
}
SMALL_HARDWARE = StepHardware(pe1=Tt1Spec(lanes=4, rows=3, a_bits=16, b_bits=8, max_j=5, max_k=9, max_l=7),
                              pe2=Tt2Spec(lanes=4, rows=3, a_bits=16, b_bits=4, max_j=5, max_k=9, max_l=7))


def make_layer(in_modes, out_modes, rank, *, seed=0, bias=True, route="direct"):
    torch.manual_seed(seed)
    return TTLinear(math.prod(in_modes), math.prod(out_modes), in_modes=in_modes, out_modes=out_modes,
                    max_rank=rank, bias=bias, precision=TTPrecision(core_grad_route=route))


def make_batch(layer, batch, *, seed=1, extremes=False):
    rng = np.random.default_rng(seed)
    x = np.maximum(rng.normal(size=(batch, layer.in_features)), 0).astype(np.float32)  # after a ReLU
    grad_y = (rng.normal(size=(batch, layer.out_features)) * 0.01).astype(np.float32)
    if extremes:
        x[0] = 0.0  # a zero sample
        x[-1, 0] = 1e4  # an outlier: saturates at 8 bits, so its input gradient is masked
        grad_y[1] = 0.0
        grad_y[-1, -1] = 50.0  # saturates at 16 bits
    return x, grad_y


def assert_same(layer, x, grad_y, runner, hardware=StepHardware()):
    expected = golden_step(layer, x, grad_y)
    got = pe_step(layer_state(layer), x, grad_y, runner, hardware)
    mismatches = compare_steps(expected, got)
    assert sum(mismatches.values()) == 0, mismatches
    assert checked_values(expected) > 0
    return expected, got


# ---------------------------------------------------------------------------- host arithmetic
def test_floor_log2_ratio_is_exact():
    rng = np.random.default_rng(3)
    for _ in range(2000):
        num, den = int(rng.integers(1, 1 << 40)), int(rng.integers(1, 1 << 20))
        e = floor_log2_ratio(num, den)
        assert Fraction(2) ** e <= Fraction(num, den) < Fraction(2) ** (e + 1)
    assert floor_log2_ratio(8, 1) == 3 and floor_log2_ratio(7, 1) == 2 and floor_log2_ratio(1, 3) == -2


def _rescale_oracle(code: int, frac_from: int, frac_to: int, bits: int) -> int:
    value = Fraction(code) * Fraction(2) ** (frac_to - frac_from)
    low, high = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    rounded = math.floor(value)
    rest = value - rounded
    if rest > Fraction(1, 2) or (rest == Fraction(1, 2) and rounded % 2):
        rounded += 1
    return max(low, min(high, rounded))


@pytest.mark.parametrize("shift", [-70, -40, -9, -3, -1, 0, 1, 4, 9, 17, 40])
def test_rescale_rounds_to_nearest_even_and_saturates(shift):
    rng = np.random.default_rng(shift + 100)
    codes = np.concatenate([rng.integers(-(1 << 40), 1 << 40, 300), rng.integers(-300, 300, 300),
                            np.array([0, 1, -1, 2, -2, 3, -3, 1 << 33, -(1 << 33)])])
    # ties: odd multiples of half a step in both directions
    if shift < 0 and -shift < 40:
        half = 1 << (-shift - 1)
        codes = np.concatenate([codes, np.arange(-7, 8) * 2 * half + half])
    for bits in (8, 16):
        got = rescale(codes, 10, 10 + shift, bits)
        expected = [_rescale_oracle(int(c), 10, 10 + shift, bits) for c in codes]
        assert got.tolist() == expected


@pytest.mark.parametrize("shift", [-60, -40, -9, -1])
def test_rescale_of_sums_beyond_float64s_exact_range_takes_the_integer_path(shift):
    """Sums of 2^53 and more (the 64-bit accumulators' range) round as exactly as small ones; an array holding one
    such sum takes the integer path for all of its values."""
    rng = np.random.default_rng(-shift)
    edge = 1 << 53
    codes = np.concatenate([rng.integers(-(1 << 61), 1 << 61, 200), np.array([edge - 1, edge, edge + 1, -edge]),
                            rng.integers(-300, 300, 50)])
    half = 1 << (-shift - 1)
    codes = np.concatenate([codes, (np.arange(-3, 4) * 2 + 1) * half + (1 << 58)])  # ties far above 2^53
    for bits in (8, 16):
        got = rescale(codes, 10, 10 + shift, bits)
        assert got.tolist() == [_rescale_oracle(int(c), 10, 10 + shift, bits) for c in codes]
        small = codes[np.abs(codes) < edge]
        assert rescale(small, 10, 10 + shift, bits).tolist() == \
            [_rescale_oracle(int(c), 10, 10 + shift, bits) for c in small]


def test_choose_frac_is_the_trainers_rule_in_integers():
    rng = np.random.default_rng(5)
    for trial in range(300):
        codes = rng.integers(-(1 << int(rng.integers(1, 30))), 1 << int(rng.integers(1, 30)), size=int(
            rng.integers(1, 200)))
        frac = int(rng.integers(-10, 30))
        mean = float(torch.from_numpy(np.ldexp(codes.astype(np.float64), -frac)).abs().mean())
        for bits, headroom in ((8, 3), (16, 6)):
            assert choose_frac(codes, frac, bits=bits, headroom_bits=headroom, current=5) == mean_abs_frac_bits(
                mean, bits=bits, headroom_bits=headroom, fallback=5), (trial, bits)
    zeros = np.zeros(7, dtype=np.int64)
    assert choose_frac(zeros, 3, bits=8, headroom_bits=3, current=UNSET) == 7  # never set: bits - 1
    assert choose_frac(zeros, 3, bits=8, headroom_bits=3, current=4) == 4  # keeps its scale


def test_scale_and_round_is_choose_frac_then_rescale():
    """The one-pass path against the two functions it fuses and the oracle: tensors that saturate and tensors that
    do not (the clip is skipped only where nothing can leave the range), ties, sums beyond 2^53, a scale kept."""
    rng = np.random.default_rng(11)
    for trial in range(400):
        magnitude = 1 << int(rng.integers(1, 62 if trial % 10 == 0 else 31))
        codes = rng.integers(-magnitude, magnitude, size=int(rng.integers(1, 300)))
        if trial % 3 == 0:  # an outlier far above the mean: its code saturates
            codes[int(rng.integers(codes.size))] = magnitude * 64 if magnitude < 1 << 55 else magnitude
        frac = int(rng.integers(-5, 25))
        for bits, headroom in ((8, 3), (16, 6)):
            expected_frac = choose_frac(codes, frac, bits=bits, headroom_bits=headroom, current=4)
            got_frac, got = scale_and_round(codes, frac, bits=bits, headroom_bits=headroom, current=4)
            assert got_frac == expected_frac
            assert got.tolist() == rescale(codes, frac, expected_frac, bits).tolist() == \
                [_rescale_oracle(int(c), frac, expected_frac, bits) for c in codes], (trial, bits)
            kept, codes_kept = scale_and_round(codes, frac, bits=bits, headroom_bits=headroom, current=9, choose=False)
            assert kept == 9 and codes_kept.tolist() == rescale(codes, frac, 9, bits).tolist()
    # tensors over several host blocks (codesign.step.tt.rounding.BLOCK values a pass), with and without saturation
    for bits, outlier in ((8, 0), (16, 1 << 40)):
        codes = rng.integers(-(1 << 24), 1 << 24, size=3 * STEP_BLOCK + 5)
        codes[-2] = outlier  # in the last, short block
        frac, got = scale_and_round(codes, 12, bits=bits, headroom_bits=3, current=4)
        assert frac == choose_frac(codes, 12, bits=bits, headroom_bits=3, current=4)
        assert got.tolist() == [_rescale_oracle(int(c), 12, frac, bits) for c in codes]
    ties = np.arange(-9, 10) * 2 + 1  # odd: halves at a shift of one
    assert scale_and_round(ties, 0, bits=8, headroom_bits=0, current=-1, choose=False)[1].tolist() == \
        [_rescale_oracle(int(c), 0, -1, 8) for c in ties]
    assert scale_and_round(np.zeros(4, np.int64), 3, bits=8, headroom_bits=3, current=UNSET)[0] == 7


# ---------------------------------------------------------------------------- step on the golden PE kernels
ROUTES = ["direct", "dense"]


@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize("name", list(SHAPES))
def test_step_on_golden_kernels_equals_the_golden_layer(name, route):
    in_modes, out_modes, rank, batch = SHAPES[name]
    layer = make_layer(in_modes, out_modes, rank, route=route)
    assert_same(layer, *make_batch(layer, batch), GoldenRunner())


@pytest.mark.parametrize("route", ROUTES)
def test_step_with_zeros_outliers_and_saturation(route):
    layer = make_layer((3, 5, 17), (7, 2, 3), (2, 3), seed=4, route=route)
    x, grad_y = make_batch(layer, 21, extremes=True)
    expected, _ = assert_same(layer, x, grad_y, GoldenRunner())
    assert expected.grad_x[-1, 0] == 0.0  # the masked input gradient is part of what was compared


def test_the_two_routes_differ_only_in_the_core_gradients():
    """Same forward, input and bias gradients; the core gradients round other intermediates, so some differ (and
    the comparison could see it), each by little against its size."""
    steps = {}
    for route in ROUTES:
        layer = make_layer((2, 4, 4, 2), (4, 4, 4, 4), 4, route=route)
        steps[route] = pe_step(layer_state(layer), *make_batch(layer, 16), GoldenRunner())
    differ = compare_steps(steps["direct"], steps["dense"])
    assert differ["y"] == differ["grad_x"] == differ["bias_grad"] == 0
    assert sum(differ[f"core_grad[{k}]"] for k in range(4)) > 0
    for a, b in zip(steps["direct"].core_grads, steps["dense"].core_grads):
        assert np.linalg.norm(a - b) < 0.05 * np.linalg.norm(a)


PE1_OUTER = StepHardware(outer_pe="tt1")  # the dense route with dW summed over the batch on PE1, no PE3


@pytest.mark.parametrize("name", list(SHAPES))
def test_dense_route_with_pe1_forming_the_weight_gradient_equals_the_golden_layer(name):
    in_modes, out_modes, rank, batch = SHAPES[name]
    layer = make_layer(in_modes, out_modes, rank, route="dense")
    _, got = assert_same(layer, *make_batch(layer, batch), StageRecorder(), PE1_OUTER)
    plan = step_plan(layer_state(layer), batch, PE1_OUTER)
    assert not any(call.pe == "tt3" for call in plan.calls)
    outer = [item for item in plan.contractions if item.phase == "outer"]
    assert len(outer) == 1 and outer[0].pe == "tt1" and outer[0].folded == batch


@pytest.mark.parametrize("hardware", [PE1_OUTER, dataclasses.replace(SMALL_HARDWARE, outer_pe="tt1")])
def test_dense_route_on_pe1_with_zeros_outliers_saturation_and_many_calls(hardware):
    layer = make_layer((3, 5, 17), (7, 2, 3), (2, 3), seed=4, route="dense")
    expected, _ = assert_same(layer, *make_batch(layer, 21, extremes=True), GoldenRunner(), hardware)
    assert expected.grad_x[-1, 0] == 0.0


def test_dense_route_on_pe1_for_a_network_input_after_scales_were_set():
    layer = make_layer((4, 4), (4, 4), 3, bias=False, route="dense")
    layer.is_network_input = True
    x, grad_y = make_batch(layer, 16)
    layer.train()
    layer(torch.from_numpy(x * 4)).sum().backward()  # one step on other data: every tracker holds a scale
    _, got = assert_same(layer, x, grad_y, GoldenRunner(), PE1_OUTER)
    assert got.grad_x is None and got.bias_grad is None


def test_a_pe_that_cannot_form_the_weight_gradient_is_refused():
    with pytest.raises(ValueError, match="outer_pe must be one of"):
        StepHardware(outer_pe="tt2")


def test_the_dense_route_plan_uses_pe3_once_per_sample_and_tile():
    layer = make_layer((3, 5, 17), (7, 2, 3), (2, 3), route="dense")
    plan = step_plan(layer_state(layer), 33, StepHardware())
    outer = [call for call in plan.calls if call.pe == "tt3"]
    # 255 inputs in one call (I <= 255), 42 outputs in one (J <= 64 cached), one call per sample
    assert len(outer) == 33 and all(call.dims == (255, 1, 1, 42) for call in outer)
    assert {item.phase for item in plan.contractions} == {"forward", "input_grad", "outer", "dense_left",
                                                          "dense_right"}
    assert not any(item.phase == "core_grad" for item in plan.contractions)
    first_backward = stages(plan)[3]
    assert [plan.contractions[i].phase for i in first_backward] == ["input_grad", "outer"]


@pytest.mark.parametrize("route", ROUTES)
def test_step_after_scales_were_set_and_without_bias_for_a_network_input(route):
    layer = make_layer((4, 4), (4, 4), 3, bias=False, route=route)
    layer.is_network_input = True
    x, grad_y = make_batch(layer, 16)
    layer.train()
    layer(torch.from_numpy(x * 4)).sum().backward()  # one step on other data: every tracker holds a scale
    assert all(int(v) != UNSET for v in layer.act_frac_bits)
    expected, got = assert_same(layer, x, grad_y, GoldenRunner())
    assert got.grad_x is None and got.bias_grad is None


@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize("name", ["padding_edges_b33", "digits_first_layer_r4_b5"])
def test_step_on_a_small_array_cut_into_many_calls(name, route):
    in_modes, out_modes, rank, batch = SHAPES[name]
    layer = make_layer(in_modes, out_modes, rank, route=route)
    _, got = assert_same(layer, *make_batch(layer, batch), GoldenRunner(), SMALL_HARDWARE)
    assert got.stats["calls"] > 3 * got.stats["contractions"]


SPLIT_HARDWARE = [dataclasses.replace(SMALL_HARDWARE, forward_split=True, pe1_units=3, pe2_units=2),
                  dataclasses.replace(StepHardware(), forward_split=True, pe1_units=4)]


@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize("hardware", SPLIT_HARDWARE, ids=["small_buffers", "default_builds"])
@pytest.mark.parametrize("name", ["padding_edges_b33", "digits_first_layer_r4_b5", "square_r3_b16"])
def test_forward_split_onto_pe1_equals_the_golden_layer(name, hardware, route):
    """Forward contractions shared between PE2 and swapped PE1 calls (every (i, k) a PE1 row): the step is still
    the golden layer bit for bit, with buffers small enough that the swapped calls are cut along J (partial sums)
    and along I and K, and with zeros, outliers and saturation."""
    in_modes, out_modes, rank, batch = SHAPES[name]
    layer = make_layer(in_modes, out_modes, rank, route=route)
    plan = step_plan(layer_state(layer), batch, hardware)
    swapped = [call for call in plan.calls if call.swapped]
    assert swapped and all(plan.contractions[call.index].phase == "forward" for call in swapped)
    assert any(call.pe == "tt2" and plan.contractions[call.index].phase == "forward" for call in plan.calls)
    if hardware is SPLIT_HARDWARE[0]:
        assert any(call.j[0] > 0 for call in swapped)  # PE1's buffer cuts J: partial sums of swapped calls
    assert_same(layer, *make_batch(layer, batch), GoldenRunner(), hardware)
    assert_same(layer, *make_batch(layer, batch, seed=3, extremes=True), GoldenRunner(), hardware)


class StageRecorder(GoldenRunner):
    """The golden kernels, keeping the PEs of every ``run``'s calls."""

    def __init__(self) -> None:
        super().__init__()
        self.runs: list[list[str]] = []

    def run(self, hardware, calls):
        self.runs.append([pe for pe, _, _ in calls])
        return super().run(hardware, calls)


@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize("network_input", [False, True])
def test_each_stage_of_the_step_is_one_runner_call(network_input, route):
    """The core and input gradients of a core go to the runner together, so that PE1 and PE2 copies can overlap
    (dense route: the outer products with the first input gradient, each depth of the route with the next)."""
    in_modes, out_modes, rank, batch = SHAPES["padding_edges_b33"]
    layer = make_layer(in_modes, out_modes, rank, route=route)
    layer.is_network_input = network_input
    hardware = StepHardware(pe1_units=2, pe2_units=3)
    recorder = StageRecorder()
    assert_same(layer, *make_batch(layer, batch), recorder, hardware)
    plan = step_plan(layer_state(layer), batch, hardware)
    expected = [[plan.calls[p].pe for p in range(len(plan.calls)) if plan.calls[p].index in stage]
                for stage in stages(plan)]
    assert recorder.runs == expected
    if route == "direct":
        assert sum(set(run) == {"tt1", "tt2"} for run in recorder.runs) == 3 - network_input
    else:  # 3 cores: depth 1 (a left and a right step), depth 2 (two of one, one of the other)
        backward = [set(run) for run in recorder.runs[3:]]
        assert backward == [{"tt3", "tt2"} - ({"tt2"} if network_input else set()), {"tt1", "tt2"},
                            {"tt1", "tt2"}]


@pytest.mark.parametrize("name", ["padding_edges_b33", "digits_first_layer_r4_b5"])
def test_a_step_started_from_its_forward_sweep_equals_the_golden_layer(name):
    """The loop hands pe_step the training-mode sweep it took: the step equals the golden layer's, bit for bit, and
    asks the PEs for the backward contractions alone."""
    in_modes, out_modes, rank, batch = SHAPES[name]
    layer = make_layer(in_modes, out_modes, rank)
    x, grad_y = make_batch(layer, batch, extremes=name == "padding_edges_b33")
    state = layer_state(layer)
    plan = step_plan(state, batch, SMALL_HARDWARE)
    runner = GoldenRunner()
    sweep = forward_sweep(state, x, plan, runner)
    forward_calls = runner.calls
    aimed = dataclasses.replace(state, trackers=tuple(tuple(sweep.trackers[tracker]) for tracker in TRACKERS))
    got = pe_step(aimed, x, grad_y, runner, SMALL_HARDWARE, forward=sweep)
    mismatches = compare_steps(golden_step(layer, x, grad_y), got)
    assert sum(mismatches.values()) == 0, mismatches
    order = plan.geometry.order
    assert forward_calls == sum(call.index < order for call in plan.calls) > 0
    assert runner.calls == len(plan.calls)  # the forward's calls were not repeated
    other = make_batch(layer, batch + 1)
    with pytest.raises(ValueError, match="not a sweep of this layer on this batch"):
        pe_step(aimed, *other, GoldenRunner(), SMALL_HARDWARE, forward=sweep)


class FlippingRunner(GoldenRunner):
    """The golden kernels with one bit of one result word flipped: the comparison must see it."""

    def __init__(self, flip_call: int) -> None:
        super().__init__()
        self.flip_call = flip_call

    def run(self, hardware, calls):
        results = super().run(hardware, calls)
        start = self.calls - len(calls)
        if start <= self.flip_call < self.calls:
            results[self.flip_call - start] = results[self.flip_call - start].copy()
            results[self.flip_call - start].flat[0] ^= 1 << 12
        return results


@pytest.mark.parametrize("flip_call", [0, 3, 5])
def test_a_wrong_pe_result_is_caught(flip_call):
    in_modes, out_modes, rank, batch = SHAPES["rank1_b17"]
    layer = make_layer(in_modes, out_modes, rank)
    x, grad_y = make_batch(layer, batch)
    got = pe_step(layer_state(layer), x, grad_y, FlippingRunner(flip_call))
    mismatches = compare_steps(golden_step(layer, x, grad_y), got)
    assert sum(mismatches.values()) > 0


def test_bad_layers_and_batches_are_refused_before_any_call():
    layer = make_layer((4, 4), (2, 5), 2)
    x, grad_y = make_batch(layer, 4)
    state = layer_state(layer)
    with pytest.raises(ValueError, match="x must be"):
        pe_step(state, x[:, :5], grad_y, GoldenRunner())
    with pytest.raises(ValueError, match="grad_y must be"):
        pe_step(state, x, grad_y[:3], GoldenRunner())
    with pytest.raises(ValueError, match="finite"):
        pe_step(state, np.full_like(x, np.nan), grad_y, GoldenRunner())
    with pytest.raises(ValueError, match="float32"):
        layer_state(TTLinear(16, 10, in_modes=(4, 4), out_modes=(2, 5), max_rank=2))
    with pytest.raises(TypeError, match="TtLayerState"):
        pe_step(layer, x, grad_y, GoldenRunner())
    with pytest.raises(ValueError, match="quantize_intermediates"):
        pe_step(layer_state(TTLinear(16, 10, in_modes=(4, 4), out_modes=(2, 5), max_rank=2,
                                     precision=TTPrecision(quantize_intermediates=False))), x, grad_y, GoldenRunner())
    narrow = StepHardware(pe1=Tt1Spec(a_bits=8, b_bits=8))
    runner = GoldenRunner()
    with pytest.raises(ValueError, match="16 x 8-bit operands"):
        pe_step(state, x, grad_y, runner, narrow)
    assert runner.calls == 0


# ---------------------------------------------------------------------------- step through the generated HLS C++
@pytest.fixture(scope="module")
def csim_runner(tmp_path_factory):
    from codesign.hw.csim import CsimError
    from codesign.step.tt.csim import CsimRunner

    try:
        return CsimRunner(StepHardware(), tmp_path_factory.mktemp("tt_step_csim"))
    except CsimError as error:
        if "ap_types" in str(error) or "not found" in str(error):
            pytest.skip(str(error))
        raise


@needs_cxx
@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize("name", list(SHAPES))
def test_step_in_csim_equals_the_golden_layer(csim_runner, name, route):
    in_modes, out_modes, rank, batch = SHAPES[name]
    layer = make_layer(in_modes, out_modes, rank, route=route)
    before = csim_runner.calls
    _, got = assert_same(layer, *make_batch(layer, batch), csim_runner)
    assert csim_runner.calls - before == got.stats["calls"]


@needs_cxx
@pytest.mark.parametrize("route", ROUTES)
def test_step_in_csim_with_zeros_outliers_and_saturation(csim_runner, route):
    layer = make_layer((3, 5, 17), (7, 2, 3), (2, 3), seed=4, route=route)
    assert_same(layer, *make_batch(layer, 21, extremes=True), csim_runner)


@needs_cxx
@pytest.mark.parametrize("name", [pytest.param("padding_edges_b33", marks=pytest.mark.slow), "rank1_b17"])
def test_dense_route_on_pe1_in_csim_equals_the_golden_layer(tmp_path, name):
    from codesign.step.tt.csim import CsimRunner

    runner = CsimRunner(PE1_OUTER, tmp_path)
    in_modes, out_modes, rank, batch = SHAPES[name]
    layer = make_layer(in_modes, out_modes, rank, route="dense")
    _, got = assert_same(layer, *make_batch(layer, batch), runner, PE1_OUTER)
    assert runner.calls == got.stats["calls"]


@pytest.mark.slow
@needs_cxx
def test_step_in_csim_on_a_small_array(tmp_path):
    from codesign.step.tt.csim import CsimRunner

    runner = CsimRunner(SMALL_HARDWARE, tmp_path)
    in_modes, out_modes, rank, batch = SHAPES["padding_edges_b33"]
    layer = make_layer(in_modes, out_modes, rank)
    _, got = assert_same(layer, *make_batch(layer, batch), runner, SMALL_HARDWARE)
    assert runner.calls == got.stats["calls"] > 3 * got.stats["contractions"]


@needs_cxx
# 6 to 8 s each; make test runs the kernels at 32 bits above, wide in tests/pe/tt/test_tt_stream_width.py
@pytest.mark.slow
@pytest.mark.parametrize("stream_bits, name, route", [
    (128, "rank1_b17", "direct"),
    (64, "rank1_b17", "dense"),
    (64, "padding_edges_b33", "direct"),
    (128, "padding_edges_b33", "dense"),
])
def test_step_in_csim_at_a_wide_stream_equals_the_golden_layer(tmp_path, stream_bits, name, route):
    """The generated kernels built with 64- or 128-bit streams, the driver packing 32-bit file words into them: the
    step equals the golden layer, and the 32-bit words in and out are the step's traffic model."""
    from codesign.step.tt.cycles import step_cycles
    from codesign.step.tt.csim import CsimRunner

    hardware = StepHardware().at_stream_bits(stream_bits)
    runner = CsimRunner(hardware, tmp_path)
    in_modes, out_modes, rank, batch = SHAPES[name]
    layer = make_layer(in_modes, out_modes, rank, route=route)
    _, got = assert_same(layer, *make_batch(layer, batch), runner, hardware)
    model = step_cycles(step_plan(layer_state(layer), batch, hardware))
    assert runner.calls == got.stats["calls"] == sum(c.calls for c in model.contractions)
    assert (runner.words_in, runner.words_out) == (model.sum_of("words_in"), model.sum_of("words_out"))
    narrow = step_cycles(step_plan(layer_state(layer), batch, StepHardware()))
    assert model.sum_of("stream_in") < narrow.sum_of("stream_in")  # fewer, wider words


@pytest.mark.long
@needs_cxx
def test_step_in_csim_at_batch_64_and_rank_8(csim_runner):
    layer = make_layer((4, 8, 8, 4), (8, 4, 4, 4), 8)
    assert_same(layer, *make_batch(layer, 64), csim_runner)
