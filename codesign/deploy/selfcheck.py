"""Check a board runtime where it is installed: train a few steps through the driver and through the golden loop,
and compare every state word.

``python -m codesign.deploy.selfcheck BUILD_DIR DATA.npz [--steps N] [--emulate]`` opens the build folder's
overlay (the board when PYNQ finds one and the bitstream is there, else the emulated board with ``--emulate``),
builds the design's board trainer and its golden loop from design.json (``loop``), trains both for ``N`` steps
of the same batches, and prints one JSON line: the family, the steps, the words compared and how many differ,
and the seconds of each run. The exit status is 0 only when no word differs and both runs saw the same accuracy.

It needs nothing but this runtime (NumPy and PYNQ), so it runs as it is on a PYNQ image, and in the image-like
virtual environments the test suite builds (``tests/deploy/test_image_venvs.py``).
"""

from __future__ import annotations

import argparse
import signal
import json
import sys
import time
import warnings
from pathlib import Path
from typing import Any, Dict, List

import numpy as np

from codesign.deploy.manifest import DeployError
from codesign.deploy.overlay import CodesignOverlay
from codesign.deploy.families import board_trainer, family_of, golden_trainer
from codesign.loops.common import HwTrainError
from codesign.loops.data import DataFileError, load_npz


def compare_states(board: Dict[str, Any], golden: Dict[str, Any], keys) -> Dict[str, int]:
    """Words compared and words that differ over the arrays under ``keys`` (shapes must agree)."""
    compared = differ = 0
    for key in keys:
        if len(board[key]) != len(golden[key]):
            raise DeployError(f"{key}: {len(board[key])} arrays against {len(golden[key])}")
        for mine, theirs in zip(board[key], golden[key]):
            mine, theirs = np.asarray(mine), np.asarray(theirs)
            if mine.shape != theirs.shape:
                raise DeployError(f"{key}: shapes {mine.shape} and {theirs.shape} differ")
            compared += mine.size
            differ += int(np.count_nonzero(mine != theirs))
    return {"compared": compared, "differ": differ}


def check(build_dir: Path, data_file: Path, *, steps: int = 2, emulate=None) -> Dict[str, Any]:
    """Train the design's loop on the board (or emulated board) and golden; the comparison as a dict."""
    data = load_npz(data_file)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the notice that the emulated board stands in is part of the report
        overlay = CodesignOverlay(build_dir, emulate=emulate)
    versions = {"python": ".".join(map(str, sys.version_info[:3])), "numpy": np.__version__,
                "pynq": __import__("pynq").__version__}
    family = family_of(overlay.manifest)
    changes = family.quick_changes
    board = board_trainer(overlay, **changes)
    golden = golden_trainer(overlay.manifest, **changes)
    seconds: List[float] = []
    for trainer in (board, golden):
        started = time.perf_counter()
        trainer.fit(data, progress=False, max_steps=steps)
        seconds.append(time.perf_counter() - started)
    result = compare_states(board.read_weights(), golden.read_weights(), family.state_keys)
    same_history = [row["accuracy"] for row in board.history] == [row["accuracy"] for row in golden.history]
    return {"family": family.key, "design": overlay.manifest["design"], "emulated": bool(overlay.emulated),
            "steps": board.step, **result, "same_accuracy": same_history,
            "board_s": round(seconds[0], 3), "golden_s": round(seconds[1], 3), **versions}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m codesign.deploy.selfcheck", description=__doc__.split("\n\n")[0])
    parser.add_argument("build_dir", type=Path, help="build folder (design.json, hls/<ip>/, the bitstream if built)")
    parser.add_argument("data", type=Path, help="the data set as .npz (codesign bundle writes it)")
    parser.add_argument("--steps", type=int, default=2, help="training steps per epoch (two epochs run)")
    parser.add_argument("--emulate", action="store_true", help="use the emulated board even on a board")
    args = parser.parse_args(argv)
    if args.steps < 1:
        parser.error(f"--steps must be at least 1, got {args.steps}")
    def terminate(signum, frame):
        raise KeyboardInterrupt("SIGTERM")

    signal.signal(signal.SIGTERM, terminate)  # a kill ends as Ctrl-C does: one line
    try:
        report = check(args.build_dir, args.data, steps=args.steps, emulate=True if args.emulate else None)
    except (DeployError, DataFileError, HwTrainError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as stop:  # Ctrl-C or SIGTERM: one line, nothing was written
        print(f"selfcheck: {'terminated (SIGTERM)' if stop.args == ('SIGTERM',) else 'interrupted'}", file=sys.stderr)
        return 143 if stop.args == ("SIGTERM",) else 130
    print(json.dumps(report))
    return 0 if report["differ"] == 0 and report["same_accuracy"] else 1


if __name__ == "__main__":
    sys.exit(main())
