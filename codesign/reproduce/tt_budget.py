"""What the ``tt`` reproduction trains: its arms, tuning trials and budget, and how much memory a TT model holds.

Why 8 for :data:`INITIAL_RANK`: the paper starts from "a large rank initial
guess" (its Appendix B values are cut from our copy). At rank 8 the TT
layers hold about 105x less than the dense model in 4-bit cores, well short
of the 292x target, so a memory reduction beyond that must come from the
prior pruning ranks during training, not from the start; rank 4 everywhere
already holds 267x (the hand-picked ablation 297x), which left the prior
nothing to do. Larger starts (16) cost 3-4x the training time per run on
the two cores this runs on. A start at which the TT-SVD reproduces a
trained dense layer almost exactly does not exist at any affordable rank
here: for the 256x256 layer of a trained fp32 model (seed 0) the relative
Frobenius error bound of the TT-SVD is 0.95 at rank 8, 0.86 at 16 and
0.76 at 32 (Oseledets 2011, Thm. 2.2), so the start is set by memory.

Memory counts the bits of the parameters the trained model computes with:
the dense baseline's weights and biases at 32 bits, the fixed-point TT arms'
cores at 4 bits and biases at 8 bits, the floating TT arms' at 32 bits,
after pruning. Power-of-two scale exponents (one small integer per tensor)
are not counted.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
from dataclasses import dataclass

import numpy as np

from codesign.reproduce.protocol import VALIDATION_FRACTION
from codesign.train.config import DataConfig, ModelConfig, OptimConfig, TrainConfig, plain, require
from codesign.train.tt import RankPrior, TTLayerSpec, TTMatrix, TTPrecision

BASELINE = "fp32"
FIXED_PRIOR, FIXED_PLAIN = "tt-fixed-prior", "tt-fixed-no-prior"
FLOAT_PRIOR, FLOAT_PLAIN = "tt-float-prior", "tt-float-no-prior"
FIXED_PRIOR_DENSE = "tt-fixed-prior-dense"  # the proposal with its core gradients through the dense weight gradient
FIXED_PRIOR_TRACKED = "tt-fixed-prior-tracked"  # the proposal rounding at scales tracked from earlier steps
FIXED_PRIOR_EXACT_HAND_OFF = "tt-fixed-prior-tracked-exact"  # and passing each layer's values on unrounded
MAIN_ARM = FIXED_PRIOR
TT_ARMS = (FIXED_PRIOR, FIXED_PLAIN, FLOAT_PRIOR, FLOAT_PLAIN, FIXED_PRIOR_DENSE, FIXED_PRIOR_TRACKED,
           FIXED_PRIOR_EXACT_HAND_OFF)
ARMS = (BASELINE, *TT_ARMS)
PRIOR_PAIRS = ((FIXED_PRIOR, FIXED_PLAIN), (FLOAT_PRIOR, FLOAT_PLAIN))  # (with prior, without), same start
ROUTE_PAIRS = ((FIXED_PRIOR_DENSE, FIXED_PRIOR),)  # (dense route, direct route), same start, seed and prior
SCALE_RULE_PAIRS = ((FIXED_PRIOR_TRACKED, FIXED_PRIOR),)  # (tracked scales, exact scales), same start, seed and prior
HAND_OFF_PAIRS = ((FIXED_PRIOR_EXACT_HAND_OFF, FIXED_PRIOR_TRACKED),)  # (exact hand-off, float32), tracked scales
INITIAL_RANK = 8  # every inner rank of every TT arm at the start (capped by the modes); the module docstring says why
HAND_PICKED_RANKS = ((4, 4, 4), (4, 2, 4), (4, 4, 4))


@dataclass(frozen=True, kw_only=True)
class ArmSpec:
    """What a TT arm trains with: fixed point (``lowp``) or float32, the prior or not, its initial ranks, the
    route to its core gradients (``TTPrecision.core_grad_route``), the rule its activation and gradient scales
    are aimed by (``TTPrecision.scale_rule``, at its default momentum) and the type its layers pass their outputs
    and input gradients on in (``TTPrecision.hand_off``); the last three in fixed point only.

    An arm's cached tasks are keyed by its name (:func:`codesign.reproduce.tt.job_task`), not by these fields, so
    a field added here with the value every earlier arm trained with as its default leaves their keys alone."""

    lowp: bool
    prior: bool
    max_ranks: tuple[tuple[int, ...], ...] | None = None  # None: the budget's large start
    route: str = "direct"
    scale_rule: str = "exact"
    hand_off: str = "float32"

    def precision(self) -> TTPrecision | None:
        """The fixed-point precision the arm trains with (its route, scale rule and hand-off, every other field at
        its default); None in float32."""
        return TTPrecision(core_grad_route=self.route, scale_rule=self.scale_rule,
                           hand_off=self.hand_off) if self.lowp else None


def arm_spec(arm: str) -> ArmSpec:
    """The precision, prior, start, route, scale rule and hand-off of TT arm ``arm``."""
    specs = {FIXED_PRIOR: ArmSpec(lowp=True, prior=True), FIXED_PLAIN: ArmSpec(lowp=True, prior=False),
             FLOAT_PRIOR: ArmSpec(lowp=False, prior=True), FLOAT_PLAIN: ArmSpec(lowp=False, prior=False),
             FIXED_PRIOR_DENSE: ArmSpec(lowp=True, prior=True, route="dense"),
             FIXED_PRIOR_TRACKED: ArmSpec(lowp=True, prior=True, scale_rule="tracked"),
             FIXED_PRIOR_EXACT_HAND_OFF: ArmSpec(lowp=True, prior=True, scale_rule="tracked", hand_off="exact")}
    require(arm in specs, "arm", f"must be one of {sorted(specs)}, got {arm!r}")
    return specs[arm]


@dataclass(frozen=True, kw_only=True)
class BaselineTrial:
    """One tuning trial of the dense baseline: Adam's learning rate and its L2 weight decay."""

    lr: float
    weight_decay: float

    def __post_init__(self) -> None:
        OptimConfig(lr=self.lr, weight_decay=self.weight_decay).validate("baseline_trial")


@dataclass(frozen=True, kw_only=True)
class TTTrial:
    """One tuning trial of the TT proposal: Adam's learning rate and the rank prior (weight, threshold, warm-up).

    The prior's weight ramps up over ``warmup_epochs``; pruning may start
    once the warm-up is over (at the end of epoch ``warmup_epochs``).
    """

    lr: float
    prior_weight: float
    threshold: float
    warmup_epochs: int

    def __post_init__(self) -> None:
        OptimConfig(lr=self.lr).validate("tt_trial")
        self.prior()  # validates the prior's fields

    def prior(self) -> RankPrior:
        return RankPrior(weight=self.prior_weight, warmup_epochs=self.warmup_epochs, threshold=self.threshold,
                         prune_from_epoch=self.warmup_epochs)


@dataclass(frozen=True, kw_only=True)
class Budget:
    """Everything a run of this reproduction trains with; smoke shrinks it to seconds.

    The two tuning grids must have the same number of trials: neither arm is
    tuned harder than the other. ``tt_layers`` carry the large initial ranks
    every TT arm starts from; ``hand_picked_ranks`` the ablation's.
    """

    data: DataConfig
    optim: OptimConfig
    hidden: tuple[int, ...]
    tt_layers: tuple[TTLayerSpec, ...]
    hand_picked_ranks: tuple[tuple[int, ...], ...]
    baseline_grid: tuple[BaselineTrial, ...]
    tt_grid: tuple[TTTrial, ...]

    def __post_init__(self) -> None:
        require(len(self.baseline_grid) >= 1 and len(self.baseline_grid) == len(self.tt_grid), "tt_grid",
                f"needs as many trials as baseline_grid ({len(self.baseline_grid)}), got {len(self.tt_grid)}")
        require(all(t.warmup_epochs < self.optim.epochs for t in self.tt_grid), "tt_grid",
                f"warm-up must end before the last of {self.optim.epochs} epochs")
        require(self.data.validation_fraction > 0, "data.validation_fraction",
                "must hold out a validation split (every choice reads it, never the test split)")
        tt_layers(self, self.hand_picked_ranks)  # the ablation's ranks fit the layers


def budget(smoke: bool) -> Budget:
    """The smoke budget (seconds, for the test suite) or the full one (the committed study's)."""
    if smoke:
        return Budget(
            data=DataConfig(name="synthetic", synthetic_samples=120, validation_fraction=VALIDATION_FRACTION),
            optim=OptimConfig(epochs=2, batch_size=20, lr=1e-2, weight_decay=0.0),
            hidden=(16,),
            tt_layers=(TTLayerSpec(in_modes=(8, 8), out_modes=(4, 4), max_rank=4),
                       TTLayerSpec(in_modes=(4, 4), out_modes=(2, 5), max_rank=3)),
            hand_picked_ranks=((3,), (2,)),
            baseline_grid=(BaselineTrial(lr=3e-3, weight_decay=0.0), BaselineTrial(lr=1e-2, weight_decay=0.0)),
            tt_grid=(TTTrial(lr=1e-2, prior_weight=0.5, threshold=0.1, warmup_epochs=1),
                     TTTrial(lr=1e-2, prior_weight=2.0, threshold=0.3, warmup_epochs=0)))
    # 64 = 2*4*4*2 (8x8 pixels: row = 2*4, column = 4*2), 256 = 4*4*4*4, 10 = 1*1*2*5 (modes of 1 cost nothing)
    # Prior weights: at rank 8 a weight of 10 drove every core to zero within the warm-up (validation accuracy
    # 10 %), a weight of 1 pruned to ranks 2-4 by epoch 8, so the grid spans 0.1-3 around it. 15 epochs (the
    # paper: 30) and four trials per arm: what two shared cores train in the time this run had.
    return Budget(
        data=DataConfig(name="digits", validation_fraction=VALIDATION_FRACTION),
        optim=OptimConfig(epochs=15, batch_size=64, lr=1e-2, weight_decay=0.0),
        hidden=(256, 256),
        tt_layers=(TTLayerSpec(in_modes=(2, 4, 4, 2), out_modes=(4, 4, 4, 4), max_rank=INITIAL_RANK),
                   TTLayerSpec(in_modes=(4, 4, 4, 4), out_modes=(4, 4, 4, 4), max_rank=INITIAL_RANK),
                   TTLayerSpec(in_modes=(4, 4, 4, 4), out_modes=(1, 1, 2, 5), max_rank=INITIAL_RANK)),
        hand_picked_ranks=HAND_PICKED_RANKS,
        baseline_grid=tuple(BaselineTrial(lr=lr, weight_decay=0.0) for lr in (1e-3, 3e-3, 1e-2, 3e-2)),
        tt_grid=tuple(TTTrial(lr=1e-2, prior_weight=w, threshold=0.1, warmup_epochs=3) for w in (0.1, 0.3, 1.0, 3.0)))


def tt_layers(b: Budget, max_ranks: tuple[tuple[int, ...], ...] | None = None) -> tuple[TTLayerSpec, ...]:
    """The budget's TT layers, with the given initial inner ranks (one tuple per layer) when there are some."""
    if max_ranks is None:
        return b.tt_layers
    require(len(max_ranks) == len(b.tt_layers), "max_ranks",
            f"needs one entry per TT layer ({len(b.tt_layers)}), got {len(max_ranks)}")
    return tuple(dataclasses.replace(spec, max_rank=tuple(ranks)) for spec, ranks in zip(b.tt_layers, max_ranks))


def dense_bits(b: Budget) -> int:
    """Bits of the dense float32 MLP: every weight and bias at 32 bits. Its inputs and classes are the TT layers'
    (64 and 10 on digits; any budget with ``hidden`` and ``tt_layers``, such as ``tt-fashion``'s, works)."""
    sizes = (b.tt_layers[0].in_features, *b.hidden, b.tt_layers[-1].out_features)
    return 32 * sum(i * o + o for i, o in zip(sizes[:-1], sizes[1:]))


def ranks_memory_bits(b: Budget, ranks: dict[str, list[int]], lowp: bool) -> int:
    """Parameter bits of the TT model at the given ranks (``{"layers.i": [1, r_1, ..., 1]}``).

    Cores at 4 bits and biases at 8 bits in fixed point, both at 32 in float;
    this is how the memory over the epochs is read off a rank trajectory.
    """
    precision = TTPrecision()
    core_bits, bias_bits = (precision.core_bits, precision.bias_bits) if lowp else (32, 32)
    total = 0
    for index, spec in enumerate(b.tt_layers):
        r = ranks[f"layers.{index}"]
        values = sum(r[k] * spec.out_modes[k] * spec.in_modes[k] * r[k + 1] for k in range(len(spec.in_modes)))
        total += core_bits * values + bias_bits * math.prod(spec.out_modes)
    return total


def train_config(b: Budget, seed: int, lr: float, weight_decay: float = 0.0, split_seed: int = 0) -> TrainConfig:
    """The configuration a run trains with (the data's validation hold-out included), as its report records it."""
    return TrainConfig(seed=seed, data=dataclasses.replace(b.data, split_seed=split_seed),
                       model=ModelConfig(name="mlp", hidden=b.hidden),
                       optim=OptimConfig(epochs=b.optim.epochs, batch_size=b.optim.batch_size, lr=lr,
                                         weight_decay=weight_decay, schedule=b.optim.schedule))


def budget_digest(b: Budget) -> str:
    """A fingerprint of everything a run trains with, so a cached run of another budget is never reused."""
    return hashlib.sha256(json.dumps(plain(b), sort_keys=True).encode()).hexdigest()[:16]


def initial_ranks(b: Budget, max_ranks: tuple[tuple[int, ...], ...] | None = None) -> dict[str, list[int]]:
    """The TT ranks ``(1, r_1, ..., 1)`` per layer a run starts from: the caps, cut where the modes allow less."""
    ranks = {}
    for index, spec in enumerate(tt_layers(b, max_ranks)):
        zero = np.zeros((math.prod(spec.out_modes), math.prod(spec.in_modes)))
        ranks[f"layers.{index}"] = list(TTMatrix.from_dense(zero, spec.in_modes, spec.out_modes, spec.max_rank).ranks)
    return ranks
