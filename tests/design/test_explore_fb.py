"""The explorer on an FB-float design (examples/digits_abvs.toml): the FP-MAC array's shape varies.

Three explored points are checked the way the hardware would run them: the
RTL's cycles on the step's transactions equal the model's, the emulated
board trains bit-identically to the golden loop and its IP calls move exactly
the modelled words in the modelled cycles, and the chosen point fits per
``codesign design``.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from codesign.design import load_design
from codesign.design.explore import legal_specs
from codesign.design.explore_model import FPMAC_ARRAY_KNOBS, explore_family
from codesign.design.families.fpmac_array import fb_model
from codesign.design.explore_run import design_of_point
from codesign.design.families.fpmac_array import fb_setup_of
from codesign.step.fpmac_array.time import fb_stages, fb_step_time, gemm_stages
from codesign.loops.host_share import step_gemms
from codesign.step.host import HostModel
from codesign.hw.resource_model import RESOURCES
from codesign.pe.fpmac_array.spec import FpmacArraySpec
from codesign.train.config import read_toml

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "digits_abvs.toml"
# array shapes of the calibration grid at the design's width and buffers, so every Yosys confirmation is a build
# the calibration synthesised (cached in YOSYS_CACHE)
GRID_KNOBS = {"rows": (2, 4), "cols": (2, 4), "copies": (1,)}
HOST = HostModel(fixed_s=1e-3, per_call_s=2e-5, source="test")
YOSYS_CACHE = Path.home() / ".cache" / "codesign" / "yosys"


@pytest.fixture(scope="module")
def design():
    return load_design(EXAMPLE, board_name="ultra96v2")


@pytest.fixture(scope="module")
def shapes(design):
    return step_gemms(fb_setup_of(design))[0]


@pytest.fixture(scope="module")
def space(design, shapes):
    family = fb_model(fb_setup_of(design).spec, shapes, host=HOST)
    return explore_family(family, design.board, clock_mhz=100.0, knobs={"fpmac_array": GRID_KNOBS})


def _points(space) -> list[int]:
    """The fastest point and the two cheapest in DSP after it: three distinct explored builds."""
    fastest = space.best("time")
    others = [int(i) for i in np.argsort(space.resources["dsp"], kind="stable") if int(i) != fastest]
    return [fastest] + others[:2]


def test_the_knobs_take_the_values_the_spec_accepts():
    base = FpmacArraySpec(max_fb=9)
    assert len(legal_specs(base, FPMAC_ARRAY_KNOBS)) == 16 * 16
    assert [s.rows for s in legal_specs(base, {"rows": (0, 1, 16, 17)})] == [1, 16]  # the validator's 1..16


def test_a_gemm_is_one_call_per_k_span_with_every_tile(shapes):
    spec = FpmacArraySpec(max_fb=9, max_m=32, max_n=32, max_k=32)
    forward = next(s for s in shapes if (s.m, s.k, s.n) == (64, 64, 64))
    calls = gemm_stages(spec, forward)
    assert [count for _, count in calls] == [4, 4]  # K = 64 in two spans, C = 64 x 64 in four 32 x 32 tiles
    # the second span accumulates: C_in words go in; every tile sends its status and C back
    first, second = calls[0][0], calls[1][0]
    assert second.words_in - first.words_in == (0 if forward.accumulate else 4 * 32 * 32)
    assert first.words_out == second.words_out == 4 * (1 + 32 * 32)


def test_the_vectorised_space_equals_the_direct_model(space, design, shapes):
    assert space.index.shape[0] == 4
    for index in range(space.index.shape[0]):
        spec = space.chosen_options(index)[0].spec
        step = fb_step_time(spec, shapes, design.board, clock_mhz=100.0, host=HOST)
        assert space.pe_s[index] == pytest.approx(step.pe_s, rel=1e-12)
        assert space.memory_s[index] == pytest.approx(step.memory_s, rel=1e-12, abs=1e-15)
        assert space.host_s[index] == pytest.approx(step.host_s, rel=1e-12)
        assert space.total_s[index] == pytest.approx(step.total_s, rel=1e-12)
        assert step.bottleneck in ("pe", "memory", "host") and step.bounds["macs_s"] <= step.pe_s


def test_a_larger_array_is_faster_and_costs_more(space):
    by_shape = {(o.spec.rows, o.spec.cols): i for i, o in enumerate(space.options[0])}
    small, large = by_shape[(2, 2)], by_shape[(4, 4)]
    assert space.pe_s[large] < space.pe_s[small]
    from codesign.pe.fpmac_array.resources import VECTOR_MACS

    # one slice per 10 x 10 product: the array's MACs and the element-wise unit's three
    dsp = {shape: space.resources["dsp"][index] - VECTOR_MACS for shape, index in (("small", small), ("large", large))}
    assert dsp["large"] == 4 * dsp["small"]
    assert space.resources["lut"][large] > space.resources["lut"][small]


def _containers(spec, fb: int, rng, *dims) -> np.ndarray:
    """Container words of random values in (-2, 2) at run-time ``fb``."""
    from codesign.numerics import FloatFormat, encode
    from codesign.pe.fpmac.golden import to_container

    fmt = FloatFormat(exp_bits=spec.exp_bits, frac_bits=fb, rounding=spec.rounding)
    return to_container(encode(rng.uniform(-2, 2, dims), fmt), fb, max_fb=spec.max_fb)


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("iverilog") is None, reason="Icarus Verilog (iverilog) is not on PATH")
def test_explored_builds_run_on_the_rtl_as_modelled(space, shapes, tmp_path):
    """Three explored builds: a transaction of each of three distinct call shapes of the step (a K span's first
    tile, random operands) through the RTL, every word right, its words and cycles the model's."""
    pytest.importorskip("cocotb_tools.runner")
    from codesign.step.fpmac_array.time import _transaction
    from codesign.hw.flow import run_rtl
    from codesign.pe import get_pe
    from codesign.pe.fpmac_array import golden

    pe, rng = get_pe("fpmac_array"), np.random.default_rng(0)
    for index in _points(space):
        spec = space.chosen_options(index)[0].spec
        seen, stimulus, modelled = set(), [], []
        for shape in shapes:
            m, depth, n = min(shape.m, spec.max_m), min(shape.k, spec.max_k), min(shape.n, spec.max_n)
            if (m, depth, n, shape.accumulate) in seen or len(seen) == 3:
                continue
            seen.add((m, depth, n, shape.accumulate))
            a, b = _containers(spec, shape.fb, rng, m, depth), _containers(spec, shape.fb, rng, depth, n)
            c = _containers(spec, shape.fb, rng, m, n) if shape.accumulate else None
            stimulus.append((golden.words(spec, a, b, c, fb=shape.fb), golden.output(spec, a, b, c, fb=shape.fb)))
            modelled.append(_transaction(spec, m, depth, n, shape.accumulate, shape.fb))
        vectors = pe.write_vectors(spec, stimulus, tmp_path / f"{index}.txt")
        result = run_rtl(pe, spec, vectors, tmp_path / str(index),
                         bench_env={"STREAM_GAP_PROBABILITY": "0", "STREAM_BACKPRESSURE": "0"})
        assert (result.vectors, result.mismatches) == (3, 0), result.first_mismatches
        assert list(result.cycles) == [cycles for cycles, _, _ in modelled]
        assert [(i.size, o.size) for i, o in stimulus] == [(w_in, w_out) for _, w_in, w_out in modelled]


@pytest.mark.slow
def test_explored_points_train_on_the_emulated_board_bit_identically(space, design, tmp_path):
    """Three explored points on the emulated board: two SGD steps bit-identical to the golden loop, and a step's
    IP calls exactly the modelled stages (cycles, words in, words out)."""
    import warnings

    from codesign.deploy import CodesignOverlay
    from codesign.deploy.training import BoardTrainer
    from codesign.design.build import write_emulation_folder
    from codesign.loops.fb import FbMlpTrainer
    from codesign.train.data import load_digits_dataset

    data = load_digits_dataset(validation_fraction=0.2)
    raw = read_toml(EXAMPLE)
    for index in _points(space):
        _, chosen = design_of_point(raw, design, space.point(index))
        folder = write_emulation_folder(chosen, tmp_path / str(index))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            overlay = CodesignOverlay(folder, design=chosen, emulate=True)
        board, golden = BoardTrainer(overlay, chosen, epochs=1), FbMlpTrainer(fb_setup_of(chosen, epochs=1))
        x, y = data.train_x[:64].reshape(64, -1), data.train_y[:64]
        for trainer in (board, golden):
            for _ in range(2):
                trainer.train_step(x, y)
        mine, theirs = board.read_weights(), golden.read_weights()
        for key in ("weights", "biases", "velocity"):
            assert all(np.array_equal(a, b) for a, b in zip(mine[key], theirs[key])), key
        spec = chosen.instances[0].spec
        stages, _ = fb_stages(spec, step_gemms(fb_setup_of(chosen))[0])
        logged = board.stage_log.stages
        assert len(logged) == 2 * len(stages)
        # one IP a stage: its port moves all of the stage's words
        assert logged[:len(stages)] == [(s.cycles, s.words_in, s.words_out, s.words_in, s.words_out) for s in stages]


@pytest.mark.slow
def test_explore_writes_reports_and_a_chosen_design_that_fits(design, tmp_path, explore_end_to_end):
    """End to end on the calibration grid's builds (Yosys from the calibration's cache, or run where it lacks one)."""
    run = explore_end_to_end(EXAMPLE, design, knobs={"fpmac_array": GRID_KNOBS}, cache_dir=YOSYS_CACHE,
                             out=tmp_path / "out", fitted_within=0.15)
    assert run.result["space"].index.shape[0] == 4
    spec = run.again.instances[0].spec
    assert (spec.rows, spec.cols) == (run.point["fpmac_array"]["rows"], run.point["fpmac_array"]["cols"])
    assert set(RESOURCES) <= set(run.performance["chosen"])


def test_the_host_of_a_list_step_is_measured_within_the_traffic_goals(design):
    from codesign.design.families.fpmac_array import measure_fb_list_host

    setup = fb_setup_of(design)
    measured = measure_fb_list_host(setup, repeats=1)
    batch_bytes = 4 * setup.batch_size * setup.layers[0]
    assert measured["lists"] == 2 and 0 < measured["seconds"]
    assert 0 < measured["flushed_bytes"] <= 2 * batch_bytes + (64 << 10) and 0 < measured["read_bytes"] <= 64 << 10


@pytest.mark.slow  # 20 s: prices the step and runs it on an emulated board
def test_the_family_prices_the_list_step_the_board_runs(design):
    """The family's explorer prices the step as the board runs it on RTL-route IPs (two call lists): each point's
    PE, memory and host seconds are the list step model's; deeper buffers (fewer, larger tiles) stream less."""
    from codesign.design.families import get_family
    from codesign.design.families.fpmac_array import fb_list_model
    from codesign.step.fpmac_array.list_time import fb_list_step
    from codesign.step.list_cycles import BOARD_DDR

    setup, host = fb_setup_of(design), HostModel(fixed_s=2e-4, per_call_s=0.0, source="test")
    assert get_family("fpmac_array").explorer(design, host=host).knobs["fpmac_array"]["max_k"] == (32, 64)
    family = fb_list_model(setup.spec, setup.layers, setup.batch_size, host=host)
    knobs = {"rows": (2, 8), "cols": (4,), "max_m": (32, 64), "max_n": (64,), "max_k": (64,), "copies": (1, 2)}
    space = explore_family(family, design.board, clock_mhz=100.0, knobs={"fpmac_array": knobs})
    assert space.index.shape[0] == 8
    for index in range(8):
        option = space.chosen_options(index)[0]
        step = fb_list_step(option.spec, setup.layers, setup.batch_size, design.board, clock_mhz=100.0, host_s=2e-4,
                            host_source="test", ddr=BOARD_DDR, copies=option.copies)
        assert (space.pe_s[index], space.memory_s[index], space.host_s[index]) == pytest.approx(
            (step.pe_s, step.memory_s, step.host_s), rel=1e-12, abs=1e-15)
        assert family.step(space.chosen_options(index), design.board, 100.0).to_dict() == step.to_dict()
    by_copies = {(o.spec.rows, o.spec.max_m, o.copies): i for i, o in enumerate(space.options[0])}
    assert space.pe_s[by_copies[(8, 64, 2)]] < space.pe_s[by_copies[(8, 64, 1)]]  # two IPs share the step
    by_build = {(o.spec.rows, o.spec.max_m): i for i, o in enumerate(space.options[0]) if o.copies == 1}
    assert space.pe_s[by_build[(8, 64)]] < space.pe_s[by_build[(8, 32)]]
    assert space.resources["bram_36k"][by_build[(8, 64)]] > space.resources["bram_36k"][by_build[(8, 32)]]


@pytest.mark.slow  # the explorer end to end; Yosys runs where the calibration cache lacks a build
def test_a_chosen_point_yosys_puts_over_the_cap_is_passed_over(design, tmp_path, monkeypatch):
    """Where Yosys puts the model's choice over the cap, the explorer takes the first confirmed point it puts
    within it (the front's next best), says which it passed over and why, and writes that point's design."""
    import dataclasses

    import codesign.design.explore_run as run
    from codesign.design import design_from_dict

    real, fitted = run.fit_design, []

    def fit(point_design, **kwargs):
        found = real(point_design, **kwargs)
        fitted.append(point_design)
        return dataclasses.replace(found, limit_percent=0.0) if len(fitted) == 1 else found  # the first: over
    monkeypatch.setattr(run, "fit_design", fit)
    result = run.explore_design(read_toml(EXAMPLE), design, cache_dir=YOSYS_CACHE,
                                knobs={"fpmac_array": GRID_KNOBS}, progress=lambda _: None)
    confirmed = result["confirmed"]
    assert not confirmed[0]["fits"] and confirmed[1]["fits"]
    assert result["passed_over"] == {"label": confirmed[0]["point"]["label"], "over": confirmed[0]["over"]}
    point = result["space"].point(result["chosen"])
    assert point["label"] == confirmed[1]["point"]["label"] != confirmed[0]["point"]["label"]
    assert result["step"].total_s >= result["space"].total_s[result["space"].best("time")]
    assert f"Yosys put the model's choice, {confirmed[0]['point']['label']}, over the cap" in run.summary(result)
    written = {p.name: p for p in run.write_reports(result, tmp_path / "out", board=design.board)}
    spec = design_from_dict(read_toml(written["chosen.toml"])).instances[0].spec
    assert (spec.rows, spec.cols) == (point["fpmac_array"]["rows"], point["fpmac_array"]["cols"])


def test_the_confirmed_choice_keeps_the_models_where_yosys_agrees_or_none_fits():
    from codesign.design.explore_run import confirmed_choice

    def entry(label, fits):
        return {"point": {"label": label}, "fits": fits, "over": [] if fits else ["lut"]}
    said: list = []
    assert confirmed_choice([7, 3, 5], [entry("a", True), entry("b", True), entry("c", True)], said.append) == (7, None)
    assert confirmed_choice([7, 3, 5], [entry("a", False), entry("b", False), entry("c", False)],
                            said.append) == (7, None)
    assert not said
    assert confirmed_choice([7, 3, 5], [entry("a", False), entry("b", False), entry("c", True)], said.append) == (
        5, {"label": "a", "over": ["lut"]})
    assert said == ["Yosys puts a over the cap (lut): chose c, the best point it confirms within it"]
