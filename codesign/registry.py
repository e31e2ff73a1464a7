"""Registries of rooms named ``"module:attribute"`` and loaded on first use: the PEs (:mod:`codesign.pe`) and both
halves of the training families (:mod:`codesign.deploy.families`, :mod:`codesign.design.families`).

Naming an entry by text keeps a registry one line per room and lets a board
import only the rooms it runs; loading checks that the entry calls itself
by the key it is registered under, so a copied line cannot pass unnoticed.
Standard library only: the board runtime imports it.
"""

from __future__ import annotations

import importlib
from typing import Any, Callable, Mapping


def load_registered(registry: Mapping[str, str], key: str, *, kind: tuple[str, str], key_of: Callable[[Any], str],
                    make: Callable[[Any], Any] = lambda entry: entry) -> Any:
    """``make`` of the entry registered as ``key`` in ``registry``; a clear error names the registered entries for
    an unknown key (``kind``: the entry's name, singular and plural), and a key the entry does not call itself."""
    if key not in registry:
        raise ValueError(f"unknown {kind[0]} {key!r}; registered {kind[1]}: {', '.join(registry)}")
    module_name, attribute = registry[key].split(":")
    entry = make(getattr(importlib.import_module(module_name), attribute))
    if key_of(entry) != key:
        raise RuntimeError(f"{registry[key]} calls itself {key_of(entry)!r}, registered as {key!r}")
    return entry


__all__ = ["load_registered"]
