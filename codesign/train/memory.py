"""A training run's peak memory, estimated from its shapes before anything is built, and the check that refuses it.

Why: a configuration far too large for the machine (a dense MLP of 65536-wide
layers, a TT layer whose initialisation factorises a dense matrix of 10⁹
entries, a million samples evaluated in one batch) used to be accepted and
then die minutes into training with a ``MemoryError`` traceback, after its
output folder was made. :func:`check_memory` runs first and refuses such a run
with the numbers and the field to change.

The estimate is meant as an upper bound on how much the process grows while
training, not a prediction to the byte. The model is built on PyTorch's
``meta`` device (shapes, no storage) and one sample is passed through it, so
the parameter count and the activations per sample are exact for every model
the configuration can name; the multipliers below say how many copies of each
a step may hold. ``tests/train/test_memory.py`` checks it against the peak
resident memory measured in a fresh process: never below, and within a
stated factor above.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from codesign.train.geometry import data_geometry

FLOAT32, FLOAT64, INT64 = 4, 8, 8
PARAMETER_COPIES = 5  # weights, gradients, two optimiser moments (Adam; SGD keeps one), a quantised copy a technique holds
ACTIVATION_COPIES = 4  # per sample and layer: the output kept for backward, its gradient, two transients (a quantised
#                        or masked copy, the activation function's output)
EVAL_CHUNK = 2048  # samples evaluated at once (Trainer.evaluate): every split of the digits in one chunk
EVALUATION_COPIES = 3  # evaluation (no gradients) on a chunk at once: a layer's input, its output, a transient
DATA_COPIES = FLOAT64 + FLOAT32  # bytes per feature: generated in float64, kept as float32
TT_STATE_COPIES = 8  # float64 copies, per sample, of a TT layer's largest contraction state: the states kept for the
#                     backward sweep, their gradients, einsum's intermediates and the quantised copies
TT_INIT_COPIES = 4  # float64 copies of a layer's dense matrix while TT-SVD makes its cores (drawn, unfolded, factors,
#                     the reconstruction whose norm scales them)
RUNTIME_BYTES = 256 * 2**20  # what a run loads besides its tensors: scikit-learn for digits, torch's autograd and
#                              allocator caches, the techniques' bookkeeping

# which field of the configuration shrinks each part of the estimate
REMEDIES = {"parameters": "model.hidden or model.width", "activations": "optim.batch_size or model.hidden/model.width",
            "evaluation": "data.synthetic_samples, data.test_fraction or model.hidden/model.width",
            "data": "data.synthetic_samples",
            "tt_initialisation": "model.hidden (techniques.tt factorises each dense layer at the start)",
            "runtime": "nothing in the configuration"}


class RunTooLargeError(ValueError):
    """A run's estimated peak memory exceeds what the machine has available (nothing was written)."""


@dataclass(frozen=True, kw_only=True)
class MemoryEstimate:
    """Bytes per part of a run's peak (see :data:`REMEDIES` for the parts) and the shapes they come from."""

    parameters: int  # count of the dense model's parameters
    activations_per_sample: int  # values every layer outputs for one sample, summed
    parts: Mapping[str, int]

    def __post_init__(self) -> None:
        for name in ("parameters", "activations_per_sample"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"{name} must be an int >= 0, got {value!r}")
        unknown = set(self.parts) - set(REMEDIES)
        if unknown or any(isinstance(v, bool) or not isinstance(v, int) or v < 0 for v in self.parts.values()):
            raise ValueError(f"parts must map {sorted(REMEDIES)} to byte counts >= 0, got {dict(self.parts)!r}")

    @property
    def total(self) -> int:
        return sum(self.parts.values())

    @property
    def largest(self) -> str:
        return max(self.parts, key=lambda name: self.parts[name])

    def describe(self) -> str:
        shown = ", ".join(f"{name.replace('_', ' ')} {gib(size)}" for name, size in
                          sorted(self.parts.items(), key=lambda item: -item[1]) if size)
        return f"about {gib(self.total)} at its peak ({shown})"


def gib(size: float) -> str:
    return f"{size / 2**30:.2f} GiB" if size >= 2**28 else f"{size / 2**20:.0f} MiB"


def _shapes(config) -> tuple[int, int, int, int]:
    """(parameters, activation values per sample, largest layer output, largest weight) of the dense model."""
    import torch

    from codesign.train.models import configured_model

    geometry = data_geometry(config.data)
    with torch.device("meta"):  # shapes without storage: a 10⁹-parameter model costs nothing here
        model = configured_model(config.model, sample_shape=geometry.sample_shape, classes=geometry.classes)
    outputs: list[int] = []
    leaves = [module for module in model.modules() if not any(True for _ in module.children())]
    hooks = [module.register_forward_hook(lambda module, args, out: outputs.append(out.numel())) for module in leaves]
    try:
        with torch.no_grad():
            model(torch.empty(1, *geometry.sample_shape, device="meta"))
    finally:
        for hook in hooks:
            hook.remove()
    weights = [p.numel() for p in model.parameters() if p.dim() >= 2] or [0]
    return sum(p.numel() for p in model.parameters()), sum(outputs), max(outputs), max(weights)


def _largest_tt_state(config) -> int:
    """Values per sample of the largest state a TT layer's forward sweep makes: after core ``k``, the output modes
    produced times the inner rank times the input modes left (ranks as TT-SVD caps them)."""
    from codesign.train.tt.modes import layer_modes

    max_rank = config.techniques["tt"].max_rank
    largest = 0
    for in_modes, out_modes in layer_modes(config):
        sizes = [m * n for m, n in zip(out_modes, in_modes)]
        for k in range(len(sizes)):
            rank = 1 if k == len(sizes) - 1 else min(max_rank, math.prod(sizes[:k + 1]), math.prod(sizes[k + 1:]))
            largest = max(largest, math.prod(out_modes[:k + 1]) * rank * math.prod(in_modes[k + 1:]))
    return largest


def estimate_peak_memory(config) -> MemoryEstimate:
    """The peak memory a :class:`~codesign.train.config.TrainConfig` run may take, from its shapes alone."""
    parameters, per_sample, widest, largest_weight = _shapes(config)
    geometry = data_geometry(config.data)
    features, samples = geometry.features, geometry.samples
    evaluated = min(EVAL_CHUNK, math.ceil(samples * max(config.data.test_fraction, config.data.validation_fraction)))
    tt = "tt" in config.techniques
    train_bytes = per_sample * FLOAT32 * ACTIVATION_COPIES  # per sample of a training batch
    eval_bytes = widest * FLOAT32 * EVALUATION_COPIES  # per sample of an evaluated split
    if tt:  # a TT layer contracts its input core by core in float64, not through one dense matrix product
        state = _largest_tt_state(config) * FLOAT64 * TT_STATE_COPIES
        train_bytes, eval_bytes = max(train_bytes, state), max(eval_bytes, state)
    parts = {
        "parameters": parameters * FLOAT32 * PARAMETER_COPIES,
        "activations": config.optim.batch_size * train_bytes,
        "evaluation": evaluated * eval_bytes,
        "data": samples * (features * DATA_COPIES + 2 * INT64),
        "tt_initialisation": largest_weight * FLOAT64 * TT_INIT_COPIES if tt else 0,
        "runtime": RUNTIME_BYTES,
    }
    return MemoryEstimate(parameters=parameters, activations_per_sample=per_sample, parts=parts)


def _read_int(path: Path) -> Optional[int]:
    try:
        text = path.read_text().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


def available_memory() -> Optional[int]:
    """Bytes this process may still take: the kernel's MemAvailable, or less under a cgroup limit; None if unknown."""
    limits = []
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                limits.append(int(line.split()[1]) * 1024)
    except (OSError, ValueError, IndexError):
        pass
    cgroup = Path("/sys/fs/cgroup")
    limit, used = _read_int(cgroup / "memory.max"), _read_int(cgroup / "memory.current")
    if limit is not None and used is not None:
        limits.append(max(limit - used, 0))
    return min(limits) if limits else None


def check_memory(config, *, available: Optional[int] = None) -> MemoryEstimate:
    """Refuse ``config`` when its estimated peak exceeds ``available`` bytes (default: what the machine has now).

    Raises :class:`RunTooLargeError` (a ``ValueError``) with the estimate, what is
    available and the field that shrinks the largest part. Where the available
    memory cannot be read, nothing is refused.
    """
    estimate = estimate_peak_memory(config)
    available = available_memory() if available is None else available
    if available is not None and estimate.total > available:
        raise RunTooLargeError(f"this run needs {estimate.describe()}, more than the {gib(available)} available on this "
                           f"machine; the largest part is the {estimate.largest.replace('_', ' ')}: make "
                           f"{REMEDIES[estimate.largest]} smaller")
    return estimate

