"""Processing elements, one room each, all behind one protocol (:mod:`codesign.hw.protocol`).

:data:`REGISTRY` names every PE the command line and the generic flow know;
a PE's module is imported on first use, so listing PEs costs nothing.
:data:`CYCLE_MODELS` names each stream PE's cycle model, a NumPy-only
module: the board runtime (Python 3.8 and later, no desktop packages) asks
it for a transaction's cycles without importing the PE classes, which need
Python 3.10. The PE classes' ``transaction_cycles`` call the same function.
"""

from __future__ import annotations

import importlib
from functools import lru_cache
from typing import TYPE_CHECKING

from codesign.registry import load_registered

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
# name -> "module:function" of its cycle model, ``(spec, words_in) -> cycles`` of one transaction without stalls
CYCLE_MODELS = {
    "csb": "codesign.pe.csb.cycles:stream_cycles",
    "tt1": "codesign.pe.tt.cycles:stream_cycles",
    "tt2": "codesign.pe.tt.cycles:stream_cycles",
    "tt3": "codesign.pe.tt.cycles:stream_cycles",
    "fpmac_array": "codesign.pe.fpmac_array.cycles:stream_cycles",
}


def pe_names() -> tuple[str, ...]:
    return tuple(REGISTRY)


@lru_cache(maxsize=None)
def get_pe(name: str) -> ProcessingElement:
    """The registered PE ``name``; a clear error names the ones that exist."""
    return load_registered(REGISTRY, name, kind=("PE", "PEs"), key_of=lambda pe: pe.name, make=lambda cls: cls())


@lru_cache(maxsize=None)
def _cycle_model(name: str):
    if name not in CYCLE_MODELS:
        raise ValueError(f"PE {name!r} has no transaction cycle model; stream PEs that do: {', '.join(CYCLE_MODELS)}")
    module_name, function_name = CYCLE_MODELS[name].split(":")
    return getattr(importlib.import_module(module_name), function_name)


def transaction_cycles(name: str, spec, words_in) -> int:
    """Clock cycles of one transaction of PE ``name`` on build ``spec`` (input words ``words_in``, 32-bit file
    words), by its RTL-exact cycle model, from the first input handshake to the last output handshake."""
    return int(_cycle_model(name)(spec, words_in))
