"""The CSB PE's LOSS transaction (element-wise op 3): the logits' accumulators in, the loss gradient's codes out.

A list step's host turned the logits into the loss gradient's codes between the forward and the backward, while
every IP waited (docs/csb.md, "The loss on the PE"). LOSS computes :func:`codesign.numerics.loss_grad.
loss_grad_codes` on a tile of ``classes`` rows of the PE's ``batch`` lanes (a lane a sample), so the rounding
stage packs its codes (shift 0, 8 bits) straight into the head's error tile.

Words after the header (op 3, flag ``EW``, ``shift`` = ``exp_shift``, ``nnz`` = ``classes``):

* ``P``, one word: ``recip_shift`` in bits 5..0 (0..48) and the batch ``n`` in bits 27..16 (1..4095), the rest 0;
* ``Y``, ``batch`` words: each lane's label, 0..classes-1, or ``0xFFFFFFFF`` for a lane without a sample;
* ``V``, ``classes * batch`` words: the logits' accumulators (``acc_bits`` values) row by row, a row a class.

Out: status, then ``classes * batch`` codes in ``V``'s order, sign-extended. A ``P`` with reserved bits set, a
``recip_shift`` above 48 or ``n = 0``, or a label outside its range, answers status 3 alone after the whole
transaction (as an index outside the block does); ``classes = 0`` or a build without the unit (``loss=False``) is
status 1, and more classes than ``min(ew_capacity / batch, 32)`` status 2, on the header alone. Every section
starts on a new beat on a wide stream.
"""

from __future__ import annotations

import numpy as np

from codesign.numerics import loss_grad
from codesign.pe.csb.spec import CsbSpec

PARAM_SHIFT_BITS = 6  # recip_shift: P[5:0], at most 48
PARAM_BATCH_AT = 16  # n: P[27:16]
PARAM_BATCH_BITS = 12
PARAM_FIELDS = (1 << PARAM_SHIFT_BITS) - 1 | ((1 << PARAM_BATCH_BITS) - 1) << PARAM_BATCH_AT
NO_SAMPLE_WORD = 0xFFFF_FFFF  # a lane without a sample
PE_MAX_CLASSES = 32  # classes of one LOSS transaction at most


def max_classes(spec: CsbSpec) -> int:
    """The most classes one LOSS transaction takes on this PE: its elements (classes times the lanes) within
    ``ew_capacity``, at most :data:`PE_MAX_CLASSES` (the unit's sums ``S <= 32 * 2^16`` take 22 bits)."""
    return min(spec.ew_capacity // spec.batch, PE_MAX_CLASSES)


def param_word(*, recip_shift: int, batch: int) -> int:
    """``P`` of a LOSS transaction (the fields checked as :class:`~codesign.numerics.loss_grad.LossGradConfig`
    does)."""
    loss_grad.LossGradConfig(classes=1, batch=batch, exp_shift=0, recip_shift=recip_shift)
    if batch >= 1 << PARAM_BATCH_BITS:
        raise ValueError(f"batch={batch} does not fit P's {PARAM_BATCH_BITS}-bit field (1..4095)")
    return int(recip_shift) | int(batch) << PARAM_BATCH_AT


def read_param(word: int) -> tuple[int, int] | None:
    """``(recip_shift, batch)`` of a ``P`` word, or None where the PE answers status 3 (reserved bits, a
    ``recip_shift`` above 48, ``n = 0``)."""
    word = int(word)
    batch = word >> PARAM_BATCH_AT & ((1 << PARAM_BATCH_BITS) - 1)
    if word & ~PARAM_FIELDS or word & 0x3F > loss_grad.RECIP_SHIFT_MAX or batch == 0:
        return None
    return word & ((1 << PARAM_SHIFT_BITS) - 1), batch


def read_labels(words: np.ndarray, classes: int) -> np.ndarray | None:
    """Each lane's label (int64, ``NO_SAMPLE`` for a lane without one) from ``Y``'s words, or None where one lies
    outside ``0..classes-1`` and is not ``0xFFFFFFFF`` (status 3)."""
    words = np.asarray(words, np.int64)
    if np.any((words >= classes) & (words != NO_SAMPLE_WORD)):
        return None
    return np.where(words == NO_SAMPLE_WORD, loss_grad.NO_SAMPLE, words)


def label_words(labels) -> np.ndarray:
    """``Y``'s words (uint32) of each lane's label (``NO_SAMPLE``: no sample)."""
    labels = np.asarray(labels, np.int64)
    return np.where(labels == loss_grad.NO_SAMPLE, NO_SAMPLE_WORD, labels).astype(np.uint32)


def compute(spec: CsbSpec, classes: int, exp_shift: int, data: dict) -> np.ndarray:
    """The codes (int64, flat in ``V``'s order) of an accepted LOSS whose ``P`` and ``Y`` read well."""
    recip_shift, batch = data["param"]
    config = loss_grad.LossGradConfig(classes=classes, batch=batch, exp_shift=exp_shift, recip_shift=recip_shift)
    return loss_grad.loss_grad_codes(data["v"].reshape(classes, spec.batch), data["labels"],
                                     config=config).reshape(-1)


__all__ = ["NO_SAMPLE_WORD", "PARAM_FIELDS", "compute", "label_words", "max_classes", "param_word", "read_labels",
           "read_param"]
