"""The room on the PE protocol: registry, RTL sources and parameters, deterministic HLS project, grid size."""

from __future__ import annotations

from codesign.hw.flow import render_project
from codesign.pe import get_pe
from codesign.pe.fpmac_array.spec import FpmacArraySpec
from codesign.pe.fpmac_array.stimulus import FpmacArrayStimulusOptions, build, count_macs


def test_registered_stream_pe_with_fpmac_sources():
    pe = get_pe("fpmac_array")
    assert pe.handshake == "stream" and pe.rtl_top == "fpmac_array_pe"
    names = [path.name for path in pe.rtl_sources()]
    assert {"fpmac_array_pe.v", "fpmac_array_cell.v", "fpmac_array_ram.v", "fpmac.v", "fpmac_round.v"} <= set(names)
    assert pe.rtl_parameters(FpmacArraySpec(rounding="toward_zero", rows=2)) == {
        "EXP_BITS": 8, "MAX_FB": 23, "ROUNDING": 2, "ROWS": 2, "COLS": 4, "MAX_M": 32, "MAX_N": 32, "MAX_K": 32}


def test_project_is_deterministic_and_uses_both_headers():
    pe = get_pe("fpmac_array")
    spec = FpmacArraySpec(exp_bits=5, max_fb=10, rows=3, cols=2, max_m=9, max_n=7, max_k=12)
    first = render_project(pe, spec, with_vectors=False)
    second = render_project(pe, spec, with_vectors=False)
    assert first.files == second.files
    header = first.files["fpmac_array.h"].decode()
    assert "codesign::fpmac_array::pe<fpmac_array_config::EXP_BITS" in header
    assert "static const int ROWS = 3;" in header and "static const int ROUNDING = 0;" in header
    assert {"codesign_fpmac_array.h", "codesign_fpmac.h"} <= set(first.files)


def test_grid_has_five_configurations_of_ten_thousand_macs():
    pe = get_pe("fpmac_array")
    grid = pe.verification_grid()
    assert len(grid) >= 5
    assert len({(c.spec.exp_bits, c.spec.max_fb) for c in grid}) == len(grid)
    assert {c.spec.rounding for c in grid} == {"nearest_even", "nearest_away", "toward_zero"}
    assert len({(c.spec.rows, c.spec.cols) for c in grid}) == len(grid)
    for case in grid[:2]:
        assert count_macs(build(case.spec, FpmacArrayStimulusOptions())) >= 10_000
