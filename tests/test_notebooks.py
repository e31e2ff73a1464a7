"""Every notebook in notebooks/ runs top to bottom on the emulated board (nbclient), and is stored without outputs."""

from __future__ import annotations

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


@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=[path.stem for path in NOTEBOOKS])
def test_notebook_runs_on_the_emulated_board(path, monkeypatch):
    import nbformat
    from nbclient import NotebookClient

    for variable in ("CODESIGN_BUILD_DIR", "CODESIGN_CSB_BUILD_DIR", "CODESIGN_TT_BUILD_DIR"):  # a board's build folder: not in this test
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.setenv("CODESIGN_NOTEBOOK_QUICK", "1")  # the notebooks' short schedules: the whole path, not far
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
    print(f"{path.name}: {seconds:.1f} s")
