"""The registers a codesign accelerator IP decodes, listed as PYNQ's ``.hwh`` parser lists an IP's registers.

On a board, :func:`codesign.deploy.manifest.check_ip_dict` compares design.json
with the ``ip_dict`` PYNQ reads from the ``.hwh``: IPs, addresses, ranges and,
where the ``.hwh`` lists them, every register offset. The emulated board has no
``.hwh``; without registers in its ``ip_dict`` that comparison would compare
nothing but design.json with itself. So the emulated board lists, for each IP,
the registers the IP it stands for decodes: the shell contract's map
(:func:`codesign.contracts.shell.register_map`, the offsets the generated RTL
wrapper is given and the ``config_interface -m_axi_addr64=true`` HLS export
keeps), never design.json's. The same comparison then runs on both paths, and a
design.json whose register map disagrees with the shell is refused before any
register is touched, on the emulated board as on a board.

Standard library and the contracts only: this is board runtime.
"""

from __future__ import annotations

from typing import Dict

from codesign.contracts import shell

SOURCE = "codesign.contracts.shell.register_map (the register map the accelerator shell decodes)"


def _bits(name: str) -> int:
    for arg in shell.SHELL_ARGS:
        if arg.name == name:
            return -(-arg.register_bits // shell.AXI_WORD_BITS) * shell.AXI_WORD_BITS
    return shell.AXI_WORD_BITS


def shell_hwh_registers() -> Dict[str, dict]:
    """Every register of the shell in PYNQ's ``ip_dict[cell]["registers"]`` form (byte offset, size in bits)."""
    access = {name: "read-write" for name in shell.CONTROL_REGISTERS}
    return {name: {"address_offset": offset, "size": _bits(name), "access": access.get(name, "write-only"),
                   "description": f"{name}, from {SOURCE}", "fields": {}}
            for name, offset in shell.register_map().items()}


__all__ = ["SOURCE", "shell_hwh_registers"]
