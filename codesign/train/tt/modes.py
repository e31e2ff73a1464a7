"""The modes of a TT configuration's layers: how each layer size factorises, without building a model.

Both the TT technique (:mod:`codesign.train.techniques.tt`, which builds the
model) and the peak-memory estimate (:mod:`codesign.train.memory`, which must
not import the trainer it guards) read them here.
"""

from __future__ import annotations

import math

from typing import Any

from codesign.numerics.tt_svd import svd_ranks
from codesign.train.geometry import mlp_layers
from codesign.train.config import TrainConfig, require
from codesign.train.tt.ttm import check_modes

PREFIX = "techniques.tt"


def _int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def factorize(features: int, order: int) -> tuple[int, ...]:
    """``order`` modes whose product is ``features``: prime factors, largest first, each onto the smallest mode."""
    require(_int(features) and features >= 1, "features", f"must be an int >= 1, got {features!r}")
    primes, rest, p = [], features, 2
    while p * p <= rest:
        while rest % p == 0:
            primes.append(p)
            rest //= p
        p += 1
    if rest > 1:
        primes.append(rest)
    modes = [1] * order
    for prime in sorted(primes, reverse=True):
        smallest = min(range(order), key=lambda i: (modes[i], i))
        modes[smallest] *= prime
    return tuple(modes)


def layer_sizes(training: TrainConfig) -> tuple[int, ...]:
    """Features entering each TT layer, then the classes: ``(features, *model.hidden, classes)`` of the data."""
    require(training.model.name == "mlp", "model.name",
            f"{PREFIX} trains an MLP of TT layers (model.name = 'mlp'), got {training.model.name!r}")
    return mlp_layers(training)


def layer_modes(training: TrainConfig) -> list[tuple[tuple[int, ...], tuple[int, ...]]]:
    """``(in_modes, out_modes)`` of every TT layer: the configuration's own, checked against the layer sizes, or
    ``order`` modes of each size by :func:`factorize`."""
    require("tt" in training.techniques, PREFIX, "the configuration has no TT technique")
    config = training.techniques["tt"]
    sizes = layer_sizes(training)
    layers = len(sizes) - 1
    if config.in_modes:
        require(len(config.in_modes) == layers, f"{PREFIX}.in_modes",
                f"gives {len(config.in_modes)} layers; model.hidden {training.model.hidden} makes {layers}")
        for index, (ins, outs) in enumerate(zip(config.in_modes, config.out_modes)):
            check_modes(ins, f"{PREFIX}.in_modes[{index}]", sizes[index], f"layer {index}'s inputs")
            check_modes(outs, f"{PREFIX}.out_modes[{index}]", sizes[index + 1], f"layer {index}'s outputs")
        modes = list(zip(config.in_modes, config.out_modes))
    else:
        modes = [(factorize(a, config.order), factorize(b, config.order)) for a, b in zip(sizes[:-1], sizes[1:])]
    largest = max(largest_rank(ins, outs) for ins, outs in modes)
    require(config.max_rank <= largest, f"{PREFIX}.max_rank",
            f"{config.max_rank} is above every inner rank the modes allow (at most {largest}, where the mode sizes "
            f"on either side of a core boundary meet); it would cap nothing: give at most {largest}")
    return modes


def largest_rank(in_modes: tuple[int, ...], out_modes: tuple[int, ...]) -> int:
    """The largest inner rank a TT of these modes can have (a TT-SVD's): at each core boundary the product of the
    mode sizes on the smaller side; 1 for a single core."""
    return max(svd_ranks(in_modes, out_modes, math.prod(in_modes) * math.prod(out_modes))[1:-1], default=1)


__all__ = ["factorize", "largest_rank", "layer_modes", "layer_sizes"]
