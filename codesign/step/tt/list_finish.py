"""The host's part of a TT layer step run as call lists (:mod:`codesign.step.tt.step_lists`), which a board runs
too: read the outputs, add the bias, mask the input gradient, and move the tracked scales on by the records'
sums."""

from __future__ import annotations

import math
from typing import Dict, Tuple

import numpy as np

from codesign.step.tt.layer_state import TtLayerState
from codesign.step.tt.list_reads import BackwardReads
from codesign.step.tt.rounding import (biased_float32, biased_relu_codes, frac_of_values, in_code_range, masked_codes,
                                      masked_float32, quantize_values, scaled_for_codes, to_values)
from codesign.step.tt.scale_book import ScaleBook
from codesign.step.tt.step import StepResult
from codesign.step.tt.step_lists import Fracs, StepLists, z_fracs

def _words(arena: np.ndarray, offset: int, values: int, words: int) -> np.ndarray:
    """``values`` raw results from byte ``offset``: 32-bit words, or 64-bit (two words) when drained; a signed
    view of the arena, which the caller converts before the arena is written again."""
    flat = np.ascontiguousarray(arena[offset // 4:offset // 4 + words * values], dtype=np.uint32)
    return flat.view(np.int32) if words == 1 else flat.view(np.int64)  # a view: the caller converts at once


def read_backward(lists: StepLists, arena: np.ndarray, reads: BackwardReads
                  ) -> Tuple[Dict[int, np.ndarray], Dict[Tuple[str, int], Tuple[int, int]]]:
    """What the host reads after the backward lists but the input gradient (:func:`input_grad`; the output ``y``
    it read after the forward ones, :func:`layer_output`), of ``reads`` (:attr:`StepLists.backward_reads`): the
    core gradients as float32 values, each in its core's layout (one gather), by core; and per tracker the
    records' sum of |acc| and the results' count."""
    scales, ends = lists.gradient_scales(reads.cores)
    values = (np.asarray(arena).view("<i2")[reads.core_slots] * scales).astype(np.float32)  # exact: codes × 2^-f
    grads = {k: values[ends[i]:ends[i + 1]].reshape(lists.cores[k]) for i, k in enumerate(reads.cores)}
    return grads, _record_sums(reads, arena)


def _record_sums(reads: BackwardReads, arena: np.ndarray) -> Dict[Tuple[str, int], Tuple[int, int]]:
    """Per tracker, its records' sum of |acc| (exact: each half summed in uint64, a few thousand records at most)
    and its results' count, in one gather over every record's two sum words (a tracker without a record sums
    to 0)."""
    sums = np.zeros((len(reads.stats), 2), np.uint64)
    if reads.sum_starts.size:
        sums[reads.summed] = np.add.reduceat(arena[reads.sum_words].astype(np.uint64), reads.sum_starts)
    return {stat: (low + (high << 32), count) for stat, (low, high), count in zip(reads.stats, sums.tolist(),
                                                                                 reads.counts)}


def read_early(layer: TtLayerState, lists: StepLists, arena: np.ndarray, book: ScaleBook, fracs: Fracs,
               reads: BackwardReads | None = None) -> Dict[int, np.ndarray]:
    """What the phases before the backward's last wrote, read while the last computes: the core gradients it
    does not write (returned by core, as :func:`read_backward`), and the records of the trackers it does not
    move (moved on in ``book``). :func:`finish` given them reads only the last phase's. ``reads``: a part of them
    (:meth:`StepLists.reads_ending`), where the host takes them in parts beside the phases they are done by."""
    grads, stats = read_backward(lists, arena, lists.backward_reads[1] if reads is None else reads)
    _observe(layer, book, fracs, stats)
    return grads


def _observe(layer: TtLayerState, book: ScaleBook, fracs: Fracs,
             stats: Dict[Tuple[str, int], Tuple[int, int]]) -> None:
    """The tracked scales moved on by the records' sums ``stats`` (:func:`read_backward`'s)."""
    widths = {"act_frac_bits": (layer.activation_bits, layer.activation_headroom_bits),
              "grad_frac_bits": (layer.grad_bits, layer.grad_headroom_bits),
              "core_grad_frac_bits": (layer.grad_bits, layer.grad_headroom_bits)}
    sources = z_fracs(fracs, len(layer.cores))
    for (name, index), (total, count) in sorted(stats.items()):
        bits, headroom = widths[name]
        book.observe(name, index, total, count, sources[(name, index)], bits=bits, headroom_bits=headroom)


def _y(lists: StepLists, arena: np.ndarray, samples: Tuple[int, int] | None = None) -> np.ndarray:
    """The layer output's accumulators (B, M), its rows' padding dropped; of ``samples`` (first, stop) alone where
    given (a sample's rows lie together)."""
    offset, words = lists.outputs["y"]
    first, stop = (0, lists.batch) if samples is None else samples
    m, per = lists.cores[-1][1], lists.y_rows // lists.batch  # a sample's rows
    values = per * lists.y_width
    rows = _words(arena, offset + 4 * words * values * first, values * (stop - first), words)
    return rows.reshape(-1, lists.y_width)[:, :m].reshape(stop - first, -1)


def _raw_input_grad(lists: StepLists, arena: np.ndarray) -> np.ndarray:
    """The input gradient's accumulators (B, N), a view of the arena."""
    batch, n_all = lists.batch, math.prod(s[2] for s in lists.cores)
    offset, words = lists.outputs["grad_x"]
    return _words(arena, offset, batch * n_all, words).reshape(batch, n_all)


def input_grad(layer: TtLayerState, lists: StepLists, arena: np.ndarray, fracs: Fracs, *,
               x: np.ndarray | None = None, inside: np.ndarray | None = None) -> np.ndarray | None:
    """The layer's input gradient (B, N) after the backward lists, of the layer's hand-off type, zero where the
    input saturated (None for the network's input): all a lower layer's step waits for, so the host reads it first
    and leaves the rest of :func:`finish` for while the lower layer's lists run. ``inside``: where the input ``x``
    lay within its codes' bounds, as :func:`~codesign.step.tt.rounding.relu_codes_and_range` gave it with the codes
    (else worked out from ``x``)."""
    if "grad_x" not in lists.outputs or layer.is_network_input:
        return None
    if inside is None:
        if x is None:
            raise ValueError("the input gradient needs the input x, or where it lay within its codes' bounds")
        inside = in_code_range(scaled_for_codes(x, fracs.act[0], layer.activation_bits), layer.activation_bits)
    acc, frac = _raw_input_grad(lists, arena), fracs.grad[0] + fracs.core[0]
    if layer.hand_off_dtype == np.float32:
        return masked_float32(acc, frac, inside)
    values = to_values(acc, frac)  # exact, a new array
    values *= inside  # -0.0 where a negative value is cut, as the step's product
    return values


def handed_gradient_codes(layer: TtLayerState, lists: StepLists, arena: np.ndarray, fracs: Fracs, inside: np.ndarray,
                          frac: int, bits: int) -> np.ndarray | None:
    """The layer below's output-gradient codes at ``frac`` (``bits`` wide), as float32 whole numbers, straight
    from this layer's input-gradient accumulators (:func:`~codesign.step.tt.rounding.masked_codes`): the codes
    :func:`input_grad`'s values round to, with neither those values nor a cast between; None where the layer does
    not hand off in float32 or that is not provably the same. The values are the host's for later, off the path
    between the lists."""
    if "grad_x" not in lists.outputs or layer.is_network_input or layer.hand_off_dtype != np.float32:
        return None
    return masked_codes(_raw_input_grad(lists, arena), fracs.grad[0] + fracs.core[0], inside, frac, bits)


def handed_input_codes(layer: TtLayerState, lists: StepLists, arena: np.ndarray, book: ScaleBook, fracs: Fracs,
                       bias: np.ndarray | None, frac: int, bits: int, samples: Tuple[int, int] | None = None
                       ) -> tuple[np.ndarray, np.ndarray] | None:
    """The next layer's input codes at ``frac`` (``bits`` wide), as float32 whole numbers, and where its input lay
    within their bounds, straight from this layer's output accumulators plus ``bias`` (:func:`bias_values`')
    (:func:`~codesign.step.tt.rounding.biased_relu_codes`): what the ReLU of :func:`layer_output`'s float32
    output gives, without it; None where the layer does not hand off in float32 or that is not provably the
    same. Of ``samples`` (first, stop) alone where given."""
    if layer.hand_off_dtype != np.float32 or (layer.bias is not None and bias is None):
        return None
    d = len(layer.cores)
    return biased_relu_codes(_y(lists, arena, samples), fracs.act[d - 1] + fracs.core[d - 1], bias,
                             book.trackers["bias_frac_bits"][0], _output_acc_bits(layer, lists), frac, bits)


def bias_values(layer: TtLayerState, book: ScaleBook) -> np.ndarray | None:
    """The bias as the layer output adds it (float64; None for a layer without one): quantised at a scale aimed at
    it (its tracker moves in ``book``). It needs neither input nor result, so the host takes it while the
    layer's forward lists compute."""
    if layer.bias is None:
        return None
    bias = layer.bias.astype(np.float64)
    frac_b = frac_of_values(bias, bits=layer.bias_bits, headroom_bits=layer.activation_headroom_bits,
                            current=book.trackers["bias_frac_bits"][0], update=True)
    book.trackers["bias_frac_bits"][0] = frac_b
    return to_values(quantize_values(bias, frac_b, layer.bias_bits), frac_b)


def layer_output(layer: TtLayerState, lists: StepLists, arena: np.ndarray, book: ScaleBook, fracs: Fracs, *,
                 bias: np.ndarray | None = None) -> np.ndarray:
    """The layer output (B, M) after the forward lists, of the layer's hand-off type: the PE's accumulators plus
    the bias (``bias``: :func:`bias_values`' where the host took it before, else taken here), in float64, then
    rounded once to float32 where the layer hands off in float32 (straight in float32 where that is the same)."""
    d = len(layer.cores)
    acc, z_frac = _y(lists, arena), fracs.act[d - 1] + fracs.core[d - 1]
    if layer.bias is not None and bias is None:
        bias = bias_values(layer, book)
    if layer.hand_off_dtype == np.float32:
        fast = biased_float32(acc, z_frac, bias, book.trackers["bias_frac_bits"][0], _output_acc_bits(layer, lists))
        if fast is not None:
            return fast
    y = to_values(acc, z_frac)  # a new array: the bias added in place
    if bias is not None:
        y += bias
    return y.astype(layer.hand_off_dtype, copy=False)


def _output_acc_bits(layer: TtLayerState, lists: StepLists) -> int:
    """A bound on the output's accumulators, |acc| <= 2^bits: the last contraction sums a·n products of activation
    and core codes."""
    a, _, n, _ = lists.cores[-1]
    return layer.activation_bits + layer.core_bits - 2 + (a * n - 1).bit_length()


def bias_gradient(layer: TtLayerState, g_codes: np.ndarray, book: ScaleBook, fracs: Fracs) -> np.ndarray | None:
    """The bias gradient (float32; None for a layer without a bias): the output gradient's codes summed over the
    batch and rounded at its tracked scale (its tracker moves in ``book``). It needs only the codes the host
    wrote, so the host takes it while the layer's backward lists compute."""
    if layer.bias is None:
        return None
    d = len(layer.cores)
    _, codes = book.round("bias_grad_frac_bits", 0, g_codes.sum(axis=0), fracs.grad[d - 1], bits=layer.grad_bits,
                          headroom_bits=layer.grad_headroom_bits)
    return to_values(codes, book.frac("bias_grad_frac_bits", 0)).astype(np.float32)


def finish(layer: TtLayerState, x: np.ndarray | None, g_top: np.ndarray, lists: StepLists, arena: np.ndarray,
           book: ScaleBook, fracs: Fracs, y: np.ndarray | None = None, grad_x: np.ndarray | None = None,
           bias_grad: np.ndarray | None = None, early: Dict[int, np.ndarray] | None = None) -> StepResult:
    """The host's part after the lists: the layer output (plus the bias it writes), the input gradient masked
    where the input saturated, the core and bias gradients as values, and the tracked scales moved on by the
    records' sums. ``book`` holds the scales the host aimed before the step (the input's, the output
    gradient's); the result is the step :func:`codesign.step.tt.step.pe_step` takes under the tracked rule.
    Given what the host took before, it is not taken again: ``y``, the layer output :func:`layer_output` gave
    after the forward lists (not copied where of the hand-off type, as the step returns it); ``grad_x``, the input
    gradient :func:`input_grad` gave (else worked out here from ``x``); ``bias_grad``, :func:`bias_gradient`'s of
    ``g_top``, the output gradient's codes; ``early``, :func:`read_early`'s core gradients (its records observed
    in ``book``)."""
    grads, stats = read_backward(lists, arena, lists.backward_reads[0 if early is None else 2])
    _observe(layer, book, fracs, stats)
    grads.update(early or {})
    y = layer_output(layer, lists, arena, book, fracs) if y is None else y
    if grad_x is None:
        grad_x = input_grad(layer, lists, arena, fracs, x=x)
    if bias_grad is None:
        bias_grad = bias_gradient(layer, g_top, book, fracs)
    trackers, means = book.as_tuples()
    return StepResult(y=np.asarray(y, dtype=layer.hand_off_dtype), grad_x=grad_x, bias_grad=bias_grad,
                      trackers=trackers, means=means, core_grads=[grads[k] for k in range(len(layer.cores))])
