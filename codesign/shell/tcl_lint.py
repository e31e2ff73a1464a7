"""Tcl lint of codesign's generated Vivado and Vitis HLS scripts (recorded, not executed by Vivado).

``tclsh`` runs a script on top of a *recording shim*
(``codesign/shell/tcl_lint/vivado_shim.tcl``): every Vivado/Vitis command the
scripts use is a Tcl procedure that logs its name and arguments and returns a
plausible handle. The lint therefore catches Tcl syntax errors, misspelt or
unexpected commands, block-design objects used before they exist, and lets
tests check the order and arguments of the calls. It proves nothing about
what Vivado accepts (property values, pin names of vendor IP, timing,
resources); only a real Vivado run does. Every report of it says so
(:data:`LINT_LABEL`).

tclsh 8.6 comes from the Debian package ``tcl8.6`` (``tcl`` adds the
``tclsh`` name).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from codesign.shell.build import ToolMissing

LINT_LABEL = "Tcl lint (recorded, not executed by Vivado)"
RUN_COMPLETE = "write_bitstream Complete!"
_HERE = Path(__file__).resolve().parent / "tcl_lint"
SHIM = _HERE / "vivado_shim.tcl"
DRIVER = _HERE / "run_lint.tcl"
TCLSH_PACKAGE = "tcl8.6"
TIMEOUT_S = 60.0


class TclLintError(RuntimeError):
    """tclsh stopped on a Tcl error (syntax, unknown command, a shim check) while linting a script."""


@dataclass(frozen=True, kw_only=True)
class ShimOptions:
    """How the shim pretends the tools behave: installed board parts and the status runs report.

    ``board_parts`` empty means "board files absent". ``run_status`` and
    ``run_progress`` are what every run reports after ``wait_on_run``; they
    exist only inside the lint, so that a script's completion check can be
    exercised both ways. ``env`` adds environment variables for the script.
    """

    board_parts: tuple[str, ...] = ()
    run_status: str = RUN_COMPLETE
    run_progress: str = "100%"
    env: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if isinstance(self.board_parts, str) or not all(isinstance(p, str) and p for p in self.board_parts):
            raise ValueError("board_parts must be a sequence of board-part names")
        object.__setattr__(self, "board_parts", tuple(self.board_parts))


@dataclass(frozen=True)
class RecordedCommand:
    """One command the script called, with its arguments after Tcl substitution."""

    name: str
    args: tuple[str, ...]

    def option(self, flag: str) -> str | None:
        """The value after ``flag`` in the arguments, or None."""
        if flag in self.args:
            at = self.args.index(flag)
            if at + 1 < len(self.args):
                return self.args[at + 1]
        return None


@dataclass(frozen=True)
class LintResult:
    """The recorded commands of one script and the files it opened for writing (redirected)."""

    script: Path
    commands: list[RecordedCommand]
    written: dict[str, str]
    stdout: str

    def describe(self) -> str:
        return f"{LINT_LABEL}: {self.script}: {len(self.commands)} commands recorded, script ran to its end"


def tclsh() -> str:
    found = shutil.which("tclsh") or shutil.which("tclsh8.6")
    if found is None:
        raise ToolMissing(f"tclsh is not on PATH; install it (Debian package {TCLSH_PACKAGE}) to run the Tcl lint")
    return found


def lint_script(script: Path, options: ShimOptions | None = None, *, cwd: Path | None = None) -> LintResult:
    """Run ``script`` under the recording shim; raise :class:`TclLintError` on any Tcl error."""
    options = options or ShimOptions()
    script = Path(script).resolve()
    if not script.is_file():
        raise FileNotFoundError(f"no Tcl script {script}")
    with tempfile.TemporaryDirectory(prefix="codesign-tcl-lint-") as scratch:
        scratch = Path(scratch)
        log, sandbox = scratch / "commands.jsonl", scratch / "written"
        sandbox.mkdir()
        command = [tclsh(), str(DRIVER), str(SHIM), str(script), "-log", str(log), "-sandbox", str(sandbox),
                   "-board_parts", " ".join(options.board_parts), "-run_status", options.run_status,
                   "-run_progress", options.run_progress]
        try:
            done = subprocess.run(command, cwd=cwd or script.parent, capture_output=True, text=True,
                                  timeout=TIMEOUT_S, env={**os.environ, **options.env}, check=False)
        except subprocess.TimeoutExpired:
            raise TclLintError(f"{LINT_LABEL}: {script} did not finish within {TIMEOUT_S:g} s") from None
        commands = _read_log(log) if log.is_file() else []
        if commands and commands[-1].name == "exit" and commands[-1].args != ("0",):
            raise TclLintError(f"{LINT_LABEL}: {script} called exit {' '.join(commands[-1].args)}")
        if done.returncode != 0 or not commands or commands[-1].name not in ("__end__", "exit"):
            detail = "\n".join(done.stderr.strip().splitlines()[:40]) or f"tclsh exited with status {done.returncode}"
            raise TclLintError(f"{LINT_LABEL}: {script}: {detail.removeprefix('codesign-tcl-lint-error: ')}")
        written = {path.name: path.read_text() for path in sorted(sandbox.iterdir())}
    return LintResult(script, [c for c in commands if c.name != "__end__"], written, done.stdout)


def lint_tcl(script: Path, shim_options: ShimOptions | None = None) -> list[RecordedCommand]:
    """The commands ``script`` calls, in order, when run under the shim (see :func:`lint_script`)."""
    return lint_script(script, shim_options).commands


_BACKSLASH = {"n": "\n", "t": "\t", "r": "\r", "\n": " "}


def parse_tcl_list(text: str) -> list[str]:
    """The elements of a Tcl list as Tcl itself splits it (braces, double quotes, backslashes).

    For reading recorded arguments such as ``set_property -dict [list ...]``;
    raises ValueError on an unbalanced brace or quote.
    """
    items, at, size = [], 0, len(text)
    while True:
        while at < size and text[at].isspace():
            at += 1
        if at >= size:
            return items
        if text[at] == "{":
            depth, start = 1, at + 1
            at += 1
            while at < size and depth:
                if text[at] == "\\":
                    at += 1
                elif text[at] == "{":
                    depth += 1
                elif text[at] == "}":
                    depth -= 1
                at += 1
            if depth:
                raise ValueError(f"unbalanced braces in Tcl list {text!r}")
            items.append(text[start:at - 1])
        else:
            quoted = text[at] == '"'
            at += quoted
            word = []
            while at < size and (text[at] != '"' if quoted else not text[at].isspace()):
                if text[at] == "\\" and at + 1 < size:
                    at += 1
                    word.append(_BACKSLASH.get(text[at], text[at]))
                else:
                    word.append(text[at])
                at += 1
            if quoted:
                if at >= size:
                    raise ValueError(f"unbalanced quotes in Tcl list {text!r}")
                at += 1
            items.append("".join(word))


def tcl_dict(text: str) -> dict[str, str]:
    """A recorded Tcl key/value list (``set_property -dict``) as a Python dict."""
    items = parse_tcl_list(text)
    if len(items) % 2:
        raise ValueError(f"odd number of elements in Tcl dict {text!r}")
    return dict(zip(items[::2], items[1::2]))


def _read_log(log: Path) -> list[RecordedCommand]:
    commands = []
    for line in log.read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        commands.append(RecordedCommand(record["cmd"], tuple(record["args"])))
    return commands
