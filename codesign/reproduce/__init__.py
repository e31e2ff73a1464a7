"""Paper reproductions, one module each: ``run(out_dir, *, seeds, smoke) -> results dict``.

``smoke=True`` shrinks every budget to seconds for the test suite; the full
runs are ``codesign reproduce NAME`` / ``make reproduce``.
"""

from __future__ import annotations

import importlib
from pathlib import Path

REPRODUCTIONS = ("smd", "slu", "psg", "e2train", "cpt", "abvs", "compressed", "csb-utilisation", "tt")


def reproduction(name: str):
    if name not in REPRODUCTIONS:
        raise ValueError(f"unknown reproduction {name!r}; expected one of {', '.join(REPRODUCTIONS)}")
    return importlib.import_module(f"codesign.reproduce.{name.replace('-', '_')}")  # module names use _


def check_output_dir(path: Path) -> Path:
    """Fail before training if the report directory cannot be written."""
    path = Path(path)
    try:
        path.mkdir(parents=True, exist_ok=True)
        probe = path / ".codesign-write-test"
        probe.write_text("")
        probe.unlink()
    except OSError as error:
        raise ValueError(f"report directory {path} is not writable: {error}") from None
    return path
