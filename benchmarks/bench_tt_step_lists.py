"""The TT training step as call lists, modelled on the Ultra96-V2, against a float32 PyTorch step on one core.

Paper 003's two-layer network (:func:`codesign.design.families.tt.paper_setup`,
the precision of examples/digits_tt.toml under the tracked scale rule, its
layers' outputs and input gradients passed on in float32 or exactly,
``--hand-off``) at one rank, batch 64, in one process:

- ``board``: the step as the lists of :mod:`codesign.step.tt.step_lists` run
  it, priced by the step model (:func:`codesign.step.tt.list_time.tt_list_step`:
  the list cycle model, exact against the RTL, under its DDR timing, the PE1
  and PE2 lists of a phase side by side, at ``--clock-mhz``), its IPs spread over the fewest of the board's
  high-performance ports whose step is within 1 % of the best count's, as the explorer chooses a design's ports
  (:func:`codesign.design.explore.port_choice`; the one-port step is printed beside it). Its host time is
  measured here: the wall time of a
  :class:`codesign.loops.tt_lists.TtListTrainer` step less its shell's (the
  golden shell model, which a board replaces by its IPs), the least of
  ``--steps`` steps after the two that aim the scales and build the lists
  (:func:`codesign.shell.list_runner.host_per_list_step`; their median and how
  many re-aimed their lists are printed beside it). The trainer does some of
  its work while a phase's lists compute (the next layer's cores prepared
  beside a layer's longest forward phase, a layer's gradients read and its
  update run beside the longest backward phase of the layer below): the step
  model hides that work as far as its phase's time reaches
  (``host_hidden_ms``; the rest, ``host_critical_ms``, adds to the step).
  This desktop is not the board's ARM.
- ``torch_f32``: a plain float32 PyTorch step of the same TT layers
  (``benchmarks/bench_tt_golden.py``), one thread, the least of ``--steps``.

Both PEs: 8 lanes × 8 rows, 16-bit slots, 128-bit streams (``--stream-bits``),
two IPs of each (``--copies``; 256 DSP slices in the original builds). Buffers
(max_j, max_k, max_l): PE1 64, 32, 64 and PE2 128, 64, 64 (``--pe1-buffers``,
``--pe2-buffers``): PE1 keeps all of ``B``, so 64, 64, 64 took 122 BRAM36 an IP
(the two PE1 IPs alone above the board's 216), and PE2's 128-deep ``j`` leaves
no chains of accumulating calls at rank 16. ``--held-sums auto`` (the
default) builds a PE's IPs with shells without the accumulation buffer when
none of its lists holds sums (two golden steps on full shells tell), which the
step then runs on; ``all`` keeps it on every IP. The builds' resources (each
PE as ``--fit`` counts it plus the shell's Yosys cost per IP) are printed as shares of the board's, against the
fit rule's 90 %. PE1 takes ``B`` in the order ``--b-order`` names, and PE2 runs row pairs and PE1 sums rows
``j`` in pairs as ``--pairs`` says; ``auto`` (the default) chooses them together, the fastest of the builds
whose extra DSP slices stay within the 278 of issue 39's goals and whose resources stay within the fit rule
(:func:`codesign.design.families.tt_list_step.builds_choice`, docs/tt_pe.md "Row pairs" and "Row pairs along
j"). The builds are priced with the IPs on all the board's HP ports, before the step's ports are chosen (the
ports the step then takes are within 1 % of that step, less than the builds differ by). ``--fit yosys`` (the
default) counts a PE build as Yosys does, as ``codesign design`` checks a design before it builds it
(:func:`codesign.design.fit.pe_cost`: a shipped report or the estimate cache, ``--cache``, else a Yosys run of a
minute or two, which fails where Yosys is not installed; the six builds the defaults price are shipped),
``--fit model`` as the explorer's space does (the calibrated model, a few percent off Yosys near the limit); the
shells are Yosys's either way. Prints the step's parts and the ratio board / torch_f32, and the PEs' cycles by
part (load, compute, drain: :class:`codesign.step.tt.list_time.PeWork`) with the bound a PE overlapping them
would reach and the one each phase's calls spread over both PEs' IPs would; writes
``tt_step_lists_r<rank>_s<bits>_c<copies>.json``. A run takes about two minutes at rank 8 (the golden shell
computes every call of the two warm steps with the PEs' vectorised golden).

``--staging-pair N`` adds a paired measurement of the next batch's staging
(:class:`codesign.loops.tt_lists.TtListTrainer` given ``next_x``): two
trainers on replaying shells take the same ``N`` batches, a step of each in
turn (the first two warm), one given the next batch and one not, and the
host's seconds between the lists (a step's host less what it did beside them)
are compared, least and median: the same machine load on both.

``--modes cheapest`` takes, per layer, the order of its modes with the fewest step products
(:func:`codesign.step.tt.mode_order.cheapest_orders`): another network of the same features and ranks, whose
cores pair the modes anew (the float32 step is of that network too).

Run: .venv/bin/python benchmarks/bench_tt_step_lists.py [--rank 8] [--steps 20] [--clock-mhz 100] [--stream-bits 128]
[--copies 2,2] [--b-order auto] [--pairs auto] [--fit yosys] [--cache DIR] [--modes ours] [--held-sums auto]
[--staging-pair 0] [--out reports/bench]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

from codesign.design import load_design
from codesign.design.explore import port_choice
from codesign.design.explore_model import fixed_resources
from codesign.design.fit import DEFAULT_LIMIT_PERCENT, pe_cost
from codesign.design.families.tt import PAPER_BATCH, PAPER_LAYERS, paper_setup, tt_setup_of
from codesign.design.families.tt_list_step import CHOICES, PAIRS_FIELD, builds_choice, model_price
from codesign.io.cache import cache_dir
from codesign.io.reports import write_json_atomic
from codesign.loops.tt_lists import TtListTrainer
from codesign.numerics.scales import HAND_OFFS
from codesign.boards import board
from codesign.pe.tt.spec import Tt1Spec, Tt2Spec
from codesign.shell.list_runner import GoldenListShell, gaps_text, host_per_list_step
from codesign.step.tt.list_time import tt_list_step
from codesign.step.tt.mode_order import cheapest_orders, describe, order_cost
from codesign.step.tt.step_lists import check_copies

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_tt_golden import torch_f32_step  # noqa: E402

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
BUFFERS = dict(lanes=8, rows=8, a_bits=16, b_bits=16)
PE_BUFFERS = {"tt1": (64, 32, 32), "tt2": (128, 64, 64)}  # max_j, max_k, max_l
DSP_GOAL = 278  # DSP slices the PEs may take (issue 39's goals)
FIT_LIMIT = DEFAULT_LIMIT_PERCENT  # a resource's share of the board the fit rule allows (codesign.design.fit)


def on_ports(steps: dict) -> tuple:
    """Of the step priced on each count of HP ports, the explorer's choice (the fewest within 1 % of the best:
    :func:`codesign.design.explore.port_choice`) and its step."""
    chosen = int(port_choice({ports: np.array([step.time.total_s]) for ports, step in steps.items()})[0])
    return chosen, steps[chosen]


def main() -> int:
    args, copies, buffers = parse_args()
    import torch

    torch.set_num_threads(1)
    orders, setup = network(args)
    build = {**BUFFERS, "stream_bits": args.stream_bits}
    ultra96 = board("ultra96v2")
    rng = np.random.default_rng(args.rank)
    batches = [(rng.random((setup.batch_size, setup.layers[0]["in_features"])).astype(np.float32),
                rng.integers(0, setup.layers[-1]["out_features"], setup.batch_size)) for _ in range(2 + args.steps)]
    plain = Tt1Spec(**build, **buffers["tt1"]), Tt2Spec(**build, **buffers["tt2"])  # which lists hold sums: any build
    held = {"tt1": True, "tt2": True} if args.held_sums == "all" else lists_hold(setup, *plain, copies, batches)
    price = yosys_price(ultra96, Path(args.cache) if args.cache else cache_dir() / "estimates") \
        if args.fit == "yosys" else model_price(ultra96)
    spec1, spec2, priced = pe_builds(setup, build, buffers, ultra96, args, copies, held, price)
    shell = GoldenListShell({"tt1": spec1, "tt2": spec2}, copies, held_sums=held)
    trainer = TtListTrainer(setup, shell)
    f32 = torch_f32_step(setup, trainer.cores, trainer.biases)
    # the first step aims every scale on the host, the second builds the lists; the least of the others
    reshifted = trainer.lists_reshifted
    host = host_per_list_step(trainer, shell, batches, warm_steps=2)
    reshifted = trainer.lists_reshifted - reshifted
    steps = {ports: tt_list_step(setup, spec1, spec2, ultra96, clock_mhz=args.clock_mhz, host_s=host["seconds"],
                                 host_source="measured on this desktop", copies=copies, beside=host["beside"],
                                 hp_ports=ports)
             for ports in range(1, ultra96.hp_ports + 1)}
    torch_s = []
    for _ in range(args.steps):
        started = time.perf_counter()
        f32(*batches[0])
        torch_s.append(time.perf_counter() - started)
    row = {"rank": args.rank, "batch": setup.batch_size, "list_steps": trainer.list_steps, "modes": args.modes,
           "hand_off": args.hand_off,
           "layers": [order.to_dict() for order in orders], "layer_steps_reshifted": reshifted,
           "torch_f32_ms": 1e3 * min(torch_s), "clock_mhz": args.clock_mhz, "pe_build": build,
           "pe_buffers": buffers, "held_sums": held, "fit": builds_fit(ultra96, copies, spec1, spec2, held, price),
           "fit_by": args.fit, "b_order": spec1.b_order, "copies": list(copies),
           "dsp": sum(n * price(pe, spec)["dsp"] for n, pe, spec in zip(copies, ("tt1", "tt2"), (spec1, spec2))),
           "pairs": {pe: getattr(spec, PAIRS_FIELD[pe]) for pe, spec in (("tt1", spec1), ("tt2", spec2))},
           "builds_priced": [{**{key: value for key, value in found.items() if key != "pe_dma_s"},
                              "pe_dma_ms": 1e3 * found["pe_dma_s"]} for found in priced],
           **step_figures(steps, host)}
    row["ratio_board_to_torch_f32"] = row["board_step_ms"] / row["torch_f32_ms"]
    if args.staging_pair:
        pair_batches = [(rng.random(x.shape).astype(np.float32), y) for x, y in batches[:1] * args.staging_pair]
        row["staging_pair"] = staging_pair(setup, shell, copies, held, pair_batches)
    print_row(row, args, len(setup.layers), on_ports(steps)[1].pe_work)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    name = f"tt_step_lists_r{args.rank}_s{args.stream_bits}_c{copies[0]}x{copies[1]}"
    write_json_atomic(out / f"{name}{'_cheapest' if args.modes == 'cheapest' else ''}.json", row)
    return 0


def parse_args():
    """The command line, checked: the arguments, the IPs of each PE and each PE's buffers."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rank", type=int, default=8)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--clock-mhz", type=float, default=100.0)
    parser.add_argument("--stream-bits", type=int, default=128, choices=(32, 64, 128),
                        help="both PEs' stream words (the Ultra96-V2's HP ports are 128 bits wide)")
    parser.add_argument("--copies", default="2,2",
                        help="IPs of PE1 and of PE2 a phase's lists are shared among (2,2: 256 DSP slices)")
    parser.add_argument("--b-order", default="auto", choices=("auto", "lj", "jl"),
                        help="PE1's B order: l outer, j outer, or auto (chosen with the pairs, below)")
    parser.add_argument("--pairs", default="auto", choices=("auto", "on", "off"),
                        help="where K fits half the lanes, PE2 runs groups of 2 x rows and PE1 sums rows j in pairs: "
                             "on, off, or auto (with the B order, the fastest builds within the DSP goal and the "
                             "fit rule)")
    parser.add_argument("--fit", default="yosys", choices=("yosys", "model"),
                        help="count a PE build as Yosys does (as codesign design checks a design) or by the "
                             "calibrated model (as the explorer's space does)")
    parser.add_argument("--cache", default=None,
                        help="Yosys estimate cache (default: estimates/ in the user's cache)")
    parser.add_argument("--modes", default="ours", choices=("ours", "cheapest"),
                        help="the layers' mode orders: ours (PAPER_LAYERS, what the TT reproductions train) or, per "
                             "layer, the order of those modes with the fewest step products (another network: "
                             "its cores pair the modes anew; its accuracy is not measured here)")
    for pe in ("tt1", "tt2"):
        parser.add_argument(f"--pe{pe[-1]}-buffers", default=",".join(map(str, PE_BUFFERS[pe])),
                            help=f"{pe}'s max_j,max_k,max_l")
    parser.add_argument("--held-sums", default="auto", choices=("auto", "all"),
                        help="the shells' accumulation buffer: only on the IPs of a PE whose lists hold sums (auto), "
                             "or on every IP (all)")
    parser.add_argument("--staging-pair", type=int, default=0, metavar="STEPS",
                        help="also time the next batch's staging: two trainers in turn over STEPS batches (0: not)")
    parser.add_argument("--hand-off", default="float32", choices=HAND_OFFS,
                        help="the layers' outputs and input gradients passed on exactly (float64), as a PE's "
                             "rounding stage would take them, or rounded to float32 first")
    parser.add_argument("--out", default="reports/bench")
    args = parser.parse_args()
    if args.rank < 1 or args.steps < 1 or not args.clock_mhz > 0 or (args.staging_pair != 0 and
                                                                        args.staging_pair < 4):
        parser.error("--rank and --steps must be >= 1, --clock-mhz > 0 and --staging-pair 0 or >= 4")
    try:
        copies = tuple(int(n) for n in args.copies.split(","))
        check_copies(copies)
    except ValueError:
        parser.error(f"--copies {args.copies!r} must be two positive ints, PE1's and PE2's, as 2,2")
    try:
        given = {pe: [int(n) for n in getattr(args, f"pe{pe[-1]}_buffers").split(",")] for pe in ("tt1", "tt2")}
        buffers = {pe: dict(zip(("max_j", "max_k", "max_l"), sizes)) for pe, sizes in given.items()}
        if any(len(sizes) != 3 for sizes in given.values()):
            raise ValueError
    except ValueError:
        parser.error("--pe1-buffers and --pe2-buffers must be three ints, max_j,max_k,max_l, as 64,32,64")
    return args, copies, buffers


def network(args):
    """The layers' mode orders ``--modes`` names and paper 003's network on them at ``--rank``, tracked scales."""
    precision = {**tt_setup_of(load_design(EXAMPLES / "digits_tt.toml")).precision, "scale_rule": "tracked",
                 "hand_off": args.hand_off}
    orders = cheapest_orders(PAPER_LAYERS, max_rank=args.rank, batch=PAPER_BATCH) if args.modes == "cheapest" else [
        order_cost(ins, outs, max_rank=args.rank, batch=PAPER_BATCH, need_input_grad=index > 0)
        for index, (ins, outs) in enumerate(PAPER_LAYERS)]
    print("modes:", "; ".join(describe(order) for order in orders), flush=True)
    return orders, paper_setup(args.rank, precision, modes=[(order.in_modes, order.out_modes) for order in orders])


def step_figures(steps: dict, host: dict) -> dict:
    """The report's figures of the step on the ports :func:`on_ports` chooses (``steps``: per count of ports) with
    the host ``host`` measured (milliseconds)."""
    hp_ports, step = on_ports(steps)
    total_s = step.time.total_s
    return {"pe_dma_cycles_per_layer": list(step.layer_cycles),
            "pe_dma_ms": 1e3 * (step.time.pe_s + step.time.memory_s), "host_ms_desktop": 1e3 * host["seconds"],
            "host_ms_desktop_median": 1e3 * host["median_seconds"],
            "host_beside_ms": {f"layer {layer} phase {phase}": 1e3 * seconds
                               for layer, phase, seconds in host["beside"]},
            "host_gaps_us": [1e6 * seconds for seconds in host["gaps_seconds"]],
            "phase_ms": [[cycles / (1e3 * step.time.clock_mhz) for cycles in layer] for layer in step.phase_cycles],
            "host_hidden_ms": 1e3 * step.host_hidden_s, "host_critical_ms": 1e3 * step.time.host_s,
            "host_share": step.time.host_s / total_s, "host_work": step.host.to_dict(),
            "macs_bound_ms": 1e3 * step.time.bounds["macs_s"], "board_step_ms": 1e3 * total_s, "hp_ports": hp_ports,
            "board_step_ms_by_hp_ports": {ports: 1e3 * one.time.total_s for ports, one in steps.items()},
            "pe_work": step.pe_work.to_dict()}


def print_row(row: dict, args, layers: int, work) -> None:
    """The step, its parts and the ratio; the PEs' cycles by part (``work``); the builds' resources."""
    per_ms = args.clock_mhz * 1e3  # cycles a millisecond
    print(f"rank {args.rank}, PE1 b_order {row['b_order']}, pairs {row['pairs']} ({row['dsp']:g} DSP), IPs on "
          f"{row['hp_ports']} HP port(s) (one port: {row['board_step_ms_by_hp_ports'][1]:.1f} ms): board step "
          f"{row['board_step_ms']:.1f} ms (PE+DMA {row['pe_dma_ms']:.1f} ms over layers "
          f"{[round(c / per_ms, 1) for c in row['pe_dma_cycles_per_layer']]} ms, host here "
          f"{row['host_ms_desktop']:.1f} ms, of it {row['host_hidden_ms']:.1f} ms hidden beside the lists, "
          f"{row['host_critical_ms']:.1f} ms ({100 * row['host_share']:.0f} %) between them; median "
          f"{row['host_ms_desktop_median']:.1f} ms, lists re-aimed {row['layer_steps_reshifted']} times in the "
          f"{layers * (args.steps + 2)} layer steps run, two warm); MAC bound {row['macs_bound_ms']:.1f} ms; "
          f"float32 PyTorch {row['torch_f32_ms']:.1f} ms; board / float32 = {row['ratio_board_to_torch_f32']:.1f}",
          flush=True)
    print(gaps_text(row["host_gaps_us"]), flush=True)
    print("PE cycles by part (every copy's calls, no stalls): " + "; ".join(
        f"{pe} load {work.load[pe] / 1e3:.0f} k ({work.overlap[pe] / 1e3:.0f} k beside the MAC loop), compute "
        f"{work.compute[pe] / 1e3:.0f} k, drain {work.drain[pe] / 1e3:.0f} k ({work.drain_overlap[pe] / 1e3:.0f} k "
        "beside it)" for pe in ("tt1", "tt2"))
        + f"; the phases' longest lists {work.stall_free / per_ms:.2f} ms without stalls, at least "
        f"{work.overlapped / per_ms:.2f} ms were load, compute and drain to overlap across calls, "
        f"{work.balanced / per_ms:.2f} ms were each phase's calls spread evenly over all {sum(row['copies'])} IPs",
        flush=True)
    fit = row["fit"]
    print(f"builds {row['pe_buffers']}, accumulation buffer {row['held_sums']}: "
          f"{', '.join(f'{k} {v:.1f} %' for k, v in fit['percent'].items())} of the Ultra96-V2 "
          f"({'fits' if fit['fits'] else 'over'} the fit rule's {FIT_LIMIT:g} %: PE "
          f"{'Yosys' if args.fit == 'yosys' else 'model'} + shell per IP)", flush=True)


def staging_pair(setup, shell, copies, held, batches) -> dict:
    """Seconds of host work between the lists per step, ``(least, median)``, of a trainer given the next batch
    (``staged``) and one not (``plain``), stepping in turn on replaying shells of ``shell``'s builds over
    ``batches`` (the first two steps, which aim the scales and build the lists, not timed)."""
    shells = {name: GoldenListShell({"tt1": shell.spec1, "tt2": shell.spec2}, copies, held_sums=held)
              for name in ("plain", "staged")}
    for each in shells.values():
        each.replay = True
    trainers = {name: TtListTrainer(setup, each) for name, each in shells.items()}
    between: dict = {name: [] for name in shells}
    for index, (x, y) in enumerate(batches):
        following = {"next_x": batches[index + 1][0]} if index + 1 < len(batches) else {}
        for name in ("plain", "staged") if index % 2 else ("staged", "plain"):
            before, started = shells[name].seconds, time.perf_counter()
            trainers[name].train_step(x, y, **(following if name == "staged" else {}))
            host = time.perf_counter() - started - (shells[name].seconds - before)
            if 2 <= index < len(batches) - 1:  # the last step has no next batch to stage
                between[name].append(host - sum(trainers[name].beside_seconds.values()))
    figures = {name: (min(seconds), float(np.median(seconds))) for name, seconds in between.items()}
    print("the next batch staged beside the lists, host between them (least / median, ms): " + "; ".join(
        f"{name} {1e3 * least:.2f} / {1e3 * median:.2f}" for name, (least, median) in figures.items()), flush=True)
    return figures


def lists_hold(setup, spec1, spec2, copies, batches) -> dict:
    """Per PE, whether its lists hold sums across calls (its IPs need the accumulation buffer): the lists of a
    trainer's first list step (its second step) on full shells."""
    trainer = TtListTrainer(setup, GoldenListShell({"tt1": spec1, "tt2": spec2}, copies))
    for x, y in batches[:2]:
        trainer.train_step(x, y)
    return {pe: any(lists.holds(pe) for lists in trainer.current_lists.values()) for pe in ("tt1", "tt2")}


def yosys_price(board_, cache: Path):
    """A PE build's resources as Yosys counts them on ``board_``'s family (:func:`codesign.design.fit.pe_cost`:
    a shipped report, ``cache``, else a Yosys run kept there)."""
    return lambda pe, spec: pe_cost(pe, spec, board_.yosys_family, cache)


def builds_fit(board_, copies, spec1, spec2, held, price) -> dict:
    """The IPs' resources (each PE as ``price`` counts it plus its shell's Yosys cost, with the accumulation
    buffer where ``held`` says) as percentages of ``board_``'s, and whether every one is within
    :data:`FIT_LIMIT`."""
    per_ip = {pe: fixed_resources({pe: spec}, board_.yosys_family, held, price)
              for pe, spec in (("tt1", spec1), ("tt2", spec2))}
    total = {key: copies[0] * per_ip["tt1"][key] + copies[1] * per_ip["tt2"][key] for key in per_ip["tt1"]}
    percent = {key: 100.0 * value / board_.resources[key] for key, value in total.items()}
    return {"total": total, "percent": percent, "fits": all(v <= FIT_LIMIT for v in percent.values())}


def pe_builds(setup, build, buffers, ultra96, args, copies, held, price):
    """PE1 and PE2 builds and every build :func:`builds_choice` priced: ``--b-order`` and ``--pairs`` as given,
    or (``auto``) chosen together, the fastest (the IPs on all the board's HP ports) whose extra fits
    :data:`DSP_GOAL` slices and the fit rule
    (:func:`builds_fit`'s count with ``price``, the accumulation buffer where ``held`` says: no choice moves a
    list)."""
    pairs_on = args.pairs == "on"
    spec1 = Tt1Spec(**build, **buffers["tt1"], b_order="lj" if args.b_order == "auto" else args.b_order,
                    j_pairs=pairs_on)
    spec2 = Tt2Spec(**build, **buffers["tt2"], row_pairs=pairs_on)
    fixed = {**({} if args.b_order == "auto" else {"b_order": args.b_order}),
             **({} if args.pairs == "auto" else {"row_pairs": pairs_on, "j_pairs": pairs_on})}
    if len(fixed) == len(CHOICES):
        return spec1, spec2, []
    total = builds_fit(ultra96, copies, spec1, spec2, held, price)["total"]
    room = {key: FIT_LIMIT / 100 * ultra96.resources[key] - total[key] for key in total}
    room["dsp"] = min(room["dsp"], DSP_GOAL - total["dsp"])
    found = builds_choice(setup, spec1, spec2, ultra96, clock_mhz=args.clock_mhz, copies=copies, room=room,
                          price=price, fixed=fixed, hp_ports=ultra96.hp_ports)
    return found["spec1"], found["spec2"], found["builds"]


if __name__ == "__main__":
    sys.exit(main())
