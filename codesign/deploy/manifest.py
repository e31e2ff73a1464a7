"""design.json as the deployment side reads it: loading, and the checks that tie a bitstream and a design to it.

The driver, the overlay and the emulated board all work from the manifest
(:mod:`codesign.design.manifest` writes it). Three checks guard against
running the wrong hardware:

- :func:`load_manifest` refuses a file that is not a codesign manifest, or
  whose IPs lack the registers the accelerator shell needs;
- :func:`check_ip_dict` compares the IPs a bitstream's ``.hwh`` declares
  (PYNQ's ``ip_dict``: block-design cell -> VLNV, base address, range and,
  where the ``.hwh`` lists them, register offsets) with the manifest, so a
  bitstream from another build is refused before any register is touched;
- :func:`check_design` compares a design point with the manifest, so a
  training set-up the overlay does not implement is refused before it runs.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from codesign.contracts import shell
from codesign.contracts.shell import MANIFEST_FILE, MANIFEST_FORMAT, MANIFEST_VERSION

SHELL_REGISTERS = (*shell.CONTROL_REGISTERS, *(arg.name for arg in shell.SHELL_ARGS))


class DeployError(RuntimeError):
    """Base class of every deployment error (manifest, overlay, driver, emulated board)."""


class ManifestError(DeployError):
    """design.json is missing, malformed, or does not describe accelerator-shell IPs."""


class OverlayMismatch(DeployError):
    """The bitstream (its .hwh) or the design point does not match design.json."""


def _need(condition: bool, message: str) -> None:
    if not condition:
        raise ManifestError(message)


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_power_of_two(value: int) -> bool:
    return value > 0 and value & (value - 1) == 0


def _words(bits: int) -> int:
    return -(-bits // shell.AXI_WORD_BITS)


# The shell's register offsets (bytes), as the generated IP decodes them, and each register's width in bytes:
# the control registers are one word, an argument takes its register_bits in whole words (a 64-bit pointer 8 bytes).
SHELL_OFFSETS = shell.register_map()
SHELL_REGISTER_BYTES = {**{name: 4 for name in shell.CONTROL_REGISTERS},
                        **{arg.name: 4 * _words(arg.register_bits) for arg in shell.SHELL_ARGS}}

# Where the processing system's DDR sits in the physical address map. On Zynq-7000 (ps7) the PS DDR starts at
# address 0 (at most 1 GiB, 0x0000_0000..0x3fff_ffff; UG585, "System Addresses"). On Zynq UltraScale+
# (zynq_ultra_ps_e) the low 2 GiB of DDR start at 0 (0x0000_0000..0x7fff_ffff) and any more DDR sits at
# 0x8_0000_0000 (UG1085, "Global System Address Map"), above the PL windows at 0x8000_0000..0xbfff_ffff.
# So on both boards DDR is [0, ddr_mib MiB) up to 2 GiB, and an IP window there would alias memory.
LOW_DDR_LIMIT = 2 << 30
ZYNQMP_HIGH_DDR_BASE = 0x8_0000_0000
# The physical address width the PS decodes: 32 bits on Zynq-7000 (UG585), 40 on Zynq UltraScale+ (UG1085's
# 40-bit global address map). An IP window or a buffer must lie below it.
ADDRESS_BITS = {"ps7": 32, "zynq_ultra_ps_e": 40}
MAX_DDR_MIB = 1 << 16  # 64 GiB: more than any Zynq board carries


def ddr_windows(board_facts: Mapping) -> list[tuple[int, int]]:
    """The PS DDR's physical address ranges ``[start, end)`` for a manifest's ``board_facts``."""
    ddr_bytes = board_facts["ddr_mib"] << 20
    windows = [(0, min(ddr_bytes, LOW_DDR_LIMIT))]
    if ddr_bytes > LOW_DDR_LIMIT and board_facts.get("ps") == "zynq_ultra_ps_e":
        windows.append((ZYNQMP_HIGH_DDR_BASE, ZYNQMP_HIGH_DDR_BASE + ddr_bytes - LOW_DDR_LIMIT))
    elif ddr_bytes > LOW_DDR_LIMIT:
        windows = [(0, ddr_bytes)]
    return windows


def _check_registers(field: str, registers: Any, address_range: int) -> None:
    """Offsets of one IP's registers: the shell's at the offsets the IP decodes, all word-aligned, in range, disjoint."""
    _need(isinstance(registers, dict) and all(isinstance(name, str) for name in registers),
          f"{field}: registers must be an object of register name -> byte offset")
    missing = [reg for reg in SHELL_REGISTERS if reg not in registers]
    _need(not missing, f"{field}: lacks register(s) {', '.join(missing)}")
    spans = []
    for register, offset in registers.items():
        _need(_is_int(offset) and offset >= 0 and offset % 4 == 0,
              f"{field}: registers.{register} {offset!r} must be a word-aligned (multiple of 4) byte offset")
        if register in SHELL_OFFSETS:
            _need(offset == SHELL_OFFSETS[register],
                  f"{field}: registers.{register} is {offset:#x}, but the accelerator shell decodes {register} at "
                  f"{SHELL_OFFSETS[register]:#x} (the offsets are fixed by the generated IP; regenerate design.json)")
        spans.append((offset, offset + SHELL_REGISTER_BYTES.get(register, 4), register))
    needed = max(end for _, end, _ in spans)
    _need(needed <= address_range,
          f"{field}: address_range {address_range:#x} is smaller than the {needed:#x} bytes its registers span "
          "(every register must lie inside the IP's window)")
    spans.sort()
    for (start, end, register), (next_start, next_end, other) in zip(spans, spans[1:]):
        _need(next_start >= end, f"{field}: registers.{other} at {next_start:#x} overlaps registers.{register} "
                                 f"({start:#x}..{end - 1:#x}, {end - start} bytes)")


def _check_ip(where: str, index: int, ip: Any, names: dict[str, int], facts: Mapping) -> None:
    field = f"{where}: ips[{index}]"
    _need(isinstance(ip, dict), f"{field} must be an object")
    for key in ("name", "pe", "top", "vlnv", "base_address", "address_range", "registers", "spec"):
        _need(key in ip, f"{field} lacks {key!r}")
    name = ip["name"]
    _need(shell.is_lower_identifier(name),
          f"{field}: name {name!r} must be a lower-case C identifier (a-z, 0-9, _, starting with a letter)")
    _need(name not in names, f"{field}: IP name {name!r} repeats (ips[{names.get(name)}])")
    names[name] = index
    field = f"{field} ({name})"
    for key in ("pe", "top", "vlnv"):
        _need(isinstance(ip[key], str) and ip[key] != "", f"{field}: {key} {ip[key]!r} must be a non-empty string")
    _need(isinstance(ip["spec"], dict), f"{field}: spec must be an object, not {type(ip['spec']).__name__}")
    _need(isinstance(ip.get("held_sums", True), bool),
          f"{field}: held_sums {ip.get('held_sums')!r} must be true or false (the shell's accumulation buffer)")
    base, address_range = ip["base_address"], ip["address_range"]
    bits = ADDRESS_BITS.get(facts.get("ps"), 40)
    _need(_is_int(base) and base >= 0, f"{field}: base_address {_hex(base)} must be a non-negative integer")
    _need(_is_int(address_range) and _is_power_of_two(address_range),
          f"{field}: address_range {_hex(address_range)} must be a power of two (bytes)")
    _need(base + address_range <= 1 << bits,
          f"{field}: window {_hex(base)}..{_hex(base + address_range - 1)} (base_address + address_range) must end "
          f"below 2^{bits}, the PS's addresses")
    _need(base % address_range == 0,
          f"{field}: base_address {base:#x} is not aligned to its address_range {address_range:#x}")
    _check_registers(field, ip["registers"], address_range)
    buffers = ip.get("buffers", {})
    _need(isinstance(buffers, dict), f"{field}: buffers must be an object")
    ddr_words = (facts["ddr_mib"] << 20) // 4
    for buffer_name, buffer in buffers.items():
        _need(isinstance(buffer, dict) and buffer.get("dtype") == "uint32" and _is_int(buffer.get("max_words"))
              and 0 <= buffer["max_words"] <= ddr_words,
              f"{field}: buffers.{buffer_name} must be uint32 with an integer max_words in [0, {ddr_words}] (the "
              f"board's {facts['ddr_mib']} MiB of DDR)")


def check_manifest(manifest: Any, *, where: str = MANIFEST_FILE) -> dict:
    """Validate the manifest as a whole before anything runs; return ``manifest`` unchanged.

    Beyond its format and the fields the runtime reads, every IP must be
    addressable as the bitstream decodes it: names that are lower-case C
    identifiers, a power-of-two ``address_range`` holding its registers,
    a ``base_address`` aligned to it, windows pairwise disjoint and outside
    the PS DDR (:func:`ddr_windows`), and registers word-aligned, disjoint
    by width, with the shell's at the offsets of :func:`shell.register_map`.
    Every refusal names the file and the field.
    """
    _need(isinstance(manifest, dict), f"{where}: must be a JSON object")
    version = manifest.get("version")
    _need(not (manifest.get("format") == MANIFEST_FORMAT and _is_int(version) and version > MANIFEST_VERSION),
          f"{where}: written by a newer codesign (design.json version {version}); this runtime reads version "
          f"{MANIFEST_VERSION}: upgrade codesign on this machine (pip install -U codesign)")
    _need(manifest.get("format") == MANIFEST_FORMAT and manifest.get("version") == MANIFEST_VERSION,
          f"{where}: not a {MANIFEST_FORMAT} version {MANIFEST_VERSION} manifest "
          f"(format {manifest.get('format')!r}, version {manifest.get('version')!r})")
    for key in ("design", "board", "part", "clock_mhz", "board_facts", "ips"):
        _need(key in manifest, f"{where}: lacks {key!r}")
    for key in ("design", "board", "part"):
        _need(isinstance(manifest[key], str) and manifest[key] != "",
              f"{where}: {key} {manifest[key]!r} must be a non-empty string")
    clock = manifest["clock_mhz"]
    _need(isinstance(clock, (int, float)) and not isinstance(clock, bool) and math.isfinite(clock) and clock > 0,
          f"{where}: clock_mhz {clock!r} must be a positive number of MHz")
    facts = manifest["board_facts"]
    _need(isinstance(facts, dict) and _is_int(facts.get("ddr_mib")) and 0 < facts["ddr_mib"] <= MAX_DDR_MIB,
          f"{where}: board_facts.ddr_mib must be an integer of MiB in [1, {MAX_DDR_MIB}], got "
          f"{facts.get('ddr_mib') if isinstance(facts, dict) else facts!r}")
    ips = manifest["ips"]
    _need(isinstance(ips, list) and ips, f"{where}: lists no IPs")
    names: dict[str, int] = {}
    for index, ip in enumerate(ips):
        _check_ip(where, index, ip, names, facts)
    ddr = ddr_windows(facts)
    windows = sorted((ip["base_address"], ip["base_address"] + ip["address_range"], index)
                     for index, ip in enumerate(ips))
    for start, end, index in windows:
        for ddr_start, ddr_end in ddr:
            _need(end <= ddr_start or start >= ddr_end,
                  f"{where}: ips[{index}] ({ips[index]['name']}): base_address {start:#x} (window {start:#x}.."
                  f"{end - 1:#x}) lies in DDR ({ddr_start:#x}..{ddr_end - 1:#x}, board_facts.ddr_mib "
                  f"{facts['ddr_mib']}): an IP must sit in a PL address window")
    for (start, end, index), (next_start, next_end, other) in zip(windows, windows[1:]):
        name, other_name = ips[index]["name"], ips[other]["name"]
        if next_start == start:
            later, earlier = (other, index) if other > index else (index, other)
            raise ManifestError(f"{where}: ips[{later}] ({ips[later]['name']}): base_address {start:#x} is also "
                                f"IP {ips[earlier]['name']}'s")
        _need(next_start >= end,
              f"{where}: ips[{other}] ({other_name}): window {next_start:#x}..{next_end - 1:#x} overlaps IP "
              f"{name}'s {start:#x}..{end - 1:#x} (base_address + address_range)")
    return manifest


def load_manifest(path: Path) -> dict:
    """Read and check ``design.json`` (a file, or a build folder holding one)."""
    path = Path(path)
    if path.is_dir():
        path = path / MANIFEST_FILE
    if not path.is_file():
        raise ManifestError(f"no design manifest at {path} (write the build folder with `codesign build`)")
    try:
        manifest = json.loads(path.read_text())
    except (OSError, ValueError) as error:
        raise ManifestError(f"{path}: not readable JSON: {error}") from None
    return check_manifest(manifest, where=str(path))


def setup_from_manifest(manifest: Mapping, setup_class, changes: Mapping[str, Any] = ()) -> Any:
    """``setup_class`` rebuilt from design.json's ``loop.setup`` with ``changes`` applied: every field checked by
    the class before anything is allocated, a bad one refused in one line naming design.json's field."""
    changes = dict(changes)
    where = (f"design {manifest['design']!r}: " if "design" in manifest else "") + "design.json loop.setup"
    if "spec" in changes:
        raise DeployError(f"{where}: the spec is the IP's (design.json), not a set-up change")
    entry = manifest.get("loop")
    setup = entry.get("setup") if isinstance(entry, Mapping) else None
    if not isinstance(setup, Mapping):
        raise DeployError(f"{where}: missing (an object of the loop's set-up fields)")
    unknown = sorted(set(changes) - set(setup))
    if unknown:
        raise DeployError(f"{where}: the changes {unknown} are no fields of the {setup_class.__name__} set-up")

    def build(values: Mapping[str, Any], said: str):
        try:
            return setup_class.from_dict(values)
        except (KeyError, TypeError, ValueError) as error:  # the loops' HwTrainError is a ValueError
            raise DeployError(f"{where}{said}: {error}") from None

    recorded = build(setup, "")  # first: a bad recorded field is refused even where a change would replace it
    return build({**setup, **changes}, f" with the changes {sorted(changes)}") if changes else recorded


def ip_by_name(manifest: Mapping, name: str) -> dict:
    for ip in manifest["ips"]:
        if ip["name"] == name:
            return ip
    raise KeyError(f"design {manifest['design']!r} has no IP {name!r} (IPs: "
                   f"{', '.join(ip['name'] for ip in manifest['ips'])})")


def _hex(value: object) -> str:
    return f"{value:#x}" if _is_int(value) else repr(value)


CONTROL_ALIASES = {"GIE": ("GIER",), "IER": ("IP_IER",), "ISR": ("IP_ISR",)}


def hwh_register_names(register: str) -> tuple[str, ...]:
    """The names a ``.hwh`` may give the manifest's register ``register``, preferred first.

    Vitis HLS names a register after its argument but appends ``_r`` to
    names that clash with reserved words (``in`` -> ``in_r``, ``out`` ->
    ``out_r``), and some versions split a 64-bit pointer register into
    ``<name>_1`` (low word, at the argument's offset) and ``<name>_2`` (high
    word); the low word is the one whose offset the manifest records. The
    block-level registers may appear under PYNQ's register-map names for
    HLS IPs (``GIER``, ``IP_IER``, ``IP_ISR``).
    """
    bases = (register, f"{register}_r", *CONTROL_ALIASES.get(register, ()))
    return (*bases, *(f"{base}_1" for base in bases[:2]))


def _register_problems(name: str, cell: str, manifest_registers: Mapping[str, int],
                       hwh_registers: Mapping[str, Mapping]) -> list[str]:
    """Differences between the manifest's register offsets (bytes) and those the ``.hwh`` lists for ``cell``.

    Argument registers must all be present; the block-level control
    registers (CTRL, GIE, IER, ISR) are checked only where the ``.hwh``
    lists them, because PYNQ's parser does not always report them.
    """
    problems = []
    for register, offset in manifest_registers.items():
        names = hwh_register_names(register)
        found = next((hwh_name for hwh_name in names if hwh_name in hwh_registers), None)
        if found is None:
            if register not in shell.CONTROL_REGISTERS:
                problems.append(f"IP {name}: register {register} (manifest offset {offset:#x}) is not in the "
                                f"bitstream's cell {cell} (looked for {', '.join(names)})")
            continue
        hwh_offset = hwh_registers[found].get("address_offset")
        if hwh_offset != offset:
            problems.append(f"IP {name}: register {register} offset in the bitstream {_hex(hwh_offset)} "
                            f"(as {found}), in the manifest {offset:#x}")
    return problems


def check_ip_dict(manifest: Mapping, ip_dict: Mapping[str, Mapping]) -> dict[str, str]:
    """Match every manifest IP to the bitstream's ``ip_dict``; return manifest name -> ip_dict key.

    An IP matches when a block-design cell of the same name (or, failing
    that, a unique cell) has the manifest's VLNV, and its base address and
    range are the manifest's. When the cell lists registers (PYNQ's
    ``ip_dict[cell]["registers"]``; older ``.hwh`` files list none, and
    then registers are not compared), every argument register, and every
    control register the cell lists, must sit at the manifest's byte offset
    (see :func:`_register_problems`). Anything else raises
    :class:`OverlayMismatch` listing every difference.
    """
    problems, found = [], {}
    for ip in manifest["ips"]:
        name, vlnv = ip["name"], ip["vlnv"]
        candidates = [key for key, entry in ip_dict.items() if entry.get("type") == vlnv]
        if name in ip_dict:
            key = name
        elif len(candidates) == 1:
            key = candidates[0]
        else:
            why = "none" if not candidates else f"several: {', '.join(candidates)}"
            problems.append(f"IP {name} ({vlnv}): no such cell in the bitstream ({why} with that VLNV)")
            continue
        entry = ip_dict[key]
        if entry.get("type") != vlnv:
            problems.append(f"IP {name}: the bitstream's cell {key} is {entry.get('type')!r}, the manifest says {vlnv!r}")
        if entry.get("phys_addr") != ip["base_address"]:
            problems.append(f"IP {name}: base address in the bitstream {_hex(entry.get('phys_addr'))}, "
                            f"in the manifest {ip['base_address']:#x}")
        if entry.get("addr_range") != ip["address_range"]:
            problems.append(f"IP {name}: address range in the bitstream {_hex(entry.get('addr_range'))}, "
                            f"in the manifest {ip['address_range']:#x}")
        if entry.get("registers"):
            problems.extend(_register_problems(name, key, ip["registers"], entry["registers"]))
        found[name] = key
    if problems:
        raise OverlayMismatch(f"the bitstream does not implement design {manifest['design']!r} as design.json "
                              "describes it:\n  " + "\n  ".join(problems))
    return found


def check_design(manifest: Mapping, design) -> None:
    """Refuse a :class:`~codesign.design.DesignPoint` whose PE instances differ from the manifest's IPs."""
    ips = {ip["name"]: ip for ip in manifest["ips"]}
    wanted = {instance.name: instance for instance in design.instances}
    problems = []
    for name in sorted(set(wanted) - set(ips)):
        problems.append(f"the design needs IP {name} ({wanted[name].pe}), the overlay has none")
    for name in sorted(set(wanted) & set(ips)):
        instance, ip = wanted[name], ips[name]
        if instance.pe != ip["pe"]:
            problems.append(f"IP {name}: the design needs PE {instance.pe!r}, the overlay has {ip['pe']!r}")
        elif instance.spec.to_dict() != ip["spec"]:
            differ = sorted(key for key in set(instance.spec.to_dict()) | set(ip["spec"])
                            if instance.spec.to_dict().get(key) != ip["spec"].get(key))
            problems.append(f"IP {name}: spec fields {', '.join(differ)} differ (design "
                            f"{ {k: instance.spec.to_dict().get(k) for k in differ} }, overlay "
                            f"{ {k: ip['spec'].get(k) for k in differ} })")
    if design.board.name != manifest["board"]:
        problems.append(f"the design is for board {design.board.name!r}, the overlay for {manifest['board']!r}")
    if problems:
        raise OverlayMismatch(f"the overlay (design {manifest['design']!r}) does not implement design point "
                              f"{design.name!r}:\n  " + "\n  ".join(problems))
