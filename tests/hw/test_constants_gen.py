"""The committed C++ header and Verilog include are what codesign/contracts/constants.py generates, and the RTL, the
C++ headers and the Python modules in scope take the word width and the status codes from them, not from a copy."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from codesign.hw import constants_gen
from codesign.contracts import constants
from codesign.resources import data_dir

ROOT = Path(__file__).resolve().parents[2]


def test_committed_files_are_generated_from_the_module():
    assert constants_gen.stale_files() == [], "run: python -m codesign.hw.constants_gen"


def test_check_mode_reports_a_stale_file(tmp_path, monkeypatch, capsys):
    stale = tmp_path / constants_gen.VERILOG_NAME
    stale.write_text("`define CODESIGN_WORD_BITS 31\n")
    monkeypatch.setattr(constants_gen, "verilog_path", lambda: stale)
    assert constants_gen.main(["--check"]) == 1
    assert str(stale) in capsys.readouterr().err


def test_generated_values_follow_the_module():
    header, verilog = constants_gen.cpp_header(), constants_gen.verilog_include()
    assert f"const int WORD_BITS = {constants.WORD_BITS};" in header
    assert f"`define CODESIGN_WORD_BITS {constants.WORD_BITS}\n" in verilog
    for family, codes in constants.STATUS_CODES.items():
        for code in codes:
            assert f"STATUS_{code.name} = {code.value}" in header
            assert f"`define CODESIGN_{family.upper()}_STATUS_{code.name} 2'd{code.value}\n" in verilog


def test_status_lookup_and_names():
    assert constants.status_code("csb", "INDEX") == 3
    assert constants.status_names("fpmac_array")[2] == "too large"
    with pytest.raises(KeyError, match="no status 'NNZ'"):
        constants.status_code("fpmac_array", "NNZ")


# Files that must not define the constants again. The TT RTL still writes its status codes as numbers: adopting the
# include changes its RTL hash, and with it every shipped TT Yosys report and calibration.
PYTHON = ["codesign/pe/fpmac_array/contract.py", "codesign/pe/csb/reference.py", "codesign/pe/csb/spec.py",
          "codesign/pe/csb/stream.py", "codesign/pe/csb/cycles.py", "codesign/pe/fpmac/spec.py",
          "codesign/hw/vectors.py", "codesign/contracts/shell.py", "codesign/deploy/training.py",
          "codesign/deploy/csb_training.py", "codesign/pe/tt/contract.py", "codesign/deploy/tt_training.py"]
CPP = ["codesign_csb.h", "codesign_fpmac_array.h", "codesign_tt.h"]
VERILOG = ["csb/csb_pe.v", "fpmac_array/fpmac_array_pe.v"]


@pytest.mark.parametrize("path", PYTHON)
def test_python_does_not_define_them_again(path):
    text = (ROOT / path).read_text()
    assert not re.search(r"^(WORD_BITS|STATUS_OK|STATUS_BAD_HEADER)\s*=|^STATUS_NAMES = \{|^STATUS_OK, .*= range", text, re.M)


@pytest.mark.parametrize("name", CPP)
def test_headers_include_the_generated_header(name):
    text = (data_dir("hls_templates") / "include" / name).read_text()
    assert f'#include "{constants_gen.HEADER_NAME}"' in text
    assert not re.search(r"STATUS_OK\s*=|WORD_BITS\s*=", text)


@pytest.mark.parametrize("name", VERILOG)
def test_rtl_includes_the_generated_file(name):
    text = (data_dir("rtl") / name).read_text()
    assert f'`include "{constants_gen.VERILOG_NAME}"' in text
    assert "`CODESIGN_WORD_BITS" in text and "_STATUS_OK" in text
    assert not re.search(r"status\s*<=\s*\d+'d\d|\{30'd0, status\}", text)  # no status value written as a number
