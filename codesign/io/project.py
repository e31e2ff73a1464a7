"""The marker of a generated HLS project (``codesign_project.json``): what wrote the folder, for which PE and spec.

Written by :mod:`codesign.hw.render`; read by the renderer (to refuse a
folder that is not its own) and by the emulated board (to refuse a stale
render), so reading it needs nothing but the standard library.
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

from codesign.io.jsonfile import JsonFileError, load_json
from codesign.io.outdir import OutputDirError

PROJECT_MARKER = "codesign_project.json"
PROJECT_FORMAT = 1


class ProjectDirError(OutputDirError, RuntimeError):
    """The output directory cannot take a codesign project (nothing was written), or its marker is not ours."""


def read_project_marker(directory: Path) -> Optional[dict]:
    """The marker of a codesign project in ``directory``, or None when there is none.

    A marker that exists but is not ours raises :class:`ProjectDirError`.
    """
    path = Path(directory) / PROJECT_MARKER
    if not path.is_file():
        return None
    try:
        body = load_json(path, what="codesign project manifest")
    except JsonFileError as error:
        raise ProjectDirError(str(error)) from None
    if not isinstance(body, dict) or body.get("codesign_project") != PROJECT_FORMAT or "pe" not in body:
        raise ProjectDirError(f"{path} is not a codesign project manifest")
    return body
