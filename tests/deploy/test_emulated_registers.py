"""The emulated board compares design.json's registers with the IP's as a board compares them with its .hwh.

The emulated board's metadata lists the registers the accelerator shell
decodes (codesign.deploy.register_view, from the shell contract), so the one
comparison a board runs (codesign.deploy.manifest.check_ip_dict) has something
to compare on the emulated board too.
"""

from __future__ import annotations

import copy
import json
import shutil
import warnings

import pytest

from codesign.contracts.shell import register_map, register_span
from codesign.deploy.emulated import DdrModel, EmulatedMetadata
from codesign.deploy.manifest import ManifestError, OverlayMismatch, check_ip_dict, load_manifest
from codesign.deploy.register_view import shell_hwh_registers


def emulated_ip_dict(manifest):
    return EmulatedMetadata(manifest, DdrModel(base=0x1000_0000, size=0x1000_0000)).ip_dict


def test_the_emulated_metadata_lists_the_registers_the_shell_decodes(stream_folder):
    manifest = load_manifest(stream_folder)
    ip_dict = emulated_ip_dict(manifest)
    for ip in manifest["ips"]:
        listed = ip_dict[ip["name"]]["registers"]
        assert {name: entry["address_offset"] for name, entry in listed.items()} == register_map()
        assert listed["in"]["size"] == 64 and listed["n_in"]["size"] == 32
    assert check_ip_dict(manifest, ip_dict) == {ip["name"]: ip["name"] for ip in manifest["ips"]}
    assert shell_hwh_registers()["out"]["address_offset"] == 0x1c


def test_a_tampered_register_offset_fails_the_board_comparison_on_the_emulated_board(stream_folder):
    """The comparison itself, past the loader: design.json says `out` is at 0x18 (where a 32-bit-pointer HLS export
    would put it); the IP the emulated board stands for decodes it at 0x1c."""
    manifest = load_manifest(stream_folder)
    ip_dict = emulated_ip_dict(manifest)
    tampered = copy.deepcopy(manifest)
    tampered["ips"][1]["registers"]["out"] = 0x18
    with pytest.raises(OverlayMismatch, match=r"IP tt1_0: register out offset in the bitstream 0x1c \(as out\), "
                                              r"in the manifest 0x18"):
        check_ip_dict(tampered, ip_dict)


def tampered_folder(stream_folder, tmp_path, change):
    folder = tmp_path / "tampered"
    shutil.copytree(stream_folder, folder)
    manifest = json.loads((folder / "design.json").read_text())
    change(manifest["ips"][1]["registers"])
    (folder / "design.json").write_text(json.dumps(manifest))
    return folder


@pytest.mark.slow
def test_a_tampered_register_offset_is_refused_on_the_emulated_board(stream_folder, tmp_path):
    from codesign.deploy import CodesignOverlay

    folder = tampered_folder(stream_folder, tmp_path, lambda registers: registers.update(out=0x18))
    with pytest.raises(ManifestError, match=r"registers.out is 0x18, but the accelerator shell decodes out at 0x1c"):
        CodesignOverlay(folder, emulate=True)


@pytest.mark.slow
def test_a_register_the_ip_does_not_decode_is_refused_on_the_emulated_board(stream_folder, tmp_path):
    """A register design.json names and the shell does not decode passes the loader (design.json may name more
    registers than the shell's) but not the board comparison, now run on the emulated board too."""
    from codesign.deploy import CodesignOverlay

    beyond = register_span()  # past every register the shell decodes, inside the IP's window
    folder = tampered_folder(stream_folder, tmp_path, lambda registers: registers.update(scale=beyond))
    load_manifest(folder)  # the loader takes it
    with warnings.catch_warnings(), pytest.raises(
            OverlayMismatch, match=rf"IP tt1_0: register scale \(manifest offset {beyond:#x}\) is not in the "
                                   r"bitstream's cell tt1_0"):
        warnings.simplefilter("ignore")
        CodesignOverlay(folder, emulate=True)
