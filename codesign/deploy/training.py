"""Training on the board: the design-point loop of :mod:`codesign.loops.fb` with its GEMMs on the IP.

:class:`IpGemm` turns one layer GEMM into FP-MAC array transactions
(docs/fpmac_array.md: header word, ``A``, ``B``, optional ``C_in``; status
word and ``C`` back) and runs them on an ``fpmac_array`` IP through its
driver. A GEMM larger than the IP's buffers is tiled: ``M`` and ``N`` in
tiles of at most ``max_m`` x ``max_n`` (independent transactions, one IP call
for all of them), ``K`` in chunks of at most ``max_k`` chained through
``C_in`` (one call per chunk). The FP-MAC accumulates every output in ``k``
order from ``C_in``, and a container holds the accumulator exactly, so the
tiled GEMM is bit-identical to the untiled golden one.

:class:`BoardTrainer` is :class:`codesign.loops.fb.FbMlpTrainer` on an
:class:`IpGemm`: the host does the loss and the optimiser, the PL the layer
GEMMs; ``load_weights``, ``read_weights``, ``train_step``, ``fit``,
``predict`` and ``throughput`` are the golden loop's.

The family trains on the board as call lists
(:class:`codesign.deploy.fb_list_training.FbListBoardTrainer`: the state on
the device, the update on the PE) wherever its IP runs lists
(:func:`fb_board_trainer`); :class:`BoardTrainer`, one IP call per GEMM with
the host between them, trains a Vitis HLS export, and is the path the
explorer's per-call step model and the host-share measurement describe.
"""

from __future__ import annotations

import time
from collections import Counter

import numpy as np

from codesign.deploy.board import LoopOnBoard
from codesign.deploy.driver import AccelIP
from codesign.deploy.families import BoardFamily
from codesign.deploy.fb_list_training import FbListBoardTrainer
from codesign.deploy.list_shell import one_ip_route, runs_lists
from codesign.deploy.manifest import DeployError
from codesign.contracts.constants import STATUS_OK, status_names
from codesign.step.model import StageLog
from codesign.loops.fb import FbMlpTrainer, HwTrainSetup
from codesign.pe import transaction_cycles
from codesign.pe.fpmac_array.golden import words as transaction_words
from codesign.pe.fpmac_array.spec import FpmacArraySpec

STATUS_NAMES = status_names("fpmac_array")


def _spans(total: int, step: int) -> list[tuple[int, int]]:
    return [(start, min(start + step, total)) for start in range(0, total, step)]


class IpGemm:
    """Layer GEMMs on an fpmac_array IP (``driver.run``), tiled to its buffers.

    Counts MACs per FB, IP calls, host seconds, and the PE's clock cycles
    by the RTL cycle model (:func:`codesign.pe.transaction_cycles`:
    the PE's stream only, without the shell's DDR transfers).
    """

    def __init__(self, driver: AccelIP, spec: FpmacArraySpec) -> None:
        if getattr(driver, "pe", None) not in (None, "fpmac_array"):
            raise DeployError(f"IP {driver.ip_name} is a {driver.pe} PE, not fpmac_array")
        self.driver, self.spec = driver, spec
        self.macs: Counter = Counter()
        self.calls, self.seconds, self.pe_cycles = 0, 0.0, 0
        self.stages = StageLog()  # one stage per IP call

    def __call__(self, a, b, c=None, *, fb: int, trans_a: bool = False, trans_b: bool = False) -> np.ndarray:
        started = time.perf_counter()
        a, b = np.asarray(a, dtype=np.uint64), np.asarray(b, dtype=np.uint64)
        (m, k), n = a.shape, b.shape[1]
        if b.shape[0] != k:
            raise ValueError(f"inner dimensions differ: a {a.shape}, b {b.shape}")
        acc = None if c is None else np.asarray(c, dtype=np.uint64)
        tiles = [(rows, cols) for rows in _spans(m, self.spec.max_m) for cols in _spans(n, self.spec.max_n)]
        for k0, k1 in _spans(k, self.spec.max_k):
            stream = [transaction_words(self.spec, a[r0:r1, k0:k1], b[k0:k1, c0:c1],
                                        None if acc is None else acc[r0:r1, c0:c1], fb=fb, trans_a=trans_a,
                                        trans_b=trans_b)
                      for (r0, r1), (c0, c1) in tiles]
            n_out = sum(1 + (r1 - r0) * (c1 - c0) for (r0, r1), (c0, c1) in tiles)
            words_in = np.concatenate(stream).astype(np.uint32)
            out = self.driver.run(words_in, n_out, len(tiles))
            cycles = sum(transaction_cycles("fpmac_array", self.spec, words) for words in stream)
            self.pe_cycles += cycles
            self.stages.add(cycles, words_in.size, n_out)
            self.calls += 1
            acc = self._unpack(out, tiles, (m, n), fb)
        self.macs[fb] += m * n * k
        self.seconds += time.perf_counter() - started
        return acc

    def _unpack(self, out: np.ndarray, tiles, shape, fb: int) -> np.ndarray:
        result = np.zeros(shape, dtype=np.uint64)
        position = 0
        for (r0, r1), (c0, c1) in tiles:
            status = int(out[position])
            if status != STATUS_OK:
                raise DeployError(f"IP {self.driver.ip_name} refused a {r1 - r0}x{c1 - c0} GEMM tile at fb={fb}: "
                                  f"status {status} ({STATUS_NAMES.get(status, 'unknown')})")
            size = (r1 - r0) * (c1 - c0)
            result[r0:r1, c0:c1] = out[position + 1:position + 1 + size].reshape(r1 - r0, c1 - c0)
            position += 1 + size
        return result


class BoardTrainer(LoopOnBoard, FbMlpTrainer):
    """The design-point training loop with every layer GEMM on the overlay's fpmac_array IP."""

    family, setup_class, backend_class = "fpmac_array", HwTrainSetup, IpGemm  # see LoopOnBoard


def _measure_host(setup: HwTrainSetup, *, source: str, data=None):
    from codesign.loops.host_share import measure_fb_host

    return measure_fb_host(setup, source=source)[0]


def fb_board_trainer(overlay, design=None, **setup_changes):
    """The FB-float family's board trainer for ``overlay``: every step as call lists
    (:class:`codesign.deploy.fb_list_training.FbListBoardTrainer`) where the IP runs lists
    (:func:`codesign.deploy.list_shell.runs_lists`: an RTL-route build, or the emulated board); else
    :class:`BoardTrainer`, one IP call per GEMM on the one IP (copies are refused: only lists share a step)."""
    if runs_lists(overlay, "fpmac_array"):
        return FbListBoardTrainer(overlay, design, **setup_changes)
    one_ip_route(overlay, "fpmac_array", "an HLS export")
    return BoardTrainer(overlay, design, **setup_changes)


# a short run of the whole path: two epochs, the FB rule raising the FB after the first
FAMILY = BoardFamily(key="fpmac_array", board=fb_board_trainer, golden=FbMlpTrainer, setup=HwTrainSetup,
                     state_keys=("weights", "biases", "velocity"), example="digits_abvs.toml",
                     quick_changes={"epochs": 2, "epsilon": 1.0}, measure_host=_measure_host)
