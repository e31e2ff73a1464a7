"""No function in codesign/ runs over 80 lines (decorators not counted, docstring and body included): a longer
one is split into its phases."""

from __future__ import annotations

import ast
from pathlib import Path

LIMIT = 80
PACKAGE = Path(__file__).resolve().parents[1] / "codesign"


def function_lengths(package: Path = PACKAGE) -> dict[str, int]:
    lengths = {}
    for path in sorted(package.rglob("*.py")):
        relative = path.relative_to(package.parent).as_posix()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=relative)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                key = f"{relative}::{node.name}"
                lengths[key] = max(lengths.get(key, 0), node.end_lineno - node.lineno + 1)
    return lengths


def test_no_function_over_the_limit():
    too_long = {key: length for key, length in function_lengths().items() if length > LIMIT}
    assert not too_long, f"functions over {LIMIT} lines (split them into their phases): {too_long}"


def test_the_limit_is_measured_from_def_to_last_line(tmp_path):
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "m.py").write_text("def f():\n" + "    x = 1\n" * (LIMIT + 1) + "\n\ndef g():\n    return 1\n")
    assert function_lengths(package) == {"pkg/m.py::f": LIMIT + 2, "pkg/m.py::g": 2}
