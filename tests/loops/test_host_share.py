"""Host reports: written for one loop entry of design.json, read back for that loop only."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from codesign.design import load_design
from codesign.design.families import loop_entry
from codesign.loops.host_share import HostReportError, loop_digest, read_host_report, write_host_report
from codesign.step.host import HostModel

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
MACHINE = {"board": "", "machine": "x86_64", "processor": "x86_64", "python": "3.11", "numpy": "1.26"}


@pytest.fixture(scope="module")
def tt_loop():
    return loop_entry(load_design(EXAMPLES / "digits_tt.toml"))


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


def test_a_list_step_report_keeps_its_work_beside_the_ips_apart(tmp_path, tt_loop):
    """``host_share --lists`` splits a list step's host into the seconds between the phases and those beside them
    (the explorer hides the latter behind the phases); a report written before that split reads with none beside,
    and one whose host all ran beside the IPs is a measurement too."""
    host = HostModel(fixed_s=2e-4, per_call_s=0.0, source="the board", list_step=True, beside_s=1e-4)
    path = write_host_report(tmp_path / "host.json", tt_loop, host, MACHINE)
    assert read_host_report(path, tt_loop) == host and json.loads(path.read_text())["beside_s"] == 1e-4
    older = {k: v for k, v in json.loads(path.read_text()).items() if k != "beside_s"}
    path.write_text(json.dumps(older))
    assert read_host_report(path, tt_loop).beside_s == 0.0
    path.write_text(json.dumps({**older, "fixed_s": 0.0, "beside_s": 3e-4}))
    assert read_host_report(path, tt_loop).beside_s == 3e-4


@pytest.mark.parametrize("change, message", [
    ({"format": "something-else"}, "not a codesign host report"),
    ({"version": 99}, "not a codesign host report"),
    ({"fixed_s": -0.001}, "are no host measurement"),
    ({"per_call_s": "fast"}, "per_call_s"),
    ({"fixed_s": 1e9}, r"fixed_s in \[0, 60\] s a step"),  # a slip of units, or of anything
    ({"fixed_s": float("inf")}, "must be finite"),
    ({"per_call_s": 2.0}, r"per_call_s in \[0, 1\] s a call"),
    ({"fixed_s": 0.0, "per_call_s": 0.0}, "not both 0"),
    ({"beside_s": -1e-4, "list_step": True}, r"beside_s=-0\.0001 is no host measurement"),
    ({"beside_s": True, "list_step": True}, "beside_s=True"),
    ({"beside_s": 1e9, "list_step": True}, r"seconds in \[0, 60\] a step"),
    ({"beside_s": 1e-4}, "0 unless list_step"),  # a per-call loop's host works beside no IP
])
def test_a_bad_report_is_refused_naming_the_file(tmp_path, tt_loop, change, message):
    path = write_host_report(tmp_path / "host.json", tt_loop, HostModel(fixed_s=0.01, per_call_s=0.0, source="x"),
                             MACHINE)
    path.write_text(json.dumps({**json.loads(path.read_text()), **change}))
    with pytest.raises(HostReportError, match=message):
        read_host_report(path, tt_loop)
    with pytest.raises(HostReportError, match="missing.json"):
        read_host_report(tmp_path / "missing.json", tt_loop)
