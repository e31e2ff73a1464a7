"""The whole-step model of the compressed (CSB) loop (:mod:`codesign.loops.csb`) on a ``csb`` build.

A fixed-point step of the loop runs, per layer, FP (forward), WG (weight
gradient), EB (input error, all layers but the first) and UPD (the SGD
update) on the layer's pruned weights in CSB blocks. What the PE does
depends on the kernel masks the warm-up's pruning search kept
(:func:`codesign.loops.host_share.compressed_masks`) and on the build: its block shape cuts a mask into
blocks, its lanes cut the batch into chunks. The board's backend
(``codesign.deploy.csb_training.IpCsb``) sends, for FP, one IP call per
block column (every lane chunk's transactions on the column's non-empty
blocks, chained), for EB one per block row, for WG one per lane chunk (every
non-empty block) and for UPD one call; each call is a stage
(:class:`codesign.design.step_time.Stage`), in the loop's order, its cycles
by the RTL-exact model of :mod:`codesign.pe.csb.cycles` and its words by the
stream format (:mod:`codesign.pe.csb.stream`).

The host's share: the loop's host work per fixed-point step (scales, ReLU,
softmax, shifts) measured in a golden step less its PE operations, plus the
encoding of every transaction by the PE's own encoder, measured per
transaction.
"""

from __future__ import annotations

import functools

import numpy as np

from codesign.boards import Board
from codesign.design.step_time import Stage, StepTime, step_time, stream_cycles
from codesign.energy.table import horowitz_45nm
from codesign.loops.host_share import HostModel
from codesign.pe.csb.cycles import compute_cycles
from codesign.pe.csb.spec import DATA_BITS, CsbSpec
from codesign.pe.csb.stream import Op, header_word, result_count, transaction_length


@functools.lru_cache(maxsize=65536)
def transaction(spec: CsbSpec, op: Op, nnz: int) -> tuple[int, int, int]:
    """(cycles, words in, words out) of one accepted transaction of ``op`` on a block of ``nnz`` entries."""
    words_in = transaction_length(spec, header_word(op, nnz))
    results = result_count(spec, op, nnz)
    return words_in + compute_cycles(spec, op=int(op), nnz=nnz) + 2 + results, words_in, 1 + results


def block_nnz(mask: np.ndarray, spec: CsbSpec) -> np.ndarray:
    """Entries kept per block of ``mask`` (outputs x inputs) cut into ``block_rows x block_cols`` blocks."""
    rows, cols = mask.shape
    grid = (-(-rows // spec.block_rows), -(-cols // spec.block_cols))
    padded = np.zeros((grid[0] * spec.block_rows, grid[1] * spec.block_cols), dtype=np.int64)
    padded[:rows, :cols] = np.asarray(mask, dtype=bool)
    return padded.reshape(grid[0], spec.block_rows, grid[1], spec.block_cols).sum(axis=(1, 3))


def _call(spec: CsbSpec, op: Op, nnz_list, repeat: int = 1) -> tuple[Stage, int] | None:
    parts = [transaction(spec, op, int(nnz)) for nnz in nnz_list if nnz] * repeat
    if not parts:
        return None
    return Stage(cycles=sum(p[0] for p in parts), words_in=sum(p[1] for p in parts),
                 words_out=sum(p[2] for p in parts)), len(parts)


def layer_calls(spec: CsbSpec, grid: np.ndarray, op: Op, batch: int) -> list[tuple[Stage, int]]:
    """The IP calls of one op on a layer whose blocks keep ``grid`` entries, for ``batch`` samples."""
    chunks = -(-batch // spec.batch)
    if op == Op.FP:
        calls = [_call(spec, op, grid[:, col], chunks) for col in range(grid.shape[1])]
    elif op == Op.EB:
        calls = [_call(spec, op, grid[row, :], chunks) for row in range(grid.shape[0])]
    elif op == Op.WG:
        calls = [_call(spec, op, grid.reshape(-1))] * chunks
    else:
        calls = [_call(spec, op, grid.reshape(-1))]
    return [call for call in calls if call is not None]


def csb_stages(spec: CsbSpec, masks, batch: int) -> tuple[list[Stage], dict[str, int]]:
    """Every stage of one fixed-point step on ``spec`` in the loop's order (FP per layer; from the last layer WG,
    then EB but on the first; UPD per layer), and the step's MACs (done, and ``dense_macs`` were nothing pruned),
    transactions and stream cycles."""
    grids = [block_nnz(mask, spec) for mask in masks]
    calls = [call for grid in grids for call in layer_calls(spec, grid, Op.FP, batch)]
    for index in reversed(range(len(grids))):
        calls += layer_calls(spec, grids[index], Op.WG, batch)
        if index:
            calls += layer_calls(spec, grids[index], Op.EB, batch)
    calls += [call for grid in grids for call in layer_calls(spec, grid, Op.UPD, batch)]
    stages = [stage for stage, _ in calls]
    kept = sum(int(np.sum(mask)) for mask in masks)
    first = int(np.sum(masks[0])) if masks else 0
    dense = sum(int(np.size(mask)) for mask in masks)
    dense_first = int(np.size(masks[0])) if masks else 0
    return stages, {"macs": (3 * kept - first) * batch, "dense_macs": (3 * dense - dense_first) * batch,
                    "calls": sum(count for _, count in calls), "stream_cycles": stream_cycles(stages)}


def csb_mac_energy_pj(spec: CsbSpec) -> float:
    """Energy of one CSB MAC (pJ): an 8 x 8-bit product into an ``acc_bits`` sum (45 nm table)."""
    return horowitz_45nm().int_mac(DATA_BITS, DATA_BITS, spec.acc_bits)


def csb_step_time(spec: CsbSpec, masks, batch: int, board: Board, *, clock_mhz: float, host: HostModel) -> StepTime:
    """The whole-step model of a fixed-point step of the CSB loop (kept weights ``masks``) on ``spec`` and ``board``."""
    stages, totals = csb_stages(spec, masks, batch)
    return step_time(stages, board, clock_mhz=clock_mhz, host_s=host.seconds(totals["calls"]),
                     host_source=host.source, macs=totals["macs"], array_macs=spec.batch * spec.parallel,
                     calls=totals["calls"], stream_cycles=totals["stream_cycles"],
                     mac_energy_pj=csb_mac_energy_pj(spec), dense_macs=totals["dense_macs"])


__all__ = ["block_nnz", "csb_mac_energy_pj", "csb_stages", "csb_step_time", "layer_calls", "transaction"]
