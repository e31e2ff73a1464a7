"""CodesignOverlay: where it runs (board, emulated, refused) and what it checks before anything is loaded."""

from __future__ import annotations

import os
import warnings

import numpy as np
import pytest

from codesign.deploy import (
    CodesignOverlay,
    DeployError,
    EmulatedBoardNotice,
    OverlayMismatch,
    board_attached,
)
from codesign.design.point import PeInstance
from tests.deploy.conftest import golden_transactions, stream_design

pytestmark = pytest.mark.slow
ON_BOARD = board_attached()
off_board_only = pytest.mark.skipif(ON_BOARD, reason="a PYNQ board is attached: the automatic choice is the board")


@off_board_only
def test_off_board_the_overlay_says_it_emulates(stream_folder):
    with pytest.warns(EmulatedBoardNotice, match="no PYNQ board is attached: running design 'stream_pes' on the "
                                                  "emulated board"):
        overlay = CodesignOverlay(stream_folder)
    assert overlay.emulated and overlay.is_loaded()
    assert "csb_0: csb at 0x40000000" in overlay.describe()


@off_board_only
def test_a_board_is_required_when_asked_for(stream_folder):
    with pytest.raises(DeployError, match="cannot open design 'stream_pes' on a board: no PYNQ board found"):
        CodesignOverlay(stream_folder, emulate=False)


def test_a_design_point_it_does_not_implement_is_refused_before_loading(stream_folder):
    design = stream_design()
    tt1 = design.instances[1]
    other = type(design)(name="other", training=design.training, board=design.board, clock_mhz=100.0,
                         instances=(PeInstance(name="tt1_0", pe="tt2", spec=tt1.spec, reason="x"),))
    with pytest.raises(OverlayMismatch, match="IP tt1_0: the design needs PE 'tt2', the overlay has 'tt1'"):
        CodesignOverlay(stream_folder, design=other, emulate=True)
    CodesignOverlay(stream_folder, design=design, emulate=True)


def test_drivers_by_name_and_by_pe(overlay):
    assert [ip.ip_name for ip in overlay.accelerators()] == ["csb_0", "tt1_0", "fpmac_array_0"]
    assert [ip.ip_name for ip in overlay.accelerators("tt1")] == ["tt1_0"]
    assert overlay.tt1_0 is overlay.accelerator("tt1_0")
    with pytest.raises(KeyError, match="no IP 'tt2_0'"):
        overlay.accelerator("tt2_0")


@pytest.mark.board
@pytest.mark.skipif(not ON_BOARD, reason="no PYNQ board attached (pynq finds no device)")
@pytest.mark.skipif(not os.environ.get("CODESIGN_BOARD_BUILD"),
                    reason="set CODESIGN_BOARD_BUILD to a build folder holding <design>.bit and <design>.hwh")
def test_golden_transactions_on_the_board():
    """On a PYNQ board, the build folder named by $CODESIGN_BOARD_BUILD (with its .bit/.hwh): golden words back.

    Every IP of a stream PE runs its PE's default stimulus, one call per transaction.
    """
    folder = os.environ["CODESIGN_BOARD_BUILD"]
    with warnings.catch_warnings():
        warnings.simplefilter("error", EmulatedBoardNotice)
        overlay = CodesignOverlay(folder, emulate=False)
    for ip in overlay.accelerators():
        for words_in, expected in golden_transactions(ip.pe, ip.manifest_entry["spec"]):
            np.testing.assert_array_equal(ip.run(words_in, expected.size, 1), expected)


def move_ip(entry):
    entry["phys_addr"] += 0x1_0000


def move_in_register(entry):
    entry["registers"] = {"in_r": {"address_offset": 0x14, "size": 64, "access": "read-write", "description": "",
                                   "fields": {}}}


@pytest.mark.parametrize("change, match", [
    (move_ip, r"IP tt1_0: base address in the bitstream 0x40020000, in the manifest 0x40010000"),
    (move_in_register, r"IP tt1_0: register in offset in the bitstream 0x14 \(as in_r\), in the manifest 0x10"),
], ids=["address", "register"])
def test_a_bitstream_whose_ips_differ_is_refused_before_download(stream_folder, change, match):
    """The .hwh check runs inside CodesignOverlay, before download: here on a device whose metadata changes one IP."""
    from codesign.deploy import EmulatedBoard

    class ChangedIp(EmulatedBoard):
        downloads = 0

        def get_bitfile_metadata(self, bitfile_name, partial=False):
            metadata = super().get_bitfile_metadata(bitfile_name, partial)
            change(metadata.ip_dict["tt1_0"])
            return metadata

        def download(self, bitstream, parser=None):
            type(self).downloads += 1
            super().download(bitstream, parser)

    device = ChangedIp(stream_folder).activate()
    with pytest.raises(OverlayMismatch, match=match):
        CodesignOverlay(stream_folder, device=device)
    assert ChangedIp.downloads == 0


def test_an_emulated_board_of_another_folder_is_refused(stream_folder, tmp_path):
    import shutil

    from codesign.deploy import EmulatedBoard, EmulationError

    other = tmp_path / "copy"
    shutil.copytree(stream_folder, other)
    device = EmulatedBoard(other)
    with pytest.raises(EmulationError, match="it cannot load .*design.json"):
        CodesignOverlay(stream_folder, device=device)
