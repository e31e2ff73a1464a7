"""The one rule for output folders, used by every command that writes (standard library only).

A command writes into a folder that is

- **new** (it and any missing parents are created when the first file is written),
- **empty**, or
- **its own**: written before by the same command, which marks every folder it
  writes with a marker file, written first. Most commands use
  :data:`OUTPUT_MARKER` (``codesign_output.json``, naming the command); a
  command with a manifest of its own (``codesign generate``: codesign_project.json,
  ``codesign build``: design.json, ``codesign bundle``: codesign_bundle.json)
  passes that file's name and a check of its contents instead.

Anything else is refused with the folder's name, and so is a path that is a
file, lies under a file, or cannot be written (the folder, or the nearest
existing parent it would be created in). :func:`check_output_dir` applies the
rule without writing anything, so a command calls it before any expensive work
(Yosys, training, C simulation); :func:`claim_output_dir` creates the folder
and writes the marker, just before the first file. Files themselves are
written atomically (:mod:`codesign.io.reports`).
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Optional

OUTPUT_MARKER = "codesign_output.json"  # {"codesign_output": 1, "command": "<command>"}
OUTPUT_FORMAT = 1


class OutputDirError(ValueError):
    """The output folder cannot be written as asked (nothing was written)."""


def read_output_marker(folder: Path) -> Optional[str]:
    """The command named by ``folder``'s :data:`OUTPUT_MARKER`, or None when it has none (or not a readable one)."""
    path = Path(folder) / OUTPUT_MARKER
    try:
        body = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if isinstance(body, dict) and body.get("codesign_output") == OUTPUT_FORMAT and isinstance(body.get("command"), str):
        return body["command"]
    return None


def _nearest_existing(path: Path) -> Path:
    for candidate in (path, *path.parents):
        if candidate.exists() or candidate.is_symlink():
            return candidate
    return Path(path.anchor or ".")


def check_output_dir(path: Path, command: str, *, marker: str = OUTPUT_MARKER,
                     is_own: Optional[Callable[[Path], bool]] = None,
                     error: type[OutputDirError] = OutputDirError) -> Path:
    """Apply the rule to ``path`` for ``codesign <command>`` without writing anything; return ``Path(path)``.

    ``marker`` is the file that marks the command's folders; ``is_own(path)``
    (default: ``marker`` is :data:`OUTPUT_MARKER` naming ``command``) decides
    whether a folder holding no marker, or a marker, is the command's own. A
    refusal raises ``error`` (a subclass of :class:`OutputDirError`) naming the
    folder.
    """
    path = Path(path)
    usage = (f"`codesign {command}` writes into a new or empty folder, or into one it wrote before "
             f"(marked by its {marker})")
    if path.exists() and not path.is_dir():
        raise error(f"{path} exists and is not a directory: {usage}")
    if path.is_dir():
        mark = path / marker
        if mark.exists() or mark.is_symlink():
            if is_own is not None:
                own = is_own(path)
            else:
                other = read_output_marker(path)
                if other is not None and other != command:
                    raise error(f"{path} was written by `codesign {other}`, not `codesign {command}`: "
                                f"refusing to write into it; {usage}")
                own = other == command
            if not own:
                raise error(f"{mark} is not a marker of `codesign {command}`: refusing to write into {path}; {usage}")
        elif is_own is not None and is_own(path):
            pass  # a folder of this command from before it wrote a marker
        else:
            try:
                empty = not any(path.iterdir())
            except OSError as err:
                raise error(f"{path} cannot be read ({err.strerror}): refusing to write into it") from None
            if not empty:
                raise error(f"{path} exists, is not empty and holds no {marker}: refusing to write into it; {usage}")
        if not os.access(path, os.W_OK | os.X_OK):
            raise error(f"{path} is not writable: refusing to write into it")
        return path
    existing = _nearest_existing(path.absolute())
    if not existing.is_dir():
        raise error(f"{path} is not writable: {existing} is a file, not a folder to create it in")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise error(f"{path} is not writable: {existing} is a read-only folder, {path} cannot be created in it")
    return path


def claim_output_dir(path: Path, command: str, *, marker: str = OUTPUT_MARKER,
                     is_own: Optional[Callable[[Path], bool]] = None,
                     error: type[OutputDirError] = OutputDirError) -> Path:
    """Check ``path`` (:func:`check_output_dir`), create it and, for :data:`OUTPUT_MARKER`, write the marker first.

    A command with a marker of its own writes that marker itself, as its first file.
    """
    path = check_output_dir(path, command, marker=marker, is_own=is_own, error=error)
    try:
        path.mkdir(parents=True, exist_ok=True)
        if marker == OUTPUT_MARKER and read_output_marker(path) != command:
            body = json.dumps({"codesign_output": OUTPUT_FORMAT, "command": command}, indent=2, sort_keys=True)
            _write_atomic(path / OUTPUT_MARKER, body + "\n")
    except OSError as err:
        raise error(f"{path} cannot be written ({err.strerror or err}): refusing to write into it") from None
    return path


@contextmanager
def output_dir(path: Path, command: str, *, marker: str = OUTPUT_MARKER,
               is_own: Optional[Callable[[Path], bool]] = None,
               error: type[OutputDirError] = OutputDirError) -> Iterator[Path]:
    """:func:`claim_output_dir` for the body of a ``with``; when the body fails having written nothing, undo the claim.

    Only what the claim itself created goes: folders that did not exist before
    and the marker, and only while nothing else was written into them.
    """
    path = Path(path)
    created = [folder for folder in (path, *path.parents) if not (folder.exists() or folder.is_symlink())]
    had_marker = (path / marker).exists()
    claim_output_dir(path, command, marker=marker, is_own=is_own, error=error)
    try:
        yield path
    except BaseException:
        _undo(path, created, None if had_marker or marker != OUTPUT_MARKER else path / OUTPUT_MARKER)
        raise


def _undo(path: Path, created: list[Path], marker: Optional[Path]) -> None:
    try:
        if marker is not None and [entry.name for entry in path.iterdir()] == [marker.name]:
            marker.unlink()
        for folder in created:  # deepest first
            folder.rmdir()
    except OSError:
        pass  # something else is in there now: leave it


def _write_atomic(path: Path, text: str) -> None:
    handle, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as stream:
            stream.write(text)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
