"""What every on-board trainer shares: binding a design point's IPs on an overlay, and the IPs' figures.

Each PE family's board trainer is its golden loop on a backend that sends
the layer work to IPs (:mod:`codesign.deploy.training`, ``csb_training``,
``tt_training``); this mixin holds the part that does not depend on the
family: refuse an overlay that does not implement the design point, find the
instances of a PE, and report the IPs' calls, busy time and modelled cycles.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Iterable, Mapping

from codesign.deploy.driver import AccelIP
from codesign.deploy.manifest import DeployError, check_design


class OnBoard:
    """Mixin of a board trainer: ``self.overlay`` and the drivers its backend calls."""

    overlay = None

    def bind(self, overlay, design=None) -> None:
        """Bind ``overlay``; with a design point (on a desktop), first check that the overlay implements it
        (same IPs, PEs, specs and board). Nothing runs before."""
        if design is not None:
            check_design(overlay.manifest, design)
        self.overlay = overlay

    def loop_setup(self, family: str, setup_class, changes: Mapping[str, Any]):
        """The set-up of the design's golden loop as design.json records it, with ``changes`` applied.

        A design.json without a loop of ``family`` (another PE family, or a
        design with several IPs) is refused with what it holds.
        """
        manifest = self.overlay.manifest
        entry = manifest.get("loop")
        if not isinstance(entry, Mapping) or entry.get("family") != family:
            held = "no loop" if not isinstance(entry, Mapping) else f"a {entry.get('family')!r} loop"
            raise DeployError(f"design {manifest['design']!r}: design.json records {held}; this trainer runs the "
                              f"{family!r} loop")
        try:
            return dataclasses.replace(setup_class.from_dict(entry["setup"]), **changes)
        except (KeyError, TypeError) as error:
            raise DeployError(f"design {manifest['design']!r}: the loop set-up in design.json or the changes "
                              f"{sorted(changes)} do not fit {setup_class.__name__}: {error}") from None

    def instance_name(self, pe: str, ip: str | None) -> str:
        """``ip`` if given, else the name of the overlay's single ``pe`` IP."""
        if ip is not None:
            return ip
        names = [entry["name"] for entry in self.overlay.manifest["ips"] if entry["pe"] == pe]
        if len(names) != 1:
            raise DeployError(f"the design has {len(names)} {pe} IPs ({', '.join(names) or 'none'}); "
                              "name the IP to train on with ip=...")
        return names[0]

    def ip_figures(self, drivers: Iterable[AccelIP], pe_cycles: int) -> dict[str, float]:
        """IP calls, seconds from ap_start to ap_done, and the PE cycles of the RTL cycle model at the design's clock.

        The cycle model counts the PEs' streams only: the shell's DDR
        transfers and the host's work are left out, so a board takes longer.
        """
        drivers = list(drivers)
        clock_hz = float(self.overlay.manifest["clock_mhz"]) * 1e6
        return {"ip_calls": sum(d.calls for d in drivers), "ip_busy_s": sum(d.busy_s for d in drivers),
                "emulated": bool(self.overlay.emulated), "pe_cycles": pe_cycles, "pe_model_s": pe_cycles / clock_hz}
