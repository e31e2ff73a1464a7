"""What every on-board trainer shares: binding a design point's IPs on an overlay, and the IPs' figures.

Each PE family's board trainer is its golden loop on a backend that sends
the layer work to IPs (:mod:`codesign.deploy.training`, ``csb_training``,
``tt_training``); this mixin holds the part that does not depend on the
family: refuse an overlay that does not implement the design point, find the
instances of a PE, and report the IPs' calls, busy time and modelled cycles.
"""

from __future__ import annotations

from collections.abc import Iterable

from codesign.deploy.driver import AccelIP
from codesign.deploy.manifest import DeployError, check_design


class OnBoard:
    """Mixin of a board trainer: ``self.overlay`` and the drivers its backend calls."""

    overlay = None

    def bind(self, overlay, design) -> None:
        """Check that ``overlay`` implements ``design`` (same IPs, PEs and specs); nothing runs before."""
        check_design(overlay.manifest, design)
        self.overlay = overlay

    @staticmethod
    def instance_name(design, pe: str, ip: str | None) -> str:
        """``ip`` if given, else the name of the design's single ``pe`` instance."""
        if ip is not None:
            return ip
        names = [instance.name for instance in design.instances if instance.pe == pe]
        if len(names) != 1:
            raise DeployError(f"the design has {len(names)} {pe} instances ({', '.join(names) or 'none'}); "
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
