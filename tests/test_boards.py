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


def test_both_boards_run_the_pl_at_100_mhz_from_the_ps():
    assert board("zedboard").fclk_mhz == 100.0
    assert board("ultra96v2").fclk_mhz == 100.0


def test_block_design_facts_per_board():
    zed, u96 = board("zedboard").vivado, board("ultra96v2").vivado
    assert (zed.control_port, zed.data_port, zed.clock_pin) == ("M_AXI_GP0", "S_AXI_HP0", "FCLK_CLK0")
    assert (u96.control_port, u96.data_port, u96.clock_pin) == ("M_AXI_HPM0_FPD", "S_AXI_HP0_FPD", "pl_clk0")
    assert zed.control_base == 0x4000_0000 and u96.control_base == 0xA000_0000
    assert zed.fclk_property == "CONFIG.PCW_FPGA0_PERIPHERAL_FREQMHZ"
    assert u96.fclk_property == "CONFIG.PSU__CRL_APB__PL0_REF_CTRL__FREQMHZ"
    assert zed.ports["CONFIG.PCW_USE_S_AXI_HP0"] == "1" and u96.ports["CONFIG.PSU__USE__S_AXI_GP2"] == "1"
    # without board files the PS gets its DDR and clocks from the TOML, never from a preset
    assert zed.part_config["CONFIG.PCW_UIPARAM_DDR_PARTNO"] == "MT41K128M16 JT-125"
    assert u96.part_config["CONFIG.PSU__DDRC__MEMORY_TYPE"] == "LPDDR 4"
    for facts in (zed, u96):
        assert not {"CONFIG.preset", "CONFIG.PCW_IMPORT_BOARD_PRESET", "CONFIG.PSU__PRESET_APPLIED"} & set(facts.part_config)
        with pytest.raises(TypeError):
            facts.ports["CONFIG.X"] = "1"  # read-only


def test_a_misaligned_control_window_is_refused():
    from dataclasses import replace

    with pytest.raises(ValueError, match="power of two"):
        replace(board("zedboard").vivado, control_window=0x3000_0000)
    with pytest.raises(ValueError, match="aligned"):
        replace(board("zedboard").vivado, control_base=0x4000_1000)


def test_board_part_patterns_are_data_with_the_board_part_first():
    """Vivado installs name the ZedBoard avnet.com:zedboard (board store) or em.avnet.com:zed (many installs):
    the TOML lists both, its own board part's pattern first; the Ultra96-V2 keeps one (em.avnet.com's files
    are for another part)."""
    from fnmatch import fnmatchcase

    zed, u96 = board("zedboard"), board("ultra96v2")
    assert zed.board_part_patterns == ("avnet.com:zedboard:part0:*", "em.avnet.com:zed:part0:*")
    assert u96.board_part_patterns == ("avnet.com:ultra96v2:part0:*",)
    assert any(fnmatchcase("em.avnet.com:zed:part0:1.3", p) for p in zed.board_part_patterns)
    assert fnmatchcase(zed.board_part, zed.board_part_patterns[0])


def test_board_part_patterns_are_checked():
    from dataclasses import replace

    zed = board("zedboard")
    with pytest.raises(ValueError, match="first of board_part_patterns must be the board part's own"):
        replace(zed, board_part_patterns=("em.avnet.com:zed:part0:*",))
    with pytest.raises(ValueError, match="vendor:board:part0:\\* patterns"):
        replace(zed, board_part_patterns=("avnet.com:zedboard:part0:*", "zed; exec rm"))
    assert replace(zed, board_part_patterns=()).board_part_patterns == ("avnet.com:zedboard:part0:*",)
