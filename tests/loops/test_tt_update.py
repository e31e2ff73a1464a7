"""The host's update of a TT layer (codesign.loops.tt_update): Adam and the rank prior against torch's, Adam over
many arrays at once bit for bit what it is array by array, and which slices pruning keeps."""

from __future__ import annotations

import copy
import math
from pathlib import Path

import numpy as np
import pytest

from codesign.design import load_design
from codesign.design.families.tt import tt_setup_of
from codesign.loops.tt import TtMlpTrainer, TtTrainSetup
from codesign.loops.tt_update import (ADAM_BETAS, ADAM_EPS, Adam, keep_slices, prior_grads, slice_lambdas,
                                      slice_squares)

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.fixture(scope="module")
def setup() -> TtTrainSetup:
    return tt_setup_of(load_design(EXAMPLES / "digits_tt.toml"))


def test_adam_follows_torch_adam():
    """Element-wise the update torch.optim.Adam defines; float32 rounding order may differ by an ulp or two."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(0)
    start = rng.normal(size=(16, 9)).astype(np.float32)
    for weight_decay in (0.0, 1e-3):
        param = torch.nn.Parameter(torch.from_numpy(start.copy()))
        reference = torch.optim.Adam([param], lr=0.01, weight_decay=weight_decay)
        mine, value = Adam(weight_decay), start.copy()
        for _ in range(30):
            grad = (rng.normal(size=start.shape) * 10.0 ** rng.integers(-5, 2)).astype(np.float32)
            param.grad = torch.from_numpy(grad.copy())
            reference.step()
            mine.advance()
            value = mine.update((0, 0), value, grad, 0.01)
        np.testing.assert_allclose(value, param.detach().numpy(), rtol=2e-6, atol=1e-7)


def test_the_prior_matches_torch_autograd_of_the_rank_prior(setup):
    """lambda and the prior's gradient are those of codesign.train.tt.rank (float64, autograd)."""
    torch = pytest.importorskip("torch")
    from codesign.train.tt.layer import TTLinear
    from codesign.train.tt.rank import map_lambdas, negative_log_prior
    from codesign.train.tt.ttm import TTMatrix

    cores = TtMlpTrainer(setup).cores[0]
    layer = TTLinear.from_ttm(TTMatrix(cores=[c.astype(np.float64) for c in cores], in_modes=(4, 4, 4),
                                       out_modes=(4, 4, 4)))
    for core in layer.cores:
        core.data = core.data.to(torch.float64)
    lambdas = [lam.numpy() for lam in map_lambdas(layer)]
    for mine, theirs in zip(slice_lambdas(cores), lambdas):
        np.testing.assert_allclose(mine, theirs, rtol=1e-6)
    scale = 0.37
    (scale * negative_log_prior(layer, [torch.from_numpy(lam) for lam in lambdas])).backward()
    for mine, core in zip(prior_grads(cores, lambdas, scale), layer.cores):
        np.testing.assert_allclose(mine, core.grad.numpy(), rtol=1e-6)


def test_lambdas_from_terms_taken_before_are_the_bits_of_lambdas_taken_at_once(setup):
    """A rank's λ from one core's term taken apart (slice_squares, as the list trainer takes an updated core's
    beside its last phase) and the other's at once: the bits of every term at once; a term given is taken."""
    cores = TtMlpTrainer(setup).cores[0]
    whole = slice_lambdas(cores)
    for k in range(1, len(cores)):
        for j in (k - 1, k):
            given = slice_lambdas(cores, only=[k], squares={(k, j): slice_squares(cores, k, j)})[0]
            assert given.tobytes() == whole[k - 1].tobytes()
            other = slice_lambdas(cores, only=[k], squares={(k, j): 2 * slice_squares(cores, k, j)})[0]
            assert not np.array_equal(other, whole[k - 1])
    assert [lam.tobytes() for lam in slice_lambdas(cores, only=[2, 1], squares={})] == [
        whole[1].tobytes(), whole[0].tobytes()]


def test_keep_slices_keeps_at_least_min_rank():
    lambdas = [np.array([1.0, 0.001, 0.5, 0.002]), np.array([0.01, 0.02, 1.0])]
    kept = keep_slices(lambdas, 0.1, 1)
    assert [k.tolist() for k in kept] == [[0, 2], [2]]
    assert [k.tolist() for k in keep_slices(lambdas, 0.1, 2)] == [[0, 2], [1, 2]]


def _one_array_adam(param, grad, moments, step, lr, weight_decay):
    """Adam on one array as torch.optim.Adam states it, in float32, an operation at a time."""
    beta1, beta2 = ADAM_BETAS
    grad = grad.astype(np.float32)
    if weight_decay:
        grad = grad + np.float32(weight_decay) * param
    m, v = moments
    m = m + np.float32(1 - beta1) * (grad - m)
    v = v * np.float32(beta2) + np.float32(1 - beta2) * grad * grad
    denom = np.sqrt(v) / np.float32(math.sqrt(1 - beta2 ** step)) + np.float32(ADAM_EPS)
    return (param - np.float32(lr / (1 - beta1 ** step)) * (m / denom)).astype(np.float32), (m, v)


@pytest.mark.parametrize("weight_decay", [0.0, 1e-3])
def test_adam_over_arrays_laid_end_to_end_equals_adam_array_by_array_bit_for_bit(weight_decay):
    """update_all over a layer's cores and bias (float64 gradients among them, as the prior's sum gives) equals
    the one-array update bit for bit, moments too, over 12 steps; a slice pruned out of one core's moments halfway
    lays the moments out again, as a deep copy does, and a key updated on its own between group updates is seen by
    the group."""
    rng = np.random.default_rng(5)
    shapes = [(1, 4, 4, 3), (3, 4, 4, 2), (2, 4, 4, 1), (16,)]
    params = [rng.normal(size=s).astype(np.float32) for s in shapes]
    mine, theirs = Adam(weight_decay), [(p.copy(), (np.zeros_like(p), np.zeros_like(p))) for p in params]
    keys = [(0, 0), (0, 1), (0, 2), (0, -1)]
    for step in range(1, 13):
        mine.advance()
        lr = 0.01 / step
        if step == 6:  # pruning: the second rank slice of cores 0 and 1 goes, from parameters and moments alike
            kept = np.array([0, 2])
            params[0], params[1] = np.take(params[0], kept, axis=3), np.take(params[1], kept, axis=0)
            mine.slice((0, 0), 3, kept)
            mine.slice((0, 1), 0, kept)
            for k, axis in ((0, 3), (1, 0)):
                p, (m, v) = theirs[k]
                theirs[k] = (np.take(p, kept, axis=axis), tuple(np.take(x, kept, axis=axis) for x in (m, v)))
        grads = [(rng.normal(size=p.shape) * 10.0 ** rng.integers(-6, 3)).astype(np.float32 if i % 2 else np.float64)
                 for i, p in enumerate(params)]
        grads[0].flat[:3] = (0.0, 1e-30, -3e4)
        if step == 4:  # a deep copy (as a pickled trainer): its moments are no views of its flat arrays any more
            mine = copy.deepcopy(mine)
            for key, (_, (m, _)) in zip(keys, theirs):  # halved in place on both sides: the update must read it
                mine.moments[key][0][...] *= np.float32(0.5)
                m *= np.float32(0.5)
        if step == 9:  # one key on its own, then the group again
            params[3] = mine.update((0, -1), params[3], grads[3], lr)
            p, moments = theirs[3]
            theirs[3] = _one_array_adam(p, grads[3], moments, step, lr, weight_decay)
        params = mine.update_all(keys, params, grads, lr)
        theirs = [_one_array_adam(p, g, moments, step, lr, weight_decay) for (p, moments), g in zip(theirs, grads)]
        for key, got, (want, (m, v)) in zip(keys, params, theirs):
            assert got.dtype == np.float32 and got.shape == want.shape
            assert got.tobytes() == want.tobytes(), (step, key)
            assert mine.moments[key][0].tobytes() == m.tobytes() and mine.moments[key][1].tobytes() == v.tobytes()


def test_adam_restored_from_a_snapshot_updates_as_if_the_updates_after_it_never_ran():
    rng = np.random.default_rng(9)
    params = [rng.normal(size=(2, 3, 3, 2)).astype(np.float32), rng.normal(size=(4,)).astype(np.float32)]
    keys, grads = [(0, 0), (0, -1)], [[rng.normal(size=p.shape).astype(np.float32) for p in params] for _ in range(3)]
    mine, other = Adam(1e-3), Adam(1e-3)
    for adam in (mine, other):
        adam.advance()
        adam.update_all(keys, params, grads[0], 0.01)
    kept = mine.snapshot()
    mine.advance()
    mine.update_all(keys, params, grads[1], 0.01)  # a step that fails later
    mine.update((1, 0), params[1], grads[1][1], 0.01)  # a key the step added
    mine.restore(kept)
    assert mine.step == other.step and set(mine.moments) == set(other.moments)
    for adam in (mine, other):
        adam.advance()
    got, want = mine.update_all(keys, params, grads[2], 0.01), other.update_all(keys, params, grads[2], 0.01)
    assert all(a.tobytes() == b.tobytes() for a, b in zip(got, want))
    assert all(mine.moments[key][i].tobytes() == other.moments[key][i].tobytes() for key in keys for i in (0, 1))
