"""The board runtime in virtual environments that hold what a PYNQ image holds, and nothing of the desktop.

Each environment is a fresh venv of the image's Python with its pynq and the
oldest NumPy that installs beside it, then the codesign wheel with its core
dependencies only (no torch, scikit-learn, jinja2, matplotlib). In it:

- importing :mod:`codesign.deploy` must pull in none of the desktop's packages;
- ``python -m codesign.deploy.selfcheck`` trains each PE family's design
  through the driver on the emulated board and through the golden loop, and
  every state word must be equal;
- the bundle ``codesign bundle`` writes installs from its wheel, ``pynq
  get-notebooks``' delivery hook copies its notebook out of the package, and
  the notebook runs there (nbclient, in its quick mode) on the emulated board;
- the repository's board notebooks (``notebooks/02`` to ``04``) run there too,
  each on its design's installed bundle named by ``CODESIGN_BUNDLE``.

The build folders and the data file are written here on the desktop, as
``codesign build`` / ``codesign bundle`` would. Interpreters come from
pyenv (``~/.pyenv/versions``) or PATH; a missing one skips its environment
with the reason.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from codesign.bundle import write_bundle
from codesign.design import load_design
from codesign.design.build import write_emulation_folder
from codesign.loops.data import save_npz
from codesign.train.data import load_digits_dataset

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"
DESIGNS = {"fpmac_array": "digits_abvs.toml", "csb": "digits_compressed_mlp.toml", "tt": "digits_tt.toml"}
# name -> (Python of the image, what the image's pip holds)
IMAGES = {
    # PYNQ 3.0/3.0.1/3.1 images (Ubuntu 22.04): pynq 3.0.1 imports pycparser.plyparser, gone in pycparser 3
    "pynq-3.0.1-py3.10": ("3.10", ["pynq==3.0.1", "numpy==1.21.2", "pycparser==2.21"]),
    "pynq-4.0.0-py3.12": ("3.12", ["pynq==4.0.0"]),  # pynq 4.0: Ubuntu 24.04, Python 3.12
}
FORBIDDEN = ("torch", "sklearn", "scipy", "jinja2", "matplotlib", "cocotb", "dask", "codesign.train",
             "codesign.design", "codesign.cli")


def interpreter(version: str) -> str | None:
    pyenv = sorted(Path.home().glob(f".pyenv/versions/{version}.*/bin/python"))
    return str(pyenv[-1]) if pyenv else shutil.which(f"python{version}")


def _run(args, **kwargs) -> subprocess.CompletedProcess:
    done = subprocess.run(args, capture_output=True, text=True, **kwargs)
    assert done.returncode == 0, f"{' '.join(map(str, args))}\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}"
    return done


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    _run([sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(out), str(REPO)])
    return next(out.glob("codesign-*.whl"))


@pytest.fixture(scope="module")
def board_files(tmp_path_factory) -> dict:
    root = tmp_path_factory.mktemp("board")
    folders = {family: write_emulation_folder(load_design(EXAMPLES / name), root / family)
               for family, name in DESIGNS.items()}
    return {"folders": folders, "data": save_npz(load_digits_dataset(validation_fraction=0.2), root / "digits.npz")}


@pytest.fixture(scope="module")
def bundles(tmp_path_factory):
    """Bundles of the three loop families the runtime trains."""
    root = tmp_path_factory.mktemp("bundle")
    return [write_bundle(load_design(EXAMPLES / DESIGNS[family]), root / family) for family in DESIGNS]


REPO_NOTEBOOKS = {"fpmac_array": "02_train_on_board.ipynb", "csb": "03_compressed_on_board.ipynb",
                  "tt": "04_tt_on_board.ipynb"}


DELIVER = ("import sys\n"
           "from codesign.deploy.bundle import installed_bundles\n"
           "from importlib import metadata\n"
           "found = metadata.entry_points()\n"
           "group = found.select(group='pynq.notebooks') if hasattr(found, 'select') else found['pynq.notebooks']\n"
           "(entry,) = [e for e in group if e.name == sys.argv[1]]\n"
           "module = entry.load()\n"
           "from pathlib import Path\n"
           "module.deliver_notebooks(None, Path(module.__file__).parent, sys.argv[2], entry.name, folder=True)\n"
           "print(sorted(installed_bundles()))\n")


def venv_report(python: Path) -> dict:
    """Installed distributions with their sizes (KiB on disk), from inside the venv."""
    script = ("import json, importlib.metadata as m, pathlib\n"
              "out = {}\n"
              "for d in m.distributions():\n"
              "    size = sum(pathlib.Path(d.locate_file(f)).stat().st_size for f in (d.files or [])\n"
              "               if pathlib.Path(d.locate_file(f)).is_file())\n"
              "    out[d.metadata['Name']] = [d.version, size // 1024]\n"
              "print(json.dumps(out))\n")
    return json.loads(_run([str(python), "-c", script]).stdout)


@pytest.mark.parametrize("image", sorted(IMAGES))
def test_runtime_trains_bit_identically_in_an_image_like_venv(image, wheel, board_files, bundles, tmp_path):
    version, image_packages = IMAGES[image]
    base = interpreter(version)
    if base is None:
        pytest.skip(f"no Python {version} interpreter here (pyenv or PATH) for the {image} image")
    venv = tmp_path / image
    started = time.perf_counter()
    _run([base, "-m", "venv", str(venv)])
    python = venv / "bin" / "python"
    pip = [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
    _run([*pip, "--only-binary=numpy", *image_packages])
    constraints = tmp_path / "image-constraints.txt"
    constraints.write_text("\n".join(image_packages) + "\n")
    _run([*pip, "-c", str(constraints), str(wheel)])  # the core's own dependencies, within the image's
    install_s = time.perf_counter() - started
    installed = venv_report(python)
    heavy = sorted(set(installed) & {"torch", "scikit-learn", "scipy", "Jinja2", "jinja2", "matplotlib", "cocotb",
                                      "dask"})
    assert not heavy, f"the runtime's install pulled in {heavy}"

    imported = json.loads(_run([str(python), "-c", "import sys, json, codesign.deploy, codesign.deploy.selfcheck\n"
                                "print(json.dumps(sorted(sys.modules)))"]).stdout)
    leaked = sorted(m for m in imported if m.startswith(FORBIDDEN))
    assert not leaked, f"importing the runtime loaded {leaked}"

    env = {**os.environ, "PYTHONPATH": ""}
    reports = []
    for family, folder in board_files["folders"].items():
        done = subprocess.run([str(python), "-m", "codesign.deploy.selfcheck", str(folder), str(board_files["data"]),
                               "--steps", "2", "--emulate"], capture_output=True, text=True, env=env, cwd=tmp_path)
        assert done.returncode == 0, f"{family}: {done.stdout[-2000:]}\n{done.stderr[-3000:]}"
        report = json.loads(done.stdout.strip().splitlines()[-1])
        assert report["family"] == family and report["emulated"]
        assert report["compared"] > 0 and report["differ"] == 0
        assert report["same_accuracy"] and report["steps"] == 4
        assert report["python"].startswith(version) and report["pynq"] == image_packages[0].split("==")[1]
        reports.append(report)
    # the bundles: their wheels name only the runtime; each notebook is delivered and runs from the package's files
    _run([*pip, "-c", str(constraints), *(str(bundle.wheel) for bundle in bundles)])
    _run([*pip, "-c", str(constraints), "nbclient", "ipykernel"])  # Jupyter, as the images have it
    runner = ("import sys, nbformat\nfrom nbclient import NotebookClient\n"
              "nb = nbformat.read(sys.argv[1], as_version=4)\n"
              "NotebookClient(nb, timeout=600, kernel_name='python3', resources={'metadata': {'path': sys.argv[2]}})"
              ".execute()\n"
              "print('\\n'.join(o.get('text', '') for c in nb.cells for o in c.get('outputs', [])))\n")
    delivered = tmp_path / "pynq-notebooks"
    for bundle in bundles:
        _run([str(python), "-c", DELIVER, bundle.name, str(delivered)], env=env, cwd=tmp_path)
        notebook = delivered / bundle.name / "train_on_board.ipynb"
        assert notebook.is_file()
        ran = _run([str(python), "-c", runner, str(notebook), str(notebook.parent)],
                   env={**env, "CODESIGN_NOTEBOOK_QUICK": "1"}, cwd=tmp_path)
        assert "emulated: True" in ran.stdout, ran.stdout[-2000:]
        assert "test accuracy" in ran.stdout, ran.stdout[-2000:]
    for family, bundle in zip(DESIGNS, bundles):  # the repository's notebooks, on the installed bundles
        copy = tmp_path / "repo-notebooks" / REPO_NOTEBOOKS[family]
        copy.parent.mkdir(exist_ok=True)
        shutil.copy2(REPO / "notebooks" / REPO_NOTEBOOKS[family], copy)
        ran = _run([str(python), "-c", runner, str(copy), str(copy.parent)],
                   env={**env, "CODESIGN_NOTEBOOK_QUICK": "1", "CODESIGN_BUNDLE": bundle.name}, cwd=tmp_path)
        assert f"{bundle.name} | bitstream: False" in ran.stdout and " compared, 0 differ" in ran.stdout, \
            ran.stdout[-2000:]
    total_kib = sum(size for _, size in installed.values())
    print(f"\n{image}: installed in {install_s:.0f} s, {total_kib / 1024:.0f} MiB: "
          + ", ".join(f"{name} {version_} ({size // 1024} MiB)" if size >= 1024 else f"{name} {version_}"
                      for name, (version_, size) in sorted(installed.items(), key=lambda item: -item[1][1])))
    for report in reports:
        print(json.dumps(report))
