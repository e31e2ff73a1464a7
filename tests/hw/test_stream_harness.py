"""The stream harness's build (codesign.hw.stream_harness): memories sized to the vectors, the PE named by defines,
bad parameters refused before anything is built. The harness's runs are checked where PEs are
(tests/pe/test_stream_rtl.py, tests/pe/csb/test_csb_rtl_cases.py)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from codesign.hw.stream_harness import HARNESS_TOP, MIN_LOG2, harness_build, harness_source, memory_log2, vector_sizes
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
