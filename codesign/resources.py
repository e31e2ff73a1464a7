"""Locate the data trees (hls_templates/, rtl/, boards/, examples/) in a checkout or an installed wheel.

A wheel ships them under ``codesign/_data/``; a source checkout (or an editable
install) has them at the repository root beside the package.
"""

from __future__ import annotations

from pathlib import Path

DATA_TREES = ("hls_templates", "rtl", "boards", "examples")
_PACKAGE_DIR = Path(__file__).resolve().parent


def source_tree() -> Path | None:
    """The source checkout codesign runs from (its pyproject.toml names the project ``codesign``), or None for an
    installed wheel, whose files are never written at run time."""
    project = _PACKAGE_DIR.parent / "pyproject.toml"
    if project.is_file() and 'name = "codesign"' in project.read_text(encoding="utf-8"):
        return _PACKAGE_DIR.parent
    return None


def data_dir(name: str) -> Path:
    """Return the directory of data tree ``name``; raise if this installation lacks it."""
    if name not in DATA_TREES:
        raise ValueError(f"unknown data tree {name!r}; expected one of {', '.join(DATA_TREES)}")
    for candidate in (_PACKAGE_DIR / "_data" / name, _PACKAGE_DIR.parent / name):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError(
        f"data tree {name!r} not found beside the codesign package ({_PACKAGE_DIR}); "
        "the installation is incomplete"
    )
