"""The softmax cross-entropy's gradient as 8-bit codes, in integers a PE computes: the loss on the accelerator.

Between a training step's forward and backward, the logits' 32-bit accumulators become the loss gradient's
codes, ``(softmax(z) - onehot(y)) / n`` at the head's error fraction. On the host that is the step's one piece of
serial work (every IP waits for it), and on a board's ARM it costs more than the PE's whole step. This module
defines that gradient in integer arithmetic a PE carries out with a 256-entry table, adders, one divider and one
multiplier, so the loss can move onto the PE (docs/csb.md, "The loss on the PE"). Per sample (a lane ``j``):

1. ``m = max_c z[c]``; ``d[c] = m - z[c]`` (``0 <= d < 2^32``);
2. the exponent in base 2 with :data:`EXP_FRAC_BITS` fraction bits: ``u = floor(d * LOG2E_Q16 / 2^exp_shift)``
   (``exp_shift = logit_frac + 16 - EXP_FRAC_BITS``: ``d / 2^logit_frac`` is the logit difference, and
   ``LOG2E_Q16 / 2^16`` is ``log2(e)``);
3. ``e[c] = EXP_TABLE[u mod 256] >> floor(u / 256)``: ``2^16 * 2^(-u / 256)``, 0 from a quotient of 17 on
   (``EXP_TABLE[f] = round(2^16 * 2^(-f / 256))``, so the largest logit's ``e`` is ``2^16`` exactly);
4. ``S = sum_c e[c]`` (``2^16 <= S <= classes * 2^16``) and the reciprocal ``r = floor(2^recip_shift / (S * n))``
   (``recip_shift = error_frac + 32``, at most 48: ``r <= 2^32``);
5. ``w[c] = (e[c] - [c == y] * S) * r``, which is ``(p[c] - [c == y]) * 2^error_frac / n * 2^32`` up to the
   roundings above (the reciprocal's floor moves a code by less than ``2^-11``);
6. the code ``saturate_8(round_half_to_even(w[c] / 2^32))``: a fixed shift, so the PE rounds with no shifter.

A lane without a sample (label :data:`NO_SAMPLE`) gives codes 0. The probabilities are within about 0.3 % of
the float softmax's (the exponent's 8 fraction bits), so the codes stay within one of the float gradient's
(``tests/numerics/test_loss_grad.py``); the bits are this definition's, which the golden loop, the HLS C++ and
the RTL share. Everything is exact int64 NumPy. Units: fractions in bits, codes signed 8-bit integers.
"""

from __future__ import annotations

from typing import Tuple

import numpy as np

from codesign.numerics.records import keyword_record
from codesign.numerics.round_stage import rounded_shift

EXP_FRAC_BITS = 8  # fraction bits of the base-2 exponent: the table's index
EXP_ONE_BITS = 16  # e of the largest logit is 2^16
LOG2E_Q16 = 94548  # round(log2(e) * 2^16)
EXP_LIMIT = EXP_ONE_BITS + 1  # an exponent's integer part from which e is 0 (every table entry is <= 2^16)
CODE_SHIFT = 32  # the code is w / 2^32, rounded
RECIP_SHIFT_MAX = 48  # r = floor(2^recip_shift / (S * n)) <= 2^32
CODE_BITS = 8
MAX_CLASSES = 65_536  # classes a sample (S <= 2^32: int64 holds every product; the PE takes 32)
MAX_BATCH = 65_536  # samples a step divides by (the PE's field takes 4095)
EXP_SHIFT_RANGE = (0, 31)  # the PE's 5-bit shift field
RECIP_SHIFT_RANGE = (0, RECIP_SHIFT_MAX)
NO_SAMPLE = -1  # a lane's label where the lane holds no sample


def _exp_table() -> Tuple[int, ...]:
    return tuple(int(round(2.0 ** (EXP_ONE_BITS - f / (1 << EXP_FRAC_BITS)))) for f in range(1 << EXP_FRAC_BITS))


EXP_TABLE = _exp_table()  # 2^16 * 2^(-f / 256), rounded to the nearest integer (no entry is a tie)
_TABLE = np.array(EXP_TABLE, dtype=np.int64)
_TABLE.flags.writeable = False
# e of every exponent u below 17 * 256, then 0 at 17 * 256 (every u from there gives 0): one gather on min(u, 4352)
_E_OF_U = np.append(_TABLE[np.arange(EXP_LIMIT << EXP_FRAC_BITS) & ((1 << EXP_FRAC_BITS) - 1)]
                    >> (np.arange(EXP_LIMIT << EXP_FRAC_BITS) >> EXP_FRAC_BITS), 0)
_E_OF_U.flags.writeable = False


def _check_int(name: str, value: object, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    if not low <= value <= high:
        raise ValueError(f"{name}={value} is outside {low}..{high}")
    return int(value)


@keyword_record
class LossGradConfig:
    """One loss-gradient computation: ``classes`` per sample, the batch ``n`` the gradient is divided by, and the
    two shifts (:func:`exp_shift_of` a logit fraction, :func:`recip_shift_of` an error fraction)."""

    classes: int
    batch: int
    exp_shift: int
    recip_shift: int

    def __post_init__(self) -> None:
        _check_int("classes", self.classes, 1, MAX_CLASSES)
        _check_int("batch", self.batch, 1, MAX_BATCH)
        _check_int("exp_shift", self.exp_shift, *EXP_SHIFT_RANGE)
        _check_int("recip_shift", self.recip_shift, *RECIP_SHIFT_RANGE)

    @classmethod
    def of_fractions(cls, *, classes: int, batch: int, logit_frac: int, error_frac: int) -> "LossGradConfig":
        """The config for logits at ``logit_frac`` and codes at ``error_frac`` fraction bits."""
        return cls(classes=classes, batch=batch, exp_shift=exp_shift_of(logit_frac),
                   recip_shift=recip_shift_of(error_frac))


def exp_shift_of(logit_frac: int) -> int:
    """``exp_shift`` for logits at ``logit_frac`` fraction bits; a ValueError outside -8..23."""
    _check_int("logit_frac", logit_frac, EXP_SHIFT_RANGE[0] - EXP_ONE_BITS + EXP_FRAC_BITS,
               EXP_SHIFT_RANGE[1] - EXP_ONE_BITS + EXP_FRAC_BITS)
    return int(logit_frac) + EXP_ONE_BITS - EXP_FRAC_BITS


def recip_shift_of(error_frac: int) -> int:
    """``recip_shift`` for codes at ``error_frac`` fraction bits; a ValueError outside -32..16 (a batch of up to
    about 500 samples: the codes' fraction is about ``7 + log2(n)``)."""
    _check_int("error_frac", error_frac, RECIP_SHIFT_RANGE[0] - CODE_SHIFT, RECIP_SHIFT_RANGE[1] - CODE_SHIFT)
    return int(error_frac) + CODE_SHIFT


def _check_inputs(z, labels, config: LossGradConfig) -> Tuple[np.ndarray, np.ndarray]:
    z = np.asarray(z)
    labels = np.asarray(labels)
    if z.ndim != 2 or z.shape[0] != config.classes:
        raise ValueError(f"z must be (classes={config.classes}, lanes), got shape {z.shape}")
    if z.dtype.kind not in "iu" or (z.size and (z.min() < -(1 << 31) or z.max() >= 1 << 31)):
        raise ValueError("z must hold signed 32-bit integers (the logits' accumulators)")
    if labels.shape != (z.shape[1],) or labels.dtype.kind not in "iu":
        raise ValueError(f"labels must be {z.shape[1]} integers (one a lane), got {labels.dtype} {labels.shape}")
    bad = (labels != NO_SAMPLE) & ((labels < 0) | (labels >= config.classes))
    if np.any(bad):
        raise ValueError(f"labels {sorted(set(labels[bad].tolist()))[:4]} are outside 0..{config.classes - 1} "
                         f"(or {NO_SAMPLE}: no sample)")
    return z.astype(np.int64), labels.astype(np.int64)


def exp_codes(z: np.ndarray, exp_shift: int) -> np.ndarray:
    """``e`` of steps 1-3 (int64, the shape of ``z``): each lane's logits against their maximum, down axis 0."""
    d = z.max(axis=0, keepdims=True) - z  # < 2^32
    u = (d * LOG2E_Q16) >> exp_shift  # < 2^49
    whole = np.minimum(u >> EXP_FRAC_BITS, EXP_LIMIT)
    return _TABLE[u & ((1 << EXP_FRAC_BITS) - 1)] >> whole


def loss_grad_codes(z, labels, *, config: LossGradConfig) -> np.ndarray:
    """The loss gradient's codes (int64 in -128..127, the shape of ``z``) of the logits' accumulators ``z``
    (``classes`` x lanes, a lane a sample) and each lane's label (``NO_SAMPLE``: codes 0)."""
    z, labels = _check_inputs(z, labels, config)
    if z.shape[1] == 0:
        return np.zeros(z.shape, np.int64)
    e = exp_codes(z, config.exp_shift)
    total = e.sum(axis=0)  # 2^16 .. classes * 2^16
    recip = (1 << config.recip_shift) // (total * config.batch)  # 0 .. 2^32
    chosen = np.arange(config.classes)[:, None] == labels[None, :]
    w = (e - np.where(chosen, total, 0)) * recip  # |w| <= 2^recip_shift / n <= 2^48
    top = (1 << (CODE_BITS - 1)) - 1
    codes = np.clip(rounded_shift(w, -CODE_SHIFT), -top - 1, top)  # the rounding stage's rounding
    return np.where(labels[None, :] == NO_SAMPLE, 0, codes)


def sample_codes(z: np.ndarray, labels: np.ndarray, *, config: LossGradConfig) -> np.ndarray:
    """:func:`loss_grad_codes` of ``z`` laid out samples x classes (``z.T`` there) and every label a class, bit for
    bit, in place on one int64 copy: the host's form (a build without the LOSS unit computes the codes between a
    list step's forward and backward while every IP waits). Neither the sizes nor the labels are checked here: the
    caller's batch check has done so. The rounding at bit 32 is ``floor((w + 2^31 - 1 + bit 32 of w) / 2^32)``."""
    e = z.astype(np.int64)
    np.subtract(e.max(axis=1, keepdims=True), e, out=e)
    e *= LOG2E_Q16
    e >>= config.exp_shift
    np.minimum(e, EXP_LIMIT << EXP_FRAC_BITS, out=e)
    e = _E_OF_U[e]
    total = e.sum(axis=1)
    recip = (1 << config.recip_shift) // (total * config.batch)
    e[np.arange(e.shape[0]), labels] -= total
    e *= recip[:, None]
    bit = e >> CODE_SHIFT
    bit &= 1
    e += (1 << (CODE_SHIFT - 1)) - 1
    e += bit
    e >>= CODE_SHIFT
    top = (1 << (CODE_BITS - 1)) - 1
    return np.clip(e, -top - 1, top, out=e)


__all__ = ["CODE_BITS", "CODE_SHIFT", "EXP_FRAC_BITS", "EXP_LIMIT", "EXP_ONE_BITS", "EXP_SHIFT_RANGE", "EXP_TABLE",
           "LOG2E_Q16", "LossGradConfig", "MAX_BATCH", "MAX_CLASSES", "NO_SAMPLE", "RECIP_SHIFT_MAX",
           "RECIP_SHIFT_RANGE", "exp_codes", "exp_shift_of", "loss_grad_codes", "recip_shift_of", "sample_codes"]
