"""Every repository path that README.md and docs/*.md name exists.

A *path* is a token that starts with one of the repository's top-level folders (``codesign/``, ``tests/``,
``docs/``, ``rtl/``, ``hls_templates/``, ``boards/``, ``examples/``, ``benchmarks/``, ``notebooks/``,
``results/``, ``.ci/``) or is a top-level file (``Makefile``, ``pyproject.toml``, ``requirements-lock.txt``).
Trailing punctuation, ``:line`` and ``::test`` suffixes and ``#anchors`` are stripped; a token holding a
placeholder or a pattern (``<``, ``>``, ``*``, ``{``) names many files and is skipped. Each path must exist
relative to the repository root. Relative Markdown links ``[text](target)`` must resolve from the folder of
the file that holds them. Dotted module names (``codesign.step.tt.step``, ``codesign.shell.ip.register_map``)
must name a module or package under ``codesign/``, and a name after the module must occur in its source.

Not checked: paths under ``out/`` or ``build/``, and any other path that ``.gitignore`` ignores (such as
``results/tt/tasks/``): a command writes them at run time, so they exist only after a run.
"""

from __future__ import annotations

import fnmatch
import re
from pathlib import Path, PurePosixPath

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = ("codesign", "tests", "docs", "rtl", "hls_templates", "boards", "examples", "benchmarks", "notebooks",
           "results", ".ci")
TOP_FILES = ("Makefile", "pyproject.toml", "requirements-lock.txt")

_PATH = re.compile(r"(?<![\w./~@-])(?:(?:" + "|".join(re.escape(f) for f in FOLDERS) + r")/[^\s`'\"()\[\],;|]*"
                   r"|(?:" + "|".join(re.escape(f) for f in TOP_FILES) + r")(?![\w.-]))")
_LINK = re.compile(r"\[[^\]\n]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
_MODULE = re.compile(r"(?<![\w./-])codesign(?:\.[A-Za-z_]\w*)+")
_SKIP = set("<>*{")


def doc_files(root: Path = ROOT) -> list[Path]:
    return [root / "README.md", *sorted((root / "docs").glob("*.md"))]


def _clean(token: str) -> str:
    token = token.split("#", 1)[0].split("::", 1)[0]
    token = re.sub(r":\d+(?:-\d+)?$", "", token)
    return token.rstrip(".,;:!?'\")")


def path_tokens(text: str) -> list[str]:
    """The repository paths a text names, placeholders and patterns left out."""
    tokens = []
    for match in _PATH.finditer(text):
        token = _clean(match.group(0))
        if token and not (_SKIP & set(token)):
            tokens.append(token)
    return tokens


def link_targets(text: str) -> list[str]:
    """Relative Markdown link targets, anchors stripped (web and mail links and bare anchors left out)."""
    targets = []
    for match in _LINK.finditer(text):
        target = match.group(1)
        if re.match(r"^[a-z][a-z0-9+.-]*:", target) or target.startswith("#"):
            continue
        target = target.split("#", 1)[0]
        if target and not (_SKIP & set(target)):
            targets.append(target)
    return targets


def generated(token: str, root: Path = ROOT) -> bool:
    """Whether ``.gitignore`` ignores ``token`` or a folder above it: a path a run writes, not a repository path."""
    ignore = root / ".gitignore"
    patterns = [line.strip() for line in ignore.read_text(encoding="utf-8").splitlines()
                if line.strip() and not line.startswith(("#", "!"))] if ignore.exists() else []
    parts = PurePosixPath(token).parts
    for depth in range(1, len(parts) + 1):
        here = "/".join(parts[:depth])
        for pattern in patterns:
            bare = pattern.strip("/")
            anchored = "/" in pattern.rstrip("/")
            if fnmatch.fnmatchcase(here if anchored else parts[depth - 1], bare):
                return True
    return False


def _module_missing(name: str, root: Path) -> bool:
    parts = name.split(".")
    base = root
    source = None
    i = 0
    while i < len(parts):
        package = base / parts[i]
        module = base / f"{parts[i]}.py"
        if package.is_dir() and (package / "__init__.py").exists():
            base, source = package, package / "__init__.py"
        elif module.exists():
            base, source = None, module
            i += 1
            break
        else:
            break
        i += 1
    if source is None:
        return True
    if i >= len(parts):
        return False
    # the first name after the module must occur in the module's source (defined, imported or assigned there)
    return re.search(rf"\b{re.escape(parts[i])}\b", source.read_text(encoding="utf-8")) is None


def missing_in(doc: Path, root: Path = ROOT) -> list[str]:
    """Every path, link target and module name of one Markdown file that does not exist, as 'file: token'."""
    text = doc.read_text(encoding="utf-8")
    where = doc.relative_to(root)
    missing = [f"{where}: {token}" for token in path_tokens(text)
               if not (root / token).exists() and not generated(token, root)]
    missing += [f"{where}: link ({target})" for target in link_targets(text)
                if not (doc.parent / target).exists()]
    missing += [f"{where}: module {name}" for name in sorted(set(_MODULE.findall(text)))
                if _module_missing(name, root)]
    return sorted(set(missing))


def test_every_named_path_exists():
    missing = [m for doc in doc_files() for m in missing_in(doc)]
    assert missing == [], f"{len(missing)} stale path(s) in README.md and docs/*.md:\n" + "\n".join(missing)


def test_the_check_finds_a_wrong_path(tmp_path):
    """The checker is not vacuous: a wrong path, a broken link and a moved module are each reported."""
    (tmp_path / "codesign" / "step").mkdir(parents=True)
    (tmp_path / "codesign" / "__init__.py").write_text("")
    (tmp_path / "codesign" / "step" / "__init__.py").write_text("")
    (tmp_path / "codesign" / "step" / "time.py").write_text("def step_time():\n    pass\n")
    (tmp_path / ".gitignore").write_text("out/\nresults/*/tasks/\n")
    (tmp_path / "docs").mkdir()
    doc = tmp_path / "docs" / "page.md"
    doc.write_text("See `codesign/step/time.py:12`, codesign/design/step_time.py, `codesign/pe/<name>/`,\n"
                   "[here](../codesign/step/time.py#top), [there](missing.md), `codesign.step.time.step_time`,\n"
                   "`codesign.design.step_time`, `codesign.step.time.gone`, `out/demo/index.html`, "
                   "`results/tt/tasks/`, `results/tt/table.md` and tests/rtl/test_stream_rtl.py.\n")
    assert missing_in(doc, tmp_path) == sorted([
        "docs/page.md: codesign/design/step_time.py",
        "docs/page.md: link (missing.md)",
        "docs/page.md: module codesign.design.step_time",
        "docs/page.md: module codesign.step.time.gone",
        "docs/page.md: results/tt/table.md",
        "docs/page.md: tests/rtl/test_stream_rtl.py",
    ])
