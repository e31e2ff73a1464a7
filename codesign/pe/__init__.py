"""Processing elements, one room each, all behind one protocol (:mod:`codesign.hw.protocol`).

:data:`REGISTRY` names every PE the command line and the generic flow know;
a PE's module is imported on first use, so listing PEs costs nothing.
"""

from __future__ import annotations

import importlib
from functools import lru_cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from codesign.hw.protocol import ProcessingElement

# name -> "module:class" of its ProcessingElement subclass
REGISTRY = {
    "fpmac": "codesign.pe.fpmac.pe:FpmacPE",
    "csb": "codesign.pe.csb.pe:CsbPE",
    "tt1": "codesign.pe.tt.pe:Tt1PE",
    "tt2": "codesign.pe.tt.pe:Tt2PE",
    "tt3": "codesign.pe.tt.pe:Tt3PE",
    "fpmac_array": "codesign.pe.fpmac_array.pe:FpmacArrayPE",
}


def pe_names() -> tuple[str, ...]:
    return tuple(REGISTRY)


@lru_cache(maxsize=None)
def get_pe(name: str) -> ProcessingElement:
    """The registered PE ``name``; a clear error names the ones that exist."""
    if name not in REGISTRY:
        raise ValueError(f"unknown PE {name!r}; registered PEs: {', '.join(REGISTRY)}")
    module_name, class_name = REGISTRY[name].split(":")
    instance = getattr(importlib.import_module(module_name), class_name)()
    if instance.name != name:
        raise RuntimeError(f"{REGISTRY[name]} calls itself {instance.name!r}, registered as {name!r}")
    return instance
