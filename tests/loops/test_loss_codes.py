"""The compressed loops' loss gradient (codesign.loops.loss_codes): the integer definition the CSB PE's LOSS
computes, on the loops' (samples, classes) logits, and a clear error for fractions it cannot take."""

from __future__ import annotations

import numpy as np
import pytest

from codesign.loops.common import HwTrainError, softmax_cross_entropy
from codesign.loops.loss_codes import check_loss_fractions, gradient_codes, loss_of
from codesign.numerics.loss_grad import LossGradConfig, loss_grad_codes
from codesign.pe.csb.reference import loss_codes


@pytest.mark.parametrize("n, classes, logit_frac, error_frac", [(64, 10, 12, 13), (5, 3, 0, 4), (16, 10, -8, 16)])
def test_gradient_codes_are_the_definition_on_samples_by_classes(n, classes, logit_frac, error_frac):
    rng = np.random.default_rng(n)
    z = rng.integers(-(1 << 14), 1 << 14, size=(n, classes))
    y = rng.integers(0, classes, size=n)
    got = gradient_codes(z, y, logit_frac=logit_frac, error_frac=error_frac)
    config = LossGradConfig.of_fractions(classes=classes, batch=n, logit_frac=logit_frac, error_frac=error_frac)
    np.testing.assert_array_equal(got, loss_grad_codes(z.T, y, config=config).T)
    reference = loss_codes(z.T.tolist(), y.tolist(), batch=n, exp_shift=config.exp_shift,
                           recip_shift=config.recip_shift)
    np.testing.assert_array_equal(got, np.array(reference).T)
    assert got.shape == (n, classes) and got.min() >= -128 and got.max() <= 127


def test_loss_is_the_float_cross_entropy_of_the_logits():
    z = np.array([[3, -1, 0], [0, 7, -2]])
    y = np.array([2, 1])
    assert loss_of(z, y, logit_frac=2) == softmax_cross_entropy(z / 4.0, y)[0]


@pytest.mark.parametrize("logit_frac, error_frac, message", [(24, 10, "logit_frac"), (-9, 10, "logit_frac"),
                                                             (10, 17, "error_frac"), (10, -33, "error_frac")])
def test_fractions_outside_the_definition_are_refused(logit_frac, error_frac, message):
    with pytest.raises(HwTrainError, match=message):
        check_loss_fractions(64, 10, logit_frac=logit_frac, error_frac=error_frac)
    with pytest.raises(HwTrainError, match="cannot be computed"):
        gradient_codes(np.zeros((4, 10), np.int64), np.zeros(4, np.int64), logit_frac=logit_frac,
                       error_frac=error_frac)
