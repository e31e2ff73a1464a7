"""codesign.pe.fpmac.estimate: argument checks, the cost-report loader, and one real (small) sweep."""

from __future__ import annotations

import copy
import json
import shutil

import pytest

from codesign.hw import yosys as ys
from codesign.pe.fpmac import estimate as est
from codesign.resources import data_dir


def _entry(family: str, max_fb: int, luts: int) -> dict:
    raw = {"LUT2": luts, "LUT6": 2, "FDRE": 10 + max_fb, "DSP48E1" if family == "xc7" else "DSP48E2": 1}
    counts = ys.categorize(raw)
    board = est.board_for_family(family)
    return {
        "family": family, "board": board.name, "part": board.part, "exp_bits": 8, "max_fb": max_fb,
        "rounding": "nearest_even", "counts": counts.to_dict(), "raw_cells": raw,
        "logic_depth": {"cells": 5, "by_category": {"lut": 3, "carry": 2}, "loops": 0, "ltp_cells": 5,
                        "ltp_loops": 0},
        "wall_s": 1.5, "budget": dict(board.resources),
        "utilisation_percent": counts.utilisation_percent(board.resources),
    }


@pytest.fixture
def report() -> dict:
    return {
        "schema": est.SCHEMA, "version": est.SCHEMA_VERSION,
        "tool": {"name": "yosys", "version": "Yosys 0.23", "flow": "synth_xilinx", "workers": 1},
        "top": "fpmac", "sources": [{"name": "fpmac.v", "sha256": "0" * 64}],
        "depth_definition": est.DEPTH_DEFINITION,
        "entries": [_entry("xc7", 4, 10), _entry("xc7", 23, 50), _entry("xcup", 4, 12)],
    }


@pytest.fixture
def no_yosys(monkeypatch):
    """Fail the test if anything would start Yosys."""

    def forbidden(*args, **kwargs):
        raise AssertionError("yosys was started before the arguments were checked")

    monkeypatch.setattr(ys, "synthesize_many", forbidden)
    monkeypatch.setattr(ys, "synthesize", forbidden)


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        ({"families": ("xc7", "virtex9")}, ValueError, "unknown family 'virtex9'"),
        ({"families": "xc7"}, ValueError, "sequence of family names"),
        ({"families": ()}, ValueError, "non-empty"),
        ({"max_fb_values": (4, 24)}, ValueError, "max_fb=24 is outside 1..23"),
        ({"max_fb_values": (0,)}, ValueError, "max_fb=0 is outside 1..23"),
        ({"max_fb_values": (4, 4)}, ValueError, "duplicates"),
        ({"max_fb_values": ()}, ValueError, "empty"),
        ({"max_fb_values": (4.0,)}, TypeError, "ints"),
        ({"exp_bits": 9}, ValueError, "exp_bits=9"),
        ({"rounding": "stochastic"}, ValueError, "rounding"),
        ({"workers": 0}, ValueError, "workers"),
    ],
)
def test_bad_arguments_fail_before_yosys_runs(no_yosys, tmp_path, kwargs, error, match):
    with pytest.raises(error, match=match):
        est.estimate_fpmac(out_dir=tmp_path / "out", **kwargs)
    assert not (tmp_path / "out").exists()


def test_missing_rtl_fails_before_yosys_runs(no_yosys, tmp_path):
    with pytest.raises(FileNotFoundError, match="no FP-MAC Verilog"):
        est.estimate_fpmac(out_dir=tmp_path / "out", rtl_dir=tmp_path)


def test_loader_round_trips(report, tmp_path):
    path = tmp_path / "fpmac_cost.json"
    path.write_text(json.dumps(report))
    cost = est.load_fpmac_cost(path)
    assert [e.max_fb for e in cost.series("xc7")] == [4, 23]
    entry = cost.entry("xc7", 23)
    assert entry.counts.lut == 52 and entry.counts.dsp == 1 and entry.depth.cells == 5
    assert entry.utilisation_percent["lut"] == pytest.approx(100 * 52 / 53200)
    with pytest.raises(KeyError, match="MAX_FB available: \\[4\\]"):
        cost.entry("xcup", 23)
    markdown = est.render_markdown(report)
    assert markdown.count("\n| xc7 |") == 2 and "| xcup | ultra96v2 | 8 | 4 |" in markdown


@pytest.mark.parametrize(
    "mutate, match",
    [
        (lambda r: r.update(version=2), "version 2"),
        (lambda r: r.update(schema="other"), "not a codesign-fpmac-cost"),
        (lambda r: r["entries"][0].pop("logic_depth"), "missing key 'logic_depth'"),
        (lambda r: r["entries"][0]["counts"].update(lut=999), "do not match its raw_cells"),
        (lambda r: r["entries"][0]["raw_cells"].update(LUT2=-1), "non-negative int"),
        (lambda r: r["entries"][1].update(max_fb=4), "duplicate"),
        (lambda r: r["entries"][0].update(max_fb=30), "max_fb=30"),
        (lambda r: r["entries"][0].update(family="xc6s"), "unknown family"),
        (lambda r: r["entries"][0]["logic_depth"].update(cells=7), "add up"),
        (lambda r: r["entries"][0].update(wall_s=True), "got a bool"),
        (lambda r: r.update(entries=[]), "no entries"),
    ],
)
def test_loader_rejects_broken_reports(report, mutate, match):
    broken = copy.deepcopy(report)
    mutate(broken)
    with pytest.raises(est.FpmacCostError, match=match):
        est.load_fpmac_cost_dict(broken)


def test_loader_reports_missing_and_invalid_files(tmp_path):
    with pytest.raises(est.FpmacCostError, match="does not exist"):
        est.load_fpmac_cost(tmp_path / "absent.json")
    (tmp_path / "bad.json").write_text("{")
    with pytest.raises(est.FpmacCostError, match="not valid JSON"):
        est.load_fpmac_cost(tmp_path / "bad.json")


def _fpmac_rtl_present() -> bool:
    try:
        return (data_dir("rtl") / "fpmac" / "fpmac.v").is_file()
    except FileNotFoundError:
        return False


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("yosys") is None, reason="yosys not on PATH")
@pytest.mark.skipif(not _fpmac_rtl_present(), reason="rtl/fpmac/fpmac.v not written yet")
def test_small_sweep_writes_consistent_reports(tmp_path):
    report = est.estimate_fpmac(families=("xc7", "xcup"), max_fb_values=(6, 2), exp_bits=5, out_dir=tmp_path,
                                workers=2, progress=False)
    cost = est.load_fpmac_cost(tmp_path / est.JSON_NAME)
    assert cost.sources_match()
    assert json.loads((tmp_path / est.JSON_NAME).read_text()) == report
    assert (tmp_path / est.MARKDOWN_NAME).read_text() == est.render_markdown(report)
    assert (tmp_path / est.PLOT_NAME).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "-abc9" in cost.flow and cost.tool_version.startswith("Yosys ")
    for family in ("xc7", "xcup"):
        small, large = cost.series(family)
        assert (small.max_fb, large.max_fb) == (2, 6)
        assert large.counts.lut > small.counts.lut > 0
        assert large.counts.ff > small.counts.ff > 0
        assert small.counts.dsp == 0 and large.counts.dsp == 1  # a 3x3 multiply stays in LUTs, 7x7 does not
        assert large.depth.cells >= small.depth.cells > 0
        for entry in (small, large):
            assert entry.depth.loops == 0 and entry.depth.cells <= entry.depth.ltp_cells
            assert entry.utilisation_percent["lut"] == pytest.approx(
                100 * entry.counts.lut_sites / entry.budget["lut"], abs=1e-3)
