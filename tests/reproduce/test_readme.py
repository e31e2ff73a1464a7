"""results/README.md is exactly what the committed results.json files say, in short rows."""

import json
import shutil
from pathlib import Path

import pytest

from codesign.reproduce import REPRODUCTIONS
from codesign.reproduce.readme import BEGIN, END, page, render_table, update_readme

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "results"
CELL_LIMIT = 120  # characters of one table cell


def test_the_results_page_is_generated_from_the_committed_results():
    assert (RESULTS / "README.md").read_text(encoding="utf-8") == page(RESULTS), \
        "results/README.md is out of date: run `codesign reproduce readme --out results --readme results/README.md`"


def test_every_row_is_short_and_the_long_texts_follow_the_table():
    table = render_table(RESULTS)
    ran = [name for name in REPRODUCTIONS if (RESULTS / name / "results.json").is_file()]
    rows = [line for line in table.splitlines() if line.startswith("| [")]
    assert len(rows) == len(ran)
    for row in rows:
        cells = [cell.strip() for cell in row.strip("| ").split(" | ")]
        assert len(cells) == 5 and all(len(cell) <= CELL_LIMIT for cell in cells), row
    for name in ran:  # each reproduction's target and full measurement, below the table
        entry = json.loads((RESULTS / name / "results.json").read_text(encoding="utf-8"))["readme"]
        assert f"### {name}\n" in table and f"- **measured:** {entry['measured']}" in table
    for name in set(REPRODUCTIONS) - set(ran):  # registered, never run into results/: its row says so
        assert f"| `{name}` | not run | no committed result | 0 | |" in table


def _committed(folder: Path, name: str, **changes) -> Path:
    """A copy of ``name``'s committed results.json under ``folder``, with ``changes`` made to it."""
    (folder / name).mkdir(parents=True)
    payload = {**json.loads((RESULTS / name / "results.json").read_text(encoding="utf-8")), **changes}
    path = folder / name / "results.json"
    path.write_text(json.dumps(payload), encoding="utf-8")
    return path


def test_rows_follow_the_reproduction_order_and_missing_ones_say_so(tmp_path):
    _committed(tmp_path, "smd", readme={"reproduction": "`smd` (a | b)", "target": "t", "measured": "m [1, 2]",
                                        "verdict": "met"},
               run_cost={"runs": 9, "recorded": 9, "wall_s": 6000.0, "cpu_s": 5400.0, "cores": 2, "model_s": 0.0})
    lines = render_table(tmp_path).splitlines()
    rows = [line for line in lines[:lines.index("")] if line.startswith("| ")][1:]  # the first table's rows
    assert len(rows) == len(REPRODUCTIONS)
    assert rows[0].startswith("| [`smd`](#smd) | met | smd_x4/3: energy ratio ") and rows[0].endswith(" | 9 | 45 min |")
    assert rows[1] == "| `slu` | not run | no committed result | 0 | |"
    assert "(a" not in rows[0] and "\n`smd` (a | b): [table](smd/table.md), " in "\n".join(lines)


def test_smoke_results_results_without_a_row_and_results_without_the_figures_are_refused(tmp_path):
    _committed(tmp_path / "a", "psg", settings={"smoke": True})
    with pytest.raises(ValueError, match="smoke"):
        render_table(tmp_path / "a")
    _committed(tmp_path / "b", "psg", readme=None)
    with pytest.raises(ValueError, match="psg/results.json: results of `codesign reproduce psg`.*field readme"):
        render_table(tmp_path / "b")
    _committed(tmp_path / "c", "tt", comparisons={})
    with pytest.raises(ValueError, match="tt/results.json: .* no headline figure"):
        render_table(tmp_path / "c")


def test_the_page_is_written_whole_then_rewritten_only_between_the_markers(tmp_path):
    results = tmp_path / "results"
    for name in ("smd", "tt"):
        shutil.copytree(RESULTS / name, results / name, ignore=shutil.ignore_patterns("tasks"))
    readme = results / "README.md"
    assert update_readme(readme, results) is True and readme.read_text() == page(results)
    assert update_readme(readme, results) is False
    readme.write_text(readme.read_text().replace("# Reproduction results", "# Results, kept"))
    (results / "tt" / "results.json").unlink()
    assert update_readme(readme, results) is True
    text = readme.read_text()
    assert text.startswith("# Results, kept\n") and "| `tt` | not run |" in text and "### tt" not in text
    (tmp_path / "plain.md").write_text("no markers")
    with pytest.raises(ValueError, match="markers"):
        update_readme(tmp_path / "plain.md", results)


def test_a_readme_that_is_not_utf8_is_named_and_left_alone(tmp_path):
    readme = tmp_path / "README.md"
    content = f"caf\xe9\n{BEGIN}\nold\n{END}\n".encode("latin-1")
    readme.write_bytes(content)
    with pytest.raises(ValueError, match=rf"^{readme}: README: not UTF-8 text"):
        update_readme(readme, tmp_path / "results")
    assert readme.read_bytes() == content


def test_every_claim_and_energy_ratio_is_restated_below_the_sections(tmp_path):
    table = render_table(RESULTS)
    restated = table[table.index("## Restated"):]
    for name in REPRODUCTIONS:
        path = RESULTS / name / "results.json"
        if not path.is_file() or name == "tt-fashion":
            continue
        entry = json.loads(path.read_text(encoding="utf-8"))["replication"]
        rows = [line for line in restated.splitlines() if line.startswith(f"| {name} | ")]
        assert len(rows) == len(entry["claims"]) + len(entry["energy"]), name
    smd = next(line for line in restated.splitlines() if line.startswith("| smd | smd_x4/3 − smb |"))
    assert "equivalent, p = 0.002 (n = 9)" in smd and "not shown, p = 0.052 (n = 3;" in smd
    _committed(tmp_path, "slu", replication=None)  # a report written before the restated section
    assert "Not restated yet (run `codesign reproduce restate`): slu." in render_table(tmp_path)
