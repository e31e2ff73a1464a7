"""Measure the host's share of a training step on the board, for the desktop's explorer.

Run on the board, with the design's bundle installed (or its build folder)::

    python -m codesign.deploy.host_share digits_tt --out host_model.json

It builds the design's golden loop from design.json's ``loop`` entry,
times its NumPy host work per step on this board's CPU
(:func:`codesign.deploy.families.measure_loop_host`) and writes a host
report; on the desktop, ``codesign explore CONFIG --host host_model.json``
then prices the host with the board's figure instead of the desktop's.
Everything is checked (the bundle or folder, its loop, the data a CSB loop
needs, the report's folder) before anything is measured or written.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any, Mapping, Optional

from codesign.deploy.bundle import Bundle, installed_bundle
from codesign.deploy.manifest import DeployError, load_manifest
from codesign.deploy.families import family_of, measure_loop_host
from codesign.loops.host_share import HOST_REPORT_FILE, machine_record, write_host_report
from codesign.step.host import HostModel


def where_measured(machine: Mapping[str, str]) -> str:
    """The report's ``source``: the board the PYNQ image names, or this machine when it names none."""
    cpu = f"{machine['processor']}, Python {machine['python']}, NumPy {machine['numpy']}"
    if machine.get("board"):
        return f"measured on the {machine['board']} board ({cpu})"
    return f"measured on this machine ({cpu}; not a board: a board's ARM core is slower)"


def resolve(target: str, data: Optional[str] = None) -> tuple[Mapping[str, Any], Any]:
    """design.json and the data set (None unless a CSB loop needs it) of an installed bundle's name, a bundle
    package folder, or a build folder (``data`` then names the ``.npz``)."""
    path = Path(target)
    if path.is_dir() and (path / "bundle.json").is_file():
        bundle = Bundle(path)
    elif path.is_dir():
        bundle = None
        manifest = load_manifest(path)
    else:
        bundle = installed_bundle(target)
    if bundle is not None:
        bundle.check_board()
        manifest = bundle.manifest
    loop = manifest.get("loop")
    if not loop:
        raise DeployError(f"design {manifest['design']}: design.json has no training loop (``loop``), so there is "
                          "no host share to measure")
    if not family_of(manifest).host_needs_data:
        return manifest, None
    if data is not None:
        from codesign.loops.data import load_npz

        return manifest, load_npz(Path(data))
    if bundle is None:
        raise DeployError(f"design {manifest['design']}: a {loop['family']} loop's host share needs the data set; "
                          "give --data FILE.npz (a build folder carries none)")
    return manifest, bundle.data()


def measure_board_host(target: str, *, out: Path, data: Optional[str] = None) -> tuple[HostModel, Path]:
    """Measure the host share of ``target``'s loop here and write the host report ``out``."""
    out = Path(out)
    if not out.parent.is_dir():
        raise DeployError(f"--out {out}: its folder {out.parent} does not exist")
    manifest, dataset = resolve(target, data)
    machine = machine_record()
    host = measure_loop_host(manifest["loop"], source=where_measured(machine), data=dataset)
    return host, write_host_report(out, manifest["loop"], host, machine)


def main(argv: Optional[list] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m codesign.deploy.host_share", description=__doc__.splitlines()[0])
    parser.add_argument("target", help="an installed bundle's name, a bundle package folder, or a build folder")
    parser.add_argument("--out", default=HOST_REPORT_FILE, help=f"host report to write (default {HOST_REPORT_FILE})")
    parser.add_argument("--data", default=None, help="the data set (.npz) of a CSB loop given as a build folder")
    args = parser.parse_args(argv)
    try:
        host, path = measure_board_host(args.target, out=Path(args.out), data=args.data)
    except (DeployError, ValueError, OSError) as error:
        print(f"host_share: error: {error}", file=sys.stderr)
        return 2
    print(f"host share of a step: {host.fixed_s * 1e3:.3f} ms + {host.per_call_s * 1e6:.2f} us per PE call "
          f"({host.source}); wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
