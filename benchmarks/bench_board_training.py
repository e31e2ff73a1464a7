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

Families: every one registered in :data:`codesign.deploy.families.REGISTRY` (fpmac_array, csb, tt: the
board runtime's NumPy loops), each on its example design with the family's short-run set-up changes
(its ``quick_changes``; a set-up with warm-up epochs runs one epoch of two steps on both, untimed, first), and
``tt-torch``: the TT design with the desktop's torch trainer as host. A new family joins by its registry entry.

Run: .venv/bin/python benchmarks/bench_board_training.py [--steps 6] [--families fpmac_array,csb,tt,tt-torch] [--out reports/bench]
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

from codesign.io.reports import write_json_atomic
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


def family_pair(name: str, root: Path, data: Dataset) -> Pair:
    """The board trainer and golden loop of a registered family (:data:`codesign.deploy.families.REGISTRY`) on its
    example design, with the family's short-run set-up changes (its ``quick_changes``). A set-up that starts with
    warm-up epochs (csb's float warm-up and pruning search, TT's prior) runs one epoch of two steps on both first,
    untimed, so the timed steps are those of the loop's main phase."""
    from codesign.deploy.families import board_trainer, get_family, golden_trainer
    from codesign.design import load_design

    family = get_family(name)
    design = load_design(EXAMPLES / family.example)
    overlay = _overlay(design, root)
    board = board_trainer(overlay, **family.quick_changes)
    golden = golden_trainer(overlay.manifest, **family.quick_changes)
    if getattr(golden.setup, "warmup_epochs", 0):
        for trainer in (board, golden):
            trainer.fit(data, epochs=1, progress=False, max_steps=2)

    def words(trainer) -> list[np.ndarray]:
        state = trainer.read_weights()
        return [np.asarray(array) for key in family.state_keys for array in state[key]]

    return Pair(board, golden, words, golden.setup.batch_size)


def tt_torch_pair(root: Path, data: Dataset) -> Pair:
    """The TT design with the desktop's torch trainer as host (not a board-runtime family: it needs torch)."""
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


def pairs() -> dict[str, Callable[[Path, Dataset], Pair]]:
    """Every registered board-runtime family, then the TT design on the desktop's torch host."""
    from codesign.deploy.families import family_names

    made: dict[str, Callable[[Path, Dataset], Pair]] = {
        name: (lambda root, data, name=name: family_pair(name, root, data)) for name in family_names()}
    return {**made, "tt-torch": tt_torch_pair}


def batches(data: Dataset, size: int, count: int, seed: int = 0) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """``count`` full batches of the training split in a seeded order."""
    order = np.random.default_rng(seed).permutation(len(data.train_y))
    if count * size > order.size:
        raise SystemExit(f"--steps {count} x batch {size} exceeds the {order.size} training samples")
    for index in range(count):
        rows = order[index * size:(index + 1) * size]
        yield data.train_x[rows], data.train_y[rows]


def _traffic():
    """The emulated board's host-to-PL counters (bytes flushed and read back, register writes), or None on a board."""
    from pynq import Device

    return getattr(Device.active_device, "traffic", None)


def measure(name: str, pair: Pair, data: Dataset, steps: int) -> dict:
    """One untimed step of each (the IP's first call), then ``steps`` timed steps of each in turn; then the states.
    The host's traffic to the PL is counted over the timed steps (the golden loop does not touch the device)."""
    seconds = {"board": 0.0, "golden": 0.0}
    traffic = _traffic()
    for index, (x, y) in enumerate(batches(data, pair.batch_size, steps + 1)):
        if index == 1 and traffic is not None:
            traffic.clear()
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
    per_step = {key: value / steps for key, value in traffic.as_dict().items()} if traffic is not None else {}
    return {"traffic_per_step": per_step, "family": name, "steps": steps + 1, "timed_steps": steps,
            "batch": pair.batch_size,
            "board_s": seconds["board"], "golden_s": seconds["golden"],
            "board_steps_per_s": steps / seconds["board"], "golden_steps_per_s": steps / seconds["golden"],
            "ratio": seconds["golden"] / seconds["board"], "words_compared": compared, "words_differ": differ,
            "ip_calls": figures.get("ip_calls"), "ip_busy_s": figures.get("ip_busy_s"),
            "pe_model_s": figures.get("pe_model_s")}


def table(rows: list[dict]) -> str:
    lines = ["| family | steps (batch) | emulated steps/s | golden steps/s | emulated / golden | IP calls | "
             "state words compared | differ | flushed KiB/step | read back KiB/step | register writes/step |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        t = r["traffic_per_step"]
        lines.append(f"| {r['family']} | {r['steps']} ({r['batch']}) | {r['board_steps_per_s']:.2f} | "
                     f"{r['golden_steps_per_s']:.2f} | {r['ratio']:.2f}x | {r['ip_calls']} | "
                     f"{r['words_compared']:,} | {r['words_differ']} | {t.get('flushed_bytes', 0) / 1024:,.0f} | "
                     f"{t.get('invalidated_bytes', 0) / 1024:,.0f} | {t.get('register_writes', 0):,.0f} |")
    return "\n".join(lines) + "\n"


def plot(rows: list[dict], path: Path) -> Path:
    """Steps per second of both loops, one pair of bars per family."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from codesign.io.reports import write_figure_png

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
    available = pairs()
    parser.add_argument("--families", default=",".join(available))
    parser.add_argument("--out", default="reports/bench")
    args = parser.parse_args()
    families = [name.strip() for name in args.families.split(",") if name.strip()]
    unknown = sorted(set(families) - set(available))
    if unknown or not families:
        parser.error(f"--families: unknown {unknown or 'none given'}; choose from {', '.join(available)}")
    if args.steps < 1:
        parser.error("--steps must be >= 1")

    data = load_digits_dataset()
    rows = []
    with tempfile.TemporaryDirectory(prefix="codesign_bench_board_") as tmp:
        for name in families:
            print(f"[{name}] building the emulation folder and both trainers ...", flush=True)
            rows.append(measure(name, available[name](Path(tmp), data), data, args.steps))
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
