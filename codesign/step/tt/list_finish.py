"""The host's part of a TT layer step run as call lists (:mod:`codesign.step.tt.step_lists`), which a board runs
too: read the outputs, add the bias, mask the input gradient, and move the tracked scales on by the records'
sums."""

from __future__ import annotations

import math
from typing import Dict, Tuple

import numpy as np

from codesign.contracts.calls import RECORD
from codesign.step.tt.layer_state import TtLayerState
from codesign.step.tt.rounding import frac_of_values, in_code_range, quantize_values, scaled_for_codes, to_values
from codesign.step.tt.scale_book import ScaleBook
from codesign.step.tt.step import StepResult
from codesign.step.tt.step_lists import Fracs, StepLists, z_fracs

def _words(arena: np.ndarray, offset: int, values: int, words: int) -> np.ndarray:
    """``values`` raw results from byte ``offset``: 32-bit words, or 64-bit (two words) when drained; a signed
    view of the arena, which the caller converts before the arena is written again."""
    flat = np.ascontiguousarray(arena[offset // 4:offset // 4 + words * values], dtype=np.uint32)
    return flat.view(np.int32) if words == 1 else flat.view(np.int64)  # a view: the caller converts at once


def read_outputs(lists: StepLists, arena: np.ndarray) -> Dict[str, object]:
    """What the host reads after the backward lists besides the input gradient (:func:`input_grad`; the output
    ``y`` it read after the forward ones, :func:`layer_output`): ``core_grads`` (float32 values, each in the core's
    layout; one gather of every core's codes, :attr:`StepLists.core_grad_slots`), and ``stats``: per tracker,
    the records' sum of |acc| and the results' count."""
    sizes = [math.prod(shape) for shape in lists.cores]
    scales = np.repeat(np.ldexp(1.0, -np.asarray(lists.fracs.core_grad)), sizes)  # exact: codes times powers of 2
    values = (np.asarray(arena).view("<i2")[lists.core_grad_slots] * scales).astype(np.float32)  # not a buffer's type
    return {"core_grads": [part.reshape(shape) for part, shape in zip(np.split(values, np.cumsum(sizes)[:-1]),
                                                                      lists.cores)],
            "stats": _record_sums(lists, arena)}


def _record_sums(lists: StepLists, arena: np.ndarray) -> Dict[Tuple[str, int], Tuple[int, int]]:
    """Per tracker, its records' sum of |acc| (exact: each half summed in uint64, a few thousand records at most)
    and its results' count, in one gather over every record (a tracker without a record sums to 0)."""
    stats, words, starts, counts = lists.stat_records
    found = np.diff(np.append(starts, words.size)) > 0  # reduceat gives an empty group its next record
    sums = np.zeros((2, len(stats)), np.uint64)
    if found.any():
        for half, name in enumerate(("sum_abs_lo", "sum_abs_hi")):
            sums[half, found] = np.add.reduceat(arena[words + RECORD[name]].astype(np.uint64), starts[found])
    return {stat: (low + (high << 32), count) for stat, low, high, count in zip(stats, *sums.tolist(), counts)}


def _y(lists: StepLists, arena: np.ndarray) -> np.ndarray:
    """The layer output's accumulators (B, M), its rows' padding dropped."""
    offset, words = lists.outputs["y"]
    m = lists.cores[-1][1]
    rows = _words(arena, offset, lists.y_rows * lists.y_width, words).reshape(lists.y_rows, lists.y_width)
    return rows[:, :m].reshape(lists.batch, -1)


def _raw_input_grad(lists: StepLists, arena: np.ndarray) -> np.ndarray:
    """The input gradient's accumulators (B, N), a view of the arena."""
    batch, n_all = lists.batch, math.prod(s[2] for s in lists.cores)
    offset, words = lists.outputs["grad_x"]
    return _words(arena, offset, batch * n_all, words).reshape(batch, n_all)


def input_grad(layer: TtLayerState, lists: StepLists, arena: np.ndarray, fracs: Fracs, *,
               x: np.ndarray | None = None, inside: np.ndarray | None = None) -> np.ndarray | None:
    """The layer's input gradient (B, N) float32 after the backward lists, zero where the input saturated (None
    for the network's input): all a lower layer's step waits for, so the host reads it first and leaves the rest
    of :func:`finish` for while the lower layer's lists run. ``inside``: where the input ``x`` lay within its
    codes' bounds, as :func:`~codesign.step.tt.rounding.quantize_and_range` gave it with the codes (else worked
    out from ``x``)."""
    if "grad_x" not in lists.outputs or layer.is_network_input:
        return None
    if inside is None:
        if x is None:
            raise ValueError("the input gradient needs the input x, or where it lay within its codes' bounds")
        inside = in_code_range(scaled_for_codes(x, fracs.act[0], layer.activation_bits), layer.activation_bits)
    return (to_values(_raw_input_grad(lists, arena), fracs.grad[0] + fracs.core[0]) * inside).astype(np.float32)


def layer_output(layer: TtLayerState, lists: StepLists, arena: np.ndarray, book: ScaleBook, fracs: Fracs
                 ) -> np.ndarray:
    """The layer output (B, M) in float64 after the forward lists: the PE's accumulators plus the bias the host
    quantises at a scale aimed at it (its tracker moves in ``book``)."""
    d = len(layer.cores)
    y = to_values(_y(lists, arena), fracs.act[d - 1] + fracs.core[d - 1])
    if layer.bias is not None:
        bias = layer.bias.astype(np.float64)
        frac_b = frac_of_values(bias, bits=layer.bias_bits, headroom_bits=layer.activation_headroom_bits,
                                current=book.trackers["bias_frac_bits"][0], update=True)
        book.trackers["bias_frac_bits"][0] = frac_b
        y = y + to_values(quantize_values(bias, frac_b, layer.bias_bits), frac_b)
    return y


def finish(layer: TtLayerState, x: np.ndarray | None, g_top: np.ndarray, lists: StepLists, arena: np.ndarray,
           book: ScaleBook, fracs: Fracs, y: np.ndarray | None = None, grad_x: np.ndarray | None = None
           ) -> StepResult:
    """The host's part after the lists: the layer output (plus the bias it writes), the input gradient masked
    where the input saturated, the core and bias gradients as values, and the tracked scales moved on by the
    records' sums. ``book`` holds the scales the host aimed before the step (the input's, the output
    gradient's); the result is the step :func:`codesign.step.tt.step.pe_step` takes under the tracked rule.
    ``y``: the layer output :func:`layer_output` gave after the forward lists (else it is read again);
    ``grad_x``: the input gradient :func:`input_grad` gave (else worked out here from ``x``)."""
    d = len(layer.cores)
    found = read_outputs(lists, arena)
    y = layer_output(layer, lists, arena, book, fracs) if y is None else y
    widths = {"act_frac_bits": (layer.activation_bits, layer.activation_headroom_bits),
              "grad_frac_bits": (layer.grad_bits, layer.grad_headroom_bits),
              "core_grad_frac_bits": (layer.grad_bits, layer.grad_headroom_bits)}
    sources = z_fracs(fracs, d)
    for (name, index), (total, count) in sorted(found["stats"].items()):
        bits, headroom = widths[name]
        book.observe(name, index, total, count, sources[(name, index)], bits=bits, headroom_bits=headroom)
    if grad_x is None:
        grad_x = input_grad(layer, lists, arena, fracs, x=x)
    bias_grad = None
    if layer.bias is not None:
        _, codes = book.round("bias_grad_frac_bits", 0, g_top.sum(axis=0), fracs.grad[d - 1], bits=layer.grad_bits,
                              headroom_bits=layer.grad_headroom_bits)
        bias_grad = to_values(codes, book.frac("bias_grad_frac_bits", 0)).astype(np.float32)
    trackers, means = book.as_tuples()
    return StepResult(y=y.astype(np.float32), grad_x=grad_x, bias_grad=bias_grad, trackers=trackers, means=means,
                      core_grads=found["core_grads"])
