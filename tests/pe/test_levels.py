"""One grid per PE, three levels: golden ≡ C-sim ≡ RTL, bit for bit (FINN's python / cppsim / rtlsim).

Every registered PE's :meth:`verification_grid` runs here at every level on
one shared vector file per grid point, through the same generic flow
(:mod:`codesign.hw.flow`) the command line uses. make test runs every quick
point at golden (but the FP-MAC array's past its first) and each PE's first
quick point at C-sim and RTL (the RTL under stalls in tests/pe/test_stream_rtl.py
or the PE's own file, but the pipeline FP-MAC's here); make test-slow runs
the rest, but the RTL level of the points of :data:`RTL_LONG` (make
test-long).
"""

from __future__ import annotations

import shutil
import time

import pytest

from codesign.hw.flow import LEVELS, generate_project, run_csim, run_rtl
from codesign.pe import get_pe, pe_names
from tests.pe.conftest import GENERIC, first_quick_point


# slow grid points whose RTL level at the full stimulus takes minutes of Icarus: make test-long runs it; make
# test-slow runs the point at RTL in tests/pe/test_stream_rtl.py (the quick stimulus, under stalls, cycles against
# the model) and at golden and C-sim here at the full stimulus
RTL_LONG = {("csb", "fc3x8_b2_acc16"), ("csb", "conv4_k3_t4_b4_p2"), ("csb", "conv16_k1_t2_b4_p4")}


# PEs whose golden level past the first point runs in make test-slow: the FP-MAC array's takes 5 to 6 s a point
SLOW_GOLDEN = {"fpmac_array"}


def _marks(name: str, index: int, case, level: str) -> list:
    """``slow``/``long`` as the grid point says. Also ``slow``: the C-sim and RTL levels of every point but the
    PE's first quick one (a compile or an Icarus run of seconds each), the golden level of those of
    :data:`SLOW_GOLDEN`, and the RTL level of a PE make test runs at RTL under stalls
    (tests/pe/test_stream_rtl.py, or its own file). The points of :data:`RTL_LONG` run at RTL in make
    test-long."""
    later = index != first_quick_point(name) and (level != "golden" or name in SLOW_GOLDEN)
    slow = case.slow or later or (level == "rtl" and name in GENERIC)
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
