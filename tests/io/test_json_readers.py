"""The hardware flow's JSON read-backs (bench summaries, Yosys reports, Vivado's mode record, design.json) name the file.

A truncated file (a killed bench, a full disk, a hand edit) used to raise a
bare ``JSONDecodeError`` or ``KeyError``; each reader now goes through
:func:`codesign.io.jsonfile.load_json`. The tools are replaced by small
stand-ins that write the broken file, so no simulator, Yosys or Vivado runs.
"""

from __future__ import annotations

import dataclasses
import json
import stat
from pathlib import Path

import pytest

from codesign.hw import rtlsim, yosys
from codesign.io.jsonfile import JsonFileError
from codesign.shell.vivado import ManifestError, plan_vivado_build

BROKEN = [pytest.param('{"mismatches": 0, "transac', id="truncated"), pytest.param("", id="empty"),
          pytest.param("[]", id="array")]


@pytest.mark.parametrize("text", BROKEN + [pytest.param('{"transactions": 4}', id="no_mismatches"),
                                           pytest.param('{"mismatches": "0"}', id="mismatches_a_string")])
def test_a_broken_bench_summary_names_the_file(tmp_path, text):
    path = tmp_path / "summary.json"
    path.write_text(text)
    with pytest.raises(JsonFileError, match=rf"^{path}: cocotb bench summary: "):
        rtlsim.read_bench_summary(path)


def test_a_bench_summary_needs_the_fields_its_reader_asks_for(tmp_path):
    path = tmp_path / "summary.json"
    path.write_text(json.dumps({"mismatches": 0, "transactions": 3}))
    assert rtlsim.read_bench_summary(path, {"transactions": int})["transactions"] == 3
    with pytest.raises(JsonFileError, match="field bursts missing"):
        rtlsim.read_bench_summary(path, {"bursts": int})


@pytest.mark.parametrize("bench_fails", [False, True], ids=["bench_passed", "bench_failed"])
def test_run_rtl_names_a_truncated_summary(tmp_path, monkeypatch, bench_fails):
    """The RTL level reads the summary the bench wrote; a truncated one is named, whichever way the bench ended."""
    from codesign.hw.flow import run_rtl
    from codesign.pe import get_pe

    pe = get_pe("fpmac")
    spec = pe.spec()
    vectors = pe.write_vectors(spec, pe.build_stimulus(spec, pe.stimulus_options()), tmp_path / pe.vector_file)

    def fake_cocotb(*, build_dir, extra_env, **kwargs):
        Path(build_dir).mkdir(parents=True, exist_ok=True)
        summary = next(Path(value) for value in extra_env.values() if str(value).endswith("summary.json"))
        summary.write_text('{"mismatches": 1, "transactions": ')
        if bench_fails:
            raise rtlsim.CocotbTestFailure("1 test failed", results_xml=Path(build_dir) / "results.xml",
                                           log=Path(build_dir) / "test.log", build_seconds=0.0)
        return rtlsim.SimRun(**{f.name: None for f in dataclasses.fields(rtlsim.SimRun)})

    monkeypatch.setattr(rtlsim, "run_cocotb", fake_cocotb)
    with pytest.raises(JsonFileError, match=r"summary\.json: cocotb bench summary: not valid JSON \(truncated\?\)"):
        run_rtl(pe, spec, vectors, tmp_path / "work")


def _fake_tool(path: Path, script: str) -> Path:
    path.write_text("#!/bin/sh\n" + script)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


@pytest.mark.parametrize("broken", ["stat.json", "netlist.json"])
def test_a_truncated_yosys_report_names_the_file(tmp_path, broken):
    good = {"stat.json": '{"design": {"num_cells_by_type": {"LUT2": 1}}}',
            "netlist.json": '{"modules": {}}'}
    writes = "".join(f"printf '%s' '{good[name] if name != broken else good[name][:9]}' > {name}\n"
                     for name in good)
    fake = _fake_tool(tmp_path / "fake-yosys", 'if [ "$1" = -V ]; then echo "Yosys 0.0 (fake)"; exit 0; fi\n'
                      + writes + "printf 'no path\\n' > ltp.txt\n")
    source = tmp_path / "top.v"
    source.write_text("module top(input a, output b); assign b = a; endmodule\n")
    job = yosys.SynthJob(sources=(source,), top="top", family="xc7")
    with pytest.raises(yosys.YosysError, match=rf"{broken}: Yosys .* of {job.slug}: not valid JSON \(truncated\?\)"):
        yosys.synthesize(job, tmp_path / "work", executable=str(fake))


def test_a_truncated_design_json_is_refused_naming_it(tmp_path):
    (tmp_path / "design.json").write_text('{"format": "codesign-design", "board": "zed')
    with pytest.raises(ManifestError, match=rf"^{tmp_path / 'design.json'}: design manifest: not valid JSON"):
        plan_vivado_build(tmp_path)
    (tmp_path / "design.json").write_text('{"format": "codesign-design", "board": 7, "design": "d"}')
    with pytest.raises(ManifestError, match="field board has the wrong type"):
        plan_vivado_build(tmp_path)
