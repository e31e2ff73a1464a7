"""rtl/fpmac_array under cocotb: every output word equals the golden GEMM under input gaps and output backpressure,
and the stall-free cycle counts equal the cycle model (codesign.pe.fpmac_array.cycles) transaction by transaction,
on the array shapes that are fpmac_array's own (a C-bank index that wraps, odd arrays, full buffers); the generic
stream-PE RTL test (tests/rtl/test_stream_rtl.py) runs the verification grid and the bench's failure checks."""

from __future__ import annotations

import shutil

import pytest

from codesign.hw.flow import run_rtl
from codesign.pe import get_pe
from codesign.pe.fpmac_array.cycles import transaction_cycles
from codesign.pe.fpmac_array.spec import FpmacArraySpec
from codesign.pe.fpmac_array.stimulus import FpmacArrayStimulusOptions

pytest.importorskip("cocotb_tools.runner", reason="the RTL tests need cocotb 2.x (pip install codesign[verify])")
needs_icarus = pytest.mark.skipif(shutil.which("iverilog") is None, reason="Icarus Verilog (iverilog) is not on PATH")

CLEAN = {"STREAM_GAP_PROBABILITY": "0", "STREAM_BACKPRESSURE": "0"}
HEAVY = {"STREAM_GAP_PROBABILITY": "0.4", "STREAM_BACKPRESSURE": "0.6"}
CASES = {
    # one row of 16 MACs: a C-bank index of 4 bits (COLS = 16 wraps to 0 in it), N over two tiles and a part
    "e2_fb1_rne_1x16": FpmacArraySpec(exp_bits=2, max_fb=1, rows=1, cols=16, max_m=3, max_n=40, max_k=5),
    # an odd array under stalls and its cycles
    "e5_fb10_rna_3x2": FpmacArraySpec(exp_bits=5, max_fb=10, rounding="nearest_away", rows=3, cols=2, max_m=9,
                                      max_n=7, max_k=12),
}
# 10 and 18 s of Icarus each: make test runs the array at RTL in tests/pe/test_stream_rtl.py
SLOW = {"e5_fb10_rna_3x2", "e2_fb1_rne_1x16"}


def _check(spec, tmp_path, options=FpmacArrayStimulusOptions(min_macs=2000)):
    pe = get_pe("fpmac_array")
    stimulus = pe.build_stimulus(spec, options)
    vectors = pe.write_vectors(spec, stimulus, tmp_path / "vectors.txt")
    golden = pe.check_golden(spec, vectors)  # the expected words against the Fraction reference
    assert (golden.vectors, golden.mismatches) == (len(stimulus), 0)
    heavy = run_rtl(pe, spec, vectors, tmp_path, seed=7, bench_env=HEAVY)
    assert (heavy.vectors, heavy.mismatches) == (len(stimulus), 0), heavy.first_mismatches
    clean = run_rtl(pe, spec, vectors, tmp_path, bench_env=CLEAN)
    assert clean.mismatches == 0, clean.first_mismatches
    predicted = [transaction_cycles(spec, int(words_in[0])).total for words_in, _ in stimulus]
    assert list(clean.cycles) == predicted  # exact
    return stimulus


@needs_icarus
@pytest.mark.parametrize("name", [pytest.param(name, marks=[pytest.mark.slow] * (name in SLOW)) for name in CASES])
def test_rtl_matches_golden_and_cycle_model(tmp_path, name):
    _check(CASES[name], tmp_path)


@pytest.mark.long
@needs_icarus
@pytest.mark.parametrize("index", range(5))
def test_grid_long(tmp_path, index):
    """Each grid configuration on 200 000 MACs of fresh stimulus, plus the default 4 x 4 build on full buffers."""
    case = get_pe("fpmac_array").verification_grid()[index]
    _check(case.spec, tmp_path, FpmacArrayStimulusOptions(min_macs=200_000, seed=11 + index))


@pytest.mark.long
@needs_icarus
def test_odd_array_long(tmp_path):
    """5 x 7 MACs (35 C banks), buffers that are no multiple of the array, more tiles than MACs along both sides."""
    spec = FpmacArraySpec(exp_bits=8, max_fb=7, rounding="toward_zero", rows=5, cols=7, max_m=17, max_n=9, max_k=3)
    _check(spec, tmp_path, FpmacArrayStimulusOptions(min_macs=50_000, seed=3))


@pytest.mark.long
@needs_icarus
def test_default_spec_long(tmp_path):
    _check(FpmacArraySpec(), tmp_path, FpmacArrayStimulusOptions(min_macs=200_000, seed=5))
