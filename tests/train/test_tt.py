"""TT matrices and TT layers: TT-SVD, contractions, gradients, low precision, rank pruning, bad input, determinism.

The oracles here are written from the definitions, not from the code under
test: a TT matrix entry is the product of its core slices (paper 003,
Definition 1), TT-SVD's error lies between the unfoldings' best-rank errors
(Eckart-Young) and their root sum of squares (Oseledets 2011, Thm. 2.2).
"""

import dataclasses
import itertools
import math

import numpy as np
import pytest
import torch

from codesign.numerics import FixedFormat
from codesign.train.quantize import quantize
from codesign.numerics.scales import mean_abs_frac_bits, mean_code_range
from codesign.train.config import DataConfig, ModelConfig, OptimConfig, TrainConfig
from codesign.train.tt import (RankPrior, TTLayerSpec, TTLinear, TTMatrix, TTMLPConfig, TTPrecision, rebuild_optimizer,
                               tt_backward, tt_forward, tt_layers, tt_trainer)
from codesign.train.tt.rank import prune_keep
from codesign.train.tt.ttm import dense_route_sizes

IN_MODES, OUT_MODES = (3, 2, 4), (2, 3, 2)  # W is (12, 24)


def random_cores(ranks, out_modes=OUT_MODES, in_modes=IN_MODES, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal((ranks[k], out_modes[k], in_modes[k], ranks[k + 1])) for k in range(len(in_modes))]


def dense_oracle(cores, out_modes=OUT_MODES, in_modes=IN_MODES):
    """W[i, j] as the product of the core slices G_k[:, i_k, j_k, :], entry by entry (works for torch too)."""
    rows = []
    for i in itertools.product(*(range(m) for m in out_modes)):
        row = []
        for j in itertools.product(*(range(n) for n in in_modes)):
            product = cores[0][:, i[0], j[0], :]
            for k in range(1, len(cores)):
                product = product @ cores[k][:, i[k], j[k], :]
            row.append(product[0, 0])
        rows.append(torch.stack(row) if isinstance(row[0], torch.Tensor) else np.array(row))
    return torch.stack(rows) if isinstance(rows[0], torch.Tensor) else np.array(rows)


def unfolding_singular_values(matrix, out_modes=OUT_MODES, in_modes=IN_MODES):
    """Singular values of the k-th TT unfolding of W viewed as a tensor with indices (i_1 j_1, ..., i_d j_d)."""
    d = len(in_modes)
    tensor = matrix.reshape(*out_modes, *in_modes).transpose([a for k in range(d) for a in (k, d + k)])
    sizes = [m * n for m, n in zip(out_modes, in_modes)]
    tensor = tensor.reshape(sizes)
    return [np.linalg.svd(tensor.reshape(math.prod(sizes[:k + 1]), -1), compute_uv=False) for k in range(d - 1)]


# -- TT-SVD and reconstruction -------------------------------------------------

def test_to_dense_is_the_product_of_core_slices():
    cores = random_cores((1, 2, 3, 1))
    ttm = TTMatrix(cores=cores, in_modes=IN_MODES, out_modes=OUT_MODES)
    assert ttm.ranks == (1, 2, 3, 1) and ttm.shape == (12, 24)
    np.testing.assert_allclose(ttm.to_dense(), dense_oracle(cores), rtol=0, atol=1e-12)


def test_tt_svd_at_full_rank_is_exact():
    matrix = np.random.default_rng(1).standard_normal((12, 24))
    ttm = TTMatrix.from_dense(matrix, IN_MODES, OUT_MODES, max_rank=1000)
    # a generic matrix has full-rank unfoldings: r_k = min(prod of the first k (m n), prod of the rest)
    # (m_k n_k) = 6, 6, 8: r_1 = min(6, 6 * 8), r_2 = min(6 * 6, 8)
    assert ttm.ranks == (1, 6, 8, 1)
    np.testing.assert_allclose(ttm.to_dense(), matrix, rtol=0, atol=1e-12)


def test_tt_svd_recovers_a_low_rank_tt_exactly():
    cores = random_cores((1, 2, 3, 1), seed=2)
    matrix = dense_oracle(cores)
    ttm = TTMatrix.from_dense(matrix, IN_MODES, OUT_MODES, max_rank=(2, 3))
    assert ttm.ranks == (1, 2, 3, 1)
    np.testing.assert_allclose(ttm.to_dense(), matrix, rtol=0, atol=1e-10)


@pytest.mark.parametrize("max_rank", [1, 2, (3, 2)])
def test_tt_svd_truncation_error_lies_within_the_unfolding_bounds(max_rank):
    matrix = np.random.default_rng(3).standard_normal((12, 24))
    ttm = TTMatrix.from_dense(matrix, IN_MODES, OUT_MODES, max_rank=max_rank)
    caps = (max_rank, max_rank) if isinstance(max_rank, int) else max_rank
    assert all(r <= cap for r, cap in zip(ttm.ranks[1:-1], caps))
    error2 = float(np.sum((ttm.to_dense() - matrix) ** 2))
    tails = [float(np.sum(s[cap:] ** 2)) for s, cap in zip(unfolding_singular_values(matrix), caps)]
    assert error2 <= sum(tails) * (1 + 1e-9)  # Oseledets: squared error <= sum of the discarded tails
    assert error2 >= max(tails) * (1 - 1e-9) > 0  # Eckart-Young: each unfolding of the result has rank <= r_k


def test_tt_svd_accepts_a_torch_matrix():
    matrix = torch.randn(12, 24, dtype=torch.float64)
    ttm = TTMatrix.from_dense(matrix, IN_MODES, OUT_MODES, max_rank=100)
    np.testing.assert_allclose(ttm.to_dense(), matrix.numpy(), atol=1e-12)


# -- contractions --------------------------------------------------------------

@pytest.mark.parametrize("backend", ["numpy", "torch"])
def test_forward_contractions_equal_the_dense_matmul(backend):
    cores = random_cores((1, 3, 2, 1), seed=4)
    x = np.random.default_rng(5).standard_normal((7, 24))
    expected = x @ dense_oracle(cores).T
    if backend == "torch":
        y, saved = tt_forward(torch.from_numpy(x), [torch.from_numpy(c) for c in cores])
        y = y.numpy()
    else:
        y, saved = tt_forward(x, cores)
    assert y.shape == (7, 12) and len(saved) == 3
    np.testing.assert_allclose(y, expected, rtol=0, atol=1e-12)


def test_backward_contractions_equal_the_dense_gradients():
    cores = random_cores((1, 3, 2, 1), seed=6)
    rng = np.random.default_rng(7)
    x, grad_y = rng.standard_normal((5, 24)), rng.standard_normal((5, 12))
    _, saved = tt_forward(x, cores)
    grad_x, core_grads = tt_backward(grad_y, cores, saved)
    np.testing.assert_allclose(grad_x, grad_y @ dense_oracle(cores), rtol=0, atol=1e-12)
    # dL/dG_k through autograd of the entry-by-entry dense matrix
    tcores = [torch.from_numpy(c).requires_grad_() for c in cores]
    loss = (torch.from_numpy(x) @ dense_oracle(tcores).T * torch.from_numpy(grad_y)).sum()
    loss.backward()
    for mine, reference in zip(core_grads, tcores):
        np.testing.assert_allclose(mine, reference.grad.numpy(), rtol=0, atol=1e-12)
    # the network input needs no input gradient: the sweep stops short and the core gradients are unchanged
    none_x, again = tt_backward(grad_y, cores, saved, need_input_grad=False)
    assert none_x is None and all(np.array_equal(a, b) for a, b in zip(again, core_grads))


def test_float_layer_gradients_equal_autograd_of_the_dense_layer():
    cores = random_cores((1, 3, 2, 1), seed=8)
    bias = np.random.default_rng(9).standard_normal(12)
    layer = TTLinear.from_ttm(TTMatrix(cores=cores, in_modes=IN_MODES, out_modes=OUT_MODES), bias=bias).double()
    x = torch.randn(6, 24, dtype=torch.float64, requires_grad=True)
    weights = torch.randn(6, 12, dtype=torch.float64)
    (layer(x) * weights).sum().backward()

    x_ref = x.detach().clone().requires_grad_()
    tcores = [core.detach().clone().requires_grad_() for core in layer.cores]  # the layer stores float32 values
    b_ref = layer.bias.detach().clone().requires_grad_()
    ((x_ref @ dense_oracle(tcores).T + b_ref) * weights).sum().backward()
    torch.testing.assert_close(x.grad, x_ref.grad, rtol=0, atol=1e-12)
    torch.testing.assert_close(layer.bias.grad, b_ref.grad, rtol=0, atol=1e-12)
    for core, reference in zip(layer.cores, tcores):
        torch.testing.assert_close(core.grad, reference.grad, rtol=0, atol=1e-12)


def test_float_layer_passes_gradcheck():
    cores = random_cores((1, 2, 2, 1), seed=10)
    layer = TTLinear.from_ttm(TTMatrix(cores=cores, in_modes=IN_MODES, out_modes=OUT_MODES), bias=np.zeros(12)).double()
    x = torch.randn(3, 24, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda inp, *cs: layer(inp), (x, *layer.cores))


# -- low precision ---------------------------------------------------------------

def test_mean_abs_scale_puts_the_mean_code_in_range():
    rng = np.random.default_rng(11)
    for bits, headroom in ((4, 1), (8, 3), (16, 6)):
        low, high = mean_code_range(bits, headroom)
        assert (low, high) == (2.0 ** (bits - 2 - headroom), 2.0 ** (bits - 1 - headroom))
        for mean in np.exp(rng.uniform(-20, 10, size=200)):
            frac_bits = mean_abs_frac_bits(float(mean), bits=bits, headroom_bits=headroom, fallback=0)
            assert isinstance(frac_bits, int) and low <= mean * 2.0**frac_bits < high
        # exact powers of two sit on the lower edge, not above it
        assert mean_abs_frac_bits(1.0, bits=bits, headroom_bits=headroom, fallback=0) == bits - 2 - headroom
    assert mean_abs_frac_bits(0.0, bits=8, headroom_bits=3, fallback=-7) == -7
    with pytest.raises(ValueError, match="headroom_bits"):
        mean_abs_frac_bits(1.0, bits=8, headroom_bits=7, fallback=0)


def quantized_layer(seed=12, **precision):
    torch.manual_seed(seed)
    return TTLinear(24, 12, in_modes=IN_MODES, out_modes=OUT_MODES, max_rank=3, precision=TTPrecision(**precision))


def codes(values, frac_bits):
    scaled = np.ldexp(np.asarray(values, dtype=np.float64), int(frac_bits))
    assert np.array_equal(scaled, np.round(scaled)), "values are not integer codes at this power-of-two scale"
    return scaled


def test_quantized_layer_uses_codes_in_range_at_power_of_two_scales():
    layer = quantized_layer()
    x = torch.rand(16, 24) * 3
    out = layer(x)
    (out * torch.randn_like(out)).sum().backward()
    q = layer.precision_tt
    for k, core in enumerate(layer.tt_matrix(quantized=True).cores):
        c = codes(core, layer.core_frac_bits[k])
        assert c.min() >= -(2 ** (q.core_bits - 1)) and c.max() <= 2 ** (q.core_bits - 1) - 1
    for k, core in enumerate(layer.cores):  # 16-bit core gradients
        c = codes(core.grad.numpy(), layer.core_grad_frac_bits[k])
        assert np.abs(c).max() <= 2 ** (q.grad_bits - 1)
    codes(layer.bias.grad.numpy(), layer.bias_grad_frac_bits[0])
    # the input's scale puts its mean |code| in the 8-bit range
    low, high = mean_code_range(q.activation_bits, q.activation_headroom_bits)
    assert low <= float(x.abs().mean()) * 2.0 ** int(layer.act_frac_bits[0]) < high
    assert all(int(f) > -1000 for f in layer.act_frac_bits)  # every intermediate was measured


def test_quantized_forward_is_the_exact_integer_result_without_intermediate_rounding():
    layer = quantized_layer(quantize_intermediates=False)
    x = torch.rand(8, 24)
    y = layer(x).detach().double()
    xq = quantize(x.double(), FixedFormat(bits=8, frac_bits=int(layer.act_frac_bits[0])))
    bq = quantize(layer.bias.detach().double(), FixedFormat(bits=8, frac_bits=int(layer.bias_frac_bits[0])))
    w = dense_oracle(layer.tt_matrix(quantized=True).cores)
    expected = (xq.numpy() @ w.T + bq.numpy()).astype(np.float32)
    np.testing.assert_array_equal(y.numpy(), expected.astype(np.float64))


def test_straight_through_gradient_stops_where_the_input_saturates():
    layer = quantized_layer()
    x = torch.rand(4, 24)
    x[1, 5] = 1e4  # far beyond the 8-bit range the mean |x| selects
    x.requires_grad_()
    layer(x).sum().backward()
    assert x.grad[1, 5] == 0
    assert bool((x.grad[0] != 0).all())


def test_eval_reuses_the_tracked_scales():
    layer = quantized_layer()
    layer(torch.rand(8, 24))
    tracked = layer.act_frac_bits.clone()
    layer.eval()
    layer(torch.rand(8, 24) * 1000)
    assert torch.equal(layer.act_frac_bits, tracked)


# -- rank pruning ------------------------------------------------------------------

def test_pruning_zero_slices_shrinks_the_cores_and_keeps_the_function():
    cores = random_cores((1, 4, 3, 1), seed=13)
    cores[0][..., 1] = 0.0  # slice 1 of r_1 contributes nothing
    cores[1][..., 2] = 0.0  # slice 2 of r_2 neither
    layer = TTLinear.from_ttm(TTMatrix(cores=cores, in_modes=IN_MODES, out_modes=OUT_MODES), bias=np.ones(12)).double()
    x = torch.randn(5, 24, dtype=torch.float64)
    before = layer(x)
    old = list(layer.cores)
    replaced = layer.prune_ranks({1: torch.tensor([0, 2, 3]), 2: torch.tensor([0, 1])})
    assert layer.ranks == (1, 3, 2, 1)
    assert [tuple(c.shape) for c in layer.cores] == [(1, 2, 3, 3), (3, 3, 2, 2), (2, 2, 4, 1)]
    assert {id(o) for o, _, _ in replaced} == {id(p) for p in old}
    assert all(p is not o for p, o in zip(layer.cores, old))
    torch.testing.assert_close(layer(x), before, rtol=0, atol=1e-12)
    np.testing.assert_array_equal(layer.cores[1].detach().numpy(), cores[1][[0, 2, 3]][..., [0, 1]].astype(np.float32))


def test_prune_keep_is_relative_and_keeps_a_minimum():
    keep = prune_keep([torch.tensor([1.0, 0.001, 0.5]), torch.tensor([1e-9, 1e-8])], threshold=0.01, min_rank=1)
    assert keep[1].tolist() == [0, 2]
    assert keep[2].tolist() == [0, 1]  # relative: 1e-9 is 10 % of the largest
    keep = prune_keep([torch.tensor([1.0, 0.001, 0.002])], threshold=0.5, min_rank=2)
    assert keep[1].tolist() == [0, 2]


def test_rebuilt_optimizer_continues_the_kept_slices():
    torch.manual_seed(0)
    layer = TTLinear(24, 12, in_modes=IN_MODES, out_modes=OUT_MODES, max_rank=3)
    optimizer = torch.optim.Adam(layer.parameters(), lr=1e-2)
    for _ in range(2):
        optimizer.zero_grad()
        layer(torch.randn(4, 24)).pow(2).sum().backward()
        optimizer.step()
    old_core0, old_core1 = layer.cores[0], layer.cores[1]
    old_state = {key: value.clone() for key, value in optimizer.state[old_core1].items()}
    replaced = layer.prune_ranks({1: torch.tensor([0, 2])})
    rebuilt = rebuild_optimizer(optimizer, replaced)
    params = rebuilt.param_groups[0]["params"]
    assert any(p is layer.cores[0] for p in params) and not any(p is old_core0 for p in params)
    state = rebuilt.state[layer.cores[1]]
    torch.testing.assert_close(state["exp_avg"], old_state["exp_avg"][[0, 2]])
    torch.testing.assert_close(state["exp_avg_sq"], old_state["exp_avg_sq"][[0, 2]])
    assert float(state["step"]) == float(old_state["step"]) == 2
    assert rebuilt.state[layer.bias]["exp_avg"].shape == (12,)
    rebuilt.zero_grad()
    layer(torch.randn(4, 24)).sum().backward()
    rebuilt.step()  # the new shapes and the sliced state agree
    assert not any(p is old_core1 for p in params)


# -- bad input ---------------------------------------------------------------------

@pytest.mark.parametrize("build, field", [
    (lambda: TTLinear(64, 256, in_modes=(4, 4, 3), out_modes=(4, 8, 8), max_rank=4), "in_modes"),
    (lambda: TTLinear(64, 256, in_modes=(4, 4, 4), out_modes=(4, 8, 4), max_rank=4), "out_modes"),
    (lambda: TTLinear(64, 256, in_modes=(8, 8), out_modes=(4, 8, 8), max_rank=4), "out_modes"),
    (lambda: TTLinear(64, 256, in_modes=(4, 4, 4), out_modes=(4, 8, 8), max_rank=0), "max_rank"),
    (lambda: TTLinear(64, 256, in_modes=(4, 4, 4), out_modes=(4, 8, 8), max_rank=(4,)), "max_rank"),
    (lambda: TTMatrix.from_dense(np.ones((12, 24)), (3, 2, 4), (2, 3, 3), 2), "out_modes"),
    (lambda: TTMatrix.from_dense(np.ones((12, 24)), (3, 2, 4), (2, 3, 2), -1), "max_rank"),
    (lambda: TTMatrix(cores=[np.ones((1, 2, 3, 2)), np.ones((3, 3, 2, 1))], in_modes=(3, 2), out_modes=(2, 3)),
     r"cores\[1\]"),
    (lambda: TTMatrix(cores=[np.ones((2, 2, 3, 2)), np.ones((2, 3, 2, 1))], in_modes=(3, 2), out_modes=(2, 3)),
     r"cores\[0\]"),
    (lambda: TTMatrix(cores=[np.ones((1, 2, 3, 2)), np.ones((2, 3, 2, 1))], in_modes=(3, 3), out_modes=(2, 3)),
     r"cores\[1\]"),
    (lambda: TTPrecision(core_bits=1), "precision.core_bits"),
    (lambda: TTPrecision(grad_bits=40), "precision.grad_bits"),
    (lambda: TTPrecision(activation_bits=8, activation_headroom_bits=7), "precision.activation_headroom_bits"),
    (lambda: TTPrecision(core_grad_route="outer"), "precision.core_grad_route"),
    (lambda: RankPrior(threshold=1.5), "prior.threshold"),
    (lambda: RankPrior(weight=-1.0), "prior.weight"),
    (lambda: TTLayerSpec(in_modes=(4, 0), out_modes=(2, 2), max_rank=2), "layer.in_modes"),
    (lambda: TTMLPConfig(layers=(TTLayerSpec(in_modes=(8, 8), out_modes=(4, 4), max_rank=2),
                                 TTLayerSpec(in_modes=(4, 2), out_modes=(2, 5), max_rank=2))), r"layers\[1\].in_modes"),
])
def test_bad_input_names_the_field(build, field):
    with pytest.raises(ValueError, match=f"^{field}"):
        build()


def test_bad_modes_fail_before_any_decomposition(monkeypatch):
    from codesign.train.tt import ttm

    def explode(*args, **kwargs):
        raise AssertionError("TT-SVD ran on invalid input")

    monkeypatch.setattr(ttm, "tt_svd", explode)
    with pytest.raises(ValueError, match="^in_modes"):
        TTMatrix.from_dense(np.ones((12, 24)), (5, 5), (3, 4), 2)


def test_pruning_refuses_bad_indices():
    layer = TTLinear.from_ttm(TTMatrix(cores=random_cores((1, 3, 2, 1)), in_modes=IN_MODES, out_modes=OUT_MODES))
    with pytest.raises(ValueError, match=r"^keep\[1\]"):
        layer.prune_ranks({1: torch.tensor([0, 3])})
    with pytest.raises(ValueError, match=r"^keep\[3\]"):
        layer.prune_ranks({3: torch.tensor([0])})
    assert layer.ranks == (1, 3, 2, 1)


# -- training in the project's trainer ---------------------------------------------

SMALL = TrainConfig(seed=3, data=DataConfig(name="synthetic", synthetic_samples=120),
                    model=ModelConfig(name="mlp", hidden=(32,)), optim=OptimConfig(epochs=3, batch_size=20, lr=1e-2))
TT_SMALL = TTMLPConfig(layers=(TTLayerSpec(in_modes=(8, 8), out_modes=(4, 8), max_rank=6),
                               TTLayerSpec(in_modes=(4, 8), out_modes=(2, 5), max_rank=4)))
PRIOR = RankPrior(weight=1.0, warmup_epochs=1, threshold=0.9, prune_from_epoch=1)  # a high bar: every run prunes


def test_same_seed_same_training_other_seed_other():
    runs = []
    for seed in (3, 3, 4):
        trainer = tt_trainer(SMALL.replace(seed=seed), TT_SMALL, PRIOR)
        result = trainer.fit()
        runs.append((trainer, result))
    (a, ra), (b, rb), (c, _) = runs
    assert ra.history == rb.history and ra.cost == rb.cost and ra.techniques == rb.techniques
    assert all(torch.equal(x, y) for x, y in zip(a.model.state_dict().values(), b.model.state_dict().values()))
    assert [layer.ranks for layer in tt_layers(a.model)] == [layer.ranks for layer in tt_layers(b.model)]
    assert not all(torch.equal(x, y) for x, y in zip(a.model.state_dict().values(), c.model.state_dict().values())
                   if x.shape == y.shape)


def test_rank_adaptation_prunes_and_training_continues_on_the_smaller_model():
    trainer = tt_trainer(SMALL, TT_SMALL, PRIOR)
    initial = [layer.ranks for layer in tt_layers(trainer.model)]
    result = trainer.fit()
    report = result.techniques["tt_rank"]
    final = [layer.ranks for layer in tt_layers(trainer.model)]
    assert report["prune_events"], "the strong prior should have pruned some rank"
    assert all(f <= i for fr, ir in zip(final, initial) for f, i in zip(fr, ir)) and final != initial
    assert [report["final_ranks"][layer.layer_name] for layer in tt_layers(trainer.model)] == [list(r) for r in final]
    assert len(report["rank_history"]) == SMALL.optim.epochs + 1
    # the optimiser holds exactly the model's (new) parameters
    held = {id(p) for group in trainer.optimizer.param_groups for p in group["params"]}
    assert held == {id(p) for p in trainer.model.parameters()}
    assert result.steps == 3 * 5


def test_ledger_counts_the_contractions_of_each_phase():
    config = SMALL.replace(data=DataConfig(name="synthetic", synthetic_samples=40, test_fraction=0.5),
                           optim=OptimConfig(epochs=1, batch_size=20, lr=1e-2))
    trainer = tt_trainer(config, TT_SMALL, None)
    ranks = [layer.ranks for layer in tt_layers(trainer.model)]
    result = trainer.fit()  # one batch of 20

    def macs(in_modes, out_modes, r, skip_first=False):
        total = []
        for k in range(len(in_modes)):
            done_out = math.prod(out_modes[:k])
            left_in = math.prod(in_modes[k + 1:])
            total.append(20 * done_out * left_in * r[k] * out_modes[k] * in_modes[k] * r[k + 1])
        return total

    first = macs((8, 8), (4, 8), ranks[0])
    second = macs((4, 8), (2, 5), ranks[1])
    phases = result.cost["by_phase"]
    assert phases["forward"]["macs"] == sum(first) + sum(second)
    assert phases["weight_grad"]["macs"] == sum(first) + sum(second)
    assert phases["error"]["macs"] == first[1] + sum(second)  # no input gradient for the network input
    # low-precision widths: forward 8x4, error 16x4, core gradients 16x8
    assert phases["forward"]["bitops"] == phases["forward"]["macs"] * 8 * 4
    assert phases["error"]["bitops"] == phases["error"]["macs"] * 16 * 4
    assert phases["weight_grad"]["bitops"] == phases["weight_grad"]["macs"] * 16 * 8


def test_ledger_counts_the_dense_routes_outer_products_and_contractions():
    """core_grad_route="dense": the weight-gradient phase is the batch's outer products (16 x 8 bits) and the
    route's contractions (16 x 4 bits); forward and error are as on the direct route."""
    config = SMALL.replace(data=DataConfig(name="synthetic", synthetic_samples=40, test_fraction=0.5),
                           optim=OptimConfig(epochs=1, batch_size=20, lr=1e-2))
    dense = dataclasses.replace(TT_SMALL, precision=TTPrecision(core_grad_route="dense"))
    trainer = tt_trainer(config, dense, None)
    layers = tt_layers(trainer.model)
    route = sum(m for layer in layers for _, _, m in dense_route_sizes([c.detach() for c in layer.cores]))
    phases = trainer.fit().cost["by_phase"]
    outer = 20 * (64 * 32 + 32 * 10)
    assert phases["weight_grad"]["macs"] == outer + route
    assert phases["weight_grad"]["bitops"] == outer * 16 * 8 + route * 16 * 4


def test_a_rank_cap_above_anything_the_modes_allow_is_refused_by_name():
    """A max_rank that caps nothing (above every inner rank a TT of the modes can have) is a slip, said so with the
    largest that means something; a cap some layer cannot reach (the paper's 16 on a 10-output layer) is taken."""
    from codesign.train.config import ConfigError, config_from_dict
    from codesign.train.tt.modes import largest_rank, layer_modes

    assert largest_rank((4, 8, 8, 4), (8, 4, 4, 4)) == 512 and largest_rank((8, 4, 4, 4), (1, 1, 2, 5)) == 32
    assert largest_rank((64,), (10,)) == 1
    raw = {"model": {"name": "mlp", "hidden": [16]}, "techniques": {"tt": {"order": 2, "max_rank": 32}}}
    assert len(layer_modes(config_from_dict(raw))) == 2  # 64 -> 16: 8x8 -> 4x4, the boundary 32 x 32
    raw["techniques"]["tt"]["max_rank"] = 33
    with pytest.raises(ConfigError, match=r"techniques.tt.max_rank: 33 is above every inner rank the modes allow "
                                          r"\(at most 32"):
        layer_modes(config_from_dict(raw))
