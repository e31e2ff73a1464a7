"""ABVS: adaptive fraction bits with voltage scaling (paper 004: Cheng & Hashimoto, Sec. III, Fig. 3, Eqs. (1)-(2)).

Why: early training tolerates coarse arithmetic, and a narrower FP-MAC is both
smaller and faster, so it can run at a lower supply. ABVS starts training at
``fb_min`` fraction bits and adds one bit whenever the validation accuracy stopped
improving, up to ``fb_max`` (the paper's main setting: the *least sufficient
FB*, see :func:`least_sufficient_fb`).

Arithmetic. Every counted layer computes in ``FloatFormat(exp_bits=exp_bits,
frac_bits=FB)``: its input activations, weights and output gradients are
rounded to FB (``FloatQuantizer``), the weight gradients are rounded after
backward, and the stored state — parameters and SGD momentum buffers — is
rounded after every optimiser step (and the initial weights at attach). This
emulates rounding after each layer-level operation, as QPyTorch does and as
the paper's Darknet emulation does. Deviation (see
:mod:`codesign.train.layers`): the sums inside a convolution or matrix
product accumulate in float32, not with a rounding after every MAC as the
paper's FP-MAC would; batch-norm statistics and the optimiser's
intermediate arithmetic also stay in float32.

FB rule (Fig. 3, reconstructed from the text). ``A_check = 0`` and FB =
``fb_min`` at the start. After each epoch ``i`` (0-based) the trainer's
validation accuracy becomes ``A_cur`` (a fraction in [0, 1]; the run's data
must hold a validation split, ``data.validation_fraction > 0``, whenever the
FB can change: the rule is a choice, and choices never read the test set). Epoch ``i`` is a *check epoch* when
``i = ceil(k * f)`` for some ``k = 0, 1, 2, ...``, with the check interval of
Eq. (1) ``f = T / (alpha * (fb_max - fb_min))`` epochs (``T`` = total
epochs; a real number, so checks fall on average every ``f`` epochs; a
tolerance of 1e-9 epoch absorbs float rounding in ``k * f``; at most one
check per epoch). At a check, if ``A_cur - A_check < epsilon`` and
``FB < fb_max`` the FB rises by one *for the next epoch*; either way
``A_check = A_cur``. With ``fb_min == fb_max`` there are no checks (fixed
FB). For an integer ``f`` the checks are the epochs ``i ≡ 0 (mod f)``,
including epoch 0; this reproduces the epoch counts the paper gives for
Fig. 5b (13, 8, 12, 17 epochs at FB 6, 7, 8, 9 over T = 50 with f = 4).

Energy (Eq. (2)): every MAC is priced at the FB of the epoch that ran it by
:func:`codesign.energy.abvs_cost.fpmac_energy_model` — area and logic depth
from the FP-MAC Yosys report, minimum supply under the alpha-power law for
the clock of ``timing_fb`` (default ``fb_max``) at ``supply_v``, anchored at
Horowitz's FP32 MAC for FB = 23 — which :meth:`Technique.fp_mac_pj` hands to
the ledger. Since every epoch does the same MACs, the ledger's compute
energy equals Eq. (2): ``sum over FB of T_epoch * P(FB) * N_epoch(FB)``.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch

from codesign.energy.abvs_cost import (
    AREA_METRICS,
    FpMacEnergyModel,
    VoltageModel,
    fpmac_energy_model,
)
from codesign.loops.fb_rule import FbController, check_epoch, check_interval, fb_schedule  # noqa: F401 (re-exported)
from codesign.numerics import FloatFormat
from codesign.train.quantize import quantize
from codesign.numerics.formats import DETERMINISTIC_ROUNDING, FLOAT_EXP_BITS, FLOAT_FRAC_BITS
from codesign.train.config import is_number, require
from codesign.train.layers import counted_layers
from codesign.train.precision import FloatQuantizer, LayerPrecision
from codesign.train.techniques import base

if TYPE_CHECKING:
    from codesign.train.trainer import Trainer

FB_LOW, FB_HIGH = FLOAT_FRAC_BITS  # 1..23 fraction bits
FAMILIES = ("xc7", "xcup")


def _fb(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and FB_LOW <= value <= FB_HIGH


@dataclass(frozen=True, kw_only=True)
class Config:
    """ABVS settings. FBs in bits, ``alpha`` and ``epsilon`` dimensionless, voltages in V.

    ``epsilon`` is the least accuracy gain (fraction of the test set, the
    paper's 0.005 = 0.5 points) per check interval that keeps the FB;
    ``cost_report`` is a ``fpmac_cost.json`` path ("" or a missing file: the
    embedded fallback table); ``timing_fb`` (None: ``fb_max``) is the FB whose
    circuit sets the clock at ``supply_v``.
    """

    fb_min: int = 6
    fb_max: int = 9
    exp_bits: int = 8
    alpha: float = 2.0
    epsilon: float = 0.005
    rounding: str = "nearest_even"
    cost_report: str = ""
    family: str = "xc7"
    area_metric: str = "lut"
    timing_fb: int | None = None
    supply_v: float = 1.0
    threshold_v: float = 0.35
    alpha_power: float = 1.3
    min_supply_v: float = 0.6
    max_supply_v: float = 1.2

    def validate(self, prefix: str = "abvs") -> None:
        for name in ("fb_min", "fb_max"):
            value = getattr(self, name)
            require(_fb(value), f"{prefix}.{name}", f"must be an int in {FB_LOW}..{FB_HIGH}, got {value!r}")
        require(isinstance(self.exp_bits, int) and not isinstance(self.exp_bits, bool)
                and FLOAT_EXP_BITS[0] <= self.exp_bits <= FLOAT_EXP_BITS[1], f"{prefix}.exp_bits",
                f"must be an int in {FLOAT_EXP_BITS[0]}..{FLOAT_EXP_BITS[1]}, got {self.exp_bits!r}")
        require(self.fb_min <= self.fb_max, f"{prefix}.fb_min",
                f"must be <= fb_max={self.fb_max}, got {self.fb_min}")
        require(is_number(self.alpha) and self.alpha > 0, f"{prefix}.alpha", f"must be > 0, got {self.alpha!r}")
        require(is_number(self.epsilon) and self.epsilon >= 0, f"{prefix}.epsilon",
                f"must be >= 0 (an accuracy gain as a fraction), got {self.epsilon!r}")
        require(self.rounding in DETERMINISTIC_ROUNDING, f"{prefix}.rounding",
                f"must be one of {DETERMINISTIC_ROUNDING}, got {self.rounding!r}")
        require(isinstance(self.cost_report, str), f"{prefix}.cost_report", "must be a path string ('' = fallback)")
        require(self.family in FAMILIES, f"{prefix}.family", f"must be one of {FAMILIES}, got {self.family!r}")
        require(self.area_metric in AREA_METRICS, f"{prefix}.area_metric",
                f"must be one of {AREA_METRICS}, got {self.area_metric!r}")
        require(self.timing_fb is None or (_fb(self.timing_fb) and self.timing_fb >= self.fb_max),
                f"{prefix}.timing_fb", f"must be None or an int in fb_max..{FB_HIGH}, got {self.timing_fb!r}")
        for name in ("supply_v", "threshold_v", "alpha_power", "min_supply_v", "max_supply_v"):
            require(is_number(getattr(self, name)), f"{prefix}.{name}", "must be a finite number")
        require(1 <= self.alpha_power <= 2, f"{prefix}.alpha_power", "must be in [1, 2] (alpha-power law)")
        require(self.threshold_v > 0, f"{prefix}.threshold_v", "must be > 0")
        require(self.threshold_v < self.min_supply_v, f"{prefix}.min_supply_v", "must be > threshold_v")
        require(self.min_supply_v <= self.supply_v, f"{prefix}.supply_v", "must be >= min_supply_v")
        require(self.supply_v <= self.max_supply_v, f"{prefix}.max_supply_v", "must be >= supply_v")

    def voltage_model(self) -> VoltageModel:
        return VoltageModel(supply_v=self.supply_v, threshold_v=self.threshold_v, alpha_power=self.alpha_power,
                            min_supply_v=self.min_supply_v, max_supply_v=self.max_supply_v)

    def energy_model(self) -> FpMacEnergyModel:
        return fpmac_energy_model(self.cost_report or None, timing_fb=self.timing_fb or self.fb_max,
                                  family=self.family, area_metric=self.area_metric, voltage=self.voltage_model())


# ---------------------------------------------------------------------------- the FB rule


def least_sufficient_fb(accuracy_by_fb: Mapping[int, float | Sequence[float]], fp32_accuracy: float | Sequence[float],
                        *, tolerance: float) -> int | None:
    """Smallest FB whose fixed-FB training reaches FP32 accuracy within ``tolerance`` (same units, e.g. points).

    Accuracies may be single runs or lists over seeds (their means are
    compared). None when no FB qualifies. This is how the paper picks
    ``fb_max`` from preliminary fixed-FB runs (Sec. IV-A).
    """
    if not (is_number(tolerance) and tolerance >= 0):
        raise ValueError(f"tolerance must be >= 0, got {tolerance!r}")

    def mean(value: float | Sequence[float]) -> float:
        values = [value] if isinstance(value, (int, float)) else list(value)
        if not values:
            raise ValueError("empty accuracy list")
        return sum(values) / len(values)

    target = mean(fp32_accuracy) - tolerance
    passing = sorted(fb for fb, accuracy in accuracy_by_fb.items() if mean(accuracy) >= target)
    return passing[0] if passing else None


# ---------------------------------------------------------------------------- the technique


@torch.no_grad()
def _round_in_place(tensors: list[torch.Tensor], fmt: FloatFormat) -> None:
    """Round float32 tensors to ``fmt`` in place with one quantiser call (rounding is elementwise, so the
    result is bit-identical to rounding each tensor on its own, only fewer calls)."""
    if not tensors:
        return
    flat = quantize(torch.cat([t.reshape(-1) for t in tensors]), fmt)
    offset = 0
    for tensor in tensors:
        tensor.copy_(flat[offset:offset + tensor.numel()].view_as(tensor))
        offset += tensor.numel()


class Technique(base.Technique):
    name = "abvs"

    def __init__(self, config: Config) -> None:
        config.validate("abvs")
        self.config = config
        self.controller: FbController | None = None
        self.model: torch.nn.Module | None = None
        self.optimizer: torch.optim.Optimizer | None = None
        self.energy_model = config.energy_model()
        self._applied_fb: int | None = None
        self._formats = {fb: FloatFormat(exp_bits=config.exp_bits, frac_bits=fb, rounding=config.rounding)
                         for fb in range(config.fb_min, config.fb_max + 1)}

    @property
    def fb(self) -> int:
        return self.controller.fb if self.controller is not None else self.config.fb_min

    # -- precision ---------------------------------------------------------
    def _apply_precision(self) -> None:
        """Point every counted layer at the current FB (idempotent; also after a resume)."""
        if self._applied_fb == self.fb:
            return
        quantizer = FloatQuantizer(self._formats[self.fb])
        for layer in counted_layers(self.model):
            layer.precision = LayerPrecision(activation=quantizer, weight=quantizer, grad=quantizer)
        self._applied_fb = self.fb

    def _round_stored_state(self) -> None:
        """Round parameters and SGD momentum buffers to the current FB (the engine stores them in FB-float)."""
        buffers = [state.get("momentum_buffer") for state in self.optimizer.state.values()]
        _round_in_place([p.data for p in self.model.parameters()] +
                        [b for b in buffers if isinstance(b, torch.Tensor)], self._formats[self.fb])

    # -- hooks -------------------------------------------------------------
    def attach(self, trainer: Trainer) -> None:
        from codesign.train.config import ConfigError

        self.model, self.optimizer = trainer.model, trainer.optimizer
        c = self.config
        if c.fb_min < c.fb_max and not trainer.dataset.has_validation:
            raise ConfigError("techniques.abvs: the FB rule reads validation accuracy; set data.validation_fraction "
                              "> 0 (or fb_min = fb_max for a fixed FB)")
        self.controller = FbController(fb_min=c.fb_min, fb_max=c.fb_max, alpha=c.alpha, epsilon=c.epsilon,
                                       total_epochs=trainer.config.optim.epochs)
        self._applied_fb = None
        self._apply_precision()
        self._round_stored_state()

    def on_epoch_start(self, trainer: Trainer, epoch: int) -> None:
        self._apply_precision()

    def before_step(self, trainer: Trainer) -> None:
        self._apply_precision()

    def after_backward(self, trainer: Trainer) -> None:
        _round_in_place([p.grad for p in self.model.parameters() if p.grad is not None], self._formats[self.fb])

    def after_step(self, trainer: Trainer) -> None:
        self._round_stored_state()

    def on_epoch_end(self, trainer: Trainer, epoch: int, metrics: dict[str, float]) -> None:
        before = self.fb
        # without a validation split the FB is fixed (attach checks it): the log then records test accuracy, unread
        accuracy = metrics.get("validation_accuracy", metrics["test_accuracy"])
        self.controller.end_epoch(epoch, accuracy / 100.0)
        if self.fb != before:
            # the stored state moves to the wider format (exact: every FB-bit value is representable)
            self._apply_precision()

    def fp_mac_pj(self) -> FpMacEnergyModel:
        return self.energy_model

    # -- reporting and checkpoints ----------------------------------------
    def report(self) -> dict[str, Any]:
        log = self.controller.log if self.controller is not None else []
        trace = [row["fb"] for row in log]
        counts = Counter(trace)
        fbs = sorted(set(range(self.config.fb_min, self.config.fb_max + 1)) | {23})
        return {
            "fb_min": self.config.fb_min, "fb_max": self.config.fb_max, "alpha": self.config.alpha,
            "epsilon": self.config.epsilon,
            "check_interval_epochs": None if self.controller is None or math.isinf(self.controller.interval)
            else self.controller.interval,
            "fb_trace": trace, "accuracy_trace": [row["accuracy"] for row in log],
            "epochs_per_fb": {str(fb): counts[fb] for fb in sorted(counts)},
            "average_fb": sum(trace) / len(trace) if trace else None,
            "final_fb": self.fb,
            "checks": [{key: row[key] for key in ("epoch", "fb", "accuracy", "a_check", "gain", "raised")}
                       for row in log if row["check"]],
            "energy_model": self.energy_model.describe(fbs),
        }

    def state_dict(self) -> dict[str, Any]:
        return {"controller": None if self.controller is None else self.controller.state_dict()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if state.get("controller") is not None and self.controller is not None:
            self.controller.load_state_dict(state["controller"])
        self._applied_fb = None


def pe_needs(training) -> list:
    """The FP-MAC array at the format's exponent and widest FB, its rounding; the FB is chosen at run time."""
    abvs = training.techniques["abvs"]
    return [("fpmac_array", {"exp_bits": abvs.exp_bits, "max_fb": abvs.fb_max, "rounding": abvs.rounding},
             f"ABVS FB-float training, FB {abvs.fb_min}..{abvs.fb_max} chosen at run time")]
