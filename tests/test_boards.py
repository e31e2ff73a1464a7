import pytest

from codesign.boards import board, board_for_part, boards


def test_both_boards_load_with_budgets():
    known = boards()
    assert set(known) == {"zedboard", "ultra96v2"}
    assert board("zedboard").part == "xc7z020clg484-1" and board("zedboard").yosys_family == "xc7"
    assert board("ultra96v2").part == "xczu3eg-sbva484-1-i" and board("ultra96v2").yosys_family == "xcup"
    assert board("zedboard").resources == {"lut": 53200, "ff": 106400, "dsp": 220, "bram_36k": 140}
    assert board("ultra96v2").resources["dsp"] == 360


def test_unknown_board_and_part_are_refused():
    with pytest.raises(ValueError, match="unknown board 'pynq-z9'"):
        board("pynq-z9")
    with pytest.raises(ValueError, match="unknown FPGA part 'xc7a35t'.*xc7z020clg484-1"):
        board_for_part("xc7a35t")
