"""What the golden training loops share: their error, the digits task's shape, and progress bars when available."""

from __future__ import annotations

INPUT_FEATURES, CLASSES = 64, 10  # the 8x8 digits (and the synthetic set), flattened; ten classes


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
