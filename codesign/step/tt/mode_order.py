"""The orders of a TT layer's modes, ranked by the products of its training step on the PEs.

A TT layer's modes factorise its features (``in_modes``, ``out_modes``; :mod:`codesign.train.tt.modes`), and
any permutation of either is another TT layer of the same features: its cores ``(r_{k-1}, m_k, n_k, r_k)`` pair
the modes anew. The step contracts the cores left to right (docs/tt_step.md, "The schedule"), so the order sets
the size of every state and the products of every contraction. On paper 003's first layer (1024 -> 512, rank 8,
batch 64) the order the TT reproductions train, (4, 8, 8, 4) -> (8, 4, 4, 4), takes 162.5 M products a step,
and (8, 8, 4, 4) -> (4, 4, 4, 8) takes 45.1 M. The order also moves the parameter count (the pairing sets the
cores' sizes), so both are given; what an order does to accuracy only a training run can say.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Sequence

from codesign.numerics.tt_svd import svd_ranks
from codesign.step.tt.schedule import LayerGeometry, StepHardware, contractions

MAX_ORDERS = 20_000  # orders of one layer ranked one by one (5 distinct modes a side: 14,400; about 1 s here)


@dataclass(frozen=True)
class ModeOrder:
    """One order of a layer's modes: its ranks (a TT-SVD's at ``max_rank``), the products (multiply-accumulates)
    of one training step of ``batch`` samples over all its contractions, and the values of its cores."""

    in_modes: tuple[int, ...]
    out_modes: tuple[int, ...]
    ranks: tuple[int, ...]
    products: int
    parameters: int

    def to_dict(self) -> dict:
        return {"in_modes": list(self.in_modes), "out_modes": list(self.out_modes), "ranks": list(self.ranks),
                "products": self.products, "parameters": self.parameters}


def order_cost(in_modes: Sequence[int], out_modes: Sequence[int], *, max_rank: int, batch: int,
               need_input_grad: bool = True) -> ModeOrder:
    """The step products and core values of the layer with these modes in this order."""
    ins, outs = tuple(int(n) for n in in_modes), tuple(int(m) for m in out_modes)
    ranks = svd_ranks(ins, outs, max_rank)
    geometry = LayerGeometry(in_modes=ins, out_modes=outs, ranks=ranks, batch=batch)
    items = contractions(geometry, act_bits=8, grad_bits=16, core_bits=4, need_input_grad=need_input_grad,
                         hardware=StepHardware())
    parameters = sum(ranks[k] * m * n * ranks[k + 1] for k, (m, n) in enumerate(zip(outs, ins)))
    return ModeOrder(in_modes=ins, out_modes=outs, ranks=ranks, products=sum(item.macs for item in items),
                     parameters=parameters)


def rank_orders(in_modes: Sequence[int], out_modes: Sequence[int], *, max_rank: int, batch: int,
                need_input_grad: bool = True) -> list[ModeOrder]:
    """Every distinct order of both mode lists, fewest step products first, then fewest core values, then the
    orders themselves (so ties fall the same way on every run); refused above :data:`MAX_ORDERS` orders."""
    if len(in_modes) != len(out_modes):
        raise ValueError(f"{len(in_modes)} in_modes and {len(out_modes)} out_modes: a TT layer pairs them")
    counts = [_distinct_orders(modes) for modes in (in_modes, out_modes)]
    if counts[0] * counts[1] > MAX_ORDERS:
        raise ValueError(f"{counts[0]} x {counts[1]} orders of {tuple(in_modes)} -> {tuple(out_modes)}: more than "
                         f"{MAX_ORDERS:,} to rank one by one")
    orders = [order_cost(ins, outs, max_rank=max_rank, batch=batch, need_input_grad=need_input_grad)
              for ins in _distinct_permutations(in_modes) for outs in _distinct_permutations(out_modes)]
    return sorted(orders, key=lambda o: (o.products, o.parameters, o.in_modes, o.out_modes))


def _distinct_permutations(modes: Sequence[int]) -> list[tuple[int, ...]]:
    """Every distinct order of ``modes``, in increasing order, built without the repeats (``(2,) * 10`` is one)."""
    if not modes:
        return [()]
    return [(first, *rest) for first in sorted(set(modes))
            for rest in _distinct_permutations(_without(modes, first))]


def _without(modes: Sequence[int], value: int) -> list[int]:
    rest = list(modes)
    rest.remove(value)
    return rest


def _distinct_orders(modes: Sequence[int]) -> int:
    """Distinct orders of ``modes``: d! over the factorial of each repeated mode's count."""
    total = math.factorial(len(modes))
    for value in set(modes):
        total //= math.factorial(list(modes).count(value))
    return total


def cheapest_orders(modes: Sequence[tuple[Sequence[int], Sequence[int]]], *, max_rank: int,
                    batch: int) -> tuple[ModeOrder, ...]:
    """Per layer of a network (``(in_modes, out_modes)`` each, the first taking the network's input, which needs
    no input gradient) its order of fewest step products."""
    return _cheapest(tuple((tuple(ins), tuple(outs)) for ins, outs in modes), int(max_rank), int(batch))


@functools.lru_cache(maxsize=64)
def _cheapest(modes: tuple, max_rank: int, batch: int) -> tuple[ModeOrder, ...]:
    return tuple(rank_orders(ins, outs, max_rank=max_rank, batch=batch, need_input_grad=index > 0)[0]
                 for index, (ins, outs) in enumerate(modes))


def describe(order: ModeOrder) -> str:
    """``(in) -> (out)``, products in millions and core values, as the benchmark and the docs print an order."""
    return (f"{order.in_modes} -> {order.out_modes}: {order.products / 1e6:.1f} M products a step, "
            f"{order.parameters:,} core values ({math.prod(order.in_modes)} -> {math.prod(order.out_modes)})")


__all__ = ["MAX_ORDERS", "ModeOrder", "cheapest_orders", "describe", "order_cost", "rank_orders"]
