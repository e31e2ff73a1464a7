"""Tracked scales (paper 003, Sec. 3.3) in the PE step against the golden torch layer, bit for bit, over steps."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from codesign.numerics.scales import NO_MEAN, UNSET, mean_abs
from codesign.step.tt.layer_state import TRACKERS
from codesign.step.tt.rounding import rescale, to_values
from codesign.step.tt.scale_book import ScaleBook
from codesign.step.tt.step import GoldenRunner, compare_steps, pe_step
from codesign.train.tt.layer import TTLinear
from codesign.train.tt.pe_check import golden_step, layer_state, means_of, trackers_of
from codesign.train.tt.precision import TTPrecision

ROUTES = ["direct", "dense"]


def tracked_layer(in_modes, out_modes, rank, *, route="direct", momentum=0.5, seed=0, hand_off="float32"):
    torch.manual_seed(seed)
    precision = TTPrecision(core_grad_route=route, scale_rule="tracked", scale_momentum=momentum, hand_off=hand_off)
    return TTLinear(math.prod(in_modes), math.prod(out_modes), in_modes=in_modes, out_modes=out_modes,
                    max_rank=rank, precision=precision)


def batch_at(layer, batch, step, *, extremes=False):
    """A batch whose inputs grow 8x and gradients shrink 4x each step, so every scale has to move."""
    rng = np.random.default_rng(step)
    x = (np.maximum(rng.normal(size=(batch, layer.in_features)), 0) * 8.0 ** step).astype(np.float32)
    grad_y = (rng.normal(size=(batch, layer.out_features)) * 0.01 / 4.0 ** step).astype(np.float32)
    if extremes:
        x[0] = 0.0
        x[-1, 0] = 1e4 * 8.0 ** step  # saturates at 8 bits
        grad_y[-1, -1] = 50.0
    return x, grad_y


def advance(layer, x, grad_y):
    """One training pass of the torch layer itself (forward, backward): its trackers and running means move on."""
    layer.train()
    layer.zero_grad(set_to_none=True)
    xt = torch.from_numpy(x.copy()).requires_grad_(not layer.is_network_input)  # as golden_step takes it
    y = layer(xt)
    y.backward(torch.from_numpy(grad_y).to(y.dtype))


@pytest.mark.parametrize("hand_off", ["float32", "exact"])
@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize("shape", [((3, 5, 17), (7, 2, 3), (2, 3), 21), ((2, 4, 4, 2), (4, 4, 4, 4), 4, 5),
                                   ((8,), (5,), 1, 3)])
def test_tracked_steps_equal_the_golden_layer_step_after_step(shape, route, hand_off):
    """Bit for bit, in the hand-off type too (float64 where exact: the step's ``y`` and ``grad_x`` unrounded)."""
    in_modes, out_modes, rank, batch = shape
    layer = tracked_layer(in_modes, out_modes, rank, route=route, hand_off=hand_off)
    lagged = 0
    for step in range(4):
        x, grad_y = batch_at(layer, batch, step, extremes=step == 2)
        before = trackers_of(layer)
        expected = golden_step(layer, x, grad_y)
        got = pe_step(layer_state(layer), x, grad_y, GoldenRunner())
        mismatches = compare_steps(expected, got)  # refuses a float32 result against a float64 one
        assert sum(mismatches.values()) == 0, (step, mismatches)
        assert any(key.startswith("means.") for key in mismatches)
        assert got.y.dtype == got.grad_x.dtype == (np.float64 if hand_off == "exact" else np.float32)
        advance(layer, x, grad_y)
        assert trackers_of(layer) == expected.trackers and means_of(layer) == expected.means
        if step:  # the inputs grew 8x: an exact scale would have moved at once, the tracked one moved after
            lagged += before["act_frac_bits"][0] != expected.trackers["act_frac_bits"][0]
    assert lagged >= 2


def test_tracked_and_exact_differ_after_the_first_step():
    """The rule matters: the same layer and batches under the exact rule round at other scales from step 2 on."""
    results = {}
    for rule in ("exact", "tracked"):
        torch.manual_seed(0)
        layer = TTLinear(12, 12, in_modes=(3, 4), out_modes=(4, 3), max_rank=2,
                         precision=TTPrecision(scale_rule=rule, scale_momentum=0.5))
        steps = []
        for step in range(3):
            x, grad_y = batch_at(layer, 6, step)
            steps.append(pe_step(layer_state(layer), x, grad_y, GoldenRunner()))
            advance(layer, x, grad_y)
        results[rule] = steps
    first = compare_steps(results["exact"][0], results["tracked"][0])
    assert all(v == 0 for k, v in first.items() if not k.startswith("means."))
    later = compare_steps(results["exact"][2], results["tracked"][2])
    assert later["y"] > 0


def test_a_pe_results_observed_mean_is_mean_abs_of_its_values():
    """The book reads sum |acc| in integers; the torch layer takes mean_abs of float64 values: the same float."""
    rng = np.random.default_rng(7)
    for trial in range(300):
        size = int(rng.integers(1, 5000))
        magnitude = 1 << int(rng.integers(1, 31))
        z = rng.integers(-magnitude, magnitude, size=size)
        z_frac = int(rng.integers(-20, 40))
        book = ScaleBook({"act_frac_bits": (3,)}, {"act_frac_bits": (0.25,)}, rule="tracked", momentum=0.0)
        frac, codes = book.round("act_frac_bits", 0, z, z_frac, bits=8, headroom_bits=3)
        assert frac == 3 and codes.tolist() == rescale(z, z_frac, 3, 8).tolist()
        observed = mean_abs(to_values(z, z_frac))
        assert book.means["act_frac_bits"][0] == (observed if observed > 0 else 0.25), trial


def test_the_book_starts_unobserved_and_keeps_evaluation_scales():
    book = ScaleBook({name: (UNSET,) for name in TRACKERS}, {}, rule="tracked", momentum=0.9)
    assert all(values == [NO_MEAN] for values in book.means.values())
    z = np.array([64, -64, 0, 128])
    frac, _ = book.round("act_frac_bits", 0, z, 4, bits=8, headroom_bits=3, update=False)
    assert book.trackers["act_frac_bits"][0] == frac == book.frac("act_frac_bits", 0)  # unset: aimed even so
    again, _ = book.round("act_frac_bits", 0, z * 16, 4, bits=8, headroom_bits=3, update=False)
    assert again == frac and book.means["act_frac_bits"][0] == mean_abs(to_values(z, 4))


@pytest.mark.parametrize("hand_off", ["float32", "exact"])
def test_values_past_float32s_bits_leave_the_step_as_the_golden_layer_gives_them(hand_off):
    """Biases far finer than the activations (outputs of more than 24 bits) and an output gradient whose codes sum
    over 1,024 terms at full width (input gradients of more than 24 bits): the step against the torch layer, bit
    for bit, over steps, in either hand-off; handed off exactly, those values are not float32's."""
    torch.manual_seed(0)
    precision = TTPrecision(scale_rule="tracked", grad_headroom_bits=0, hand_off=hand_off)
    layer = TTLinear(8, 1024, in_modes=(8,), out_modes=(1024,), max_rank=1, precision=precision)
    rng = np.random.default_rng(2)
    with torch.no_grad():
        layer.cores[0].copy_(torch.from_numpy(rng.uniform(0.05, 0.15, layer.cores[0].shape).astype(np.float32)))
        layer.bias.copy_(torch.from_numpy(rng.uniform(-1e-7, 1e-7, 1024).astype(np.float32)))
    rounded = {"y": 0, "grad_x": 0}
    for step in range(3):
        x = rng.uniform(0.0, 1.0, (6, 8)).astype(np.float32)
        grad_y = rng.uniform(0.5, 1.5, (6, 1024)).astype(np.float32)
        expected = golden_step(layer, x, grad_y)
        got = pe_step(layer_state(layer), x, grad_y, GoldenRunner())
        assert sum(compare_steps(expected, got).values()) == 0, step
        for name in rounded:
            values = getattr(got, name)
            assert values.dtype == (np.float64 if hand_off == "exact" else np.float32)
            rounded[name] += int(np.count_nonzero(values.astype(np.float32) != values))
        advance(layer, x, grad_y)
    assert hand_off == "float32" or (rounded["y"] > 1000 and rounded["grad_x"] > 20), rounded
