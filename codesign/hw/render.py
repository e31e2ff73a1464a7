"""Render hardware projects from the Jinja2 templates in ``hls_templates/`` and write them safely.

Templates hold tops, configs, pragmas and Tcl only; the arithmetic lives in
tested C++ headers under ``hls_templates/include/`` that are copied verbatim.
Rendering is strict (a missing variable is an error, never an empty string)
and deterministic (same spec, byte-identical files), and writing happens only
after every file has rendered, so an invalid spec never leaves a half-written
project behind.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path, PurePosixPath

import jinja2

from codesign.io.outdir import check_output_dir as check_folder
from codesign.io.project import PROJECT_FORMAT as MANIFEST_FORMAT
from codesign.io.project import PROJECT_MARKER as MANIFEST_NAME
from codesign.io.project import ProjectDirError
from codesign.io.project import read_project_marker as read_manifest
from codesign.io.reports import write_bytes_atomic

from codesign.resources import data_dir

INCLUDE_DIR = "include"  # hls_templates/include: hand-written headers copied into projects

_TCL_ESCAPES = {"\\": "\\\\", '"': '\\"', "$": "\\$", "[": "\\[", "]": "\\]", "\n": "\\n", "\t": "\\t", "\r": "\\r"}
_TCL_BARE = re.compile(r"^[A-Za-z0-9_.,:/+=@%-]+$")


class RenderError(ValueError):
    """A template, a context value or a file set cannot be rendered as asked."""


def tcl_quote(value: object) -> str:
    """One Tcl word holding exactly ``str(value)``.

    Plain words (letters, digits and ``_.,:/+=@%-``) stay bare; anything else is
    double-quoted with ``\\ " $ [ ]`` and control characters escaped, so no
    value can start a command substitution, a variable reference or a new
    command. Other control characters are refused.
    """
    if isinstance(value, bool) or value is None:
        raise RenderError(f"refusing to put {value!r} into Tcl: pass a string or a number")
    text = str(value)
    if _TCL_BARE.match(text):
        return text
    bad = [ch for ch in text if ord(ch) < 0x20 and ch not in _TCL_ESCAPES or ord(ch) == 0x7F]
    if bad:
        raise RenderError(f"refusing to put control character {bad[0]!r} into Tcl")
    return '"' + "".join(_TCL_ESCAPES.get(ch, ch) for ch in text) + '"'


def c_string(value: object) -> str:
    """A C/C++ string literal holding ``str(value)`` (printable ASCII only)."""
    text = str(value)
    if any(not 0x20 <= ord(ch) < 0x7F for ch in text):
        raise RenderError(f"refusing non-printable or non-ASCII text in a C string: {text!r}")
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("?", "\\?") + '"'


@cache
def environment() -> jinja2.Environment:
    """The shared template environment: strict, newline-preserving, no autoescape (C++/Tcl, not HTML)."""
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(data_dir("hls_templates"))),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
        autoescape=False,
    )
    env.filters["tcl_quote"] = tcl_quote
    env.filters["c_string"] = c_string
    return env


def render_template(name: str, context: Mapping[str, object]) -> str:
    """Render one template; undefined variables and template errors become :class:`RenderError`."""
    try:
        return environment().get_template(name).render(**context)
    except jinja2.UndefinedError as error:
        raise RenderError(f"template {name}: {error.message}") from error
    except jinja2.TemplateNotFound as error:
        raise RenderError(f"no template {error.name!r} under {data_dir('hls_templates')}") from error
    except jinja2.TemplateSyntaxError as error:
        raise RenderError(f"template {error.name or name} line {error.lineno}: {error.message}") from error


def include_header(name: str) -> bytes:
    """The bytes of a hand-written header from ``hls_templates/include`` (copied, never rendered)."""
    path = data_dir("hls_templates") / INCLUDE_DIR / name
    if PurePosixPath(name).name != name or not path.is_file():
        raise RenderError(f"no header {name!r} in {path.parent}")
    return path.read_bytes()


@dataclass(frozen=True)
class ProjectFiles:
    """Everything one project consists of, in memory: ``files`` maps a relative POSIX path to bytes."""

    pe: str
    spec: Mapping[str, object]
    files: Mapping[str, bytes]
    target: Mapping[str, object] | None = None  # the build target (part, clock, interface, top)

    def __post_init__(self) -> None:
        if not self.files:
            raise RenderError("a project needs at least one file")
        for rel in self.files:
            _check_relpath(rel)
            if not isinstance(self.files[rel], bytes):
                raise RenderError(f"{rel}: file contents must be bytes")
        if MANIFEST_NAME in self.files:
            raise RenderError(f"{MANIFEST_NAME} is written by the renderer itself")

    def manifest(self) -> bytes:
        """The project marker: PE, spec, build target and generated file list, as canonical JSON."""
        body = {
            "codesign_project": MANIFEST_FORMAT,
            "pe": self.pe,
            "spec": dict(self.spec),
            "files": sorted(self.files),
        }
        if self.target is not None:
            body["target"] = dict(self.target)
        return (json.dumps(body, indent=2, sort_keys=True) + "\n").encode()


def _check_relpath(rel: str) -> None:
    path = PurePosixPath(rel)
    if not rel or path.is_absolute() or ".." in path.parts or "\\" in rel or str(path) != rel:
        raise RenderError(f"project file path {rel!r} must be a plain relative POSIX path")


def is_project_dir(out_dir: Path) -> bool:
    """True when ``out_dir`` holds a codesign project's marker (a marker that is not ours raises ProjectDirError)."""
    return read_manifest(Path(out_dir)) is not None


def check_output_dir(out_dir: Path, command: str = "generate") -> dict | None:
    """The output-folder rule (:mod:`codesign.io.outdir`) for a project; return the earlier project's manifest.

    ``out_dir`` must be missing, empty or an earlier codesign project, and writable.
    """
    out_dir = check_folder(Path(out_dir), command, marker=MANIFEST_NAME, is_own=is_project_dir, error=ProjectDirError)
    return read_manifest(out_dir) if out_dir.is_dir() else None


def write_project(out_dir: Path, project: ProjectFiles) -> list[Path]:
    """Write a fully rendered project into ``out_dir``; return the written paths (manifest first).

    ``out_dir`` may be missing, empty or an earlier codesign project (files that
    project generated and this one does not are removed). Each file is replaced
    atomically. The manifest goes first, so an interrupted write still leaves a
    directory that a rerun may overwrite.
    """
    out_dir = Path(out_dir)
    old = check_output_dir(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    written = [out_dir / MANIFEST_NAME]
    write_bytes_atomic(written[0], project.manifest())
    for rel in sorted(project.files):
        target = out_dir / rel
        write_bytes_atomic(target, project.files[rel])
        written.append(target)
    for rel in (old or {}).get("files", []):
        if isinstance(rel, str) and rel not in project.files:
            try:
                _check_relpath(rel)
            except RenderError:
                continue
            stale = out_dir / rel
            if stale.is_file() and not stale.is_symlink():
                stale.unlink()
    return written
