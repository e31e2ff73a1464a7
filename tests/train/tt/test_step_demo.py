"""The TT layer demo (codesign.train.tt.step_demo): every level agrees, the reports are written, a failure shows."""

from __future__ import annotations

import json
import os
import shutil

import pytest

from codesign.step.tt.step import GoldenRunner
from codesign.train.tt import step_demo

needs_cxx = pytest.mark.skipif(shutil.which(os.environ.get("CXX", "g++")) is None,
                               reason="no C++ compiler: g++ (or $CXX) is not on PATH")


@pytest.mark.slow
@needs_cxx
def test_demo_passes_and_writes_json_and_markdown(tmp_path):
    lines = []
    assert step_demo.demo_layer_step(tmp_path, progress=lines.append, rtl=False) is True
    report = json.loads((tmp_path / "tt_layer_step.json").read_text())
    assert report["passed"] is True
    levels = {entry["level"]: entry for entry in report["levels"]}
    assert levels["pe-golden"]["mismatches"] == levels["csim"]["mismatches"] == 0
    assert levels["csim"]["values"] > 0 and levels["csim"]["calls"] == sum(r["calls"] for r in report["schedule"])
    assert "**PASS**" in (tmp_path / "tt_layer_step.md").read_text()
    assert any("csim" in line for line in lines)


def test_demo_fails_when_a_level_disagrees(tmp_path, monkeypatch):
    class Broken(GoldenRunner):
        def run(self, hardware, calls):
            results = super().run(hardware, calls)
            results[0] = results[0] + 1
            return results

    monkeypatch.setattr(step_demo, "GoldenRunner", Broken)
    import codesign.step.tt.csim as step_csim

    def no_compiler(*args, **kwargs):
        raise step_demo.CsimError("C++ compiler 'g++' not found on PATH (ap_types)")

    monkeypatch.setattr(step_csim, "CsimRunner", no_compiler)
    assert step_demo.demo_layer_step(tmp_path, progress=lambda line: None, rtl=False) is False
    report = json.loads((tmp_path / "tt_layer_step.json").read_text())
    assert report["levels"][0]["mismatches"] > 0 and "skipped" in report["levels"][1]


def test_demo_fails_when_the_generated_code_does_not_build(tmp_path, monkeypatch):
    import codesign.step.tt.csim as step_csim

    def broken_build(*args, **kwargs):
        raise step_demo.CsimError("compiling tt1.cpp failed:\nerror: something")

    monkeypatch.setattr(step_csim, "CsimRunner", broken_build)
    monkeypatch.setattr(step_demo.shutil, "which", lambda name: "/usr/bin/" + name)
    assert step_demo.demo_layer_step(tmp_path, progress=lambda line: None, rtl=False) is False
    report = json.loads((tmp_path / "tt_layer_step.json").read_text())
    assert "failed" in report["levels"][1] and report["passed"] is False
