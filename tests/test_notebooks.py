"""Every notebook in notebooks/ runs top to bottom on the emulated board (nbclient), and is stored without outputs."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

NOTEBOOKS = sorted((Path(__file__).resolve().parents[1] / "notebooks").glob("*.ipynb"))
TIMEOUT_S = 300  # one cell, compiling the IP's bridge included


def test_notebooks_exist():
    assert [path.name for path in NOTEBOOKS] == ["01_quickstart.ipynb", "02_train_on_board.ipynb",
                                                 "03_compressed_on_board.ipynb", "04_tt_on_board.ipynb",
                                                 "05_design_object.ipynb"]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[path.stem for path in NOTEBOOKS])
def test_notebook_is_stored_without_outputs(path):
    import nbformat

    notebook = nbformat.read(path, as_version=4)
    nbformat.validate(notebook)
    for cell in notebook.cells:
        if cell.cell_type == "code":
            assert cell.outputs == [] and cell.execution_count is None, f"{path.name}: strip the outputs"


BOARD_NOTEBOOKS = {"02_train_on_board": "digits_abvs", "03_compressed_on_board": "digits_compressed_mlp",
                   "04_tt_on_board": "digits_tt"}  # the notebooks that open a bundle (CODESIGN_BUNDLE), and its design
BOARD_BUNDLES = "CODESIGN_TEST_BUNDLES"  # on a board: a folder holding each design's installed-bundle folder


def _execute(path: Path):
    """Run the notebook top to bottom in its folder (quick schedules); return it with its outputs and the seconds."""
    import nbformat
    from nbclient import NotebookClient

    notebook = nbformat.read(path, as_version=4)
    started = time.perf_counter()
    NotebookClient(notebook, timeout=TIMEOUT_S, kernel_name="python3",
                   resources={"metadata": {"path": str(path.parent)}}).execute()
    seconds = time.perf_counter() - started
    errors = [output for cell in notebook.cells for output in cell.get("outputs", []) if output.output_type == "error"]
    assert not errors
    if any("plt.show()" in cell.source for cell in notebook.cells):
        assert any("image/png" in output.get("data", {}) for cell in notebook.cells
                   for output in cell.get("outputs", [])), f"{path.name} shows no figure"
    return notebook, seconds


def _printed(notebook) -> str:
    return "".join(output.get("text", "") for cell in notebook.cells for output in cell.get("outputs", []))


@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=[path.stem for path in NOTEBOOKS])
def test_notebook_runs_on_the_emulated_board(path, monkeypatch):
    monkeypatch.delenv("CODESIGN_BUNDLE", raising=False)  # unset: a board notebook writes its example's bundle
    monkeypatch.setenv("CODESIGN_NOTEBOOK_QUICK", "1")  # the notebooks' short schedules: the whole path, not far
    notebook, seconds = _execute(path)
    if path.stem in BOARD_NOTEBOOKS:
        printed = _printed(notebook)
        assert f"{BOARD_NOTEBOOKS[path.stem]}-zedboard | bitstream: False" in printed
        assert "state words" in printed and " compared, 0 differ" in printed, printed[-2000:]
    print(f"{path.name}: {seconds:.1f} s")


def test_board_notebooks_import_nothing_of_the_desktop_but_the_bundle_writer():
    """What a board's Python runs: the board runtime, and the desktop only where no bundle is named."""
    import nbformat

    for stem in BOARD_NOTEBOOKS:
        notebook = nbformat.read(next(path for path in NOTEBOOKS if path.stem == stem), as_version=4)
        imports = [line.strip() for cell in notebook.cells if cell.cell_type == "code"
                   for line in cell.source.splitlines() if line.strip().startswith(("import ", "from "))]
        desktop = [line for line in imports if line.startswith(("from codesign", "import codesign"))
                   and not line.startswith("from codesign.deploy")]
        assert desktop == ["from codesign.bundle import example_bundle  # desktop only: a board has no desktop to "
                           "write a bundle"], (stem, desktop)
        assert not [line for line in imports if "torch" in line or "sklearn" in line], stem


def _board_case(stem: str):
    """One notebook on the board: skipped, with the reason, without a board or without its build folder."""
    from codesign.deploy import board_attached

    marks = [pytest.mark.board,
             pytest.mark.skipif(not board_attached(), reason="no PYNQ board attached (pynq finds no device)"),
             pytest.mark.skipif(not os.environ.get(BOARD_BUNDLES),
                                reason=f"{BOARD_BUNDLES} unset: name a folder holding the bundle folders of "
                                       f"{', '.join(BOARD_NOTEBOOKS.values())} built for this board")]
    return pytest.param(stem, marks=marks, id=stem)


@pytest.mark.parametrize("stem", [_board_case(stem) for stem in sorted(BOARD_NOTEBOOKS)])
def test_notebook_runs_on_the_board(stem, monkeypatch):
    """On a PYNQ board, with the bundle folder of the notebook's design (its .bit and .hwh) under
    ``$CODESIGN_TEST_BUNDLES/<design>``."""
    monkeypatch.setenv("CODESIGN_BUNDLE", str(Path(os.environ[BOARD_BUNDLES]) / BOARD_NOTEBOOKS[stem]))
    monkeypatch.setenv("CODESIGN_NOTEBOOK_QUICK", "1")
    path = next(path for path in NOTEBOOKS if path.stem == stem)
    notebook, seconds = _execute(path)
    assert " on board (" in _printed(notebook), f"{path.name} did not open the board"  # CodesignOverlay.describe()
    print(f"{path.name} on the board: {seconds:.1f} s")
