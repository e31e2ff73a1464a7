"""A compressed conv network's training step as call lists, modelled on the Ultra96-V2 and the ZedBoard, against a
float32 PyTorch step of the same network on one core.

The golden conv loop's network on the digits (``--convs``, default 16, 16, 32 at stride 2 and 32; a dense head;
batch 64), trained through its float warm-up and pruning search, then in one process:

- ``board``: a fixed-point step as the two lists of :mod:`codesign.step.csb.conv_step` run it (every map in
  place, halo tiles read by 3-D blocks, ReLU, masks and UPD on the PE), priced by the list cycle model (exact
  against the RTL) under the boards' HP-port DDR timing at 100 MHz; its host time measured here: the wall time of
  a :class:`codesign.loops.csb_conv_lists.CsbConvListTrainer` step less its golden shell's. This desktop is not
  the board's ARM;
- ``torch_f32``: a float32 PyTorch step of the dense network (ReLU, softmax cross-entropy, plain SGD at the same
  rate), one thread, the least of ``--steps``;
- the dense-equivalent operations per DSP slice and cycle over the lists' cycles (the resource model's DSP),
  against paper 002's 3.13.

Prints the step, its parts and the ratio board / torch_f32; writes ``csb_conv_lists.json``. A run takes a few
minutes (the warm-up, the pruning search and one golden step run first).

Run: .venv/bin/python benchmarks/bench_csb_conv_lists.py [--steps 5] [--out reports/bench]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

from codesign.deploy.list_shell import BOARD_DDR
from codesign.design.calibration import pe_resources
from codesign.io.reports import write_json_atomic
from codesign.loops.csb import learning_rate_exponent
from codesign.loops.csb_conv import CsbConvSetup
from codesign.loops.csb_conv_lists import CsbConvListTrainer
from codesign.loops.csb_lists import upd_fields
from codesign.pe import get_pe
from codesign.pe.csb import CsbSpec
from codesign.shell.list_runner import GoldenListShell, host_per_list_step
from codesign.step.list_cycles import list_cycles
from codesign.train.data import load_digits_dataset

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_fb_step_lists import least_seconds, sgd_step  # noqa: E402

CLOCK_MHZ = 100.0
PAPER_OPS_PER_DSP_CYCLE = 641.1e9 / (1024 * 200e6)


def torch_conv_step(setup: CsbConvSetup):
    """A float32 PyTorch step of ``setup``'s network, dense: ``step(x, y)``."""
    import torch

    torch.manual_seed(setup.seed)
    layers, c = [], setup.image[0]
    for outputs, stride in setup.convs:
        layers += [torch.nn.Conv2d(c, outputs, setup.spec.kernel, stride=stride, padding=setup.spec.kernel // 2,
                                   bias=False), torch.nn.ReLU()]
        c = outputs
    channels, _, _, _, _, _, _ = setup.layer_maps[-1]
    model = torch.nn.Sequential(*layers, torch.nn.Flatten(), torch.nn.Linear(channels, setup.classes, bias=False))
    return sgd_step(model, lr=setup.lr)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--warmup-epochs", type=int, default=3)
    parser.add_argument("--out", default="reports/bench")
    args = parser.parse_args()
    if args.steps < 1 or args.warmup_epochs < 1:
        parser.error("--steps and --warmup-epochs must be >= 1")
    import torch

    torch.set_num_threads(1)
    spec = CsbSpec(block_rows=16, block_cols=16, kernel=3, out_h=4, out_w=4, batch=16, parallel=4, max_stride=2)
    setup = CsbConvSetup(spec=spec, image=(1, 8, 8), convs=((16, 1), (16, 1), (32, 2), (32, 1)), classes=10,
                         batch_size=64, epochs=args.warmup_epochs + 3, warmup_epochs=args.warmup_epochs, lr=0.1,
                         schedule="constant", seed=0)
    shell = GoldenListShell({"csb": spec})
    trainer = CsbConvListTrainer(setup, shell)
    data = load_digits_dataset(validation_fraction=0.2)
    print(f"warm-up ({args.warmup_epochs} epochs) and pruning search", flush=True)
    trainer.fit(data, epochs=args.warmup_epochs, progress=False)
    x, y = data.train_x.numpy().astype(np.float32), data.train_y.numpy()
    batches = [(x[i * 64:(i + 1) * 64], y[i * 64:(i + 1) * 64]) for i in range(1 + args.steps)]
    print("one golden list step, then the host's share of the replayed ones", flush=True)
    host = host_per_list_step(trainer, shell, batches, warm_steps=1)
    lists = trainer.lists(64, upd_fields(trainer.frac_bits, learning_rate_exponent(trainer.learning_rate()))[1])
    pe = get_pe("csb")
    cycles = {name: list_cycles(pe, spec, calls, trainer.net.image, ddr=BOARD_DDR).total
              for name, calls in (("forward", lists.forward), ("backward", lists.backward))}
    f32 = torch_conv_step(setup)
    f32_batch = (torch.tensor(batches[0][0]), torch.tensor(batches[0][1]))
    f32(*f32_batch)
    torch_s = least_seconds(f32, f32_batch, args.steps)
    dense = sum((2 + (i > 0)) * 64 * c * o * k * k * oh * ow for i, (c, o, k, _, oh, ow, _) in
                enumerate(setup.layer_maps))
    dsp = pe_resources("csb", spec, "xcup")["dsp"]
    pe_s = sum(cycles.values()) / (CLOCK_MHZ * 1e6)
    board_s = pe_s + host["seconds"]
    row = {"convs": [list(c) for c in setup.convs], "batch": 64, "csb": spec.to_dict(), "clock_mhz": CLOCK_MHZ,
           "kept_kernels": [int(m.sum()) for m in trainer.masks], "calls": [len(lists.forward), len(lists.backward)],
           "cycles": cycles, "pe_dma_ms": 1e3 * pe_s, "host_ms_desktop": 1e3 * host["seconds"],
           "host_traffic": {k: v for k, v in host.items() if k != "seconds"}, "board_step_ms": 1e3 * board_s,
           "host_share": host["seconds"] / board_s, "torch_f32_ms": 1e3 * torch_s, "ratio_board_to_torch_f32":
           board_s / torch_s, "dsp_model": dsp, "equivalent_ops_per_dsp_cycle": 2 * dense / sum(cycles.values()) / dsp,
           "paper_ops_per_dsp_cycle": PAPER_OPS_PER_DSP_CYCLE}
    print(f"kept kernels {row['kept_kernels']}; {row['calls']} calls; PE + DMA {row['pe_dma_ms']:.2f} ms "
          f"({cycles['forward']} + {cycles['backward']} cycles under the HP-port DDR model at {CLOCK_MHZ:g} MHz), "
          f"host here {row['host_ms_desktop']:.2f} ms ({100 * row['host_share']:.0f} %): board step "
          f"{row['board_step_ms']:.2f} ms; float32 PyTorch {row['torch_f32_ms']:.2f} ms; board / float32 "
          f"{row['ratio_board_to_torch_f32']:.2f}; {row['equivalent_ops_per_dsp_cycle']:.2f} dense-equivalent ops "
          f"per DSP and cycle on {dsp:g} DSP (paper 002: {PAPER_OPS_PER_DSP_CYCLE:.2f})", flush=True)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    write_json_atomic(out / "csb_conv_lists.json", row)
    return 0


if __name__ == "__main__":
    sys.exit(main())
