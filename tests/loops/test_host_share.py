"""The host's share of a step: the two-schedule fit, measuring a loop from design.json's entry, and host reports."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from codesign.design import load_design
from codesign.design.loops import loop_entry
from codesign.loops.host_share import (HostReportError, loop_digest, measure_loop_host, read_host_report, write_host_report)
from codesign.step.host import HostModel

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
MACHINE = {"board": "", "machine": "x86_64", "processor": "x86_64", "python": "3.11", "numpy": "1.26"}


@pytest.fixture(scope="module")
def tt_loop():
    return loop_entry(load_design(EXAMPLES / "digits_tt.toml"))


def test_the_fit_goes_through_both_schedules():
    # 10 ms at 100 calls, 6 ms at 20 calls: 4 ms over 80 calls = 50 us a call, and 6 - 1 = 5 ms fixed
    host = HostModel.fit((0.010, 100), (0.006, 20), source="here")
    assert host.per_call_s == pytest.approx(50e-6) and host.fixed_s == pytest.approx(0.005)
    assert host.seconds(100) == pytest.approx(0.010) and host.seconds(20) == pytest.approx(0.006)
    assert HostModel.fit((0.004, 30), (0.003, 30), source="here") == HostModel(fixed_s=0.003, per_call_s=0.0,
                                                                              source="here")
    # more calls measured faster (noise): no negative per-call time
    assert HostModel.fit((0.002, 100), (0.003, 20), source="here").per_call_s == 0.0


def test_a_report_reads_back_for_its_loop_only(tmp_path, tt_loop):
    host = HostModel(fixed_s=0.0125, per_call_s=3.5e-6, source="measured on the Ultra96V2 board (aarch64)")
    path = write_host_report(tmp_path / "host.json", tt_loop, host, MACHINE)
    assert read_host_report(path, tt_loop) == host
    saved = json.loads(path.read_text())
    assert saved["loop_digest"] == loop_digest(tt_loop) and saved["machine"] == MACHINE and saved["family"] == "tt"
    # another set-up (one more epoch) is another loop: refused, naming the file and how to measure again
    other = {**tt_loop, "setup": {**tt_loop["setup"], "epochs": tt_loop["setup"]["epochs"] + 1}}
    assert loop_digest(other) != loop_digest(tt_loop)
    with pytest.raises(HostReportError, match=r"host\.json: measured for another loop .*codesign\.deploy\.host_share"):
        read_host_report(path, other)


@pytest.mark.parametrize("change, message", [
    ({"format": "something-else"}, "not a codesign host report"),
    ({"version": 99}, "not a codesign host report"),
    ({"fixed_s": -0.001}, "host seconds must be >= 0"),
    ({"per_call_s": "fast"}, "per_call_s"),
])
def test_a_bad_report_is_refused_naming_the_file(tmp_path, tt_loop, change, message):
    path = write_host_report(tmp_path / "host.json", tt_loop, HostModel(fixed_s=0.01, per_call_s=0.0, source="x"),
                             MACHINE)
    path.write_text(json.dumps({**json.loads(path.read_text()), **change}))
    with pytest.raises(HostReportError, match=message):
        read_host_report(path, tt_loop)
    with pytest.raises(HostReportError, match="missing.json"):
        read_host_report(tmp_path / "missing.json", tt_loop)


def test_measuring_a_loop_entry_times_its_host_work(tt_loop):
    host = measure_loop_host(tt_loop, source="here")
    assert host.source == "here" and host.fixed_s >= 0 and host.per_call_s >= 0 and host.seconds(100) > 0
    with pytest.raises(ValueError, match="needs its data set"):
        measure_loop_host({"family": "csb", "setup": {}})
    with pytest.raises(ValueError, match="no host share to measure"):
        measure_loop_host({"family": "fpmac", "setup": {}})


def test_the_fb_loop_is_measured_from_its_entry():
    loop = loop_entry(load_design(EXAMPLES / "digits_abvs.toml"))
    assert loop["family"] == "fpmac_array"
    host = measure_loop_host(loop)
    assert host.fixed_s > 0 and host.per_call_s > 0 and "this machine" in host.source
    assert dataclasses.replace(host, source="x").seconds(0) == host.fixed_s
