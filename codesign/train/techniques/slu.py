"""Selective layer update (SLU), the model-level technique of E²-Train (NeurIPS 2019, Sec. 3.2).

A learned gate in front of every skippable residual block decides, per
sample, whether the block runs. A skipped block is the identity (its
shortcut), so only identity-shortcut blocks (``ResidualBlock.skippable``)
get a gate; the others always run.

Gate. E²-Train follows SkipNet and puts a small RNN gate (pool, projection,
one shared LSTM step) in front of each block. Here each gate is a single
linear unit on the globally average-pooled block input,
``p = sigmoid(w . mean_hw(x) + b)``, built from ``CountedLinear`` so that
its MACs are in the ledger. Why the cheaper gate is enough here: the block
input already carries everything the RNN's hidden state would (a skipped
block passes its input through, so earlier decisions are visible in it);
the linear gate costs C MACs per sample (16-64 for these networks) against
about 10*C + 4*10*(10+10) + 10 = 1.0k-1.5k for a SkipNet RNN gate (projection
to 10, one step of a 10-unit LSTM, output unit); and it keeps no state across blocks, so each block's gate
can be evaluated right before the block on hardware. Both are well under
1% of a block's ~295k forward MACs per sample. The pooling's additions
(C*H*W per sample) are charged to the ledger as fp32 MACs with their
buffer reads, which over-states them; no DRAM traffic is charged for the
pooling, which accumulates the block input on chip as the previous layer
writes it out. Measured on ResNet-14 (16 channels) on digits, the gates
take 0.3-0.45 % of a run's modelled energy. The gate's gradient flows
into the backbone (gates and weights are trained jointly, as Eq. (1) of
the paper has it), and the gate's error and weight-gradient MACs are
counted by its layer. The gates are created in ``attach``, after the
techniques that set layer precisions (see ``techniques.ORDER``) have
configured the backbone, so they stay fp32 (and are charged at fp32 cost)
unless a technique re-applies precision to every counted layer later.

Hard decisions and the straight-through estimator. Forward, a sample runs
the block iff ``p >= threshold`` (0.5), in training and in evaluation
alike. The executed samples' output is ``y = f(x) + (p - stop_grad(p)) *
(f(x) - x)``, which equals ``f(x)`` bit for bit and gives the gate the
gradient of ``x + m * (f(x) - x)`` with ``dm/dp = 1``. A skipped sample's
output is ``x``; its gate gets no task-loss gradient (that would need
``f(x)``, the very computation skipped), only the cost term's.

Skipped work is really not done. The block runs on the sub-batch of
samples that execute it (``index_select``), and the results are scattered
back (``index_copy``), so the counted convolutions see, forward and
backward, only those samples, and the ledger counts only their MACs. A
block skipped by every sample of a step is not called at all: it adds
nothing to the ledger and its parameters get no gradient (``.grad`` stays
None after the trainer's ``zero_grad(set_to_none=True)``), so SGD leaves
them, their momentum and their weight decay untouched in that step.
BatchNorm inside a block therefore normalises with the statistics of the
executing samples only, and its running statistics are updated from them.

Cost regulariser and skip-ratio target. The loss is ``L + alpha * C`` with
``C = sum_b MACs_b * mean_n p_{b,n} / sum_b MACs_b`` over the gated blocks:
the expected fraction of the gated blocks' MACs that the batch executes
(soft, so every sample's gate gets its gradient). ``alpha`` is set after
every optimiser step by a PI controller on that step's hard decisions,
with ``e = executed_fraction - (1 - target_skip)``::

    integral += alpha_i * e;   alpha = integral + alpha_p * e     (both clamped to +-alpha_max)

Why PI and not a pure integrator (dual ascent on ``alpha``): the gates
already integrate ``alpha`` (each SGD step moves the gate logits by an
amount proportional to it), so an integrating controller makes a double
integrator, which oscillates: whole blocks switched on and off for epochs
and the final (evaluation) skip ratio landed far from the target (measured,
ResNet-14 on digits, 15 epochs, seed 0, targets 0.2/0.4/0.6: evaluation
skip 0.00/0.25/0.50 with a pure integrator of gain 0.05, against
0.21/0.41/0.57 with the PI defaults below). The
proportional term damps this; the small integral term removes the offset a
pure proportional controller leaves where the task loss pulls against the
cost. ``alpha`` is signed on purpose: when the network skips more than the
target, a negative ``alpha`` pushes the gates back open. With both gains 0,
``alpha`` stays at ``alpha_init`` (the paper's fixed-alpha form of Eq. (1)).

The skip ratio is MAC-weighted over the gated blocks (equal to the fraction
of (sample, gated block) pairs skipped when, as in these ResNets, every
gated block has the same MACs).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch
from torch import nn

from codesign.train.config import ConfigError, is_number, require
from codesign.train.layers import CountedConv2d, CountedLinear
from codesign.train.models import skippable_blocks
from codesign.train.techniques import base

if TYPE_CHECKING:
    from codesign.train.models import ResidualBlock
    from codesign.train.trainer import Trainer

GATES_MODULE = "slu_gates"




@dataclass(frozen=True, kw_only=True)
class Config:
    """SLU settings.

    ``target_skip``: average fraction of gated-block MACs to skip, in [0, 1).
    ``alpha_init``: starting weight of the cost term (and of the controller's integral).
    ``alpha_p``, ``alpha_i``: proportional and integral gains of the alpha controller
    (both 0 keep alpha fixed). ``alpha_max``: bound on |alpha| and on the integral.
    ``gate_bias_init``: starting gate logit (2.0: p = 0.88, every block runs at first).
    ``threshold``: a sample runs a block iff its gate probability is >= threshold.
    ``gate_lr``: peak learning rate of the gates (following the run's schedule), or None
    for the run's own; set it when the backbone trains with a very different LR (PSG's
    sign updates), so the gates still learn.
    """

    target_skip: float = 0.4
    alpha_init: float = 0.0
    alpha_p: float = 2.0
    alpha_i: float = 0.01
    alpha_max: float = 5.0
    gate_bias_init: float = 2.0
    threshold: float = 0.5
    gate_lr: float | None = None

    def validate(self, prefix: str = "slu") -> None:
        require(self.gate_lr is None or (is_number(self.gate_lr) and self.gate_lr > 0), f"{prefix}.gate_lr",
                f"must be None or > 0, got {self.gate_lr!r}")
        require(is_number(self.target_skip) and 0 <= self.target_skip < 1, f"{prefix}.target_skip",
                f"must be in [0, 1), got {self.target_skip!r}")
        require(is_number(self.alpha_max) and self.alpha_max > 0, f"{prefix}.alpha_max",
                f"must be > 0, got {self.alpha_max!r}")
        require(is_number(self.alpha_init) and abs(self.alpha_init) <= self.alpha_max, f"{prefix}.alpha_init",
                f"must be a number with |alpha_init| <= alpha_max, got {self.alpha_init!r}")
        for gain in ("alpha_p", "alpha_i"):
            value = getattr(self, gain)
            require(is_number(value) and value >= 0, f"{prefix}.{gain}", f"must be >= 0, got {value!r}")
        require(is_number(self.gate_bias_init) and abs(self.gate_bias_init) <= 20, f"{prefix}.gate_bias_init",
                f"must be a number in [-20, 20], got {self.gate_bias_init!r}")
        require(is_number(self.threshold) and 0 < self.threshold < 1, f"{prefix}.threshold",
                f"must be in (0, 1), got {self.threshold!r}")


def conv_output_size(conv: CountedConv2d, height: int, width: int) -> tuple[int, int]:
    sizes = []
    for size, k, s, p, d in zip((height, width), conv.kernel_size, conv.stride, conv.padding, conv.dilation):
        sizes.append((size + 2 * p - d * (k - 1) - 1) // s + 1)
    return sizes[0], sizes[1]


def block_macs_per_sample(block: ResidualBlock, height: int, width: int) -> int:
    """Forward MACs of one sample through a block's residual branch (the identity shortcut costs none)."""
    total = 0
    for conv in (block.conv1, block.conv2):
        height, width = conv_output_size(conv, height, width)
        total += conv.out_channels * height * width * conv.macs_per_output()
    return total


class Technique(base.Technique):
    name = "slu"

    def __init__(self, config: Config) -> None:
        self.config = config
        self.alpha = float(config.alpha_init)
        self.alpha_integral = float(config.alpha_init)
        self.gates: nn.ModuleDict | None = None
        self.block_macs: dict[int, int] = {}  # forward MACs per sample of each gated block (derived from shapes)
        # (gate probabilities with grad, MACs per sample) of the current training step; rebuilt every step
        self._step_gates: list[tuple[torch.Tensor, int]] = []
        self._step_executed_macs = 0
        self._step_offered_macs = 0
        # cumulative counters per gated block: [executed, offered] samples, training and last evaluation
        self.train_counts: dict[int, list[int]] = {}
        self.eval_counts: dict[int, list[int]] = {}
        self.last_eval_counts: dict[int, list[int]] = {}
        self.alpha_trace: list[float] = []

    # -- set-up ------------------------------------------------------------
    def attach(self, trainer: Trainer) -> None:
        model = trainer.model
        blocks = getattr(model, "blocks", ())
        gated = skippable_blocks(model)
        if not gated:
            raise ConfigError("techniques.slu: the model has no skippable residual block "
                              "(use model.name='resnet'; ResNet-8 has one, ResNet-14/20 have 4/7)")
        gates = nn.ModuleDict()
        for index in gated:
            gate = CountedLinear(blocks[index].conv1.in_channels, 1)
            with torch.no_grad():  # deterministic start, no draw from the global generator
                gate.weight.zero_()
                gate.bias.fill_(self.config.gate_bias_init)
            gate.layer_name = f"{GATES_MODULE}.{index}"
            gates[str(index)] = gate
        model.add_module(GATES_MODULE, gates)
        lr_scale = 1.0 if self.config.gate_lr is None else self.config.gate_lr / trainer.config.optim.lr
        trainer.optimizer.add_param_group({"params": list(gates.parameters()), "lr_scale": lr_scale})
        model.block_runner = self.run_block
        self.gates = gates
        self.train_counts = {index: [0, 0] for index in gated}
        self.eval_counts = {index: [0, 0] for index in gated}
        self.last_eval_counts = {index: [0, 0] for index in gated}

    # -- the block runner -----------------------------------------------------
    def gate_probability(self, index: int, x: torch.Tensor) -> torch.Tensor:
        """Per-sample probability (N,) that block ``index`` runs, from its pooled input; charges the pooling."""
        gate = self.gates[str(index)]
        if gate.ledger is not None:
            gate.ledger.add_macs(gate.layer_name, "forward", x.numel(), bits_a=32, bits_b=32, arith="fp32")
        return torch.sigmoid(gate(x.mean(dim=(2, 3))).squeeze(1))

    def run_block(self, index: int, block: ResidualBlock, x: torch.Tensor) -> torch.Tensor:
        if str(index) not in self.gates:
            return block(x)
        if index not in self.block_macs:
            self.block_macs[index] = block_macs_per_sample(block, x.shape[2], x.shape[3])
        macs = self.block_macs[index]
        probability = self.gate_probability(index, x)
        execute = probability.detach() >= self.config.threshold
        executed = execute.nonzero().squeeze(1)
        count = int(executed.numel())
        samples = int(x.shape[0])
        counts = self.train_counts if block.training else self.eval_counts
        counts[index][0] += count
        counts[index][1] += samples
        if block.training and torch.is_grad_enabled():
            self._step_gates.append((probability, macs))
            self._step_executed_macs += count * macs
            self._step_offered_macs += samples * macs
        if count == 0:
            return x
        subset = x if count == samples else x.index_select(0, executed)
        out = block(subset)
        if torch.is_grad_enabled():
            straight_through = probability.index_select(0, executed) if count < samples else probability
            straight_through = (straight_through - straight_through.detach()).view(-1, 1, 1, 1)
            out = out + straight_through * (out - subset)
        return out if count == samples else x.index_copy(0, executed, out)

    # -- loss and controller ---------------------------------------------------
    def before_step(self, trainer: Trainer) -> None:
        self._step_gates = []
        self._step_executed_macs = 0
        self._step_offered_macs = 0

    def expected_cost(self) -> torch.Tensor | None:
        """C: expected fraction of the gated blocks' MACs executed by this step's batch (differentiable)."""
        if not self._step_gates:
            return None
        total = sum(macs for _, macs in self._step_gates)
        return sum(probability.mean() * (macs / total) for probability, macs in self._step_gates)

    def extra_loss(self, trainer: Trainer, logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor | None:
        cost = self.expected_cost()
        return None if cost is None else self.alpha * cost

    def update_alpha(self, executed_fraction: float) -> None:
        """PI control of ``executed_fraction`` toward ``1 - target_skip`` (both terms clamped to +-alpha_max)."""
        error = executed_fraction - (1.0 - self.config.target_skip)
        bound = self.config.alpha_max
        self.alpha_integral = min(bound, max(-bound, self.alpha_integral + self.config.alpha_i * error))
        self.alpha = min(bound, max(-bound, self.alpha_integral + self.config.alpha_p * error))

    def after_step(self, trainer: Trainer) -> None:
        if self._step_offered_macs:
            self.update_alpha(self._step_executed_macs / self._step_offered_macs)
        self._step_gates = []

    def on_epoch_end(self, trainer: Trainer, epoch: int, metrics: dict[str, float]) -> None:
        self.last_eval_counts = self.eval_counts
        self.eval_counts = {index: [0, 0] for index in self.eval_counts}
        self.alpha_trace.append(self.alpha)
        metrics["slu_train_skip_ratio"] = self.skip_ratio(self.train_counts)
        metrics["slu_eval_skip_ratio"] = self.skip_ratio(self.last_eval_counts)

    # -- measurements --------------------------------------------------------
    def skip_ratio(self, counts: dict[int, list[int]]) -> float:
        """MAC-weighted fraction of gated-block work skipped (0 when nothing was offered)."""
        offered = sum(self.block_macs.get(i, 1) * c[1] for i, c in counts.items())
        executed = sum(self.block_macs.get(i, 1) * c[0] for i, c in counts.items())
        return 1.0 - executed / offered if offered else 0.0

    def report(self) -> dict[str, Any]:
        per_block = {str(i): {"train_skip_rate": 1 - c[0] / c[1] if c[1] else 0.0,
                              "eval_skip_rate": (1 - self.last_eval_counts[i][0] / self.last_eval_counts[i][1]
                                                 if self.last_eval_counts[i][1] else 0.0),
                              "block_forward_macs_per_sample": self.block_macs.get(i)}
                     for i, c in self.train_counts.items()}
        return {"target_skip": self.config.target_skip, "measured_train_skip_ratio": self.skip_ratio(self.train_counts),
                "measured_eval_skip_ratio": self.skip_ratio(self.last_eval_counts), "alpha": self.alpha,
                "alpha_trace": list(self.alpha_trace), "per_block": per_block}

    def state_dict(self) -> dict[str, Any]:
        return {"alpha": self.alpha, "alpha_integral": self.alpha_integral, "alpha_trace": list(self.alpha_trace),
                "train_counts": _copy_counts(self.train_counts), "eval_counts": _copy_counts(self.eval_counts),
                "last_eval_counts": _copy_counts(self.last_eval_counts)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.alpha = state["alpha"]
        self.alpha_integral = state["alpha_integral"]
        self.alpha_trace = list(state["alpha_trace"])
        self.train_counts = _copy_counts(state["train_counts"])
        self.eval_counts = _copy_counts(state["eval_counts"])
        self.last_eval_counts = _copy_counts(state["last_eval_counts"])


def _copy_counts(counts: dict[int, list[int]]) -> dict[int, list[int]]:
    return {index: list(pair) for index, pair in counts.items()}
