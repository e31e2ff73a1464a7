"""Compressed training on the board: :mod:`codesign.loops.csb` with its layer products on the CSB IP.

:class:`IpCsb` turns one FC layer operation into CSB transactions
(docs/csb.md, "The stream interface": header, index bytes, sections; status
word and results back) and runs them on a ``csb`` IP through its driver,
in the order of the golden layer schedules (:mod:`codesign.pe.csb.golden`),
so the results are bit-identical even where accumulators saturate:

- the batch goes through the PE in chunks of ``spec.batch`` lanes (the last
  one padded with zero lanes), input channels in ``block_cols`` tiles
  (zero-padded at a partial edge block);
- **FP** chains each block row's accumulator over its blocks in block
  column order: one IP call per block column, holding one transaction per
  (lane chunk, non-empty block of that column);
- **EB** reads the transposed view: one call per stored block row, chaining
  each stored block column's accumulator;
- **WG** chains every entry's gradient over the lane chunks: one call per
  chunk, one transaction per non-empty block;
- **UPD**: one call, one transaction per non-empty block.

Empty blocks are not sent: an operation with ``nnz = 0`` returns its
accumulator unchanged. A status other than 0 raises :class:`DeployError`
naming the operation and block.

:class:`CsbBoardTrainer` is :class:`codesign.loops.csb.CsbMlpTrainer`
on an :class:`IpCsb`: the host runs the float warm-up, the loss, the
power-of-two rescaling and the learning-rate schedule; the PL every layer
product of the fixed-point phase.
"""

from __future__ import annotations

import time
from collections import Counter

import numpy as np

from codesign.deploy.board import LoopOnBoard
from codesign.deploy.csb_list_training import CsbListBoardTrainer
from codesign.deploy.list_shell import one_ip_route, runs_lists
from codesign.deploy.driver import AccelIP
from codesign.deploy.families import BoardFamily
from codesign.deploy.manifest import DeployError, setup_from_manifest
from codesign.contracts.constants import STATUS_OK, status_names
from codesign.step.model import StageLog
from codesign.loops.common import HwTrainError
from codesign.loops.csb import CsbMlpTrainer, CsbTrainSetup
from codesign.loops.csb_lists import check_list_spec
from codesign.pe import transaction_cycles
from codesign.pe.csb.format import CSBMatrix
from codesign.pe.csb.spec import CsbSpec
from codesign.pe.csb import beats
from codesign.pe.csb.stream import Op, encode_transaction, result_count, transaction_sections

STATUS_NAMES = status_names("csb")


def _tile(array: np.ndarray, start: int, size: int) -> np.ndarray:
    """Rows ``start..start + size`` of a ``(channels, lanes)`` array, zero-padded to ``size``, as ``(size, 1, 1, lanes)``."""
    part = array[start:start + size]
    if part.shape[0] < size:
        part = np.concatenate([part, np.zeros((size - part.shape[0], part.shape[1]), np.int64)])
    return part[:, None, None, :]


class IpCsb:
    """FC layer operations on a csb IP (``driver.run``), block by block as the golden schedules chain them.

    Counts useful MACs per op (UPD: words updated), IP calls, host seconds,
    transactions, and the PE's clock cycles by the RTL cycle model
    (:func:`codesign.pe.transaction_cycles`: the PE's stream only,
    without the shell's DDR transfers).
    """

    def __init__(self, driver: AccelIP, spec: CsbSpec) -> None:
        if getattr(driver, "pe", None) not in (None, "csb"):
            raise DeployError(f"IP {driver.ip_name} is a {driver.pe} PE, not csb")
        if (spec.kernel, spec.out_h, spec.out_w) != (1, 1, 1):
            raise DeployError(f"IpCsb runs FC layers: the IP needs kernel 1 and a 1 x 1 tile, its spec is {spec}")
        self.driver, self.spec = driver, spec
        self.macs: Counter = Counter()
        self.calls, self.seconds, self.pe_cycles, self.transactions = 0, 0.0, 0, 0
        self.stages = StageLog()  # one stage per IP call
        self._cycle_cache: dict[tuple[int, int], int] = {}

    # -- one IP call

    def _run(self, op: Op, batch: list[tuple[np.ndarray, int, str]]) -> list[np.ndarray]:
        """Send the transactions ``(words, nnz, what)`` in one call; return each one's result words (int64). On a
        wide stream each goes as its beats (:mod:`codesign.pe.csb.beats`): the status a beat, the results
        ``parts`` to a beat."""
        if not batch:
            return []
        parts = self.spec.parts
        counts = [result_count(self.spec, op, nnz) for _, nnz, _ in batch]
        lengths = [parts + beats.padded(count, parts) for count in counts]
        streams = [beats.widen(words, transaction_sections(self.spec, int(words[0])), parts) for words, _, _ in batch]
        words = np.concatenate(streams).astype(np.uint32)
        out = self.driver.run(words, sum(lengths), len(batch))
        self.calls += 1
        self.transactions += len(batch)
        cycles = sum(self._cycles(stream) for stream in streams)
        self.pe_cycles += cycles
        self.stages.add(cycles, words.size, sum(lengths))
        results, at = [], 0
        for (_, _, what), length, count in zip(batch, lengths, counts):
            status = int(out[at])
            if status != STATUS_OK:
                raise DeployError(f"IP {self.driver.ip_name} refused {op.name} on {what}: status {status} "
                                  f"({STATUS_NAMES.get(status, 'unknown')})")
            results.append(out[at + parts:at + parts + count].view(np.int32).astype(np.int64))
            at += length
        return results

    def _cycles(self, words: np.ndarray) -> int:
        """PE cycles of one transaction; they depend on its header and length only (its indices are checked
        when it is encoded), so they are computed once per (header, length)."""
        key = (int(words[0]), int(words.size))
        if key not in self._cycle_cache:
            self._cycle_cache[key] = transaction_cycles("csb", self.spec, words)
        return self._cycle_cache[key]

    def _chunks(self, n: int) -> list[int]:
        return list(range(0, n, self.spec.batch))

    def _lanes(self, array: np.ndarray, lo: int) -> np.ndarray:
        """``(channels, spec.batch)``: samples ``lo..lo + batch`` of an ``(n, channels)`` array, zero lanes padded."""
        part = np.asarray(array[lo:lo + self.spec.batch], dtype=np.int64).T
        pad = self.spec.batch - part.shape[1]
        return np.concatenate([part, np.zeros((part.shape[0], pad), np.int64)], axis=1) if pad else part

    # -- the four layer operations

    def _chained(self, csb: CSBMatrix, data: np.ndarray, op: Op) -> np.ndarray:
        """FP on ``csb`` or EB on its transpose: results ``(n, out channels)``, accumulators chained per block row."""
        started = time.perf_counter()
        spec = self.spec
        view = csb if op == Op.FP else csb.transpose_view()
        out_channels = view.view_shape[0]
        out_size, in_size = view.view_block
        n = data.shape[0]
        steps: dict[int, list] = {}  # view block column -> its blocks, in view order
        for block in view.blocks():
            if block.nnz:
                steps.setdefault(block.col, []).append(block)
        lanes = {lo: self._lanes(data, lo) for lo in self._chunks(n)}
        acc = {(lo, row): np.zeros((out_size, 1, 1, spec.batch), np.int64)
               for lo in lanes for row in range(view.block_grid[1 if view.transposed else 0])}
        for col in sorted(steps):
            batch, keys = [], []
            for lo, chunk in lanes.items():
                tile = _tile(chunk, col * in_size, in_size)
                for block in steps[col]:
                    operand = {"x": tile} if op == Op.FP else {"dy": tile}
                    words = encode_transaction(spec, op, index=block.index, weights=block.values,
                                               acc=acc[(lo, block.row)], **operand)
                    batch.append((words, block.nnz, f"block ({block.row}, {block.col}) of the "
                                                    f"{'transposed ' if view.transposed else ''}{view.view_shape} view"))
                    keys.append((lo, block.row))
            for key, result in zip(keys, self._run(op, batch)):
                acc[key] = result.reshape(out_size, 1, 1, spec.batch)
        result = np.zeros((n, out_channels), np.int64)
        for (lo, row), value in acc.items():
            start, stop = row * out_size, min((row + 1) * out_size, out_channels)
            count = min(spec.batch, n - lo)
            result[lo:lo + count, start:stop] = value[:stop - start, 0, 0, :count].T
        self.macs[op.name] += csb.nnz * n
        self.seconds += time.perf_counter() - started
        return result.astype(np.int32)

    def forward(self, csb: CSBMatrix, x: np.ndarray) -> np.ndarray:
        return self._chained(csb, np.asarray(x), Op.FP)

    def backward_error(self, csb: CSBMatrix, dy: np.ndarray) -> np.ndarray:
        return self._chained(csb, np.asarray(dy), Op.EB)

    def weight_grad(self, csb: CSBMatrix, x: np.ndarray, dy: np.ndarray) -> np.ndarray:
        started = time.perf_counter()
        spec = self.spec
        x, dy = np.asarray(x), np.asarray(dy)
        grads = np.zeros(csb.nnz, np.int64)
        blocks = [block for block in csb.blocks() if block.nnz]
        for lo in self._chunks(x.shape[0]):
            x_lanes, dy_lanes = self._lanes(x, lo), self._lanes(dy, lo)
            batch = [(encode_transaction(spec, Op.WG, index=block.index,
                                         x=_tile(x_lanes, block.col * spec.block_cols, spec.block_cols),
                                         dy=_tile(dy_lanes, block.row * spec.block_rows, spec.block_rows),
                                         grads=grads[block.entries].reshape(-1, 1, 1)),
                      block.nnz, f"block ({block.row}, {block.col}), lanes {lo}..")
                     for block in blocks]
            for block, result in zip(blocks, self._run(Op.WG, batch)):
                grads[block.entries] = result
        self.macs["WG"] += csb.nnz * x.shape[0]
        self.seconds += time.perf_counter() - started
        return grads

    def update(self, csb: CSBMatrix, buffer: np.ndarray, grads: np.ndarray, shift: int) -> np.ndarray:
        started = time.perf_counter()
        buffer, grads = np.asarray(buffer, np.int64), np.asarray(grads, np.int64)
        blocks = [block for block in csb.blocks() if block.nnz]
        batch = [(encode_transaction(self.spec, Op.UPD, index=block.index, shift=shift,
                                     buffer=buffer[block.entries].reshape(-1, 1, 1),
                                     grads=grads[block.entries].reshape(-1, 1, 1)),
                  block.nnz, f"block ({block.row}, {block.col})") for block in blocks]
        out = buffer.copy()
        for block, result in zip(blocks, self._run(Op.UPD, batch)):
            out[block.entries] = result
        self.macs["UPD"] += csb.nnz
        self.seconds += time.perf_counter() - started
        return out


class CsbBoardTrainer(LoopOnBoard, CsbMlpTrainer):
    """The compressed design-point loop with every fixed-point layer product on the overlay's csb IP."""

    family, setup_class, backend_class = "csb", CsbTrainSetup, IpCsb  # see LoopOnBoard

    def backend_figures(self) -> dict[str, int]:
        return {"transactions": self.ip_backend.transactions}


def _measure_host(setup: CsbTrainSetup, *, source: str, data):
    from codesign.loops.host_share import compressed_masks, measure_csb_host

    return measure_csb_host(compressed_masks(setup, data), source=source)


def csb_board_trainer(overlay, design=None, **setup_changes):
    """The CSB family's board trainer for ``overlay``: every fixed-point step as call lists
    (:class:`codesign.deploy.csb_list_training.CsbListBoardTrainer`: weights encoded on the device once per
    pruning event, UPD on the PE) where the build has the square blocks and the lanes the lists need and the IP runs
    them (:func:`codesign.deploy.list_shell.runs_lists`), on all its csb IPs; else :class:`CsbBoardTrainer`, one IP
    call per layer operation on the one csb IP (copies of it are refused: only lists share a step)."""
    setup = setup_from_manifest(overlay.manifest, CsbTrainSetup, setup_changes)
    try:
        check_list_spec(setup.spec)
        lists = runs_lists(overlay, "csb")
    except HwTrainError:
        lists = False
    if lists:
        return CsbListBoardTrainer(overlay, design, **setup_changes)
    one_ip_route(overlay, "csb", "an HLS export, or a build the lists refuse")
    return CsbBoardTrainer(overlay, design, **setup_changes)


# a short run of the whole path: the float warm-up, the pruning search and the fixed-point phase in two epochs,
# at a constant rate (a cosine over two short epochs would reach 0)
FAMILY = BoardFamily(key="csb", board=csb_board_trainer, golden=CsbMlpTrainer, setup=CsbTrainSetup,
                     state_keys=("buffers", "masks"), example="digits_compressed_mlp.toml",
                     quick_changes={"epochs": 2, "warmup_epochs": 1, "schedule": "constant"},
                     measure_host=_measure_host, host_needs_data=True)
