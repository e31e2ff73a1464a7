"""design.json: the machine-readable description of a design point's hardware.

The Vivado flow, the PYNQ driver and the emulated board all read this one
file: every IP's VLNV, base address and range, its control registers (the
Vitis HLS s_axilite layout, computed by :func:`codesign.shell.ip.register_map`),
its m_axi data ports and buffers, and the PE spec that fixes its number
formats; the board's facts the runtime needs (``board_facts``: DDR size,
processing system) and the set-up of the design's golden loop (``loop``,
:func:`codesign.design.families.loop_entry`), so a board trains from this file
alone. Base addresses are assigned here, once: IP ``i`` sits at the
board's control base plus ``i`` times :data:`IP_ADDRESS_RANGE`.
"""

from __future__ import annotations

from codesign.design.families import loop_entry
from codesign.design.point import DesignPoint
from codesign.shell import ip as accel
from codesign.shell.rtl_ip import DEFAULT_ROUTE, route_fields
from codesign.shell.vivado import hp_port_of
from codesign.contracts.shell import MANIFEST_FILE, MANIFEST_FORMAT, MANIFEST_VERSION

__all__ = ["IP_ADDRESS_RANGE", "MANIFEST_FILE", "MANIFEST_FORMAT", "design_manifest", "ip_base_address"]
IP_ADDRESS_RANGE = 0x1_0000  # 64 KiB per IP: the smallest Vivado address segment, far above the register span


def ip_base_address(design: DesignPoint, index: int) -> int:
    return design.board.vivado.control_base + index * IP_ADDRESS_RANGE


def design_manifest(design: DesignPoint, *, buffers: dict[str, dict[str, int]] | None = None,
                    route: str = DEFAULT_ROUTE) -> dict:
    """The design.json payload of ``design``; ``buffers`` maps an IP to its in/out buffer sizes (32-bit words).

    ``route`` says how Vivado gets each IP (:mod:`codesign.shell.rtl_ip`): ``rtl``, the default, packages the RTL
    cocotb verified (``rtl/<ip>/``, VLNV ``codesign:rtl:...``); ``hls`` takes the Vitis HLS export
    (``codesign:hls:...``). Either way ``hls/<ip>/`` is written: the emulated board runs its C++.
    """
    if accel.register_span() > IP_ADDRESS_RANGE:
        raise ValueError(f"the shell's registers span {accel.register_span()} bytes, more than an IP's range")
    vivado = design.board.vivado
    ips = []
    for index, instance in enumerate(design.instances):
        fields = accel.ip_fields(instance.name)
        sizes = (buffers or {}).get(instance.name, {})
        ips.append({
            "name": instance.name, "pe": instance.pe, "top": fields["top"], "vlnv": fields["vlnv"],
            "base_address": ip_base_address(design, index), "address_range": IP_ADDRESS_RANGE,
            "registers": fields["registers"], "data_ports": fields["data_ports"],
            "hp_port": hp_port_of(index, design.ports_used),
            "hls_project": f"hls/{instance.name}", **route_fields(instance.name, route),
            "spec": instance.spec.to_dict(), "held_sums": instance.held_sums, "reason": instance.reason,
            "buffers": {name: {"dtype": "uint32", "max_words": int(words)} for name, words in sorted(sizes.items())},
        })
    return {"format": MANIFEST_FORMAT, "version": MANIFEST_VERSION, "design": design.name,
            "board": design.board.name, "part": design.board.part, "clock_mhz": design.clock_mhz,
            "board_facts": {"display_name": design.board.display_name, "ps": design.board.ps,
                            "ddr_mib": design.board.ddr_mib, "hp_port_bits": design.board.hp_port_bits,
                            "ddr_peak_gbps": design.board.ddr_peak_gbps,
                            "pynq_board_names": list(design.board.pynq_board_names)},
            "control_port": vivado.control_port, "data_port": vivado.data_port,
            "data_ports": [port.port for port in vivado.data_ports[:design.ports_used]],
            "ip_route": route, "training": design.training.to_dict(), "loop": loop_entry(design), "ips": ips}
