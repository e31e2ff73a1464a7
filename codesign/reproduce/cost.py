"""What a run costs with every pass charged once, and what a paper counts as its cost.

Why: the ledger (:mod:`codesign.energy`) charges training only (forward,
error and weight-gradient passes), but every run also evaluates the
validation split after each epoch (what every choice reads) and the test
split once; an arm that trains fewer epochs also evaluates less. Comparing
arms on training alone would hide that, so each run is charged its
evaluation passes too, once (:func:`charged_cost`). The trainer evaluates the
test split after every epoch as well (its history), while the charged cost
counts one test pass; :func:`every_test_charged` gives the figure with every
test pass charged, beside it. Units: energies in pJ, MACs and BitOPs as
counts.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from codesign.train.config import config_from_dict
from codesign.train.trainer import TrainResult

COST_KEYS = ("macs", "bitops", "compute_pj", "energy_pj")  # the cost totals charged per run, training plus evaluation


@dataclass(frozen=True, kw_only=True)
class PaperAccounting:
    """What a paper counts as its cost, read from the ledger's totals beside the project's modelled energy.

    ``key`` is one of :data:`COST_KEYS`: ``compute_pj`` (the energy of the MACs alone, by their precision, no
    data movement: E²-Train's computational energy, ABVS's Eq. (2)), ``bitops`` (CPT) or ``macs`` (an
    operation count). ``name`` says it in the paper's words, ``citation`` where.
    """

    key: str
    name: str
    citation: str

    def __post_init__(self) -> None:
        if self.key not in COST_KEYS:
            raise ValueError(f"paper accounting key must be one of {COST_KEYS}, got {self.key!r}")


E2TRAIN_ACCOUNTING = PaperAccounting(
    key="compute_pj", name="computational energy",
    citation=("E²-Train (NeurIPS 2019) Sec. 4.1: the energy of the computation, by precision (its FPGA measures "
              "the compute engine); here the ledger's MAC energy alone, no buffer or DRAM traffic"))


@dataclass(frozen=True, kw_only=True)
class EvaluationPasses:
    """What a run evaluates: ``epochs`` (the validation split and the test split after each), ``validation`` and
    ``test`` images per pass."""

    epochs: int
    validation: int
    test: int

    def __post_init__(self) -> None:
        for name in ("epochs", "validation", "test"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < (1 if name == "epochs" else 0):
                raise ValueError(f"{name} must be an int >= {1 if name == 'epochs' else 0}, got {value!r}")
        if self.test == 0:
            raise ValueError("test must be >= 1: every run evaluates the test split")

    @property
    def charged_images(self) -> int:
        """Images :func:`charged_cost` charges: the validation split after every epoch and the test split once."""
        return self.epochs * self.validation + self.test


def every_test_charged(charged: float, training: float, passes: EvaluationPasses) -> float:
    """A cost of :func:`charged_cost` (``charged``, with its training part ``training``) with the test pass after
    every epoch charged, not only the last.

    ``charged - training`` is what :func:`charged_cost` added for ``passes.charged_images`` evaluated images, all at
    one forward cost per image; the ``epochs - 1`` test passes it left out cost as much per image.
    """
    for name, value in (("charged", charged), ("training", training)):
        if not (isinstance(value, (int, float)) and math.isfinite(value) and value >= 0):
            raise ValueError(f"{name} must be a finite number >= 0, got {value!r}")
    if training > charged:
        raise ValueError(f"the training part ({training}) exceeds the charged cost ({charged})")
    per_image = (charged - training) / passes.charged_images
    return float(charged) + (passes.epochs - 1) * passes.test * per_image


def data_sizes(config: Mapping[str, Any]) -> dict[str, int]:
    """Images in the training, validation and test splits of a run's data (the same at every split seed)."""
    from codesign.train.trainer import load_dataset

    dataset = load_dataset(config_from_dict(dict(config)))
    return {"train": dataset.train_size, "validation": int(dataset.validation_y.numel()) if dataset.has_validation
            else 0, "test": int(dataset.test_y.numel())}


# Forward MACs a technique spends on images that are not training samples (counted in the ledger's forward
# phase): compressed training's pruning search over the validation split, CPT's range-test batches (held, and
# probe batches when branched). They are charged already, once; they must not inflate the forward cost per image
# that evaluation passes are priced at.
NON_TRAINING_FORWARD_MACS = (("compress", ("search_forward_macs",)), ("cpt", ("range_test", "held_forward_macs")),
                             ("cpt", ("range_test", "probe_forward_macs")))


def non_training_forward_macs(run: TrainResult) -> int:
    """The forward MACs of :data:`NON_TRAINING_FORWARD_MACS` in this run's technique reports (0 when none)."""
    total = 0
    for technique, path in NON_TRAINING_FORWARD_MACS:
        value: Any = run.techniques.get(technique)
        for key in path:
            value = value.get(key) if isinstance(value, Mapping) else None
        total += int(value or 0)
    return total


def charged_cost(run: TrainResult, sizes: Mapping[str, int]) -> dict[str, float]:
    """The run's cost with every pass charged once: training (the ledger), plus evaluation forward passes.

    The ledger counts training only (forward, error, weight gradient). A run also evaluates the validation
    split after every epoch (what every choice reads) and the test split once at the end; those forward
    passes are charged here at the run's own training forward cost per image (forward-phase totals, less the
    share of :func:`non_training_forward_macs`, over the images it trained on: ``train`` x epochs x the share of
    steps not dropped), in each of :data:`COST_KEYS`. That is the mean over training: for compressed training it
    mixes the dense FP32 warm-up epochs with the pruned 8-bit ones, so it overstates the pruned model's evaluation.
    For an arm that skips blocks in training (SLU, stochastic depth) that undercounts the full network an
    evaluation runs; for CPT or ABVS it prices evaluation at the mean training precision.
    Returns ``{key: training + evaluation}``, ``evaluation_share`` (of ``energy_pj``) and, per key,
    ``{key}_every_test``: the same with the test pass after every epoch charged (:func:`every_test_charged`).
    """
    forward = run.cost["by_phase"]["forward"]
    training_share = 1 - non_training_forward_macs(run) / forward["macs"] if forward["macs"] else 0.0
    epochs = int(run.config["optim"]["epochs"])
    kept = (run.steps - run.skipped_steps) / run.steps if run.steps else 0.0
    forwarded = sizes["train"] * epochs * kept
    passes = EvaluationPasses(epochs=epochs, validation=sizes["validation"], test=sizes["test"])
    evaluated = passes.charged_images
    charged: dict[str, float] = {}
    for key in COST_KEYS:
        evaluation = forward[key] * training_share / forwarded * evaluated if forwarded else 0.0
        charged[key] = float(run.cost["total"][key]) + evaluation
        charged[f"{key}_every_test"] = every_test_charged(charged[key], float(run.cost["total"][key]), passes)
        if key == "energy_pj":
            charged["evaluation_share"] = evaluation / charged[key] if charged[key] else 0.0
    return charged
