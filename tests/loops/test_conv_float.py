"""The warm-up's NumPy convolutions against torch's (float64), and exact on integer codes."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from codesign.loops.conv_float import conv2d, conv2d_grads, correlate


@pytest.mark.parametrize("n, c, h, w, o, k, s", [(3, 2, 7, 9, 4, 3, 1), (3, 2, 8, 8, 4, 3, 2), (2, 3, 7, 7, 5, 1, 2),
                                                 (2, 3, 6, 5, 4, 5, 1), (4, 6, 1, 1, 3, 1, 1)])
def test_conv_and_its_gradients_are_torch_s(n, c, h, w, o, k, s):
    rng = np.random.default_rng(n * 100 + k * 10 + s)
    x, weight = rng.normal(size=(n, c, h, w)), rng.normal(size=(o, c, k, k))
    tx, tw = torch.tensor(x, requires_grad=True), torch.tensor(weight, requires_grad=True)
    tz = torch.nn.functional.conv2d(tx, tw, stride=s, padding=(k - 1) // 2)
    dz = rng.normal(size=tuple(tz.shape))
    tz.backward(torch.tensor(dz))
    grad_w, grad_x = conv2d_grads(x, weight, dz, s)
    np.testing.assert_allclose(conv2d(x, weight, s), tz.detach().numpy(), rtol=0, atol=1e-12)
    np.testing.assert_allclose(grad_w, tw.grad.numpy(), rtol=0, atol=1e-11)
    np.testing.assert_allclose(grad_x, tx.grad.numpy(), rtol=0, atol=1e-12)
    assert conv2d_grads(x, weight, dz, s, input_grad=False)[1] is None


def test_integer_codes_give_exact_sums():
    """8-bit codes at the extremes: every product and sum is an integer float64 holds exactly."""
    rng = np.random.default_rng(5)
    x = rng.choice([-128, 127, -1, 0, 1], size=(8, 64, 6, 6))
    weight = rng.choice([-128, 127, 3], size=(16, 64, 3, 3))
    want = np.einsum("nchwij,ocij->nohw",
                     np.lib.stride_tricks.sliding_window_view(x, (3, 3), axis=(2, 3)), weight.astype(np.int64))
    assert np.array_equal(correlate(x, weight, 1).astype(np.int64), want)
