"""An installed overlay bundle: the pip package ``codesign bundle`` writes, found the way PYNQ finds overlays.

A bundle package holds one design for one board: ``overlay/`` (design.json,
the HLS projects the emulated board compiles, the ``.bit``/``.hwh`` when it
was built), ``data/`` (the data set as ``.npz``) and ``notebooks/``. It
registers itself twice: under :data:`BUNDLE_GROUP` so that
:func:`installed_bundle` finds its files from any working directory, and
under ``pynq.notebooks`` so that ``pynq get-notebooks`` copies its notebooks
(through :func:`deliver_notebooks`, which needs no board).

On a board, :meth:`Bundle.check_board` compares the ``BOARD`` variable the
PYNQ image sets with the board the bundle was made for, so a ZedBoard bundle
on an Ultra96-V2 is refused before a bitstream is touched.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path
from typing import Any, Dict, List, Optional

from codesign.deploy.manifest import DeployError, load_manifest
from codesign.io.jsonfile import JsonFileError, load_json

BUNDLE_GROUP = "codesign.bundles"  # entry points: bundle name -> its package
BUNDLE_INFO = "bundle.json"  # in the package: name, board, data file, notebooks, codesign version that wrote it
BOARD_VARIABLE = "BOARD"


class BundleError(DeployError):
    """A bundle is not installed, is incomplete, or was made for another board."""


def _entry_points(group: str) -> List[Any]:
    from importlib import metadata

    found = metadata.entry_points()
    if hasattr(found, "select"):  # Python 3.10 and later
        return list(found.select(group=group))
    return list(found.get(group, []))  # Python 3.8 and 3.9: a dict of groups


class Bundle:
    """The files of one installed bundle, at ``root`` (its package directory)."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        info_file = self.root / BUNDLE_INFO
        try:
            self.info: Dict[str, Any] = load_json(info_file, what="bundle description",
                                                  required={"name": str, "board": str, "data": str})
        except JsonFileError as error:
            raise BundleError(str(error)) from None
        self.name = self.info["name"]
        self.manifest = load_manifest(self.build_dir)

    @property
    def build_dir(self) -> Path:
        """The build folder inside the package: design.json, hls/, and the bitstream when it was built."""
        return self.root / "overlay"

    @property
    def data_file(self) -> Path:
        return self.root / "data" / self.info["data"]

    @property
    def built(self) -> bool:
        """Whether the bundle carries a bitstream (``<design>.bit`` with its ``.hwh``)."""
        design = self.manifest["design"]
        return all((self.build_dir / f"{design}.{suffix}").is_file() for suffix in ("bit", "hwh"))

    def check_board(self, environ: Optional[Dict[str, str]] = None) -> None:
        """Refuse a board whose ``BOARD`` variable names another board than the bundle's (unset: nothing to say)."""
        environ = os.environ if environ is None else environ
        here = environ.get(BOARD_VARIABLE)
        names = self.manifest["board_facts"].get("pynq_board_names", [])
        if here and names and here not in names:
            raise BundleError(f"bundle {self.name} ({self.root}) was made for the {self.manifest['board']} "
                              f"(BOARD one of {', '.join(names)}); this board says BOARD={here}: install the "
                              f"bundle made for it (codesign bundle ... --board)")

    def data(self):
        """The bundle's data set (:func:`codesign.loops.data.load_npz`)."""
        from codesign.loops.data import load_npz

        return load_npz(self.data_file)


def installed_bundles() -> Dict[str, Any]:
    """Bundle name -> entry point, for every installed bundle."""
    return {entry.name: entry for entry in _entry_points(BUNDLE_GROUP)}


def installed_bundle(name: str) -> Bundle:
    """The installed bundle ``name``; a clear error lists the ones that are installed."""
    entries = installed_bundles()
    if name not in entries:
        raise BundleError(f"no bundle {name!r} is installed in {sys.prefix} (installed: "
                          f"{', '.join(sorted(entries)) or 'none'}); pip install the package codesign bundle wrote")
    module = entries[name].load()
    return Bundle(Path(module.__file__).parent)


BUNDLE_VARIABLE = "CODESIGN_BUNDLE"  # the notebooks' one setting: which bundle to open
FOLDER_MARKER = "codesign_bundle.json"  # at the top of the folder `codesign bundle --out` writes


def open_bundle(spec: str) -> Bundle:
    """The bundle ``spec`` names: an installed bundle's name (``digits_abvs-zedboard``), the folder ``codesign
    bundle --out`` wrote, or the package folder inside it. A clear error says which of these it is not."""
    path = Path(spec).expanduser()
    if path.is_dir():
        if (path / BUNDLE_INFO).is_file():
            return Bundle(path)
        packages = [child for child in sorted(path.iterdir()) if (child / BUNDLE_INFO).is_file()]
        if (path / FOLDER_MARKER).is_file() and len(packages) == 1:
            return Bundle(packages[0])
        raise BundleError(f"{path}: not a bundle folder (codesign bundle --out writes one) nor a bundle's package")
    if os.sep in spec or spec.startswith("."):
        raise BundleError(f"{path}: no such bundle folder")
    return installed_bundle(spec)


def deliver_notebooks(device, src_path, dst_path, name, folder: bool = False, overlays_res_lookup: bool = True):
    """``pynq get-notebooks`` hook: copy the bundle's notebooks to ``dst_path`` (``/name`` when ``folder``).

    PYNQ's default delivery looks overlays up per device; a bundle's
    notebooks find their overlay through the installed package instead, so a
    plain copy is all they need, on a board or off it.
    """
    target = Path(dst_path) / name if folder else Path(dst_path)
    target.mkdir(parents=True, exist_ok=True)
    for notebook in sorted(Path(src_path).glob("*.ipynb")):
        shutil.copy2(notebook, target / notebook.name)


__all__ = ["BUNDLE_GROUP", "BUNDLE_VARIABLE", "Bundle", "BundleError", "deliver_notebooks", "installed_bundle",
           "installed_bundles", "open_bundle"]
