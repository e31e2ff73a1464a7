"""CPT: cyclic precision training (Fu et al., ICLR 2021), with its precision range test.

Forward pass: the weights and input activations of every counted layer are
fixed point at ``B_t`` bits, where ``B_t`` follows a cosine that rises from
``B_min`` to ``B_max`` once per cycle and then wraps back::

    B_t = ceil(B_min + (B_max - B_min) / 2 * (1 - cos(pi * (t mod T_n) / T_n))),   T_n = total_steps / N

``t`` is the trainer's ``global_step`` (every scheduled step counts, skipped
or not), so the schedule depends on nothing but the step index and a resumed
run sees the same widths. ``(t mod T_n) / T_n`` is computed exactly as
``((t * N) mod total_steps) / total_steps``: a float ``T_n`` would put the
wrap one step late at some cycle boundaries. When ``N`` does not divide the
steps, a cycle starts between two steps, and with ``ceil`` its first step
already costs ``B_min + 1``; ``B_min`` itself is used only where a cycle
boundary falls on a step. ``schedule_rounding="rint"`` rounds to nearest
(ties to even) instead, as the authors' released code does (``np.rint``); it
is not the paper's equation but it is what Table 2's BitOPs correspond to
(3-8 bits: mean forward width 5.5 bits, against 6.0 with ``ceil``).

Backward pass: output gradients are fixed point at ``grad_bits`` (the paper's
"FW 3-8 / BW 8": 8-bit gradients throughout). The error and weight-gradient
MACs multiply those 8-bit gradients by the *forward* operands at ``B_t``
(the layer keeps the quantised weights and activations), so their BitOPs are
``8 * B_t`` per MAC, and the forward's are ``B_t * B_t``; the ledger adds them
up per step (``BitOPs = sum MACs * b_a * b_b``).

Number format: signed fixed point with a power-of-two scale chosen per tensor
and per call from ``max|x|`` (``FixedQuantizer(bits)`` with a dynamic
``frac_bits``). A dynamic scale is the natural choice when the width changes
every few steps: a frozen scale calibrated at one width would waste or clip
range at every other. Deviation from the paper's code (which quantises with
a per-tensor min/max range, SBM style): the scale is a power of two, so a
tensor uses between half and all of its code range, and the code is signed
even for non-negative (post-ReLU) activations, so a ``B``-bit activation has
``2**(B-1)`` levels. The static arm it is compared to uses the same quantiser.

Evaluation: after every step the layers are left at ``B_max`` (the static
counterpart's precision), so test accuracy is measured at the width the model
would be deployed at; ``before_step`` sets the schedule's width again before
the next forward.

Precision range test (``range_test=True``): the paper picks ``B_min`` in the
first epoch as the lowest precision at which training "takes off" (accuracy
difference above a threshold); the upper bound is the static counterpart's
precision. Here, from the first step of epoch 0, each candidate width
``b = range_test_start_bits, ..., max_bits`` trains for ``range_test_steps``
steps (ordinary training steps at ``b``/``grad_bits``, counted as usual).
Around each window a fixed held batch of ``range_test_samples`` samples
(drawn once, seeded by the run's seed; from the held-out validation split
when the data has one, else from the training split) is classified at ``b`` with
batch-statistics BatchNorm (train mode, running statistics untouched), before
and after the window. The measured signal is
``difference(b) = accuracy_after(b) - accuracy_before(b)`` in percentage
points: how much ``range_test_steps`` steps at ``b`` improved the held batch.
``B_min`` is the first ``b`` whose difference exceeds ``range_test_threshold``;
the sweep stops there and the cyclic schedule takes over from the next step.
If no candidate crosses, ``B_min = B_max`` (CPT degenerates to static
precision, and the report says so). Cost: the window steps are training and
are counted as training; the held-batch classifications are forward MACs at
``b x b`` bits, ``2 * range_test_samples`` samples per candidate tried, and
are added to the ledger's ``forward`` phase like any other work (the report
gives their MACs and BitOPs separately too).

That sweep is the paper's, and it confounds width with time: the candidate
tried at steps 2-3 starts from a model that steps 0-1 already trained, so a
width can "take off" only because the network is past its first steps.
``range_test_mode="branched"`` removes the confound. Before the first step,
the model, the optimiser state and the RNG are set aside; every candidate
starts from that same snapshot, trains ``range_test_steps`` probe steps on the
same probe batches (drawn once from the training split, seeded by the run's
seed) at the same learning rate (step 0's), and its held batch is classified
before and after, as above. After each candidate the snapshot is restored,
so the run itself starts from the state it would have had without a test;
the difference between candidates is their width and nothing else. The
probe steps are plain SGD steps (other techniques' hooks do not see them);
they are not steps of the run, but their forward, error and weight-gradient
MACs are charged to the ledger, and the report gives their forward MACs
apart (``probe_forward_macs``). The whole test runs inside the hook of epoch
0's start, so no checkpoint can fall inside it.
"""

from __future__ import annotations

import copy
import math
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch
import torch.nn.functional as F
from torch import nn

from codesign.numerics.formats import DETERMINISTIC_ROUNDING
from codesign.train.config import ConfigError, is_number, require
from codesign.train.layers import attach_ledger, counted_layers
from codesign.train.precision import FixedQuantizer, LayerPrecision
from codesign.train.techniques import base

if TYPE_CHECKING:
    from codesign.train.trainer import Trainer

BITS_RANGE = (2, 32)
SCHEDULE_ROUNDING = ("ceil", "rint")
RANGE_TEST_MODES = ("sequential", "branched")  # the paper's sweep; every candidate from the same snapshot
# The cosine is snapped to this many decimals before rounding to whole bits: a value that is mathematically an
# integer (or a tie) may come out a few ulps off, and ceil would then add a whole bit (or rint pick a side by noise).
SNAP_DECIMALS = 9


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)




def _require_bits(value: Any, name: str) -> None:
    low, high = BITS_RANGE
    require(_is_int(value) and low <= value <= high, name, f"must be an int in [{low}, {high}] bits, got {value!r}")


@dataclass(frozen=True, kw_only=True)
class Config:
    """CPT settings; widths in bits.

    ``min_bits`` is ``B_min`` when ``range_test`` is off; with the range test on,
    ``B_min`` is measured in epoch 0 and ``min_bits`` is not used.
    ``min_bits == max_bits`` (no range test) is static fixed-point training at that width.
    """

    min_bits: int = 3
    max_bits: int = 8
    grad_bits: int = 8
    cycles: int = 32  # N; the paper uses 32 and reports CPT insensitive to it
    schedule_rounding: str = "ceil"  # "ceil": the paper's equation; "rint": the authors' code (np.rint, ties to even)
    rounding: str = "nearest_even"
    range_test: bool = False
    range_test_start_bits: int = 2
    range_test_steps: int = 3  # training steps per candidate width
    range_test_samples: int = 128  # held-batch size
    range_test_threshold: float = 10.0  # percentage points of held-batch accuracy
    range_test_mode: str = "sequential"  # "sequential": the paper's sweep; "branched": each width from one snapshot

    def validate(self, prefix: str = "techniques.cpt") -> None:
        _require_bits(self.min_bits, f"{prefix}.min_bits")
        _require_bits(self.max_bits, f"{prefix}.max_bits")
        _require_bits(self.grad_bits, f"{prefix}.grad_bits")
        require(self.min_bits <= self.max_bits, f"{prefix}.min_bits",
                f"B_min must not exceed B_max (max_bits={self.max_bits}), got {self.min_bits}")
        require(_is_int(self.cycles) and self.cycles >= 1, f"{prefix}.cycles", f"must be an int >= 1, got {self.cycles!r}")
        require(self.schedule_rounding in SCHEDULE_ROUNDING, f"{prefix}.schedule_rounding",
                f"must be one of {SCHEDULE_ROUNDING}, got {self.schedule_rounding!r}")
        require(self.rounding in DETERMINISTIC_ROUNDING, f"{prefix}.rounding",
                f"must be one of {DETERMINISTIC_ROUNDING}, got {self.rounding!r}")
        require(isinstance(self.range_test, bool), f"{prefix}.range_test", "must be a bool")
        _require_bits(self.range_test_start_bits, f"{prefix}.range_test_start_bits")
        require(self.range_test_start_bits <= self.max_bits, f"{prefix}.range_test_start_bits",
                f"must not exceed max_bits={self.max_bits}, got {self.range_test_start_bits}")
        require(_is_int(self.range_test_steps) and self.range_test_steps >= 1, f"{prefix}.range_test_steps",
                f"must be an int >= 1, got {self.range_test_steps!r}")
        require(_is_int(self.range_test_samples) and self.range_test_samples >= 1, f"{prefix}.range_test_samples",
                f"must be an int >= 1, got {self.range_test_samples!r}")
        require(is_number(self.range_test_threshold) and 0 <= self.range_test_threshold < 100,
                f"{prefix}.range_test_threshold", f"must be in [0, 100) percentage points, got {self.range_test_threshold!r}")
        require(self.range_test_mode in RANGE_TEST_MODES, f"{prefix}.range_test_mode",
                f"must be one of {RANGE_TEST_MODES}, got {self.range_test_mode!r}")

    @property
    def branched(self) -> bool:
        """The range test runs every candidate from one snapshot, outside the run's steps."""
        return self.range_test and self.range_test_mode == "branched"

    @property
    def candidates(self) -> list[int]:
        """The widths the range test tries, lowest first."""
        return list(range(self.range_test_start_bits, self.max_bits + 1))


def cyclic_bits(step: int, total_steps: int, cycles: int, min_bits: int, max_bits: int, *,
                rounding: str = "ceil") -> int:
    """``B_t`` of the cosine cyclic schedule (bits) at scheduled step ``step`` of ``total_steps``, ``cycles`` cycles.

    ``rounding="ceil"`` is the paper's equation; ``"rint"`` (nearest, ties to even) is what the authors' code does,
    and spends fewer steps at the top widths (3-8 bits: mean 5.5 bits instead of 6.0).
    """
    if total_steps < 1 or cycles < 1 or step < 0:
        raise ValueError(f"need step >= 0, total_steps >= 1 and cycles >= 1, got {step}, {total_steps}, {cycles}")
    if rounding not in SCHEDULE_ROUNDING:
        raise ValueError(f"rounding must be one of {SCHEDULE_ROUNDING}, got {rounding!r}")
    phase = ((step * cycles) % total_steps) / total_steps  # == (t mod T_n) / T_n, without float error in t mod T_n
    value = round(min_bits + 0.5 * (max_bits - min_bits) * (1.0 - math.cos(math.pi * phase)), SNAP_DECIMALS)
    bits = math.ceil(value) if rounding == "ceil" else round(value)
    return max(min_bits, min(max_bits, bits))


def select_min_bits(candidates: list[int], differences: list[float], threshold: float) -> int | None:
    """The first candidate whose accuracy difference (pt) exceeds ``threshold``, or None."""
    for bits, difference in zip(candidates, differences):
        if difference > threshold:
            return bits
    return None


@contextmanager
def batch_statistics_without_side_effects(model: nn.Module):
    """Train-mode BatchNorm (batch statistics) that leaves running means/variances and counters untouched."""
    norms = [m for m in model.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm)]
    saved = [m.track_running_stats for m in norms]
    was_training = model.training
    model.train()
    for module in norms:
        module.track_running_stats = False
    try:
        yield
    finally:
        for module, flag in zip(norms, saved):
            module.track_running_stats = flag
        model.train(was_training)


class Technique(base.Technique):
    name = "cpt"

    def __init__(self, config: Config) -> None:
        config.validate()
        self.config = config
        self.min_bits: int | None = None if config.range_test else config.min_bits
        self.steps_by_bits: dict[int, int] = {}
        self.range_state: dict[str, Any] = {
            "done": not config.range_test, "index": 0, "window_steps": 0, "accuracy_before": [],
            "accuracy_after": [], "differences": [], "crossed": False, "steps": 0, "macs": 0, "bitops": 0,
            # the branched test's probe steps (not steps of the run): their count, forward MACs, BitOPs of all phases
            "probe_steps": 0, "probe_forward_macs": 0, "probe_bitops": 0,
        }
        self._held: tuple[torch.Tensor, torch.Tensor] | None = None
        self._held_from: str | None = None  # "validation" or "training": the split the held batch is drawn from

    # -- set-up --------------------------------------------------------------
    def attach(self, trainer: Trainer) -> None:
        prefix = "techniques.cpt"
        varies = self.config.range_test or self.config.min_bits < self.config.max_bits
        require(not varies or self.config.cycles <= trainer.total_steps, f"{prefix}.cycles",
                f"{self.config.cycles} cycles do not fit {trainer.total_steps} scheduled steps (T_n < 1 step)")
        if self.config.range_test:
            needed = len(self.config.candidates) * self.config.range_test_steps
            require(self.config.branched or needed <= trainer.batches_per_epoch, f"{prefix}.range_test_steps",
                    f"{len(self.config.candidates)} candidate widths x {self.config.range_test_steps} steps = {needed} "
                    f"steps do not fit the first epoch ({trainer.batches_per_epoch} steps)")
            # the held batch comes from the held-out validation split when the data has one (B_min is a
            # choice, and choices read validation); otherwise from the training split, as before
            dataset = trainer.dataset
            source_x, source_y = ((dataset.validation_x, dataset.validation_y) if dataset.has_validation
                                  else (dataset.train_x, dataset.train_y))
            self._held_from = "validation" if dataset.has_validation else "training"
            size = int(source_y.numel())
            samples = min(self.config.range_test_samples, size)
            generator = torch.Generator().manual_seed(trainer.config.seed * 7919 + 17)
            index = torch.randperm(size, generator=generator)[:samples].sort().values
            self._held = (source_x[index], source_y[index])
        self._set_bits(trainer, self.config.max_bits)

    # -- schedule ------------------------------------------------------------
    def bits_at(self, step: int, total_steps: int) -> int:
        """The forward width (bits) of scheduled step ``step``, once ``B_min`` is known."""
        if self.min_bits is None:
            raise RuntimeError("B_min is not known until the precision range test has finished")
        return cyclic_bits(step, total_steps, self.config.cycles, self.min_bits, self.config.max_bits,
                           rounding=self.config.schedule_rounding)

    def _precision(self, bits: int) -> LayerPrecision:
        rounding = self.config.rounding
        return LayerPrecision(activation=FixedQuantizer(bits, rounding=rounding),
                              weight=FixedQuantizer(bits, rounding=rounding),
                              grad=FixedQuantizer(self.config.grad_bits, rounding=rounding))

    def _set_bits(self, trainer: Trainer, bits: int) -> None:
        """Give every counted layer forward weights/activations at ``bits`` and gradients at ``grad_bits``."""
        for layer in counted_layers(trainer.model):
            layer.precision = self._precision(bits)

    def _range_test_bits(self) -> int:
        return self.config.candidates[self.range_state["index"]]

    def before_step(self, trainer: Trainer) -> None:
        if not self.range_state["done"]:
            bits = self._range_test_bits()
            if self.range_state["window_steps"] == 0:
                self.range_state["accuracy_before"].append(self._held_accuracy(trainer, bits))
            self.range_state["steps"] += 1
        else:
            bits = self.bits_at(trainer.global_step, trainer.total_steps)
        self._set_bits(trainer, bits)
        self.steps_by_bits[bits] = self.steps_by_bits.get(bits, 0) + 1

    def after_step(self, trainer: Trainer) -> None:
        if not self.range_state["done"]:
            self._advance_range_test(trainer)
        self._set_bits(trainer, self.config.max_bits)  # evaluation (whenever it happens) at the static counterpart's width

    # -- precision range test --------------------------------------------------
    def on_epoch_start(self, trainer: Trainer, epoch: int) -> None:
        if self.config.branched and not self.range_state["done"]:
            self._branched_range_test(trainer)

    def _probe_batches(self, trainer: Trainer) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """``range_test_steps`` training batches, drawn once (seeded by the run's seed), shared by every candidate."""
        size, dataset = trainer.config.optim.batch_size, trainer.dataset
        generator = torch.Generator().manual_seed(trainer.config.seed * 7919 + 29)
        order = torch.randperm(dataset.train_size, generator=generator)
        batches = []
        for step in range(self.config.range_test_steps):
            index = order[(step * size) % dataset.train_size:][:size]
            batches.append((dataset.train_x[index], dataset.train_y[index]))
        return batches

    def _probe_step(self, trainer: Trainer, bits: int, x: torch.Tensor, y: torch.Tensor) -> None:
        """One plain SGD step at ``bits`` (step 0's learning rate), charged to the ledger."""
        self._set_bits(trainer, bits)
        for group in trainer.optimizer.param_groups:
            group["lr"] = trainer.learning_rate(0) * group.get("lr_scale", 1.0)
        attach_ledger(trainer.model, trainer.ledger)
        trainer.model.train()
        before = trainer.ledger.total_macs("forward")
        loss = F.cross_entropy(trainer.model(x), y)
        self.range_state["probe_forward_macs"] += trainer.ledger.total_macs("forward") - before
        trainer.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        trainer.optimizer.step()
        self.range_state["probe_steps"] += 1

    def _branched_range_test(self, trainer: Trainer) -> None:
        """Every candidate from the same snapshot (model, optimiser, RNG), the snapshot restored after each."""
        snapshot = (copy.deepcopy(trainer.model.state_dict()), copy.deepcopy(trainer.optimizer.state_dict()),
                    torch.get_rng_state())
        batches = self._probe_batches(trainer)
        state = self.range_state
        bitops_before, held_before = trainer.cost_summary()["total"]["bitops"], state["bitops"]
        for index, bits in enumerate(self.config.candidates):
            state["index"] = index
            state["accuracy_before"].append(self._held_accuracy(trainer, bits))
            for x, y in batches:
                self._probe_step(trainer, bits, x, y)
            after = self._held_accuracy(trainer, bits)
            state["accuracy_after"].append(after)
            state["differences"].append(after - state["accuracy_before"][-1])
            trainer.model.load_state_dict(snapshot[0])
            trainer.optimizer.load_state_dict(snapshot[1])
            torch.set_rng_state(snapshot[2])
            chosen = select_min_bits(self.config.candidates[:index + 1], state["differences"],
                                     self.config.range_test_threshold)
            if chosen is not None:
                self.min_bits, state["crossed"] = chosen, True
                break
        if self.min_bits is None:
            self.min_bits = self.config.max_bits
        state["probe_bitops"] = trainer.cost_summary()["total"]["bitops"] - bitops_before - (state["bitops"] - held_before)
        state["done"] = True
        self._set_bits(trainer, self.config.max_bits)

    def _held_accuracy(self, trainer: Trainer, bits: int) -> float:
        """Held-batch accuracy (%) at ``bits``, batch-statistics BatchNorm; its forward MACs go to the ledger."""
        assert self._held is not None
        self._set_bits(trainer, bits)
        before_macs = trainer.ledger.total_macs()
        attach_ledger(trainer.model, trainer.ledger)
        x, y = self._held
        with torch.no_grad(), batch_statistics_without_side_effects(trainer.model):
            correct = int((trainer.model(x).argmax(dim=1) == y).sum())
        macs = trainer.ledger.total_macs() - before_macs
        self.range_state["macs"] += macs
        self.range_state["bitops"] += macs * bits * bits
        return 100.0 * correct / int(y.numel())

    def _advance_range_test(self, trainer: Trainer) -> None:
        state = self.range_state
        state["window_steps"] += 1
        if state["window_steps"] < self.config.range_test_steps:
            return
        bits = self._range_test_bits()
        after = self._held_accuracy(trainer, bits)
        state["accuracy_after"].append(after)
        state["differences"].append(after - state["accuracy_before"][-1])
        state["window_steps"] = 0
        tried = self.config.candidates[:state["index"] + 1]
        chosen = select_min_bits(tried, state["differences"], self.config.range_test_threshold)
        if chosen is not None:
            self.min_bits, state["crossed"], state["done"] = chosen, True, True
        elif state["index"] + 1 == len(self.config.candidates):
            self.min_bits, state["done"] = self.config.max_bits, True
        else:
            state["index"] += 1

    # -- reporting and checkpoints ----------------------------------------------
    def mean_forward_bits(self) -> float:
        steps = sum(self.steps_by_bits.values())
        return sum(b * n for b, n in self.steps_by_bits.items()) / steps if steps else float("nan")

    def report(self) -> dict[str, Any]:
        state = self.range_state
        report: dict[str, Any] = {
            "min_bits": self.min_bits, "max_bits": self.config.max_bits, "grad_bits": self.config.grad_bits,
            "cycles": self.config.cycles, "schedule_rounding": self.config.schedule_rounding,
            "steps_by_forward_bits": {str(b): n for b, n in sorted(self.steps_by_bits.items())},
            "mean_forward_bits": self.mean_forward_bits(),
        }
        if self.config.range_test:
            tried = self.config.candidates[:len(state["differences"])]
            report["range_test"] = {
                "signal": "held-batch accuracy after minus before range_test_steps training steps at each width (pt)",
                "mode": self.config.range_test_mode,
                "probe_steps": state["probe_steps"], "probe_forward_macs": state["probe_forward_macs"],
                "probe_bitops": state["probe_bitops"],
                "candidates_tried": tried, "accuracy_before": state["accuracy_before"],
                "accuracy_after": state["accuracy_after"], "differences": state["differences"],
                "threshold": self.config.range_test_threshold, "crossed": state["crossed"], "done": state["done"],
                "training_steps": state["steps"], "held_samples": None if self._held is None else int(self._held[1].numel()),
                "held_from": self._held_from,
                "held_forward_macs": state["macs"], "held_forward_bitops": state["bitops"],
            }
        return report

    def state_dict(self) -> dict[str, Any]:
        state = self.range_state
        return {"min_bits": self.min_bits, "steps_by_bits": dict(self.steps_by_bits),
                "range_state": {**state, "accuracy_before": list(state["accuracy_before"]),
                                "accuracy_after": list(state["accuracy_after"]), "differences": list(state["differences"])}}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.min_bits = state["min_bits"]
        self.steps_by_bits = {int(b): int(n) for b, n in state["steps_by_bits"].items()}
        loaded = state["range_state"]
        self.range_state = {**self.range_state, **loaded, "accuracy_before": list(loaded["accuracy_before"]),
                            "accuracy_after": list(loaded["accuracy_after"]), "differences": list(loaded["differences"])}


__all__ = ["Config", "ConfigError", "Technique", "cyclic_bits", "select_min_bits"]


def pe_needs(training) -> list:
    """A fixed-point MAC array (not built yet: a design point names it and refuses)."""
    return [(base.FIXED_POINT_ARRAY, {}, "techniques.cpt (fixed-point MACs)")]
