"""Import cost of the board runtime: ``import codesign.deploy`` against ``import pynq`` and a bare interpreter.

Each import runs in a fresh interpreter, ``--runs`` times, interleaved so
that a busy machine slows all three alike; the figures are the medians of
wall time and of peak RSS (``ru_maxrss`` of the child). The reference is
``import pynq`` measured in the same process just before, since the runtime
cannot import less than PYNQ: the targets are codesign's own share over
PYNQ's (at most 0.15 s and 8 MB; issue 20 asks 0.5 s and 60 MB over a bare
interpreter, of which PYNQ alone takes about 0.6 s and 58 MB on x86).

Run: .venv/bin/python benchmarks/bench_runtime_import.py [--runs 7] [--out reports/bench]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from codesign.io.reports import write_json_atomic

STATEMENTS = {"bare": "pass", "pynq": "import pynq", "runtime": "import codesign.deploy"}
TARGET_EXTRA_S, TARGET_EXTRA_MB = 0.15, 8.0
PROBE = ("import resource, sys, time\nstart = time.perf_counter()\nexec(sys.argv[1])\n"
         "print(time.perf_counter() - start, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)")


def measure(statement: str) -> tuple[float, float]:
    """Seconds the statement took and the child's peak RSS (MB), in a fresh interpreter."""
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", PROBE, statement], capture_output=True, text=True, check=True)
    wall = time.perf_counter() - started
    _, rss_kb = done.stdout.split()
    return wall, int(rss_kb) / 1024


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--out", default="reports/bench")
    args = parser.parse_args()
    if args.runs < 3:
        parser.error("--runs must be at least 3")
    samples: dict = {name: [] for name in STATEMENTS}
    for _ in range(args.runs):
        for name, statement in STATEMENTS.items():
            samples[name].append(measure(statement))
    median = {name: (statistics.median(s for s, _ in rows), statistics.median(m for _, m in rows))
              for name, rows in samples.items()}
    extra_s = median["runtime"][0] - median["pynq"][0]
    extra_mb = median["runtime"][1] - median["pynq"][1]
    summary = {"runs": args.runs, "load_average_after": os.getloadavg(),
               **{f"{name}_s": s for name, (s, _) in median.items()},
               **{f"{name}_mb": mb for name, (_, mb) in median.items()},
               "over_bare_s": median["runtime"][0] - median["bare"][0],
               "over_bare_mb": median["runtime"][1] - median["bare"][1],
               "over_pynq_s": extra_s, "over_pynq_mb": extra_mb,
               "target_over_pynq_s": TARGET_EXTRA_S, "target_over_pynq_mb": TARGET_EXTRA_MB}
    print(f"import codesign.deploy: {median['runtime'][0]:.3f} s, {median['runtime'][1]:.1f} MB; pynq alone "
          f"{median['pynq'][0]:.3f} s, {median['pynq'][1]:.1f} MB; bare {median['bare'][0]:.3f} s, "
          f"{median['bare'][1]:.1f} MB. codesign's share: {extra_s:+.3f} s, {extra_mb:+.1f} MB "
          f"(targets {TARGET_EXTRA_S} s, {TARGET_EXTRA_MB} MB)")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    write_json_atomic(out / "runtime_import.json", summary)
    return 0 if extra_s <= TARGET_EXTRA_S and extra_mb <= TARGET_EXTRA_MB else 1


if __name__ == "__main__":
    raise SystemExit(main())
