"""Boards are data: each ``boards/*.toml`` names a part, its clocks, its resource budget and its block-design facts."""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, fields
from functools import cache
from types import MappingProxyType

from codesign.resources import data_dir


def _is_power_of_two(value: int) -> bool:
    return value > 0 and value & (value - 1) == 0


@dataclass(frozen=True, kw_only=True)
class DataPort:
    """One high-performance PS port for the IPs' data: its interface, its clock pin, the PS properties enabling it."""

    port: str
    clock_pin: str
    properties: Mapping[str, str]

    def __post_init__(self) -> None:
        for name in ("port", "clock_pin"):
            value = getattr(self, name)
            if not isinstance(value, str) or not value.replace("_", "").isalnum():
                raise ValueError(f"vivado.more_data_ports {name} must be an interface or pin name, not {value!r}")
        value = self.properties
        if not isinstance(value, Mapping) or not all(
                isinstance(k, str) and k.startswith("CONFIG.") and isinstance(v, str) for k, v in value.items()):
            raise ValueError(f"vivado.more_data_ports {self.port}: properties must map CONFIG.* names to strings")
        object.__setattr__(self, "properties", MappingProxyType(dict(value)))


@dataclass(frozen=True, kw_only=True)
class VivadoFacts:
    """What the Vivado block design needs to know about a board's processing system (PS).

    ``ps_ip`` is a VLNV without version (Vivado resolves the installed one);
    the port and pin names are those of the PS IP. ``control_base`` and
    ``control_window`` (bytes) bound the addresses the PS control master can
    reach; every accelerator's register block must sit inside. ``ports`` are
    PS properties set in both build modes (which AXI ports exist, their
    widths); ``part_config`` is the full PS configuration applied only when
    the board files are not installed (DDR, clocks, I/O banks, peripherals),
    so that mode never depends on a vendor preset. ``fclk_property`` is the
    PS property that sets the PL clock (MHz).

    ``data_port`` is the first high-performance port the IPs' data go through
    (enabled by ``ports``); ``more_data_ports`` the others a design may add,
    each a :class:`DataPort` with the PS properties that enable it. A design
    spreads its IPs over its first ``hp_ports`` of :attr:`data_ports`
    (:func:`codesign.step.model.hp_port_of`).
    """

    ps_ip: str
    ps_cell: str
    automation_rule: str
    automation_board: str
    automation_part: str
    control_port: str
    control_clock_pin: str
    data_port: str
    data_clock_pin: str
    clock_pin: str
    reset_pin: str
    control_base: int
    control_window: int
    fclk_property: str
    ports: Mapping[str, str]
    part_config: Mapping[str, str]
    more_data_ports: tuple[DataPort, ...] = ()

    def __post_init__(self) -> None:
        extra = self.more_data_ports
        if isinstance(extra, (str, Mapping)) or not isinstance(extra, (list, tuple)):
            raise ValueError("vivado.more_data_ports must be a list of [[vivado.more_data_ports]] tables")
        object.__setattr__(self, "more_data_ports",
                           tuple(port if isinstance(port, DataPort) else DataPort(**port) for port in extra))
        for item in fields(self):
            value = getattr(self, item.name)
            if item.name == "more_data_ports":
                continue
            if item.name in ("control_base", "control_window"):
                if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                    raise ValueError(f"vivado.{item.name} must be a non-negative integer, not {value!r}")
            elif item.name in ("ports", "part_config"):
                if not isinstance(value, Mapping) or not all(
                        isinstance(k, str) and k.startswith("CONFIG.") and isinstance(v, str) for k, v in value.items()):
                    raise ValueError(f"vivado.{item.name} must map CONFIG.* property names to strings")
                object.__setattr__(self, item.name, MappingProxyType(dict(value)))
            elif not isinstance(value, str) or not value:
                raise ValueError(f"vivado.{item.name} must be a non-empty string, not {value!r}")
        if not _is_power_of_two(self.control_window) or self.control_base % self.control_window:
            raise ValueError(f"vivado control window {self.control_window:#x} at {self.control_base:#x} "
                             "must be a power of two and aligned to it")
        if self.ps_ip.count(":") != 2:
            raise ValueError(f"vivado.ps_ip {self.ps_ip!r} must be vendor:library:name (no version)")
        if not self.fclk_property.startswith("CONFIG."):
            raise ValueError(f"vivado.fclk_property {self.fclk_property!r} must be a CONFIG.* property")
        names = [port.port for port in self.data_ports]
        if len(set(names)) != len(names):
            raise ValueError(f"vivado data ports {names} must be distinct")

    @property
    def data_ports(self) -> tuple[DataPort, ...]:
        """Every high-performance port a design may use, the first (``data_port``) first."""
        return (DataPort(port=self.data_port, clock_pin=self.data_clock_pin, properties={}), *self.more_data_ports)


@dataclass(frozen=True, kw_only=True)
class Board:
    """One FPGA board. Resources count LUTs, flip-flops, DSP slices and 36 Kib BRAMs; ``fclk_mhz`` is the PL clock.

    ``hp_port_bits`` is the width of the PS port the IPs' data go through,
    each direction (AXI reads and writes have their own channels);
    ``ddr_peak_gbps`` the DDR's peak in GB/s (1e9 bytes), shared by both.
    There are :attr:`hp_ports` such ports, each with its own bandwidth; all
    share the DDR.
    """

    name: str
    display_name: str
    part: str
    board_part: str
    yosys_family: str
    ps: str
    fclk_mhz: float
    hp_port_bits: int
    ddr_peak_gbps: float
    ddr_mib: int
    pynq_board_names: tuple[str, ...]
    resources: dict[str, int]
    vivado: VivadoFacts
    board_part_patterns: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        names = self.pynq_board_names
        if isinstance(names, str) or not names or not all(isinstance(n, str) and n for n in names):
            raise ValueError(f"board {self.name}: pynq_board_names must be a non-empty list of names")
        object.__setattr__(self, "pynq_board_names", tuple(names))
        if isinstance(self.vivado, Mapping):
            object.__setattr__(self, "vivado", VivadoFacts(**self.vivado))
        if not isinstance(self.vivado, VivadoFacts):
            raise TypeError(f"board {self.name}: vivado must be a table of block-design facts")
        if isinstance(self.fclk_mhz, bool) or not isinstance(self.fclk_mhz, (int, float)) or self.fclk_mhz <= 0:
            raise ValueError(f"board {self.name}: fclk_mhz must be a positive number of MHz")
        if isinstance(self.ddr_peak_gbps, bool) or not isinstance(self.ddr_peak_gbps, (int, float)) \
                or not self.ddr_peak_gbps > 0:
            raise ValueError(f"board {self.name}: ddr_peak_gbps must be a positive number of GB/s")
        if self.board_part.count(":") != 3:
            raise ValueError(f"board {self.name}: board_part {self.board_part!r} must be vendor:board:part0:version")
        self._check_board_part_patterns()

    def _check_board_part_patterns(self) -> None:
        """The board-part names Vivado may know this board by (``get_board_parts`` patterns), preferred first.

        Vivado installs name one board differently (the ZedBoard is ``avnet.com:zedboard`` in the board store
        and ``em.avnet.com:zed`` in many installs); a list of patterns in the TOML keeps that data, not code.
        Absent, it is the board part's own ``vendor:board:part0:*``, which must always be among them.
        """
        vendor, name, component, _version = self.board_part.split(":")
        own = f"{vendor}:{name}:{component}:*"
        patterns = self.board_part_patterns or (own,)
        if isinstance(patterns, str) or not all(
                isinstance(p, str) and p.count(":") == 3 and p.endswith(":*") and p.replace(":", "").replace(
                    ".", "").replace("*", "").replace("_", "").replace("-", "").isalnum() for p in patterns):
            raise ValueError(f"board {self.name}: board_part_patterns must be a list of vendor:board:part0:* "
                             f"patterns, not {patterns!r}")
        if patterns[0] != own:
            raise ValueError(f"board {self.name}: the first of board_part_patterns must be the board part's own "
                             f"{own!r}, not {patterns[0]!r}")
        object.__setattr__(self, "board_part_patterns", tuple(patterns))

    @property
    def hp_ports(self) -> int:
        """High-performance ports a design may spread its IPs' data over."""
        return len(self.vivado.data_ports)


@cache
def boards() -> dict[str, Board]:
    """All boards shipped with codesign, by name."""
    found = {}
    for path in sorted(data_dir("boards").glob("*.toml")):
        with path.open("rb") as handle:
            raw = tomllib.load(handle)
        try:
            found[raw["name"]] = Board(**raw)
        except (TypeError, ValueError) as error:
            raise ValueError(f"{path}: {error}") from None
    return found


def board(name: str) -> Board:
    known = boards()
    if name not in known:
        raise ValueError(f"unknown board {name!r}; known boards: {', '.join(sorted(known))}")
    return known[name]


def board_for_part(part: str) -> Board:
    """The board built around FPGA ``part``; a clear error for a part no board uses."""
    for candidate in boards().values():
        if candidate.part == part:
            return candidate
    known = ", ".join(f"{b.part} ({b.name})" for b in boards().values())
    raise ValueError(f"unknown FPGA part {part!r}; known parts: {known}")
