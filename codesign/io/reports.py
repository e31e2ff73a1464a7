"""Atomic report writing: a reader never sees half a file, and a crash never leaves one (figures too)."""

from __future__ import annotations

from pathlib import Path

from codesign.io.atomic import write_bytes_atomic, write_json_atomic, write_text_atomic


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


__all__ = ["write_bytes_atomic", "write_figure_png", "write_json_atomic", "write_text_atomic"]
