"""The RTL accelerator shell (rtl/accel + generated accel_top) under cocotb with cocotbext-axi: golden == RTL.

Each run checks the control registers (accel_bench.control_registers) and
replays the golden file through AXI memory models with random stalls on every
channel, once in one run and once as two back-to-back runs
(accel_bench.golden_runs); every output word and the words past n_out are
compared, every burst is checked against MAX_BURST and 4 KiB boundaries.
"""

from __future__ import annotations

import shutil

import numpy as np
import pytest

from codesign.shell import ip as accel
from codesign.pe import get_pe
from codesign.pe.csb.pe import CsbStimulusOptions
from codesign.pe.csb.spec import CsbSpec
from codesign.pe.fpmac_array.spec import FpmacArraySpec
from codesign.pe.fpmac_array.stimulus import FpmacArrayStimulusOptions
from codesign.pe.tt.spec import Tt1Spec, Tt2Spec, Tt3Spec
from codesign.pe.tt.stimulus import TtStimulusOptions

pytest.importorskip("cocotb_tools.runner", reason="the RTL tests need cocotb 2.x (pip install codesign[verify])")
pytest.importorskip("cocotbext.axi", reason="the shell bench needs cocotbext-axi (pip install codesign[verify])")
pytestmark = pytest.mark.skipif(shutil.which("iverilog") is None, reason="Icarus Verilog (iverilog) is not on PATH")

QUICK = {
    "csb": (CsbSpec(block_rows=3, block_cols=8, batch=2, acc_bits=16), CsbStimulusOptions(min_macs_per_op=100)),
    "tt1": (Tt1Spec(lanes=4, rows=3, a_bits=16, b_bits=16, acc_bits=16, max_j=5, max_k=9, max_l=7),
            TtStimulusOptions(min_macs=2000)),
    "tt2": (Tt2Spec(lanes=4, rows=3, a_bits=16, b_bits=16, acc_bits=16, max_j=5, max_k=9, max_l=7),
            TtStimulusOptions(min_macs=2000)),
    "tt3": (Tt3Spec(lanes=4, a_bits=4, b_bits=8, max_j=9), TtStimulusOptions(min_macs=2000)),
    "fpmac_array": (FpmacArraySpec(exp_bits=4, max_fb=3, rows=1, cols=1, max_m=6, max_n=5, max_k=9),
                    FpmacArrayStimulusOptions(min_macs=1000)),
}
# wider streams: the shell's data buses at the PE's stream word (64 or 128 bits)
WIDE = {
    "tt1_s64": (Tt1Spec(lanes=4, rows=3, a_bits=16, b_bits=16, acc_bits=16, max_j=5, max_k=9, max_l=7,
                        stream_bits=64), TtStimulusOptions(min_macs=2000)),
    "tt2_s128": (Tt2Spec(lanes=4, rows=3, a_bits=16, b_bits=16, acc_bits=16, max_j=5, max_k=9, max_l=7,
                         stream_bits=128), TtStimulusOptions(min_macs=2000)),
    "tt3_s128": (Tt3Spec(lanes=4, a_bits=4, b_bits=8, max_j=9, stream_bits=128), TtStimulusOptions(min_macs=2000)),
}
LONG = {
    "csb_conv": (CsbSpec(block_rows=4, block_cols=4, kernel=3, out_h=4, out_w=4, batch=4, parallel=2),
                 CsbStimulusOptions(min_macs_per_op=3000)),
    "tt1_paper": (Tt1Spec(max_j=3, max_k=33, max_l=9), TtStimulusOptions(min_macs=20_000)),
    "tt2_wide": (Tt2Spec(lanes=8, rows=8, a_bits=8, b_bits=8, acc_bits=20, max_j=9, max_k=24, max_l=17),
                 TtStimulusOptions(min_macs=20_000)),
    "tt3_paper": (Tt3Spec(), TtStimulusOptions(min_macs=20_000)),
    "fpmac_array_4x4": (FpmacArraySpec(max_m=12, max_n=10, max_k=12), FpmacArrayStimulusOptions(min_macs=20_000)),
}


def _vectors(name, spec, options, directory):
    pe = get_pe(name)
    stimulus = pe.build_stimulus(spec, options)
    return pe, stimulus, pe.write_vectors(spec, stimulus, directory / pe.vector_file)


def _check(name, spec, options, tmp_path, **kwargs):
    pe, stimulus, vectors = _vectors(name, spec, options, tmp_path)
    result = accel.run_accel_rtl(pe, spec, vectors, tmp_path / "rtl", **kwargs)
    words = accel.buffer_words(stimulus)["out"]
    assert (result.transactions, result.mismatches) == (len(stimulus), 0), result.first_mismatches
    short = words - 1 if accel.stream_word_bits(pe, spec) > 32 else 0  # a wide bus: the file again, n_out - 1
    assert result.words == 2 * words + short  # the whole file, then its two halves
    assert all(run["cycles"] > 0 and run["isr_done"] for run in result.runs)
    print(f"\n[accel rtl] {name}: {result.transactions} transactions, {result.words} words checked, "
          f"{result.bursts} bursts, cycles per run {[run['cycles'] for run in result.runs]}, "
          f"0 mismatches, {result.seconds:.1f} s")
    return result


@pytest.mark.parametrize("name", [name if name == "tt1" else pytest.param(name, marks=pytest.mark.slow)
                                  for name in QUICK])  # tt1 stands for the shells in make test (5 to 40 s each)
def test_rtl_shell_equals_golden(tmp_path, name):
    spec, options = QUICK[name]
    _check(name, spec, options, tmp_path, seed=3, pause=0.3)


@pytest.mark.slow  # 6 to 7 s each; make test runs wide streams at RTL in tests/step/test_list_cycles.py
@pytest.mark.parametrize("name", WIDE)
def test_rtl_shell_at_the_stream_width_equals_golden(tmp_path, name):
    """64- and 128-bit buses: every burst's AxSIZE is the beat's, addresses beat-aligned, and a last beat that
    n_out cuts short writes only its words (the guard word after it stays)."""
    spec, options = WIDE[name]
    result = _check(name.split("_")[0], spec, options, tmp_path, seed=4, pause=0.3)
    assert result.runs[-1]["run"] == "all, n_out one word short" and result.runs[-1]["guard_overwritten"] == 0


def test_rtl_shell_counts_a_wrong_golden_word(tmp_path):
    pe, stimulus, _ = _vectors("tt3", *QUICK["tt3"], tmp_path)
    bad = [(words_in, words_out.copy()) for words_in, words_out in stimulus]
    bad[0][1][1] ^= np.uint64(0x100)
    vectors = pe.write_vectors(QUICK["tt3"][0], bad, tmp_path / "bad.txt")
    result = accel.run_accel_rtl(pe, QUICK["tt3"][0], vectors, tmp_path / "rtl", pause=0.0)
    assert result.mismatches == 2  # the word, in the full run and in the first half
    assert "'word': 1" in result.first_mismatches[0]


@pytest.mark.long
@pytest.mark.parametrize("name", list(LONG))
def test_rtl_shell_equals_golden_long(tmp_path, name):
    spec, options = LONG[name]
    for seed, pause in ((5, 0.0), (6, 0.5)):
        _check(name.rsplit("_", 1)[0], spec, options, tmp_path / f"s{seed}", seed=seed, pause=pause)


def test_rtl_wrapper_takes_offsets_and_pe_parameters_from_python(tmp_path):
    pe, spec = get_pe("tt2"), QUICK["tt2"][0]
    sources = accel.render_accel_rtl(pe, spec, tmp_path)
    text = (tmp_path / "accel_top.v").read_text()
    for name, offset in accel.register_map().items():
        assert f".OFF_{name.upper()}({offset})" in text
    for name, value in pe.rtl_parameters(spec).items():
        assert f".{name}({value})" in text
    assert f".MAX_BURST({accel.MAX_BURST})" in text
    assert [path.name for path in sources[:6]] == ["accel_ctrl.v", "accel_mm2s.v", "accel_round.v", "accel_s2mm.v",
                                                   "accel_seq.v", "accel_top.v"]
    with pytest.raises(ValueError, match="stream PE"):
        accel.render_accel_rtl(get_pe("fpmac"), get_pe("fpmac").spec(), tmp_path / "x")
