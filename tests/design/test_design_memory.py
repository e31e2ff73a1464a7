"""`codesign design` reports the board's DDR and whether a training run of the configuration would fit in it."""

from __future__ import annotations

import json

import pytest

from codesign.boards import board
from codesign.cli import main
from codesign.design import load_design
from codesign.resources import data_dir
from codesign.train.memory import estimate_peak_memory

WIDE = "\n".join(line if not line.startswith("hidden") else "hidden = [8192, 8192]"
                 for line in (data_dir("examples") / "digits_abvs.toml").read_text().splitlines()) + "\n"


@pytest.mark.parametrize("board_name, wide, fits", [("zedboard", False, True), ("zedboard", True, False),
                                                    ("ultra96v2", True, True)])
def test_design_says_whether_a_run_fits_the_boards_ddr(tmp_path, capsys, board_name, wide, fits):
    config = tmp_path / "run.toml"
    config.write_text(WIDE if wide else (data_dir("examples") / "digits_abvs.toml").read_text())
    assert ("hidden = [8192, 8192]" in config.read_text()) == wide
    main(["design", str(config), "--board", board_name, "--cache", str(tmp_path / "cache"), "--out",
          str(tmp_path / "fit")])
    out = capsys.readouterr().out
    peak = estimate_peak_memory(load_design(config, board_name=board_name).training).total
    ddr = board(board_name).ddr_mib
    assert (peak <= ddr * 2**20) == fits  # the configurations straddle the boards' DDR as intended
    lines = [line for line in out.splitlines() if line.startswith("memory: ")]
    assert len(lines) == 1, out
    assert f"has {ddr} MiB of DDR" in lines[0] and f"about {round(peak / 2**20, 1):g} MiB" in lines[0]
    assert lines[0].endswith("it fits the board's DDR" if fits else "it does NOT fit the board's DDR"), lines[0]
    memory = json.loads((tmp_path / "fit" / "fit.json").read_text())["memory"]
    assert memory["ddr_mib"] == ddr and memory["fits_ddr"] is fits
    assert memory["training_peak_mib"] == round(peak / 2**20, 1)
    assert memory["largest_part"] == ("parameters" if wide else "runtime")
    assert not (tmp_path / "cache").exists()  # shipped Yosys reports answered: no synthesis ran
