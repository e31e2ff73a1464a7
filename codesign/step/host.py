"""The host's share of a training step as the step-time models price it, and the GEMM calls the FB-float step is
made of: plain records the board runtime reads too (Python 3.8: no ``kw_only`` dataclasses here)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import List, Tuple


@dataclass(frozen=True)
class HostModel:
    """The host's seconds per step as ``fixed_s + per_call_s * PE calls``, fitted on two measured schedules.

    The host cuts operands for every PE call and adds partial sums, so a
    schedule of fewer, larger calls leaves it less to do; the rest (loss,
    prior, Adam, scales) does not depend on the hardware. ``source`` says
    where it was measured; ``list_step``: it is the host's work of a step
    as call lists, timed with the IPs (the per-call loops' figure is not).
    ``beside_s``: a list step's host seconds worked while the IPs computed
    (the next batch staged, the loss, updates), which ``fixed_s`` leaves out:
    a step model hides them behind the phases, as far as those reach.
    (Not keyword-only: the board runtime runs on Python 3.8, whose
    dataclasses have no ``kw_only``.)
    """

    fixed_s: float
    per_call_s: float
    source: str
    list_step: bool = False
    beside_s: float = 0.0

    def seconds(self, calls):
        return self.fixed_s + self.per_call_s * calls

    @classmethod
    def fit(cls, many: Tuple[float, int], few: Tuple[float, int], *, source: str) -> "HostModel":
        """The model through two measured ``(seconds, calls)`` schedules (the fixed part alone when their calls
        are equal); negative parts, which only noise gives, are cut to zero."""
        (host_many, calls_many), (host_few, calls_few) = many, few
        if calls_many == calls_few:
            return cls(fixed_s=min(host_many, host_few), per_call_s=0.0, source=source)
        per_call = max(0.0, (host_many - host_few) / (calls_many - calls_few))
        return cls(fixed_s=max(0.0, host_few - per_call * calls_few), per_call_s=per_call, source=source)


@dataclass(frozen=True)
class GemmShape:
    """One layer GEMM of a step: ``C (m x n) = A (m x k) . B (k x n)``, from C_in or not, at run-time ``fb``."""

    m: int
    k: int
    n: int
    accumulate: bool
    fb: int


def spans(total: int, step: int) -> List[int]:
    """The lengths of ``total`` cut into pieces of at most ``step``."""
    return [min(step, total - start) for start in range(0, total, step)]


__all__ = ["GemmShape", "HostModel", "spans"]
