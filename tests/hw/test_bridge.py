"""codesign.hw.bridge: the shell's synthesised top as a ctypes call; output == golden, bit for bit."""

from __future__ import annotations

import shutil

import numpy as np
import pytest

from codesign.shell import ip as accel
from codesign.hw.bridge import AccelBridge, BridgeError, build_library
from codesign.hw.target import BuildTarget
from codesign.pe import get_pe
from codesign.pe.csb.pe import CsbStimulusOptions
from codesign.pe.csb.spec import CsbSpec
from codesign.pe.fpmac_array.spec import FpmacArraySpec
from codesign.pe.fpmac_array.stimulus import FpmacArrayStimulusOptions
from codesign.pe.tt.spec import Tt1Spec, Tt2Spec, Tt3Spec
from codesign.pe.tt.stimulus import TtStimulusOptions

pytestmark = pytest.mark.skipif(shutil.which("g++") is None, reason="g++ is not on PATH")

SMALL = {
    "csb": (CsbSpec(block_rows=4, block_cols=4, kernel=3, out_h=4, out_w=4, batch=4, parallel=2),
            CsbStimulusOptions(min_macs_per_op=500)),
    "tt1": (Tt1Spec(lanes=1, rows=1, a_bits=3, b_bits=2, acc_bits=16, max_j=3, max_k=5, max_l=4),
            TtStimulusOptions(min_macs=1000)),
    "tt2": (Tt2Spec(lanes=8, rows=8, a_bits=8, b_bits=8, acc_bits=20, max_j=9, max_k=24, max_l=17),
            TtStimulusOptions(min_macs=3000)),
    "tt3": (Tt3Spec(lanes=8, a_bits=12, b_bits=5, max_j=255), TtStimulusOptions(min_macs=3000)),
    "fpmac_array": (FpmacArraySpec(exp_bits=5, max_fb=10, rounding="nearest_away", rows=3, cols=2, max_m=9, max_n=7,
                                   max_k=12), FpmacArrayStimulusOptions(min_macs=3000)),
}
GUARD = np.uint32(0x5A5A_1234)


@pytest.fixture(scope="module")
def lib_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("bridge-libs")


def _project(name, directory):
    pe = get_pe(name)
    spec, options = SMALL[name]
    stimulus = pe.build_stimulus(spec, options)
    accel.render_accel_project(pe, spec, f"{name}_1", BuildTarget(), directory, stimulus=stimulus)
    return stimulus


def _flat(stimulus):
    words_in = np.concatenate([w for w, _ in stimulus]).astype(np.uint32)
    expected = np.concatenate([e for _, e in stimulus]).astype(np.uint32)
    return words_in, expected


@pytest.mark.parametrize("name", [pytest.param("csb", marks=pytest.mark.slow), "tt2",
                                  *(pytest.param(name, marks=pytest.mark.long)
                                    for name in ("tt1", "tt3", "fpmac_array"))])
def test_bridge_output_equals_golden(tmp_path, lib_dir, name):
    stimulus = _project(name, tmp_path / "p")
    bridge = AccelBridge(tmp_path / "p", build_dir=lib_dir)
    words_in, expected = _flat(stimulus)
    out = np.full(expected.size + 8, GUARD, dtype=np.uint32)
    returned = bridge.run(words_in, out, words_in.size, expected.size, len(stimulus))
    assert returned is out
    wrong = np.flatnonzero(out[:expected.size] != expected)
    assert wrong.size == 0, f"{wrong.size} of {expected.size} words differ, first at {wrong[:5]}"
    assert np.all(out[expected.size:] == GUARD)  # nothing written past n_out
    print(f"\n[bridge] {name}: {len(stimulus)} transactions, {expected.size} words, 0 mismatches")


def test_bridge_runs_transactions_one_call_at_a_time_and_caches(tmp_path, lib_dir):
    """Per-transaction calls on one loaded library equal the golden words (state kept as on the board)."""
    stimulus = _project("tt2", tmp_path / "p")
    bridge = AccelBridge(tmp_path / "p", build_dir=lib_dir)
    for words_in, expected in stimulus:
        out = np.zeros(len(expected), dtype=np.uint32)
        bridge.run(words_in.astype(np.uint32), out, len(words_in), len(expected), 1)
        assert np.array_equal(out, expected.astype(np.uint32))
    # the same sources in another directory load the cached library
    _project("tt2", tmp_path / "q")
    library, seconds = build_library(tmp_path / "q", lib_dir)
    assert (library, seconds) == (bridge.library_path, 0.0)


def test_bridge_refuses_buffers_that_do_not_fit(tmp_path, lib_dir):
    _project("tt2", tmp_path / "p")
    bridge = AccelBridge(tmp_path / "p", build_dir=lib_dir)
    words = np.zeros(4, dtype=np.uint32)
    with pytest.raises(BridgeError, match="uint32"):
        bridge.run(words.astype(np.int64), words, 1, 1, 1)
    with pytest.raises(BridgeError, match="fewer than n_in"):
        bridge.run(words, np.zeros(4, dtype=np.uint32), 5, 1, 1)
    with pytest.raises(BridgeError, match="fewer than n_out"):
        bridge.run(words, np.zeros(4, dtype=np.uint32), 1, 5, 1)
    with pytest.raises(BridgeError, match="C-contiguous"):
        bridge.run(np.zeros(8, dtype=np.uint32)[::2], np.zeros(4, dtype=np.uint32), 1, 1, 1)
    with pytest.raises(BridgeError, match="n_transactions"):
        bridge.run(words, np.zeros(4, dtype=np.uint32), 1, 1, -1)


def test_bridge_needs_an_accelerator_project(tmp_path):
    with pytest.raises(ValueError, match="not an accelerator project"):
        AccelBridge(tmp_path)
