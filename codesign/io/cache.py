"""The user's cache folder: where set-up puts what it fetches (the ap_types headers, the data sets) and the tools
keep what they may rebuild. ``$CODESIGN_CACHE``, else ``~/.cache/codesign``. Standard library only (the board
runtime reads its data sets through it too)."""

from __future__ import annotations

import os
from pathlib import Path


def cache_dir() -> Path:
    """The cache folder (not created here: whoever writes into it makes its own sub-folder)."""
    return Path(os.environ.get("CODESIGN_CACHE", str(Path.home() / ".cache" / "codesign")))


__all__ = ["cache_dir"]
