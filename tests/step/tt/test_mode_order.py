"""codesign.step.tt.mode_order: a TT layer's mode orders ranked by its step's products, against the trainer's own
count and a TT-SVD's ranks."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from codesign.numerics.tt_svd import svd_ranks, tt_svd
from codesign.step.tt.mode_order import cheapest_orders, order_cost, rank_orders
from codesign.train.tt.ttm import contraction_macs

PAPER_FIRST = ((4, 8, 8, 4), (8, 4, 4, 4))


@pytest.mark.parametrize("in_modes, out_modes, max_rank", [((4, 8, 8, 4), (8, 4, 4, 4), 8), ((2, 3), (5, 1), 4),
                                                           ((8, 4, 4, 4), (1, 1, 2, 5), 8), ((7,), (3,), 5),
                                                           ((3, 2, 2), (2, 2, 3), 2)])
@pytest.mark.parametrize("need_input_grad", [True, False])
def test_products_are_the_trainers_count_of_every_contraction(in_modes, out_modes, max_rank, need_input_grad):
    order = order_cost(in_modes, out_modes, max_rank=max_rank, batch=5, need_input_grad=need_input_grad)
    cores = [np.zeros((order.ranks[k], m, n, order.ranks[k + 1])) for k, (m, n) in enumerate(zip(out_modes, in_modes))]
    macs = contraction_macs(cores, 5)
    expected = sum(macs["forward"]) + sum(macs["core_grad"]) + sum(macs["input_grad"][0 if need_input_grad else 1:])
    assert order.products == expected
    assert order.parameters == sum(core.size for core in cores)


@pytest.mark.parametrize("in_modes, out_modes", [PAPER_FIRST, ((3, 5, 2), (4, 1, 6)), ((2, 2, 2, 2), (3, 1, 1, 3))])
@pytest.mark.parametrize("max_rank", [1, 3, 100])
def test_svd_ranks_are_those_a_tt_svd_gives(in_modes, out_modes, max_rank):
    matrix = np.random.default_rng(0).standard_normal((math.prod(out_modes), math.prod(in_modes)))
    cores, _ = tt_svd(matrix, in_modes, out_modes, [max_rank] * (len(in_modes) - 1))
    assert svd_ranks(in_modes, out_modes, max_rank) == (1, *(core.shape[3] for core in cores))


def test_every_order_is_ranked_once_fewest_products_first():
    orders = rank_orders(*PAPER_FIRST, max_rank=8, batch=64, need_input_grad=False)
    pairs = {(o.in_modes, o.out_modes) for o in orders}
    assert len(orders) == len(pairs) == len(set(itertools.permutations(PAPER_FIRST[0]))) * 4  # 6 x 4 orders
    assert [o.products for o in orders] == sorted(o.products for o in orders)
    # by hand: B P_k R_k r_{k-1} m_k n_k r_k per contraction, three a core but the first (no input gradient)
    best = orders[0]
    assert (best.in_modes, best.out_modes, best.ranks) == ((8, 8, 4, 4), (4, 4, 4, 8), (1, 8, 8, 8, 1))
    per_core = [64 * 1 * 128 * 1 * 4 * 8 * 8, 64 * 4 * 16 * 8 * 4 * 8 * 8, 64 * 16 * 4 * 8 * 4 * 4 * 8,
                64 * 64 * 1 * 8 * 8 * 4 * 1]
    assert best.products == 3 * sum(per_core) - per_core[0]
    ours = next(o for o in orders if (o.in_modes, o.out_modes) == PAPER_FIRST)
    assert ours.products > 3.5 * best.products and ours.parameters == 4480 and best.parameters == 3584


def test_cheapest_orders_take_the_first_layer_without_its_input_gradient():
    layers = (PAPER_FIRST, ((8, 4, 4, 4), (1, 1, 2, 5)))
    first, second = cheapest_orders(layers, max_rank=8, batch=64)
    assert first == rank_orders(*PAPER_FIRST, max_rank=8, batch=64, need_input_grad=False)[0]
    assert second == rank_orders(*layers[1], max_rank=8, batch=64, need_input_grad=True)[0]


def test_orders_refuse_unpaired_or_too_many_modes():
    with pytest.raises(ValueError, match="pairs them"):
        rank_orders((2, 2), (4,), max_rank=2, batch=1)
    with pytest.raises(ValueError, match="5040 x 5040 orders"):
        rank_orders(tuple(range(2, 9)), tuple(range(2, 9)), max_rank=2, batch=1)
    assert len(rank_orders((2,) * 7, (3, 2, 2, 2, 2, 2, 2), max_rank=2, batch=1)) == 7  # repeated modes: few orders
