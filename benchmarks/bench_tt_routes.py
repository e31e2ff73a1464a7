"""The TT step's host work on the dense core-gradient route against the direct route, in one process.

Paper 003's two-layer network (:func:`codesign.design.families.tt.paper_setup`,
the precision of examples/digits_tt.toml, ``core_grad_route`` set) at rank
16, batch 64, each route on the point the enumeration of docs/tt_pe.md chose
for it within 278 DSP: the direct route on 4 x tt1 8x4 + 2 x tt2 16x4 at
128-bit streams, the dense one (the weight gradient summed on PE1) on
8 x tt1 4x4 + 4 x tt2 8x4 at 64 bits. The host's seconds of a step are
:func:`codesign.loops.host_share.measure_tt_hosts`: the golden step less its
PE calls, plus a board host's stream work; the two routes' steps alternate
so that both see the same load, and each keeps its least. Also prints each
point's modelled PE and memory time on the Ultra96-V2, and checks that the
routes' forward passes agree bit for bit (a difference fails the run).
Target: the dense route's host share at most 0.8 of the direct one's.
Writes ``tt_routes.json``.

Run: .venv/bin/python benchmarks/bench_tt_routes.py [--repeats 5] [--out reports/bench]
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

import numpy as np

from codesign.boards import boards
from codesign.design import load_design
from codesign.design.families.tt import paper_setup
from codesign.design.families.tt import tt_setup_of
from codesign.step.tt.time import tt_step_time
from codesign.shell.vivado import shell_ips_hp_ports
from codesign.io.reports import write_json_atomic
from codesign.loops.host_share import measure_tt_hosts
from codesign.step.host import HostModel
from codesign.step.tt.schedule import StepHardware
from codesign.step.tt.step import GoldenRunner, forward_sweep, step_plan

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
TARGET_RATIO = 0.8
RANK = 16


def point(route: str) -> StepHardware:
    """The chosen rank-16 point of each route (docs/tt_pe.md, "Whole steps on the Ultra96-V2")."""
    base = StepHardware()
    if route == "direct":
        return StepHardware(pe1=dataclasses.replace(base.pe1, lanes=8, rows=4, stream_bits=128), pe1_units=4,
                            pe2=dataclasses.replace(base.pe2, lanes=16, rows=4, stream_bits=128), pe2_units=2)
    return StepHardware(pe1=dataclasses.replace(base.pe1, lanes=4, rows=4, stream_bits=64), pe1_units=8,
                        pe2=dataclasses.replace(base.pe2, lanes=8, rows=4, stream_bits=64), pe2_units=4,
                        outer_pe="tt1")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--out", default="reports/bench")
    args = parser.parse_args()
    if args.repeats < 1:
        parser.error("--repeats must be >= 1")
    precision = tt_setup_of(load_design(EXAMPLES / "digits_tt.toml")).precision
    routes = ("direct", "dense")
    setups = {route: paper_setup(RANK, {**precision, "core_grad_route": route}) for route in routes}
    # the same layer, the same batch: the forward sweeps (which the routes share) must agree word for word
    rng = np.random.default_rng(0)
    x = rng.random((setups["direct"].batch_size, setups["direct"].layers[0]["in_features"])).astype(np.float32)
    sweeps = {}
    for route in routes:
        rng_cores = np.random.default_rng(1)
        cores = [rng_cores.normal(size=shape).astype(np.float32) * 0.3
                 for shape in setups[route].layers[0]["core_shapes"]]
        layer = setups[route].layer_state(0, cores)
        sweeps[route] = forward_sweep(layer, x, step_plan(layer, len(x), point(route)), GoldenRunner()).y
    differing = int(np.count_nonzero(sweeps["direct"].view(np.uint64) != sweeps["dense"].view(np.uint64)))

    measured = measure_tt_hosts([(setups[route], point(route)) for route in routes], repeats=args.repeats)
    board = boards()["ultra96v2"]
    rows = {}
    for route, (host_s, calls) in zip(routes, measured):
        hardware = point(route)
        ips = hardware.pe1_units + hardware.pe2_units + (hardware.outer_pe == "tt3")
        ports = shell_ips_hp_ports(ips, board.hp_ports)  # the fewest its block design takes
        step = tt_step_time(setups[route], hardware, board, clock_mhz=100.0, hp_ports=ports,
                            host=HostModel(fixed_s=host_s, per_call_s=0.0, source="measured"))
        rows[route] = {"hardware": hardware.describe(), "hp_ports": ports, "calls": calls, "host_ms": 1e3 * host_s,
                       "pe_ms": 1e3 * step.pe_s, "memory_ms": 1e3 * step.memory_s, "whole_ms": 1e3 * step.total_s,
                       "mb_per_step": step.bytes / 1e6}
        print(f"rank {RANK} {route}: {rows[route]['hardware']} over {ports} HP port(s), {calls} PE calls; host "
              f"{rows[route]['host_ms']:.1f} "
              f"ms, PE {rows[route]['pe_ms']:.1f} + memory {rows[route]['memory_ms']:.1f} ms (model), whole "
              f"{rows[route]['whole_ms']:.1f} ms, {rows[route]['mb_per_step']:.2f} MB per step", flush=True)
    ratio = rows["dense"]["host_ms"] / rows["direct"]["host_ms"]
    print(f"dense / direct host share {ratio:.2f} (target <= {TARGET_RATIO}); forward passes: {differing} words "
          "differ", flush=True)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    write_json_atomic(out / "tt_routes.json", {"rank": RANK, "repeats": args.repeats, "routes": rows,
                                               "host_ratio": ratio, "target_ratio": TARGET_RATIO,
                                               "forward_differing_words": differing,
                                               "met": bool(ratio <= TARGET_RATIO and differing == 0)})
    if differing:
        print("the routes' forward passes differ", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
