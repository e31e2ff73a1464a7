"""Every stream PE's RTL under cocotb + Icarus, over the registry (codesign.pe.REGISTRY, the flow of
codesign.hw.flow): each verification-grid point's golden stimulus with random input gaps and output backpressure
matches word for word, and without them every transaction takes exactly the cycles of the PE's cycle model
(:meth:`StreamPE.transaction_cycles`); on the first point the bench is shown to catch a wrong expected word and a
word that never comes. tests/pe/test_levels.py checks the same grid at golden, C-sim and RTL with the default
bench; what is specific to a PE (directed stimulus, elaboration checks, long runs) lives in tests/pe/<pe>/.

The PEs covered (the TT PEs at 32-, 64- and 128-bit streams: the bench joins 2 or 4 file words to a stream word),
and those their own files still check (the pipeline FP-MAC), are tests/pe/conftest.py's GENERIC and OWN_FILES;
tests/pe/test_stream_headers.py checks that none is left out.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from codesign.hw.flow import run_rtl
from codesign.pe import get_pe

pytest.importorskip("cocotb_tools.runner", reason="the RTL tests need cocotb 2.x (pip install codesign[verify])")
pytestmark = pytest.mark.skipif(shutil.which("iverilog") is None, reason="Icarus Verilog (iverilog) is not on PATH")

CLEAN = {"STREAM_GAP_PROBABILITY": "0", "STREAM_BACKPRESSURE": "0"}
HEAVY = {"STREAM_GAP_PROBABILITY": "0.4", "STREAM_BACKPRESSURE": "0.6"}


def _vectors(name: str, spec, transactions, tmp_path: Path) -> Path:
    pe = get_pe(name)
    return pe.write_vectors(spec, transactions, tmp_path / pe.vector_file)


def test_rtl_under_stalls_and_cycle_model(tmp_path, stream_rtl_case, grid_stimulus):
    name, case = stream_rtl_case
    pe = get_pe(name)
    transactions = grid_stimulus(name, case)
    vectors = _vectors(name, case.spec, transactions, tmp_path)
    golden = pe.check_golden(case.spec, vectors)  # the expected words against the independent reference model
    assert (golden.vectors, golden.mismatches) == (len(transactions), 0)
    heavy = run_rtl(pe, case.spec, vectors, tmp_path / "heavy", seed=7, bench_env=HEAVY)
    assert (heavy.vectors, heavy.mismatches) == (len(transactions), 0), heavy.first_mismatches
    clean = run_rtl(pe, case.spec, vectors, tmp_path / "clean", bench_env=CLEAN)
    assert (clean.vectors, clean.mismatches) == (len(transactions), 0), clean.first_mismatches
    predicted = [pe.transaction_cycles(case.spec, words_in) for words_in, _ in transactions]
    assert list(clean.cycles) == predicted  # exact, transaction by transaction


def test_broken_expected_word_is_caught(tmp_path, first_case):
    name, case, transactions = first_case
    at = max(range(len(transactions)), key=lambda t: len(transactions[t][1]))
    transactions[at][1][-1] ^= np.uint64(1)
    vectors = _vectors(name, case.spec, transactions, tmp_path)
    result = run_rtl(get_pe(name), case.spec, vectors, tmp_path, bench_env=HEAVY)
    assert (result.vectors, result.mismatches) == (len(transactions), 1)
    assert f"'transaction': {at}" in result.first_mismatches[0]


def test_missing_output_word_is_caught(tmp_path, first_case, stream_parts):
    """An expected word the PE never sends fails the bench: the count is checked, not only the values."""
    name, case, transactions = first_case
    words_in, expected = transactions[-1]
    transactions[-1] = (words_in, np.append(expected, np.zeros(stream_parts(name, case.spec), dtype=np.uint64)))
    vectors = _vectors(name, case.spec, transactions, tmp_path)
    result = run_rtl(get_pe(name), case.spec, vectors, tmp_path, bench_env={**CLEAN, "STREAM_IDLE_LIMIT": "500"})
    assert result.mismatches == 1
    assert any("never produced" in note for note in result.first_mismatches)
