"""The softmax cross-entropy's gradient as 8-bit codes, straight from the logits' accumulators.

A CSB list step's host has one piece of serial work: between the forward's and the backward's lists it turns
the logits' 32-bit accumulators into the loss gradient's codes, and every IP waits meanwhile. The loop computes
``quantize_unit(softmax_gradient(to_values(z, logit_frac), y)[0], error_frac)`` (:mod:`codesign.loops.common`,
:mod:`codesign.loops.csb`); :func:`softmax_gradient_codes` gives the same codes, bit for bit, in fewer passes
over the batch, as each pass of NumPy costs a board's ARM about as much as its arithmetic on a batch's logits:

* the row maxima are taken on the integer accumulators and subtracted as the float64 conversion, then scaled by
  ``2^-logit_frac``: both differences are exact (integers below ``2^33`` times a normal power of two), so they
  equal the logits less their row maxima;
* for a power-of-two batch, dividing by ``n`` and scaling by ``2^error_frac`` is one product by
  ``2^error_frac / n``: both are exact where the result is normal, and where ``p / n`` would be subnormal the
  value is far below one half either way, so it rounds to 0 alike;
* the clip to the code range is skipped where the values cannot leave it: ``|p - [label]| <= 1``, so every value
  lies within ``+-2^error_frac / n``;
* for a power-of-two batch the labels' one-hot, scaled alike, is subtracted after the scaling as a dense array
  made beside the forward (:class:`LabelTerms`): ``p * 2^k - 2^k`` rounds as ``(p - 1) * 2^k`` wherever the
  result is normal, and to the same code where it is not, and a scattered update of the labels' entries costs
  more than a pass; the constants are kept per batch size and fractions.

Units: ``logit_frac`` and ``error_frac`` are fraction bits; codes are signed 8-bit integers.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import NamedTuple, Optional, Tuple

import numpy as np

from codesign.loops.common import label_positions, softmax_gradient
from codesign.loops.csb import quantize_unit
from codesign.numerics.fixed_quant import to_values
from codesign.pe.csb.spec import DATA_BITS

_TOP = float((1 << (DATA_BITS - 1)) - 1)  # the largest code (a float: a ufunc takes it at once)
_EXACT_FRAC = 960  # fraction bits whose powers of two, and their products with the values here, stay normal


class _Scales(NamedTuple):
    """The fast path's constants for one batch size and pair of fractions (:func:`_scales`)."""

    logits: float  # 2^-logit_frac
    divide_first: bool  # a batch of other than a power of two: divided by n, then scaled by 2^error_frac
    codes: float  # 2^error_frac / n for a power-of-two batch, else 2^error_frac
    clip_top: bool  # whether values can pass the largest code
    clip_bottom: bool  # whether values can pass the smallest


@functools.lru_cache(maxsize=64)
def _scales(dtype: np.dtype, n: int, logit_frac: int, error_frac: int) -> Optional[_Scales]:
    """The fast path's constants, or None where it does not hold (accumulators wider than 32 bits or not
    integers, fractions beyond ``+-960`` bits, no samples): kept, as a list step asks every step."""
    if dtype.kind not in "iu" or dtype.itemsize > 4 or max(abs(logit_frac), abs(error_frac)) > _EXACT_FRAC or n == 0:
        return None
    bound = math.ldexp(1.0, error_frac) / n  # |every value| <= bound
    per_sample = _per_sample(n, error_frac)
    codes = math.ldexp(1.0, error_frac) if per_sample is None else per_sample
    return _Scales(math.ldexp(1.0, -logit_frac), per_sample is None, codes, bound > _TOP, bound > _TOP + 1)


def _per_sample(n: int, error_frac: int) -> Optional[float]:
    """``2^error_frac / n`` for a power-of-two batch (a power of two itself, so a product by it is exact); None
    for another batch size."""
    return None if n & (n - 1) else math.ldexp(1.0, error_frac - (n.bit_length() - 1))


@dataclass(frozen=True, eq=False)
class LabelTerms:
    """A batch's labels as the codes take them, made where the batch is checked (a list step: beside its
    forward, :func:`label_terms`): ``at``, their flat positions among the ``(n, classes)`` logits
    (:func:`~codesign.loops.common.label_positions`); ``scaled``, for a power-of-two batch, the one-hot times
    ``2^error_frac / n`` (float64, ``n * classes``), which the codes subtract after their scaling: a dense
    subtraction where the label entries would be gathered, lowered and scattered back. It rounds as the loop's
    ``(p - 1) * 2^k`` wherever the result is normal (a product by a power of two is exact), and where it is not
    the value rounds to the same code. ``error_frac``: the fraction bits ``scaled`` is for; ``shape``: the
    logits' ``(n, classes)`` both are for."""

    at: np.ndarray
    scaled: Optional[np.ndarray]
    error_frac: int
    shape: Tuple[int, int]


def label_terms(y, n: int, classes: int, error_frac: int) -> LabelTerms:
    """:class:`LabelTerms` of labels ``y`` (each within ``classes``, else an error) for ``n`` samples."""
    at = label_positions(y, n, classes)
    per_sample = _per_sample(n, error_frac) if n and abs(error_frac) <= _EXACT_FRAC else None
    scaled = None
    if per_sample is not None:
        scaled = np.zeros(n * classes)
        scaled[at] = per_sample
    return LabelTerms(at=at, scaled=scaled, error_frac=error_frac, shape=(n, classes))


def softmax_gradient_codes(z: np.ndarray, y: np.ndarray, *, logit_frac: int, error_frac: int,
                           out: Optional[np.ndarray] = None, labels: Optional[LabelTerms] = None
                           ) -> Tuple[np.ndarray, np.ndarray]:
    """The loss gradient's 8-bit codes (int8, ``(n, classes)``, row-major) of integer logits ``z`` ``(n, classes)``
    at ``logit_frac`` fraction bits (of any memory order) and labels ``y``, at ``error_frac`` fraction bits; and
    the labels' probabilities (:func:`~codesign.loops.common.softmax_gradient`'s ``chosen``). Equal bit for bit to
    the loop's composition, which it falls back to for fractions beyond ``+-960`` bits or accumulators wider than
    32 bits. ``out``: an int8 array of any shape whose row-major order is the codes' (a view of the device's code
    tiles, :meth:`~codesign.step.csb.arena.CsbArena.code_view`), rounded into and returned in their place.
    ``labels``: ``label_terms(y, n, classes, error_frac)``, where the caller made them already (a list step,
    beside its forward)."""
    z = np.asarray(z)
    n, classes = z.shape
    if out is not None and (out.dtype != np.int8 or out.size != n * classes):
        raise ValueError(f"codes of {n} x {classes} into an array of {out.size} {out.dtype}")
    if labels is not None and labels.shape != z.shape:
        raise ValueError(f"labels' terms made for {labels.shape[0]} x {labels.shape[1]} logits, given {n} x {classes}")
    scales = _scales(z.dtype, n, logit_frac, error_frac)
    if scales is None:
        grad, chosen = softmax_gradient(to_values(z, logit_frac), y)
        codes = quantize_unit(grad, error_frac).astype(np.int8)
        if out is None:
            return codes, chosen
        out[...] = codes.reshape(out.shape)
        return out, chosen
    probs = np.subtract(z, np.maximum.reduce(z, axis=1, keepdims=True), dtype=np.float64, order="C")
    probs *= scales.logits
    np.exp(probs, out=probs)
    probs /= np.add.reduce(probs, axis=1, keepdims=True)  # row-major rows: each summed in softmax_gradient's order
    flat = probs.reshape(-1)
    picked = label_positions(y, n, classes) if labels is None else labels.at
    chosen = flat[picked]
    one_hot = None if labels is None or labels.error_frac != error_frac else labels.scaled
    if one_hot is None or scales.divide_first:
        flat[picked] = chosen - 1.0
        if scales.divide_first:
            probs /= n
        probs *= scales.codes
    else:
        probs *= scales.codes
        flat -= one_hot
    if scales.clip_top:  # clipped before rounding: the codes' ends are whole, so either order gives the same
        np.minimum(probs, _TOP, out=probs)
    if scales.clip_bottom:
        np.maximum(probs, -_TOP - 1, out=probs)
    if out is None:
        return np.rint(probs, out=probs).astype(np.int8), chosen
    np.rint(probs, out=probs)
    out[...] = probs.reshape(out.shape)  # whole values within the codes: cast exactly
    return out, chosen


__all__ = ["LabelTerms", "label_terms", "softmax_gradient_codes"]
