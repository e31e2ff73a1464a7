"""Reading back the JSON files codesign wrote (caches, results, reports): one loader that names the file and field.

A cache or result file may be truncated (a killed run, a full disk), edited by
hand, or written by another version. :func:`load_json` turns every such case
into a :class:`JsonFileError` (a ``ValueError``) whose message starts with the
file's path and says what the file is and which field is missing or of the
wrong type, instead of a ``KeyError`` or ``AttributeError`` far from the file.
Standard library only.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Union

Kind = Union[type, tuple[type, ...]]

_JSON_NAMES = {dict: "an object", list: "an array", str: "a string", int: "an integer", float: "a number",
               bool: "true or false", type(None): "null"}


class JsonFileError(ValueError):
    """A JSON file codesign reads back is missing, unreadable, not JSON, or lacks a field; the message names both."""


def _json_name(value: Any) -> str:
    return _JSON_NAMES.get(type(value), type(value).__name__)


def _kind_name(kind: Kind) -> str:
    kinds = kind if isinstance(kind, tuple) else (kind,)
    return " or ".join(_JSON_NAMES.get(k, k.__name__) for k in kinds)


def _has_kind(value: Any, kind: Kind) -> bool:
    kinds = kind if isinstance(kind, tuple) else (kind,)
    if isinstance(value, bool):  # JSON true is not the number 1
        return bool in kinds
    if isinstance(value, int) and float in kinds:  # 3 is a valid number where a float is wanted
        return True
    return isinstance(value, kinds)


def _lookup(body: Any, field: str) -> tuple[bool, Any]:
    """(found, value) of a dotted field: ``entries.0.counts`` is ``body["entries"][0]["counts"]``."""
    value = body
    for part in field.split("."):
        if isinstance(value, dict) and part in value:
            value = value[part]
        elif isinstance(value, list) and part.isdigit() and int(part) < len(value):
            value = value[int(part)]
        else:
            return False, None
    return True, value


def check_regular_file(path: Path, *, what: str, error: type = ValueError) -> None:
    """``path`` is a regular file, or ``error`` says what it is instead: missing, a folder, a symlink loop, or a
    FIFO, device or socket (which a reader would block on or read forever)."""
    import stat

    path = Path(path)
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        raise error(f"{path}: {what}: the file does not exist") from None
    except RuntimeError:  # pathlib's "Symlink loop" on Python < 3.13
        raise error(f"{path}: {what}: a symbolic link loop, not a file") from None
    except OSError as problem:
        reason = "a symbolic link loop" if problem.errno == 40 else (problem.strerror or str(problem))
        raise error(f"{path}: {what}: cannot be read ({reason})") from None
    if stat.S_ISDIR(mode):
        raise error(f"{path}: {what}: a folder, not a file")
    if not stat.S_ISREG(mode):
        kind = "a FIFO" if stat.S_ISFIFO(mode) else "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) else \
            "a socket" if stat.S_ISSOCK(mode) else "not a regular file"
        raise error(f"{path}: {what}: {kind}, not a regular file")


def read_text_file(path: Path, *, what: str) -> str:
    """The UTF-8 text of ``path``; a missing, unreadable or non-UTF-8 file raises :class:`JsonFileError` naming it.

    Shared by :func:`load_json` and the readers of other text files a user
    hands over (a README to rewrite), so every one names the file the same way.
    """
    path = Path(path)
    check_regular_file(path, what=what, error=JsonFileError)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise JsonFileError(f"{path}: {what}: the file does not exist") from None
    except IsADirectoryError:
        raise JsonFileError(f"{path}: {what}: a folder, not a file") from None
    except OSError as error:
        raise JsonFileError(f"{path}: {what}: cannot be read ({error.strerror or error})") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise JsonFileError(f"{path}: {what}: not UTF-8 text (offset {error.start})") from None


def load_json(path: Path, *, what: str, required: Mapping[str, Kind] | None = None) -> Any:
    """The JSON value in ``path`` (``what`` says what the file is, e.g. "Yosys estimate cache entry").

    ``required`` maps field names (dotted for nested objects and array items:
    ``"entries.0.counts"``) to the type or types each must have; with it the
    file must hold an object. Any problem raises :class:`JsonFileError`
    ``"<path>: <what>: ..."`` naming the field.
    """
    path = Path(path)
    text = read_text_file(path, what=what)
    try:
        body = json.loads(text)
    except json.JSONDecodeError as error:
        # an error at the very end, or a string never closed, is what a file cut short looks like
        truncated = error.pos >= len(text.rstrip()) or error.msg.startswith("Unterminated string")
        hint = " (truncated?)" if truncated else ""
        raise JsonFileError(f"{path}: {what}: not valid JSON{hint}: {error.msg} (line {error.lineno}, "
                            f"column {error.colno})") from None
    if required is None:
        return body
    if not isinstance(body, dict):
        raise JsonFileError(f"{path}: {what}: expected a JSON object, got {_json_name(body)}")
    for field, kind in required.items():
        found, value = _lookup(body, field)
        if not found:
            raise JsonFileError(f"{path}: {what}: field {field} missing")
        if not _has_kind(value, kind):
            raise JsonFileError(f"{path}: {what}: field {field} has the wrong type: expected {_kind_name(kind)}, "
                                f"got {_json_name(value)}")
    return body
