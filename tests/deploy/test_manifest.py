"""design.json on the deployment side: loading, the .hwh check and the design-point check."""

from __future__ import annotations

import copy
import json

import pytest

from codesign.deploy import (
    ManifestError,
    OverlayMismatch,
    check_design,
    check_ip_dict,
    load_manifest,
)
from codesign.boards import board, boards
from codesign.deploy.manifest import check_manifest, ddr_windows, hwh_register_names
from codesign.design.manifest import design_manifest
from codesign.design.point import PeInstance
from codesign.contracts.shell import CONTROL_REGISTERS, SHELL_ARGS
from tests.deploy.conftest import stream_design


@pytest.fixture
def manifest():
    return design_manifest(stream_design())


def hwh_ip_dict(manifest):
    """An ip_dict as PYNQ's parser gives it for a bitstream built from ``manifest``."""
    return {ip["name"]: {"type": ip["vlnv"], "phys_addr": ip["base_address"], "addr_range": ip["address_range"],
                         "fullpath": ip["name"]} for ip in manifest["ips"]}


def hwh_register(offset, bits):
    """One register as PYNQ's HWH parser lists it (offset in bytes, size in bits)."""
    return {"address_offset": offset, "size": bits, "access": "read-write", "description": "", "fields": {}}


def hwh_registers(ip, *, split=False):
    """The registers a Vitis HLS .hwh lists for manifest IP ``ip``: ``in``/``out`` renamed ``in_r``/``out_r``.

    A 64-bit pointer is one 64-bit register, or with ``split`` two 32-bit
    words ``<name>_1`` (low) and ``<name>_2`` (high).
    """
    registers = {name: hwh_register(ip["registers"][name], 32) for name in CONTROL_REGISTERS}
    for arg in SHELL_ARGS:
        offset, name = ip["registers"][arg.name], arg.name + ("_r" if arg.name in ("in", "out") else "")
        if arg.register_bits == 32:
            registers[name] = hwh_register(offset, 32)
        elif split:
            registers.update({f"{name}_1": hwh_register(offset, 32), f"{name}_2": hwh_register(offset + 4, 32)})
        else:
            registers[name] = hwh_register(offset, 64)
    return registers


def hwh_ip_dict_with_registers(manifest, *, split=False):
    ip_dict = hwh_ip_dict(manifest)
    for ip in manifest["ips"]:
        ip_dict[ip["name"]]["registers"] = hwh_registers(ip, split=split)
    return ip_dict


def test_matching_ip_dict_maps_every_ip(manifest):
    ip_dict = hwh_ip_dict(manifest)
    ip_dict["processing_system7_0"] = {"type": "xilinx.com:ip:processing_system7:5.5", "phys_addr": 0, "addr_range": 0}
    assert check_ip_dict(manifest, ip_dict) == {"csb_0": "csb_0", "tt1_0": "tt1_0", "fpmac_array_0": "fpmac_array_0"}


def test_renamed_cell_found_by_its_vlnv(manifest):
    ip_dict = hwh_ip_dict(manifest)
    ip_dict["tt1_accel_inst"] = ip_dict.pop("tt1_0")
    assert check_ip_dict(manifest, ip_dict)["tt1_0"] == "tt1_accel_inst"


@pytest.mark.parametrize("change, match", [
    (lambda d: d.pop("csb_0"), r"IP csb_0 \(codesign:rtl:csb_0_accel:1.0\): no such cell"),
    (lambda d: d["csb_0"].update(type="codesign:rtl:csb_0_accel:2.0"), "cell csb_0 is 'codesign:rtl:csb_0_accel:2.0'"),
    (lambda d: d["tt1_0"].update(phys_addr=0x4300_0000), "base address in the bitstream 0x43000000, in the manifest"),
    (lambda d: d["tt1_0"].update(addr_range=0x1000), "address range in the bitstream 0x1000"),
], ids=["missing", "vlnv", "address", "range"])
def test_mismatching_ip_dict_is_refused(manifest, change, match):
    ip_dict = hwh_ip_dict(manifest)
    change(ip_dict)
    with pytest.raises(OverlayMismatch, match=match):
        check_ip_dict(manifest, ip_dict)


def test_hwh_register_names():
    assert hwh_register_names("in") == ("in", "in_r", "in_1", "in_r_1")
    assert hwh_register_names("n_in")[0] == "n_in"


@pytest.mark.parametrize("split", [False, True], ids=["64-bit", "split-words"])
def test_matching_registers_are_accepted(manifest, split):
    ip_dict = hwh_ip_dict_with_registers(manifest, split=split)
    assert ip_dict["tt1_0"]["registers"]["in_r" if not split else "in_r_1"]["address_offset"] == 0x10
    assert check_ip_dict(manifest, ip_dict)["tt1_0"] == "tt1_0"


@pytest.mark.parametrize("rename", [
    lambda regs: regs.update(out=regs.pop("out_r")),                     # no reserved-word rename
    lambda regs: regs.update(n_in_r=regs.pop("n_in")),                   # an argument renamed anyway
    lambda regs: [regs.pop(name) for name in CONTROL_REGISTERS],         # PYNQ omits the control registers
], ids=["out-unrenamed", "n_in_r", "no-control"])
def test_register_naming_variants_are_accepted(manifest, rename):
    ip_dict = hwh_ip_dict_with_registers(manifest)
    rename(ip_dict["csb_0"]["registers"])
    check_ip_dict(manifest, ip_dict)


@pytest.mark.parametrize("registers", [{}, None], ids=["empty", "missing"])
def test_an_hwh_without_registers_is_not_checked_for_them(manifest, registers):
    ip_dict = hwh_ip_dict_with_registers(manifest)
    if registers is None:
        del ip_dict["tt1_0"]["registers"]
    else:
        ip_dict["tt1_0"]["registers"] = registers
    check_ip_dict(manifest, ip_dict)


def test_wrong_or_missing_registers_are_refused_all_at_once(manifest):
    ip_dict = hwh_ip_dict_with_registers(manifest)
    registers = ip_dict["tt1_0"]["registers"]
    registers["out_r"]["address_offset"] += 4
    registers["GIE"]["address_offset"] = 0x08
    del registers["n_transactions"]
    with pytest.raises(OverlayMismatch) as refused:
        check_ip_dict(manifest, ip_dict)
    message = str(refused.value)
    assert "IP tt1_0: register out offset in the bitstream 0x20 (as out_r), in the manifest 0x1c" in message
    assert "IP tt1_0: register GIE offset in the bitstream 0x8 (as GIE), in the manifest 0x4" in message
    assert ("IP tt1_0: register n_transactions (manifest offset 0x38) is not in the bitstream's cell tt1_0 "
            "(looked for n_transactions, n_transactions_r, n_transactions_1, n_transactions_r_1)") in message
    assert "csb_0" not in message


def test_a_design_point_the_overlay_does_not_implement(manifest):
    design = stream_design()
    check_design(manifest, design)
    csb, tt1, array = design.instances

    def variant(*instances):
        return type(design)(name="variant", training=design.training, board=design.board, clock_mhz=100.0,
                            instances=instances)

    with pytest.raises(OverlayMismatch, match="needs IP tt2_0"):
        check_design(manifest, variant(csb, tt1, array, PeInstance(name="tt2_0", pe="tt2", spec=tt1.spec, reason="x")))
    narrower = type(tt1.spec)(**{**tt1.spec.to_dict(), "max_j": tt1.spec.max_j // 2})
    with pytest.raises(OverlayMismatch, match="IP tt1_0: spec fields max_j differ"):
        check_design(manifest, variant(csb, PeInstance(name="tt1_0", pe="tt1", spec=narrower, reason="x"), array))


def test_load_manifest_refusals(tmp_path, manifest):
    with pytest.raises(ManifestError, match="no design manifest"):
        load_manifest(tmp_path)
    (tmp_path / "design.json").write_text("{not json")
    with pytest.raises(ManifestError, match="not readable JSON"):
        load_manifest(tmp_path)
    for mutate, match in ((lambda m: m.update(format="other"), "not a codesign-design version 2"),
                          (lambda m: m.update(version=3), "written by a newer codesign.*version 3.*upgrade"),
                          (lambda m: m.update(board_facts={}), r"board_facts.ddr_mib must be an integer of MiB in \[1, 65536\], got None"),
                          (lambda m: m["ips"][0]["registers"].pop("n_out"), "lacks register.*n_out"),
                          (lambda m: m["ips"][0]["registers"].update(n_in=3), "word-aligned"),
                          (lambda m: m.update(ips=[]), "lists no IPs")):
        broken = copy.deepcopy(manifest)
        mutate(broken)
        (tmp_path / "design.json").write_text(json.dumps(broken))
        with pytest.raises(ManifestError, match=match):
            load_manifest(tmp_path)


def _set(path, value):
    """A mutation that sets ``manifest[path[0]][path[1]]...`` to ``value``."""
    def mutate(manifest):
        target = manifest
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value(manifest) if callable(value) else value
    return mutate


def _delete(path):
    def mutate(manifest):
        target = manifest
        for key in path[:-1]:
            target = target[key]
        del target[path[-1]]
    return mutate


# Mutations of a valid zedboard manifest (IPs csb_0, tt1_0, fpmac_array_0 at 0x40000000, 0x40010000, 0x40020000,
# 64 KiB each; DDR 512 MiB at 0) and the message each refusal must give after "<path>/design.json: ".
MANIFEST_REFUSALS = {
    "same-base": (_set(["ips", 1, "base_address"], 0x4000_0000),
                  r"ips\[1\] \(tt1_0\): base_address 0x40000000 is also IP csb_0's"),
    "same-base-reversed": (_set(["ips", 0, "base_address"], 0x4001_0000),
                           r"ips\[1\] \(tt1_0\): base_address 0x40010000 is also IP csb_0's"),
    "windows-overlap": (_set(["ips", 0, "address_range"], 0x2_0000),
                        r"ips\[1\] \(tt1_0\): window 0x40010000..0x4001ffff overlaps IP csb_0's "
                        r"0x40000000..0x4001ffff"),
    "base-in-ddr": (_set(["ips", 2, "base_address"], 0x1000_0000),
                    r"ips\[2\] \(fpmac_array_0\): base_address 0x10000000 .* lies in DDR \(0x0..0x1fffffff, "
                    r"board_facts.ddr_mib 512\)"),
    "ddr-grown-over-ips": (_set(["board_facts", "ddr_mib"], 2048), r"ips\[0\] \(csb_0\): .* lies in DDR"),
    "base-unaligned": (_set(["ips", 1, "base_address"], 0x4001_0100),
                       r"ips\[1\] \(tt1_0\): base_address 0x40010100 is not aligned to its address_range 0x10000"),
    "base-negative": (_set(["ips", 1, "base_address"], -0x1_0000), r"ips\[1\] \(tt1_0\): base_address -0x10000 must be a non-negative integer"),
    "base-not-int": (_set(["ips", 1, "base_address"], "0x40010000"), r"ips\[1\] \(tt1_0\): base_address '0x40010000'"),
    "range-not-power-of-two": (_set(["ips", 1, "address_range"], 0x1_8000),
                               r"ips\[1\] \(tt1_0\): address_range 0x18000 must be a power of two"),
    "range-bool": (_set(["ips", 1, "address_range"], True), r"ips\[1\] \(tt1_0\): address_range True must"),
    "range-below-registers": (_set(["ips", 1, "address_range"], 0x20),
                              r"ips\[1\] \(tt1_0\): address_range 0x20 is smaller than the 0x50 bytes its registers"),
    "register-unaligned": (_set(["ips", 0, "registers", "n_in"], 0x2a),
                           r"ips\[0\] \(csb_0\): registers.n_in 42 must be a word-aligned"),
    "register-negative": (_set(["ips", 0, "registers", "debug"], -4), r"ips\[0\] \(csb_0\): registers.debug -4"),
    "register-moved": (_set(["ips", 0, "registers", "out"], 0x20),
                       r"ips\[0\] \(csb_0\): registers.out is 0x20, but the accelerator shell decodes out at 0x1c"),
    "register-overlaps-pointer": (_set(["ips", 0, "registers", "debug"], 0x14),
                                  r"ips\[0\] \(csb_0\): registers.debug at 0x14 overlaps registers.in "
                                  r"\(0x10..0x17, 8 bytes\)"),
    "register-same-offset": (_set(["ips", 0, "registers", "debug"], 0x0),
                             r"ips\[0\] \(csb_0\): registers.(CTRL|debug) at 0x0 overlaps registers.(CTRL|debug)"),
    "register-outside-window": (_set(["ips", 0, "registers", "debug"], 0x1_0000),
                                r"ips\[0\] \(csb_0\): address_range 0x10000 is smaller than the 0x10004 bytes"),
    "register-missing": (_delete(["ips", 0, "registers", "n_out"]), r"ips\[0\] \(csb_0\): lacks register\(s\) n_out"),
    "registers-not-object": (_set(["ips", 0, "registers"], [0, 4]), r"ips\[0\] \(csb_0\): registers must be an object"),
    "name-not-string": (_set(["ips", 1, "name"], 7), r"ips\[1\]: name 7 must be a lower-case C identifier"),
    "name-upper-case": (_set(["ips", 1, "name"], "Tt1_0"), r"ips\[1\]: name 'Tt1_0' must be a lower-case"),
    "name-dash": (_set(["ips", 1, "name"], "tt1-0"), r"ips\[1\]: name 'tt1-0' must be a lower-case"),
    "name-newline": (_set(["ips", 1, "name"], "tt1_0\n"), r"ips\[1\]: name 'tt1_0\\n' must be a lower-case"),
    "name-repeats": (_set(["ips", 2, "name"], "csb_0"), r"ips\[2\]: IP name 'csb_0' repeats \(ips\[0\]\)"),
    "pe-not-string": (_set(["ips", 1, "pe"], ["tt1"]), r"ips\[1\] \(tt1_0\): pe \['tt1'\] must be a non-empty string"),
    "spec-not-object": (_set(["ips", 1, "spec"], "max_j=8"), r"ips\[1\] \(tt1_0\): spec must be an object, not str"),
    "held-sums-not-bool": (_set(["ips", 1, "held_sums"], "no"), r"ips\[1\] \(tt1_0\): held_sums 'no' must be true or false"),
    "buffer-bad": (_set(["ips", 1, "buffers"], {"in": {"dtype": "uint32", "max_words": -1}}),
                   r"ips\[1\] \(tt1_0\): buffers.in must be uint32"),
    "buffers-not-object": (_set(["ips", 1, "buffers"], [1]), r"ips\[1\] \(tt1_0\): buffers must be an object"),
    "ip-not-object": (_set(["ips", 1], "tt1_0"), r"ips\[1\] must be an object"),
    "clock-zero": (_set(["clock_mhz"], 0), r"clock_mhz 0 must be a positive number of MHz"),
    "clock-negative": (_set(["clock_mhz"], -100.0), r"clock_mhz -100.0 must be a positive"),
    "clock-string": (_set(["clock_mhz"], "100"), r"clock_mhz '100' must be a positive"),
    "clock-bool": (_set(["clock_mhz"], True), r"clock_mhz True must be a positive"),
    "clock-nan": (_set(["clock_mhz"], float("nan")), r"clock_mhz nan must be a positive"),
    "design-not-string": (_set(["design"], None), r"design None must be a non-empty string"),
}


@pytest.mark.parametrize("mutate, match", MANIFEST_REFUSALS.values(), ids=MANIFEST_REFUSALS.keys())
def test_a_hand_edited_manifest_is_refused_naming_the_file_and_field(tmp_path, manifest, mutate, match):
    check_manifest(manifest)
    broken = copy.deepcopy(manifest)
    mutate(broken)
    path = tmp_path / "design.json"
    path.write_text(json.dumps(broken))
    with pytest.raises(ManifestError, match=match) as refused:
        load_manifest(tmp_path)
    assert str(refused.value).startswith(f"{path}: ")


@pytest.mark.parametrize("board_name", sorted(boards()))
def test_the_manifests_codesign_writes_pass_for_every_board(board_name):
    design = stream_design()
    design = type(design)(name=design.name, training=design.training, board=board(board_name),
                          clock_mhz=design.clock_mhz, instances=design.instances)
    manifest = design_manifest(design, buffers={"tt1_0": {"in": 64, "out": 32}})
    assert check_manifest(manifest) is manifest
    manifest["ips"][0]["registers"]["debug"] = 0x3c  # a register after the shell's, inside the window
    check_manifest(manifest)


def test_ddr_windows():
    assert ddr_windows({"ddr_mib": 512, "ps": "ps7"}) == [(0, 0x2000_0000)]
    assert ddr_windows({"ddr_mib": 2048, "ps": "zynq_ultra_ps_e"}) == [(0, 0x8000_0000)]
    # Zynq UltraScale+: the low 2 GiB at 0, the rest at 0x8_0000_0000, so the PL windows at 0xa0000000 stay free
    assert ddr_windows({"ddr_mib": 4096, "ps": "zynq_ultra_ps_e"}) == [(0, 0x8000_0000),
                                                                     (0x8_0000_0000, 0x8_8000_0000)]


def test_the_manifests_edges_are_accepted_exactly_where_they_are_legal(manifest):
    """Edges a one-off would move: a window may end where DDR starts or start where it ends (not one byte into
    it), a buffer may have 0 words or exactly the board's DDR, a window may end exactly at the PS's address width."""
    ddr_end = manifest["board_facts"]["ddr_mib"] << 20
    for base, legal in ((ddr_end, True), (ddr_end - 0x1_0000, False)):  # starts where DDR ends; overlaps by 64 KiB
        edited = copy.deepcopy(manifest)
        edited["ips"][2]["base_address"] = base
        if legal:
            check_manifest(edited)
        else:
            with pytest.raises(ManifestError, match="lies in DDR"):
                check_manifest(edited)
    words = ddr_end // 4
    for count, legal in ((0, True), (words, True), (words + 1, False)):
        edited = copy.deepcopy(manifest)
        edited["ips"][1]["buffers"] = {"in": {"dtype": "uint32", "max_words": count}}
        if legal:
            check_manifest(edited)
        else:
            with pytest.raises(ManifestError, match=rf"max_words in \[0, {words}\]"):
                check_manifest(edited)
    top = copy.deepcopy(manifest)
    top["ips"][2]["base_address"] = (1 << 32) - top["ips"][2]["address_range"]  # the last window below 2^32
    check_manifest(top)
    top["ips"][2]["base_address"] = 1 << 32
    with pytest.raises(ManifestError, match="below 2\\^32"):
        check_manifest(top)
