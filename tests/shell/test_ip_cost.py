"""The accelerator shell's own cost: codesign.shell.ip.shell_cost is what Yosys measures today."""

from __future__ import annotations

import shutil

import pytest

from codesign.shell import ip as accel

needs_yosys = pytest.mark.skipif(shutil.which("yosys") is None, reason="yosys is not on PATH")


def test_shell_cost_is_known_per_family():
    cost = accel.shell_cost("xc7")
    assert cost["lut"] > 0 and cost["ff"] > 0 and cost["dsp"] == 0 and cost["bram_36k"] == 6  # the sums buffer
    cost["lut"] = -1  # a copy: the table itself cannot be changed through it
    assert accel.shell_cost("xc7")["lut"] > 0
    with pytest.raises(ValueError, match="no shell cost"):
        accel.shell_cost("xc6")
    with pytest.raises(ValueError, match="no shell cost for 256-bit"):
        accel.shell_cost("xc7", 256)
    wide = accel.shell_cost("xc7", 128)
    assert wide["lutram"] > cost["lutram"] and wide["ff"] > accel.shell_cost("xc7")["ff"]  # wider FIFO words
    for family in accel.SHELL_COST:
        for bits in (32, 64, 128):  # without the accumulation buffer: no block RAM, a 32-bit rounding stage
            lean, full = accel.shell_cost(family, bits, held_sums=False), accel.shell_cost(family, bits)
            assert lean["bram_36k"] == 0 and full["bram_36k"] == 6 and lean["ff"] < full["ff"]
            # (not the LUT cells: ABC maps each netlist anew, and they differ by less than its noise at xc7, 128 bits)


def test_shell_jobs_use_the_wrapper_parameters():
    jobs = {job.top: dict(job.params) for job in accel.shell_synth_jobs("xc7")}
    assert set(jobs) == set(accel.SHELL_MODULES)
    assert jobs["accel_ctrl"]["OFF_N_TRANSACTIONS"] == accel.register_map()["n_transactions"]
    assert jobs["accel_s2mm"] == {"ADDR_BITS": accel.AXI_ADDR_BITS, "MAX_BURST": accel.MAX_BURST, "DATA_BITS": 32}
    wide = {job.top: dict(job.params) for job in accel.shell_synth_jobs("xc7", 64)}
    assert wide["accel_mm2s"]["DATA_BITS"] == wide["accel_s2mm"]["DATA_BITS"] == 64
    assert jobs["accel_seq"]["HELD"] == 1
    assert {job.top: dict(job.params) for job in accel.shell_synth_jobs("xc7", held_sums=False)}["accel_seq"]["HELD"] == 0


@needs_yosys
@pytest.mark.long
@pytest.mark.parametrize("held_sums", [True, False])
@pytest.mark.parametrize("data_bits", [32, 64, 128])
@pytest.mark.parametrize("family", ["xc7", "xcup"])
def test_recorded_shell_cost_matches_yosys(tmp_path, family, data_bits, held_sums):
    measured = accel.measure_shell_cost(family, tmp_path, data_bits, held_sums=held_sums)
    print(f"\n[shell cost] {family} {data_bits}-bit, held sums {held_sums}: {measured['total']} ({measured['yosys']})")
    assert measured["yosys"].startswith(accel.SHELL_COST_YOSYS)
    assert measured["total"] == accel.shell_cost(family, data_bits, held_sums=held_sums)
