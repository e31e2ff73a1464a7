"""The shell's data movers on their own at 64- and 128-bit buses (tests/rtl/accel_mover_bench.py): the parts of a
last beat past n, zero on the way in and left unwritten on the way out."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

pytest.importorskip("cocotb_tools.runner", reason="the RTL tests need cocotb 2.x (pip install codesign[verify])")
pytest.importorskip("cocotbext.axi", reason="the mover bench needs cocotbext-axi (pip install codesign[verify])")
from codesign.shell.ip import AXI_ADDR_BITS, MAX_BURST  # noqa: E402
from codesign.hw.rtlsim import run_cocotb  # noqa: E402

RTL_DIR = Path(__file__).resolve().parents[2] / "rtl" / "accel"
BENCH_DIR = Path(__file__).resolve().parent
pytestmark = pytest.mark.skipif(shutil.which("iverilog") is None, reason="Icarus Verilog (iverilog) is not on PATH")


@pytest.mark.parametrize("data_bits", [64, 128])
@pytest.mark.parametrize("top", ["accel_mm2s", "accel_s2mm"])
def test_a_last_beat_carries_only_the_words_of_n(tmp_path, top, data_bits):
    run_cocotb(sources=[RTL_DIR / f"{top}.v"], toplevel=top, test_module="accel_mover_bench",
               build_dir=tmp_path / "build", python_paths=[BENCH_DIR],
               parameters={"ADDR_BITS": AXI_ADDR_BITS, "MAX_BURST": MAX_BURST, "DATA_BITS": data_bits},
               extra_env={"MOVER_TOP": top, "MOVER_DATA_BITS": str(data_bits), "MOVER_SEED": str(data_bits)})
