"""A TT layer's forward pass as two call lists (PE2, then PE1) over one arena: the states stay in place, rounded on
the PE; the layer output equals the trainer's ``tt_forward`` with the same rounding, and the C-sim and RTL shells
equal the golden list model over the whole arena."""

from __future__ import annotations

import numpy as np
import pytest

from codesign.pe import get_pe
from codesign.pe.tt.spec import Tt1Spec, Tt2Spec
from codesign.shell.calls import ListCase, run_list_golden
from codesign.shell.ip import render_accel_project
from codesign.shell.list_sim import run_list_csim, run_list_rtl
from codesign.step.list_cycles import list_cycles
from codesign.step.tt.lists import forward_lists
from codesign.step.tt.rounding import rescale
from codesign.train.tt.ttm import tt_forward

SPEC2, SPEC1 = Tt2Spec(lanes=8, rows=4), Tt1Spec(lanes=8, rows=4)  # examples/digits_tt.toml's PEs
SHIFTS = (-4, -5)


def _layer(seed: int = 0, batch: int = 64):
    """digits_tt's first layer: 64 = 4*4*4 inputs and outputs, ranks (1, 4, 4, 1), 4-bit cores, 8-bit inputs."""
    rng = np.random.default_rng(seed)
    shapes = [(1, 4, 4, 4), (4, 4, 4, 4), (4, 4, 4, 1)]
    cores = [rng.integers(-8, 8, size=shape) for shape in shapes]
    return rng.integers(-128, 128, size=(batch, 64)), cores


def _reference(x, cores, shifts, bits=8):
    """tt_forward in exact integers, each state after the first rounded by its shift to ``bits``-wide codes, as
    the PE's rounding stage rounds."""
    def on_state(k, state):
        if k == 0:
            return state
        return rescale(np.rint(state).astype(np.int64), 0, shifts[k - 1], bits).astype(np.float64)

    y, _ = tt_forward(x.astype(np.float64), [c.astype(np.float64) for c in cores], on_state=on_state)
    return np.rint(y).astype(np.int64)


def _golden(lists):
    after_pe2 = run_list_golden(get_pe("tt2"), SPEC2, lists.arena, lists.pe2_calls)
    return after_pe2, run_list_golden(get_pe("tt1"), SPEC1, after_pe2, lists.pe1_calls)


def test_the_lists_compute_the_layer_forward_with_states_in_place():
    x, cores = _layer()
    lists = forward_lists(x, cores, SHIFTS, spec2=SPEC2, spec1=SPEC1)
    assert (len(lists.pe2_calls), len(lists.pe1_calls)) == (3, 5)  # I = 64, 256 (two calls), 1024 (five)
    _, after = _golden(lists)
    out = after[lists.out // 4:lists.out // 4 + int(np.prod(lists.out_shape))].view(np.int32)
    np.testing.assert_array_equal(out.reshape(lists.out_shape), _reference(x, cores, SHIFTS))


def test_a_pe1_taking_b_j_outer_computes_the_same_output():
    """The last contraction (J = 4 ranks) on a PE1 built to take B j outer: its B block becomes a plane per j, the
    layer output is the same word for word."""
    x, cores = _layer()
    jl = Tt1Spec(lanes=8, rows=4, b_order="jl")
    lists = forward_lists(x, cores, SHIFTS, spec2=SPEC2, spec1=jl)
    assert all(call.segments[0].planes == 4 for call in lists.pe1_calls)
    after_pe2 = run_list_golden(get_pe("tt2"), SPEC2, lists.arena, lists.pe2_calls)
    after = run_list_golden(get_pe("tt1"), jl, after_pe2, lists.pe1_calls)
    assert np.array_equal(after, _golden(forward_lists(x, cores, SHIFTS, spec2=SPEC2, spec1=SPEC1))[1])
    wrong = _golden(lists)[1]  # the same lists on a PE1 that reads B l outer
    out = slice(lists.out // 4, lists.out // 4 + int(np.prod(lists.out_shape)))
    assert not np.array_equal(wrong[out], after[out])


def test_a_contraction_beyond_the_buffers_is_refused():
    x, cores = _layer()
    with pytest.raises(ValueError, match="partial sums"):
        forward_lists(x, cores, SHIFTS, spec2=Tt2Spec(lanes=8, rows=4, max_j=8), spec1=SPEC1)


@pytest.mark.parametrize("level, spec2", [("csim", SPEC2),  # make test's TT layer lists at a compiled level
                                          pytest.param("csim", Tt2Spec(lanes=4, rows=4, max_k=8),
                                                       marks=pytest.mark.slow),
                                          pytest.param("rtl", SPEC2, marks=pytest.mark.slow),
                                          pytest.param("rtl", Tt2Spec(lanes=4, rows=4, max_k=8),
                                                       marks=pytest.mark.slow)])
def test_the_layer_lists_equal_golden_at_each_level(tmp_path, level, spec2):
    x, cores = _layer(seed=1)
    lists = forward_lists(x, cores, SHIFTS, spec2=spec2, spec1=SPEC1)
    after_pe2 = run_list_golden(get_pe("tt2"), spec2, lists.arena, lists.pe2_calls)
    after = run_list_golden(get_pe("tt1"), SPEC1, after_pe2, lists.pe1_calls)
    cases = [("tt2", spec2, ListCase(calls=lists.pe2_calls, arena=lists.arena, expected=after_pe2)),
             ("tt1", SPEC1, ListCase(calls=lists.pe1_calls, arena=after_pe2, expected=after))]
    for name, spec, case in cases:
        pe = get_pe(name)
        if level == "csim":
            render_accel_project(pe, spec, f"{name}_0", None, tmp_path / name)
            result = run_list_csim(tmp_path / name, case, build_dir=tmp_path / f"{name}_build")
        else:
            result = run_list_rtl(pe, spec, case, tmp_path / name, pause=0.0)
        print(f"\n[layer forward {level}] {name}: {len(case.calls)} calls, {result.words} arena words, "
              f"{result.mismatches} mismatches, {result.busy_cycles} busy cycles")
        assert result.passed, result.first_mismatches
        if level == "rtl":  # the whole list's cycles, run_start to ap_done, equal the cycle model's
            modelled = list_cycles(pe, spec, case.calls, case.arena)
            print(f"[layer forward model] {name}: {modelled.total} cycles {modelled.breakdown()}")
            assert modelled.total == result.busy_cycles


def test_pe2_calls_over_k_ranges_equal_the_layer_forward():
    """max_k below K: PE2's calls cut K into whole chunks and whole rows of the next operand (no partial sums);
    the output is the same layer forward."""
    x, cores = _layer(seed=3)
    spec2 = Tt2Spec(lanes=4, rows=4, max_k=8)  # core 1's K = 16 and core 2's K = 4: the first is cut in two
    lists = forward_lists(x, cores, SHIFTS, spec2=spec2, spec1=SPEC1)
    assert len(lists.pe2_calls) == 2 + 2
    after_pe2 = run_list_golden(get_pe("tt2"), spec2, lists.arena, lists.pe2_calls)
    after = run_list_golden(get_pe("tt1"), SPEC1, after_pe2, lists.pe1_calls)
    out = after[lists.out // 4:lists.out // 4 + int(np.prod(lists.out_shape))].view(np.int32)
    np.testing.assert_array_equal(out.reshape(lists.out_shape), _reference(x, cores, SHIFTS))
