"""The CSB PE's memories on their own: csb_ram (read-first, lane enables, forwarding) and csb_window (banked byte
windows for every lane count 1..16), checked cycle by cycle under cocotb + Icarus against Python models."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

pytest.importorskip("cocotb_tools.runner", reason="the RTL tests need cocotb 2.x (pip install codesign[verify])")
from codesign.hw.rtlsim import run_cocotb  # noqa: E402

RTL_DIR = Path(__file__).resolve().parents[2] / "rtl" / "csb"
BENCH_DIR = Path(__file__).resolve().parent
pytestmark = pytest.mark.skipif(shutil.which("iverilog") is None, reason="Icarus Verilog (iverilog) is not on PATH")


def _run(tmp_path: Path, top: str, sources: list[str], parameters: dict[str, int], seed: int) -> None:
    run_cocotb(sources=[RTL_DIR / name for name in sources], toplevel=top, test_module="csb_memory_bench",
               build_dir=tmp_path / "build", parameters=parameters, python_paths=[BENCH_DIR],
               extra_env={"MEMORY_TOP": top, "MEMORY_SEED": str(seed)})


@pytest.mark.parametrize(("lanes", "lane_bits", "depth", "bypass"),
                         [(1, 32, 3, 0), (1, 24, 5, 1), (4, 20, 4, 1), (6, 16, 2, 1)])
def test_ram(tmp_path, lanes, lane_bits, depth, bypass):
    _run(tmp_path, "csb_ram", ["csb_ram.v"],
         {"LANES": lanes, "LANE_BITS": lane_bits, "DEPTH": depth, "AW": 3, "BYPASS": bypass}, seed=lanes * depth)


@pytest.mark.parametrize("lanes", range(1, 17))
def test_window(tmp_path, lanes):
    """Lane counts that divide a word, span two, three, four or five words (bank counts 1, 2, 4, 8)."""
    _run(tmp_path, "csb_window", ["csb_window.v", "csb_ram.v"], {"LANES": lanes, "WORDS": 3 * lanes + 1, "AW": 24},
         seed=lanes)
