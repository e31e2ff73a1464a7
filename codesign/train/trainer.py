"""The training loop: seeded, deterministic, checkpointed, with techniques hooked in.

Determinism: the model is initialised from ``config.seed``; the order of
samples in epoch ``e`` comes from a generator seeded with ``(seed, e)``; every
technique keeps its own random state in its ``state_dict``. A checkpoint holds
everything that changes (weights, optimiser, ledger, technique states, the
position in the epoch), so a killed run that resumes ends bit-identical to an
uninterrupted one.

Learning rate: cosine (or constant) over *all* scheduled steps, skipped ones
included, so that techniques that skip work train on the same budget and
schedule as their baseline.
"""

from __future__ import annotations

import io
import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from tqdm import tqdm

from codesign.energy import CostLedger, horowitz_45nm
from codesign.io.reports import write_bytes_atomic
from codesign.train.config import TrainConfig
from codesign.loops.data_sources import file_arrays, npm_arrays
from codesign.loops.npm_data import NPM_DATASETS
from codesign.train.data import Dataset, load_digits_dataset, synthetic_dataset, torch_dataset
from codesign.train.layers import attach_ledger
from codesign.train.memory import EVAL_CHUNK, check_memory
from codesign.train.models import configured_model
from codesign.train.techniques import build_techniques

CHECKPOINT_VERSION = 2  # 2: TT layers keep a running mean |x| per scale tracker


class CheckpointError(ValueError):
    """A checkpoint cannot be resumed from (truncated, corrupt, another version or configuration); names the file."""


@dataclass
class TrainResult:
    """What a run measured: accuracies (%), the cost summary (MACs, BitOPs, pJ) and technique reports."""

    config: dict
    test_accuracy: float
    history: list[dict[str, float]]
    cost: dict
    techniques: dict[str, Any]
    steps: int
    skipped_steps: int
    seconds: float
    resumed_from_step: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    validation_accuracy: float | None = None  # after the last epoch; None when the data has no validation split

    @property
    def energy_pj(self) -> float:
        return float(self.cost["total"]["energy_pj"])

    @property
    def bitops(self) -> float:
        return float(self.cost["total"]["bitops"])


def load_dataset(config: TrainConfig) -> Dataset:
    """The run's splits as tensors: a built-in set, an npm set from the cache, or the user's file."""
    data = config.data
    if data.name in NPM_DATASETS:
        return torch_dataset(npm_arrays(data.name, split_seed=data.split_seed,
                                        validation_fraction=data.validation_fraction, pad_to=data.pad_to))
    if data.name == "file":
        return torch_dataset(file_arrays(Path(data.path), test_fraction=data.test_fraction, split_seed=data.split_seed,
                                         validation_fraction=data.validation_fraction, pad_to=data.pad_to))
    if data.name == "digits":
        return load_digits_dataset(test_fraction=data.test_fraction, split_seed=data.split_seed,
                                   validation_fraction=data.validation_fraction)
    return synthetic_dataset(samples=data.synthetic_samples, test_fraction=data.test_fraction, seed=data.split_seed,
                             validation_fraction=data.validation_fraction)


class TrainingDiverged(ValueError):
    """The training loss stopped being a finite number: the run failed, whatever it would still write."""


class Trainer:
    def __init__(self, config: TrainConfig, *, dataset: Dataset | None = None, progress: bool = True,
                 description: str = "train", stop_on_divergence: bool = False) -> None:
        """``stop_on_divergence``: raise :class:`TrainingDiverged` at the first step whose loss is not finite (a
        command's run, which must not report success); studies keep training such a trial, as their records
        were made."""
        check_memory(config)  # before the data and the model take any of it
        self.config = config
        self.dataset = dataset or load_dataset(config)
        self.stop_on_divergence = stop_on_divergence
        if self.dataset.train_size == 0:
            raise ValueError(f"data: the training split is empty ({config.data.name}: test_fraction "
                             f"{config.data.test_fraction}, validation_fraction {config.data.validation_fraction} "
                             "leave no training sample)")
        self.progress = progress
        self.description = description
        torch.manual_seed(config.seed)
        self.model = configured_model(config.model, sample_shape=tuple(self.dataset.train_x.shape[1:]),
                                      classes=self.dataset.classes)
        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=config.optim.lr, momentum=config.optim.momentum,
                                         weight_decay=config.optim.weight_decay)
        self.ledger = CostLedger()
        # samples evaluated at once; a caller whose model scores each sample on its own may lower it (a TT layer's
        # states for 2,048 images outgrow the caches: 64-128 images evaluate 2.5x faster on one core)
        self.eval_chunk = EVAL_CHUNK
        self.techniques = build_techniques(config.techniques)
        self.batches_per_epoch = math.ceil(self.dataset.train_size / config.optim.batch_size)
        self.total_steps = self.batches_per_epoch * config.optim.epochs
        self.epoch = 0
        self.step_in_epoch = 0
        self.global_step = 0
        self.skipped_steps = 0
        self.history: list[dict[str, float]] = []
        self.epoch_losses: list[float] = []
        self.batch: tuple[torch.Tensor, torch.Tensor] | None = None
        for technique in self.techniques:
            technique.attach(self)

    # -- schedule and data -------------------------------------------------
    def learning_rate(self, step: int) -> float:
        if self.config.optim.schedule == "constant":
            return self.config.optim.lr
        return 0.5 * self.config.optim.lr * (1 + math.cos(math.pi * step / self.total_steps))

    def epoch_order(self, epoch: int) -> torch.Tensor:
        generator = torch.Generator().manual_seed(self.config.seed * 100_003 + epoch)
        return torch.randperm(self.dataset.train_size, generator=generator)

    def evaluate(self, x: torch.Tensor | None = None, y: torch.Tensor | None = None) -> float:
        """Test accuracy (%) under the current forward precision; costs nothing in the ledger."""
        x = self.dataset.test_x if x is None else x
        y = self.dataset.test_y if y is None else y
        attach_ledger(self.model, None)
        self.model.eval()
        with torch.no_grad():  # in chunks: a split of 10^4 samples at once would hold every layer's states at once
            chunk = self.eval_chunk
            correct = sum(int((self.model(x[start:start + chunk]).argmax(dim=1) == y[start:start + chunk]).sum())
                          for start in range(0, int(y.numel()), chunk))
        self.model.train()
        return 100.0 * correct / int(y.numel())

    def validation_accuracy(self) -> float:
        """Accuracy (%) on the held-out validation split: what every choice during training reads."""
        if not self.dataset.has_validation:
            raise ValueError("this run's data has no validation split (set data.validation_fraction > 0)")
        return self.evaluate(self.dataset.validation_x, self.dataset.validation_y)

    # -- checkpoints -------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        return {
            "version": CHECKPOINT_VERSION, "config": self.config.to_dict(), "model": self.model.state_dict(),
            "optimizer": self.optimizer.state_dict(), "ledger": self.ledger.state_dict(),
            "techniques": [technique.state_dict() for technique in self.techniques],
            "torch_rng": torch.get_rng_state(), "epoch": self.epoch, "step_in_epoch": self.step_in_epoch,
            "global_step": self.global_step, "skipped_steps": self.skipped_steps, "history": self.history,
            "epoch_losses": self.epoch_losses,
        }

    def save_checkpoint(self, path: Path) -> None:
        """Write atomically: a crash mid-write leaves the previous checkpoint intact."""
        buffer = io.BytesIO()
        torch.save(self.state_dict(), buffer)
        write_bytes_atomic(Path(path), buffer.getvalue())

    def load_checkpoint(self, path: Path) -> None:
        """Restore ``path``; a truncated, corrupt or foreign file raises :class:`CheckpointError` naming it."""
        try:
            state = torch.load(path, weights_only=False)
        except Exception as error:  # torch raises OSError, RuntimeError, EOFError or UnpicklingError for a bad file
            raise CheckpointError(f"{path}: not a readable checkpoint (truncated or corrupt?): "
                                  f"{type(error).__name__}: {error}; remove it to train from the start") from None
        if not isinstance(state, dict) or not {"version", "config"} <= set(state):
            raise CheckpointError(f"{path}: not a codesign training checkpoint (no version and config)")
        if state.get("version") != CHECKPOINT_VERSION:
            raise CheckpointError(f"{path}: checkpoint version {state.get('version')} is not {CHECKPOINT_VERSION}")
        if state["config"] != self.config.to_dict():
            raise CheckpointError(f"{path} was written by a different configuration; refusing to resume from it")
        try:
            self.load_state_dict(state)
        except (KeyError, TypeError, RuntimeError) as error:
            raise CheckpointError(f"{path}: the checkpoint lacks or mis-shapes a part ({type(error).__name__}: "
                                  f"{error}); remove it to train from the start") from None

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore a :meth:`state_dict` of this configuration (model, optimiser, ledger, techniques, RNG, counters)."""
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.ledger.load_state_dict(state["ledger"])
        for technique, technique_state in zip(self.techniques, state["techniques"]):
            technique.load_state_dict(technique_state)
        torch.set_rng_state(state["torch_rng"])
        self.epoch, self.step_in_epoch = state["epoch"], state["step_in_epoch"]
        self.global_step, self.skipped_steps = state["global_step"], state["skipped_steps"]
        self.history = state["history"]
        self.epoch_losses = state["epoch_losses"]

    # -- the loop ----------------------------------------------------------
    def train_step(self, x: torch.Tensor, y: torch.Tensor) -> float | None:
        """One scheduled step; returns the loss, or None when a technique skipped the batch."""
        self.batch = (x, y)
        # ask every technique (no short-circuit), so each one's random stream advances the same way in any combination
        if any([technique.skip_batch(self) for technique in self.techniques]):
            self.skipped_steps += 1
            return None
        for group in self.optimizer.param_groups:  # a group may scale the schedule ("lr_scale", e.g. SLU's gates)
            group["lr"] = self.learning_rate(self.global_step) * group.get("lr_scale", 1.0)
        for technique in self.techniques:
            technique.before_step(self)
        attach_ledger(self.model, self.ledger)
        self.model.train()
        logits = self.model(x)
        loss = F.cross_entropy(logits, y)
        total = loss
        for technique in self.techniques:
            extra = technique.extra_loss(self, logits, y)
            if extra is not None:
                total = total + extra
        self.optimizer.zero_grad(set_to_none=True)
        total.backward()
        for technique in self.techniques:
            technique.after_backward(self)
        self.optimizer.step()
        for technique in self.techniques:
            technique.after_step(self)
        return float(loss.detach())

    def fit(self, *, checkpoint: Path | None = None, resume: bool = False, checkpoint_every: int = 0,
            stop_after_steps: int | None = None, until_epoch: int | None = None) -> TrainResult | None:
        """Train for the configured epochs. With ``stop_after_steps`` the run stops early (after
        checkpointing) and returns None, as a killed run would leave it. With ``until_epoch`` it stops
        after that epoch's end (evaluation and techniques' epoch hooks done) and returns the result so far;
        a later call goes on from there."""
        started = time.perf_counter()
        resumed_from = None
        if resume and checkpoint is not None and Path(checkpoint).is_file():
            self.load_checkpoint(checkpoint)
            resumed_from = self.global_step
        if until_epoch is not None and not self.epoch < until_epoch <= self.config.optim.epochs:
            raise ValueError(f"until_epoch={until_epoch!r}: must lie after the current epoch {self.epoch} and at "
                             f"most at the configured {self.config.optim.epochs}")
        bar = tqdm(total=self.total_steps, initial=self.global_step, desc=self.description, disable=not self.progress,
                   leave=False, dynamic_ncols=True)
        try:
            while self.epoch < (self.config.optim.epochs if until_epoch is None else until_epoch):
                if self.step_in_epoch == 0:
                    for technique in self.techniques:
                        technique.on_epoch_start(self, self.epoch)
                order = self.epoch_order(self.epoch)
                while self.step_in_epoch < self.batches_per_epoch:
                    size = self.config.optim.batch_size
                    index = order[self.step_in_epoch * size:(self.step_in_epoch + 1) * size]
                    loss = self.train_step(self.dataset.train_x[index], self.dataset.train_y[index])
                    if loss is not None and self.stop_on_divergence and not math.isfinite(loss):
                        raise TrainingDiverged(
                            f"the training loss became {loss} at step {self.global_step + 1} (epoch {self.epoch}): "
                            f"the run diverged; lower optim.lr ({self.config.optim.lr}) or optim.weight_decay "
                            f"({self.config.optim.weight_decay})")
                    if loss is not None:
                        self.epoch_losses.append(loss)
                    self.step_in_epoch += 1
                    self.global_step += 1
                    bar.update(1)
                    if checkpoint is not None and checkpoint_every and self.global_step % checkpoint_every == 0:
                        self.save_checkpoint(checkpoint)
                    if stop_after_steps is not None and self.global_step >= stop_after_steps:
                        if checkpoint is not None:
                            self.save_checkpoint(checkpoint)
                        return None
                metrics = {"epoch": self.epoch, "test_accuracy": self.evaluate(),
                           "train_loss": sum(self.epoch_losses) / max(1, len(self.epoch_losses)),
                           "energy_pj": self.cost_summary()["total"]["energy_pj"]}
                if self.dataset.has_validation:
                    metrics["validation_accuracy"] = self.validation_accuracy()
                for technique in self.techniques:
                    technique.on_epoch_end(self, self.epoch, metrics)
                self.history.append(metrics)
                bar.set_postfix(acc=f"{metrics['test_accuracy']:.1f}")
                self.epoch += 1
                self.step_in_epoch = 0
                self.epoch_losses = []
        finally:
            bar.close()
        if checkpoint is not None:
            self.save_checkpoint(checkpoint)
        return TrainResult(
            config=self.config.to_dict(), test_accuracy=self.history[-1]["test_accuracy"], history=self.history,
            cost=self.cost_summary(), techniques={t.name: t.report() for t in self.techniques},
            steps=self.global_step, skipped_steps=self.skipped_steps, seconds=time.perf_counter() - started,
            resumed_from_step=resumed_from, validation_accuracy=self.history[-1].get("validation_accuracy"),
        )

    def cost_summary(self) -> dict:
        fp_mac_pj = next((t.fp_mac_pj() for t in self.techniques if t.fp_mac_pj() is not None), None)
        return self.ledger.summary(horowitz_45nm(), fp_mac_pj=fp_mac_pj)
