"""What the golden training loops share: their error, the digits task's shape, and progress bars when available."""

from __future__ import annotations

from dataclasses import fields
from typing import Any, ClassVar, Dict, Mapping

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


class LoopSetup:
    """What every loop's set-up dataclass shares: a PE spec, layer widths, and the plain data design.json holds.

    A board has no training configuration to derive a set-up from; it
    rebuilds it from design.json's ``loop`` with :meth:`from_dict`.
    """

    spec_class: ClassVar[type]  # the PE spec the loop's IP is built with

    def to_dict(self) -> Dict[str, Any]:
        values = {f.name: getattr(self, f.name) for f in fields(self)}
        values["spec"] = self.spec.to_dict()
        values["layers"] = list(self.layers)
        return values

    @classmethod
    def from_dict(cls, values: Mapping[str, Any]):
        return cls(**{**values, "spec": cls.spec_class(**values["spec"]), "layers": tuple(values["layers"])})
