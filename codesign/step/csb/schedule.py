"""Layer-level schedule model of the CSB accelerator: one layer operation on an array of PEs (paper 002, Sec. 5.5).

Why a model and not a simulation: the utilisation question of the paper
(Table 3, Fig. 12) is about *which PE waits for which* when kernel-wise sparse
weight blocks carry unequal work, and about whether the memory can feed the
array (Table 4's bound type). Both follow from block sizes, non-zero counts and
transfer sizes; no data values are needed.

The model, in the paper's terms:

* **Work.** A layer's weight is a ``out_channels x in_channels`` matrix of
  entries (a whole ``k x k`` kernel each), cut into ``block_rows x
  block_cols`` blocks as stored by CSB (``docs/csb.md``). The feature map is
  cut into output tiles of ``tile_h x tile_w`` positions (the PE's buffers).
  A *unit* is one PE (``grouping="single"``, ``P = 1``) or a 2x2 group of PEs
  sharing one weight stream (``grouping="2x2"``, ``P = 4``, Fig. 7). A unit's
  *item* is one tile and one block of output channels of the operation; it
  runs the blocks of that row one after the other ("steps") and accumulates in
  its result buffer until all input channels are processed (Sec. 5.5). For FP
  and WG the items are block rows and the steps block columns; EB reads the
  transposed matrix (Sec. 5.2), so its items are block columns and its steps
  block rows.
* **Passes.** Items are dealt to units in order (tile-major, then block row);
  ``n_units`` consecutive items form a pass, and in a pass all units walk the
  same steps, i.e. the same input channels, on different output channels
  (Sec. 5.5: "all the PEs will work with the same input channels/neurons, on
  different output channels/neurons").
* **Compute.** One step of a unit costs one cycle per MAC step of each MAC
  group, as the PE steps (:mod:`codesign.pe.csb.cycles`): ``nnz*k^2*ceil(OUT_POS/P)``
  cycles for FP, EB and WG alike, with ``nnz`` the kernels stored in that block
  and the positions those of the item's tile.
* **Memory** (Sec. 5.5). *Common load*: per step, the shared operand of the
  step for every tile in the pass (FP and WG: the input feature map of the
  step's input channels, ``block_cols*IN_POS*batch`` bytes; EB: the output
  error of the step's output channels, ``block_rows*OUT_POS*batch`` bytes).
  *Local load*: per unit and step, the block's index bytes and 8-bit weights
  (FP, EB: ``nnz + nnz*k^2`` bytes); for WG the index and the 24-bit weight
  buffer words (``nnz + 3*nnz*k^2``) plus, on the first step of an item, the
  item's output error (``block_rows*OUT_POS*batch``). *Save*: FP, EB the
  item's 8-bit result at its end (``rows*OUT_POS*batch`` resp.
  ``cols*IN_POS*batch`` bytes); WG the block's updated 24-bit buffer words
  after each step (``3*nnz*k^2``). A transfer of ``n`` bytes takes
  ``ceil(n / bandwidth)`` cycles; loads go one after the other over one read
  port (common load of a step, then the units' local loads in unit order),
  saves over a write port of the same bandwidth.
* **Overlap** (Fig. 9). Loads, calculations and saves run in parallel, limited
  by buffers: every unit's weight buffer and result buffer are ping-pong (two
  slots; Sec. 5.2), the common buffer has ``common_slots`` slots shared by all
  units, so a unit can run at most ``common_slots - 1`` steps ahead of the
  slowest unit (steps counted over the whole layer, passes one after the
  other). A depth beyond the layer's steps keeps every common operand on
  chip and no unit ever waits for another.

Outputs: the layer's cycles, the cycles of each phase, utilisation (useful
MACs / (cycles * MAC units)), the same with unlimited bandwidth (the
imbalance-only figure of Table 3), and the bound type: compute-bound when the
array needs at least as many cycles to compute (with unlimited bandwidth) as
the memory needs to move the layer's reads (or writes); the Sec. 5.5
inequality ``T_calc > T_load_common + T_load_local * N`` on per-step means is
reported beside it.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from fractions import Fraction

import numpy as np

from codesign.numerics.records import keyword_record

OPS = ("FP", "EB", "WG")
GROUPINGS = {"single": 1, "2x2": 4}  # MAC groups per unit (P); a 2x2 unit is four PEs
BUFFER_WORD_BYTES = 3  # 24-bit weight-buffer words moved by WG (docs/csb.md, Numbers)
MAX_BLOCK = 16  # the {y[3:0], x[3:0]} index byte bounds a block at 16 x 16
MAX_KERNEL = 7


def _check_int(name: str, value: object, low: int, high: int | None = None) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise ValueError(f"{name} must be an int, got {value!r}")
    if value < low or (high is not None and value > high):
        bound = f"[{low}, {high}]" if high is not None else f">= {low}"
        raise ValueError(f"{name}={value} is out of range {bound}")


@keyword_record
class LayerShape:
    """One CONV (``kernel`` > 1) or FC (``kernel`` = 1, ``height`` = ``width`` = 1) layer.

    ``height`` x ``width`` is the output feature map (positions); the layer is
    'same'-padded, so its useful MACs per sample are
    ``height*width*kernel^2*in_channels*out_channels`` (paper Table 3's workload
    counts two operations per MAC).
    """

    name: str
    in_channels: int
    out_channels: int
    height: int
    width: int
    kernel: int

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ValueError(f"name must be a non-empty string, got {self.name!r}")
        for field in ("in_channels", "out_channels", "height", "width"):
            _check_int(field, getattr(self, field), 1)
        _check_int("kernel", self.kernel, 1, MAX_KERNEL)

    @property
    def dense_macs(self) -> int:
        """MACs of one sample with every kernel kept."""
        return self.height * self.width * self.kernel ** 2 * self.in_channels * self.out_channels

    def to_dict(self) -> dict:
        return asdict(self)


@keyword_record
class ArraySpec:
    """The PE array: ``n_pe`` PEs of ``batch`` MAC lanes, used as single PEs or as 2x2 groups.

    ``bandwidth`` is bytes per cycle of each memory port (``math.inf``: loads
    and saves take no time, the imbalance-only case). ``tile_h x tile_w`` is a
    unit's output tile (positions). ``common_slots`` is the depth of the
    common-operand buffer in steps (2: ping-pong).
    """

    n_pe: int
    grouping: str = "single"
    block_rows: int = 16
    block_cols: int = 16
    tile_h: int = 16
    tile_w: int = 16
    batch: int = 16
    bandwidth: float = math.inf
    common_slots: int = 2

    def __post_init__(self) -> None:
        _check_int("n_pe", self.n_pe, 1, 1 << 16)
        if self.grouping not in GROUPINGS:
            raise ValueError(f"grouping={self.grouping!r} is not one of {', '.join(GROUPINGS)}")
        if self.n_pe % GROUPINGS[self.grouping]:
            raise ValueError(f"n_pe={self.n_pe} is not a multiple of {GROUPINGS[self.grouping]} "
                             f"(grouping {self.grouping})")
        _check_int("block_rows", self.block_rows, 1, MAX_BLOCK)
        _check_int("block_cols", self.block_cols, 1, MAX_BLOCK)
        _check_int("tile_h", self.tile_h, 1, 1 << 12)
        _check_int("tile_w", self.tile_w, 1, 1 << 12)
        _check_int("batch", self.batch, 1, 16)
        _check_int("common_slots", self.common_slots, 1)
        if isinstance(self.bandwidth, bool) or not isinstance(self.bandwidth, (int, float)):
            raise ValueError(f"bandwidth must be a number of bytes per cycle, got {self.bandwidth!r}")
        if math.isnan(self.bandwidth) or self.bandwidth <= 0:
            raise ValueError(f"bandwidth={self.bandwidth} must be > 0 bytes per cycle (math.inf for unlimited)")

    @property
    def parallel(self) -> int:
        """MAC groups of one unit (P)."""
        return GROUPINGS[self.grouping]

    @property
    def n_units(self) -> int:
        """Units that take weight blocks independently (PEs or 2x2 groups)."""
        return self.n_pe // self.parallel

    def to_dict(self) -> dict:
        return asdict(self)


@keyword_record
class ScheduleResult:
    """Cycles and utilisation of one layer operation; every ``*_cycles`` is in clock cycles."""

    op: str
    cycles: int  # makespan at the given bandwidth
    compute_cycles: int  # makespan with unlimited bandwidth (imbalance only)
    common_load_cycles: int  # read port busy with common loads
    local_load_cycles: int  # read port busy with local loads
    calc_cycles: int  # sum over units of busy compute cycles
    save_cycles: int  # write port busy
    read_bytes: int
    write_bytes: int
    useful_macs: int  # lane MACs of the layer's stored kernels (all samples of the batch)
    mac_units: int  # n_pe * batch
    utilisation: float
    compute_utilisation: float  # at unlimited bandwidth
    bound: str  # "compute" or "bandwidth"
    sec55_compute_bound: bool  # T_calc > T_load_common + T_load_local * n_units on per-step means
    t_calc: float  # mean cycles of one unit's step (blocks with kernels)
    t_load_common: float  # mean common-load cycles of one step of a pass
    t_load_local: float  # mean local-load cycles of one block
    n_units: int
    passes: int
    steps: int  # steps per pass

    def to_dict(self) -> dict:
        return asdict(self)


def random_keep_mask(layer: LayerShape, density: float, seed: int) -> np.ndarray:
    """Kernel-wise pruning pattern: exactly ``round(density * entries)`` kernels (at least one) kept at random.

    Returns a bool ``out_channels x in_channels`` array (True = kernel kept).
    The exact count keeps the useful work of a layer fixed across seeds, so
    seeds only move *where* the kernels are.
    """
    if not isinstance(layer, LayerShape):
        raise ValueError("layer must be a LayerShape")
    if isinstance(density, bool) or not isinstance(density, (int, float)) or not 0 < density <= 1:
        raise ValueError(f"density={density!r} must be in (0, 1]")
    _check_int("seed", seed, 0)
    entries = layer.out_channels * layer.in_channels
    kept = max(1, round(density * entries))
    flat = np.zeros(entries, dtype=bool)
    flat[np.random.default_rng(seed).choice(entries, size=kept, replace=False)] = True
    return flat.reshape(layer.out_channels, layer.in_channels)


def block_nnz(keep: np.ndarray, block_rows: int, block_cols: int) -> np.ndarray:
    """Kernels stored per CSB block: an int64 ``ceil(rows/block_rows) x ceil(cols/block_cols)`` array.

    Partial last blocks count only their real entries (``docs/csb.md``: the
    last block row/column may be partial).
    """
    keep = np.asarray(keep)
    if keep.ndim != 2 or keep.dtype != bool:
        raise ValueError(f"keep must be a 2-D bool array, got {keep.dtype} of shape {keep.shape}")
    _check_int("block_rows", block_rows, 1, MAX_BLOCK)
    _check_int("block_cols", block_cols, 1, MAX_BLOCK)
    rows, cols = keep.shape
    n_r, n_c = -(-rows // block_rows), -(-cols // block_cols)
    padded = np.zeros((n_r * block_rows, n_c * block_cols), dtype=np.int64)
    padded[:rows, :cols] = keep
    return padded.reshape(n_r, block_rows, n_c, block_cols).sum(axis=(1, 3))


def _tiles(size: int, tile: int) -> np.ndarray:
    """Lengths of the tiles cutting ``size`` positions into pieces of at most ``tile``."""
    full, rest = divmod(size, tile)
    return np.array([tile] * full + ([rest] if rest else []), dtype=np.int64)


def _edges(size: int, block: int) -> np.ndarray:
    """Entries of each block along one matrix dimension (the last may be partial)."""
    return np.minimum(block, size - block * np.arange(-(-size // block), dtype=np.int64))


def _transfer(bytes_: np.ndarray, bandwidth: float) -> np.ndarray:
    """Cycles of each transfer: ``ceil(bytes / bandwidth)``, 0 with unlimited bandwidth.

    The bandwidth is read as the nearest fraction ``p/q`` with ``q <= 2^16`` and
    the ceiling taken in integers, so 3 bytes at 0.1 byte/cycle are 30 cycles,
    not the 31 a floating-point quotient (30.000000000000004) would give.
    """
    if math.isinf(bandwidth):
        return np.zeros_like(bytes_)
    ratio = Fraction(bandwidth).limit_denominator(1 << 16)
    return -(-(bytes_ * ratio.denominator) // ratio.numerator)


def _serial_port(start: int, ready: np.ndarray, duration: np.ndarray) -> np.ndarray:
    """End times of transfers issued in order on one port: ``end_u = max(end_{u-1}, ready_u) + duration_u``.

    Closed form ``end_u = S_u + max(start, max_{j<=u}(ready_j - S_{j-1}))`` with
    ``S`` the running sum of durations, so a step's transfers need no Python loop.
    """
    total = np.cumsum(duration)
    return total + np.maximum(start, np.maximum.accumulate(ready - (total - duration)))


@dataclass(frozen=True)
class _Plan:
    """Per global step ``g`` (pass-major) and unit ``u``: what happens, in cycles and bytes."""

    calc: np.ndarray  # (G, U) compute cycles
    local: np.ndarray  # (G, U) local-load bytes
    common: np.ndarray  # (G,) common-load bytes
    save: np.ndarray  # (G, U) bytes saved after the step's calculation
    new_result: np.ndarray  # (G, U) the step starts a new result (needs a free result-buffer slot)
    useful_macs: int
    passes: int
    steps: int


def _plan(layer: LayerShape, array: ArraySpec, op: str, nnz: np.ndarray) -> _Plan:
    """Lay the operation's items out over passes, steps and units."""
    k2, P, b = layer.kernel ** 2, array.parallel, array.batch
    out_h, out_w = _tiles(layer.height, array.tile_h), _tiles(layer.width, array.tile_w)
    out_pos = np.outer(out_h, out_w).ravel()
    in_pos = np.outer(out_h + layer.kernel - 1, out_w + layer.kernel - 1).ravel()
    rows = _edges(layer.out_channels, array.block_rows)  # entries of each block row
    cols = _edges(layer.in_channels, array.block_cols)
    if op == "EB":  # transposed access: items are block columns, steps block rows
        work, item_size, step_size = nnz.T, cols, rows
    else:
        work, item_size, step_size = nnz, rows, cols
    n_items_per_tile, steps = work.shape
    tiles = out_pos.size
    n_items = tiles * n_items_per_tile
    U = array.n_units
    passes = -(-n_items // U)
    item_tile = np.full(passes * U, -1, dtype=np.int64)
    item_row = np.full(passes * U, -1, dtype=np.int64)
    item_tile[:n_items] = np.repeat(np.arange(tiles), n_items_per_tile)
    item_row[:n_items] = np.tile(np.arange(n_items_per_tile), tiles)
    item_tile, item_row = item_tile.reshape(passes, U), item_row.reshape(passes, U)
    active = item_tile >= 0
    t_idx, r_idx = np.where(active, item_tile, 0), np.where(active, item_row, 0)

    # (passes, steps, U): kernels of the block each unit runs at each step
    kernels = np.where(active[:, None, :], work[r_idx].transpose(0, 2, 1), 0)
    positions_out = out_pos[t_idx][:, None, :]
    calc = kernels * k2 * (-(-positions_out // P))  # FP, EB and WG all step over the output positions
    useful = int((kernels * k2 * positions_out).sum()) * b

    if op == "WG":
        local = kernels + BUFFER_WORD_BYTES * kernels * k2
        first = np.zeros_like(local)
        first[:, 0, :] = np.where(active, item_size[r_idx] * out_pos[t_idx] * b, 0)
        local = local + first
        save = BUFFER_WORD_BYTES * kernels * k2
        new_result = kernels > 0
    else:
        local = kernels * (1 + k2)
        save = np.zeros_like(kernels)
        result_positions = in_pos if op == "EB" else out_pos
        save[:, -1, :] = np.where(active, item_size[r_idx] * result_positions[t_idx] * b, 0)
        new_result = np.zeros(kernels.shape, dtype=bool)
        new_result[:, 0, :] = active

    # common operand of a step: one copy per distinct tile of the pass
    common_positions = out_pos if op == "EB" else in_pos
    common = np.zeros((passes, steps), dtype=np.int64)
    for p in range(passes):
        for t in np.unique(item_tile[p][active[p]]):
            common[p] += step_size * common_positions[t] * b
    G = passes * steps
    return _Plan(calc=calc.reshape(G, U), local=local.reshape(G, U), common=common.reshape(G),
                 save=save.reshape(G, U), new_result=new_result.reshape(G, U), useful_macs=useful,
                 passes=passes, steps=steps)


def _makespan(plan: _Plan, bandwidth: float, common_slots: int) -> tuple[int, np.ndarray, np.ndarray, np.ndarray]:
    """Event times of the schedule; returns (makespan, local cycles, common cycles, save cycles)."""
    local_c = _transfer(plan.local, bandwidth)
    common_c = _transfer(plan.common, bandwidth)
    save_c = _transfer(plan.save, bandwidth)
    G, U = plan.calc.shape
    calc_end = np.zeros((G, U), dtype=np.int64)
    all_done = np.zeros(G, dtype=np.int64)  # every unit's calculation of step g finished
    read_port = write_port = 0
    last_save = np.zeros(U, dtype=np.int64)  # result-buffer slots: save end of the latest result
    prior_save = np.zeros(U, dtype=np.int64)  # ... and of the one before (its slot is reused next)
    previous = np.zeros(U, dtype=np.int64)
    zero = np.zeros(U, dtype=np.int64)
    for g in range(G):
        common_start = max(read_port, all_done[g - common_slots] if g >= common_slots else 0)
        common_end = common_start + int(common_c[g])
        read_port = common_end
        has_load = local_c[g] > 0
        slot_free = calc_end[g - 2] if g >= 2 else zero
        load_end = _serial_port(read_port, np.where(has_load, slot_free, 0), local_c[g])
        if has_load.any():
            read_port = int(load_end[-1])
        start = np.maximum(previous, np.where(has_load, load_end, 0))
        start = np.maximum(start, common_end)
        start = np.maximum(start, np.where(plan.new_result[g], prior_save, 0))
        end = start + plan.calc[g]
        calc_end[g] = end
        all_done[g] = end.max()
        previous = end
        saving = save_c[g] > 0
        if saving.any():
            save_end = _serial_port(write_port, np.where(saving, end, 0), save_c[g])
            write_port = int(save_end[-1])
            prior_save = np.where(saving, last_save, prior_save)
            last_save = np.where(saving, save_end, last_save)
    makespan = max(int(calc_end.max(initial=0)), write_port, read_port)
    return makespan, local_c, common_c, save_c


def schedule_layer(layer: LayerShape, array: ArraySpec, op: str, keep: np.ndarray) -> ScheduleResult:
    """Cycles, utilisation and bound type of operation ``op`` (FP, EB or WG) of ``layer`` on ``array``.

    ``keep`` is the kernel-wise pruning pattern, a bool ``out_channels x
    in_channels`` array (see :func:`random_keep_mask`); its block non-zero
    counts are those of the layer's CSB storage.
    """
    if not isinstance(layer, LayerShape):
        raise ValueError("layer must be a LayerShape")
    if not isinstance(array, ArraySpec):
        raise ValueError("array must be an ArraySpec")
    if op not in OPS:
        raise ValueError(f"op={op!r} is not one of {', '.join(OPS)}")
    keep = np.asarray(keep)
    if keep.dtype != bool or keep.shape != (layer.out_channels, layer.in_channels):
        raise ValueError(f"keep must be a bool array of shape {(layer.out_channels, layer.in_channels)} "
                         f"(out_channels x in_channels), got {keep.dtype} of shape {keep.shape}")
    if not keep.any():
        raise ValueError("keep has no kernel: a layer with nothing stored has no schedule")
    plan = _plan(layer, array, op, block_nnz(keep, array.block_rows, array.block_cols))
    cycles, local_c, common_c, save_c = _makespan(plan, array.bandwidth, array.common_slots)
    compute_cycles = cycles if math.isinf(array.bandwidth) else _makespan(plan, math.inf, array.common_slots)[0]
    mac_units = array.n_pe * array.batch
    read_cycles = int(local_c.sum() + common_c.sum())
    write_cycles = int(save_c.sum())
    busy = plan.calc > 0
    t_calc = float(plan.calc[busy].mean()) if busy.any() else 0.0
    t_local = float(local_c[busy].mean()) if busy.any() else 0.0
    t_common = float(common_c.mean())
    return ScheduleResult(
        op=op, cycles=cycles, compute_cycles=compute_cycles,
        common_load_cycles=int(common_c.sum()), local_load_cycles=int(local_c.sum()),
        calc_cycles=int(plan.calc.sum()), save_cycles=write_cycles,
        read_bytes=int(plan.local.sum() + plan.common.sum()), write_bytes=int(plan.save.sum()),
        useful_macs=plan.useful_macs, mac_units=mac_units,
        utilisation=plan.useful_macs / (cycles * mac_units),
        compute_utilisation=plan.useful_macs / (compute_cycles * mac_units),
        bound="compute" if compute_cycles >= max(read_cycles, write_cycles) else "bandwidth",
        sec55_compute_bound=t_calc > t_common + t_local * array.n_units,
        t_calc=t_calc, t_load_common=t_common, t_load_local=t_local,
        n_units=array.n_units, passes=plan.passes, steps=plan.steps,
    )


__all__ = ["ArraySpec", "GROUPINGS", "LayerShape", "OPS", "ScheduleResult", "block_nnz", "random_keep_mask",
           "schedule_layer"]
