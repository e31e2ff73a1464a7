"""The pruning rule shared by compressed training in torch and the CSB loop: how many kernels a step masks."""

from __future__ import annotations

ORDERS = ("largest_first", "network")  # which layer the pruning search visits first


def kernels_to_prune(kernels: int, percent: int) -> int:
    """How many of ``kernels`` a ``percent`` step masks: rounded down, in exact integer arithmetic."""
    return kernels * percent // 100
