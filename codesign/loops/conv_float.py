"""Convolutions in NumPy through matrix products: the golden conv loop's float64 warm-up and its exact integer path.

The loop's warm-up runs on the host (a board has no torch), so a conv layer is written once here: the padded
input's ``k x k`` windows at the stride are viewed without a copy and contracted with the kernels by one matrix
product (BLAS); the input gradient adds every tap's contribution back onto the padded map. On integer codes
the same products are exact in float64 while every sum stays below ``2^53``, which is how the loop's fast
backend computes the PE's sums where they cannot saturate. Shapes are torch's: ``x (n, channels, h, w)``,
``weight (outputs, channels, k, k)``.
"""

from __future__ import annotations

from typing import Tuple

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view


def _windows(padded: np.ndarray, kernel: int, stride: int) -> Tuple[np.ndarray, int, int]:
    """``(n * oh * ow, channels * k * k)`` windows of ``padded`` and the output map ('valid' at ``stride``)."""
    oh = (padded.shape[2] - kernel) // stride + 1
    ow = (padded.shape[3] - kernel) // stride + 1
    view = sliding_window_view(padded, (kernel, kernel), axis=(2, 3))[:, :, ::stride, ::stride][:, :, :oh, :ow]
    n, c = padded.shape[:2]
    return view.transpose(0, 2, 3, 1, 4, 5).reshape(n * oh * ow, c * kernel * kernel), oh, ow


def correlate(padded: np.ndarray, weight: np.ndarray, stride: int = 1) -> np.ndarray:
    """``(n, outputs, oh, ow)``: the 'valid' correlation of an already padded input with ``weight``."""
    cols, oh, ow = _windows(np.asarray(padded, dtype=np.float64), weight.shape[-1], stride)
    out = cols @ np.asarray(weight, dtype=np.float64).reshape(weight.shape[0], -1).T
    return out.reshape(padded.shape[0], oh, ow, -1).transpose(0, 3, 1, 2)


def correlate_grads(padded: np.ndarray, weight: np.ndarray, dz: np.ndarray, stride: int = 1,
                    input_grad: bool = True) -> Tuple[np.ndarray, np.ndarray | None]:
    """The gradients of :func:`correlate` with respect to ``weight`` and (``input_grad``) the padded input."""
    padded, weight = np.asarray(padded, dtype=np.float64), np.asarray(weight, dtype=np.float64)
    n, c = padded.shape[:2]
    o, _, kernel, _ = weight.shape
    cols, oh, ow = _windows(padded, kernel, stride)
    rows = np.asarray(dz, dtype=np.float64).transpose(0, 2, 3, 1).reshape(n * oh * ow, o)
    grad_w = (rows.T @ cols).reshape(weight.shape)
    if not input_grad:
        return grad_w, None
    taps = (rows @ weight.reshape(o, -1)).reshape(n, oh, ow, c, kernel, kernel).transpose(0, 3, 1, 2, 4, 5)
    grad_x = np.zeros(padded.shape)
    for i in range(kernel):
        for j in range(kernel):
            grad_x[:, :, i:i + stride * (oh - 1) + 1:stride, j:j + stride * (ow - 1) + 1:stride] += taps[..., i, j]
    return grad_w, grad_x


def pad_map(x: np.ndarray, kernel: int) -> np.ndarray:
    """``x`` zero-padded by ``(kernel - 1) / 2`` on every side of its map: a 'same' convolution's input."""
    p = (kernel - 1) // 2
    return np.pad(x, ((0, 0), (0, 0), (p, p), (p, p))) if p else np.asarray(x)


def conv2d(x: np.ndarray, weight: np.ndarray, stride: int = 1) -> np.ndarray:
    """The 'same'-padded correlation of ``x`` with ``weight`` at ``stride``."""
    return correlate(pad_map(x, weight.shape[-1]), weight, stride)


def conv2d_grads(x: np.ndarray, weight: np.ndarray, dz: np.ndarray, stride: int = 1,
                 input_grad: bool = True) -> Tuple[np.ndarray, np.ndarray | None]:
    """The gradients of :func:`conv2d` with respect to ``weight`` and (``input_grad``) ``x``, given ``dz``."""
    p, (h, w) = (weight.shape[-1] - 1) // 2, x.shape[2:]
    grad_w, grad_x = correlate_grads(pad_map(x, weight.shape[-1]), weight, dz, stride, input_grad)
    return grad_w, None if grad_x is None else grad_x[:, :, p:p + h, p:p + w]


__all__ = ["conv2d", "conv2d_grads", "correlate", "correlate_grads", "pad_map"]
