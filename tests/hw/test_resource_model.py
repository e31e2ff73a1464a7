"""The analytical resource model: block RAM tiling, DSP slices, the LUT/FF fit and the calibration files."""

from __future__ import annotations

import math

import numpy as np
import pytest

from codesign.io.jsonfile import JsonFileError
from codesign.hw.resource_model import (
    BRAM_SHAPES,
    Calibration,
    bram36,
    dsp_slices,
    fit,
    fpga_counts,
    held_out_errors,
    model_counts,
    relative_errors,
)


@pytest.mark.parametrize(("depth", "width", "expected"), [
    (16384, 16, 8.0),   # 16K x 2 tiles: 8 RAMB36
    (4096, 32, 4.0),    # 4K x 9 (or 2K x 9 halves)
    (4096, 64, 8.0),
    (1024, 64, 2.0),    # 1K x 36
    (512, 32, 0.5),     # one RAMB18 as 512 x 36
    (256, 64, 1.0),     # two RAMB18 halves or one 512 x 72
    (128, 64, 0.0),     # shallow, under 16 Kib: LUT RAM
    (128, 128, 2.0),    # shallow but 16 Kib: block RAM (PE1's and PE2's two A banks at the default build)
    (256, 8, 0.0),      # 2 Kib: LUT RAM
    (1024, 128, 4.0),
])
def test_block_ram_tiling(depth, width, expected):
    assert bram36(depth, width) == expected


@pytest.mark.parametrize("depth, width, xc7, xcup", [
    (64, 18, 0.0, 0.0),     # shallow: LUT RAM on both
    (128, 18, 0.0, 0.0),    # 2.25 Kib: LUT RAM on both
    (128, 24, 0.5, 0.0),    # 3 Kib, narrow: one RAMB18 on 7-series, LUT RAM on UltraScale+
    (128, 32, 0.5, 0.5),    # 4 Kib, narrow: one RAMB18 on both
    (256, 18, 0.5, 0.5),
    (256, 8, 0.0, 0.0),     # 2 Kib
    (128, 96, 0.0, 0.0),    # wide (more than one port's 36 bits), 12 Kib: the LUT RAM rule
])
def test_narrow_rams_go_to_block_ram_as_yosys_maps_them(depth, width, xc7, xcup):
    assert (bram36(depth, width, "xc7"), bram36(depth, width, "xcup")) == (xc7, xcup)


def test_block_ram_is_never_less_than_the_bits_need():
    rng = np.random.default_rng(1)
    for depth, width in zip(rng.integers(129, 70000, 200), rng.integers(1, 300, 200)):
        units = bram36(int(depth), int(width))
        if units:
            assert units * 36 * 1024 >= depth * width * 32 / 36  # a RAMB36 holds 32 Kib of data (36 with parity)
            assert units == min(math.ceil(depth / d) * math.ceil(width / w) * s for d, w, s in BRAM_SHAPES)


def test_dsp_slices_per_family():
    assert dsp_slices(16, 8, "xc7") == dsp_slices(8, 16, "xcup") == 1
    assert dsp_slices(25, 18, "xc7") == 1 and dsp_slices(26, 18, "xc7") > 1
    assert dsp_slices(27, 18, "xcup") == 1 and dsp_slices(27, 19, "xcup") > 1


def test_the_fit_recovers_a_linear_law_and_counts_dsp_and_bram():
    def features(spec):
        return {"one": 1.0, "macs": float(spec["lanes"] * spec["rows"]), "lanes": float(spec["lanes"])}

    points = [{"spec": {"lanes": lanes, "rows": rows},
               "counts": {"lut": 300 + 40 * lanes * rows + 25 * lanes, "ff": 100 + 12 * lanes * rows,
                          "dsp": lanes * rows, "bram_36k": 1.0}}
              for lanes, rows in ((2, 1), (4, 2), (8, 1), (8, 4), (16, 2))]
    coefficients = fit(points, features)
    assert coefficients["lut"]["macs"] == pytest.approx(40) and coefficients["ff"]["one"] == pytest.approx(100)
    calibration = Calibration(pe="x", family="xcup", yosys_version="v", rtl_hash="h", points=tuple(points),
                              coefficients=coefficients)

    def estimate(spec):
        return model_counts([(512, 32), (1024, 36)], [(16, 8)] * (spec["lanes"] * spec["rows"]), features(spec),
                            coefficients, "xcup")

    errors = relative_errors(calibration, estimate)
    assert errors["lut"]["max_rel"] < 1e-9 and errors["dsp"]["max_rel"] == 0
    assert errors["bram_36k"]["max_rel"] == pytest.approx(0.5)  # 0.5 + 1.0 modelled against 1.0 given
    assert held_out_errors(calibration, features)["lut"]["max_rel"] < 1e-9  # an exact law predicts held-out points


def test_calibration_files_round_trip_and_refuse_others(tmp_path):
    calibration = Calibration(pe="tt1", family="xc7", yosys_version="Yosys 0.23", rtl_hash="abc",
                              points=({"spec": {"lanes": 2}, "counts": {"lut": 1, "ff": 2, "dsp": 3, "bram_36k": 0}},),
                              coefficients={"lut": {"one": 1.0}, "ff": {"one": 2.0}})
    path = calibration.write(tmp_path / "c.json")
    assert Calibration.read(path) == calibration
    path.write_text('{"schema": "other", "pe": "tt1"}')
    with pytest.raises(JsonFileError, match=r"c\.json"):
        Calibration.read(path)


def test_fpga_counts_add_lut_ram_and_shift_registers_to_luts():
    assert fpga_counts({"lut": 10, "lutram": 4, "srl": 1, "ff": 7, "dsp": 2, "bram_36k": 0.5}) == \
        {"lut": 15.0, "ff": 7.0, "dsp": 2.0, "bram_36k": 0.5}
