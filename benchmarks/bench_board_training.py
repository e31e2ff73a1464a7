"""Training through the PYNQ driver on the emulated board against the golden loop, per PE family, in one process.

For each PE family with a board trainer, the shipped design point is
written as an emulation folder and opened as a :class:`CodesignOverlay`
(``emulate=True``): every layer product of the board run executes the IP's
generated HLS C++ (shell and PE kernel, g++, ctypes). The golden loop of the
same design point trains beside it on the same batches, one step of each in
turn, so both see the same machine load. The benchmark reports the steps per
second of both and their ratio (emulated / golden), and checks that the
two states are bit-identical afterwards (a mismatch fails the run). It
writes ``board_training.json`` and a bar chart ``board_training.png``.

Families and their design points:

- ``fb-float``: examples/digits_abvs.toml, FB-float MLP on the fpmac_array IP;
- ``csb``: examples/digits_compressed_mlp.toml, compressed training on the csb IP
  (one float warm-up epoch of two steps and the pruning search first, untimed;
  a constant learning rate);
- ``tt``: examples/digits_tt.toml, TT layers on the tt1 and tt2 IPs, the torch trainer's host;
- ``tt-numpy``: the same design with the board runtime's NumPy TT loop (:mod:`codesign.loops.tt`) as host.

Run: .venv/bin/python benchmarks/bench_board_training.py [--steps 6] [--families fb-float,csb,tt,tt-numpy] [--out reports/bench]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from codesign.hw.reports import write_json_atomic
from codesign.train.data import Dataset, load_digits_dataset

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


@dataclass(frozen=True)
class Pair:
    """A board trainer and the golden trainer of the same design point, and how to read their state as words."""

    board: object
    golden: object
    words: Callable[[object], list[np.ndarray]]  # the trainer's state as integer (or float32-bit) arrays
    batch_size: int


def _overlay(design, root: Path):
    from codesign.deploy import CodesignOverlay
    from codesign.design.build import write_emulation_folder

    folder = write_emulation_folder(design, root / design.name / design.board.name)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the notice that the emulated board was picked
        return CodesignOverlay(folder, design=design, emulate=True)


def fb_float_pair(root: Path, data: Dataset) -> Pair:
    from codesign.deploy.training import BoardTrainer
    from codesign.design import load_design
    from codesign.design.loops import fb_setup_of
    from codesign.loops.fb import FbMlpTrainer

    design = load_design(EXAMPLES / "digits_abvs.toml")
    board = BoardTrainer(_overlay(design, root), design)
    golden = FbMlpTrainer(fb_setup_of(design))

    def words(trainer) -> list[np.ndarray]:
        state = trainer.read_weights()
        return [*state["weights"], *state["biases"], *state["velocity"]]

    return Pair(board, golden, words, golden.setup.batch_size)


def csb_pair(root: Path, data: Dataset) -> Pair:
    from codesign.deploy.csb_training import CsbBoardTrainer
    from codesign.design import load_design
    from codesign.design.loops import csb_setup_of
    from codesign.loops.csb import CsbMlpTrainer

    design = load_design(EXAMPLES / "digits_compressed_mlp.toml")
    # a constant rate: the cosine schedule of fit() would span only the warm-up's two steps and reach 0
    changes = {"epochs": 2, "warmup_epochs": 1, "schedule": "constant"}
    board = CsbBoardTrainer(_overlay(design, root), design, **changes)
    golden = CsbMlpTrainer(csb_setup_of(design, **changes))
    for trainer in (board, golden):  # the float warm-up and the pruning search, then the fixed-point phase
        trainer.fit(data, epochs=1, progress=False, max_steps=2)
        assert trainer.phase == "fixed"

    def words(trainer) -> list[np.ndarray]:
        state = trainer.read_weights()
        return [*state["buffers"], *(mask.astype(np.uint8) for mask in state["masks"])]

    return Pair(board, golden, words, golden.setup.batch_size)


def tt_pair(root: Path, data: Dataset) -> Pair:
    from codesign.board_tt import BoardTtTrainer
    from codesign.design import load_design
    from codesign.train.hw_golden_tt import TtHwTrainer

    design = load_design(EXAMPLES / "digits_tt.toml")
    board = BoardTtTrainer(_overlay(design, root), design, dataset=data)
    golden = TtHwTrainer.from_design(design, dataset=data)

    def words(trainer) -> list[np.ndarray]:
        state = trainer.read_weights()
        arrays = [core for layer in state["cores"] for core in layer]
        arrays += [bias for bias in state["biases"] if bias is not None]
        arrays += [moment for moments in state["moments"] for moment in moments]
        return [np.ascontiguousarray(a, dtype=np.float32).view(np.uint32) for a in arrays]

    return Pair(board, golden, words, design.training.optim.batch_size)


def tt_numpy_pair(root: Path, data: Dataset) -> Pair:
    from codesign.deploy.trainers import golden_trainer
    from codesign.deploy.tt_training import TtBoardTrainer
    from codesign.design import load_design

    design = load_design(EXAMPLES / "digits_tt.toml")
    overlay = _overlay(design, root)
    board, golden = TtBoardTrainer(overlay, design), golden_trainer(overlay.manifest)

    def words(trainer) -> list[np.ndarray]:
        state = trainer.read_weights()
        return [np.ascontiguousarray(a).view(np.uint32 if a.dtype == np.float32 else np.uint64)
                for key in ("cores", "biases", "moments", "trackers") for a in state[key]]

    return Pair(board, golden, words, golden.setup.batch_size)


FAMILIES: dict[str, Callable[[Path, Dataset], Pair]] = {"fb-float": fb_float_pair, "csb": csb_pair, "tt": tt_pair,
                                                        "tt-numpy": tt_numpy_pair}


def batches(data: Dataset, size: int, count: int, seed: int = 0) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """``count`` full batches of the training split in a seeded order."""
    order = np.random.default_rng(seed).permutation(len(data.train_y))
    if count * size > order.size:
        raise SystemExit(f"--steps {count} x batch {size} exceeds the {order.size} training samples")
    for index in range(count):
        rows = order[index * size:(index + 1) * size]
        yield data.train_x[rows], data.train_y[rows]


def measure(name: str, pair: Pair, data: Dataset, steps: int) -> dict:
    """One untimed step of each (the IP's first call), then ``steps`` timed steps of each in turn; then the states."""
    seconds = {"board": 0.0, "golden": 0.0}
    for index, (x, y) in enumerate(batches(data, pair.batch_size, steps + 1)):
        for role in ("board", "golden"):
            started = time.perf_counter()
            getattr(pair, role).train_step(x, y)
            if index:
                seconds[role] += time.perf_counter() - started
    mine, theirs = pair.words(pair.board), pair.words(pair.golden)
    if [a.shape for a in mine] != [b.shape for b in theirs]:
        raise SystemExit(f"{name}: the two states have different shapes")
    compared = sum(a.size for a in mine)
    differ = sum(int(np.count_nonzero(a != b)) for a, b in zip(mine, theirs))
    figures = pair.board.throughput()
    return {"family": name, "steps": steps + 1, "timed_steps": steps, "batch": pair.batch_size,
            "board_s": seconds["board"], "golden_s": seconds["golden"],
            "board_steps_per_s": steps / seconds["board"], "golden_steps_per_s": steps / seconds["golden"],
            "ratio": seconds["golden"] / seconds["board"], "words_compared": compared, "words_differ": differ,
            "ip_calls": figures.get("ip_calls"), "ip_busy_s": figures.get("ip_busy_s"),
            "pe_model_s": figures.get("pe_model_s")}


def table(rows: list[dict]) -> str:
    lines = ["| family | steps (batch) | emulated steps/s | golden steps/s | emulated / golden | IP calls | "
             "state words compared | differ |", "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        lines.append(f"| {r['family']} | {r['steps']} ({r['batch']}) | {r['board_steps_per_s']:.2f} | "
                     f"{r['golden_steps_per_s']:.2f} | {r['ratio']:.2f}x | {r['ip_calls']} | "
                     f"{r['words_compared']:,} | {r['words_differ']} |")
    return "\n".join(lines) + "\n"


def plot(rows: list[dict], path: Path) -> Path:
    """Steps per second of both loops, one pair of bars per family."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from codesign.hw.reports import write_figure_png

    figure, axes = plt.subplots(figsize=(6.4, 3.4))
    x, width = np.arange(len(rows)), 0.38
    axes.bar(x - width / 2, [r["board_steps_per_s"] for r in rows], width, label="emulated board (generated HLS C++)")
    axes.bar(x + width / 2, [r["golden_steps_per_s"] for r in rows], width, label="golden loop")
    axes.set_xticks(x, [f"{r['family']}\n({r['words_differ']} of {r['words_compared']:,} words differ)" for r in rows])
    axes.set_ylabel(f"training steps / s (batch {rows[0]['batch']})")
    axes.legend(frameon=False)
    figure.tight_layout()
    return write_figure_png(figure, path)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=6, help="timed steps per family (after one untimed step)")
    parser.add_argument("--families", default=",".join(FAMILIES))
    parser.add_argument("--out", default="reports/bench")
    args = parser.parse_args()
    families = [name.strip() for name in args.families.split(",") if name.strip()]
    unknown = sorted(set(families) - set(FAMILIES))
    if unknown or not families:
        parser.error(f"--families: unknown {unknown or 'none given'}; choose from {', '.join(FAMILIES)}")
    if args.steps < 1:
        parser.error("--steps must be >= 1")

    data = load_digits_dataset()
    rows = []
    with tempfile.TemporaryDirectory(prefix="codesign_bench_board_") as tmp:
        for name in families:
            print(f"[{name}] building the emulation folder and both trainers ...", flush=True)
            rows.append(measure(name, FAMILIES[name](Path(tmp), data), data, args.steps))
            r = rows[-1]
            print(f"[{name}] {r['board_steps_per_s']:.2f} steps/s emulated, {r['golden_steps_per_s']:.2f} golden "
                  f"({r['ratio']:.2f}x); {r['words_differ']} of {r['words_compared']} state words differ", flush=True)
    print(table(rows))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    write_json_atomic(out / "board_training.json", {"cpu_count": os.cpu_count(), "load_average_after":
                                                    os.getloadavg(), "families": rows})
    print(f"wrote {out / 'board_training.json'} and {plot(rows, out / 'board_training.png')}")
    return 0 if all(r["words_differ"] == 0 for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
