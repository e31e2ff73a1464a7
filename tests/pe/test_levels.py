"""One grid per PE, three levels: golden ≡ C-sim ≡ RTL, bit for bit (FINN's python / cppsim / rtlsim).

Every registered PE's :meth:`verification_grid` runs here at every level on
one shared vector file per grid point, through the same generic flow
(:mod:`codesign.hw.flow`) the command line uses. make test runs every level
of the quick points but the RTL of those tests/pe/test_stream_rtl.py already
runs at RTL there; make test-slow runs the rest, but the RTL level of the
points of :data:`RTL_LONG` (make test-long).
"""

from __future__ import annotations

import shutil
import time

import pytest

from codesign.hw.flow import LEVELS, generate_project, run_csim, run_rtl
from codesign.pe import get_pe, pe_names
from tests.pe.conftest import stream_rtl_is_quick


# grid points whose RTL level runs in make test-slow only: the FP-MAC array's E=2 point (10 s here; make test runs
# E=2 at RTL on the 1 x 16 build of tests/pe/fpmac_array, and rounding to nearest-away on the 3 x 2 point here)
RTL_SLOW = {("fpmac_array", "e2_fb1_rna_2x3")}
# slow grid points whose RTL level at the full stimulus takes minutes of Icarus: make test-long runs it; make
# test-slow runs the point at RTL in tests/pe/test_stream_rtl.py (the quick stimulus, under stalls, cycles against
# the model) and at golden and C-sim here at the full stimulus
RTL_LONG = {("csb", "fc3x8_b2_acc16"), ("csb", "conv4_k3_t4_b4_p2"), ("csb", "conv16_k1_t2_b4_p4")}


def _marks(name: str, index: int, case, level: str) -> list:
    """``slow``/``long`` as the grid point says; a point tests/pe/test_stream_rtl.py runs at RTL in make test
    (under stalls, cycles against the model, the quick stimulus) leaves its RTL level at the full stimulus to
    make test-slow, as do the points of :data:`RTL_SLOW`, and those of :data:`RTL_LONG` to make test-long."""
    slow = case.slow or (level == "rtl" and (stream_rtl_is_quick(name, index, case) or (name, case.id) in RTL_SLOW))
    long = case.long or (level == "rtl" and (name, case.id) in RTL_LONG)
    return [pytest.mark.slow] * slow + [pytest.mark.long] * long


CASES = [pytest.param(name, case, level, marks=_marks(name, index, case, level), id=f"{name}-{case.id}-{level}")
         for name in pe_names() for index, case in enumerate(get_pe(name).verification_grid()) for level in LEVELS]


@pytest.fixture(scope="module")
def vector_files(tmp_path_factory):
    """Vector file (and stimulus) per grid point, written once per test process."""
    made = {}

    def get(name, case):
        key = (name, case.id)
        if key not in made:
            pe = get_pe(name)
            options = case.options if case.options is not None else pe.stimulus_options()
            stimulus = pe.build_stimulus(case.spec, options)
            path = pe.write_vectors(case.spec, stimulus, tmp_path_factory.mktemp(f"{name}-{case.id}") / pe.vector_file)
            made[key] = (stimulus, path, pe.stimulus_count(stimulus))
        return made[key]

    return get


@pytest.mark.parametrize("name, case, level", CASES)
def test_level_is_bit_exact(name, case, level, vector_files, tmp_path):
    if level == "rtl" and shutil.which("iverilog") is None:
        pytest.skip("Icarus Verilog (iverilog) is not on PATH")
    pe = get_pe(name)
    stimulus, vectors, count = vector_files(name, case)
    started = time.perf_counter()
    if level == "golden":
        result = pe.check_golden(case.spec, vectors)
        assert result.vectors > 0
    elif level == "csim":
        generate_project(pe, case.spec, tmp_path / "hls", case.target, stimulus=stimulus)
        result = run_csim(pe, case.spec, tmp_path / "hls", vectors, tmp_path / "build")
        assert result.vectors == count, result
    else:
        result = run_rtl(pe, case.spec, vectors, tmp_path / "rtl")
        assert result.vectors == count, result
    print(f"\n[{level}] {name} {case.id}: {result.vectors} vectors, {result.mismatches} mismatches, "
          f"{time.perf_counter() - started:.1f} s")
    assert result.mismatches == 0, getattr(result, "first_mismatches", "")
