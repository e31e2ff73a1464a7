"""Bad input per surface: every refusal case of the test suite run once, tabulated by the surface it probes.

Each case below is a test that feeds one bad input (a wrong-typed or out-of-range field, a broken file, a folder
that is not ours, a kernel that hangs) and asserts the whole refusal contract: a message naming the file or the
field, no traceback, the exit status, nothing of the user's written or replaced. So a passing case is one input
*refused clearly*; a failing one is not, and its test's failure says how. The table gives, per surface, the cases,
how many were refused clearly, how many were not, and the slowest case (the goal: within 10 s each).

Run: .venv/bin/python benchmarks/bad_input_table.py [--out reports/bench]   (about 4 minutes on 2 cores)
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ElementTree
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
REFUSAL = r"refus|bad_|broken|corrupt|named|name_|unknown|must_be|missing|hangs|crash|ctrl_c|sigterm|diverges"
# surface -> (test files, a regular expression the test's name must match)
SURFACES = {
    "runs that fail, interrupts": (["tests/test_cli.py", "tests/test_bad_input.py"], r"diverges|sigterm|ctrl_c"),
    "command-line arguments": (["tests/test_bad_input.py"], r"bad_argument|checkpoint_every|seeds_must|top_must"),
    "training configs, checkpoints and JSON files": (
        ["tests/test_bad_input.py", "tests/train"],
        r"bad_field|bad_file|missing_file|bad_design_table|broken_checkpoint|corrupt_json|json_loader_names|"
        r"bad_config|bad_toml|bad_values|bad_p_|unknown_field|bad_final|bad_fields|bad_input_names|bad_other|"
        r"wrong_types|refuse"),
    "data files": (["tests/loops/test_data_sources.py", "tests/loops/test_npm_data.py"], REFUSAL),
    "board runtime (design.json, data, kernels)": (
        ["tests/deploy/test_board_bad_input.py", "tests/deploy/test_kernel_worker.py", "tests/deploy/test_driver.py",
         "tests/deploy/test_manifest.py"], REFUSAL),
    "output folders, bundles and builds": (
        ["tests/test_cli_outdirs.py", "tests/test_bundle.py", "tests/design/test_build.py"], REFUSAL + r"|not_ours"),
    "sweep grids and tasks": (["tests/test_sweep.py"], REFUSAL + r"|linear_time|truncated"),
    "host reports": (["tests/loops/test_host_share.py"], REFUSAL),
}
SLOW_S = 10.0


def run_cases(files: list[str], xml_path: Path) -> list[dict]:
    """Every test case of ``files`` (slow ones too), run once: node id, outcome and seconds."""
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", "not long", f"--junitxml={xml_path}",
               *files]
    subprocess.run(command, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    cases = []
    for case in ElementTree.parse(xml_path).getroot().iter("testcase"):
        outcome = ("skipped" if case.find("skipped") is not None else
                   "failed" if case.find("failure") is not None or case.find("error") is not None else "passed")
        path = case.get("classname", "").replace(".", "/") + ".py"
        cases.append({"file": path, "name": case.get("name", ""), "outcome": outcome,
                      "seconds": float(case.get("time", 0.0))})
    return cases


def surface_of(case: dict) -> str | None:
    """The first surface whose files hold the case and whose pattern its test's name matches (each case counts
    once)."""
    name = case["name"].split("[")[0]
    for surface, (files, pattern) in SURFACES.items():
        if any(case["file"].startswith(f) for f in files) and re.search(pattern, name):
            return surface
    return None


def tabulate(cases: list[dict]) -> list[dict]:
    rows = []
    for surface in SURFACES:
        chosen = [case for case in cases if surface_of(case) == surface]
        rows.append({"surface": surface, "cases": len(chosen),
                     "refused clearly": sum(case["outcome"] == "passed" for case in chosen),
                     "not refused clearly": sum(case["outcome"] == "failed" for case in chosen),
                     "skipped": sum(case["outcome"] == "skipped" for case in chosen),
                     "slowest s": max((case["seconds"] for case in chosen), default=0.0)})
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="reports/bench")
    args = parser.parse_args()
    files = sorted({f for surface_files, _ in SURFACES.values() for f in surface_files})
    with tempfile.TemporaryDirectory() as scratch:
        cases = run_cases(files, Path(scratch) / "cases.xml")
    rows = tabulate(cases)
    columns = list(rows[0])
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    for row in rows:
        lines.append("| " + " | ".join(f"{row[c]:.1f}" if c == "slowest s" else str(row[c]) for c in columns) + " |")
    total = {c: sum(row[c] for row in rows) for c in columns[1:-1]}
    lines.append(f"| all | {' | '.join(str(total[c]) for c in columns[1:-1])} | "
                 f"{max(row['slowest s'] for row in rows):.1f} |")
    text = "\n".join(lines)
    print(text)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "bad_input_table.md").write_text(text + "\n", encoding="utf-8")
    slow = sum(row["slowest s"] > SLOW_S for row in rows)
    return 1 if total["not refused clearly"] or slow else 0


if __name__ == "__main__":
    sys.exit(main())
