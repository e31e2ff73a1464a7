"""What the golden training loops share: their error, the loss, and progress bars when available."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, Callable, ClassVar, Dict, Mapping, Optional, Tuple

import functools
import math
import time

import numpy as np


class HwTrainError(ValueError):
    """The configuration cannot be trained by a design-point loop (model, technique, shapes)."""


def progress_bar(iterable, enabled: bool, **kwargs):
    """``iterable`` with a tqdm bar when ``enabled`` and tqdm is installed (a board image may lack it)."""
    if not enabled:
        return iterable
    try:
        from tqdm.auto import tqdm
    except ImportError:
        return iterable
    return tqdm(iterable, **kwargs)


def softmax_cross_entropy(logits: np.ndarray, y: np.ndarray) -> Tuple[float, np.ndarray]:
    """Mean cross-entropy (float64) and its gradient ``(softmax - onehot) / n`` with respect to the logits, the
    same bits whatever the logits' memory order (their rows' sums are taken in one order: a TT layer's output
    comes out row- or column-major as its contractions fall)."""
    grad, chosen = softmax_gradient(logits, y)
    return cross_entropy_of(chosen), grad


@functools.lru_cache(maxsize=16)
def _rows(n: int) -> np.ndarray:
    rows = np.arange(n)
    rows.flags.writeable = False  # kept: a step's batch size recurs
    return rows


def label_positions(y, n: int, classes: int) -> np.ndarray:
    """Flat positions of the labels ``y`` in a row-major ``(n, classes)`` matrix: one per sample, each within
    ``classes``, else an error (what a softmax gradient subtracts its one-hot from)."""
    labels = np.asarray(y, dtype=np.intp)
    if labels.shape != (n,):
        raise ValueError(f"labels of shape {labels.shape} for {n} samples")
    return np.ravel_multi_index((_rows(n), labels), (n, classes))  # bounds checked


def softmax_gradient(logits: np.ndarray, y: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
    """:func:`softmax_cross_entropy`'s gradient, and the labels' probabilities its loss is taken from
    (:func:`cross_entropy_of`): a list step's backward waits for the gradient alone, and the host takes the loss
    while the backward lists compute. ``logits`` ``(n, classes)`` as float64, ``y`` ``n`` class indices (each
    within ``classes``, else an error). In place on one copy, the labels' entries picked by flat index: the bits
    of the textbook expression in two thirds of its time. The rows' maxima are taken in the logits' own memory
    order (exact in any; down the columns of column-major logits, a third of the time across short rows), the
    rest on a row-major copy, so that every row is summed in one order."""
    logits = np.asarray(logits, dtype=np.float64)
    n, classes = logits.shape
    if n == 0:
        raise ValueError("softmax cross-entropy of no samples")
    # ndarray.max and .sum, without their wrappers
    probs = np.subtract(logits, np.maximum.reduce(logits, axis=1, keepdims=True), order="C")
    np.exp(probs, out=probs)
    probs /= np.add.reduce(probs, axis=1, keepdims=True)
    flat = probs.reshape(-1)
    picked = label_positions(y, n, classes)
    chosen = flat[picked]
    flat[picked] -= 1.0
    probs /= n
    return probs, chosen


def cross_entropy_of(chosen: np.ndarray) -> float:
    """The mean cross-entropy of the labels' probabilities ``chosen`` (:func:`softmax_gradient`'s):
    ``-mean(log(max(p, tiny)))``, the mean as a sum over the samples."""
    return -float(np.add.reduce(np.log(np.maximum(chosen, _TINY)))) / chosen.size


_TINY = np.finfo(np.float64).tiny


MAX_WIDTH = 65_536  # features of a layer (as a training configuration's model.hidden)
MAX_BATCH = 65_536
MAX_EPOCHS = 100_000
MAX_SEED = 2**32 - 1


def int_in(value: Any, low: int, high: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and low <= value <= high


def _finite(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _as_lists(value: Any) -> Any:
    return [_as_lists(item) for item in value] if isinstance(value, (list, tuple)) else value


def _as_tuples(value: Any) -> Any:
    return tuple(_as_tuples(item) for item in value) if isinstance(value, (list, tuple)) else value


class LoopSetup:
    """What every loop's set-up dataclass shares: a PE spec, layer widths, and the plain data design.json holds.

    A board has no training configuration to derive a set-up from; it
    rebuilds it from design.json's ``loop`` with :meth:`from_dict`, so every field is checked as the desktop's
    configuration checks it (:meth:`check_shared`) before anything is allocated.
    """

    spec_class: ClassVar[type]  # the PE spec the loop's IP is built with
    # fields design.json holds as lists and the set-up as tuples (nested ones too), each required
    list_fields: ClassVar[Tuple[str, ...]] = ("layers",)
    optional_list_fields: ClassVar[Tuple[str, ...]] = ()  # as ``list_fields``, but a design.json may leave them out

    def check_shared(self, *, widths: bool = True) -> None:
        """The fields the loops share, each within what a board can hold: ``layers`` (when ``widths``: ints in
        1..MAX_WIDTH), ``batch_size``, ``epochs``, ``seed``, ``lr`` (> 0), ``weight_decay`` and ``momentum`` (where
        the loop has them), ``schedule``. One :class:`HwTrainError` names the field."""
        checks = [("batch_size", int_in(self.batch_size, 1, MAX_BATCH), f"an int in [1, {MAX_BATCH}]"),
                  ("epochs", int_in(self.epochs, 1, MAX_EPOCHS), f"an int in [1, {MAX_EPOCHS}]"),
                  ("seed", int_in(self.seed, 0, MAX_SEED), f"an int in [0, {MAX_SEED}]"),
                  ("lr", _finite(self.lr) and self.lr > 0, "a finite number > 0"),
                  ("schedule", self.schedule in ("cosine", "constant"), "'cosine' or 'constant'")]
        if hasattr(self, "weight_decay"):
            checks.append(("weight_decay", _finite(self.weight_decay) and self.weight_decay >= 0,
                           "a finite number >= 0"))
        if hasattr(self, "momentum"):
            checks.append(("momentum", _finite(self.momentum) and 0 <= self.momentum < 1, "a number in [0, 1)"))
        if widths:
            layers = self.layers
            checks.append(("layers", isinstance(layers, (list, tuple)) and len(layers) >= 2
                           and all(int_in(n, 1, MAX_WIDTH) for n in layers),
                           f"at least two layer widths, ints in [1, {MAX_WIDTH}]"))
        for name, good, wanted in checks:
            if not good:
                raise HwTrainError(f"{name} must be {wanted}, got {getattr(self, name)!r}")

    def to_dict(self) -> Dict[str, Any]:
        values = {f.name: getattr(self, f.name) for f in fields(self)}
        values["spec"] = self.spec.to_dict()
        for name in self.list_fields + self.optional_list_fields:
            values[name] = _as_lists(getattr(self, name))
        return values

    @classmethod
    def from_dict(cls, values: Mapping[str, Any]):
        """The set-up design.json's ``loop.setup`` holds; a missing, unknown or mistyped field is one
        :class:`HwTrainError` naming it."""
        if not isinstance(values, Mapping):
            raise HwTrainError(f"must be an object of set-up fields, got {type(values).__name__}")
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(values) - known)
        missing = sorted(name for name in ("spec", *cls.list_fields) if name not in values)
        if unknown or missing:
            raise HwTrainError(f"unknown field(s) {unknown}" if unknown else f"lacks {missing}")
        lists = {name: values[name] for name in cls.list_fields + cls.optional_list_fields if name in values}
        if not isinstance(values["spec"], Mapping) or not all(isinstance(v, (list, tuple)) for v in lists.values()):
            names = list(lists)
            named = " and ".join(names) if len(names) < 3 else f"{', '.join(names[:-1])} and {names[-1]}"
            raise HwTrainError(f"spec must be an object of PE fields, and {named} lists of values")
        try:
            spec = cls.spec_class(**values["spec"])
        except (TypeError, ValueError) as error:
            raise HwTrainError(f"spec: {error}") from None
        try:
            return cls(**{**values, "spec": spec, **{name: _as_tuples(v) for name, v in lists.items()}})
        except TypeError as error:  # a comparison or an arithmetic step a mistyped field tripped over
            raise HwTrainError(str(error)) from None


def _split_arrays(data, split: str) -> Tuple[Any, Any]:
    x, y = getattr(data, f"{split}_x", None), getattr(data, f"{split}_y", None)
    as_array = (lambda v: None if v is None else np.asarray(v.numpy() if hasattr(v, "numpy") else v))
    return as_array(x), as_array(y)


def check_fit_data(data, *, features: int, classes: int, needs_validation: bool = False) -> None:
    """The data a loop is asked to fit, checked against its network before a step runs: non-empty train and test
    splits (and a validation split where the loop reads one), float samples of ``features`` values each, integer
    labels in ``0..classes - 1``. One :class:`HwTrainError` names the split and the field."""
    splits = ("train", "test", "validation") if needs_validation else ("train", "test")
    data_classes = getattr(data, "classes", classes)
    if isinstance(data_classes, bool) or not isinstance(data_classes, (int, np.integer)) \
            or not 2 <= data_classes <= classes:
        raise HwTrainError(f"data.classes is {data_classes!r}; the network has {classes} outputs")
    for split in splits:
        x, y = _split_arrays(data, split)
        if x is None or y is None or y.ndim != 1 or len(y) == 0:
            raise HwTrainError(f"data.{split}_x/{split}_y: the {split} split is empty or missing"
                               + (" (this loop reads a validation split)" if split == "validation" else ""))
        if x.shape[0] != y.shape[0] or x.dtype.kind != "f" or int(np.prod(x.shape[1:])) != features:
            raise HwTrainError(f"data.{split}_x: {x.shape} {x.dtype} for {y.shape[0]} labels; the network takes "
                               f"float samples of {features} values (codesign bundle writes them)")
        if y.dtype.kind not in "iu" or y.min() < 0 or y.max() >= classes:
            raise HwTrainError(f"data.{split}_y: labels must be integers in 0..{classes - 1} (got {y.dtype}, "
                               f"{y.min()!r}..{y.max()!r})")
        if not np.all(np.isfinite(x)):
            raise HwTrainError(f"data.{split}_x: holds values that are not finite")


KEEP_LISTS = 8  # built lists a list trainer keeps: both buffer phases for a full and a last, shorter batch, spares


@dataclass(frozen=True, eq=False)
class StagedBatch:
    """A batch the host prepared for the next step while this one's lists computed: ``x``, checked (a copy of its
    own, in the float type the step converts a batch to), and ``key``, what the preparation assumed (the scale its
    codes were rounded at, where they were written). The next step takes it only where its batch, converted as the
    step converts it, is this one bit for bit under the same key."""

    x: np.ndarray
    key: Tuple[Any, ...]

    def matches(self, x, key: Tuple[Any, ...] = ()) -> bool:
        """Whether ``x`` is the staged batch under ``key``, bit for bit in ``self.x``'s float type (-0 is not +0: an
        FB container word keeps the sign; a NaN never is, as none is staged: the step's own check then says why)."""
        if key != self.key:
            return False
        x = np.asarray(x, dtype=self.x.dtype)
        return x.shape == self.x.shape and x.tobytes() == self.x.tobytes()  # their bytes: half array_equal's time


def epoch_batches(train_x, order: np.ndarray, batch: int, steps: int):
    """An epoch's ``steps`` batches of ``train_x`` in ``order``: each step's rows, its batch and the next step's
    batch (None for the last), which a list trainer writes beside its lists."""
    x = train_x[order[:batch]]
    for index in range(steps):
        following = train_x[order[(index + 1) * batch:(index + 2) * batch]] if index + 1 < steps else None
        yield order[index * batch:(index + 1) * batch], x, following
        x = following


class StateOnDevice:
    """Mixin of a list trainer whose state lives on the device (:mod:`codesign.loops.fb_lists`,
    :mod:`codesign.loops.csb_lists`, :mod:`codesign.loops.csb_conv_lists`): everything that reads the state first
    pulls it back (``_pull``, only when a step has changed it), then runs the loop's own code. Its step's lists are
    built once and kept (``_built``, ``lists_built``)."""

    _built: Dict[Any, Any]
    lists_built: int
    shell: Any
    device: Any
    beside_seconds: Dict[Tuple[int, int], float]  # (0, phase) -> the host's seconds beside it in the last step
    _staged: Optional[StagedBatch]  # the next step's batch, its codes written beside this step's lists
    inputs_staged: int  # list steps that took the batch staged beside the step before

    def _pull(self) -> None:
        raise NotImplementedError

    def _kept_lists(self, key, build: Callable[[], Any]) -> Any:
        """The lists kept under ``key``, else ``build()``'s, kept (the oldest let go past :data:`KEEP_LISTS`): a
        step runs the same lists every time, and building them is host time."""
        built = self._built.get(key)
        if built is None:
            if len(self._built) >= KEEP_LISTS:
                self._built.pop(next(iter(self._built)))
            built = self._built[key] = build()
            self.lists_built += 1
        return built

    def _run_phases(self, phases, beside: Optional[Callable[[], None]] = None, first: int = 0) -> None:
        """``phases`` of lists one after the other on the trainer's shell, in place over its device buffer (a
        phase's lists side by side on the PE's IPs); ``beside``: host work for while the last of them computes
        (on a board, between its IPs' starts and their waits), its seconds kept in ``beside_seconds`` under
        ``(0, first + that phase's index)`` (``first``: the step's phases before these)."""
        phases = list(phases)
        for index, phase in enumerate(phases):
            key = (0, first + index)
            if beside is None or index < len(phases) - 1:
                self.device = self.shell.run_phase(phase, self.device)
                continue

            def timed(work=beside, key=key) -> None:
                started = time.perf_counter()
                work()
                self.beside_seconds[key] = time.perf_counter() - started
            self.device = self.shell.run_phase(phase, self.device, beside=timed)
            if key not in self.beside_seconds:
                raise HwTrainError("the shell did not run the host's work it was given beside a phase "
                                   "(run_phase(phase, arena, beside=...) must call beside once)")

    def _checked_forward(self, x, y, *, key: Tuple[Any, ...], check: Callable[[Any, Any], Tuple[Any, ...]],
                         lists_for: Callable[[int], Any], write: Callable[[np.ndarray], list],
                         before: Callable[[], list] = list) -> Tuple[Any, ...]:
        """The step's forward phases on its batch ``(x, y)``; returns ``check(x, y)`` (the checked batch, ``x``
        first) and the step's lists (``lists_for(samples)``).

        Where the step before staged a batch under ``key`` (``_staged``), the forward runs on its codes at once and
        the batch is checked beside it: most steps take that batch, and the check is host time the IPs can hide.
        A batch that is not the staged one bit for bit has its codes written (``write(x)``: the ranges to flush)
        and the forward run again; a batch that fails the check raises its error once the phase is done, with no
        state word, buffer or step count moved: the forward writes only its own outputs, which every step writes
        before it reads them (``tests/loops/test_csb_lists.py``, ``test_fb_lists.py``). Without a staged batch the
        check comes first, before anything is written. ``before()``: the step's other writes its forward reads,
        set by the trainer's state, not the batch (the ranges to flush), made before the forward either way."""
        staged, self._staged = self._staged, None
        if staged is not None and staged.key == key:
            ranges = before()
            if ranges:
                self.shell.flush(self.device, ranges)
            lists = lists_for(staged.x.shape[0])
            found: Dict[str, Any] = {}

            def beside() -> None:
                try:
                    found["batch"] = check(x, y)
                    found["matches"] = staged.matches(found["batch"][0], key)
                except Exception as error:  # raised once the IPs are done: a board is never left running
                    found["error"] = error
            self._run_phases(lists.forward_phases, beside=beside)
            if "error" in found:
                raise found["error"]
            batch = found["batch"]
            if found["matches"]:
                self.inputs_staged += 1
                return (*batch, lists)
            ranges = write(batch[0])
        else:
            batch = check(x, y)
            ranges = [*before(), *write(batch[0])]
        lists = lists_for(batch[0].shape[0])
        self.shell.flush(self.device, ranges)
        self._run_phases(lists.forward_phases)
        return (*batch, lists)

    def _run_backward(self, phases, loss: Callable[[], float], next_x, first: int) -> float:
        """The step's backward ``phases`` (:meth:`_run_phases`); beside the last, the step's ``loss()`` taken (from
        the labels' probabilities, or from logits the host reads there), where the caller gave the next batch
        ``next_x`` that batch staged (the trainer's ``_stage``), and the next step's start prepared
        (:meth:`_prepare_next`). Returns the loss."""
        taken: Dict[str, float] = {}

        def beside() -> None:
            taken["loss"] = loss()
            if next_x is not None:
                self._stage(next_x)
            self._prepare_next()
        self._run_phases(phases, beside=beside, first=first)
        return taken["loss"]

    def _prepare_next(self) -> None:
        """Beside a step's last lists: what the next step's start would otherwise compute while every IP waits
        (a trainer's own; none here). It must not raise: whatever fails, the next step computes and reports."""

    def read_weights(self) -> Dict[str, Any]:
        self._pull()
        return super().read_weights()

    def float_weights(self):
        self._pull()
        return super().float_weights()

    def logits(self, x) -> np.ndarray:
        self._pull()
        return super().logits(x)


class ScheduledLoop:
    """What every loop's trainer shares: the learning-rate schedule and the seeded sample order.

    Needs ``self.setup`` (``lr``, ``schedule``, ``epochs``, ``seed``),
    ``self.step`` and ``self.steps_per_epoch`` (None before a fit).
    """

    def learning_rate(self, step: Optional[int] = None) -> float:
        """The set-up's rate at this step (or at ``step``): cosine over all steps of ``fit`` (the base rate before
        a fit)."""
        if self.setup.schedule == "constant" or self.steps_per_epoch is None:
            return self.setup.lr
        total = self.setup.epochs * self.steps_per_epoch
        at = self.step if step is None else step
        return 0.5 * self.setup.lr * (1 + math.cos(math.pi * min(at, total) / total))

    def epoch_order(self, epoch: int, samples: int) -> np.ndarray:
        """The sample order of epoch ``epoch``, drawn from ``(seed, epoch)``."""
        return np.random.default_rng((self.setup.seed, epoch)).permutation(samples)

