"""Training techniques, one module each, composable in one training loop.

Every technique module defines ``Config`` (a frozen, keyword-only dataclass
with ``validate(prefix)``) and ``Technique`` (a :class:`~codesign.train.techniques.base.Technique`
built from that config). Modules are imported on first use.
"""

from __future__ import annotations

import importlib

TECHNIQUES = ("smd", "slu", "psg", "cpt", "abvs", "compress", "tt")
# Order in which hooks run when several techniques are combined: the one that replaces the model (tt)
# first, then precision setters, then the ones that read the model's precision or shape.
ORDER = {name: index for index, name in enumerate(("tt", "compress", "abvs", "cpt", "psg", "slu", "smd"))}


def technique_module(name: str):
    if name not in TECHNIQUES:
        raise ValueError(f"unknown technique {name!r}; expected one of {', '.join(TECHNIQUES)}")
    return importlib.import_module(f"codesign.train.techniques.{name}")


def technique_config_class(name: str):
    return technique_module(name).Config


def build_techniques(configs: dict) -> list:
    """Technique objects for a config's ``techniques`` mapping, in hook order."""
    names = sorted(configs, key=lambda name: ORDER[name])
    return [technique_module(name).Technique(configs[name]) for name in names]
