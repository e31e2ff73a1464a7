"""The pruned ResNet-8's CSB training step, modelled on the ZedBoard and the Ultra96-V2 with and without stride 2 on
the PE, against its golden step and a float32 PyTorch step of the same network on one core.

The shipped example ``examples/digits_compressed.toml`` (ResNet-8, width 16,
batch 64 on the 8 x 8 digits, its CSB build) runs its float warm-up and the
kernel-pruning search in the golden trainer, then in one process:

- ``golden``: a fixed-point golden step (:meth:`codesign.train.trainer.Trainer.train_step`),
  the least of ``--steps``;
- ``torch_f32``: a float32 PyTorch step of the same dense ResNet-8 (batch
  norm, ReLU, softmax cross-entropy, SGD at the example's rate and momentum),
  one thread, the least of ``--steps``;
- per board, the modelled fixed-point step one IP call at a time
  (:func:`codesign.step.csb.time.csb_step_time`: the RTL-exact cycle model,
  the host's share measured here by :func:`codesign.design.csb_conv.measure_conv_host`)
  on the design's build at ``max_stride`` 1 (a stride-2 3 x 3 conv computed at
  stride 1 and subsampled by the host) and at ``max_stride`` 2 (header ``S2``);
- per board, the explorer's fastest build of :func:`codesign.design.families.csb.csb_model`
  (block shape, lanes, groups, output tile and ``max_stride``), priced exactly,
  and its fastest among the builds without stride 2.

Prints each board's figures and the ratios board / golden and board / float32;
writes ``csb_conv_step.json``. A run takes a few minutes (the warm-up first).
This desktop is not the board's ARM: the host figures are a lower bound.

Run: .venv/bin/python benchmarks/bench_csb_conv_step.py [--steps 5] [--warmup-epochs N] [--out reports/bench]
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import sys
from pathlib import Path

from codesign.boards import board
from codesign.design.calibration import pe_resources
from codesign.design.csb_conv import conv_layers, measure_conv_host, pruned_trainer
from codesign.design.families.csb import csb_model
from codesign.design.point import design_from_dict
from codesign.io.reports import write_json_atomic
from codesign.step.csb.time import csb_step_time
from codesign.train.config import read_toml

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_fb_step_lists import BOARDS, explored_entry, explored_text, least_seconds, sgd_step  # noqa: E402

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "digits_compressed.toml"


def torch_f32_step(trainer):
    """A float32 PyTorch step of ``trainer``'s network, freshly built at its shapes: ``step(x, y)``."""
    import torch

    from codesign.train.models import build_model

    config = trainer.config
    torch.manual_seed(config.seed)
    model = build_model(config.model.name, depth=config.model.depth, hidden=config.model.hidden,
                        width=config.model.width, sample_shape=tuple(trainer.dataset.train_x.shape[1:]),
                        classes=10).float()
    return sgd_step(model, lr=config.optim.lr, momentum=config.optim.momentum, weight_decay=config.optim.weight_decay)


def modelled(spec, layers, batch: int, target, clock_mhz: float, host, reference_s: dict) -> dict:
    """One build's modelled step on ``target`` (ms, host share, bottleneck), its dense-equivalent operations per
    DSP slice and cycle over the PE's time (the resource model's DSP count, which leaves out a conv build's 2-9
    address DSPs) and its ratios to the references."""
    step = csb_step_time(spec, layers, batch, target, clock_mhz=clock_mhz, host=host)
    dsp = pe_resources("csb", spec, target.yosys_family)["dsp"]
    return {"board_step_ms": 1e3 * step.total_s, "pe_ms": 1e3 * step.pe_s, "memory_ms": 1e3 * step.memory_s,
            "host_share": step.host_s / step.total_s, "bottleneck": step.bottleneck, "dsp_model": dsp,
            "equivalent_ops_per_dsp_cycle": step.throughput(dsp)["equivalent_ops_per_dsp_cycle"],
            **{f"ratio_board_to_{name}": step.total_s / seconds for name, seconds in reference_s.items()}}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--warmup-epochs", type=int, default=None, help="the float epochs before pruning "
                        "(default: the example's)")
    parser.add_argument("--out", default="reports/bench")
    args = parser.parse_args()
    if args.steps < 1:
        parser.error("--steps must be >= 1")
    if args.warmup_epochs is not None and args.warmup_epochs < 1:
        parser.error("--warmup-epochs must be >= 1")
    import torch

    torch.set_num_threads(1)
    raw = copy.deepcopy(read_toml(EXAMPLE))
    if args.warmup_epochs is not None:
        raw["techniques"]["compress"]["warmup_epochs"] = args.warmup_epochs
    design = design_from_dict(raw)
    spec = design.instances[0].spec
    trainer = pruned_trainer(design.training)
    layers = conv_layers(trainer)
    batch = design.training.optim.batch_size
    x, y = trainer.dataset.train_x[:batch], trainer.dataset.train_y[:batch]
    golden_s = least_seconds(trainer.train_step, (x, y), args.steps)
    f32 = torch_f32_step(trainer)
    f32_batch = (x.float(), y)
    f32(*f32_batch)
    torch_s = least_seconds(f32, f32_batch, args.steps)
    host = measure_conv_host(trainer, spec, layers)
    references = {"golden": golden_s, "torch_f32": torch_s}
    row = {"design": design.name, "batch": batch, "csb": spec.to_dict(), "clock_mhz": design.clock_mhz,
           "kept_kernels": [int(layer.mask.sum()) for layer in layers],
           "strides": [layer.stride for layer in layers], "golden_ms": 1e3 * golden_s, "torch_f32_ms": 1e3 * torch_s,
           "host_fixed_ms_desktop": 1e3 * host.fixed_s, "host_per_call_us_desktop": 1e6 * host.per_call_s,
           "boards": {}}
    print(f"golden step {row['golden_ms']:.1f} ms, float32 PyTorch {row['torch_f32_ms']:.1f} ms; host here "
          f"{row['host_fixed_ms_desktop']:.1f} ms + {row['host_per_call_us_desktop']:.1f} us a call", flush=True)
    for name in BOARDS:
        target = board(name)
        entry = row["boards"][name] = {}
        for stride in (1, 2):
            build = dataclasses.replace(spec, max_stride=stride)
            entry[f"max_stride_{stride}"] = found = modelled(build, layers, batch, target, design.clock_mhz, host,
                                                            references)
            print(f"{name} at {design.clock_mhz:g} MHz, max_stride {stride}: {found['board_step_ms']:.1f} ms "
                  f"(PE {found['pe_ms']:.1f}, host {100 * found['host_share']:.0f} %, {found['bottleneck']}; "
                  f"{found['equivalent_ops_per_dsp_cycle']:.2f} ops per DSP and cycle); "
                  f"board / golden {found['ratio_board_to_golden']:.2f}, board / float32 "
                  f"{found['ratio_board_to_torch_f32']:.2f}", flush=True)
        family = csb_model(spec, layers, batch, host=host)
        entry["explored"] = explored_entry(family, target, design.clock_mhz, torch_s)
        print(f"{name}: {explored_text(entry['explored'])}", flush=True)
        stride_one = dataclasses.replace(family, knobs={"csb": {**family.knobs["csb"], "max_stride": (1,)}})
        entry["explored_max_stride_1"] = explored_entry(stride_one, target, design.clock_mhz, torch_s)
        print(f"{name}, builds without stride 2: {explored_text(entry['explored_max_stride_1'])}", flush=True)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    write_json_atomic(out / "csb_conv_step.json", row)
    return 0


if __name__ == "__main__":
    sys.exit(main())
