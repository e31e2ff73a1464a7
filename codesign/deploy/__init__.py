"""Deployment: drive a codesign design from Python through PYNQ, on a board or on the emulated board.

- :class:`CodesignOverlay` opens a build folder (design.json, and the
  bitstream where Vivado produced one) and gives one :class:`AccelIP`
  driver per IP: ``run(words_in, n_out, n_transactions) -> words_out``;
- :class:`EmulatedBoard` is a ``pynq.Device`` that runs the generated HLS C++
  of every IP where no board is attached (docs/deploy.md).
"""

from codesign.deploy.driver import AccelInputError, AccelIP, AccelTimeout, driver_class
from codesign.deploy.emulated import DdrModel, EmulatedBoard, EmulationError
from codesign.deploy.folder import write_emulation_folder
from codesign.deploy.manifest import (
    DeployError,
    ManifestError,
    OverlayMismatch,
    check_design,
    check_ip_dict,
    load_manifest,
)
from codesign.deploy.overlay import CodesignOverlay, EmulatedBoardNotice, board_attached

__all__ = ["AccelIP", "AccelInputError", "AccelTimeout", "CodesignOverlay", "DdrModel", "DeployError",
           "EmulatedBoard", "EmulatedBoardNotice", "EmulationError", "ManifestError", "OverlayMismatch",
           "board_attached", "check_design", "check_ip_dict", "driver_class", "load_manifest",
           "write_emulation_folder"]
