"""Fit before build: the arithmetic of the verdict, the refusal's numbers, and the Yosys cache."""

from __future__ import annotations

import json

import pytest

from codesign.design.fit import FitReport, pe_cost, plot_fit, write_fit
from codesign.pe import get_pe

BUDGET = {"lut": 53200, "ff": 106400, "dsp": 220, "bram_36k": 140}


def _report(pe_lut: float, *, dsp: float = 10, limit: float = 90.0) -> FitReport:
    pe = {"lut": pe_lut, "ff": 1000.0, "dsp": dsp, "bram_36k": 2.0}
    shell = {"lut": 500.0, "ff": 700.0, "dsp": 0.0, "bram_36k": 0.0}
    parts = {"pe": pe, "shell": shell, "total": {k: pe[k] + shell[k] for k in pe}}
    return FitReport(design="d", board="zedboard", family="xc7", budget=BUDGET,
                     per_ip={"a_0": parts, "b_0": parts}, total={k: 2 * parts["total"][k] for k in pe},
                     limit_percent=limit)


def test_a_small_design_fits_and_reports_percentages():
    report = _report(1500.0)
    assert report.fits and report.over == []
    assert report.percent["lut"] == pytest.approx(100 * 4000 / 53200)
    assert report.to_dict()["fits"] is True
    assert "Verdict: fits." in report.table()


def test_a_design_over_the_limit_is_refused_with_the_numbers():
    report = _report(24000.0, dsp=120)  # 2 x 24,500 LUT = 92.1 % ; 2 x 120 DSP = 109 %
    assert not report.fits and report.over == ["lut", "dsp"]
    refusal = report.refusal()
    assert "LUT 49000 of 53200 (92.1 %)" in refusal and "DSP 240 of 220 (109.1 %)" in refusal
    assert _report(24000.0, dsp=10, limit=95.0).fits  # the limit is the user's


def test_fit_files_are_written(tmp_path):
    paths = write_fit(_report(1500.0), tmp_path)
    assert [p.name for p in paths] == ["fit.json", "fit.md", "fit.png"]
    assert json.loads((tmp_path / "fit.json").read_text())["total"]["lut"] == 4000.0
    assert plot_fit(_report(30000.0), tmp_path / "over.png").read_bytes()[:4] == b"\x89PNG"


@pytest.mark.slow
def test_pe_cost_runs_yosys_once_and_then_reads_the_cache(tmp_path):
    pe = get_pe("fpmac")
    spec = pe.spec(exp_bits=4, max_fb=3)
    first = pe_cost("fpmac", spec, "xc7", tmp_path)
    assert first["lut"] > 0 and set(first) == {"lut", "ff", "dsp", "bram_36k"}
    (entry,) = list(tmp_path.iterdir())
    stamp = (entry / "fpmac_cost.json").stat().st_mtime_ns
    assert pe_cost("fpmac", spec, "xc7", tmp_path) == first
    assert (entry / "fpmac_cost.json").stat().st_mtime_ns == stamp
    pe_cost("fpmac", pe.spec(exp_bits=4, max_fb=4), "xc7", tmp_path)
    assert len(list(tmp_path.iterdir())) == 2  # another spec is another entry
