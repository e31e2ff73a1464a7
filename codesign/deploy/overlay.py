"""The overlay of a codesign design: ``pynq.Overlay`` plus design.json, on a board or on the emulated board.

``CodesignOverlay(build_dir)`` opens the build folder of one design for one
board (``design.json``, and after a Vivado run ``<design>.bit`` with
``<design>.hwh`` beside it). Before anything is downloaded it

- binds a driver (:func:`codesign.deploy.driver.driver_class`) to every IP's VLNV;
- refuses a design point the overlay does not implement (``design=``);
- on a board, compares the ``.hwh``'s IPs, addresses and register offsets with
  design.json (:func:`codesign.deploy.manifest.check_ip_dict`) and refuses a
  mismatch.

Where it runs: ``emulate=True`` always uses :class:`EmulatedBoard`;
``emulate=False`` needs a PYNQ board and the bitstream; ``emulate=None``
(default) uses the board when PYNQ finds one and the bitstream exists,
otherwise the emulated board, with a :class:`EmulatedBoardNotice` warning
saying so.
"""

from __future__ import annotations

import warnings
from pathlib import Path

from pynq import Device, Overlay

from codesign.deploy.driver import AccelIP, driver_class
from codesign.deploy.emulated import EmulatedBoard
from codesign.deploy.manifest import (
    MANIFEST_FILE,
    DeployError,
    check_design,
    check_ip_dict,
    ip_by_name,
    load_manifest,
)


class EmulatedBoardNotice(UserWarning):
    """The overlay runs on the emulated board because no PYNQ board (or no bitstream) was found."""


def board_devices() -> list[Device]:
    """The real devices PYNQ finds here (an emulated board is never among them)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # PYNQ warns when it finds none
        return [device for device in Device.devices if not isinstance(device, EmulatedBoard)]


def board_attached() -> bool:
    """Whether PYNQ finds a real device here."""
    return bool(board_devices())


def _build_root(path: Path) -> Path:
    path = Path(path).resolve()
    if path.suffix in (".bit", ".json") and path.is_file():
        return path.parent
    return path


class CodesignOverlay(Overlay):
    """A codesign design's overlay; ``overlay.accelerator(name)`` (or ``overlay.<name>``) is the IP's driver."""

    def __init__(self, build_dir: Path, *, design=None, emulate: bool | None = None, download: bool = True,
                 device: Device | None = None, timeout_s: float | None = None, **kwargs) -> None:
        root = _build_root(build_dir)
        manifest = load_manifest(root)
        if design is not None:
            check_design(manifest, design)
        bitfile, handoff = root / f"{manifest['design']}.bit", root / f"{manifest['design']}.hwh"
        if device is None:
            device, emulated = self._choose_device(root, manifest, emulate, bitfile, handoff, timeout_s)
        else:
            emulated = isinstance(device, EmulatedBoard)
        drivers = {ip["name"]: driver_class(ip) for ip in manifest["ips"]}
        if timeout_s is not None:
            for cls in drivers.values():
                cls.timeout_s = float(timeout_s)
        target = str(root / MANIFEST_FILE) if emulated else str(bitfile)  # the emulated board loads design.json
        super().__init__(target, download=False, device=device, **kwargs)
        self.manifest, self.build_dir, self.emulated = manifest, root, emulated
        self.ip_cells = check_ip_dict(manifest, self.ip_dict)  # before the PL is touched
        if download:
            self.download()

    @staticmethod
    def _choose_device(root: Path, manifest: dict, emulate: bool | None, bitfile: Path, handoff: Path,
                       timeout_s: float | None):
        # an emulated kernel that runs past the drivers' time-out is killed as hung (its default: 60 s)
        timeouts = {} if timeout_s is None else {"kernel_timeout_s": float(timeout_s)}
        if emulate:
            return EmulatedBoard(root, **timeouts).activate(), True
        boards = board_devices()
        attached, have_bitstream = bool(boards), bitfile.is_file() and handoff.is_file()
        if attached and have_bitstream:
            Device.active_device = boards[0]  # an emulated board may have been active before
            return boards[0], False
        if emulate is False:
            why = "no PYNQ board found" if not attached else f"{bitfile.name} or {handoff.name} missing in {root}"
            raise DeployError(f"cannot open design {manifest['design']!r} on a board: {why}")
        why = "no PYNQ board is attached" if not attached else f"{root} holds no {bitfile.name} with {handoff.name}"
        warnings.warn(f"{why}: running design {manifest['design']!r} on the emulated board (the generated HLS "
                      "C++ of each IP, compiled with g++)", EmulatedBoardNotice, stacklevel=3)
        return EmulatedBoard(root, **timeouts).activate(), True

    def accelerator(self, name: str) -> AccelIP:
        """The driver of IP ``name`` (a design.json IP name)."""
        ip_by_name(self.manifest, name)
        driver = getattr(self, self.ip_cells[name])
        if not isinstance(driver, AccelIP):
            raise DeployError(f"IP {name} is bound to {type(driver).__name__}, not a codesign driver")
        return driver

    def accelerators(self, pe: str | None = None) -> list[AccelIP]:
        """Drivers of every IP (of PE ``pe`` when given), in design.json order."""
        return [self.accelerator(ip["name"]) for ip in self.manifest["ips"] if pe is None or ip["pe"] == pe]

    def describe(self) -> str:
        where = self.device.name if self.emulated else f"board ({self.bitfile_name})"
        lines = [f"design {self.manifest['design']} for {self.manifest['board']} on {where}"]
        for ip in self.manifest["ips"]:
            lines.append(f"  {ip['name']}: {ip['pe']} at {ip['base_address']:#010x}  {ip['vlnv']}")
        return "\n".join(lines)


__all__ = ["CodesignOverlay", "EmulatedBoardNotice", "board_attached", "board_devices"]
