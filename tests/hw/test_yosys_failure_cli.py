"""A Yosys run that fails ends `codesign design` and `codesign estimate` with one line naming the PE, spec and log.

Yosys here is a real process, a script on PATH in place of the real tool: it answers ``-V`` as Yosys 0.23 does and
then fails a synthesis the two ways a real run fails, a non-zero exit (with an error in its log) or an exit 0 that
leaves no report. The CLI runs in a fresh process, as a user runs it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from codesign.resources import data_dir

FAILING = {
    "exits_1": 'echo "ERROR: Module \\`fpmac_array_top\\` not found!" > yosys.log\nexit 1\n',
    "writes_nothing": 'echo "End of script." > yosys.log\nexit 0\n',
}


def _fake_yosys(tmp_path: Path, behaviour: str) -> dict[str, str]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    script = bin_dir / "yosys"
    script.write_text('#!/bin/sh\nif [ "$1" = "-V" ]; then echo "Yosys 0.23 (git sha1 7ce5011c24b)"; exit 0; fi\n'
                      + FAILING[behaviour])
    script.chmod(0o755)
    return {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}


def _run(argv: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "codesign.cli", *argv], env=env, cwd=cwd, capture_output=True,
                          text=True, timeout=300)


def _error_line(run: subprocess.CompletedProcess) -> str:
    assert "Traceback" not in run.stderr, run.stderr
    errors = [line for line in run.stderr.splitlines() if line.startswith("codesign: error:")]
    assert len(errors) == 1, run.stderr
    return errors[0]


@pytest.mark.slow  # about 17 s per case: Yosys runs until it fails
@pytest.mark.parametrize("behaviour", FAILING)
def test_design_names_the_pe_spec_and_log_when_yosys_fails(tmp_path, behaviour):
    config = tmp_path / "run.toml"
    text = (data_dir("examples") / "digits_abvs.toml").read_text()
    assert text.count("\nrows = 3\n") == 1
    config.write_text(text.replace("\nrows = 3\n", "\nrows = 5\n"))  # a build no shipped report covers: Yosys must run
    run = _run(["design", str(config), "--cache", "cache", "--out", "fit"], _fake_yosys(tmp_path, behaviour),
               tmp_path)
    assert run.returncode == 2, run.stderr
    line = _error_line(run)
    assert "Yosys failed on PE fpmac_array, spec " in line and "rows=5" in line and "(xc7)" in line, line
    why = "exit status 1" if behaviour == "exits_1" else "it wrote no stat.json"
    assert why in line, line
    log = Path(line.split("see its log ")[1])
    assert log.is_file() and log.is_relative_to(tmp_path / "cache") and log.name == "yosys.log", line
    assert not (tmp_path / "fit").exists()  # the fit is not written


@pytest.mark.slow
@pytest.mark.parametrize("behaviour", FAILING)
def test_estimate_names_the_pe_spec_and_log_when_yosys_fails(tmp_path, behaviour):
    run = _run(["estimate", "fpmac", "--max-fb", "5", "--families", "xcup", "--out", "est"],
               _fake_yosys(tmp_path, behaviour), tmp_path)
    assert run.returncode == 2, run.stderr
    line = _error_line(run)
    assert "Yosys failed on PE fpmac, spec max_fb=5 (xcup)" in line, line
    log = Path(line.split("see its log ")[1])
    assert log.is_file() and log.is_relative_to(tmp_path / "est"), line
    assert not list((tmp_path / "est").glob("fpmac_cost.*"))  # no report
