"""The whole-step model of a CSB training step on a ``csb`` build: the compressed MLP loop and conv networks.

A fixed-point step runs, per layer, FP (forward), WG (weight gradient), EB
(input error, all layers but the first) and UPD (the SGD update) on the
layer's pruned weights in CSB blocks. What the PE does depends on the kept
entries (for the MLP loop the masks its warm-up's pruning search kept,
:func:`codesign.loops.host_share.compressed_masks`; for a conv network the
golden trainer's kernel masks, :mod:`codesign.design.csb_conv`) and on the
build: its block shape cuts a mask into blocks, its lanes cut the batch into
chunks, and its output tile (``out_h x out_w``) cuts a conv layer's map into
tiles, whose inputs (with their halo) the host cuts out. The board's backend
(``codesign.deploy.csb_training.IpCsb``) sends, for FP, one IP call per
block column (every lane chunk's and tile's transactions on the column's
non-empty blocks, chained), for EB one per block row, for WG one per lane
chunk and tile (every non-empty block) and for UPD one call; each call is a
stage (:class:`codesign.step.time.Stage`), in the loop's order, its
cycles by the RTL-exact model of :mod:`codesign.pe.csb.cycles` and its words
by the stream format (:mod:`codesign.pe.csb.stream`).

A layer is a :class:`CsbLayer`: an FC layer is a 1 x 1 map with a kernel of
1. A 1 x 1 kernel on a build of a larger one runs under header ``K1`` (one tap
an entry, the kernel-1 tile: docs/csb.md, "Kernel 1"); another kernel smaller
than the build's sits at the centre of the build's taps (its other taps zero),
so it costs the build's ``k^2`` taps per entry.

The host's share: the loop's host work per fixed-point step (scales, ReLU,
softmax, shifts; for a conv network also batch norm, pooling and the tiles)
measured in a golden step less its PE operations, plus the encoding of
every transaction by the PE's own encoder, measured per transaction.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from codesign.boards import Board
from codesign.step.time import Stage, StepTime, step_time, stream_cycles
from codesign.energy.table import horowitz_45nm
from codesign.step.host import HostModel
from codesign.step.csb.schedule import block_nnz as mask_block_nnz
from codesign.pe.csb.spec import DATA_BITS, CsbSpec
from codesign.pe.csb.stream import Op, header_word
from codesign.step.list_pe import csb_phases, stall_free_cycles


@functools.lru_cache(maxsize=65536)
def transaction(spec: CsbSpec, op: Op, nnz: int, stride: int = 1, k1: bool = False) -> tuple[int, int, int]:
    """(cycles, words in, words out) of one accepted transaction of ``op`` on a block of ``nnz`` entries at
    ``stride`` (UPD: 1), under ``K1`` where ``k1``: the list cycle model's phases of its header
    (:func:`codesign.step.list_pe.csb_phases`), stall-free; the words 32-bit, a wide stream's beats' parts (the
    unused ones too: they move)."""
    phases, _, operands, results = csb_phases(spec, header_word(op, nnz, stride=stride, k1=k1))
    parts = spec.parts
    return stall_free_cycles(phases), parts * (1 + operands), parts + results


def block_nnz(mask: np.ndarray, spec: CsbSpec) -> np.ndarray:
    """Entries kept per block of ``mask`` (outputs x inputs) cut into ``block_rows x block_cols`` blocks."""
    return mask_block_nnz(np.asarray(mask, dtype=bool), spec.block_rows, spec.block_cols)


@dataclass(frozen=True, kw_only=True)
class CsbLayer:
    """One layer of a CSB step as the PE computes it.

    ``mask``: the kept entries (outputs x inputs; a conv's entry is a whole
    kernel). ``height x width``: the output map the PE steps over at stride 1
    (positions; 1 x 1 for an FC layer). ``stride`` 2 marks a k x k conv at
    stride 2 whose map this is at stride 1: a build with ``max_stride`` 2 steps
    over its ``ceil(height / 2) x ceil(width / 2)`` output map at stride 2
    (header ``S2``), one without computes the whole map at stride 1 for the
    host to subsample (four times the useful MACs). A stride-2 1 x 1 conv is
    a stride-1 layer on the map the host subsampled its input into. ``kernel``:
    the layer's own (at most the build's). ``positions``: the output positions
    per sample the layer needs (its MACs; default ``height * width``).
    """

    mask: np.ndarray
    height: int = 1
    width: int = 1
    kernel: int = 1
    positions: int = 0
    stride: int = 1

    def __post_init__(self) -> None:
        mask = np.asarray(self.mask, dtype=bool)
        if mask.ndim != 2 or 0 in mask.shape:
            raise ValueError(f"a layer's mask must be a non-empty outputs x inputs array, got shape {mask.shape}")
        object.__setattr__(self, "mask", mask)
        for name in ("height", "width", "kernel"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"a layer's {name} must be an int >= 1, got {value!r}")
        if self.stride not in (1, 2) or isinstance(self.stride, bool) or (self.stride == 2 and self.kernel == 1):
            raise ValueError(f"a layer's stride must be 1, or 2 for a kernel above 1; got {self.stride!r} "
                             f"(kernel {self.kernel})")
        if not self.positions:
            object.__setattr__(self, "positions", self.height * self.width)

    def runs_k1(self, spec: CsbSpec) -> bool:
        """Whether the PE runs the layer under ``K1``: a 1 x 1 kernel on a build of a larger one."""
        return self.kernel == 1 < spec.kernel

    def pe_stride(self, spec: CsbSpec) -> int:
        """The stride the PE steps at on ``spec``: the layer's, where the build runs it, else 1."""
        return self.stride if self.stride <= spec.max_stride else 1

    def tiles(self, spec: CsbSpec) -> int:
        """Output tiles of ``spec`` that cover the map the PE steps over; a kernel above the build's is refused."""
        if self.kernel > spec.kernel:
            raise ValueError(f"a {self.kernel} x {self.kernel} kernel does not fit a build of kernel {spec.kernel}")
        stride = self.pe_stride(spec)
        height, width = -(-self.height // stride), -(-self.width // stride)
        return -(-height // spec.out_h) * -(-width // spec.out_w)

    def macs(self, *, dense: bool = False) -> int:
        """MACs of one operation (FP, EB or WG) per sample: the kept kernels' (every kernel's when ``dense``)."""
        kernels = self.mask.size if dense else int(self.mask.sum())
        return kernels * self.kernel ** 2 * self.positions


def _call(spec: CsbSpec, op: Op, nnz_list, repeat: int = 1, stride: int = 1,
          k1: bool = False) -> tuple[Stage, int] | None:
    parts = [transaction(spec, op, int(nnz), stride, k1) for nnz in nnz_list if nnz] * repeat
    if not parts:
        return None
    return Stage(cycles=sum(p[0] for p in parts), words_in=sum(p[1] for p in parts),
                 words_out=sum(p[2] for p in parts)), len(parts)


def layer_calls(spec: CsbSpec, grid: np.ndarray, op: Op, batch: int, tiles: int = 1,
                stride: int = 1, k1: bool = False) -> list[tuple[Stage, int]]:
    """The IP calls of one op on a layer whose blocks keep ``grid`` entries, for ``batch`` samples on ``tiles``
    output tiles, FP, EB and WG at ``stride``, every op under ``K1`` where ``k1``."""
    repeat = -(-batch // spec.batch) * tiles
    if op == Op.FP:
        calls = [_call(spec, op, grid[:, col], repeat, stride, k1) for col in range(grid.shape[1])]
    elif op == Op.EB:
        calls = [_call(spec, op, grid[row, :], repeat, stride, k1) for row in range(grid.shape[0])]
    elif op == Op.WG:
        calls = [_call(spec, op, grid.reshape(-1), 1, stride, k1)] * repeat
    else:
        calls = [_call(spec, op, grid.reshape(-1), k1=k1)]
    return [call for call in calls if call is not None]


def as_layers(layers: Sequence[CsbLayer | np.ndarray]) -> list[CsbLayer]:
    """``layers`` as :class:`CsbLayer` records; a bare mask is an FC layer."""
    return [layer if isinstance(layer, CsbLayer) else CsbLayer(mask=layer) for layer in layers]


def csb_stages(spec: CsbSpec, layers: Sequence[CsbLayer | np.ndarray], batch: int
               ) -> tuple[list[Stage], dict[str, int]]:
    """Every stage of one fixed-point step on ``spec`` in the loop's order (FP per layer; from the last layer WG,
    then EB but on the first; UPD per layer), and the step's MACs (done, and ``dense_macs`` were nothing pruned),
    transactions and stream cycles. ``layers``: :class:`CsbLayer` records, or masks of FC layers."""
    layers = as_layers(layers)
    grids = [block_nnz(layer.mask, spec) for layer in layers]
    tiles = [layer.tiles(spec) for layer in layers]
    strides = [layer.pe_stride(spec) for layer in layers]
    k1s = [layer.runs_k1(spec) for layer in layers]
    calls = [call for grid, count, stride, k1 in zip(grids, tiles, strides, k1s)
             for call in layer_calls(spec, grid, Op.FP, batch, count, stride, k1)]
    for index in reversed(range(len(grids))):
        calls += layer_calls(spec, grids[index], Op.WG, batch, tiles[index], strides[index], k1s[index])
        if index:
            calls += layer_calls(spec, grids[index], Op.EB, batch, tiles[index], strides[index], k1s[index])
    calls += [call for grid, k1 in zip(grids, k1s) for call in layer_calls(spec, grid, Op.UPD, batch, k1=k1)]
    stages = [stage for stage, _ in calls]

    def step_macs(dense: bool) -> int:
        ops = sum(3 * layer.macs(dense=dense) for layer in layers) - (layers[0].macs(dense=dense) if layers else 0)
        return ops * batch

    return stages, {"macs": step_macs(False), "dense_macs": step_macs(True),
                    "calls": sum(count for _, count in calls),
                    "stream_cycles": -(-stream_cycles(stages) // spec.parts)}  # a beat of ``parts`` words a cycle


def csb_mac_energy_pj(spec: CsbSpec) -> float:
    """Energy of one CSB MAC (pJ): an 8 x 8-bit product into an ``acc_bits`` sum (45 nm table)."""
    return horowitz_45nm().int_mac(DATA_BITS, DATA_BITS, spec.acc_bits)


def csb_step_time(spec: CsbSpec, layers, batch: int, board: Board, *, clock_mhz: float, host: HostModel
                  ) -> StepTime:
    """The whole-step model of a fixed-point CSB step (``layers`` as :func:`csb_stages` takes them) on ``spec`` and
    ``board``."""
    stages, totals = csb_stages(spec, layers, batch)
    return step_time(stages, board, clock_mhz=clock_mhz, host_s=host.seconds(totals["calls"]),
                     host_source=host.source, macs=totals["macs"], array_macs=spec.batch * spec.parallel,
                     calls=totals["calls"], stream_cycles=totals["stream_cycles"],
                     mac_energy_pj=csb_mac_energy_pj(spec), dense_macs=totals["dense_macs"])


__all__ = ["CsbLayer", "as_layers", "block_nnz", "csb_mac_energy_pj", "csb_stages", "csb_step_time", "layer_calls", "transaction"]
