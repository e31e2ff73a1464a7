"""Deployment: drive a codesign design from Python through PYNQ, on a board or on the emulated board.

- :class:`CodesignOverlay` opens a build folder (design.json, and the
  bitstream where Vivado produced one) and gives one :class:`AccelIP`
  driver per IP: ``run(words_in, n_out, n_transactions) -> words_out``;
- :class:`EmulatedBoard` is a ``pynq.Device`` that runs the generated HLS C++
  of every IP where no board is attached;
- :class:`BoardTrainer` trains a design point with its layer GEMMs on the
  fpmac_array IP, bit-identical to :mod:`codesign.loops.fb` (docs/deploy.md).
"""

try:
    import pynq  # noqa: F401
except ImportError as error:  # an optional dependency: say which
    raise ImportError("codesign.deploy needs PYNQ (2.7 to 4.0; on a board it comes with the image, on a desktop: "
                      f"pip install 'codesign[board]'): {error}") from error

from codesign.deploy.driver import AccelInputError, AccelIP, AccelTimeout, driver_class
from codesign.deploy.emulated import DdrModel, EmulatedBoard, EmulationError
from codesign.deploy.manifest import (
    DeployError,
    ManifestError,
    OverlayMismatch,
    check_design,
    check_ip_dict,
    load_manifest,
)
from codesign.deploy.overlay import (
    CodesignOverlay,
    EmulatedBoardNotice,
    board_attached,
    board_devices,
)
from codesign.deploy.training import BoardTrainer, IpGemm

__all__ = ["AccelIP", "AccelInputError", "AccelTimeout", "BoardTrainer", "CodesignOverlay", "DdrModel",
           "DeployError", "EmulatedBoard", "EmulatedBoardNotice", "EmulationError", "IpGemm", "ManifestError",
           "OverlayMismatch", "board_attached", "board_devices", "check_design", "check_ip_dict", "driver_class",
           "load_manifest"]
