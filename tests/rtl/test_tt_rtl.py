"""rtl/tt (tt1_pe, tt2_pe, tt3_pe) under cocotb: every output word equals the golden model under input gaps and output backpressure, and
the stall-free cycle counts equal the cycle model (codesign.pe.tt.cycles) transaction by transaction."""

from __future__ import annotations

import shutil

import numpy as np
import pytest

from codesign.hw.flow import run_rtl
from codesign.pe import get_pe
from codesign.pe.tt.cycles import transaction_cycles
from codesign.pe.tt.spec import Tt1Spec, Tt2Spec, Tt3Spec
from codesign.pe.tt.stimulus import TtStimulusOptions

pytest.importorskip("cocotb_tools.runner", reason="the RTL tests need cocotb 2.x (pip install codesign[verify])")
needs_icarus = pytest.mark.skipif(shutil.which("iverilog") is None, reason="Icarus Verilog (iverilog) is not on PATH")

CLEAN = {"STREAM_GAP_PROBABILITY": "0", "STREAM_BACKPRESSURE": "0"}
HEAVY = {"STREAM_GAP_PROBABILITY": "0.4", "STREAM_BACKPRESSURE": "0.6"}
PE1_QUICK = {
    "l4r3_a16b16_acc16": Tt1Spec(lanes=4, rows=3, a_bits=16, b_bits=16, acc_bits=16, max_j=5, max_k=9, max_l=7),
    "l16r8_a8b4_acc32_small": Tt1Spec(max_j=3, max_k=33, max_l=9),
}


def _check(name, spec, tmp_path, options=TtStimulusOptions()):
    pe = get_pe(name)
    stimulus = pe.build_stimulus(spec, options)
    vectors = pe.write_vectors(spec, stimulus, tmp_path / "vectors.txt")
    heavy = run_rtl(pe, spec, vectors, tmp_path, seed=7, bench_env=HEAVY)
    assert (heavy.vectors, heavy.mismatches) == (len(stimulus), 0), heavy.first_mismatches
    clean = run_rtl(pe, spec, vectors, tmp_path, bench_env=CLEAN)
    assert clean.mismatches == 0, clean.first_mismatches
    predicted = [transaction_cycles(spec, int(words_in[0])).total for words_in, _ in stimulus]
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


@pytest.mark.long
@needs_icarus
@pytest.mark.parametrize("name", ["tt1", "tt2", "tt3"])
@pytest.mark.parametrize("index", range(5))
def test_grid_long(tmp_path, name, index):
    case = get_pe(name).verification_grid()[index]
    _check(name, case.spec, tmp_path, TtStimulusOptions(min_macs=200_000, seed=11 + index))
