"""The `codesign` commands on a design's hardware: design, explore, calibrate, build and bundle."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

HARDWARE_ONLY_HELP = ("accept a design no board runtime trains (its PEs are no training family's, or its family's "
                      "loop refuses the configuration): its hardware alone")
ESTIMATE_CACHE_HELP = ("Yosys estimate cache (default: estimates/ in the user's cache, ~/.cache/codesign or "
                       "$CODESIGN_CACHE, so that synthesis is not rerun from another folder)")


def _estimate_cache(args: argparse.Namespace) -> Path:
    """The Yosys estimate cache a command reads and fills: ``--cache``, else the user's cache folder's."""
    from codesign.io.cache import cache_dir

    return Path(args.cache) if args.cache else cache_dir() / "estimates"


def _cmd_design(args: argparse.Namespace) -> int:
    from codesign.design import load_design
    from codesign.design.fit import fit_design, write_fit
    from codesign.io.outdir import check_output_dir, output_dir

    design = load_design(Path(args.config), board_name=args.board)
    _check_trainable(design, args)
    if args.out:
        check_output_dir(Path(args.out), "design")  # before Yosys
    print(design.describe())
    report = fit_design(design, cache_dir=_estimate_cache(args), limit_percent=args.limit, progress=True)
    print()
    print(report.table())
    if args.out:
        with output_dir(Path(args.out), "design") as out:
            for path in write_fit(report, out):
                print(f"wrote {path}")
    return 0 if report.fits else 1


def _check_trainable(design, args: argparse.Namespace) -> None:
    """A design no board runtime can train is refused before any work, unless ``--hardware-only`` says it is
    meant as hardware alone."""
    from codesign.design.families import untrainable

    why = None if args.hardware_only else untrainable(design)
    if why:
        raise ValueError(f"{why}; --hardware-only takes it as hardware alone")


def _cmd_explore(args: argparse.Namespace) -> int:
    from codesign.design import load_design
    from codesign.design.explore_run import explore_design, summary, write_reports
    from codesign.io.outdir import check_output_dir, output_dir
    from codesign.train.config import read_toml, resolve_data_path

    design = load_design(Path(args.config), board_name=args.board)  # every field and table checked, file named
    raw = resolve_data_path(read_toml(Path(args.config)), Path(args.config))
    host = None
    if args.host:  # a report measured for another loop, or no report at all, is refused before any work
        from codesign.design.families import loop_entry
        from codesign.loops.host_share import read_host_report

        host = read_host_report(Path(args.host), loop_entry(design) or {})
    synthesize = None
    if args.scheduler:
        from codesign.sweep import SweepTask, check_scheduler, run_sweep

        check_scheduler(args.scheduler)  # before any work: an address where nothing listens is refused now

        def synthesize(builds):  # every build's Yosys on the cluster, into the shared cache
            family = design.board.yosys_family
            tasks = [SweepTask(key=f"{pe}-{family}-{index}", function="codesign.design.explore_run:cost_task",
                               kwargs={"pe": pe, "family": family, "cache_dir": str(_estimate_cache(args).resolve()),
                                       "spec": spec.to_dict()}) for index, (pe, spec) in enumerate(builds)]
            report = run_sweep(tasks, _estimate_cache(args) / "explore-tasks", scheduler=args.scheduler)
            if report.failed:
                raise ValueError(f"Yosys failed on the cluster for {', '.join(sorted(report.failed))}")
    check_output_dir(Path(args.out), "explore")  # before any work
    result = explore_design(raw, design, objective=args.objective, cap=args.limit / 100, cache_dir=_estimate_cache(args),
                            synthesize=synthesize, host=host)
    print(summary(result))
    with output_dir(Path(args.out), "explore") as out:
        for path in write_reports(result, out, board=design.board):
            print(f"wrote {path}")
    return 0


def _cmd_calibrate(args: argparse.Namespace) -> int:
    from codesign.design.calibration import calibrate, model_errors

    calibration = calibrate(args.pe, args.family, cache_dir=_estimate_cache(args), progress=print)
    for resource, error in model_errors(args.pe, args.family).items():
        held = (f"; held out: largest {error['held_out_max_rel']:.1%}, mean {error['held_out_mean_rel']:.1%}"
                if "held_out_max_rel" in error else "")
        print(f"{args.pe} {args.family} {resource}: largest error {error['max_rel']:.1%}, mean {error['mean_rel']:.1%}"
              + held)
    print(f"{len(calibration.points)} Yosys points, Yosys {calibration.yosys_version}, RTL {calibration.rtl_hash}")
    return 0


def _cmd_build(args: argparse.Namespace) -> int:
    from codesign.shell.build import ToolMissing, plan_hls_build, run_hls_build

    if Path(args.target).suffix == ".toml":
        return _build_design(args)
    plan = plan_hls_build(Path(args.target))
    if args.dry_run:
        print(f"would run: {plan.describe()}")
        return 0
    try:
        return run_hls_build(plan)
    except ToolMissing as missing:
        print(f"cannot build: {missing}", file=sys.stderr)
        return 2


def _build_design(args: argparse.Namespace) -> int:
    from codesign.design import load_design
    from codesign.design.build_steps import describe_steps, run_steps, selected_steps

    design = load_design(Path(args.target), board_name=args.board)
    out = Path(args.out) if args.out else Path("out/build") / design.name / design.board.name
    if args.steps:
        print(describe_steps(out if (out / "design.json").is_file() else None))
        return 0
    steps = selected_steps(args.from_step, "folder" if args.dry_run else args.to_step)
    folder, records = run_steps(design, out, cache_dir=_estimate_cache(args), steps=steps, limit_percent=args.limit,
                                route=args.ip_route, cosim=not args.no_cosim)
    print(folder.fit.table())
    made = "hls/, rtl/" if args.ip_route == "rtl" else "hls/"
    print(f"the build folder {out} ({len(folder.written)} files): design.json, {made}, vivado/, fit, README.md "
          f"(IPs: the {args.ip_route} route); steps in {out / 'build_steps.json'}")
    missing = [record for record in records if record.status == "tool missing"]
    if missing:
        print(f"not built: {missing[0].detail}", file=sys.stderr)
        return 0 if args.allow_missing_tools else 2
    return 0


def _cmd_bundle(args: argparse.Namespace) -> int:
    from codesign.bundle import write_bundle
    from codesign.design import load_design

    design = load_design(Path(args.config), board_name=args.board)
    _check_trainable(design, args)
    result = write_bundle(design, Path(args.out), build_dir=None if args.build is None else Path(args.build))
    print(f"wrote bundle {result.name} ({'with' if result.built else 'without'} a bitstream) to {result.out_dir}")
    if result.wheel is None:
        print(f"no wheel built here (needs the packages build and hatchling); on the board: pip install {result.out_dir}")
    else:
        runtime = f"dist/{result.runtime_wheel.name} " if result.runtime_wheel else ""
        print(f"on the board, in the image's Python: pip install {runtime}dist/{result.wheel.name}, then pynq "
              f"get-notebooks {result.name}" + ("" if runtime else " (the runtime's wheel: `make wheel` in codesign's "
                                                                  "source tree)"))
    return 0
