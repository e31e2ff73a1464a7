"""`codesign demo`: every PE from golden model to RTL, the shipped design's fit and build folders for every board,
one training run on the emulated board, and ``index.html`` linking every report and plot.

Two modes, the same stages:

- quick (``make demo``): each PE's verification at golden, C-sim and RTL on a tenth of the default stimulus
  (:func:`quick_options`); its Yosys table from the estimate cache or from the reports the repository ships
  (``rtl/yosys-reports/``, used only when their recorded RTL hash matches; on a miss Yosys runs for the PE's
  default spec and the other specs are reported as not estimated); a short training run;
- full (``--full``, ``make demo-full``): the default stimulus, every Yosys synthesis run here (two at a time,
  results kept in ``OUT/estimate-cache``), a TT layer's training step through PE1/PE2/PE3 and the TT paper
  comparison, and a longer training run. ``--ship-reports`` then copies the cache's labelled reports into
  ``rtl/yosys-reports/`` (``make yosys-reports``).

Every stage prints its start and its time; a summary table closes the run and is written to ``summary.md`` and
``summary.json`` beside ``index.html``.
"""

from __future__ import annotations

import dataclasses
import os
import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from codesign.boards import boards
from codesign.hw.protocol import ProcessingElement
from codesign.pe import get_pe, pe_names

DEMO_DESIGN = "digits_abvs.toml"  # the shipped design whose build folders the demo writes and trains on
# The shipped design's schedule on the emulated board: 5 whole epochs (85 steps) at lr 0.3 instead of its 20 at 0.05.
# Chosen on the validation split among 4-8 epochs at lr 0.05-0.3 (golden loop, seed 0): 0.952 validation accuracy,
# the best of them; a minute and a half on the emulated board with the golden loop beside it.
DEMO_SCHEDULE = {"epochs": 5, "lr": 0.3}
QUICK_DIVISOR = 10  # the quick demo's share of each PE's default stimulus size
INDEX = "index.html"
# where the demo keeps work files (simulator builds, Yosys runs, HLS projects): not reports, not linked one by one
WORK_DIRS = frozenset({"hls", "hls_project", "csim", "rtl", "sim_build", "yosys", "estimate-cache", "comparison_work",
                       "vivado", "__pycache__"})
REPORT_SUFFIXES = (".md", ".png", ".json", ".svg", ".csv")


# ----------------------------------------------------------------------------------------------- stages and timing
@dataclass
class Stage:
    """One step of the demo: its name, wall time, status (ok, FAIL, error) and a one-line detail."""

    name: str
    seconds: float = 0.0
    status: str = "running"
    detail: str = ""

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


class Stages:
    """Runs the demo's stages one after the other, printing ``[demo i/n] name`` with its time as each ends."""

    def __init__(self, planned: int, log: Callable[[str], None] = print) -> None:
        self.planned, self.log = planned, log
        self.stages: list[Stage] = []
        self.started = time.perf_counter()
        self.load_at_start = _load_average()

    @contextmanager
    def stage(self, name: str) -> Iterator[Stage]:
        """Time the body as stage ``name``; the body sets ``status`` to FAIL for a check that failed."""
        stage = Stage(name)
        self.stages.append(stage)
        tag = f"[demo {len(self.stages)}/{self.planned}]"
        self.log(f"{tag} {name} ...")
        started = time.perf_counter()
        try:
            yield stage
            if stage.status == "running":
                stage.status = "ok"
        except BaseException as error:
            stage.status, stage.detail = "error", f"{type(error).__name__}: {error}".splitlines()[0][:200]
            raise
        finally:
            stage.seconds = time.perf_counter() - started
            detail = f" ({stage.detail})" if stage.detail else ""
            self.log(f"{tag} {name}: {stage.status} in {stage.seconds:.1f} s{detail}")

    @property
    def total_seconds(self) -> float:
        return time.perf_counter() - self.started

    @property
    def passed(self) -> bool:
        return all(stage.status == "ok" for stage in self.stages)

    def table(self) -> str:
        lines = ["| # | stage | status | time (s) | detail |", "|---:|---|---|---:|---|"]
        for index, stage in enumerate(self.stages, 1):
            lines.append(f"| {index} | {stage.name} | {stage.status} | {stage.seconds:.1f} | {stage.detail} |")
        lines.append(f"| | **total** | {'ok' if self.passed else 'FAIL'} | {self.total_seconds:.1f} | |")
        return "\n".join(lines) + "\n"


def _load_average() -> float | None:
    """The one-minute load average (times depend on it: the cores may be shared), or None where there is none."""
    try:
        return round(os.getloadavg()[0], 2)
    except (AttributeError, OSError):
        return None


def machine_line(load_at_start: float | None) -> str:
    """CPUs and load averages at the start and the end, for reading the stage times."""
    return (f"{os.cpu_count()} CPUs; load average {load_at_start if load_at_start is not None else '?'} at the start, "
            f"{_load_average() if _load_average() is not None else '?'} at the end")


# ------------------------------------------------------------------------------------------------ per-PE stages
def quick_options(pe: ProcessingElement, divisor: int = QUICK_DIVISOR):
    """The PE's default stimulus options with every size knob (``min_*``, ``random_*``) divided by ``divisor``."""
    defaults = pe.stimulus_options()
    changes = {}
    for item in dataclasses.fields(defaults):
        value = getattr(defaults, item.name)
        if item.name.startswith(("min_", "random_")) and isinstance(value, int) and not isinstance(value, bool) \
                and value > 0:
            changes[item.name] = max(1, value // divisor)
    return dataclasses.replace(defaults, **changes)


def verify_stage(pe: ProcessingElement, out: Path, *, full: bool, stage: Stage) -> None:
    from codesign.hw.flow import generate_project, verify

    spec = pe.spec()
    generate_project(pe, spec, out / pe.name / "hls")
    options = None if full else quick_options(pe)
    report = verify(pe, spec, work_dir=out / pe.name / "verify", options=options, progress=lambda text: None)
    print(report.table())
    stage.detail = ", ".join(f"{r.level} {r.vectors} vectors {r.mismatches} mismatches" for r in report.results)
    if not report.passed:
        stage.status = "FAIL"


def yosys_stage(pe: ProcessingElement, out: Path, cache_dir: Path, *, full: bool, stage: Stage,
                workers: int = 2) -> None:
    """The PE's cost table over its estimate specs: every synthesis here (full), or cached/shipped reports (quick)."""
    from codesign.hw import yosys as ys
    from codesign.hw.estimate import plot_cost, render_markdown
    from codesign.hw.estimate_cache import SHIPPED_DIR, cached_report, lookup, merged_report
    from codesign.io.reports import write_json_atomic, write_text_atomic

    specs, default = list(pe.estimate_specs()), pe.spec()
    points = [(family, spec) for family in ys.SUPPORTED_FAMILIES for spec in specs]
    shipped = None if full else SHIPPED_DIR
    found = {}
    if not full:  # first what the cache or the repository already has: no Yosys
        for family, spec in points:
            report, why = lookup(pe, spec, family, cache_dir, shipped_dir=shipped)
            if report is not None:
                found[family, spec] = report
            elif why.startswith("shipped report not used"):  # a report is there, but for other RTL: say so
                print(f"[demo {pe.name}] {pe.describe_spec(spec)} on {family}: {why}")
    missing = [point for point in points if point not in found]
    run_now = missing if full else [(f, s) for f, s in missing if s == default]
    skipped = [point for point in missing if point not in run_now]
    if missing and not full:
        print(f"[demo {pe.name}] {len(missing)} of {len(points)} reports neither cached nor shipped for this RTL: "
              f"{'Yosys runs the default spec' if run_now else 'none is the default spec'}")
    with ThreadPoolExecutor(max_workers=workers) as pool:  # Yosys runs as a subprocess: threads suffice
        futures = {point: pool.submit(cached_report, pe, point[1], point[0], cache_dir, shipped_dir=shipped)
                   for point in run_now}
        for point, future in futures.items():
            found[point] = future.result()
    parts = [found[point] for point in points if point in found]
    origins = {origin: sum(part.origin == origin for part in parts) for origin in ("yosys", "cache", "shipped")}
    stage.detail = ", ".join(f"{count} {origin}" for origin, count in origins.items() if count)
    if skipped:
        stage.detail += f", {len(skipped)} not estimated (no report for this RTL: make demo-full runs them)"
        print(f"[demo {pe.name}] not estimated: " + ", ".join(f"{pe.describe_spec(s)} on {f}" for f, s in skipped))
    if not parts:
        return
    report = merged_report(pe, parts)
    estimate_dir = out / pe.name / "estimate"
    write_json_atomic(estimate_dir / f"{pe.name}_cost.json", report)
    markdown = render_markdown(report, pe.title) + _origin_note(parts)
    write_text_atomic(estimate_dir / f"{pe.name}_cost.md", markdown)
    plot_cost(report, estimate_dir / f"{pe.name}_cost.png", pe.title)
    print(markdown)


def _origin_note(parts) -> str:
    lines = ["", "Where each row comes from (reports are keyed by the SHA-256 of the RTL sources, the spec and the "
             "family; shipped reports are used only when their recorded hashes match the RTL here):", ""]
    for part in parts:
        entry = part.entry
        lines.append(f"- {entry['family']} {entry['label']}: {part.origin} ({part.yosys_version}; "
                     f"RTL sha256 {part.report.get('rtl_sha256', '?')[:16]}…)")
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------------------- design-level stages
def build_stage(board_name: str, out: Path, cache_dir: Path, *, stage: Stage) -> None:
    """The shipped design's build folder for ``board_name``, its Tcl lint in both modes, no bitstream."""
    from codesign.design import load_design
    from codesign.design.build import write_build_folder
    from codesign.shell.vivado import lint_vivado_build
    from codesign.resources import data_dir

    design = load_design(data_dir("examples") / DEMO_DESIGN, board_name=board_name)
    folder = write_build_folder(design, out / "build" / board_name, cache_dir=cache_dir, progress=True)
    print(folder.fit.table())
    for board_files in (True, False):
        mode = "with board files" if board_files else "part only"
        print(f"[demo build {board_name}, {mode}] {lint_vivado_build(folder.root, board_files=board_files).describe()}")
    print(f"[demo build {board_name}] not built here: run the commands in {folder.root / 'README.md'} "
          "where vitis_hls and vivado are installed, or `codesign build`")
    percent = folder.fit.percent
    stage.detail = (f"{len(folder.written)} files; fit: " + ", ".join(f"{k} {v:.1f} %" for k, v in percent.items())
                    + ("" if folder.fit.fits else " (does not fit)"))


def _training_overlay(out: Path, family_name: str | None):
    """The overlay a training stage runs on, its design and its folder: the shipped design's zedboard build folder
    (``family_name`` None), or an emulation folder of a registered family's example design."""
    from codesign.deploy import CodesignOverlay
    from codesign.deploy.families import get_family
    from codesign.design import load_design
    from codesign.design.build import write_emulation_folder
    from codesign.resources import data_dir

    if family_name is None:
        design = load_design(data_dir("examples") / DEMO_DESIGN, board_name="zedboard")
        folder, results = out / "build" / "zedboard", out / "training"
    else:
        design = load_design(data_dir("examples") / get_family(family_name).example, board_name="zedboard")
        folder = write_emulation_folder(design, out / "training" / family_name / "emulation")
        results = out / "training" / family_name
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the notice that the emulated board stands in for the board
        return CodesignOverlay(folder, design=design, emulate=True), design, results


def training_stage(out: Path, *, full: bool, stage: Stage, family_name: str | None = None) -> None:
    """Train on the emulated board (its generated HLS C++) beside the golden loop and compare: the shipped design
    (``family_name`` None), or the example design of a registered family (the full demo trains every family)."""
    from codesign.deploy.selfcheck import compare_states
    from codesign.deploy.families import board_trainer, family_of, golden_trainer
    from codesign.io.reports import write_json_atomic, write_text_atomic
    from codesign.train.trainer import load_dataset

    overlay, design, folder = _training_overlay(out, family_name)
    family = family_of(overlay.manifest)
    if family_name is None:  # the shipped design: whole epochs, to an accuracy a person believes
        changes, max_steps = {**family.quick_changes, **DEMO_SCHEDULE}, None
    else:  # another family's example, in the full demo: its whole path in a few epochs
        changes, max_steps = {**family.quick_changes, "epochs": 6}, None if full else 12
    epochs = changes["epochs"]
    data = load_dataset(design.training)
    board, golden = board_trainer(overlay, **changes), golden_trainer(overlay.manifest, **changes)
    seconds = {}
    for role, trainer in (("emulated board", board), ("golden loop", golden)):
        started = time.perf_counter()
        trainer.fit(data, progress=False, max_steps=max_steps)
        seconds[role] = time.perf_counter() - started
    words = compare_states(board.read_weights(), golden.read_weights(), family.state_keys)
    rows = [{key: value for key, value in row.items() if key != "macs"} for row in board.history]
    result = {"design": design.name, "board": "zedboard (emulated: generated HLS C++ under g++)", "family": family.key,
              "epochs": epochs, "steps_per_epoch": board.steps_per_epoch, "batch": board.setup.batch_size,
              "history": rows, "golden_history": [{k: v for k, v in row.items() if k != "macs"} for row in golden.history],
              "seconds": seconds, "state_words": words}
    write_json_atomic(folder / "training.json", result)
    write_text_atomic(folder / "training.md", _training_markdown(result))
    _plot_training(result, folder / "training.png")
    print(_training_markdown(result))
    final, gold = rows[-1], result["golden_history"][-1]
    stage.detail = (f"{len(rows)} epochs x {board.steps_per_epoch} steps: test accuracy {100 * final['accuracy']:.1f} % "
                    f"on the emulated board, {100 * gold['accuracy']:.1f} % in the golden loop; {words['differ']} of "
                    f"{words['compared']} state words differ")
    if words["differ"]:
        stage.status = "FAIL"


def other_families() -> list[str]:
    """The registered training families other than the shipped design's (the full demo trains each once more)."""
    from codesign.deploy.families import family_names
    from codesign.design import load_design
    from codesign.design.families import loop_entry
    from codesign.resources import data_dir

    shipped = loop_entry(load_design(data_dir("examples") / DEMO_DESIGN, board_name="zedboard"))
    return [name for name in family_names() if shipped is None or name != shipped["family"]]


def _training_markdown(result: dict) -> str:
    lines = [f"# Training {result['design']} on the {result['board']}", "",
             f"{result['epochs']} epochs of {result['steps_per_epoch']} steps (batch {result['batch']}), the "
             f"{result['family']} loop; the golden loop trained beside it on the same batches. Test accuracy after "
             f"the last epoch: {100 * result['history'][-1]['accuracy']:.1f} % on the emulated board, "
             f"{100 * result['golden_history'][-1]['accuracy']:.1f} % in the golden loop.", "",
             "| epoch | FB | loss | test accuracy (%) | validation accuracy (%) | golden accuracy (%) | seconds |",
             "|---:|---:|---:|---:|---:|---:|---:|"]
    for row, gold in zip(result["history"], result["golden_history"]):
        lines.append(f"| {row['epoch']} | {row.get('fb', '')} | {row['loss']:.4f} | {100 * row['accuracy']:.1f} | "
                     f"{100 * row.get('validation_accuracy', float('nan')):.1f} | {100 * gold['accuracy']:.1f} | "
                     f"{row['seconds']:.1f} |")
    words = result["state_words"]
    lines += ["", f"State words compared with the golden loop: {words['compared']}, differing: {words['differ']}.",
              "Seconds: " + ", ".join(f"{role} {s:.1f}" for role, s in result["seconds"].items()) + "."]
    return "\n".join(lines) + "\n"


def _plot_training(result: dict, path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    from codesign.io.reports import write_figure_png

    figure, (loss_ax, acc_ax) = plt.subplots(1, 2, figsize=(9, 3.6), constrained_layout=True)
    for rows, label, style in ((result["history"], "emulated board", "o-"),
                               (result["golden_history"], "golden loop", "x--")):
        epochs = [row["epoch"] for row in rows]
        loss_ax.plot(epochs, [row["loss"] for row in rows], style, label=label)
        acc_ax.plot(epochs, [row["accuracy"] for row in rows], style, label=f"{label}, test")
    acc_ax.plot([row["epoch"] for row in result["history"]],
                [row.get("validation_accuracy", float("nan")) for row in result["history"]], "s:",
                label="emulated board, validation")
    for row in result["history"]:
        if "fb" in row:
            acc_ax.annotate(f"FB {row['fb']}", (row["epoch"], row["accuracy"]), textcoords="offset points",
                            xytext=(0, 6), fontsize=7)
    loss_ax.set(xlabel="epoch", ylabel="training loss", title="loss")
    acc_ax.set(xlabel="epoch", ylabel="accuracy", title="accuracy")
    for ax in (loss_ax, acc_ax):
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7)
    words = result["state_words"]
    figure.suptitle(f"{result['design']} on the emulated board: {words['differ']} of {words['compared']} state words "
                    "differ from the golden loop", fontsize=9)
    return write_figure_png(figure, path, dpi=110)


def tt_stages(out: Path, stages: Stages) -> None:
    """The full demo's TT layer step (PE1/PE2/PE3 at every level) and the TT paper comparison."""
    from codesign.reproduce.tt_step_paper import measure_comparison, write_comparison
    from codesign.train.tt.step_demo import demo_layer_step

    with stages.stage("TT layer step: golden, C-sim, RTL") as stage:
        if not demo_layer_step(out / "tt_layer", progress=print):
            stage.status = "FAIL"
    with stages.stage("TT paper comparison (Yosys DSP counts)") as stage:
        written = write_comparison(out / "tt_layer", measure_comparison(out / "tt_layer" / "comparison_work"))
        print(written["md"].read_text())
        stage.detail = ", ".join(path.name for path in written.values())


# ------------------------------------------------------------------------------------------------------- index
def report_files(out: Path) -> list[Path]:
    """Every report and plot under ``out`` (relative paths), outside the work folders, sorted; index.html excluded."""
    from codesign.io.outdir import OUTPUT_MARKER

    found = []
    for path in sorted(Path(out).rglob("*")):
        relative = path.relative_to(out)
        if not path.is_file() or relative.name in (INDEX, OUTPUT_MARKER) or relative.name.startswith("."):
            continue
        if any(part in WORK_DIRS for part in relative.parts[:-1]) or path.suffix not in REPORT_SUFFIXES:
            continue
        found.append(relative)
    return found


def write_index(out: Path, stages: Sequence[Stage], *, title: str, total_seconds: float,
                extra_links: Sequence[Path] = (), machine: str = "") -> Path:
    """``out/index.html``, the dashboard (:mod:`codesign.dashboard`) over every report and plot and
    ``extra_links`` (files that are not reports by suffix: an HLS kernel, a Vivado script)."""
    from codesign.dashboard import write_dashboard

    out = Path(out)
    files = report_files(out) + [Path(p) for p in extra_links if (out / p).is_file()]
    return write_dashboard(out, stages, files, title=title, total_seconds=total_seconds, machine=machine)


# ------------------------------------------------------------------------------------------------------- the run
def plan_size(pes: Sequence[ProcessingElement], *, design_stages: bool, full: bool) -> int:
    extra = 2 + len(other_families()) if full else 0  # the TT layer step and comparison, the other families' runs
    return 2 * len(pes) + (len(boards()) + 1 + extra if design_stages else 0)


def run_demo(out: Path, pe_list: Sequence[str] = (), *, full: bool = False, ship_reports: bool = False,
             log: Callable[[str], None] = print) -> int:
    """Run the demo into ``out`` (which the caller has claimed); 0 when every stage passed."""
    chosen = [get_pe(name) for name in pe_list] if pe_list else [get_pe(name) for name in pe_names()]
    design_stages = not pe_list
    out = Path(out)
    from codesign.dashboard import remove_renderings

    remove_renderings(out)  # an earlier run's pages beside its reports: its build folders as the build left them
    cache_dir = out / "estimate-cache"
    stages = Stages(plan_size(chosen, design_stages=design_stages, full=full), log=log)
    mode = "full" if full else f"quick (1/{QUICK_DIVISOR} of the stimulus, Yosys reports from the cache or the repository)"
    log(f"[demo] {mode}: {len(chosen)} PEs{', the design stages' if design_stages else ''}; output {out}")
    extra: list[Path] = []
    try:
        for pe in chosen:
            with stages.stage(f"{pe.name}: HLS project, verify golden/C-sim/RTL") as stage:
                verify_stage(pe, out, full=full, stage=stage)
            extra += [Path(pe.name, "hls", name) for name in ("run_hls.tcl",)]
            with stages.stage(f"{pe.name}: Yosys cost table") as stage:
                yosys_stage(pe, out, cache_dir, full=full, stage=stage)
        if design_stages:
            if full:
                tt_stages(out, stages)
            for board_name in sorted(boards()):
                with stages.stage(f"{DEMO_DESIGN}: fit and build folder for {board_name}") as stage:
                    build_stage(board_name, out, cache_dir, stage=stage)
                extra += [Path("build", board_name, "vivado", "build.tcl")]
            with stages.stage("training on the emulated board, with the golden loop") as stage:
                training_stage(out, full=full, stage=stage)
            for name in other_families() if full else ():
                with stages.stage(f"training family {name} (its example design) on the emulated board") as stage:
                    training_stage(out, full=full, stage=stage, family_name=name)
    finally:
        _close(out, stages, full=full, extra=extra, log=log)
    if ship_reports:
        log(f"[demo] shipped {len(ship(cache_dir))} Yosys reports to rtl/yosys-reports/")
    log("[demo] PASS" if stages.passed else "[demo] FAIL")
    return 0 if stages.passed else 1


def _close(out: Path, stages: Stages, *, full: bool, extra: list[Path], log) -> None:
    """The summary table (printed, summary.md/json) and index.html, also after a stage raised."""
    from codesign.io.reports import write_json_atomic, write_text_atomic

    table, machine = stages.table(), machine_line(stages.load_at_start)
    log(f"\n[demo] summary ({machine})\n" + table)
    title = f"codesign demo ({'full' if full else 'quick'})"
    write_text_atomic(out / "summary.md", f"# {title}\n\n{machine}\n\n{table}")
    write_json_atomic(out / "summary.json", {"mode": "full" if full else "quick", "passed": stages.passed,
                                             "total_seconds": round(stages.total_seconds, 1), "machine": machine,
                                             "stages": [stage.to_dict() for stage in stages.stages]})
    index = write_index(out, stages.stages, title=title, total_seconds=stages.total_seconds, extra_links=extra,
                        machine=machine)
    log(f"[demo] open {index}")


def ship(cache_dir: Path) -> list[Path]:
    """Copy the cache's labelled reports into the repository, after removing shipped reports of RTL that changed."""
    from codesign.hw.estimate_cache import SHIPPED_DIR, load_report, rtl_sha256, ship as ship_cache

    current = {name: rtl_sha256(get_pe(name)) for name in pe_names()}
    for path in sorted(SHIPPED_DIR.glob("*.json")):
        report = load_report(path)
        if current.get(report.get("pe")) != report.get("rtl_sha256"):
            path.unlink()  # its PE's RTL changed (or the PE is gone): the report can never match again
    return ship_cache(cache_dir, SHIPPED_DIR, current=current)
