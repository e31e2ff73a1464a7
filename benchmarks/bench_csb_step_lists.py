"""The CSB training step as call lists, modelled on the ZedBoard and the Ultra96-V2, against a float32 PyTorch step
of the same MLP on one core.

The shipped example ``examples/digits_compressed_mlp.toml`` (a bias-free MLP
64-64-32-10, batch 64, its CSB build), trained through its float warm-up and
pruning search on the digits, then in one process:

- ``board``: a fixed-point step as the lists of :mod:`codesign.step.csb.lists`
  run it on the example's csb IPs (weights encoded on the device once per pruning, UPD on the PE),
  priced by the step model (:func:`codesign.step.csb.list_time.csb_list_step`:
  the list cycle model, exact against the RTL, under the boards' HP-port DDR
  timing) at the design's clock. Its host time is measured here: the wall time
  of a :class:`codesign.loops.csb_lists.CsbListTrainer` step less its golden
  shell's (which a board replaces by its IP), given the next batch as ``fit``
  gives it; the seconds it works beside a phase (this batch's check beside the
  forward, the next batch's codes written beside the last) are hidden as far as the phase reaches. This
  desktop is not the board's ARM.
- ``per_call``: the same step as one IP call per layer operation with the host
  encoding blocks between them (:func:`codesign.step.csb.time.csb_step_time`,
  its host measured here): what the board ran before the lists.
- ``torch_f32``: a float32 PyTorch step of the dense MLP (ReLU, softmax
  cross-entropy, plain SGD at the example's rate), one thread, the least of
  ``--steps``.

- ``explored``: the explorer's fastest build on each board for this list step
  (:func:`codesign.design.families.csb.csb_list_model`: square blocks, lanes,
  groups, streams, the LOSS unit or not, one to four copies), its step priced exactly, with the hosts measured
  here.

Both variants of the example's build run, one after the other: with the LOSS unit (the loss gradient's codes on
the PE, docs/csb.md "The loss on the PE") and without it (the host computes them between the lists).

Prints each board's step, its parts and the ratio board / torch_f32, and the
step's cycles by kind (the PE's, the descriptors' fetch, stalls, the records');
writes ``csb_step_lists.json``. A run takes about a minute (the warm-up and
the pruning search run first).

Run: .venv/bin/python benchmarks/bench_csb_step_lists.py [--steps 5] [--out reports/bench]
"""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

import numpy as np

from codesign.boards import board
from codesign.deploy.list_shell import BOARD_DDR
from codesign.design import load_design
from codesign.design.families import shared_build
from codesign.design.families.csb import csb_list_model, csb_setup_of
from codesign.io.reports import write_json_atomic
from codesign.loops.csb_lists import CsbListTrainer
from codesign.loops.host_share import compressed_masks, measure_csb_host
from codesign.shell.list_runner import GoldenListShell, gaps_text, host_per_list_step
from codesign.step.csb.list_time import csb_list_step, step_list_cycles
from codesign.step.csb.time import csb_step_time
from codesign.train.data import load_digits_dataset

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_fb_step_lists import (BOARDS, board_entry, cycles_by_kind, cycles_text, entry_text,  # noqa: E402
                                 explored_entry, explored_text, host_parts, least_seconds, step_arguments,
                                 torch_f32_step)

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "digits_compressed_mlp.toml"


def measure_variant(setup, copies: int, data, steps: int):
    """A list trainer of ``setup`` past its warm-up and pruning on the golden shell, and its host per list step
    measured on the same random batches as the other variant's."""
    shell = GoldenListShell({"csb": setup.spec}, units={"csb": copies})
    trainer = CsbListTrainer(setup, shell)
    trainer.fit(data, epochs=setup.warmup_epochs, progress=False)
    rng = np.random.default_rng(0)
    batches = [(rng.random((setup.batch_size, setup.layers[0])).astype(np.float32),
                rng.integers(0, setup.layers[-1], setup.batch_size)) for _ in range(1 + steps)]
    return trainer, batches, host_per_list_step(trainer, shell, batches, warm_steps=1)


def main() -> int:
    args = step_arguments(__doc__)
    design = load_design(EXAMPLE)
    setup, copies = csb_setup_of(design), shared_build(design, "csb")[1]
    layers, batch_size = setup.layers, setup.batch_size
    data = load_digits_dataset(validation_fraction=0.2)
    variants = {"loss_on_pe": replace(setup, spec=replace(setup.spec, loss=True)),
                "loss_on_host": replace(setup, spec=replace(setup.spec, loss=False))}
    measured = {name: measure_variant(variant, copies, data, args.steps) for name, variant in variants.items()}
    trainer, batches, _ = measured["loss_on_host"]
    call_host = measure_csb_host(compressed_masks(setup, data))  # the golden loop's, past the same pruning
    f32 = torch_f32_step(layers, lr=setup.lr, momentum=0.0, weight_decay=0.0, seed=setup.seed, bias=False)
    f32(*batches[0])
    torch_s = least_seconds(f32, batches[0], args.steps)
    kept = [int(mask.sum()) for mask in trainer.masks]
    row = {"design": design.name, "layers": list(layers), "batch": batch_size, "csb": setup.spec.to_dict(),
           "kept_weights": kept, "clock_mhz": design.clock_mhz, "torch_f32_ms": 1e3 * torch_s, "variants": {}}
    hosts = {name: host_parts(list_host)[1] for name, (_, _, list_host) in measured.items()}
    for name, (variant_trainer, _, list_host) in measured.items():
        spec, structures = variants[name].spec, variant_trainer._structure
        entry_row = row["variants"][name] = {
            "csb": spec.to_dict(), "host_list_ms_desktop": 1e3 * list_host["seconds"],
            "host_list_traffic": {k: v for k, v in list_host.items() if k != "seconds"}, "boards": {}}
        print(f"{name}: {gaps_text([1e6 * seconds for seconds in list_host['gaps_seconds']])}", flush=True)
        priced = step_list_cycles(spec, layers, batch_size, structures, ddr=BOARD_DDR, copies=copies)
        entry_row["cycles_by_kind"] = cycles_by_kind(priced)
        print(cycles_text(entry_row["cycles_by_kind"]), flush=True)
        for board_name in BOARDS:
            target = board(board_name)
            beside, _ = host_parts(list_host)
            lists = csb_list_step(spec, layers, batch_size, structures, target, clock_mhz=design.clock_mhz,
                                  host_s=list_host["seconds"], host_source="measured on this desktop",
                                  copies=copies, beside=beside, priced=priced)
            calls = csb_step_time(spec, trainer.masks, batch_size, target, clock_mhz=design.clock_mhz,
                                  host=call_host)
            entry_row["boards"][board_name] = entry = board_entry(lists, calls, torch_s)
            print(f"{name}, {board_name} at {design.clock_mhz:g} MHz (kept {kept} weights): {entry_text(entry, row)}",
                  flush=True)
    row["explored"] = {}
    for board_name in BOARDS:  # the space holds both variants: the LOSS unit is a knob, each with its host
        row["explored"][board_name] = found = explored_entry(csb_list_model(
            setup.spec, layers, batch_size, trainer.masks, host=hosts["loss_on_host"],
            host_with_loss=hosts["loss_on_pe"]), board(board_name), design.clock_mhz, torch_s)
        print(f"{board_name}: {explored_text(found)}", flush=True)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    write_json_atomic(out / "csb_step_lists.json", row)
    return 0


if __name__ == "__main__":
    sys.exit(main())
