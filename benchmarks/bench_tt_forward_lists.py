"""A TT network's forward pass as call lists on the PL, against a float32 PyTorch forward of it on one core.

For each network (digits_tt's first layer; paper 003's two layers at rank 8,
our modes, :data:`codesign.design.families.tt.PAPER_LAYERS`), batch 64, the
forward pass is laid out as call lists (:func:`codesign.step.tt.lists.forward_lists`:
every state in place, rounded on the PE) and priced by the list cycle model
(:func:`codesign.step.list_cycles.list_cycles`, equal to the RTL's cycles on
every list the tests run) with its DDR timing (:class:`DdrTiming`'s
defaults: 30 cycles to the first read beat, 20 to a write response), then by
the whole-step model (:func:`codesign.step.time.step_time` over one
:func:`list_stage` per list) on the Ultra96-V2 and the ZedBoard at 100 MHz.
The host's share is what the host does per forward pass with lists,
measured here: packing the batch's codes into the arena, flushing them,
invalidating and converting the output (NumPy, pynq buffers on the emulated
board), and each list's driver work (``AccelIP.run_list``: checks, 8
register writes, the poll, the last record) measured on the emulated
digits_tt board as its wall time less the emulated kernel's. In the same
process, a plain float32 PyTorch forward of the same TT layers
(``tt_forward`` on torch tensors) runs on one thread. The table gives the
modelled board forward, its split and the ratio to PyTorch.

The PEs: 32-bit streams, 16 lanes x 8 rows (128 MACs each, the paper's
array), buffers large enough that no contraction needs partial sums
(``max_j`` 64; PE2 cuts K itself). Only the forward pass: the backward pass
is not on lists yet.

Run: .venv/bin/python benchmarks/bench_tt_forward_lists.py [--repeats 20] [--out reports/bench]
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np

from codesign.boards import boards
from codesign.design.families.tt import PAPER_LAYERS
from codesign.io.reports import write_json_atomic
from codesign.pe import get_pe
from codesign.pe.tt.contract import pack_rows
from codesign.pe.tt.spec import Tt1Spec, Tt2Spec
from codesign.deploy.driver import flush_words, invalidate_words
from codesign.step.list_cycles import DdrTiming, list_cycles
from codesign.step.time import list_stage, step_time
from codesign.step.tt.lists import forward_lists

BATCH = 64
CLOCK_MHZ = 100.0
SPEC2 = Tt2Spec(lanes=16, rows=8, max_j=64, max_k=64, max_l=64)
SPEC1 = Tt1Spec(lanes=16, rows=8, max_j=64, max_k=64, max_l=64)
NETWORKS = {  # name -> layers (in_modes, out_modes), inner rank
    "digits_tt layer 1 (64 -> 64, rank 4)": ((((4, 4, 4), (4, 4, 4)),), 4),
    "paper 003 (1024 -> 512 -> 10, rank 8)": (PAPER_LAYERS, 8),
}


def layer_cores(in_modes, out_modes, rank: int, rng: np.random.Generator) -> list:
    ranks = (1, *([rank] * (len(in_modes) - 1)), 1)
    ranks = tuple(min(r, 8) if k in (0, len(ranks) - 1) else r for k, r in enumerate(ranks))
    return [rng.integers(-8, 8, size=(ranks[k], out_modes[k], in_modes[k], ranks[k + 1]))
            for k in range(len(in_modes))]


def lists_of(network, rng):
    """Each layer's forward lists (random codes: the cycles depend on the shapes alone)."""
    layers, rank = network
    made = []
    for in_modes, out_modes in layers:
        cores = layer_cores(in_modes, out_modes, rank, rng)
        x = rng.integers(-128, 128, size=(BATCH, int(np.prod(in_modes))))
        made.append((x, cores, forward_lists(x, cores, [-6] * (len(cores) - 1), spec2=SPEC2, spec1=SPEC1)))
    return made


def modelled(made) -> dict:
    """Cycles of every list (PE2's, then PE1's, layer by layer: each needs the one before) and the stages."""
    stages, cycles = [], []
    for _, _, lists in made:
        for pe, spec, calls in (("tt2", SPEC2, lists.pe2_calls), ("tt1", SPEC1, lists.pe1_calls)):
            result = list_cycles(get_pe(pe), spec, calls, lists.arena, ddr=DdrTiming())
            cycles.append({"pe": pe, "calls": len(calls), "cycles": result.total, **result.breakdown()})
            stages.append(list_stage(result.total, calls))
    return {"stages": stages, "lists": cycles}


def host_seconds(made, repeats: int, per_list_s: float) -> float:
    """The host per forward pass: the batch's codes packed into the arena and flushed, the output invalidated and
    read back as floats (pynq buffers on the active emulated board), and ``per_list_s`` of driver work a list."""
    from pynq import allocate

    best = float("inf")
    for _ in range(repeats):
        elapsed = 0.0
        for x, cores, lists in made:
            arena = allocate(shape=(lists.arena.size,), dtype=np.uint32)
            arena[:] = lists.arena
            outputs = int(np.prod(lists.out_shape))
            started = time.perf_counter()
            words = pack_rows(x.reshape(BATCH, cores[0].shape[2], -1), SPEC2.lanes, SPEC2.a_bits).reshape(-1)
            arena[:words.size] = words  # the input state is the arena's first block (offset 0)
            flush_words(arena, words.size)
            invalidate_words(arena, outputs, lists.out // 4)
            np.asarray(arena[lists.out // 4:lists.out // 4 + outputs]).view(np.int32).astype(np.float32)
            elapsed += time.perf_counter() - started
            arena.freebuffer()
        best = min(best, elapsed)
    return best + per_list_s * 2 * len(made)


def driver_seconds_per_list(root: Path, repeats: int) -> float:
    """``AccelIP.run_list``'s own time per list on the emulated digits_tt board (left active for
    :func:`host_seconds`): its wall time less the emulated kernel's (the generated C++ runs inside the ap_start
    write there; on a board the PL runs it)."""
    import warnings

    from pynq import allocate

    from codesign.deploy import CodesignOverlay
    from codesign.design import load_design
    from codesign.design.build import write_emulation_folder

    design = load_design(Path(__file__).resolve().parents[1] / "examples" / "digits_tt.toml")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        overlay = CodesignOverlay(write_emulation_folder(design, root / "board"), design=design, emulate=True)
    ip = overlay.accelerators("tt2")[0]
    spec2 = get_pe("tt2").spec_class(**ip.manifest_entry["spec"])
    spec1 = get_pe("tt1").spec_class(**overlay.accelerators("tt1")[0].manifest_entry["spec"])
    rng = np.random.default_rng(1)
    cores = layer_cores((4, 4, 4), (4, 4, 4), 4, rng)
    lists = forward_lists(rng.integers(-128, 128, size=(BATCH, 64)), cores, [-6, -6], spec2=spec2, spec1=spec1)
    arena = allocate(shape=(lists.arena.size,), dtype=np.uint32, target=overlay.device)
    descriptors = allocate(shape=(32 * len(lists.pe2_calls),), dtype=np.uint32, target=overlay.device)
    descriptors[:] = np.concatenate([call.descriptor() for call in lists.pe2_calls])
    best = float("inf")
    for _ in range(repeats):
        arena[:] = lists.arena
        flush_words(arena, arena.size)
        started = time.perf_counter()
        ip.run_list(arena, descriptors, len(lists.pe2_calls))
        kernel = overlay.device.ips[ip.ip_name].last_run_s
        best = min(best, time.perf_counter() - started - kernel)
    return best


def torch_forward_seconds(made, repeats: int) -> float:
    """A float32 PyTorch forward of the same TT layers on one thread (best of ``repeats``)."""
    import torch

    from codesign.train.tt.ttm import tt_forward

    torch.set_num_threads(1)
    tensors = [(torch.tensor(x, dtype=torch.float32), [torch.tensor(c, dtype=torch.float32) for c in cores])
               for x, cores, _ in made]
    best = float("inf")
    with torch.no_grad():
        for _ in range(repeats):
            started = time.perf_counter()
            for x, cores in tensors:
                tt_forward(x, cores)
            best = min(best, time.perf_counter() - started)
    return best


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--out", default="reports/bench")
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    root = Path(tempfile.mkdtemp(prefix="codesign_bench_lists_"))
    per_list_s = driver_seconds_per_list(root, args.repeats)
    rows = []
    for name, network in NETWORKS.items():
        made = lists_of(network, rng)
        started = time.perf_counter()
        model = modelled(made)
        model_s = time.perf_counter() - started
        host_s = host_seconds(made, args.repeats, per_list_s)
        torch_s = torch_forward_seconds(made, args.repeats)
        for board_name in ("ultra96v2", "zedboard"):
            board = boards()[board_name]
            total_words = sum(s.words_in + s.words_out for s in model["stages"])
            timed = step_time(model["stages"], board, clock_mhz=CLOCK_MHZ, host_s=host_s, host_source="this desktop",
                              macs=0, array_macs=SPEC2.lanes * SPEC2.rows, calls=sum(r["calls"] for r in
                                                                                    model["lists"]),
                              stream_cycles=total_words, mac_energy_pj=0.0)
            rows.append({"network": name, "board": board_name, "lists": model["lists"], "pe_s": timed.pe_s,
                         "memory_s": timed.memory_s, "host_s": timed.host_s, "total_s": timed.total_s,
                         "torch_f32_s": torch_s, "ratio": timed.total_s / torch_s, "model_s": model_s})
            print(f"{name} on {board_name}: board forward {1e3 * timed.total_s:.3f} ms (PE+DMA "
                  f"{1e3 * timed.pe_s:.3f}, memory {1e3 * timed.memory_s:.3f}, host {1e3 * host_s:.3f}); torch "
                  f"float32 one core {1e3 * torch_s:.3f} ms; ratio {timed.total_s / torch_s:.2f} "
                  f"(model took {model_s:.1f} s)", flush=True)
    out = Path(args.out)
    shutil.rmtree(root, ignore_errors=True)
    write_json_atomic(out / "tt_forward_lists.json", {"rows": rows, "driver_s_per_list": per_list_s,
                                                      "ddr": repr(DdrTiming()),
                                                      "specs": {"tt2": repr(SPEC2), "tt1": repr(SPEC1)}})
    for row in rows:
        for entry in row["lists"]:
            print(f"  {row['network']} [{row['board']}] {entry}")
    print(f"wrote {out / 'tt_forward_lists.json'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
