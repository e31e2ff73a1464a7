"""codesign.hw.yosys: script generation, cell categories, depth on hand-made netlists, real Yosys runs."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from codesign.hw import yosys as ys
from codesign.hw.constants_gen import verilog_include_dir

needs_yosys = pytest.mark.skipif(shutil.which("yosys") is None, reason="yosys not on PATH")

MAC_V = """
module mac #(parameter W = 8) (
    input clk, input rst,
    input [W-1:0] a, b, input [2*W-1:0] c,
    output reg [2*W-1:0] y
);
    always @(posedge clk)
        if (rst) y <= 0; else y <= a * b + c;
endmodule
"""


@pytest.fixture(scope="module")
def mac_source(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("rtl") / "mac.v"
    path.write_text(MAC_V)
    return path


# ---------------------------------------------------------------- no Yosys needed


def test_job_validation_fails_before_running(mac_source, tmp_path):
    with pytest.raises(ValueError, match="family"):
        ys.SynthJob(sources=(mac_source,), top="mac", family="xc6s")
    with pytest.raises(ValueError, match="identifier"):
        ys.SynthJob(sources=(mac_source,), top="mac; shell", family="xc7")
    with pytest.raises(TypeError, match="W must be an int"):
        ys.SynthJob(sources=(mac_source,), top="mac", family="xc7", params={"W": True})
    with pytest.raises(ValueError, match="parameter name"):
        ys.SynthJob(sources=(mac_source,), top="mac", family="xc7", params={"W X": 3})
    with pytest.raises(FileNotFoundError):
        ys.SynthJob(sources=(tmp_path / "absent.v",), top="mac", family="xc7")
    spaced = tmp_path / "with space"
    spaced.mkdir()
    (spaced / "m.v").write_text(MAC_V)
    with pytest.raises(ValueError, match="whitespace"):
        ys.SynthJob(sources=(spaced / "m.v",), top="mac", family="xc7")
    with pytest.raises(ValueError, match="at least one"):
        ys.SynthJob(sources=(), top="mac", family="xc7")


def test_script_sets_parameters_family_and_reports(mac_source):
    job = ys.SynthJob(sources=(mac_source,), top="mac", family="xcup", params={"W": 5}, nodsp=True)
    script = job.script()
    # the source's folder and the shared include folder (codesign_constants.vh) are on the include path
    assert f"read_verilog -I{mac_source.parent} -I{verilog_include_dir()} {mac_source}" in script
    assert "chparam -set W 5 mac" in script
    assert "synth_xilinx -family xcup -top mac -flatten -noiopad -noclkbuf -nodsp" in script
    assert "stat -json" in script and "ltp -noff" in script
    assert job.slug == "mac-xcup-W5-nodsp"


def test_categorize_groups_raw_cells():
    raw = {"LUT1": 1, "LUT2": 2, "LUT6": 4, "INV": 1, "FDRE": 5, "FDCE": 1, "DSP48E2": 2, "CARRY4": 3,
           "CARRY8": 1, "MUXF7": 2, "MUXF8": 1, "RAMB18E1": 3, "RAMB36E1": 1, "RAM32M": 2, "SRLC32E": 1,
           "GND": 1}
    counts = ys.categorize(raw)
    assert counts.lut == 8 and counts.ff == 6 and counts.dsp == 2 and counts.carry == 4
    assert counts.muxf == 3 and counts.lutram == 8 and counts.srl == 1 and counts.other == 1
    assert counts.bram_36k == 2.5
    assert counts.lut_sites_min == 4 + 2  # LUT6s + ceil(4 smaller / 2)
    assert counts.lut_sites == 8 + 8 + 1
    budget = {"lut": 1700, "ff": 600, "dsp": 20, "bram_36k": 10}
    assert counts.utilisation_percent(budget) == pytest.approx({"lut": 1.0, "ff": 1.0, "dsp": 10.0, "bram_36k": 25.0})
    with pytest.raises(ys.YosysError):
        ys.categorize({"LUT2": -1})


def _lut(inputs: list, output: int) -> dict:
    conns = {f"I{i}": [bit] for i, bit in enumerate(inputs)} | {"O": [output]}
    return {"type": f"LUT{len(inputs)}", "connections": conns,
            "port_directions": {port: "output" if port == "O" else "input" for port in conns}}


def test_depth_uses_per_bit_carry_arcs():
    # CO[0] -> LUT -> S[3] of the same CARRY4: a loop if a CARRY4 were all-to-all (as in ltp), not in hardware.
    carry = {"type": "CARRY4", "connections": {"CI": ["0"], "CYINIT": ["0"], "DI": [2, 3, 4, 5], "S": [6, 7, 8, 9],
                                               "O": [10, 11, 12, 13], "CO": [14, 15, 16, 17]}}
    netlist = {"modules": {"top": {"cells": {"c": carry, "l": _lut([14], 9)}}}}
    depth = ys.netlist_depth(netlist, "top")
    assert depth.loops == 0
    assert depth.cells == 3 and depth.by_category == {"carry": 2, "lut": 1}


def test_depth_cuts_at_flip_flops_and_counts_true_loops():
    ff = {"type": "FDRE", "connections": {"C": [1], "CE": ["1"], "R": ["0"], "D": [31], "Q": [30]}}
    chain = {"l1": _lut([30], 32), "l2": _lut([32, 40], 33), "l3": _lut([33], 31), "ff": ff}
    depth = ys.netlist_depth({"modules": {"top": {"cells": chain}}}, "top")
    assert (depth.cells, depth.loops, depth.lut_levels) == (3, 0, 3)
    loop = {"a": _lut([20], 21), "b": _lut([21], 20)}
    assert ys.netlist_depth({"modules": {"top": {"cells": loop}}}, "top").loops == 2


def test_parse_ltp_reads_length_and_loops():
    text = ("Warning: Detected loop at x [1] in top\n\nLongest topological path in top (length=9):\n"
            "    0: \\b [11]\n    1: y [0] (via $mul$5)\n")
    assert ys.parse_ltp(text) == (9, 1)
    assert ys.parse_ltp("6. Executing LTP pass\n") == (0, 0)


def test_missing_yosys_is_a_clear_error(mac_source, tmp_path):
    job = ys.SynthJob(sources=(mac_source,), top="mac", family="xc7")
    with pytest.raises(ys.YosysNotFoundError, match="not found on PATH"):
        ys.synthesize(job, tmp_path, executable="no-such-yosys-binary")
    assert not (tmp_path / "synth.ys").exists()


def test_write_text_atomic_replaces(tmp_path):
    target = tmp_path / "sub" / "r.json"
    ys.write_text_atomic(target, "one")
    ys.write_text_atomic(target, "two")
    assert target.read_text() == "two"
    assert [p.name for p in target.parent.iterdir()] == ["r.json"]


# ---------------------------------------------------------------- real Yosys


@needs_yosys
def test_yosys_failure_carries_log_tail(tmp_path):
    bad = tmp_path / "bad.v"
    bad.write_text("module bad(input a, output b);\n  assign b = a +;\nendmodule\n")
    job = ys.SynthJob(sources=(bad,), top="bad", family="xc7")
    with pytest.raises(ys.YosysError, match=r"(?s)exit 1.*bad\.v"):
        ys.synthesize(job, tmp_path / "work")


@pytest.fixture(scope="module")
def mac_results(mac_source, tmp_path_factory) -> dict[str, ys.SynthResult]:
    # Each run costs ~3 s (mostly Yosys loading its Xilinx cell library), so only four; the narrow-vs-wide
    # DSP check for xcup is in tests/pe/test_fpmac_estimate.py.
    jobs = [ys.SynthJob(sources=(mac_source,), top="mac", family=family, params={"W": width})
            for family, width in (("xc7", 3), ("xc7", 10), ("xcup", 10))]
    jobs.append(ys.SynthJob(sources=(mac_source,), top="mac", family="xc7", params={"W": 10}, nodsp=True))
    results = ys.synthesize_many(jobs, tmp_path_factory.mktemp("work"), workers=2, progress=False)
    return {result.job.slug: result for result in results}


@needs_yosys
@pytest.mark.slow  # the mac_results fixture synthesises on both families (about 40 s)
def test_wide_multiplier_uses_a_dsp_narrow_one_does_not(mac_results):
    narrow, wide = mac_results["mac-xc7-W3"], mac_results["mac-xc7-W10"]
    assert narrow.counts.dsp == 0 and narrow.counts.lut > 0
    assert wide.counts.dsp == wide.raw_cells.get("DSP48E1") == 1


@needs_yosys
@pytest.mark.slow  # the mac_results fixture synthesises on both families (about 40 s)
def test_each_family_maps_to_its_own_dsp_and_cells_are_categorised(mac_results):
    assert "DSP48E2" in mac_results["mac-xcup-W10"].raw_cells
    assert "DSP48E2" not in mac_results["mac-xc7-W10"].raw_cells
    for result in mac_results.values():
        assert all(isinstance(n, int) and n > 0 for n in result.raw_cells.values())
        assert result.counts == ys.categorize(result.raw_cells)
        assert result.counts.other == 0, result.raw_cells
        assert result.yosys_version.startswith("Yosys ")
        assert result.wall_s > 0


@needs_yosys
@pytest.mark.slow  # the mac_results fixture synthesises on both families (about 40 s)
def test_registers_and_depth_are_sane(mac_results):
    for result in mac_results.values():
        assert result.counts.ff == 2 * dict(result.job.params)["W"] or result.counts.dsp > 0  # y lives in the DSP P reg
        depth = result.depth
        assert depth.loops == 0 and depth.ltp_loops == 0
        assert 0 < depth.cells <= depth.ltp_cells
        assert sum(depth.by_category.values()) == depth.cells


@needs_yosys
@pytest.mark.slow  # the mac_results fixture synthesises on both families (about 40 s)
def test_nodsp_moves_the_multiplier_into_luts(mac_results):
    with_dsp, without = mac_results["mac-xc7-W10"], mac_results["mac-xc7-W10-nodsp"]
    assert without.counts.dsp == 0 and with_dsp.counts.dsp >= 1
    assert without.counts.lut > 10 * max(with_dsp.counts.lut, 1)
    assert without.depth.cells > with_dsp.depth.cells
