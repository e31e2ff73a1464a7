"""Atomic report writing: a reader never sees half a file, and a crash never leaves one."""

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


def write_figure_png(figure, path: Path, *, dpi: int | None = None) -> Path:
    """Render a matplotlib figure to PNG bytes, close it, and write the file atomically."""
    import io

    import matplotlib.pyplot as plt

    buffer = io.BytesIO()
    try:
        figure.savefig(buffer, format="png", **({} if dpi is None else {"dpi": dpi}))
    finally:
        plt.close(figure)
    return write_bytes_atomic(Path(path), buffer.getvalue())
