"""A mutation check: seed one-line faults into the newest modules, run the tests that should catch each, report the
score.

Each mutant replaces one exact piece of one source line (it must occur once) and runs its test files with
``pytest -x -q`` (the suite of ``make test``: tests marked slow or long are left out, as ``make test`` leaves them).
A mutant is killed when those tests fail, survives when they pass; the file is restored either way, also on Ctrl-C.
The list names the faults a one-character slip or a lost line would make at the edges the code decides on (a
comparison at equality, a bound, a merge, a key, a check left out).

Run: .venv/bin/python benchmarks/mutation_check.py [--only SUBSTRING] [--out reports/bench]
Writes ``mutation_check.json``: every mutant, its tests, killed or survived, the seconds; and the score.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Mutant:
    name: str
    path: str
    old: str
    new: str
    tests: tuple[str, ...]


MUTANTS = (
    Mutant("keep_slices keeps at equality", "codesign/loops/tt.py", "mask = lam >= threshold * lam.max()",
           "mask = lam > threshold * lam.max()", ("tests/loops/test_tt.py",)),
    Mutant("prior warm-up without its ramp", "codesign/loops/tt.py", "beta = 1.0 if warmup == 0 else min(1.0, self.step / warmup)",
           "beta = 1.0", ("tests/loops/test_tt.py",)),
    Mutant("round robin forgets the earlier PEs' copies", "codesign/design/explore.py", "        offset += count\n",
           "        offset += 0 * count\n", ("tests/design/test_explore.py",)),
    Mutant("forward split: the smaller on a tie", "codesign/step/tt/schedule.py",
           "tries = sorted({min(k, lanes * round(estimate * factor / lanes)) for factor in SPLIT_TRIES}, reverse=True)",
           "tries = sorted({min(k, lanes * round(estimate * factor / lanes)) for factor in SPLIT_TRIES})",
           ("tests/step/tt/test_cycles.py",)),
    Mutant("stage packer never merges a run", "codesign/step/tt/runners.py", "if mine and mine[-1][0] == copy:",
           "if False and mine and mine[-1][0] == copy:", ("tests/step/tt/test_runners.py",)),
    Mutant("reuse loads keyed without the copy", "codesign/step/tt/reuse.py",
           "key = (positions[layer][call.index], call.pe, unit)", "key = (positions[layer][call.index], call.pe, 0)",
           ("tests/step/tt/test_reuse.py",)),
    Mutant("a window may reach into DDR", "codesign/deploy/manifest.py", "_need(end <= ddr_start or start >= ddr_end,",
           "_need(end <= ddr_start or start >= ddr_end - 0x10000,", ("tests/deploy/test_manifest.py",)),
    Mutant("buffers past the DDR accepted", "codesign/deploy/manifest.py",
           "and 0 <= buffer[\"max_words\"] <= ddr_words,", "and 0 <= buffer[\"max_words\"],",
           ("tests/deploy/test_manifest.py", "tests/deploy/test_board_bad_input.py")),
    Mutant("a window past the PS's addresses", "codesign/deploy/manifest.py",
           "_need(base + address_range <= 1 << bits,", "_need(base + address_range <= 2 << bits,",
           ("tests/deploy/test_manifest.py",)),
    Mutant("loop set-up: the recorded one unchecked", "codesign/deploy/manifest.py",
           "recorded = build(setup, \"\")", "recorded = None", ("tests/deploy/test_board_bad_input.py",)),
    Mutant("fit data: labels at the class count", "codesign/loops/common.py",
           "if y.dtype.kind not in \"iu\" or y.min() < 0 or y.max() >= classes:",
           "if y.dtype.kind not in \"iu\" or y.min() < 0 or y.max() > classes:",
           ("tests/loops/test_common.py", "tests/deploy/test_board_bad_input.py")),
    Mutant("fit data: integer samples taken", "codesign/loops/common.py",
           "if x.shape[0] != y.shape[0] or x.dtype.kind != \"f\" or int(np.prod(x.shape[1:])) != features:",
           "if x.shape[0] != y.shape[0] or int(np.prod(x.shape[1:])) != features:",
           ("tests/deploy/test_board_bad_input.py",)),
    Mutant("MNIST levels: any float taken", "codesign/loops/npm_data.py",
           "if levels.min() < 0 or levels.max() > 255 or np.max(np.abs(scaled - levels)) > 0.13:",
           "if levels.min() < 0 or levels.max() > 255:", ("tests/loops/test_npm_data.py",)),
    Mutant("npm tarball: integrity unchecked", "codesign/loops/npm_data.py", "if found != dataset.integrity:",
           "if False:", ("tests/loops/test_npm_data.py",)),
    Mutant("user data: a class only in test taken", "codesign/loops/data_sources.py", "    if missing.size:\n",
           "    if False:\n", ("tests/loops/test_data_sources.py",)),
    Mutant("user data: padding off centre", "codesign/loops/data_sources.py",
           "top, left = (pad_to - height) // 2, (pad_to - width) // 2", "top, left = 0, 0",
           ("tests/loops/test_data_sources.py",)),
    Mutant("grey levels: a float that is no level stored as bytes", "codesign/loops/data.py",
           "return levels if np.array_equal(from_levels(levels), x) else None", "return levels",
           ("tests/loops/test_data.py",)),
    Mutant("sweep: a too-large grid expanded", "codesign/sweep.py", "    if points > MAX_TASKS:\n",
           "    if points > 100 * MAX_TASKS:\n", ("tests/test_sweep.py",)),
    Mutant("build steps: a changed input skipped", "codesign/design/build_steps.py",
           "if step != \"folder\" and earlier.get(\"status\") == \"done\" and earlier.get(\"inputs\") == inputs \\",
           "if step != \"folder\" and earlier.get(\"status\") == \"done\" \\", ("tests/design/test_build.py",)),
    Mutant("bundle: a user's file deleted", "codesign/bundle.py", "        if foreign:\n", "        if False:\n",
           ("tests/test_bundle.py",)),
    Mutant("train: a diverged run reported as done", "codesign/train/trainer.py",
           "if loss is not None and self.stop_on_divergence and not math.isfinite(loss):",
           "if loss is not None and self.stop_on_divergence and loss != loss and False:", ("tests/test_cli.py",)),
    Mutant("dashboard: results after the file lists", "codesign/dashboard.py",
           "f\"<p>{html.escape(machine)}</p>\" if machine else \"\", *results,",
           "f\"<p>{html.escape(machine)}</p>\" if machine else \"\",", ("tests/test_demo_index.py",)),
    Mutant("watchdog: a dead worker read as an empty answer", "codesign/deploy/kernel_worker.py",
           "            raise self._failure(name, \"died during the call\")", "            return \"\"",
           ("tests/deploy/test_kernel_worker.py",)),
    Mutant("watchdog: a hung call waited for past its time", "codesign/deploy/kernel_worker.py",
           "            if left <= 0:", "            if left <= -1e9:", ("tests/deploy/test_kernel_worker.py",)),
    Mutant("emulated buffers in the PL windows of a 4 GiB board", "codesign/deploy/emulated.py",
           "low_ddr = min(self.manifest[\"board_facts\"][\"ddr_mib\"] << 20, LOW_DDR_LIMIT)",
           "low_ddr = self.manifest[\"board_facts\"][\"ddr_mib\"] << 20", ("tests/deploy/test_emulated.py",)),
    Mutant("sweep: a positional-only builtin accepted", "codesign/sweep.py",
           "if isinstance(target, types.BuiltinFunctionType):", "if False:", ("tests/test_sweep.py",)),
    Mutant("TT evaluation: a whole split in one pass", "codesign/loops/tt.py", "if len(features) <= rows:",
           "if True:", ("tests/loops/test_tt.py",)),
)


def run_mutant(mutant: Mutant) -> dict:
    path = REPO / mutant.path
    original = path.read_text()
    if original.count(mutant.old) != 1:
        return {"name": mutant.name, "outcome": "stale", "why": f"{mutant.old!r} occurs {original.count(mutant.old)} "
                                                                 f"times in {mutant.path}"}
    started = time.perf_counter()
    try:
        path.write_text(original.replace(mutant.old, mutant.new))
        done = subprocess.run([sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", "-m",
                               "not slow and not long", *mutant.tests], cwd=REPO, capture_output=True, text=True)
    finally:
        path.write_text(original)
    outcome = "killed" if done.returncode != 0 else "survived"
    return {"name": mutant.name, "path": mutant.path, "tests": list(mutant.tests), "outcome": outcome,
            "seconds": round(time.perf_counter() - started, 1)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="", help="run the mutants whose name holds this text")
    parser.add_argument("--out", default="reports/bench")
    args = parser.parse_args()
    rows = []
    for mutant in (m for m in MUTANTS if args.only in m.name):
        rows.append(run_mutant(mutant))
        print(f"{rows[-1]['outcome']:8s} {mutant.name} ({rows[-1].get('seconds', 0)} s)", flush=True)
    counted = [row for row in rows if row["outcome"] in ("killed", "survived")]
    killed = sum(row["outcome"] == "killed" for row in counted)
    score = killed / len(counted) if counted else 0.0
    print(f"mutation score: {killed} of {len(counted)} killed ({100 * score:.0f} %)"
          + (f"; {len(rows) - len(counted)} stale" if len(rows) != len(counted) else ""))
    out = REPO / args.out
    out.mkdir(parents=True, exist_ok=True)
    (out / "mutation_check.json").write_text(json.dumps({"mutants": rows, "killed": killed, "counted": len(counted),
                                                         "score": score}, indent=1) + "\n")
    return 0 if killed == len(counted) else 1


if __name__ == "__main__":
    sys.exit(main())
