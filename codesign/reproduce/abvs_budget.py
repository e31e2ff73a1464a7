"""What the ``abvs`` reproduction trains with: its budget, the FP32 base configuration and an ABVS schedule's.

Why a budget: the full run and the smoke run (seconds, for the test suite)
differ only in how much they train, and every choice of the study reads the
same fields, so they are one validated value passed along instead of a dozen
module constants picked by ``if smoke``.
"""

from __future__ import annotations

from dataclasses import dataclass

from codesign.reproduce.abvs_energy import FAMILY
from codesign.reproduce.arms import with_validation
from codesign.train.config import DataConfig, ModelConfig, OptimConfig, TrainConfig, require
from codesign.train.techniques.abvs import Config as AbvsConfig

TOLERANCE_PT = 0.25  # "the same quality as FP32": less than one validation image (0.37 pt) on average
EPSILON = 0.005  # the FB controller's accuracy-gain threshold (fraction of validation accuracy)
# Equivalence margin (points), fixed before the run: "comparable quality to FP32 with at most 0.5% accuracy drop"
# (abstract; Sec. I: 0-0.5 % loss; Sec. IV-B: "0.5% accuracy loss is considered acceptable"). The schedule choice
# reads the same bound on validation accuracy.
ACCURACY_DROP_PT = 0.5
# the baselines' counterpart of ABVS's schedule selection: as many optimiser settings, tried on the same preliminary
# seeds, so that every arm spends the same number of runs on its choices (the configuration's default first). 12
# settings cover the schedule grid's 6 candidates and its widenings (at most 6 more).
BASELINE_SEARCH = tuple({"optim.weight_decay": wd, "optim.momentum": m}
                        for m in (0.9, 0.8, 0.95, 0.7) for wd in (5e-4, 0.0, 1e-3))


@dataclass(frozen=True, kw_only=True)
class Budget:
    """How much a run of the reproduction trains: epochs per run, the preliminary seeds every selection reads
    (never evaluated), the fixed FBs scanned (fraction bits), the schedule grid (``fb_gaps``: FB_max - FB_min in
    bits; ``check_intervals``: epochs between FB checks) and every arm's learning-rate trials."""

    smoke: bool
    epochs: int
    preliminary_seeds: tuple[int, ...]
    scan_fbs: tuple[int, ...]
    fb_gaps: tuple[int, ...]
    check_intervals: tuple[float, ...]
    learning_rates: tuple[float, ...]

    def __post_init__(self) -> None:
        require(self.epochs >= 1, "epochs", f"must be >= 1, got {self.epochs}")
        for name in ("preliminary_seeds", "scan_fbs", "fb_gaps", "check_intervals", "learning_rates"):
            require(len(getattr(self, name)) >= 1, name, "needs at least one value")
        require(all(1 <= fb <= 23 for fb in self.scan_fbs), "scan_fbs", f"must lie in 1..23, got {self.scan_fbs}")
        require(all(gap >= 1 for gap in self.fb_gaps), "fb_gaps", f"must be >= 1 (0 is the fixed-FB arm), "
                f"got {self.fb_gaps}")
        require(all(0 < every <= self.epochs for every in self.check_intervals), "check_intervals",
                f"must lie in (0, {self.epochs}] epochs, got {self.check_intervals}")


FULL = Budget(smoke=False, epochs=50, preliminary_seeds=(100, 101, 102), scan_fbs=tuple(range(1, 24)),
              fb_gaps=(3, 2, 1),  # the paper uses 3 (CIFAR-10, ImageNet), 4 and 2
              check_intervals=(4, 2),  # 4 is what Fig. 5b's epoch counts imply
              learning_rates=(0.05, 0.1, 0.2))
SMOKE = Budget(smoke=True, epochs=2, preliminary_seeds=(100,), scan_fbs=(3,), fb_gaps=(1,), check_intervals=(1,),
               learning_rates=(0.05, 0.1))


def budget(smoke: bool) -> Budget:
    """The smoke budget (seconds, for the test suite) or the full one."""
    return SMOKE if smoke else FULL


def base_config(smoke: bool) -> TrainConfig:
    """MLP on digits for T = 50 epochs (smoke: 2 epochs on the synthetic set), with the validation split."""
    data = DataConfig(name="synthetic", synthetic_samples=200) if smoke else DataConfig(name="digits")
    return with_validation(TrainConfig(data=data, model=ModelConfig(name="mlp"),
                                       optim=OptimConfig(epochs=budget(smoke).epochs)))


def alpha_for_interval(total_epochs: int, interval_epochs: float, fb_min: int, fb_max: int) -> float:
    """The alpha of Eq. (1) that gives a check every ``interval_epochs`` (1.0 when fb_min == fb_max: no checks)."""
    if fb_max == fb_min:
        return 1.0
    return total_epochs / (interval_epochs * (fb_max - fb_min))


def abvs_config(fb_min: int, fb_max: int, *, total_epochs: int, cost_report: str,
                check_every: float = 1.0) -> AbvsConfig:
    """ABVS from ``fb_min`` to ``fb_max`` fraction bits with a check every ``check_every`` epochs; ``cost_report``
    is the FP-MAC Yosys report's path ('' = the embedded fallback table)."""
    return AbvsConfig(fb_min=fb_min, fb_max=fb_max, epsilon=EPSILON, cost_report=cost_report, family=FAMILY,
                      alpha=alpha_for_interval(total_epochs, check_every, fb_min, fb_max))
