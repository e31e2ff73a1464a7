"""A design point: one training configuration, the board it runs on, and the PE instances it needs.

The hardware is *derived* from the training configuration, never typed in
again: the FB-float format of ABVS sets the FP-MAC array's exponent width,
largest fraction width and rounding; kernel-wise compressed training sets the
CSB PE's kernel size; tensor-train training sets the operand widths of the TT
PEs PE1, PE2 and PE3 from its precision. The ``[design]`` table of the
training TOML only names the design, picks the board and clock, and sets
hardware-only choices the training configuration cannot know (array shapes,
buffer sizes); a field that is derived may not be overridden there.

TOML shape (the same file ``codesign train`` reads; it ignores ``[design]``)::

    seed = 0
    [model]
    name = "mlp"
    [techniques.abvs]
    fb_min = 6
    fb_max = 9
    [design]
    name = "digits_abvs"
    board = "zedboard"
    clock_mhz = 100.0
    [design.pe.fpmac_array]
    rows = 4
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from codesign.boards import Board, board
from codesign.shell.ip import data_ports, held_by_default
from codesign.shell.vivado import shell_ips_hp_ports
from codesign.numerics import FloatFormat
from codesign.pe import REGISTRY, get_pe
from codesign.train.config import (TrainConfig, check_field_types, config_from_dict, read_toml, require_tables,
                                   resolve_data_path)

DESIGN_TABLE = "design"
_NAME = re.compile(r"^[a-z][a-z0-9_]{0,47}$")
CLOCK_RANGE_MHZ = (10.0, 300.0)
# techniques that only decide on the host which work to skip
HOST_TECHNIQUES = {"smd": "mini-batch dropping is a host-side schedule", "slu": "layer skipping is a host-side schedule",
                   "stochastic_depth": "block dropping is a host-side schedule",
                   "signsgd": "the update's sign is taken on the host"}


class DesignError(ValueError):
    """A design point is invalid; the message names the field (``design.board``, ``techniques.abvs``...)."""


@dataclass(frozen=True, kw_only=True)
class PeInstance:
    """One PE in the design: instance ``name`` (a C identifier), registered ``pe``, its spec, and why it is needed;
    ``held_sums``: whether its shell keeps the accumulation buffer (False: no block RAM and a 32-bit rounding
    stage, for an IP whose call lists hold no sums; ``[design.pe.<pe>] held_sums``, by default false only for a
    PE that chains its sums itself, :func:`codesign.shell.ip.held_by_default`)."""

    name: str
    pe: str
    spec: Any
    reason: str
    held_sums: bool | None = None  # None: as the design flow builds the PE's IPs (held_by_default)

    def __post_init__(self) -> None:
        if self.held_sums is None:
            object.__setattr__(self, "held_sums", held_by_default(get_pe(self.pe)))

    @property
    def top(self) -> str:
        """HLS top function (and IP name) of this instance's accelerator."""
        return f"{self.name}_accel"


@dataclass(frozen=True, kw_only=True)
class DesignPoint:
    """The training configuration, the board, the PL clock (MHz) and the PE instances derived from them.

    ``hp_ports`` asks for that many of the board's high-performance ports for
    the IPs' data (``[design] hp_ports``); 0 takes the fewest whose
    SmartConnects fit the IPs' data ports. ``ports_used`` is the number the
    block design gets; IP ``i`` goes through port ``i mod ports_used``
    (:func:`codesign.shell.vivado.hp_port_of`), which the step models follow.

    ``forward_split`` (``[design] forward_split``, TT designs): the forward
    contractions' calls are shared between the PE2 and the PE1 copies
    (:class:`codesign.step.tt.schedule.StepHardware`), a schedule choice the
    golden numbers do not depend on.
    """

    name: str
    training: TrainConfig
    board: Board
    clock_mhz: float
    instances: tuple[PeInstance, ...]
    overrides: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    hp_ports: int = 0
    forward_split: bool = False
    ports_used: int = field(init=False, default=1)

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not _NAME.match(self.name):
            raise DesignError(f"design.name: {self.name!r} must be lower-case letters, digits and _ (at most 48), "
                              "starting with a letter")
        low, high = CLOCK_RANGE_MHZ
        if isinstance(self.clock_mhz, bool) or not isinstance(self.clock_mhz, (int, float)) \
                or not low <= self.clock_mhz <= high:
            raise DesignError(f"design.clock_mhz: must be a number in [{low:g}, {high:g}] MHz, got {self.clock_mhz!r}")
        names = [instance.name for instance in self.instances]
        if len(set(names)) != len(names):
            raise DesignError(f"design: duplicate PE instance names {names}")
        if not self.instances:
            raise DesignError("design: the configuration needs no PE, so there is no hardware to build")
        most = self.board.hp_ports
        if isinstance(self.hp_ports, bool) or not isinstance(self.hp_ports, int) or not 0 <= self.hp_ports <= most:
            raise DesignError(f"design.hp_ports: must be an integer in [0, {most}] (0: the fewest that fit; the "
                              f"{self.board.display_name} has {most} high-performance ports), got {self.hp_ports!r}")
        try:
            fewest = shell_ips_hp_ports(len(self.instances), most)
        except ValueError as error:
            raise DesignError(f"design: {error}") from None
        if self.hp_ports and self.hp_ports < fewest:
            raise DesignError(f"design.hp_ports: {len(self.instances)} IPs with "
                              f"{len(self.instances) * len(data_ports())} data ports need at "
                              f"least {fewest} high-performance ports (one SmartConnect each), got {self.hp_ports}")
        object.__setattr__(self, "ports_used", self.hp_ports or fewest)
        if not isinstance(self.forward_split, bool):
            raise DesignError(f"design.forward_split: must be true or false, got {self.forward_split!r}")
        if self.forward_split and not {"tt1", "tt2"} <= {instance.pe for instance in self.instances}:
            raise DesignError("design.forward_split: only a TT design (tt1 and tt2 PEs) has forward contractions to "
                              "share between PE2 and PE1")

    @property
    def clock_period_ns(self) -> float:
        return 1000.0 / self.clock_mhz

    def describe(self) -> str:
        """What hardware the configuration needs, for people."""
        lines = [f"design {self.name} on {self.board.display_name} ({self.board.part}), PL clock {self.clock_mhz:g} MHz, "
                 f"data through {self.ports_used} of its {self.board.hp_ports} high-performance ports"
                 + (", forward contractions shared between PE2 and PE1" if self.forward_split else ""),
                 f"training: model {self.training.model.name}, techniques "
                 f"{', '.join(sorted(self.training.techniques)) or 'none (FP32)'}"]
        for instance in self.instances:
            lines.append(f"  {instance.name}: {get_pe(instance.pe).title} -- {instance.reason}")
            lines.append(f"    spec: {instance.spec}")
        for name in sorted(set(self.training.techniques) & set(HOST_TECHNIQUES)):
            lines.append(f"  host: {name} -- {HOST_TECHNIQUES[name]}, no PE")
        lines.append(self.memory_line())
        return "\n".join(lines)

    def memory(self) -> dict[str, Any]:
        """The board's DDR against a training run's estimated peak memory (:mod:`codesign.train.memory`).

        On the board the processor shares the DDR with the operating system
        and the accelerators' buffers, so ``fits_ddr`` is a necessary condition,
        not a promise.
        """
        from codesign.train.memory import estimate_peak_memory

        estimate = estimate_peak_memory(self.training)
        return {"ddr_mib": self.board.ddr_mib, "training_peak_mib": round(estimate.total / 2**20, 1),
                "largest_part": estimate.largest, "fits_ddr": estimate.total <= self.board.ddr_mib * 2**20,
                "estimated_by": "codesign.train.memory (from the configuration's shapes)"}

    def memory_line(self) -> str:
        memory = self.memory()
        verdict = "fits" if memory["fits_ddr"] else "does NOT fit"
        return (f"memory: {self.board.display_name} has {memory['ddr_mib']} MiB of DDR; a training run of this "
                f"configuration needs about {memory['training_peak_mib']:g} MiB at its peak (largest part: "
                f"{memory['largest_part'].replace('_', ' ')}): it {verdict} the board's DDR")

    def to_dict(self) -> dict:
        return {"name": self.name, "board": self.board.name, "part": self.board.part, "clock_mhz": self.clock_mhz,
                "hp_ports": self.ports_used, "forward_split": self.forward_split, "training": self.training.to_dict(),
                "instances": [{"name": i.name, "pe": i.pe, "top": i.top, "reason": i.reason, "spec": i.spec.to_dict(),
                               "held_sums": i.held_sums} for i in self.instances]}


def _need_registered(pe_name: str, why: str) -> None:
    if pe_name not in REGISTRY:
        raise DesignError(f"{why} needs the {pe_name!r} PE, which is not registered "
                          f"(registered PEs: {', '.join(REGISTRY)})")


def derived_pe_fields(training: TrainConfig) -> list[tuple[str, dict[str, Any], str]]:
    """(PE name, spec fields derived from the training configuration, reason), in a stable order: what the
    techniques declare (:func:`codesign.train.techniques.pe_needs`), or an FP32 FP-MAC array without one.

    Raises :class:`DesignError` for a technique whose arithmetic has no PE yet or asks what the PE cannot do.
    """
    from codesign.train.config import ConfigError
    from codesign.train.techniques import pe_needs

    try:
        needs = pe_needs(training)
    except ConfigError as error:
        raise DesignError(str(error)) from None
    if not needs:
        fp32 = FloatFormat()  # sign, 8 exponent bits, 23 fraction bits
        needs.append(("fpmac_array", {"exp_bits": fp32.exp_bits, "max_fb": fp32.frac_bits, "rounding": fp32.rounding},
                      "FP32 training (no reduced-precision technique)"))
    return needs


COPIES_FIELD = "copies"  # [design.pe.<pe>] copies = n: n instances of the same build, each its own IP
HELD_FIELD = "held_sums"  # [design.pe.<pe>] held_sums: whether its IPs' shells keep the buffer (held_by_default)
MAX_COPIES = 8


def _copies(value: Any, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_COPIES:
        raise DesignError(f"{where}: must be a whole number of instances in [1, {MAX_COPIES}], got {value!r}")
    return value


def _pe_spec(pe_name: str, derived: dict[str, Any], override: Mapping[str, Any], where: str):
    pe = get_pe(pe_name)
    known = {f.name for f in dataclasses.fields(pe.spec_class)}
    clash = sorted(set(override) & set(derived))
    if clash:
        raise DesignError(f"{where}.{clash[0]}: derived from the training configuration ({derived[clash[0]]!r}); "
                          "change the technique's setting instead")
    unknown = sorted(set(override) - known)
    if unknown:
        raise DesignError(f"{where}.{unknown[0]}: not a field of the {pe_name} spec (fields: {', '.join(sorted(known))})")
    check_field_types(pe.spec_class, override, where)  # bool is not int, a list is not a number
    try:
        return pe.spec(**derived, **override)
    except (TypeError, ValueError) as error:
        raise DesignError(f"{where}: {error}") from None


def design_point(training: TrainConfig, *, name: str, board_name: str = "zedboard", clock_mhz: float = 100.0,
                 overrides: Mapping[str, Mapping[str, Any]] | None = None, hp_ports: int = 0,
                 forward_split: bool = False) -> DesignPoint:
    """Derive the PE instances of ``training`` for ``board_name``; every error before anything is built."""
    overrides = dict(overrides or {})
    try:
        chosen_board = board(board_name)
    except ValueError as error:
        raise DesignError(f"design.board: {error}") from None
    needs = derived_pe_fields(training)
    for pe_name in overrides:
        if pe_name not in {need[0] for need in needs}:
            raise DesignError(f"design.pe.{pe_name}: the configuration does not use the {pe_name!r} PE "
                              f"(it uses {', '.join(need[0] for need in needs)})")
    for pe_name, _, why in needs:
        _need_registered(pe_name, why)
    counts: dict[str, int] = {}
    instances = []
    for pe_name, derived, reason in needs:
        override = dict(overrides.get(pe_name, {}))
        copies = _copies(override.pop(COPIES_FIELD, 1), f"design.pe.{pe_name}.{COPIES_FIELD}")
        held = override.pop(HELD_FIELD, None)
        if held is not None and not isinstance(held, bool):
            raise DesignError(f"design.pe.{pe_name}.{HELD_FIELD}: must be true or false (whether the shell keeps "
                              f"the accumulation buffer), got {held!r}")
        spec = _pe_spec(pe_name, derived, override, f"design.pe.{pe_name}")
        for _ in range(copies):
            index = counts.get(pe_name, 0)
            counts[pe_name] = index + 1
            instances.append(PeInstance(name=f"{pe_name}_{index}", pe=pe_name, spec=spec, reason=reason,
                                        held_sums=held))
    return DesignPoint(name=name, training=training, board=chosen_board, clock_mhz=clock_mhz,
                       instances=tuple(instances), overrides=overrides, hp_ports=hp_ports, forward_split=forward_split)


def design_from_dict(raw: dict, *, board_name: str | None = None, default_name: str = "design") -> DesignPoint:
    """A design point from plain TOML data: the training tables plus an optional ``[design]`` table."""
    if not isinstance(raw, dict):
        raise DesignError(f"design: the configuration must be a table of fields, got {type(raw).__name__}")
    raw = dict(raw)
    section = raw.pop(DESIGN_TABLE, {})
    if not isinstance(section, dict):
        raise DesignError("design: must be a table")
    known = {"name", "board", "clock_mhz", "hp_ports", "forward_split", "pe"}
    unknown = sorted(set(section) - known)
    if unknown:
        raise DesignError(f"design.{unknown[0]}: unknown field (known: {', '.join(sorted(known))})")
    for key in ("name", "board"):
        if key in section and not isinstance(section[key], str):
            raise DesignError(f"design.{key}: must be a string, got {section[key]!r}")
    overrides = section.get("pe", {})
    if not isinstance(overrides, dict) or not all(isinstance(v, dict) for v in overrides.values()):
        raise DesignError("design.pe: must hold one table per PE, e.g. [design.pe.fpmac_array]")
    return design_point(config_from_dict(raw), name=section.get("name", default_name),
                        board_name=board_name or section.get("board", "zedboard"),
                        clock_mhz=section.get("clock_mhz", 100.0), overrides=overrides,
                        hp_ports=section.get("hp_ports", 0), forward_split=section.get("forward_split", False))


def load_design(path: Path, *, board_name: str | None = None) -> DesignPoint:
    """Load a design point from a training TOML; ``board_name`` (e.g. from ``--board``) wins over the file's."""
    path = Path(path)
    raw = resolve_data_path(read_toml(path, error=DesignError, what="design file"), path)
    default_name = re.sub(r"[^a-z0-9_]", "_", path.stem.lower()) or "design"
    if not default_name[0].isalpha():
        default_name = "d_" + default_name
    design = design_from_dict(raw, board_name=board_name, default_name=default_name)
    require_tables(raw, path, error=DesignError, what="design file")  # after the fields' own errors
    return design
