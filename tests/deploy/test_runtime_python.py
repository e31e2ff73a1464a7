"""The board runtime's import closure, and the oldest Python it must run on (vermin)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import grimp

REPO = Path(__file__).resolve().parents[2]
OLDEST_PYTHON = "3.8"  # PYNQ 2.7 images (Ubuntu 20.04)


def runtime_files() -> list[Path]:
    """Source files of codesign.deploy and every codesign module it imports, directly or not."""
    from codesign.pe import CYCLE_MODELS

    graph = grimp.build_graph("codesign", exclude_type_checking_imports=True)  # what runs, not what is typed
    # the cycle models the PE registry imports by name for deploy (codesign.pe.transaction_cycles): grimp cannot see them
    modules = {"codesign.deploy", *graph.find_descendants("codesign.deploy"),
               *(target.split(":")[0] for target in CYCLE_MODELS.values())}
    closure = set(modules)
    for module in modules:
        closure |= graph.find_upstream_modules(module)
    files = []
    for module in sorted(m for m in closure if m.startswith("codesign")):
        path = REPO / Path(*module.split("."))
        files.append(path / "__init__.py" if path.is_dir() else path.with_suffix(".py"))
    return files


def test_the_runtime_is_the_deploy_layer_and_what_sits_below_it():
    names = {str(path.relative_to(REPO)) for path in runtime_files()}
    assert "codesign/deploy/overlay.py" in names and "codesign/loops/fb.py" in names
    assert not any(name.startswith(("codesign/train/", "codesign/design/", "codesign/cli")) for name in names)


def test_vermin_finds_nothing_newer_than_the_oldest_image_python():
    files = runtime_files()
    done = subprocess.run([str(Path(sys.executable).with_name("vermin")), f"--target={OLDEST_PYTHON}-", "--violations",
                           "--no-tips", "--backport", "dataclasses", "--backport", "typing", *map(str, files)],
                          capture_output=True, text=True)
    assert done.returncode == 0, f"vermin on {len(files)} runtime files:\n{done.stdout[-4000:]}{done.stderr[-2000:]}"
