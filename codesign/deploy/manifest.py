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
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from codesign.hw import shell
from codesign.hw.shell import MANIFEST_FILE, MANIFEST_FORMAT, MANIFEST_VERSION

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


def check_manifest(manifest: Any, *, where: str = MANIFEST_FILE) -> dict:
    """Validate the fields the deployment side uses; return ``manifest`` unchanged."""
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
    facts = manifest["board_facts"]
    _need(isinstance(facts, dict) and _is_int(facts.get("ddr_mib")) and facts["ddr_mib"] > 0,
          f"{where}: board_facts lacks 'ddr_mib' (a positive integer of MiB)")
    ips = manifest["ips"]
    _need(isinstance(ips, list) and ips, f"{where}: lists no IPs")
    names = set()
    for index, ip in enumerate(ips):
        _need(isinstance(ip, dict), f"{where}: ips[{index}] must be an object")
        for key in ("name", "pe", "top", "vlnv", "base_address", "address_range", "registers", "spec"):
            _need(key in ip, f"{where}: ips[{index}] lacks {key!r}")
        name = ip["name"]
        _need(name not in names, f"{where}: IP name {name!r} repeats")
        names.add(name)
        _need(_is_int(ip["base_address"]) and _is_int(ip["address_range"]) and ip["address_range"] > 0,
              f"{where}: IP {name}: base_address and address_range must be integers")
        registers = ip["registers"]
        missing = [reg for reg in SHELL_REGISTERS if reg not in registers]
        _need(not missing, f"{where}: IP {name} lacks register(s) {', '.join(missing)}")
        _need(all(_is_int(v) and 0 <= v < ip["address_range"] and v % 4 == 0 for v in registers.values()),
              f"{where}: IP {name}: register offsets must be word-aligned and inside its address range")
        for buffer_name, buffer in ip.get("buffers", {}).items():
            _need(buffer.get("dtype") == "uint32" and _is_int(buffer.get("max_words")),
                  f"{where}: IP {name}: buffer {buffer_name!r} must be uint32 with an integer max_words")
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
