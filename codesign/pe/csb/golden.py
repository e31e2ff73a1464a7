"""Exact integer golden model of the CSB PE: the four block operations and the layer schedules built from them.

Block level (docs/csb.md, "The four operations on one block"); arrays are
int64 codes in the order the stream carries them:

* ``X``: ``(block_cols, in_h, in_w, batch)`` 8-bit activations, the input
  tile at the transaction's stride (``spec.in_tile(stride)``);
* ``DY``: ``(block_rows, out_h, out_w, batch)`` 8-bit errors;
* FP ``acc``: ``(block_rows, out_h, out_w, batch)``; EB ``acc``:
  ``(block_cols, in_h, in_w, batch)``; ``acc_bits``-bit accumulators;
* ``ys``, ``xs``: the ``nnz`` stored index nibbles in stored order;
  ``w``: ``(nnz, k, k)`` 8-bit kernels; WG ``G``: ``(nnz, k, k)``;
  UPD ``B``/``G``: 24-bit buffer words and 32-bit gradient words.

Every accumulator receives its additions in the contract's order and
saturates after each one; loops run over entries and taps with NumPy over
positions and lanes (one addition per accumulator per step, so the order
holds). WG's saturating partials use the plain running sum whenever it never
leaves the range, which is then exactly the saturating sum.

Layer level (``forward``, ``backward_error``, ``weight_grad``), torch-like
layouts, ``n`` samples:

* FC: ``x (n, cols)``, ``y/dy (n, rows)``, ``dx (n, cols)``.
* CONV: ``x (n, cols, H, W)`` -> ``y (n, rows, (H-k)//s+1, (W-k)//s+1)``:
  'valid' correlation at stride ``s`` (1, or 2 on a PE with ``max_stride``
  2), the host pads; ``dy (n, rows, OH, OW)`` -> ``dx (n, cols, s*(OH-1)+k,
  s*(OW-1)+k)`` (the transposed convolution).
* WG: gradient per stored entry ``(nnz, k, k)`` in stored order, summed over
  the batch.

rows/cols are those of the view passed in. They run the PE's schedule block by
block: FP walks each block row of the view, block after block, chaining the
accumulator; EB does the same on ``csb.transpose_view()`` with the EB
operation; WG visits every block once and chains ``G``. The batch goes through
the PE in chunks of ``spec.batch`` lanes (transactions chained in chunk order)
and the whole feature map is one tile (``out_h x out_w`` = the full output
map), so the map must fit the PE's buffers. Partial edge blocks are padded
with zero channels, as the host does. Results are int32 arrays holding
``acc_bits``-bit accumulators (zero initial accumulators).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from codesign.pe.csb.format import CSBMatrix
from codesign.contracts.constants import WORD_BITS
from codesign.pe.csb.spec import BUFFER_BITS, MAX_BATCH, CsbSpec

MAX_SHIFT = 31  # UPD shift field: 5 bits
_EXACT_SHIFT = 62  # numerators below 2^53 divided by 2^62 or more all round to 0; 2^62 still fits int64


# -- saturation and the weight buffer ---------------------------------------------------------

def saturate(values, bits: int) -> np.ndarray:
    """Clamp int64 ``values`` to the signed ``bits``-bit range ``[-2^(bits-1), 2^(bits-1) - 1]``."""
    return np.clip(values, -(1 << (bits - 1)), (1 << (bits - 1)) - 1)


def round_into_buffer(numerator, shift, *, buffer_bits: int = BUFFER_BITS) -> np.ndarray:
    """``sat(rne(numerator / 2^shift))`` on exact integers: a value rounded once onto the buffer grid.

    ``numerator`` (int64) is the exact value in units of ``2^-shift`` buffer
    steps, ``shift`` (scalar or per-element, 0..62) its fraction bits; the
    quotient is rounded to nearest, ties to even, then saturated to a signed
    ``buffer_bits``-bit word. This is the one rounding rule of the weight
    buffer: UPD (:func:`weight_update`) and the compressed-training technique
    (:meth:`codesign.train.techniques.compress.MsbWeightQuantizer.store`) both
    call it.
    """
    numerator = np.asarray(numerator, dtype=np.int64)
    shift = np.asarray(shift, dtype=np.int64)
    if np.any(shift < 0) or np.any(shift > _EXACT_SHIFT):
        raise ValueError(f"shift must be in 0..{_EXACT_SHIFT}, got {shift.min()}..{shift.max()}")
    if not 2 <= buffer_bits <= 62:
        raise ValueError(f"buffer_bits={buffer_bits} is out of range [2, 62]")
    quotient = numerator >> shift  # floor
    remainder = numerator - (quotient << shift)  # 0 <= remainder < 2^shift
    half = np.left_shift(np.int64(1), shift) >> 1  # 2^(shift-1); 0 for shift 0
    up = (shift > 0) & ((remainder > half) | ((remainder == half) & (quotient & 1 == 1)))
    return saturate(quotient + up, buffer_bits)


def split_dyadic(values) -> tuple[np.ndarray, np.ndarray]:
    """Finite float64 values as exact ``numerator / 2^shift`` pairs for :func:`round_into_buffer`.

    Magnitudes are first clamped to 2^40, far beyond any buffer (at most 32
    bits), so the saturated result is unchanged; a float64 then has at most 53
    significant bits, and shifts past 62 are clamped (the quotient rounds to
    zero either way). NaN must be masked out by the caller.
    """
    values = np.clip(np.asarray(values, dtype=np.float64), -(2.0**40), 2.0**40)
    mantissa, exponent = np.frexp(values)  # values = mantissa * 2^exponent, 0.5 <= |mantissa| < 1
    numerator = np.ldexp(mantissa, 53).astype(np.int64)  # exact: 53-bit significand
    shift = np.clip(53 - exponent.astype(np.int64), 0, _EXACT_SHIFT)
    return numerator, shift


def update_shift(*, learning_rate: float, grad_frac_bits: int, buffer_frac_bits: int) -> int:
    """UPD's shift for SGD ``w -= learning_rate * g``: the step ``-G * 2^-shift`` in buffer steps.

    Gradient codes ``G`` have ``grad_frac_bits`` fraction bits, buffer words
    ``buffer_frac_bits``; the PE only shifts, so the learning rate must be a
    power of two ``2^-m`` and then ``shift = grad_frac_bits + m - buffer_frac_bits``
    must fit the 5-bit field (0..31). Anything else is refused here, before a
    transaction is built.
    """
    rate = float(learning_rate)
    if not np.isfinite(rate) or rate <= 0:
        raise ValueError(f"learning_rate must be a positive finite number, got {learning_rate!r}")
    mantissa, exponent = np.frexp(rate)
    if mantissa != 0.5:
        raise ValueError(f"learning_rate={learning_rate!r} is not a power of two: the PE scales by shifting only")
    shift = int(grad_frac_bits) - (int(exponent) - 1) - int(buffer_frac_bits)
    if not 0 <= shift <= MAX_SHIFT:
        raise ValueError(f"learning_rate=2^{int(exponent) - 1} with {grad_frac_bits} gradient and {buffer_frac_bits} "
                         f"buffer fraction bits needs shift {shift}, outside UPD's 0..{MAX_SHIFT}")
    return shift


def weight_update(buffer_codes, grad_codes, shift: int, *, buffer_bits: int = BUFFER_BITS) -> np.ndarray:
    """UPD: ``sat(rne((B * 2^s - G) / 2^s))``: the step ``-G * 2^-s`` added exactly, the sum rounded once.

    ``buffer_codes`` are ``buffer_bits``-bit buffer words, ``grad_codes`` 32-bit
    gradient words (int64 arrays of one shape), ``shift`` 0..31.
    """
    if isinstance(shift, bool) or not isinstance(shift, (int, np.integer)) or not 0 <= shift <= MAX_SHIFT:
        raise ValueError(f"shift must be an int in 0..{MAX_SHIFT}, got {shift!r}")
    b = check_codes("buffer_codes", buffer_codes, buffer_bits)
    g = check_codes("grad_codes", grad_codes, WORD_BITS)
    if b.shape != g.shape:
        raise ValueError(f"buffer_codes {b.shape} and grad_codes {g.shape} differ in shape")
    return round_into_buffer((b << int(shift)) - g, int(shift), buffer_bits=buffer_bits)


# -- input checks -----------------------------------------------------------------------------

def check_codes(name: str, values, bits: int, shape: tuple[int, ...] | None = None) -> np.ndarray:
    array = np.asarray(values)
    if array.dtype.kind not in "iu":
        raise ValueError(f"{name} must hold integer codes, got dtype {array.dtype}")
    if shape is not None and array.shape != shape:
        raise ValueError(f"{name} must have shape {shape}, got {array.shape}")
    low, high = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    if array.size and (int(array.min()) < low or int(array.max()) > high):
        raise ValueError(f"{name} holds values outside the signed {bits}-bit range [{low}, {high}]")
    return array.astype(np.int64)


def _entries(spec: CsbSpec, ys, xs) -> tuple[np.ndarray, np.ndarray]:
    ys, xs = np.asarray(ys), np.asarray(xs)
    if ys.dtype.kind not in "iu" or xs.dtype.kind not in "iu" or ys.ndim != 1 or ys.shape != xs.shape:
        raise ValueError(f"ys and xs must be equal-length 1-D integer arrays, got {ys.shape} and {xs.shape}")
    if ys.size > spec.capacity:
        raise ValueError(f"nnz={ys.size} exceeds the block capacity {spec.capacity}")
    if ys.size and (ys.min() < 0 or xs.min() < 0 or ys.max() >= spec.block_rows or xs.max() >= spec.block_cols):
        raise ValueError(f"an index lies outside the {spec.block_rows} x {spec.block_cols} block")
    return ys.astype(np.int64), xs.astype(np.int64)


def _fmap(spec: CsbSpec, channels: int, h: int, w: int) -> tuple[int, ...]:
    return (channels, h, w, spec.batch)


# -- the four block operations -----------------------------------------------------------------

def _taps(spec: CsbSpec, stride: int) -> tuple[tuple[int, int], Callable[[int, int], tuple[slice, slice]]]:
    """The input tile at ``stride`` and ``window(ky, kx)``: the slices of the input positions ``(stride*oy + ky,
    stride*ox + kx)`` that the output positions read (FP, WG) or write (EB), one per output position."""
    in_tile = spec.in_tile(stride)
    rows, cols = stride * (spec.out_h - 1) + 1, stride * (spec.out_w - 1) + 1

    def window(ky: int, kx: int) -> tuple[slice, slice]:
        return slice(ky, ky + rows, stride), slice(kx, kx + cols, stride)

    return in_tile, window


def block_fp(spec: CsbSpec, ys, xs, w, X, acc, *, stride: int = 1) -> np.ndarray:
    """FP on one block: ``ACC[y_e][o][l] = sat(ACC + w[e][t] * X[x_e][stride*o + tap][l])``, ``for e: for t:``."""
    ys, xs = _entries(spec, ys, xs)
    k, oh, ow = spec.kernel, spec.out_h, spec.out_w
    (in_h, in_w), window = _taps(spec, stride)
    w = check_codes("w", w, 8, (ys.size, k, k))
    X = check_codes("X", X, 8, _fmap(spec, spec.block_cols, in_h, in_w))
    acc = check_codes("acc", acc, spec.acc_bits, _fmap(spec, spec.block_rows, oh, ow)).copy()
    for e in range(ys.size):
        y, x = ys[e], xs[e]
        for ky in range(k):
            for kx in range(k):
                acc[y] = saturate(acc[y] + w[e, ky, kx] * X[(x, *window(ky, kx))], spec.acc_bits)
    return acc


def block_eb(spec: CsbSpec, ys, xs, w, DY, acc, *, stride: int = 1) -> np.ndarray:
    """EB on one block: ``ACC[x_e][stride*o + tap][l] = sat(ACC + w[e][t] * DY[y_e][o][l])``, ``for e: for t:``.

    Within one ``(e, t)`` every accumulator receives at most one addition, so
    this is the contract's order (docs/csb.md, EB) at either stride."""
    ys, xs = _entries(spec, ys, xs)
    k, oh, ow = spec.kernel, spec.out_h, spec.out_w
    (in_h, in_w), window = _taps(spec, stride)
    w = check_codes("w", w, 8, (ys.size, k, k))
    DY = check_codes("DY", DY, 8, _fmap(spec, spec.block_rows, oh, ow))
    acc = check_codes("acc", acc, spec.acc_bits, _fmap(spec, spec.block_cols, in_h, in_w)).copy()
    for e in range(ys.size):
        y, x = ys[e], xs[e]
        for ky in range(k):
            for kx in range(k):
                at = (x, *window(ky, kx))  # input positions (stride*oy + ky, stride*ox + kx), one per output
                acc[at] = saturate(acc[at] + w[e, ky, kx] * DY[y], spec.acc_bits)
    return acc


def _saturating_scan(terms: np.ndarray, bits: int) -> np.ndarray:
    """``part = sat(part + terms[..., i])`` for i in order, from 0, over the last axis."""
    running = np.cumsum(terms, axis=-1)
    low, high = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    if terms.shape[-1] == 0:
        return np.zeros(terms.shape[:-1], dtype=np.int64)
    if running.min() >= low and running.max() <= high:
        return running[..., -1]  # saturation never engaged
    part = np.zeros(terms.shape[:-1], dtype=np.int64)
    for i in range(terms.shape[-1]):
        part = saturate(part + terms[..., i], bits)
    return part


def block_wg(spec: CsbSpec, ys, xs, X, DY, G, *, stride: int = 1) -> np.ndarray:
    """WG on one block: per (e, t), lane sums per position, saturating partials per group, added to G at the end."""
    ys, xs = _entries(spec, ys, xs)
    k, oh, ow, P = spec.kernel, spec.out_h, spec.out_w, spec.parallel
    (in_h, in_w), window = _taps(spec, stride)
    X = check_codes("X", X, 8, _fmap(spec, spec.block_cols, in_h, in_w))
    DY = check_codes("DY", DY, 8, _fmap(spec, spec.block_rows, oh, ow))
    G = check_codes("G", G, spec.acc_bits, (ys.size, k, k)).copy()
    if ys.size == 0:
        return G
    # sums[e, ky, kx, opos] = sum_l X[x_e][stride*oy + ky, stride*ox + kx][l] * DY[y_e][oy, ox][l]  (exact, < 2^19)
    patches = np.stack([np.stack([X[(slice(None), *window(ky, kx))] for kx in range(k)], axis=1)
                        for ky in range(k)], axis=1)  # (cols, k, k, oh, ow, b)
    sums = np.einsum("ekjhwl,ehwl->ekjhw", patches[xs], DY[ys]).reshape(ys.size, k, k, oh * ow)
    for p in range(P):
        G = saturate(G + _saturating_scan(sums[..., p::P], spec.acc_bits), spec.acc_bits)
    return G


def block_upd(spec: CsbSpec, B, G, shift: int) -> np.ndarray:
    """UPD on one block: ``nnz x k x k`` buffer words updated by gradient words (:func:`weight_update`)."""
    B, G = np.asarray(B), np.asarray(G)
    k = spec.kernel
    if B.ndim != 3 or B.shape[1:] != (k, k) or B.shape[0] > spec.capacity:
        raise ValueError(f"B must have shape (nnz, {k}, {k}) with nnz <= {spec.capacity}, got {B.shape}")
    return weight_update(B, G, shift, buffer_bits=spec.buffer_bits)


# -- layer schedules ----------------------------------------------------------------------------

def _layer_spec(csb: CSBMatrix, lanes: int, out_h: int, out_w: int, spec: CsbSpec | None,
                acc_bits: int | None, stride: int = 1) -> CsbSpec:
    block_rows, block_cols = csb.view_block
    if spec is None:
        return CsbSpec(block_rows=block_rows, block_cols=block_cols, kernel=csb.kernel, out_h=out_h, out_w=out_w,
                       batch=min(lanes, MAX_BATCH), parallel=1, acc_bits=32 if acc_bits is None else acc_bits,
                       max_stride=stride)
    if not isinstance(spec, CsbSpec):
        raise TypeError(f"spec must be a CsbSpec, got {type(spec).__name__}")
    if acc_bits is not None and acc_bits != spec.acc_bits:
        raise ValueError(f"acc_bits={acc_bits} contradicts spec.acc_bits={spec.acc_bits}")
    wanted = dict(block_rows=block_rows, block_cols=block_cols, kernel=csb.kernel, out_h=out_h, out_w=out_w)
    wrong = {name: (getattr(spec, name), value) for name, value in wanted.items() if getattr(spec, name) != value}
    if wrong:
        raise ValueError("spec does not match the layer (spec value, layer value): "
                         + ", ".join(f"{name}={pair}" for name, pair in wrong.items())
                         + " (the whole feature map is one tile)")
    spec.in_tile(stride)  # a stride the PE does not run is refused here
    return spec


def _activations(name: str, values, channels: int, csb: CSBMatrix) -> np.ndarray:
    """Layer array -> int64 ``(channels, h, w, n)``, checked."""
    array = np.asarray(values)
    dims = 4 if csb.conv else 2
    if array.ndim != dims or array.shape[1] != channels or array.shape[0] < 1:
        want = "(n, channels, h, w)" if csb.conv else "(n, channels)"
        raise ValueError(f"{name} must be {want} with {channels} channels, got shape {array.shape}")
    array = check_codes(name, array, 8)
    if not csb.conv:
        array = array[:, :, None, None]
    return np.ascontiguousarray(array.transpose(1, 2, 3, 0))


def _to_layer(acc: np.ndarray, conv: bool) -> np.ndarray:
    out = acc.transpose(3, 0, 1, 2).astype(np.int32)
    return out if conv else out[:, :, 0, 0].copy()


def _chunk(array: np.ndarray, lo: int, spec: CsbSpec) -> np.ndarray:
    """Lanes ``lo..lo + spec.batch`` of a ``(c, h, w, n)`` array, zero-padded to ``spec.batch`` lanes."""
    part = array[..., lo:lo + spec.batch]
    if part.shape[-1] < spec.batch:
        part = np.concatenate([part, np.zeros((*part.shape[:-1], spec.batch - part.shape[-1]), np.int64)], axis=-1)
    return part


def _tile(array: np.ndarray, start: int, size: int) -> np.ndarray:
    """Channels ``start..start + size`` zero-padded to ``size`` (a partial edge block)."""
    part = array[start:start + size]
    if part.shape[0] < size:
        part = np.concatenate([part, np.zeros((size - part.shape[0], *part.shape[1:]), np.int64)])
    return part


def _sweep(csb: CSBMatrix, spec: CsbSpec, data: np.ndarray, out_channels: int, out_shape: tuple[int, int],
           operation) -> np.ndarray:
    """Run ``operation`` over the blocks of ``csb`` (its view order), chaining each block row's accumulator.

    A block row of the view writes its ``block_rows`` output channels and reads
    the ``block_cols`` input channels of each of its blocks (for EB, ``csb`` is
    the transposed view: outputs are the layer's input channels).
    """
    n = data.shape[-1]
    result = np.zeros((out_channels, *out_shape, n), dtype=np.int64)
    out_size, in_size = csb.view_block
    for lo in range(0, n, spec.batch):
        chunk, lanes = _chunk(data, lo, spec), min(spec.batch, n - lo)
        acc: dict[int, np.ndarray] = {}
        for block in csb.blocks():
            if block.row not in acc:
                acc[block.row] = np.zeros((out_size, *out_shape, spec.batch), dtype=np.int64)
            values = np.asarray(block.values, dtype=np.int64)
            acc[block.row] = operation(block, values, _tile(chunk, block.col * in_size, in_size), acc[block.row])
        for row, value in acc.items():
            start = row * out_size
            stop = min(start + out_size, out_channels)
            result[start:stop, ..., lo:lo + lanes] = value[:stop - start, ..., :lanes]
    return result


def _out_map(X: np.ndarray, kernel: int, stride: int) -> tuple[int, int]:
    """Output map of a 'valid' correlation at ``stride`` over ``X`` ``(c, h, w, n)``; rows and columns past the
    last window are not read."""
    if isinstance(stride, bool) or stride not in (1, 2):
        raise ValueError(f"stride must be 1 or 2, got {stride!r}")
    if X.shape[1] < kernel or X.shape[2] < kernel:
        raise ValueError(f"x maps {X.shape[1:3]} are smaller than the {kernel} x {kernel} kernel")
    return (X.shape[1] - kernel) // stride + 1, (X.shape[2] - kernel) // stride + 1


def forward(csb: CSBMatrix, x, *, spec: CsbSpec | None = None, acc_bits: int | None = None,
            stride: int = 1) -> np.ndarray:
    """FP of a layer, ``y = W x``, through FP transactions at ``stride``: see the module docstring for layouts."""
    rows, cols = csb.view_shape
    X = _activations("x", x, cols, csb)
    out_h, out_w = _out_map(X, csb.kernel, stride)
    spec = _layer_spec(csb, X.shape[-1], out_h, out_w, spec, acc_bits, stride)
    X = X[:, :stride * (out_h - 1) + csb.kernel, :stride * (out_w - 1) + csb.kernel]

    def fp(block, values, tile, acc):
        return block_fp(spec, block.ys, block.xs, values, tile, acc, stride=stride)

    return _to_layer(_sweep(csb, spec, X, rows, (out_h, out_w), fp), csb.conv)


def backward_error(csb: CSBMatrix, dy, *, spec: CsbSpec | None = None, acc_bits: int | None = None,
                   stride: int = 1) -> np.ndarray:
    """EB of a layer, ``dx = W^T dy``, through EB transactions on ``csb.transpose_view()`` at ``stride``.

    ``spec`` describes the PE as it runs EB: its ``block_rows x block_cols``
    are those of ``csb`` (the stored index bytes; the PE exchanges x and y).
    ``dx`` covers the input tile, ``stride*(OH - 1) + k`` by ``stride*(OW - 1) + k``
    positions; the caller pads it to a map with rows or columns no window read.
    """
    rows, cols = csb.view_shape
    DY = _activations("dy", dy, rows, csb)
    out_h, out_w = DY.shape[1], DY.shape[2]
    spec = _layer_spec(csb, DY.shape[-1], out_h, out_w, spec, acc_bits, stride)
    view = csb.transpose_view()

    def eb(block, values, tile, acc):
        # the view's (y, x) are this matrix's (x, y): the EB operation takes them unexchanged
        return block_eb(spec, block.xs, block.ys, values, tile, acc, stride=stride)

    return _to_layer(_sweep(view, spec, DY, cols, spec.in_tile(stride), eb), csb.conv)


def weight_grad(csb: CSBMatrix, x, dy, *, spec: CsbSpec | None = None, acc_bits: int | None = None,
                stride: int = 1) -> np.ndarray:
    """WG of a layer: ``(nnz, k, k)`` gradients of the stored entries (stored order), summed over the batch."""
    rows, cols = csb.view_shape
    X = _activations("x", x, cols, csb)
    DY = _activations("dy", dy, rows, csb)
    k = csb.kernel
    out_h, out_w = _out_map(X, k, stride)
    if DY.shape[1:3] != (out_h, out_w) or DY.shape[-1] != X.shape[-1]:
        raise ValueError(f"dy {DY.shape[1:3]} x {DY.shape[-1]} samples does not match x maps "
                         f"{X.shape[1:3]} x {X.shape[-1]} samples for a {k} x {k} kernel at stride {stride}")
    spec = _layer_spec(csb, X.shape[-1], out_h, out_w, spec, acc_bits, stride)
    X = X[:, :stride * (out_h - 1) + k, :stride * (out_w - 1) + k]
    block_rows, block_cols = csb.view_block
    grads = np.zeros((csb.nnz, k, k), dtype=np.int64)
    n = X.shape[-1]
    for lo in range(0, n, spec.batch):
        x_chunk, dy_chunk = _chunk(X, lo, spec), _chunk(DY, lo, spec)
        for block in csb.blocks():
            if block.nnz == 0:
                continue
            grads[block.entries] = block_wg(spec, block.ys, block.xs, _tile(x_chunk, block.col * block_cols, block_cols),
                                            _tile(dy_chunk, block.row * block_rows, block_rows), grads[block.entries],
                                            stride=stride)
    return grads.astype(np.int32)


__all__ = [
    "block_eb", "block_fp", "block_upd", "block_wg", "backward_error", "forward",
    "round_into_buffer", "saturate", "split_dyadic", "update_shift", "weight_grad", "weight_update",
]
