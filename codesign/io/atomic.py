"""Atomic file writing: a reader never sees half a file, and a crash never leaves one.

Standard library only, so the board runtime writes its reports with it too;
:mod:`codesign.io.reports` adds figures (matplotlib) on top.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path


def write_bytes_atomic(path: Path, data: bytes) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(handle, "wb") as stream:
            stream.write(data)
        os.chmod(tmp, 0o644)  # mkstemp creates 0600; reports and projects are meant to be read by others
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def write_text_atomic(path: Path, text: str) -> Path:
    return write_bytes_atomic(path, text.encode())


def write_json_atomic(path: Path, payload: object) -> Path:
    return write_text_atomic(path, json.dumps(payload, indent=2, sort_keys=True) + "\n")


__all__ = ["write_bytes_atomic", "write_json_atomic", "write_text_atomic"]
