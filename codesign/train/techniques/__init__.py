"""Training techniques, one module each, composable in one training loop.

Every technique module defines ``Config`` (a frozen, keyword-only dataclass
with ``validate(prefix)``) and ``Technique`` (a :class:`~codesign.train.techniques.base.Technique`
built from that config). A technique whose arithmetic runs on a PE also
defines ``pe_needs(training)``: ``(PE name, spec fields derived from the
configuration, reason)`` for every PE it needs, which a design point
(:func:`codesign.design.point.derived_pe_fields`) collects. Modules are
imported on first use.
"""

from __future__ import annotations

import importlib

TECHNIQUES = ("smd", "slu", "psg", "cpt", "abvs", "compress", "tt", "signsgd", "stochastic_depth")
# Order in which hooks run when several techniques are combined: the one that replaces the model (tt)
# first, then precision setters, then the ones that read the model's precision or shape. signsgd signs the
# parameters that exist when it attaches, so it comes before slu creates its gates (which keep their gradient).
ORDER = {name: index for index, name in enumerate(("tt", "compress", "abvs", "cpt", "psg", "signsgd", "slu",
                                                   "stochastic_depth", "smd"))}
# Order in which a design point lists the PEs the techniques need (its instances, IPs and addresses follow it).
PE_ORDER = ("abvs", "cpt", "psg", "tt", "compress")


def technique_module(name: str):
    if name not in TECHNIQUES:
        raise ValueError(f"unknown technique {name!r}; expected one of {', '.join(TECHNIQUES)}")
    return importlib.import_module(f"codesign.train.techniques.{name}")


def technique_config_class(name: str):
    return technique_module(name).Config


def pe_needs(training) -> list:
    """``(PE name, derived spec fields, reason)`` of every PE the configuration's techniques need, in
    :data:`PE_ORDER`, each PE once (the first technique to need it gives its fields and reason)."""
    needs: list = []
    for name in sorted(training.techniques, key=lambda n: PE_ORDER.index(n) if n in PE_ORDER else len(PE_ORDER)):
        declare = getattr(technique_module(name), "pe_needs", None)
        for need in declare(training) if declare is not None else []:
            if need[0] not in {have[0] for have in needs}:
                needs.append(need)
    return needs


def build_techniques(configs: dict) -> list:
    """Technique objects for a config's ``techniques`` mapping, in hook order."""
    names = sorted(configs, key=lambda name: ORDER[name])
    return [technique_module(name).Technique(configs[name]) for name in names]
