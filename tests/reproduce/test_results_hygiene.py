"""The committed reports under results/ name no machine: no absolute path of the machine that ran them.

A path such as ``/work/main/results/...`` or ``/home/<user>/...`` says where
a run happened, not what it measured, and breaks the moment the tree moves.
Every file is scanned as bytes (tables, JSON and the PNG metadata alike),
the finished runs' records of the task caches (``results/*/tasks/results/``,
committed so that a study resumes on another machine) among them; the rest of
a task cache (not committed) is left out.
"""

import re
from pathlib import Path

RESULTS = Path(__file__).resolve().parents[2] / "results"
MACHINE_PATH = re.compile(rb"(?<![A-Za-z0-9_.-])(/root|/home|/tmp|/work|/Users|/private/var|/var/folders|/mnt|/scratch)/"
                          rb"|[A-Za-z]:\\\\?(Users|Windows)\\")


def _committed(parts: tuple[str, ...]) -> bool:
    """Whether a file under results/ is committed (.gitignore): not in a task cache but its ``results/`` records."""
    if "tasks" not in parts:
        return parts[-1] != "codesign_output.json"
    at = parts.index("tasks")
    return parts[at + 1:at + 2] == ("results",) and not parts[-1].endswith(".superseded.json")


def report_files() -> list[str]:
    return sorted(str(path.relative_to(RESULTS)) for path in RESULTS.rglob("*")
                  if path.is_file() and _committed(path.relative_to(RESULTS).parts))


def test_the_pattern_catches_machine_paths_and_spares_the_rest():
    for text in (b'"path": "/work/main/results/abvs/x.json"', b"/home/alice/run", b"at /tmp/tmpab12/out",
                 b"/root/.cache", rb"C:\Users\bob\x"):
        assert MACHINE_PATH.search(text), text
    for text in (b"results/abvs/fpmac_cost/fpmac_cost.json", b"1/tmp_ratio", b"fp32/home-made", b"a 4/8/16-bit"):
        assert not MACHINE_PATH.search(text), text


def test_results_has_reports_to_scan():
    files = report_files()
    assert any(name.endswith("results.json") for name in files) and len(files) >= 10
    assert {"abvs/results.json", "abvs/table.md", "abvs/fpmac_cost/fpmac_cost.json"} <= set(files)


def test_no_machine_path_in_a_committed_report():
    offenders = {}
    for name in report_files():
        match = MACHINE_PATH.search((RESULTS / name).read_bytes())
        if match:
            offenders[name] = match.group(0)
    assert not offenders, f"results/ files holding a machine path: {offenders}"


def test_the_abvs_report_names_its_cost_table_from_the_repository():
    for name in ("results.json", "table.md"):
        text = (RESULTS / "abvs" / name).read_text(encoding="utf-8")
        assert "Yosys report results/abvs/fpmac_cost/fpmac_cost.json" in text
