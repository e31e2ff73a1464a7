"""The compressed loops' loss gradient: 8-bit codes of ``(softmax - onehot) / n`` from the logits' accumulators.

The CSB loops (the MLP's, :mod:`codesign.loops.csb`, and the conv network's, :mod:`codesign.loops.csb_conv`)
round the loss gradient with :func:`codesign.numerics.loss_grad.loss_grad_codes`, an integer definition that the
CSB PE's LOSS computes bit for bit (docs/csb.md, "The loss on the PE"). So a list step whose build has the LOSS
unit runs it on the PE and the host computes nothing between the forward and the backward; on a build without
it the host computes the same codes here. The loss itself, which only the report reads, stays the float64
softmax cross-entropy of the logits (:func:`codesign.loops.common.softmax_cross_entropy`).

Units: ``logit_frac`` and ``error_frac`` are fraction bits; codes are signed 8-bit integers.
"""

from __future__ import annotations

import functools

import numpy as np

from codesign.loops.common import HwTrainError, softmax_cross_entropy
from codesign.numerics.fixed_quant import to_values
from codesign.numerics.loss_grad import LossGradConfig, exp_shift_of, recip_shift_of, sample_codes


@functools.lru_cache(maxsize=64)
def loss_config(n: int, classes: int, logit_frac: int, error_frac: int) -> LossGradConfig:
    """The loss gradient's config for ``n`` samples of ``classes`` (kept: a step's batch recurs); an HwTrainError
    where the fractions or sizes lie outside what the definition takes."""
    try:
        return LossGradConfig(classes=classes, batch=n, exp_shift=exp_shift_of(logit_frac),
                              recip_shift=recip_shift_of(error_frac))
    except (TypeError, ValueError) as err:
        raise HwTrainError(f"the loss gradient's codes cannot be computed for {n} samples of {classes} classes with "
                           f"logits at {logit_frac} and codes at {error_frac} fraction bits: {err}") from None


def check_loss_fractions(n: int, classes: int, *, logit_frac: int, error_frac: int) -> None:
    """Refuse, at the switch to fixed point, fractions the loss gradient cannot take (:func:`loss_config`)."""
    loss_config(n, classes, logit_frac, error_frac)


def gradient_codes(z, y, *, logit_frac: int, error_frac: int) -> np.ndarray:
    """The loss gradient's codes (int64, ``(n, classes)``) of the logits' accumulators ``z`` (``(n, classes)``)
    and the labels ``y``."""
    z = np.asarray(z)
    config = loss_config(z.shape[0], z.shape[1], logit_frac, error_frac)
    return sample_codes(z, np.asarray(y, dtype=np.int64), config=config)


def loss_of(z, y, *, logit_frac: int) -> float:
    """The step's loss: the float64 softmax cross-entropy of the logits ``z * 2^-logit_frac``."""
    return softmax_cross_entropy(to_values(np.asarray(z), logit_frac), y)[0]


__all__ = ["check_loss_fractions", "gradient_codes", "loss_config", "loss_of"]
