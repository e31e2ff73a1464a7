"""The README's reproduction table is exactly what the committed results.json files say."""

import json
from pathlib import Path

import pytest

from codesign.reproduce import REPRODUCTIONS
from codesign.reproduce.readme import BEGIN, END, current_section, render_table, section, update_readme

ROOT = Path(__file__).resolve().parents[2]


def test_the_readme_table_is_generated_from_the_committed_results():
    assert current_section(ROOT / "README.md") == section(ROOT / "results"), \
        "README.md is out of date: run `codesign reproduce readme`"


def _result(folder: Path, name: str, *, smoke: bool = False, row: bool = True) -> None:
    payload = {"seeds": list(range(8)), "settings": {"smoke": smoke},
               "readme": {"reproduction": f"`{name}` (a | b)", "target": "t", "measured": "m [1, 2]",
                          "verdict": "met"} if row else None}
    (folder / name).mkdir(parents=True)
    (folder / name / "results.json").write_text(json.dumps(payload))


def test_rows_follow_the_reproduction_order_and_missing_ones_say_so(tmp_path):
    _result(tmp_path, REPRODUCTIONS[-1])
    lines = render_table(tmp_path).splitlines()
    assert len(lines) == 2 + len(REPRODUCTIONS)
    assert lines[-1].startswith(f"| `{REPRODUCTIONS[-1]}` (a \\| b) | t | m [1, 2] | met | 8 |")
    assert "no committed result" in lines[2]


def test_smoke_results_and_results_without_a_row_are_refused(tmp_path):
    _result(tmp_path / "a", "psg", smoke=True)
    with pytest.raises(ValueError, match="smoke"):
        render_table(tmp_path / "a")
    _result(tmp_path / "b", "psg", row=False)
    with pytest.raises(ValueError, match="psg/results.json: results of `codesign reproduce psg`.*field readme"):
        render_table(tmp_path / "b")


def test_update_rewrites_only_between_the_markers(tmp_path):
    readme = tmp_path / "README.md"
    readme.write_text(f"before\n{BEGIN}\nold\n{END}\nafter\n")
    _result(tmp_path / "results", "smd")
    assert update_readme(readme, tmp_path / "results") is True
    text = readme.read_text()
    assert text.startswith("before\n") and text.endswith("after\n") and "`smd`" in text and "old" not in text
    assert update_readme(readme, tmp_path / "results") is False
    (tmp_path / "plain.md").write_text("no markers")
    with pytest.raises(ValueError, match="markers"):
        update_readme(tmp_path / "plain.md", tmp_path / "results")


def test_a_readme_that_is_not_utf8_is_named_and_left_alone(tmp_path):
    readme = tmp_path / "README.md"
    content = f"caf\xe9\n{BEGIN}\nold\n{END}\n".encode("latin-1")
    readme.write_bytes(content)
    with pytest.raises(ValueError, match=rf"^{readme}: README: not UTF-8 text"):
        update_readme(readme, tmp_path / "results")
    assert readme.read_bytes() == content
