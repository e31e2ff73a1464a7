"""A compressed conv network's training step as call lists, modelled on the ZedBoard and the Ultra96-V2, against
the golden step and a float32 PyTorch step of the same network on one core.

The shipped design examples/digits_compressed_conv.toml (model 'convnet': convs 16, 16, 32 at stride 2 and 32, a
dense head; batch 64), or ``--example`` another (examples/digits_compressed_resnet.toml: ResNet-8's layers without
batch norm), its loop trained through its float warm-up and pruning search
(:func:`codesign.design.families.csb_conv.pruned_list_trainer`), then in one process:

- ``board``: a fixed-point step as the lists of :mod:`codesign.step.csb.conv_step` run it (every map in place,
  halo tiles read by 3-D blocks, ReLU, masks and UPD on the PE) on one csb IP of the example's build and shared
  among ``--copies`` of it, priced by the list cycle model (exact against the RTL) under the boards' HP-port DDR
  timing at the design's clock, as the explorer prices it
  (:func:`codesign.step.csb.conv_list_time.conv_list_step`); its host time measured here: the wall time of a list
  step less its golden shell's. This desktop is not the board's ARM;
- ``golden``: a fixed-point step of the golden conv loop (:class:`codesign.loops.csb_conv.CsbConvTrainer`, every
  product exact through BLAS), the least of ``--steps``;
- ``torch_f32``: a float32 PyTorch step of the dense network (:class:`codesign.train.models.ConvNet`, softmax
  cross-entropy, plain SGD at the same rate), one thread, the least of ``--steps``;
- the dense-equivalent operations per DSP slice and cycle over the PE's time (the resource model's DSP, times the
  copies), against paper 002's 3.13, and the share of the board's DSP slices the copies take (the explorer
  keeps a point under 80 % of every resource);
- the same for the example's build packed (two products a DSP slice, docs/csb.md: half the multipliers, WG's
  steps in two cycles), where its lane count is even, and for both on every wider stream its lanes allow (a
  position's codes whole 64- or 128-bit beats, docs/csb.md "Wide streams"); ``--lanes`` prices the build with
  another lane count (8: the example's build before it took 16 lanes).

Prints a row per board and copy count (and per copy count the step's cycles by
kind) and writes ``csb_conv_lists.json``. A run takes a few minutes (two
warm-ups and pruning searches, one golden list step).

Run: .venv/bin/python benchmarks/bench_csb_conv_lists.py [--steps 5] [--copies 1,2] [--lanes 8] [--example FILE]
     [--out reports/bench]
"""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

import numpy as np

from codesign.boards import board
from codesign.deploy.list_shell import BOARD_DDR
from codesign.design import load_design
from codesign.design.calibration import pe_resources
from codesign.design.families import shared_build
from codesign.design.families.csb_conv import csb_conv_setup_of, measure_conv_list_host, pruned_list_trainer
from codesign.io.reports import write_json_atomic
from codesign.loops.csb_conv import CsbConvTrainer
from codesign.loops.csb_conv_lists import check_conv_list_spec
from codesign.step.csb.conv_list_time import conv_list_step, conv_step_list_cycles
from codesign.step.csb.conv_step import conv_structures
from codesign.train.models import ConvNet
from codesign.train.trainer import load_dataset

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_fb_step_lists import cycles_by_kind, cycles_text, least_seconds, sgd_step, step_arguments  # noqa: E402

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "digits_compressed_conv.toml"
PAPER_OPS_PER_DSP_CYCLE = 641.1e9 / (1024 * 200e6)
BOARDS = ("zedboard", "ultra96v2")


def torch_conv_step(setup):
    """A float32 PyTorch step of ``setup``'s network, dense: ``step(x, y)``."""
    import torch

    torch.manual_seed(setup.seed)
    model = ConvNet(image=setup.image, channels=tuple(o for o, _ in setup.convs),
                    strides=tuple(s for _, s in setup.convs), classes=setup.classes, blocks=setup.blocks)
    return sgd_step(model, lr=setup.lr)


def main() -> int:
    args = step_arguments(__doc__, copies=True, lanes=True, example=str(EXAMPLE))
    design = load_design(Path(args.example))
    setup, data = csb_conv_setup_of(design), load_dataset(design.training)
    spec, n = setup.spec, setup.batch_size
    if args.lanes is not None:
        spec = replace(spec, batch=args.lanes, stream_bits=32)  # every stream its lanes allow, below
        check_conv_list_spec(spec, replace(setup, spec=spec))  # before the warm-ups: a build the lists cannot run
    print(f"warm-up ({setup.warmup_epochs} epochs) and pruning search, twice: the list trainer and the golden loop",
          flush=True)
    lists = pruned_list_trainer(setup, data, copies=shared_build(design, "csb")[1])  # the host timed on the example's IPs
    golden = CsbConvTrainer(setup)
    golden.fit(data, epochs=setup.warmup_epochs, progress=False)
    host = measure_conv_list_host(lists, repeats=args.steps)
    x, y = data.train_x[:n].numpy().astype(np.float32), data.train_y[:n].numpy()
    golden_s = least_seconds(golden.train_step, (x, y), args.steps)
    f32 = torch_conv_step(setup)
    f32(x, y)  # the first step, untimed
    torch_s = least_seconds(f32, (x, y), args.steps)
    rows = []
    widths = [bits for bits in (32, 64, 128) if spec.batch % (bits // 8) == 0]  # lanes: 4 per 32-bit part
    packs = (False, True) if spec.batch % 2 == 0 else (spec.packed,)
    builds = [replace(spec, stream_bits=bits, packed=packed) for bits in widths for packed in packs]
    for copies, build in ((copies, build) for copies in args.copies for build in builds):
        priced = conv_step_list_cycles(build, setup.image, setup.convs, setup.classes, n,
                                       conv_structures(build, lists.masks, setup.shapes_and_blocks[0]),
                                       ddr=BOARD_DDR, copies=copies, blocks=setup.blocks)
        kinds = cycles_by_kind(priced)
        packed = (" packed" if build.packed else "") + f", {build.stream_bits}-bit stream"
        print(f"{copies} csb IP(s){packed}: {cycles_text(kinds)}", flush=True)
        for name in BOARDS:
            chosen = board(name)
            step = conv_list_step(build, setup.image, setup.convs, setup.classes, n, lists.masks, chosen,
                                  clock_mhz=design.clock_mhz, host_s=host["seconds"], host_source="this desktop",
                                  copies=copies, priced=priced, blocks=setup.blocks)
            dsp = copies * pe_resources("csb", build, chosen.yosys_family)["dsp"]
            rows.append({"board": name, "copies": copies, "packed": build.packed, "stream_bits": build.stream_bits,
                         **step.to_dict(),
                         "host_share": step.host_s / step.total_s,
                         "dsp_model": dsp, "dsp_share": dsp / chosen.resources["dsp"],
                         "cycles_by_kind": kinds,
                         "equivalent_ops_per_dsp_cycle": step.throughput(dsp)["equivalent_ops_per_dsp_cycle"],
                         "ratio_board_to_torch_f32": step.total_s / torch_s,
                         "ratio_board_to_golden": step.total_s / golden_s})
            print(f"{name}, {copies} csb IP(s){packed}: step {1e3 * step.total_s:.2f} ms (PE {1e3 * step.pe_s:.2f}, "
                  f"memory {1e3 * step.memory_s:.2f}, host here {1e3 * step.host_s:.2f} = "
                  f"{100 * rows[-1]['host_share']:.1f} %); {step.calls} calls; golden {1e3 * golden_s:.2f} ms; "
                  f"float32 PyTorch {1e3 * torch_s:.2f} ms; "
                  f"board / float32 {rows[-1]['ratio_board_to_torch_f32']:.1f}; "
                  f"{rows[-1]['equivalent_ops_per_dsp_cycle']:.2f} dense-equivalent ops per DSP and cycle on {dsp:g} "
                  f"DSP ({100 * rows[-1]['dsp_share']:.0f} % of the board's; paper 002: "
                  f"{PAPER_OPS_PER_DSP_CYCLE:.2f})", flush=True)
    result = {"design": design.name, "convs": [list(c) for c in setup.convs], "blocks": [list(b) for b in setup.blocks],
              "batch": n, "csb": spec.to_dict(),
              "kept_kernels": [int(m.sum()) for m in lists.masks], "golden_ms": 1e3 * golden_s,
              "torch_f32_ms": 1e3 * torch_s, "host_traffic": {k: v for k, v in host.items() if k != "seconds"},
              "paper_ops_per_dsp_cycle": PAPER_OPS_PER_DSP_CYCLE, "boards": rows}
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    write_json_atomic(out / "csb_conv_lists.json", result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
