"""Measure the host's share of a training step on the board, for the desktop's explorer.

Run on the board, with the design's bundle installed (or its build folder)::

    python -m codesign.deploy.host_share digits_tt --out host_model.json

It builds the design's golden loop from design.json's ``loop`` entry,
times its NumPy host work per step on this board's CPU
(:func:`codesign.deploy.families.measure_loop_host`) and writes a host
report; on the desktop, ``codesign explore CONFIG --host host_model.json``
then prices the host with the board's figure instead of the desktop's.

With ``--lists`` it times the step as the board runs it instead: the
family's board trainer on the design's IPs (the bitstream must be built;
``--emulate`` on a desktop) through its first list steps, then ``--steps``
list steps, the host's share the wall time less the phases' waiting
(:func:`measure_list_host`), split into the seconds between the phases and
those its trainer worked beside them, which the explorer hides behind the
phases as far as they reach. A list family's explorer takes that figure as it
is; a CSB conv loop, which runs as lists only, is measured this way alone.
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


def resolve(target: str, data: Optional[str] = None, *, needs_data: bool = False) -> tuple[Mapping[str, Any], Any]:
    """design.json and the data set (None unless the loop needs it, or ``needs_data``) of an installed bundle's
    name, a bundle package folder, or a build folder (``data`` then names the ``.npz``)."""
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
    if not (needs_data or family_of(manifest).host_needs_data):
        return manifest, None
    if data is not None:
        from codesign.loops.data import load_npz

        return manifest, load_npz(Path(data))
    if bundle is None:
        what = "--lists" if needs_data else f"a {loop['family']} loop"
        raise DeployError(f"design {manifest['design']}: {what}'s host share needs the data set; give --data "
                          "FILE.npz (a build folder carries none)")
    return manifest, bundle.data()


def build_folder(target: str) -> Path:
    """The build folder (design.json, hls/, the bitstream if built) of an installed bundle's name, a bundle package
    folder, or a build folder."""
    path = Path(target)
    if path.is_dir() and (path / "bundle.json").is_file():
        return Bundle(path).build_dir
    return path if path.is_dir() else installed_bundle(target).build_dir


def measure_list_host(folder: Path, data, *, source: str, steps: int = 5, emulate: Optional[bool] = None) -> HostModel:
    """The host's seconds a list step on ``folder``'s IPs: the family's board trainer (its quick changes) on
    ``data``'s training batches until its steps run as lists (a warm-up, a pruning event or a prior's first steps
    run on the host) and one more (it builds the lists), then ``steps`` list steps, each its wall time less the time
    the phases kept the host waiting (:attr:`codesign.deploy.list_shell.ListShell.busy_s`; on the emulated board
    also its IPs' run seconds): the median step, as one that builds or re-aims lists now and then is the rare one,
    its seconds split into those between the phases (``fixed_s``) and those its trainer worked while they computed
    (``beside_s``, the trainer's ``beside_seconds``: on a board the IPs compute meanwhile)."""
    import warnings

    from codesign.deploy.families import board_trainer
    from codesign.deploy.overlay import CodesignOverlay

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the notice that the emulated board stands in for the board
        overlay = CodesignOverlay(Path(folder), emulate=emulate)
    trainer = board_trainer(overlay, **family_of(overlay.manifest).quick_changes)
    if not hasattr(trainer, "list_steps"):
        raise DeployError(f"design {overlay.manifest['design']}: its trainer runs one IP call at a time on these IPs; "
                          "measure its host share without --lists")
    # the warm-up epochs in short (a pruning event ends them), then steps to the first list step and one more
    trainer.fit(data, epochs=getattr(trainer.setup, "warmup_epochs", 0) or 1, progress=False, max_steps=2)
    x, y = data.train_x, data.train_y
    n = trainer.setup.batch_size
    batches = ((x[i * n:(i + 1) * n], y[i * n:(i + 1) * n]) for i in range(len(y) // n))
    for batch in batches:
        if trainer.list_steps > 1:
            break
        trainer.train_step(*batch)
    ips = getattr(overlay.device, "ips", {}).values()  # the emulated board's IPs compute inside the register write

    def ip_seconds() -> float:
        return sum(getattr(ip, "run_s", 0.0) for ip in ips)

    seconds = []  # per list step: (the host's seconds, of them beside the phases)
    for _, batch in zip(range(steps), batches):
        wall, busy, emulated, done = trainer.list_wall_s, trainer.shell.busy_s, ip_seconds(), trainer.list_steps
        trainer.train_step(*batch)
        if trainer.list_steps > done:
            waited = trainer.shell.busy_s - busy + ip_seconds() - emulated
            beside = sum(getattr(trainer, "beside_seconds", {}).values())
            seconds.append((max(0.0, trainer.list_wall_s - wall - waited), beside))
    if not seconds:
        raise DeployError(f"the training split of {len(y)} samples ends before a list step could be timed")
    host, beside = sorted(seconds)[len(seconds) // 2]  # the median step: one that builds lists is rare
    beside = min(beside, host)
    return HostModel(fixed_s=host - beside, per_call_s=0.0, list_step=True, beside_s=beside,
                     source=f"{source}; the median of {len(seconds)} list steps on the IPs"
                            f"{' (emulated)' if emulate else ''}")


def measure_board_host(target: str, *, out: Path, data: Optional[str] = None, lists: bool = False,
                       steps: int = 5, emulate: Optional[bool] = None) -> tuple[HostModel, Path]:
    """Measure the host share of ``target``'s loop here (``lists``: its list steps on the IPs) and write the host
    report ``out``."""
    out = Path(out)
    if not out.parent.is_dir():
        raise DeployError(f"--out {out}: its folder {out.parent} does not exist")
    manifest, dataset = resolve(target, data, needs_data=lists)
    machine = machine_record()
    if lists:
        host = measure_list_host(build_folder(target), dataset, source=where_measured(machine), steps=steps,
                                 emulate=emulate)
    else:
        host = measure_loop_host(manifest["loop"], source=where_measured(machine), data=dataset)
    return host, write_host_report(out, manifest["loop"], host, machine)


def main(argv: Optional[list] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m codesign.deploy.host_share", description=__doc__.splitlines()[0])
    parser.add_argument("target", help="an installed bundle's name, a bundle package folder, or a build folder")
    parser.add_argument("--out", default=HOST_REPORT_FILE, help=f"host report to write (default {HOST_REPORT_FILE})")
    parser.add_argument("--data", default=None, help="the data set (.npz) of a CSB loop, or of --lists, given as a "
                                                      "build folder")
    parser.add_argument("--lists", action="store_true", help="time list steps on the design's IPs (the bitstream "
                                                             "must be built)")
    parser.add_argument("--steps", type=int, default=5, help="list steps timed with --lists (default 5)")
    parser.add_argument("--emulate", action="store_true", help="with --lists: the emulated board, even on a board")
    args = parser.parse_args(argv)
    if args.steps < 1:
        parser.error(f"--steps must be at least 1, got {args.steps}")
    try:
        host, path = measure_board_host(args.target, out=Path(args.out), data=args.data, lists=args.lists,
                                        steps=args.steps, emulate=True if args.emulate else None)
    except (DeployError, ValueError, OSError) as error:
        print(f"host_share: error: {error}", file=sys.stderr)
        return 2
    print(f"host share of a step: {host.fixed_s * 1e3:.3f} ms + {host.per_call_s * 1e6:.2f} us per PE call "
          f"({host.source}); wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
