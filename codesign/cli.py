"""`codesign` command line: setup, generate, verify, estimate, build, demo.

Every argument is validated (by building the spec) before any file is written.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from codesign.boards import board, boards
from codesign.numerics.formats import DETERMINISTIC_ROUNDING

PES = ("fpmac",)


def _int_list(text: str) -> list[int]:
    try:
        return [int(item) for item in text.split(",") if item.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from None


def _add_spec_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("pe", choices=PES, help="processing element")
    parser.add_argument("--exp-bits", type=int, default=8, help="exponent bits (2..8)")
    parser.add_argument("--max-fb", type=int, default=23, help="largest run-time fraction width FB (1..23)")
    parser.add_argument("--rounding", default="nearest_even", choices=DETERMINISTIC_ROUNDING)
    parser.add_argument("--interface", default="m_axi", choices=("m_axi", "axis"))
    target = parser.add_mutually_exclusive_group()
    target.add_argument("--board", help=f"target board ({', '.join(sorted(boards()))})")
    target.add_argument("--part", help="target FPGA part (must belong to a known board)")
    parser.add_argument("--clock-ns", type=float, default=10.0, help="HLS clock period (ns)")
    parser.add_argument("--top", default="fpmac_kernel", help="name of the HLS top function")


def _spec_from(args: argparse.Namespace):
    from codesign.pe.fpmac import FpmacSpec

    part = args.part or board(args.board or "zedboard").part
    return FpmacSpec(
        exp_bits=args.exp_bits,
        max_fb=args.max_fb,
        rounding=args.rounding,
        interface=args.interface,
        part=part,
        clock_period_ns=args.clock_ns,
        top=args.top,
    )


def _cmd_setup(args: argparse.Namespace) -> int:
    from codesign.hw.aptypes import install_ap_types

    print(f"ap_types headers: {install_ap_types()}")
    return 0


def _cmd_generate(args: argparse.Namespace) -> int:
    from codesign.pe.fpmac.generate import generate_fpmac_project

    spec = _spec_from(args)
    written = generate_fpmac_project(spec, Path(args.out))
    print(f"wrote {len(written)} files to {args.out}:")
    for path in written:
        print(f"  {path}")
    return 0


def _cmd_verify(args: argparse.Namespace) -> int:
    from codesign.pe.fpmac.verify import verify_fpmac

    spec = _spec_from(args)
    levels = tuple(level.strip() for level in args.levels.split(",") if level.strip())
    report = verify_fpmac(
        spec,
        work_dir=Path(args.work),
        levels=levels,
        fb_values=args.fb,
        random_per_fb=args.random_per_fb,
        seed=args.seed,
        simulator=args.simulator,
    )
    print(report.table())
    print(f"report: {Path(args.work) / 'verify.json'}")
    print("PASS: bit-exact at every level" if report.passed else "FAIL: mismatches found")
    return 0 if report.passed else 1


def _cmd_estimate(args: argparse.Namespace) -> int:
    from codesign.pe.fpmac.estimate import estimate_fpmac

    report = estimate_fpmac(
        families=tuple(args.families.split(",")),
        max_fb_values=tuple(args.max_fb_values),
        exp_bits=args.exp_bits,
        out_dir=Path(args.out),
    )
    print(f"wrote {Path(args.out) / 'fpmac_cost.json'} ({len(report['entries'])} syntheses)")
    print((Path(args.out) / "fpmac_cost.md").read_text())
    return 0


def _cmd_build(args: argparse.Namespace) -> int:
    from codesign.hw.build import ToolMissing, plan_hls_build, run_hls_build

    plan = plan_hls_build(Path(args.project))
    if args.dry_run:
        print(f"would run: {plan.describe()}")
        return 0
    try:
        return run_hls_build(plan)
    except ToolMissing as missing:
        print(f"cannot build: {missing}", file=sys.stderr)
        return 2


def _cmd_demo(args: argparse.Namespace) -> int:
    from codesign.pe.fpmac import FpmacSpec
    from codesign.pe.fpmac.estimate import estimate_fpmac
    from codesign.pe.fpmac.generate import generate_fpmac_project
    from codesign.pe.fpmac.verify import verify_fpmac

    out = Path(args.out)
    spec = FpmacSpec()
    print(f"[demo] spec: {spec}")
    written = generate_fpmac_project(spec, out / "hls_fpmac")
    print(f"[demo] HLS project: {len(written)} files in {out / 'hls_fpmac'}")
    report = verify_fpmac(spec, work_dir=out / "verify", random_per_fb=args.random_per_fb)
    print(report.table())
    cost = estimate_fpmac(families=("xc7", "xcup"), max_fb_values=(7, 10, 16, 23), exp_bits=8, out_dir=out / "estimate")
    print(f"[demo] Yosys report: {out / 'estimate' / 'fpmac_cost.json'} ({len(cost['entries'])} syntheses)")
    print((out / "estimate" / "fpmac_cost.md").read_text())
    print("[demo] PASS" if report.passed else "[demo] FAIL")
    return 0 if report.passed else 1


def _cmd_train(args: argparse.Namespace) -> int:
    import json

    from codesign.hw.reports import write_json_atomic
    from codesign.reproduce import check_output_dir
    from codesign.train.config import load_config
    from codesign.train.trainer import Trainer

    config = load_config(Path(args.config))
    out = check_output_dir(Path(args.out))
    result = Trainer(config).fit(checkpoint=out / "checkpoint.pt", resume=args.resume, checkpoint_every=args.checkpoint_every)
    summary = {"test_accuracy": result.test_accuracy, "cost": result.cost, "techniques": result.techniques,
               "history": result.history, "steps": result.steps, "skipped_steps": result.skipped_steps}
    write_json_atomic(out / "result.json", summary)
    print(json.dumps({"test_accuracy": result.test_accuracy, "energy_pj": result.energy_pj, "bitops": result.bitops}))
    return 0


def _cmd_reproduce(args: argparse.Namespace) -> int:
    from codesign.reproduce import REPRODUCTIONS, check_output_dir, reproduction

    names = REPRODUCTIONS if args.name == "all" else (args.name,)
    modules = [reproduction(name) for name in names]
    outs = [check_output_dir(Path(args.out) / name) for name in names]  # every check before any training
    for name, module, out in zip(names, modules, outs):
        payload = module.run(out, seeds=args.seeds, smoke=args.smoke)
        verdict = "all targets met" if payload["all_targets_met"] else "target(s) NOT met"
        print(f"[reproduce {name}] {verdict}; report in {out}")
        print((out / "table.md").read_text())
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="codesign", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)

    setup = commands.add_parser("setup", help="fetch the ap_types headers for C simulation")
    setup.set_defaults(func=_cmd_setup)

    generate = commands.add_parser("generate", help="write a Vitis HLS project for a PE")
    _add_spec_arguments(generate)
    generate.add_argument("--out", required=True, help="project directory (new, empty, or an earlier codesign project)")
    generate.set_defaults(func=_cmd_generate)

    verify = commands.add_parser("verify", help="golden vs C-sim vs RTL, bit for bit")
    _add_spec_arguments(verify)
    verify.add_argument("--work", default="out/verify", help="directory for vectors, builds and reports")
    verify.add_argument("--levels", default="golden,csim,rtl", help="comma-separated subset of golden,csim,rtl")
    verify.add_argument("--fb", type=_int_list, default=None, help="run-time FB values (default: 6 spread over 3..max-fb)")
    verify.add_argument("--random-per-fb", type=int, default=10_000, help="random MACs per FB value")
    verify.add_argument("--seed", type=int, default=2024)
    verify.add_argument("--simulator", default="icarus", choices=("icarus", "verilator"))
    verify.set_defaults(func=_cmd_verify)

    estimate = commands.add_parser("estimate", help="Yosys resource and logic-depth report")
    estimate.add_argument("pe", choices=PES)
    estimate.add_argument("--families", default="xc7,xcup", help="Yosys synth_xilinx families")
    estimate.add_argument("--max-fb-values", type=_int_list, default=[7, 10, 16, 23])
    estimate.add_argument("--exp-bits", type=int, default=8)
    estimate.add_argument("--out", default="out/estimate")
    estimate.set_defaults(func=_cmd_estimate)

    build = commands.add_parser("build", help="run vitis_hls on a generated project (where installed)")
    build.add_argument("project", help="a directory written by `codesign generate`")
    build.add_argument("--dry-run", action="store_true", help="print the command only")
    build.set_defaults(func=_cmd_build)

    train = commands.add_parser("train", help="train one configuration (TOML) with its techniques")
    train.add_argument("config", help="TOML training configuration")
    train.add_argument("--out", default="out/train", help="directory for result.json and checkpoint.pt")
    train.add_argument("--resume", action="store_true", help="continue from out/checkpoint.pt if present")
    train.add_argument("--checkpoint-every", type=int, default=50, help="steps between checkpoints")
    train.set_defaults(func=_cmd_train)

    reproduce = commands.add_parser("reproduce", help="reproduce a paper's result against a same-run baseline")
    reproduce.add_argument("name", help="smd, slu, psg, e2train, cpt, abvs, compressed, or all")
    reproduce.add_argument("--out", default="reports", help="reports go to OUT/NAME/")
    reproduce.add_argument("--seeds", type=_int_list, default=None, help="comma-separated seeds (default 0,1,2)")
    reproduce.add_argument("--smoke", action="store_true", help="tiny budget, for a quick check of the pipeline")
    reproduce.set_defaults(func=_cmd_reproduce)

    demo = commands.add_parser("demo", help="generate, verify and estimate the FP-MAC on defaults")
    demo.add_argument("--out", default="out/demo")
    demo.add_argument("--random-per-fb", type=int, default=10_000)
    demo.set_defaults(func=_cmd_demo)
    return parser


def main(argv: list[str] | None = None) -> int:
    from codesign.hw.render import ProjectDirError

    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except (ValueError, FileNotFoundError, ProjectDirError) as error:
        print(f"codesign: error: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
