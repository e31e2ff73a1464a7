"""The stream harness (codesign.hw.bench_build, rtl/bench/stream_harness.v): memories sized to the vectors,
the PE named by defines, bad parameters refused before anything is built, and the harness's words, cycles, gaps
and stalls on a one-word buffer (tests/hw/stream_echo.v) against its definition. The PEs' runs are checked where
PEs are (tests/pe/test_stream_rtl.py, tests/pe/csb/test_csb_rtl_cases.py)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from codesign.hw.bench_build import HARNESS_TOP, MIN_LOG2, harness_build, harness_source, memory_log2, vector_sizes
from codesign.hw.vectors import write_transactions


@pytest.mark.parametrize("count, log2", [(0, MIN_LOG2), (1, MIN_LOG2), (16, 4), (17, 5), (1024, 10), (1025, 11)])
def test_a_memory_holds_its_words_in_the_smallest_power_of_two(count, log2):
    assert memory_log2(count) == log2


def test_the_build_puts_the_pe_inside_the_harness():
    build = harness_build(sources=[Path("a.v")], dut="tt1_pe", dut_parameters={"ROWS": 8, "LANES": 4},
                          word_parts=4, words_in=100, transactions=3)
    assert build.toplevel == HARNESS_TOP and build.sources == (Path("a.v"), harness_source())
    assert harness_source().is_file()
    assert build.parameters == {"WIDTH": 128, "DEPTH_LOG2": 7, "STARTS_LOG2": 4}
    assert build.build_args == ("-DSTREAM_DUT=tt1_pe", "-DSTREAM_DUT_PARAMETERS=.LANES(4),.ROWS(8)")


@pytest.mark.parametrize("kwargs, message", [
    ({"word_parts": 3}, "word_parts=3"),
    ({"dut_parameters": {"ROWS": "8"}}, "ROWS='8'"),
    ({"dut_parameters": {"ROWS": True}}, "ROWS=True"),
    ({"dut_parameters": {"A-B": 1}}, "A-B=1"),
])
def test_bad_builds_are_refused(kwargs, message):
    given = {"sources": [], "dut": "csb_pe", "dut_parameters": {"ROWS": 8}, "word_parts": 1, "words_in": 1,
             "transactions": 1, **kwargs}
    with pytest.raises(ValueError, match=message):
        harness_build(**given)


def test_the_vector_sizes_count_stream_words(tmp_path):
    words = [np.arange(n, dtype=np.uint64) for n in (5, 8, 1)]
    path = write_transactions(tmp_path / "v.txn", pe="tt1", transactions=[(w, w) for w in words], meta={})
    assert vector_sizes(path, pe="tt1", word_parts=1) == (14, 3)
    assert vector_sizes(path, pe="tt1", word_parts=4) == (2 + 2 + 1, 3)  # a short tail is a padded word


MASK64 = (1 << 64) - 1


def _xorshift(x: int) -> int:
    x ^= (x << 13) & MASK64
    x ^= x >> 7
    return x ^ ((x << 17) & MASK64)


def _echo_run(words: list[list[int]], seed: int, gap: int, backpressure: int, drain: int = 8) -> dict:
    """What the harness must report of the one-word buffer ``stream_echo``, cycle by cycle from its definition: on
    each falling edge one draw gives the gap (high half below ``gap``) and backpressure (low half below
    ``backpressure``); on each rising edge a word moves where valid and ready were both high before it."""
    flat = [w for t in words for w in t]
    starts = set(int(s) for s in np.cumsum([0] + [len(t) for t in words])[:-1])
    state, full, sent, received, cycle = seed, False, 0, 0, 0
    counts = {"input_gaps": 0, "input_stalls": 0, "output_stalls": 0}
    first, last = [], []
    while drain:
        state = _xorshift(state)
        offer = sent < len(flat) and (state >> 32) >= gap
        ready = (state & 0xFFFF_FFFF) >= backpressure
        take, give = offer and not full, full and ready
        if take:
            first += [cycle] if sent in starts else []
            sent += 1
        counts["input_stalls" if offer else "input_gaps"] += (offer and full) or (not offer and sent < len(flat))
        counts["output_stalls"] += full and not ready
        if give:
            received += 1
            last.append(cycle)
        full = (full and not give) or take
        cycle += 1
        drain -= received >= len(flat) and sent == len(flat)
    ends = list(np.cumsum([len(t) for t in words]) - 1)
    return {**counts, "total_cycles": cycle, "cycles": [last[e] - f + 1 for f, e in zip(first, ends)]}


@pytest.mark.skipif(shutil.which("iverilog") is None, reason="Icarus Verilog (iverilog) is not on PATH")
@pytest.mark.parametrize("gap, backpressure", [(0.0, 0.0), (0.3, 0.5)])
def test_the_harness_counts_what_its_definition_gives_on_a_one_word_buffer(tmp_path, gap, backpressure):
    """Every word, each transaction's cycles and the gap and stall counts of a run through ``stream_echo`` against
    :func:`_echo_run`, written from the harness's definition (rtl/bench/stream_harness.v's header), not its code."""
    pytest.importorskip("cocotb_tools.runner", reason="the RTL tests need cocotb 2.x")
    from codesign.hw.rtlsim import package_root, run_cocotb
    from codesign.hw.stream_bench import threshold

    rng = np.random.default_rng(3)
    words = [rng.integers(0, 1 << 32, size=n, dtype=np.uint64) for n in (1, 7, 3, 12, 2)]
    vectors = write_transactions(tmp_path / "echo.txn", pe="echo", transactions=[(w, w) for w in words], meta={})
    build = harness_build(sources=[Path(__file__).with_name("stream_echo.v")], dut="stream_echo",
                          dut_parameters={"WIDTH": 32}, word_parts=1, words_in=25, transactions=5)
    summary_path = tmp_path / "summary.json"
    run_cocotb(sources=build.sources, toplevel=build.toplevel, parameters=build.parameters,
               build_args=build.build_args, test_module="codesign.hw.stream_bench", build_dir=tmp_path / "build",
               python_paths=[package_root()],
               extra_env={"STREAM_VECTORS": str(vectors), "STREAM_SUMMARY": str(summary_path), "STREAM_PE": "echo",
                          "STREAM_SEED": "11", "STREAM_GAP_PROBABILITY": str(gap),
                          "STREAM_BACKPRESSURE": str(backpressure)})
    summary = json.loads(summary_path.read_text())
    expected = _echo_run([[int(w) for w in t] for t in words], 11, threshold(gap), threshold(backpressure))
    assert summary["mismatches"] == 0 and summary["words_checked"] == 25
    assert {key: summary[key] for key in expected} == expected
    assert (summary["input_gaps"] > 0) == (gap > 0) and (summary["output_stalls"] > 0) == (backpressure > 0)
