import pytest

from codesign.boards import board, board_for_part, boards


def test_every_board_loads_with_budgets():
    known = boards()
    assert set(known) == {"zedboard", "ultra96v2", "pynqz2", "kv260"}
    assert board("pynqz2").part == "xc7z020clg400-1" and board("pynqz2").yosys_family == "xc7"
    assert board("pynqz2").resources == board("zedboard").resources  # one die, two packages
    assert board("pynqz2").board_part == "tul.com.tw:pynq-z2:part0:1.0" and board("pynqz2").ddr_mib == 512
    z2 = board("pynqz2").vivado.part_config
    assert z2["CONFIG.PCW_CRYSTAL_PERIPHERAL_FREQMHZ"] == "50" and z2["CONFIG.PCW_UIPARAM_DDR_BUS_WIDTH"] == "16 Bit"
    assert board_for_part("xc7z020clg400-1").name == "pynqz2"
    assert board("zedboard").part == "xc7z020clg484-1" and board("zedboard").yosys_family == "xc7"
    assert board("ultra96v2").part == "xczu3eg-sbva484-1-i" and board("ultra96v2").yosys_family == "xcup"
    assert board("zedboard").resources == {"lut": 53200, "ff": 106400, "dsp": 220, "bram_36k": 140}
    assert board("ultra96v2").resources["dsp"] == 360
    assert board("kv260").part == "xck26-sfvc784-2LV-c" and board("kv260").yosys_family == "xcup"
    assert board_for_part("xck26-sfvc784-2LV-c").name == "kv260"


def test_unknown_board_and_part_are_refused():
    with pytest.raises(ValueError, match="unknown board 'pynq-z9'"):
        board("pynq-z9")
    with pytest.raises(ValueError, match="unknown FPGA part 'xc7a35t'.*xc7z020clg484-1"):
        board_for_part("xc7a35t")


def test_every_board_runs_the_pl_at_100_mhz_from_the_ps():
    assert {name: known.fclk_mhz for name, known in boards().items()} == dict.fromkeys(boards(), 100.0)


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


@pytest.mark.slow  # 12 s; make test runs a ZedBoard design's step on its emulated board (test_board_bad_input.py)
def test_the_pynq_z2_fits_and_trains_on_its_emulated_board(tmp_path, capsys):
    """The board PYNQ users ask for most: the shipped FB-float design fits it and trains on its emulated board
    bit-identically to the golden loop (its Tcl lint is tests/design/test_build.py's)."""
    import json
    from pathlib import Path

    from codesign.deploy.selfcheck import main as selfcheck
    from codesign.design import load_design
    from codesign.design.build import write_emulation_folder
    from codesign.design.fit import fit_design
    from codesign.loops.data import save_npz
    from codesign.train.trainer import load_dataset

    design = load_design(Path(__file__).resolve().parents[1] / "examples" / "digits_abvs.toml", board_name="pynqz2")
    assert fit_design(design, cache_dir=tmp_path / "cache").fits
    folder = write_emulation_folder(design, tmp_path / "pynqz2")
    assert json.loads((folder / "design.json").read_text())["board_facts"]["pynq_board_names"] == ["Pynq-Z2"]
    data = save_npz(load_dataset(design.training), tmp_path / "digits.npz")
    assert selfcheck([str(folder), str(data), "--emulate", "--steps", "1"]) == 0
    report = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert report["differ"] == 0 and report["compared"] > 10_000


def test_the_kria_kv260_is_a_k26_som_with_the_ultra96_v2s_processing_system():
    """The KV260's facts (boards/kv260.toml, each with its source there): the XCK26's budget, 4 GiB of 64-bit
    DDR4-2400, the SOM's board part, PYNQ's BOARD name, and the same zynq_ultra_ps_e facts as the Ultra96-V2."""
    from codesign.deploy.manifest import ddr_windows
    from codesign.hw.estimate import board_for_family

    kv, u96 = board("kv260"), board("ultra96v2")
    assert kv.resources == {"lut": 117120, "ff": 234240, "dsp": 1248, "bram_36k": 144}
    assert kv.ddr_mib == 4096 and kv.ddr_peak_gbps == pytest.approx(2 * 8 * 1200e6 / 1e9)
    assert ddr_windows({"ddr_mib": kv.ddr_mib, "ps": kv.ps}) == [(0, 0x8000_0000), (0x8_0000_0000, 0x8_8000_0000)]
    assert kv.board_part == "xilinx.com:kv260_som:part0:1.4"
    assert kv.board_part_patterns == ("xilinx.com:kv260_som:part0:*", "xilinx.com:kv260:part0:*")
    assert kv.pynq_board_names == ("KV260",) and kv.hp_port_bits == 128 and kv.hp_ports == 4
    for field in ("ps_ip", "ps_cell", "automation_rule", "control_port", "data_port", "clock_pin", "reset_pin",
                  "control_base", "control_window", "fclk_property", "ports", "more_data_ports"):
        assert getattr(kv.vivado, field) == getattr(u96.vivado, field), field
    # without board files: the K26 SOM's DDR4 and clocks, the carrier's console; never a preset
    config = kv.vivado.part_config
    assert config["CONFIG.PSU__DDRC__MEMORY_TYPE"] == "DDR 4" and config["CONFIG.PSU__DDRC__BUS_WIDTH"] == "64 Bit"
    assert config["CONFIG.PSU__DDRC__SPEED_BIN"] == "DDR4_2400R"
    assert config["CONFIG.PSU__CRF_APB__DDR_CTRL__FREQMHZ"] == "1200"
    assert config["CONFIG.PSU__PSS_REF_CLK__FREQMHZ"] == "33.333"
    assert config["CONFIG.PSU__UART1__PERIPHERAL__IO"] == "MIO 36 .. 37"
    assert not {"CONFIG.preset", "CONFIG.PSU__PRESET_APPLIED"} & set(config)
    # a bigger board of a family does not change the family's board in the PE cost reports
    assert board_for_family("xcup").name == "ultra96v2"
    assert board_for_family("xc7").resources == board("zedboard").resources
