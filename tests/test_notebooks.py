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
                                                 "03_compressed_on_board.ipynb", "04_tt_on_board.ipynb"]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[path.stem for path in NOTEBOOKS])
def test_notebook_is_stored_without_outputs(path):
    import nbformat

    notebook = nbformat.read(path, as_version=4)
    nbformat.validate(notebook)
    for cell in notebook.cells:
        if cell.cell_type == "code":
            assert cell.outputs == [] and cell.execution_count is None, f"{path.name}: strip the outputs"


BUILD_DIR_VARIABLES = {"02_train_on_board": "CODESIGN_BUILD_DIR", "03_compressed_on_board": "CODESIGN_CSB_BUILD_DIR",
                       "04_tt_on_board": "CODESIGN_TT_BUILD_DIR"}  # the notebooks that open a board's build folder


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
    for variable in BUILD_DIR_VARIABLES.values():  # a board's build folder: not in this test
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.setenv("CODESIGN_NOTEBOOK_QUICK", "1")  # the notebooks' short schedules: the whole path, not far
    _, seconds = _execute(path)
    print(f"{path.name}: {seconds:.1f} s")


def _board_case(stem: str):
    """One notebook on the board: skipped, with the reason, without a board or without its build folder."""
    from codesign.deploy import board_attached

    variable = BUILD_DIR_VARIABLES[stem]
    marks = [pytest.mark.board,
             pytest.mark.skipif(not board_attached(), reason="no PYNQ board attached (pynq finds no device)"),
             pytest.mark.skipif(not os.environ.get(variable),
                                reason=f"{variable} unset: name the build folder of {stem} built for this board")]
    return pytest.param(stem, marks=marks, id=stem)


@pytest.mark.parametrize("stem", [_board_case(stem) for stem in sorted(BUILD_DIR_VARIABLES)])
def test_notebook_runs_on_the_board(stem, monkeypatch):
    """On a PYNQ board, with the notebook's build folder (its .bit and .hwh) named by its variable."""
    monkeypatch.setenv("CODESIGN_NOTEBOOK_QUICK", "1")
    path = next(path for path in NOTEBOOKS if path.stem == stem)
    notebook, seconds = _execute(path)
    assert " on board (" in _printed(notebook), f"{path.name} did not open the board"  # CodesignOverlay.describe()
    print(f"{path.name} on the board: {seconds:.1f} s")
