"""Where the CSB loop's layer work runs: the four CSB operations on whole FC layers behind one protocol
(:class:`CsbBackend`), done here by the golden PE (:class:`GoldenCsb`) or on a board by the csb IP
(:class:`codesign.deploy.csb_training.IpCsb`), so the loop's host side is the same code either way."""

from __future__ import annotations

import time
from collections import Counter
from typing import Protocol

import numpy as np

from codesign.pe.csb import golden
from codesign.pe.csb.format import CSBMatrix
from codesign.pe.csb.spec import CsbSpec


class CsbBackend(Protocol):
    """The four CSB operations on whole FC layers (``csb`` rows = outputs, cols = inputs; int codes).

    ``forward(csb, x (n, cols)) -> (n, rows)``, ``backward_error(csb, dy (n,
    rows)) -> (n, cols)``, ``weight_grad(csb, x, dy) -> (nnz,)`` in stored
    order, ``update(csb, buffer (nnz,), grads (nnz,), shift) -> (nnz,)``.
    ``macs`` counts useful MACs by op (UPD: buffer words updated).
    """

    macs: Counter

    def forward(self, csb: CSBMatrix, x: np.ndarray) -> np.ndarray: ...

    def backward_error(self, csb: CSBMatrix, dy: np.ndarray) -> np.ndarray: ...

    def weight_grad(self, csb: CSBMatrix, x: np.ndarray, dy: np.ndarray) -> np.ndarray: ...

    def update(self, csb: CSBMatrix, buffer: np.ndarray, grads: np.ndarray, shift: int) -> np.ndarray: ...


class GoldenCsb:
    """The golden CSB PE (:mod:`codesign.pe.csb.golden`: layer schedules and ``block_upd``), counting MACs per op."""

    def __init__(self, spec: CsbSpec) -> None:
        self.spec = spec
        self.macs: Counter = Counter()
        self.calls, self.seconds = 0, 0.0

    def _count(self, op: str, macs: int, started: float) -> None:
        self.macs[op] += macs
        self.calls += 1
        self.seconds += time.perf_counter() - started

    def forward(self, csb, x):
        started = time.perf_counter()
        out = golden.forward(csb, x, spec=self.spec)
        self._count("FP", csb.nnz * x.shape[0], started)
        return out

    def backward_error(self, csb, dy):
        started = time.perf_counter()
        out = golden.backward_error(csb, dy, spec=self.spec)
        self._count("EB", csb.nnz * dy.shape[0], started)
        return out

    def weight_grad(self, csb, x, dy):
        started = time.perf_counter()
        out = golden.weight_grad(csb, x, dy, spec=self.spec).reshape(-1)
        self._count("WG", csb.nnz * x.shape[0], started)
        return out

    def update(self, csb, buffer, grads, shift):
        started = time.perf_counter()
        out = np.empty(csb.nnz, dtype=np.int64)
        ptr = csb.block_ptr
        for stored in range(csb.n_blocks):
            entries = slice(int(ptr[stored]), int(ptr[stored + 1]))
            if entries.stop > entries.start:
                out[entries] = golden.block_upd(self.spec, buffer[entries].reshape(-1, 1, 1),
                                                grads[entries].reshape(-1, 1, 1), shift).reshape(-1)
        self._count("UPD", csb.nnz, started)
        return out


__all__ = ["CsbBackend", "GoldenCsb"]
