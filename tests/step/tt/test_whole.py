"""The TT step with every contraction computed whole (codesign.step.tt.whole) against the step cut into PE calls.

The expected values are the per-call step on the golden PE kernels
(GoldenRunner, which tests/step/tt/test_step.py checks against the golden
layer): the same step, bit for bit, on the same test grids, with zeros,
outliers and saturating stimulus, both core-gradient routes and the forward
split; the products against an int64 einsum; a schedule whose calls could
saturate against the saturating kernels; and whole training runs of the
NumPy loop (and the torch trainer on PEs) against the same runs on PE calls.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from codesign.step.tt import whole
from codesign.step.tt.rounding import code_dtype
from codesign.step.tt.runners import Counting, Recording, Replay, Streamed
from codesign.step.tt.schedule import LayerGeometry, StepHardware, plan_step
from codesign.step.tt.step import (GoldenRunner, checked_values, compare_steps, forward_sweep, pe_step,
                                   run_contractions, step_plan)
from codesign.step.tt.whole import WholeRunner, arithmetic, plan_facts, whole_product
from codesign.train.tt.pe_check import layer_state
from tests.step.tt.test_step import (PE1_OUTER, ROUTES, SHAPES, SMALL_HARDWARE, SPLIT_HARDWARE, make_batch,
                                     make_layer)

EXTREME_HARDWARE = {"default": StepHardware(), "small": SMALL_HARDWARE, "pe1_outer": PE1_OUTER,
                    "small_pe1_outer": dataclasses.replace(SMALL_HARDWARE, outer_pe="tt1"),
                    "split_small": SPLIT_HARDWARE[0], "split_default": SPLIT_HARDWARE[1]}


def assert_whole_same(state, x, grad_y, hardware=StepHardware()) -> WholeRunner:
    """The whole step equals the per-call step bit for bit, counts the plan's calls and fell back nowhere."""
    golden, fast = GoldenRunner(), WholeRunner()
    expected = pe_step(state, x, grad_y, golden, hardware)
    got = pe_step(state, x, grad_y, fast, hardware)
    mismatches = compare_steps(expected, got)
    assert sum(mismatches.values()) == 0, mismatches
    assert checked_values(expected) > 0
    plan = step_plan(state, x.shape[0], hardware)
    assert fast.calls == golden.calls == len(plan.calls)
    assert fast.fallbacks == 0 and sum(fast.arithmetic.values()) == len(plan.contractions)
    return fast


# ---------------------------------------------------------------------------- the step, bit for bit
@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize("name", list(SHAPES))
def test_whole_step_equals_the_per_call_step(name, route):
    in_modes, out_modes, rank, batch = SHAPES[name]
    layer = make_layer(in_modes, out_modes, rank, route=route)
    assert_whole_same(layer_state(layer), *make_batch(layer, batch))


@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize("hardware", list(EXTREME_HARDWARE))
def test_whole_step_with_zeros_outliers_and_saturation(hardware, route):
    layer = make_layer((3, 5, 17), (7, 2, 3), (2, 3), seed=4, route=route)
    x, grad_y = make_batch(layer, 21, extremes=True)
    state = layer_state(layer)
    assert_whole_same(state, x, grad_y, EXTREME_HARDWARE[hardware])
    assert pe_step(state, x, grad_y, WholeRunner(), EXTREME_HARDWARE[hardware]).grad_x[-1, 0] == 0.0  # masked
    assert_whole_same(state, x, np.zeros_like(grad_y), EXTREME_HARDWARE[hardware])  # every gradient code 0


@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize("name", ["padding_edges_b33", "digits_first_layer_r4_b5"])
def test_whole_step_on_a_small_array_cut_into_many_calls(name, route):
    in_modes, out_modes, rank, batch = SHAPES[name]
    layer = make_layer(in_modes, out_modes, rank, route=route)
    state = layer_state(layer)
    assert_whole_same(state, *make_batch(layer, batch), SMALL_HARDWARE)
    plan = step_plan(state, batch, SMALL_HARDWARE)
    assert len(plan.calls) > 3 * len(plan.contractions)


@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize("hardware", SPLIT_HARDWARE, ids=["small_buffers", "default_builds"])
@pytest.mark.parametrize("name", ["padding_edges_b33", "digits_first_layer_r4_b5", "square_r3_b16"])
def test_whole_step_with_the_forward_split(name, hardware, route):
    """Forward contractions whose calls are shared between PE2 and swapped PE1 calls: the whole product is the same
    contraction, and the swapped calls' widths and accumulators are checked."""
    in_modes, out_modes, rank, batch = SHAPES[name]
    layer = make_layer(in_modes, out_modes, rank, route=route)
    state = layer_state(layer)
    assert any(call.swapped for call in step_plan(state, batch, hardware).calls)
    assert_whole_same(state, *make_batch(layer, batch), hardware)
    assert_whole_same(state, *make_batch(layer, batch, seed=3, extremes=True), hardware)


@pytest.mark.parametrize("route", ROUTES)
def test_whole_step_for_a_network_input_after_scales_were_set(route):
    torch = pytest.importorskip("torch")
    layer = make_layer((4, 4), (4, 4), 3, bias=False, route=route)
    layer.is_network_input = True
    x, grad_y = make_batch(layer, 16)
    layer.train()
    layer(torch.from_numpy(x * 4)).sum().backward()  # every tracker holds a scale
    assert_whole_same(layer_state(layer), x, grad_y)


def test_the_int64_path_equals_the_float_paths(monkeypatch):
    """With the float limits at 1 every contraction takes int64 arithmetic, and the step is the same."""
    layer = make_layer((3, 5, 17), (7, 2, 3), (2, 3), seed=4, route="dense")
    x, grad_y = make_batch(layer, 21, extremes=True)
    state = layer_state(layer)
    floats = assert_whole_same(state, x, grad_y, SPLIT_HARDWARE[0])
    assert set(floats.arithmetic) == {"float32", "float64"}  # both float paths taken by this step
    monkeypatch.setattr(whole, "FLOAT32_LIMIT", 1)
    monkeypatch.setattr(whole, "FLOAT64_LIMIT", 1)
    ints = assert_whole_same(state, x, grad_y, SPLIT_HARDWARE[0])
    assert set(ints.arithmetic) == {"int64"}


# ---------------------------------------------------------------------------- products and their arithmetic
def _operands(rng, pe, dims, a_bits, b_bits):
    i, j, k, l = dims
    a_max, b_max = 1 << (a_bits - 1), 1 << (b_bits - 1)
    if pe == "tt3":
        return rng.integers(-a_max, a_max, (j, i)), rng.integers(-b_max, b_max, (j, l))
    a = rng.integers(-a_max, a_max, (i, j, k))
    return a, rng.integers(-b_max, b_max, (l, j) if pe == "tt2" else (l, j, k))


def _einsum(pe, a, b):
    """The contraction in int64 (exact here), by subscripts: the oracle of whole_product."""
    spec = {"tt2": "ijk,lj->ilk", "tt1": "ijk,ljk->il", "tt3": "si,sl->il"}[pe]
    return np.einsum(spec, a.astype(np.int64), b.astype(np.int64))


@pytest.mark.parametrize("pe", ["tt1", "tt2", "tt3"])
def test_whole_products_equal_an_int64_einsum_in_every_arithmetic(pe):
    rng = np.random.default_rng(5)
    scratch: dict = {}  # kept arrays reused by the next products, larger and smaller
    for dims, a_bits, b_bits in (((3, 7, 5, 4), 4, 4), ((2, 33, 17, 9), 8, 4), ((5, 40, 19, 6), 16, 8),
                                 ((1, 3, 2, 2), 16, 8)):
        a, b = _operands(rng, pe, dims, a_bits, b_bits)
        expected = _einsum(pe, a, b)
        summed = dims[1] * (dims[2] if pe != "tt2" else 1)
        bound = summed * (1 << (a_bits - 1)) * (1 << (b_bits - 1))
        kinds = [np.float64, np.int64] + ([np.float32] if bound < 1 << 24 else [])
        for kind in kinds:
            for kept in (None, scratch):
                got = whole_product(pe, a, b, np.dtype(kind), kept)
                assert got.dtype == np.int64 and got.shape == expected.shape
                assert np.array_equal(got, expected), (dims, kind)
                assert not any(np.shares_memory(got, array) for array in scratch.values())


@pytest.mark.parametrize("route, hardware", [("direct", StepHardware()), ("dense", StepHardware()),
                                             ("dense", dataclasses.replace(SMALL_HARDWARE, outer_pe="tt1")),
                                             ("direct", SPLIT_HARDWARE[0])])
@pytest.mark.parametrize("narrow", [False, True], ids=["int64", "narrow_types"])
def test_every_contraction_with_full_range_codes_equals_its_calls(route, hardware, narrow):
    """Codes drawn over their whole widths: sums far beyond float32's integers (odd ones among them), so the
    arithmetic must be chosen from the data; every contraction of the plan against its calls on the kernels.
    ``narrow``: codes in the narrowest type that holds them (as the host rounds them), whose range alone would
    choose the arithmetic, and whose codes are scanned where it cannot."""
    geometry = LayerGeometry(in_modes=(3, 8, 4), out_modes=(4, 5, 2), ranks=(1, 4, 3, 1), batch=24)
    plan = plan_step(geometry, hardware=hardware, core_grad_route=route)
    rng = np.random.default_rng(9)
    jobs = []
    for index, item in enumerate(plan.contractions):
        a, b = _operands(rng, item.pe, item.dims, item.a_bits, item.b_bits)
        if narrow:
            a, b = a.astype(code_dtype(item.a_bits)), b.astype(code_dtype(item.b_bits))
        jobs.append((index, a, b))
    runner = WholeRunner()
    got = run_contractions(plan, jobs, runner)
    expected = run_contractions(plan, jobs, GoldenRunner())
    for index, (a, b) in enumerate(zip(got, expected)):
        assert a.dtype == b.dtype == np.int64 and np.array_equal(a, b), plan.contractions[index].name
    assert runner.fallbacks == 0 and runner.arithmetic.get("float64", 0) > 0
    assert max(int(np.abs(z).max()) for z in expected) > 1 << 24


def test_arithmetic_is_chosen_by_the_bound_and_float32_would_be_wrong_above_it():
    assert arithmetic((1 << 24) - 1) == np.float32 and arithmetic(1 << 24) == np.float64
    assert arithmetic((1 << 53) - 1) == np.float64 and arithmetic(1 << 53) == np.int64
    with pytest.raises(OverflowError):
        arithmetic(1 << 63)
    a, b = np.array([[[1 << 14], [1]]]), np.array([[1 << 10, 1]])  # Z = 2^24 + 1: not a float32
    assert whole_product("tt2", a, b, np.dtype(np.int64))[0, 0, 0] == (1 << 24) + 1
    assert whole_product("tt2", a, b, np.dtype(np.float32))[0, 0, 0] != (1 << 24) + 1
    assert whole_product("tt2", a, b, np.dtype(np.float64))[0, 0, 0] == (1 << 24) + 1


# ---------------------------------------------------------------------------- what the runner refuses
GEOMETRY = LayerGeometry(in_modes=(4, 4), out_modes=(4, 4), ranks=(1, 3, 1), batch=16)


def _narrow(hardware: StepHardware, acc_bits: int) -> StepHardware:
    return dataclasses.replace(hardware, pe1=dataclasses.replace(hardware.pe1, acc_bits=acc_bits),
                               pe2=dataclasses.replace(hardware.pe2, acc_bits=acc_bits))


@pytest.mark.parametrize("phase", ["core_grad", "input_grad"])
def test_a_schedule_whose_calls_could_saturate_falls_back_to_the_kernels(phase):
    """The schedule cut for 32-bit accumulators run on 20-bit ones: with codes at their extremes a call saturates,
    and the whole runner gives the kernels' saturated answer (not the exact sum); with small codes no call can,
    and it computes the contraction whole."""
    plan = plan_step(GEOMETRY, hardware=StepHardware())
    narrow = dataclasses.replace(plan, hardware=_narrow(plan.hardware, 20))
    index = next(n for n, item in enumerate(plan.contractions) if item.phase == phase)
    item = plan.contractions[index]
    b_shape = (item.dims[3], item.dims[1]) if item.pe == "tt2" else (item.dims[3], *item.dims[1:3])
    low_a, low_b = -(1 << (item.a_bits - 1)), -(1 << (item.b_bits - 1))
    a, b = np.full(item.dims[:3], low_a, np.int64), np.full(b_shape, low_b, np.int64)
    exact = run_contractions(plan, [(index, a, b)], GoldenRunner())[0]
    saturated = run_contractions(narrow, [(index, a, b)], GoldenRunner())[0]
    assert not np.array_equal(exact, saturated)  # the stimulus does saturate the narrow accumulators
    assert np.array_equal(exact, _einsum(item.pe, a, b))
    runner = WholeRunner()
    assert np.array_equal(run_contractions(narrow, [(index, a, b)], runner)[0], saturated)
    assert runner.fallbacks == 1 and runner.calls == len(plan.calls_of(index))
    small_a, small_b = np.ones_like(a), -np.ones_like(b)
    got = run_contractions(narrow, [(index, small_a, small_b)], runner)[0]
    assert runner.fallbacks == 1 and np.array_equal(got, _einsum(item.pe, small_a, small_b))
    assert plan_facts(narrow)[index].acc_limit == (1 << 19) - 1 < plan_facts(plan)[index].acc_limit


def test_codes_outside_a_pes_operands_are_refused_as_the_kernels_refuse_them():
    plan = plan_step(GEOMETRY, hardware=StepHardware())
    index = next(n for n, item in enumerate(plan.contractions) if item.phase == "forward")
    i, j, k, l = plan.contractions[index].dims
    a, b = np.zeros((i, j, k), np.int64), np.zeros((l, j), np.int64)
    b[0, 0] = 8  # a 5-bit code: PE2 takes 4-bit cores
    for runner in (GoldenRunner(), WholeRunner()):
        with pytest.raises(ValueError, match="outside the 4-bit range"):
            run_contractions(plan, [(index, a, b)], runner)
    wide = np.zeros((i, j, k), np.int32)  # a wider type holding codes only: scanned, and taken
    z = run_contractions(plan, [(index, wide, b * 0)], WholeRunner())[0]
    assert z.dtype == np.int64 and not z.any()


# ---------------------------------------------------------------------------- counting, recording, replaying
@pytest.mark.parametrize("route, hardware", [("direct", StepHardware()), ("dense", SPLIT_HARDWARE[0]),
                                             ("direct", PE1_OUTER)])
def test_counting_gives_the_plans_transactions_and_macs(route, hardware):
    in_modes, out_modes, rank, batch = SHAPES["padding_edges_b33"]
    layer = make_layer(in_modes, out_modes, rank, route=route)
    state, (x, grad_y) = layer_state(layer), make_batch(layer, batch)
    counts = {}
    for name, runner in (("golden", Counting(GoldenRunner())), ("whole", Counting(WholeRunner()))):
        pe_step(state, x, grad_y, runner, hardware)
        counts[name] = (runner.transactions, runner.macs)
    assert counts["golden"] == counts["whole"]
    assert counts["whole"][0] == len(step_plan(state, batch, hardware).calls)


def test_wrappers_pass_whole_contractions_through_only_around_a_whole_runner():
    for wrapper in (Counting, Recording, lambda runner: Replay(runner, [])):
        assert wrapper(GoldenRunner()).contract_whole is None  # around single calls: single calls
        assert wrapper(WholeRunner()).contract_whole is not None
    assert Counting(Streamed(WholeRunner())).contract_whole is None  # the stream work needs the calls
    in_modes, out_modes, rank, batch = SHAPES["rank1_b17"]
    layer = make_layer(in_modes, out_modes, rank)
    state, (x, grad_y) = layer_state(layer), make_batch(layer, batch)
    inner = WholeRunner()
    streamed = pe_step(state, x, grad_y, Streamed(inner))  # WholeRunner.run: call by call
    assert sum(compare_steps(pe_step(state, x, grad_y, GoldenRunner()), streamed).values()) == 0
    assert inner.calls == len(step_plan(state, batch, StepHardware()).calls) and not inner.arithmetic


@pytest.mark.parametrize("route", ROUTES)
def test_a_recorded_whole_forward_is_replayed_in_the_step(route):
    """The torch trainer on PEs records the forward pass and replays it in the step's own sweep: with the whole
    runner every forward contraction is answered from the record, counted as the PE calls it stands for."""
    in_modes, out_modes, rank, batch = SHAPES["padding_edges_b33"]
    layer = make_layer(in_modes, out_modes, rank, route=route)
    state, (x, grad_y) = layer_state(layer), make_batch(layer, batch)
    plan = step_plan(state, batch, SMALL_HARDWARE)
    counting = Counting(WholeRunner())
    recording = Recording(counting)
    forward_sweep(state, x, plan, recording)
    forward_calls = sum(call.index < plan.geometry.order for call in plan.calls)
    assert counting.transactions == forward_calls and len(recording.recorded) == plan.geometry.order
    replay = Replay(counting, recording.recorded)
    got = pe_step(state, x, grad_y, replay, SMALL_HARDWARE)
    assert replay.replayed == forward_calls and replay.misses == 0
    assert counting.transactions == len(plan.calls)  # the forward's contractions were not computed again
    assert sum(compare_steps(pe_step(state, x, grad_y, GoldenRunner(), SMALL_HARDWARE), got).values()) == 0
    other = Replay(Counting(WholeRunner()), recording.recorded)  # other codes: computed, counted as misses
    pe_step(state, x * 2 + 1, grad_y, other, SMALL_HARDWARE)
    assert other.replayed == 0 and other.misses > 0


# ---------------------------------------------------------------------------- whole training runs
def _words(weights: dict) -> list:
    return [np.asarray(a) for key in ("cores", "biases", "moments", "trackers", "ranks") for a in weights[key]]


def test_the_numpy_loop_trains_bit_identically_on_whole_contractions():
    """Two epochs of three steps with evaluation, the prior and a pruning at the first epoch's end (so the later
    steps run on other ranks): the loop's default runner and the kernels' calls end with the same state words."""
    from pathlib import Path

    from codesign.design import load_design
    from codesign.design.families.tt import tt_setup_of
    from codesign.loops.tt import TtMlpTrainer
    from codesign.train.data import load_digits_dataset

    examples = Path(__file__).resolve().parents[3] / "examples"
    setup = dataclasses.replace(tt_setup_of(load_design(examples / "digits_tt.toml")), epochs=2, prune_from_epoch=0,
                                warmup_epochs=0, threshold=0.9)
    data = load_digits_dataset()
    fast, calls = TtMlpTrainer(setup), TtMlpTrainer(setup, GoldenRunner())
    assert isinstance(fast.runner.runner, WholeRunner)
    for trainer in (fast, calls):
        trainer.fit(data, max_steps=3, progress=False)
    assert fast.prune_events and fast.prune_events == calls.prune_events  # ranks changed after epoch 0
    assert [{k: v for k, v in row.items() if k != "seconds"} for row in fast.history] == \
        [{k: v for k, v in row.items() if k != "seconds"} for row in calls.history]
    words = [_words(trainer.read_weights()) for trainer in (fast, calls)]
    assert len(words[0]) == len(words[1]) > 0
    compared = 0
    for a, b in zip(*words):
        assert a.dtype == b.dtype and a.shape == b.shape
        assert np.array_equal(a.view(np.uint8), b.view(np.uint8))
        compared += a.size
    parameters = sum(array.size for array in (*fast.read_weights()["cores"], *fast.read_weights()["biases"]))
    assert compared > 3 * parameters > 0  # the parameters, Adam's two moments of each, trackers and ranks
    figures = {name: trainer.throughput() for name, trainer in (("fast", fast), ("calls", calls))}
    for key in ("steps", "transactions", "macs", "replayed", "replay_misses"):
        assert figures["fast"][key] == figures["calls"][key], key
    assert fast.runner.runner.fallbacks == 0


def test_the_torch_trainer_on_pes_defaults_to_whole_contractions_with_the_same_run():
    pytest.importorskip("torch")
    from codesign.train.hw_golden_tt import TtHwTrainer
    from tests.deploy.test_hw_golden_tt import CONFIG, SMALL_HARDWARE as HW_SMALL, _compare, _state

    fast, calls = TtHwTrainer(CONFIG, hardware=HW_SMALL), TtHwTrainer(CONFIG, hardware=HW_SMALL, runner=GoldenRunner())
    assert isinstance(fast.backend.runner.runner, WholeRunner)
    for loop in (fast, calls):
        loop.fit(epochs=1, progress=False)
    compared, differ = _compare(_state(fast.trainer), _state(calls.trainer))
    assert compared > 0 and differ == 0
    a, b = fast.throughput(), calls.throughput()
    for key in ("pe_transactions", "macs", "replayed_transactions", "replay_misses"):
        assert a[key] == b[key], key
    assert a["replayed_transactions"] > 0
