"""`codesign reproduce restate`: committed reports rewritten from their recorded runs, atomically, once."""

import json
import shutil
from pathlib import Path

import pytest

from codesign.cli import main
from codesign.reproduce import REPRODUCTIONS
from codesign.reproduce.readme import page
from codesign.reproduce.replication import BEGIN, END, OWN_ANALYSIS, module_of, section
from codesign.reproduce.restate import restate, restated

RESULTS = Path(__file__).resolve().parents[2] / "results"
COMMITTED = [name for name in REPRODUCTIONS if (RESULTS / name / "results.json").is_file() and name not in OWN_ANALYSIS]


def _copy(tmp_path: Path, *names: str) -> Path:
    results = tmp_path / "results"
    for name in names:
        shutil.copytree(RESULTS / name, results / name, ignore=shutil.ignore_patterns("tasks", "*.png", "fpmac_cost"))
    return results


def _strip(folder: Path) -> None:
    """As the reports were before they were restated: no replication section, the label they were run with."""
    path = folder / "results.json"
    payload = json.loads(path.read_text())
    payload.pop("replication", None)
    path.write_text(json.dumps(payload, indent=2, sort_keys=True) + "\n")
    table = (folder / "table.md").read_text()
    if BEGIN in table:
        (folder / "table.md").write_text(table[:table.index(BEGIN)].rstrip("\n") + "\n")


@pytest.mark.parametrize("name", COMMITTED)
def test_every_committed_report_is_restated_from_its_recorded_runs(name):
    payload = json.loads((RESULTS / name / "results.json").read_text(encoding="utf-8"))
    assert restated(payload, module_of(name)) == payload, \
        f"results/{name} is not restated: run `codesign reproduce restate --out results`"
    table = (RESULTS / name / "table.md").read_text(encoding="utf-8")
    assert table.count(BEGIN) == 1 and section(payload["replication"]) in table


def test_restate_writes_each_report_and_the_readme_then_nothing_more(tmp_path):
    results = _copy(tmp_path, "smd", "cpt", "abvs")
    for name in ("smd", "cpt", "abvs"):
        _strip(results / name)
    readme = results / "README.md"
    written = restate(results, readme)
    assert set(written) == {str(results / n / f) for n in ("smd", "cpt", "abvs") for f in ("results.json", "table.md")} \
        | {str(readme)}
    smd = json.loads((results / "smd" / "results.json").read_text())
    main_claim = next(c for c in smd["replication"]["claims"] if c["arm"] == "smd_x4/3")
    assert main_claim["seeds"]["n"] == 3 and not main_claim["seeds"]["tost"]["equivalent"]
    cpt = json.loads((results / "cpt" / "results.json").read_text())
    assert "B_min chosen by the range test: ceil: 4 in 8, 5 in 1 of 9 runs" in cpt["readme"]["reproduction"]
    abvs_table = (results / "abvs" / "table.md").read_text()
    assert abvs_table.count(BEGIN) == 1 and "it is a fixed FB schedule" in abvs_table
    assert readme.read_text() == page(results) and "seeds as units (after)" in readme.read_text()
    assert restate(results, readme) == []  # a second run changes nothing


def test_a_report_that_cannot_be_restated_leaves_every_file_as_it_was(tmp_path):
    results = _copy(tmp_path, "smd", "cpt")
    for name in ("smd", "cpt"):
        _strip(results / name)
    broken = json.loads((results / "cpt" / "results.json").read_text())
    del broken["extra"]["range_test"]
    (results / "cpt" / "results.json").write_text(json.dumps(broken))
    before = {path: path.read_bytes() for path in results.rglob("*") if path.is_file()}
    with pytest.raises(ValueError, match=r"cpt/results.json: cannot restate cpt from its recorded runs \(KeyError"):
        restate(results, results / "README.md")
    assert {path: path.read_bytes() for path in results.rglob("*") if path.is_file()} == before


def test_smoke_runs_and_empty_folders_are_refused_by_the_command(tmp_path, capsys):
    results = _copy(tmp_path, "smd")
    payload = json.loads((results / "smd" / "results.json").read_text())
    payload["settings"]["smoke"] = True
    (results / "smd" / "results.json").write_text(json.dumps(payload))
    assert main(["reproduce", "restate", "--out", str(results), "--readme", str(results / "README.md")]) == 2
    assert "is a smoke run" in capsys.readouterr().err and not (results / "README.md").exists()
    assert main(["reproduce", "restate", "--out", str(tmp_path / "none"), "--readme", str(tmp_path / "R.md")]) == 2
    assert "holds no reproduction's report" in capsys.readouterr().err


def test_the_command_restates_and_says_what_it_wrote(tmp_path, capsys):
    results = _copy(tmp_path, "tt")
    _strip(results / "tt")
    assert main(["reproduce", "restate", "--out", str(results), "--readme", str(results / "README.md")]) == 0
    out = capsys.readouterr().out
    assert "from their recorded runs (no training)" in out and "tt/results.json" in out
    payload = json.loads((results / "tt" / "results.json").read_text())
    assert len(payload["replication"]["claims"]) == 12 and payload["replication"]["claims"][0]["seeds"]["n"] == 15
    assert main(["reproduce", "restate", "--out", str(results), "--readme", str(results / "README.md")]) == 0
    assert "every file already up to date" in capsys.readouterr().out
    assert (results / "tt" / "table.md").read_text().rstrip("\n").endswith(END)
