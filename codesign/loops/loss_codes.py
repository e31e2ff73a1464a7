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
  lies within ``+-2^error_frac / n``.

Units: ``logit_frac`` and ``error_frac`` are fraction bits; codes are signed 8-bit integers.
"""

from __future__ import annotations

import math
from typing import Optional, Tuple

import numpy as np

from codesign.loops.common import label_positions, softmax_gradient
from codesign.loops.csb import quantize_unit
from codesign.numerics.fixed_quant import to_values
from codesign.pe.csb.spec import DATA_BITS

_TOP = float((1 << (DATA_BITS - 1)) - 1)  # the largest code (a float: a ufunc takes it at once)
_EXACT_FRAC = 960  # fraction bits whose powers of two, and their products with the values here, stay normal


def softmax_gradient_codes(z: np.ndarray, y: np.ndarray, *, logit_frac: int, error_frac: int,
                           out: Optional[np.ndarray] = None, labels_at: Optional[np.ndarray] = None
                           ) -> Tuple[np.ndarray, np.ndarray]:
    """The loss gradient's 8-bit codes (int8, ``(n, classes)``, row-major) of integer logits ``z`` ``(n, classes)``
    at ``logit_frac`` fraction bits (of any memory order) and labels ``y``, at ``error_frac`` fraction bits; and
    the labels' probabilities (:func:`~codesign.loops.common.softmax_gradient`'s ``chosen``). Equal bit for bit to
    the loop's composition, which it falls back to for fractions beyond ``+-960`` bits or accumulators wider than
    32 bits. ``out``: an int8 array of any shape whose row-major order is the codes' (a view of the device's code
    tiles, :meth:`~codesign.step.csb.arena.CsbArena.code_view`), rounded into and returned in their place.
    ``labels_at``: ``label_positions(y, n, classes)`` (:func:`~codesign.loops.common.label_positions`, which checks
    the labels), where the caller took them already (a list step, beside its forward)."""
    z = np.asarray(z)
    n, classes = z.shape
    if out is not None and (out.dtype != np.int8 or out.size != n * classes):
        raise ValueError(f"codes of {n} x {classes} into an array of {out.size} {out.dtype}")
    if labels_at is not None and labels_at.shape != (n,):
        raise ValueError(f"{labels_at.shape} label positions for {n} samples")
    if (z.dtype.kind not in "iu" or z.dtype.itemsize > 4 or abs(logit_frac) > _EXACT_FRAC
            or abs(error_frac) > _EXACT_FRAC or n == 0):
        grad, chosen = softmax_gradient(to_values(z, logit_frac), y)
        codes = quantize_unit(grad, error_frac).astype(np.int8)
        if out is None:
            return codes, chosen
        out[...] = codes.reshape(out.shape)
        return out, chosen
    probs = np.subtract(z, np.maximum.reduce(z, axis=1, keepdims=True), dtype=np.float64, order="C")
    probs *= math.ldexp(1.0, -logit_frac)
    np.exp(probs, out=probs)
    probs /= np.add.reduce(probs, axis=1, keepdims=True)  # row-major rows: each summed in softmax_gradient's order
    flat = probs.reshape(-1)
    picked = label_positions(y, n, classes) if labels_at is None else labels_at
    chosen = flat[picked]
    flat[picked] = chosen - 1.0
    if n & (n - 1):
        probs /= n
        probs *= math.ldexp(1.0, error_frac)
    else:
        probs *= math.ldexp(1.0, error_frac - (n.bit_length() - 1))
    bound = math.ldexp(1.0, error_frac) / n  # |every value| <= bound
    if bound > _TOP:  # clipped before rounding: the codes' ends are whole, so either order gives the same
        np.minimum(probs, _TOP, out=probs)
    if bound > _TOP + 1:
        np.maximum(probs, -_TOP - 1, out=probs)
    if out is None:
        return np.rint(probs, out=probs).astype(np.int8), chosen
    np.rint(probs.reshape(out.shape), out=out, casting="unsafe")  # whole values within the codes: cast exactly
    return out, chosen


__all__ = ["softmax_gradient_codes"]
