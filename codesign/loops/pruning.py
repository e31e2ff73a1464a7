"""The pruning rule shared by compressed training in torch and the CSB loop: how many kernels a step masks."""

from __future__ import annotations

ORDERS = ("largest_first", "network")  # which layer the pruning search visits first


def kernels_to_prune(kernels: int, percent: int) -> int:
    """How many of ``kernels`` a ``percent`` step masks: rounded down, in exact integer arithmetic."""
    return kernels * percent // 100


def search_masks(norms, correct, *, reference: int, samples: int, order: str, step_percent: int,
                 max_percent: int, drop_budget: float, log: list):
    """The kernel-pruning search of the golden loops: per layer (the most kernels first for ``largest_first``, in
    network order for ``network``), masks of ``step_percent``, ``2 step_percent``, ... of the layer's kernels of
    smallest ``norms`` (ties to the lower flat index), keeping the largest share before the first whose correct
    validation answers (``correct(masks)``) fall more than the cumulative ``drop_budget`` points below
    ``reference`` of ``samples``. Appends a row per tried mask to ``log``; returns the masks (bool, as
    ``norms``)."""
    import numpy as np

    masks = [np.ones(n.shape, dtype=bool) for n in norms]
    layers = list(range(len(norms)))
    if order == "largest_first":
        layers.sort(key=lambda index: -norms[index].size)  # stable: equal sizes keep network order
    for layer in layers:
        ranked = np.argsort(np.asarray(norms[layer]).reshape(-1), kind="stable")

        def keep(percent: int):
            mask = np.ones(ranked.size, dtype=bool)
            mask[ranked[:kernels_to_prune(ranked.size, percent)]] = False
            return mask.reshape(norms[layer].shape)

        accepted = 0
        for percent in range(step_percent, max_percent + 1, step_percent):
            masks[layer] = keep(percent)
            now = correct(masks)
            ok = 100 * (reference - now) <= drop_budget * samples
            log.append({"layer": layer, "percent": percent, "correct": now, "samples": samples, "accepted": ok})
            if not ok:
                break
            accepted = percent
        masks[layer] = keep(accepted)
    return masks
