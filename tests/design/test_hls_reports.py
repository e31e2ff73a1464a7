"""Vitis HLS's csynth.xml read back into the fit, beside Yosys.

The fixture is hand-written (tests/design/fixtures/README.md): the documented structure, invented numbers.
No vitis_hls runs here.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from codesign.design.fit import FitReport
from codesign.design.hls_reports import REPORT_DIR, HlsReportError, parse_csynth, read_hls_fit, refresh_fit

FIXTURE = Path(__file__).parent / "fixtures" / "csynth_handwritten.xml"


def test_a_csynth_report_is_parsed():
    synthesis = parse_csynth(FIXTURE)
    assert (synthesis.top, synthesis.part) == ("tt1_0_accel", "xc7z020-clg484-1")
    assert (synthesis.target_clock_ns, synthesis.estimated_clock_ns, synthesis.meets_clock) == (10.0, 7.3, True)
    assert synthesis.resources == {"lut": 3300, "ff": 2100, "dsp": 4, "bram_18k": 6, "uram": 0}
    assert synthesis.to_dict()["bram_36k"] == 3


def test_older_reports_name_the_dsp_dsp48e_and_a_missing_field_is_named(tmp_path):
    older = tmp_path / "csynth.xml"
    older.write_text(FIXTURE.read_text().replace("<DSP>4</DSP>", "<DSP48E>4</DSP48E>"))
    assert parse_csynth(older).resources["dsp"] == 4
    broken = tmp_path / "broken.xml"
    broken.write_text(FIXTURE.read_text().replace("<EstimatedClockPeriod>7.300</EstimatedClockPeriod>", ""))
    with pytest.raises(HlsReportError, match="broken.xml: no ./PerformanceEstimates/SummaryOfTimingAnalysis/"):
        parse_csynth(broken)


def fit_report():
    zero = {"lut": 1.0, "ff": 1.0, "dsp": 0.0, "bram_36k": 0.0}
    return FitReport(design="d", board="zedboard", family="xc7",
                     budget={"lut": 53200, "ff": 106400, "dsp": 220, "bram_36k": 140},
                     per_ip={"tt1_0": {"pe": zero, "shell": zero, "total": zero}}, total=zero, limit_percent=90.0)


def test_where_vitis_hls_ran_the_fit_shows_its_estimate_beside_yosys(tmp_path):
    manifest = {"ips": [{"name": "tt1_0", "top": "tt1_0_accel", "hls_project": "hls/tt1_0"},
                        {"name": "csb_0", "top": "csb_0_accel", "hls_project": "hls/csb_0"}]}
    fit = fit_report()
    assert read_hls_fit(tmp_path, manifest) == {} and refresh_fit(tmp_path, fit, manifest) is False
    assert not (tmp_path / "fit.json").exists()  # no report: nothing said about HLS
    report_dir = tmp_path / "hls" / "tt1_0" / REPORT_DIR
    report_dir.mkdir(parents=True)
    shutil.copy(FIXTURE, report_dir / "csynth.xml")
    assert refresh_fit(tmp_path, fit, manifest) is True
    written = json.loads((tmp_path / "fit.json").read_text())
    assert set(written["hls"]) == {"tt1_0"} and written["hls"]["tt1_0"]["resources"]["lut"] == 3300
    assert written["total"] == fit.total and written["fits"] is True  # the verdict stays the Yosys one
    assert "| tt1_0 | 3300 | 2100 | 4 | 3 | 7.3 (10) |" in (tmp_path / "fit.md").read_text()
    manifest["ips"][0]["top"] = "other_accel"
    with pytest.raises(HlsReportError, match="reports top 'tt1_0_accel', IP tt1_0 is 'other_accel'"):
        read_hls_fit(tmp_path, manifest)
