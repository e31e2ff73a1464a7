"""Locate (and on request fetch) the Apache-2.0 ap_types headers for C simulation without Xilinx tools.

The headers (ap_int.h, ap_fixed.h, hls_stream.h, ...) ship inside the PyPI
wheel of hls4ml 1.3.0 under ``hls4ml/templates/vivado/ap_types/``. codesign
extracts them at set-up into a cache directory; they are never part of the
repository. Search order: ``$CODESIGN_AP_TYPES``, then the cache
(``$CODESIGN_CACHE`` or ``~/.cache/codesign``) under ``ap_types/``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from codesign.io.cache import cache_dir

HLS4ML_WHEEL = "hls4ml==1.3.0"
WHEEL_PREFIX = "hls4ml/templates/vivado/ap_types/"
REQUIRED_HEADERS = ("ap_int.h", "ap_fixed.h", "hls_stream.h")


def _complete(directory: Path) -> bool:
    return all((directory / header).is_file() for header in REQUIRED_HEADERS)


def ap_types_dir() -> Path:
    """The include directory holding ap_int.h; a clear error says how to get it."""
    override = os.environ.get("CODESIGN_AP_TYPES")
    if override:
        if not _complete(Path(override)):
            raise FileNotFoundError(f"CODESIGN_AP_TYPES={override} does not hold {', '.join(REQUIRED_HEADERS)}")
        return Path(override)
    cached = cache_dir() / "ap_types"
    if _complete(cached):
        return cached
    raise FileNotFoundError(
        f"ap_types headers not found in {cached}; run `codesign setup` (it extracts them from the {HLS4ML_WHEEL} wheel)"
    )


def install_ap_types() -> Path:
    """Download the hls4ml wheel (no dependencies) and extract ap_types into the cache; idempotent."""
    target = cache_dir() / "ap_types"
    if _complete(target):
        return target
    with tempfile.TemporaryDirectory() as scratch:
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "--no-deps", "--quiet", "-d", scratch, HLS4ML_WHEEL],
            check=True,
        )
        wheel = next(Path(scratch).glob("hls4ml-*.whl"))
        staging = Path(scratch) / "ap_types"
        with zipfile.ZipFile(wheel) as archive:
            for member in archive.namelist():
                if member.startswith(WHEEL_PREFIX) and not member.endswith("/"):
                    destination = staging / member[len(WHEEL_PREFIX) :]
                    destination.parent.mkdir(parents=True, exist_ok=True)
                    destination.write_bytes(archive.read(member))
        if not _complete(staging):
            raise RuntimeError(f"{wheel.name} does not contain {', '.join(REQUIRED_HEADERS)} under {WHEEL_PREFIX}")
        target.parent.mkdir(parents=True, exist_ok=True)
        if target.exists():
            shutil.rmtree(target)
        shutil.move(str(staging), str(target))
    return target
