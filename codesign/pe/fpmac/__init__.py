"""The FB-configurable FP-MAC of ABVS: ``round(round(a*b) + c)`` with the fraction width chosen at run time."""

from codesign.pe.fpmac.golden import from_container, golden_container_mac, to_container
from codesign.pe.fpmac.spec import FpmacSpec

__all__ = ["FpmacSpec", "from_container", "golden_container_mac", "to_container"]
