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


class GoldenConvCsb(GoldenCsb):
    """The golden CSB PE on whole conv layers (:mod:`codesign.pe.csb.golden` on one tile the size of the map, the
    accumulators of ``spec``; a padded input map of at most the PE model's 1,024 positions a channel, larger ones
    through :class:`FastConvCsb` alone): ``x`` comes padded by the host, ``stride`` 1 or 2; the conv lists
    (:mod:`codesign.step.csb.conv_lists`) equal it wherever no partial sum saturates, which
    :class:`codesign.loops.csb_conv.CsbConvSetup` makes sure of."""

    def forward(self, csb, x, stride: int = 1):
        started = time.perf_counter()
        out = golden.forward(csb, x, acc_bits=self.spec.acc_bits, stride=stride)
        self._count("FP", csb.nnz * csb.kernel ** 2 * out.shape[0] * out.shape[2] * out.shape[3], started)
        return out

    def backward_error(self, csb, dy, stride: int = 1):
        started = time.perf_counter()
        out = golden.backward_error(csb, dy, acc_bits=self.spec.acc_bits, stride=stride)
        self._count("EB", csb.nnz * csb.kernel ** 2 * dy.shape[0] * dy.shape[2] * dy.shape[3], started)
        return out

    def backward_error_on(self, csb, dy, shape, stride: int = 1):
        """EB onto a padded input of ``shape`` ``(n, channels, rows, cols)``: the rows and columns past the last
        window get no error."""
        out = self.backward_error(csb, dy, stride)
        full = np.zeros(shape, dtype=np.int64)
        full[:, :, :out.shape[2], :out.shape[3]] = out
        return full

    def weight_grad(self, csb, x, dy, stride: int = 1):
        started = time.perf_counter()
        out = golden.weight_grad(csb, x, dy, acc_bits=self.spec.acc_bits, stride=stride)
        self._count("WG", csb.nnz * csb.kernel ** 2 * dy.shape[0] * dy.shape[2] * dy.shape[3], started)
        return out

    def update(self, csb, buffer, grads, shift):
        started = time.perf_counter()
        out = golden.weight_update(buffer, grads, shift, buffer_bits=self.spec.buffer_bits)
        self._count("UPD", buffer.size, started)
        return out


class FastConvCsb(GoldenConvCsb):
    """:class:`GoldenConvCsb`'s sums through matrix products (:mod:`codesign.loops.conv_float`): exact integers
    in float64 (each product below ``2^14``, each sum far below ``2^53``), and equal to the golden layer's wherever
    no sum saturates its accumulators, which :class:`codesign.loops.csb_conv.CsbConvSetup` makes sure of. EB gives
    the input gradient over the whole padded input (the golden one stops where the last window does: the rows
    past it are 0)."""

    def forward(self, csb, x, stride: int = 1):
        from codesign.loops.conv_float import correlate

        started = time.perf_counter()
        out = np.rint(correlate(x, csb.to_dense(), stride)).astype(np.int64)
        self._count("FP", csb.nnz * csb.kernel ** 2 * out.shape[0] * out.shape[2] * out.shape[3], started)
        return out

    def backward_error_on(self, csb, dy, shape, stride: int = 1):
        """EB onto a padded input of ``shape`` ``(n, channels, rows, cols)``."""
        from codesign.loops.conv_float import correlate_grads

        started = time.perf_counter()
        _, grad = correlate_grads(np.zeros(shape), csb.to_dense(), dy, stride)
        self._count("EB", csb.nnz * csb.kernel ** 2 * dy.shape[0] * dy.shape[2] * dy.shape[3], started)
        return np.rint(grad).astype(np.int64)

    def weight_grad(self, csb, x, dy, stride: int = 1):
        from codesign.loops.conv_float import correlate_grads

        started = time.perf_counter()
        dense, _ = correlate_grads(x, csb.to_dense(), dy, stride, input_grad=False)
        rows, cols = csb.entry_coordinates()
        out = np.rint(dense[rows, cols]).astype(np.int64)
        self._count("WG", csb.nnz * csb.kernel ** 2 * dy.shape[0] * dy.shape[2] * dy.shape[3], started)
        return out


__all__ = ["CsbBackend", "FastConvCsb", "GoldenConvCsb", "GoldenCsb"]
