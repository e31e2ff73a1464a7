"""The FB-float training step as call lists, modelled on the ZedBoard and the Ultra96-V2, against the golden NumPy
step and a float32 PyTorch step of the same MLP on one core.

The shipped example ``examples/digits_abvs.toml`` (its network, batch and
FP-MAC array build, on as many IPs as the design has), at its largest FB, in
one process:

- ``board``: the step as the lists of :mod:`codesign.step.fpmac_array.lists`
  run it (state on the device, the update on the PE), priced by the step
  model (:func:`codesign.step.fpmac_array.list_time.fb_list_step`: the list
  cycle model, exact against the RTL, under the boards' HP-port DDR timing)
  at the design's clock. Its host time is measured here: the wall time of a
  :class:`codesign.loops.fb_lists.FbListTrainer` step less its golden shell's
  (which a board replaces by its IP), given the next batch as ``fit`` gives
  it; the seconds it works beside a phase (this batch's check beside the
  forward, the next batch written beside the last) are hidden as far as the phase reaches. This desktop
  is not the board's ARM.
- ``per_call``: the same step as one IP call per GEMM with the host between
  them (:func:`codesign.step.fpmac_array.time.fb_step_time`, its host measured
  here): what the board ran before the lists.
- ``golden``: a step of :class:`codesign.loops.fb.FbMlpTrainer` (the bit-exact
  NumPy loop on this desktop), the least of ``--steps``.
- ``torch_f32``: a float32 PyTorch step of the same MLP (ReLU, softmax
  cross-entropy, SGD with the example's momentum and weight decay), one
  thread, the least of ``--steps``.

- ``explored``: the explorer's fastest build on each board for this list step
  (:func:`codesign.design.families.fpmac_array.fb_list_model`: array shape and
  buffer depths, one to four copies), its step priced exactly, with the same host.

Prints each board's step, its parts, the ratios board / torch_f32 and board
/ golden, and the step's cycles by kind (the PE's, the descriptors' fetch,
stalls, the records'); writes ``fb_step_lists.json``. A run takes about a
minute.

Run: .venv/bin/python benchmarks/bench_fb_step_lists.py [--steps 5] [--out reports/bench]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

from codesign.boards import board
from codesign.deploy.list_shell import BOARD_DDR
from codesign.design import load_design
from codesign.design.explore_model import list_step_host
from codesign.design.families import shared_build
from codesign.design.families.fpmac_array import fb_list_model, fb_setup_of, measure_fb_list_host
from codesign.io.reports import write_json_atomic
from codesign.loops.fb import FbMlpTrainer
from codesign.loops.host_share import measure_fb_host
from codesign.step.fpmac_array.list_time import fb_list_step, step_list_cycles
from codesign.step.fpmac_array.time import fb_step_time
from codesign.step.host import HostModel

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "digits_abvs.toml"
BOARDS = ("zedboard", "ultra96v2")


def least_seconds(step, batch, steps: int) -> float:
    """The least wall seconds of ``steps`` calls of ``step(*batch)``."""
    seconds = []
    for _ in range(steps):
        started = time.perf_counter()
        step(*batch)
        seconds.append(time.perf_counter() - started)
    return min(seconds)


def torch_f32_step(layers, *, lr: float, momentum: float, weight_decay: float, seed: int, bias: bool = True):
    """A float32 PyTorch training step of the MLP ``layers`` (ReLU between layers; ``bias``: the layers have
    biases): ``step(x, y)``."""
    import torch

    torch.manual_seed(seed)
    modules = []
    for index, (fan_in, fan_out) in enumerate(zip(layers[:-1], layers[1:])):
        modules.append(torch.nn.Linear(fan_in, fan_out, bias=bias))
        if index < len(layers) - 2:
            modules.append(torch.nn.ReLU())
    return sgd_step(torch.nn.Sequential(*modules), lr=lr, momentum=momentum, weight_decay=weight_decay)


def step_arguments(doc: str, *, copies: bool = False, lanes: bool = False,
                   example: str | None = None) -> argparse.Namespace:
    """A step benchmark's arguments (``--steps`` timed, ``--out``; ``copies``: ``--copies``, the IP counts to price,
    as ints; ``lanes``: ``--lanes``, another lane count for the build priced; ``example``: ``--example``, the design
    file, this one by default), with torch held to one thread: the float32 reference is one core's."""
    import torch

    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--out", default="reports/bench")
    if copies:
        parser.add_argument("--copies", default="1,2", help="IP counts to price, comma-separated (default 1,2)")
    if lanes:
        parser.add_argument("--lanes", type=int, default=None, help="price the build with this many lanes instead of "
                            "the design's")
    if example is not None:
        parser.add_argument("--example", default=example, help=f"the design file (default {example})")
    args = parser.parse_args()
    if lanes and args.lanes is not None and args.lanes < 1:
        parser.error("--lanes must be >= 1")
    if args.steps < 1:
        parser.error("--steps must be >= 1")
    if copies:
        try:
            args.copies = [int(part) for part in args.copies.split(",")]
        except ValueError:
            parser.error(f"--copies {args.copies!r}: comma-separated whole numbers")
        if min(args.copies) < 1 or len(set(args.copies)) < len(args.copies):
            parser.error("--copies: each at least 1, none twice")
    torch.set_num_threads(1)
    return args


def sgd_step(model, *, lr: float, momentum: float = 0.0, weight_decay: float = 0.0):
    """``step(x, y)``: one float32 SGD step of ``model`` on softmax cross-entropy (arrays or tensors)."""
    import torch

    optimiser = torch.optim.SGD(model.parameters(), lr=lr, momentum=momentum, weight_decay=weight_decay)
    loss_fn = torch.nn.CrossEntropyLoss()

    def step(x, y):
        optimiser.zero_grad(set_to_none=True)
        loss = loss_fn(model(torch.as_tensor(x)), torch.as_tensor(y))
        loss.backward()
        optimiser.step()
        return loss.detach().item()

    return step


def board_entry(lists, calls, torch_s: float) -> dict:
    """One board's figures: the list step ``lists`` and the per-call step ``calls`` (StepTime each) against the
    float32 PyTorch step's ``torch_s`` seconds (ms, shares, ratios)."""
    return {"board_step_ms": 1e3 * lists.total_s, "pe_ms": 1e3 * lists.pe_s, "memory_ms": 1e3 * lists.memory_s,
            "host_ms": 1e3 * lists.host_s, "host_share": lists.host_s / lists.total_s, "bottleneck": lists.bottleneck,
            "macs_bound_ms": 1e3 * lists.bounds["macs_s"], "per_call_step_ms": 1e3 * calls.total_s,
            "per_call_host_share": calls.host_s / calls.total_s, "ratio_board_to_torch_f32": lists.total_s / torch_s}


def cycles_by_kind(priced: dict) -> dict:
    """A priced list step's cycles by kind (:class:`codesign.step.list_cycles.CallCycles`: the PE's own, the
    descriptors' fetch, the stalls, the records' writes, and the shell's control cycles; each phase's longest list),
    their shares of the step and the calls."""
    cycles = {kind: int(value) for kind, value in priced["breakdown"].items()}
    total = sum(cycles.values())
    return {"cycles": cycles, "shares": {kind: value / total for kind, value in cycles.items()},
            "calls": int(priced["calls"])}


def cycles_text(kinds: dict) -> str:
    """:func:`cycles_by_kind`'s shares as a line of text."""
    shares = kinds["shares"]
    return (f"cycles by kind: PE {100 * shares['pe']:.1f} %, fetch {100 * shares['fetch']:.1f} %, stall "
            f"{100 * shares['stall']:.1f} %, record {100 * shares['record']:.1f} % ({kinds['calls']} calls)")


def host_parts(list_host: dict) -> tuple[dict, HostModel]:
    """A list step's host as measured here (:func:`codesign.shell.list_runner.host_per_list_step`): its seconds
    beside each phase (the next batch written beside the last; the step model hides them as far as the phase
    reaches), and the explorer's host model of it (between the phases, and beside them in all)."""
    between = list_step_host(None, lambda: list_host, lambda _: None)
    return {phase: seconds for _, phase, seconds in list_host["beside"]}, between


def explored_entry(family, target, clock_mhz: float, torch_s: float) -> dict:
    """The explorer's fastest point of ``family`` (an ExploreModel pricing the list step) on ``target``: its build
    and its exact list step (the family's ``step``) against the float32 PyTorch step's ``torch_s`` seconds."""
    from codesign.design.explore_model import explore_family

    space = explore_family(family, target, clock_mhz=clock_mhz)
    index = space.best("time")
    step, point = family.step(space.chosen_options(index), target, clock_mhz), space.point(index)
    return {"build": point["label"], "board_step_ms": 1e3 * step.total_s, "pe_ms": 1e3 * step.pe_s,
            "memory_ms": 1e3 * step.memory_s, "host_share": step.host_s / step.total_s,
            "ratio_board_to_torch_f32": step.total_s / torch_s, "dsp_model": point["dsp"],
            "equivalent_ops_per_dsp_cycle": step.throughput(point["dsp"])["equivalent_ops_per_dsp_cycle"]}


def explored_text(entry: dict) -> str:
    return (f"explorer's point {entry['build']}: {entry['board_step_ms']:.2f} ms (PE {entry['pe_ms']:.2f}, host "
            f"{100 * entry['host_share']:.0f} %; {entry['equivalent_ops_per_dsp_cycle']:.2f} ops per DSP and cycle "
            f"on {entry['dsp_model']:.0f} DSP), board / float32 = {entry['ratio_board_to_torch_f32']:.2f}")


def entry_text(entry: dict, row: dict) -> str:
    """A board's figures as the benchmarks print them."""
    return (f"list step {entry['board_step_ms']:.2f} ms (PE {entry['pe_ms']:.2f}, memory {entry['memory_ms']:.2f}, "
            f"host here {entry['host_ms']:.2f} ms = {100 * entry['host_share']:.0f} %), per-call step "
            f"{entry['per_call_step_ms']:.2f} ms ({100 * entry['per_call_host_share']:.0f} % host); float32 PyTorch "
            f"{row['torch_f32_ms']:.2f} ms; board / float32 = {entry['ratio_board_to_torch_f32']:.2f}")


def main() -> int:
    args = step_arguments(__doc__)
    design = load_design(EXAMPLE)
    setup, copies = fb_setup_of(design), shared_build(design, "fpmac_array")[1]
    spec, layers, batch_size = setup.spec, setup.layers, setup.batch_size
    rng = np.random.default_rng(0)
    batch = (rng.random((batch_size, layers[0])).astype(np.float32), rng.integers(0, layers[-1], batch_size))
    list_host = measure_fb_list_host(setup, repeats=args.steps, copies=copies)
    call_host, shapes = measure_fb_host(setup)
    golden = FbMlpTrainer(setup)
    golden.train_step(*batch)
    golden_s = least_seconds(golden.train_step, batch, args.steps)
    f32 = torch_f32_step(layers, lr=setup.lr, momentum=setup.momentum, weight_decay=setup.weight_decay,
                         seed=setup.seed)
    f32(*batch)
    torch_s = least_seconds(f32, batch, args.steps)
    row = {"design": design.name, "layers": list(layers), "batch": batch_size, "fpmac_array": spec.to_dict(),
           "copies": copies, "clock_mhz": design.clock_mhz, "host_list_ms_desktop": 1e3 * list_host["seconds"],
           "host_list_traffic": {k: v for k, v in list_host.items() if k != "seconds"},
           "golden_ms": 1e3 * golden_s, "torch_f32_ms": 1e3 * torch_s, "boards": {}}
    priced = step_list_cycles(spec, layers, batch_size, ddr=BOARD_DDR, copies=copies)  # the boards' DDR model
    for name in BOARDS:
        target = board(name)
        beside, between = host_parts(list_host)
        lists = fb_list_step(spec, layers, batch_size, target, clock_mhz=design.clock_mhz,
                             host_s=list_host["seconds"], host_source="measured on this desktop",
                             copies=copies, beside=beside, priced=priced)
        calls = fb_step_time(spec, shapes, target, clock_mhz=design.clock_mhz, host=call_host)
        entry = board_entry(lists, calls, torch_s)
        entry["ratio_board_to_golden"] = lists.total_s / golden_s
        entry["cycles_by_kind"] = cycles_by_kind(priced)
        entry["explored"] = explored_entry(fb_list_model(spec, layers, batch_size, host=between),
                                           target, design.clock_mhz, torch_s)
        row["boards"][name] = entry
        print(f"{name} at {design.clock_mhz:g} MHz: {entry_text(entry, row)}; golden {row['golden_ms']:.2f} ms; "
              f"{explored_text(entry['explored'])}; {cycles_text(entry['cycles_by_kind'])}", flush=True)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    write_json_atomic(out / "fb_step_lists.json", row)
    return 0


if __name__ == "__main__":
    sys.exit(main())
