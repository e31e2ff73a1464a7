"""``codesign bundle``: a design's overlay for one board as a pip package, delivered the way PYNQ delivers overlays.

PYNQ ships overlays as pip packages whose notebooks ``pynq get-notebooks``
copies through the ``pynq.notebooks`` entry point (PYNQ documentation,
"Using PyPI to deliver FPGA overlays"). :func:`write_bundle` writes such a
package for a design point:

- ``overlay/``: design.json, the HLS projects the emulated board compiles,
  and the ``.bit``/``.hwh`` when the build folder given holds them;
- ``data/<dataset>.npz``: the training data as the configuration splits it
  (a board has neither scikit-learn nor torch);
- ``notebooks/train_on_board.ipynb``: trains the design through its IP,
  finding every file through the installed package;
- ``pyproject.toml`` naming only the runtime (``codesign``) as dependency,
  and ``dist/<wheel>`` built from it when the desktop has ``build`` and
  ``hatchling`` (pip installs the wheel on a board without a network);
- ``dist/codesign-<version>-py3-none-any.whl``, the runtime itself, built
  from this source tree when codesign runs from one (``make wheel`` builds
  the same), so ``pip install dist/*.whl`` on a board needs no index.

The package is assembled in a scratch folder beside ``out_dir`` and moved
into place at the end, so an interrupted bundle leaves nothing half-written.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import codesign
from codesign.deploy.bundle import BUNDLE_GROUP, BUNDLE_INFO, FOLDER_MARKER
from codesign.deploy.manifest import ManifestError, load_manifest
from codesign.design.build import render_ip_projects, write_ip_projects
from codesign.design.families import get_family, loop_entry
from codesign.design.point import DesignPoint
from codesign.resources import source_tree
from codesign.io.outdir import OutputDirError, check_output_dir
from codesign.contracts.shell import MANIFEST_FILE

MARKER = FOLDER_MARKER  # at the top of a bundle folder: it was written by codesign bundle
NOTEBOOK = "train_on_board.ipynb"


class BundleFolderError(OutputDirError):
    """The bundle cannot be written as asked (nothing was written)."""


@dataclass(frozen=True)
class BundleResult:
    """What :func:`write_bundle` wrote: the package folder, its name, the wheel (None without build tools)."""

    out_dir: Path
    name: str
    package: str
    wheel: Path | None
    built: bool  # the bundle carries a bitstream
    runtime_wheel: Path | None = None  # codesign's own wheel (None: codesign is not run from a source tree)


def bundle_name(design: DesignPoint) -> str:
    return f"{design.name}-{design.board.name}"


def package_name(design: DesignPoint) -> str:
    return f"codesign_overlay_{design.name}_{design.board.name}".replace("-", "_")


def is_bundle_dir(out_dir: Path) -> bool:
    return (Path(out_dir) / MARKER).is_file()


BUNDLE_ENTRIES = (MARKER, "pyproject.toml", "dist")  # what a bundle folder holds beside its package


def check_bundle_dir(out_dir: Path) -> None:
    """The output-folder rule (:mod:`codesign.io.outdir`): missing, empty or an earlier bundle, and writable.

    An earlier bundle is replaced whole, so it may hold nothing but what a bundle holds (its marker,
    pyproject.toml, dist/ and one package folder): a file put there by hand is refused, never deleted. A symlink
    is refused too (replacing it would replace the link, not the bundle). The bundle is assembled beside
    ``out_dir``, so its parent must be writable too.
    """
    if Path(out_dir).is_symlink():
        raise BundleFolderError(f"{out_dir} is a symbolic link: give the bundle folder itself (--out)")
    out_dir = check_output_dir(Path(out_dir), "bundle", marker=MARKER, is_own=is_bundle_dir, error=BundleFolderError)
    if is_bundle_dir(out_dir):
        packages = [entry for entry in out_dir.iterdir() if (entry / BUNDLE_INFO).is_file()]
        foreign = sorted(entry.name for entry in out_dir.iterdir()
                         if entry.name not in BUNDLE_ENTRIES and entry not in packages[:1])
        if foreign:
            raise BundleFolderError(f"{out_dir} holds a bundle and also {', '.join(foreign[:5])}, which codesign "
                                    "bundle did not write: move them away, or give another --out")
    parent = out_dir.resolve().parent
    if out_dir.exists() and not os.access(parent, os.W_OK | os.X_OK):
        raise BundleFolderError(f"{parent} is not a writable folder: the bundle is assembled beside {out_dir.name}")


def _check_build(design: DesignPoint, build_dir: Path) -> dict:
    try:
        manifest = load_manifest(build_dir)
    except ManifestError as error:  # a board-runtime error (RuntimeError): here it is a bad --build argument
        raise BundleFolderError(str(error)) from None
    if manifest["design"] != design.name or manifest["board"] != design.board.name:
        raise BundleFolderError(f"{build_dir / MANIFEST_FILE} is design {manifest['design']!r} for "
                                f"{manifest['board']!r}, not {design.name!r} for {design.board.name!r}")
    if manifest.get("loop") != loop_entry(design):
        raise BundleFolderError(f"{build_dir / MANIFEST_FILE} records another training set-up than the design "
                                "file: rebuild it (codesign build) or bundle without --build")
    missing = [ip["name"] for ip in manifest["ips"] if not (build_dir / ip.get("hls_project", "")).is_dir()]
    if missing:
        raise BundleFolderError(f"{build_dir} lacks the HLS projects of {', '.join(missing)} (hls/<ip>/)")
    _check_projects(design, build_dir, manifest)
    _check_bitstream(build_dir, manifest["design"])
    return manifest


BIT_HEADER = bytes.fromhex("00090ff00ff00ff00ff0000001")  # a Xilinx .bit file's first 13 bytes (its field lengths)


def _check_projects(design: DesignPoint, build_dir: Path, manifest: dict) -> None:
    """Every IP's spec and HLS project in the build folder are what ``design`` renders now, byte for byte: the
    emulated board compiles these files and the board runs them, so an edited or stale file is refused."""
    rendered_manifest, projects = render_ip_projects(design)
    specs = {ip["name"]: (ip["pe"], ip["spec"]) for ip in rendered_manifest["ips"]}
    for ip in manifest["ips"]:
        if specs.get(ip["name"]) != (ip["pe"], ip["spec"]):
            raise BundleFolderError(f"{build_dir / MANIFEST_FILE}: IP {ip['name']} is {ip['pe']} {ip['spec']}, not "
                                    f"what design {design.name} derives: rebuild it (codesign build)")
        for rel, data in projects[ip["hls_project"]].files.items():
            path = build_dir / ip["hls_project"] / rel
            if not path.is_file() or path.read_bytes() != data:
                state = "missing" if not path.is_file() else f"differs from what design {design.name} renders"
                raise BundleFolderError(f"{path}: {state} (edited by hand, or written by another codesign): rebuild "
                                        "it (codesign build)")


def _check_bitstream(build_dir: Path, design_name: str) -> None:
    """A build's ``.bit`` and ``.hwh`` come together, and each is what it claims: a Xilinx bitstream (its header)
    and the hardware hand-off's XML (root ``EDKSYSTEM``)."""
    import xml.etree.ElementTree as ElementTree

    bit, hwh = (build_dir / f"{design_name}.{suffix}" for suffix in ("bit", "hwh"))
    if bit.is_file() != hwh.is_file():
        have, lack = (bit, hwh) if bit.is_file() else (hwh, bit)
        raise BundleFolderError(f"{have} has no {lack.name} beside it: a board needs both (rebuild, or remove it)")
    if not bit.is_file():
        return
    with open(bit, "rb") as stream:
        header = stream.read(len(BIT_HEADER) + 1)
    if header != BIT_HEADER + b"a":
        raise BundleFolderError(f"{bit}: not a Xilinx bitstream (its header is not a .bit file's): rebuild it")
    try:
        root = ElementTree.parse(hwh).getroot()
    except (ElementTree.ParseError, OSError) as error:
        raise BundleFolderError(f"{hwh}: not a hardware hand-off file (not XML: {error})") from None
    if root.tag != "EDKSYSTEM":
        raise BundleFolderError(f"{hwh}: not a hardware hand-off file (its root is <{root.tag}>, not <EDKSYSTEM>)")


def _dataset(design: DesignPoint):
    """The configuration's data split; with a validation split when the loop's FB rule reads one."""
    from codesign.train.trainer import load_dataset

    config = design.training
    entry = loop_entry(design)
    if entry is not None and get_family(entry["family"]).reads_validation(entry["setup"]) \
            and not config.data.validation_fraction:
        raise BundleFolderError(f"design {design.name!r}: its {get_family(entry['family']).title} loop reads a "
                                "validation split; set [data] validation_fraction in the design file")
    return load_dataset(config)


def notebook(name: str, design: DesignPoint) -> dict:
    """The bundle's notebook (nbformat 4) for bundle ``name``: open the overlay, train through the IP, report."""
    def markdown(text):
        return {"cell_type": "markdown", "metadata": {}, "source": text}

    def code(text):
        return {"cell_type": "code", "metadata": {}, "execution_count": None, "outputs": [], "source": text}

    cells = [
        markdown(f"# Train {design.name} on the {design.board.display_name}\n\n"
                 "Every file comes from the installed bundle. On a PYNQ board the overlay is the bundle's "
                 "bitstream (a bundle without one is refused); off a board the emulated board runs the "
                 "generated HLS C++ of each IP. Either way the host runs the golden loop's own code, so the "
                 "weights equal the golden run's bit for bit."),
        code("import os\n\n"
             "from codesign.deploy import CodesignOverlay, board_attached\n"
             "from codesign.deploy.bundle import installed_bundle\n"
             "from codesign.deploy.families import board_trainer, family_of\n\n"
             f"bundle = installed_bundle({name!r})\n"
             "bundle.check_board()  # a bundle for another board is refused here\n"
             "EMULATE = not board_attached()\n"
             "QUICK = os.environ.get('CODESIGN_NOTEBOOK_QUICK') == '1'  # two short epochs: the whole path, quickly\n"
             "print(bundle.name, 'for', bundle.manifest['board'], '| bitstream:', bundle.built, '| emulated:', EMULATE)"),
        code("overlay = CodesignOverlay(bundle.build_dir, emulate=EMULATE)\nprint(overlay.describe())"),
        code("family = family_of(overlay.manifest)\n"
             "changes, max_steps = (family.quick_changes, 3) if QUICK else ({}, None)\n"
             "trainer = board_trainer(overlay, **changes)\n"
             "history = trainer.fit(bundle.data(), progress=not QUICK, max_steps=max_steps)\n"
             "for row in history:\n"
             "    print(f\"epoch {row['epoch']}: loss {row['loss']:.3f}, test accuracy {row['accuracy']:.3f}, \"\n"
             "          f\"{row['seconds']:.1f} s\")"),
        code("for key, value in sorted(trainer.throughput().items()):\n"
             "    print(f'{key}: {value}')\n"
             "try:\n"
             "    import matplotlib.pyplot as plt\n"
             "except ImportError:  # an image without matplotlib: the table above is the result\n"
             "    plt = None\n"
             "if plt is not None:\n"
             "    plt.plot([row['epoch'] for row in history], [row['accuracy'] for row in history], marker='o')\n"
             "    plt.xlabel('epoch'); plt.ylabel('test accuracy'); plt.title(bundle.name); plt.show()"),
    ]
    return {"cells": cells, "metadata": {"kernelspec": {"display_name": "Python 3", "language": "python",
                                                        "name": "python3"}},
            "nbformat": 4, "nbformat_minor": 5}


def pyproject(design: DesignPoint) -> str:
    name, package = bundle_name(design), package_name(design)
    return f'''[build-system]
requires = ["hatchling>=1.25"]
build-backend = "hatchling.build"

[project]
name = "{package.replace("_", "-")}"
version = "{codesign.__version__}"
description = "The codesign overlay of design {design.name} for the {design.board.display_name}"
requires-python = ">=3.8"
dependencies = ["codesign>={codesign.__version__}"]

[project.entry-points."{BUNDLE_GROUP}"]
"{name}" = "{package}"

[project.entry-points."pynq.notebooks"]
"{name}" = "{package}.notebooks"

[tool.hatch.build.targets.wheel]
packages = ["{package}"]
'''


def _write_package(design: DesignPoint, root: Path, build_dir: Path | None) -> bool:
    package = root / package_name(design)
    overlay = package / "overlay"
    if build_dir is not None:
        manifest = _check_build(design, build_dir)
        overlay.mkdir(parents=True)
        shutil.copy2(build_dir / MANIFEST_FILE, overlay / MANIFEST_FILE)
        for ip in manifest["ips"]:
            shutil.copytree(build_dir / ip["hls_project"], overlay / ip["hls_project"])
        for suffix in ("bit", "hwh"):
            source = build_dir / f"{manifest['design']}.{suffix}"
            if source.is_file():
                shutil.copy2(source, overlay / source.name)
        built = all((overlay / f"{manifest['design']}.{s}").is_file() for s in ("bit", "hwh"))
    else:
        manifest, projects = render_ip_projects(design)
        write_ip_projects(overlay, manifest, projects)
        built = False
    from codesign.loops.data import save_npz

    (package / "data").mkdir()
    data_name = f"{design.training.data.name}.npz"
    save_npz(_dataset(design), package / "data" / data_name)
    (package / "notebooks").mkdir()
    (package / "notebooks" / "__init__.py").write_text(
        '"""The notebooks of this bundle; ``pynq get-notebooks`` copies them (no board lookup needed)."""\n\n'
        "from codesign.deploy.bundle import deliver_notebooks  # noqa: F401 (PYNQ's delivery hook)\n")
    (package / "notebooks" / NOTEBOOK).write_text(json.dumps(notebook(bundle_name(design), design), indent=1) + "\n")
    (package / "__init__.py").write_text(
        f'"""The codesign overlay of design {design.name} for the {design.board.display_name}: '
        'codesign.deploy.bundle.installed_bundle(name) finds its files."""\n')
    info = {"name": bundle_name(design), "board": design.board.name, "design": design.name, "data": data_name,
            "notebooks": [NOTEBOOK], "codesign": codesign.__version__, "built": built}
    (package / BUNDLE_INFO).write_text(json.dumps(info, indent=2) + "\n")
    (root / "pyproject.toml").write_text(pyproject(design))
    (root / MARKER).write_text(json.dumps(info, indent=2) + "\n")
    return built


def _wheel(source: Path, dist: Path, what: str) -> Path | None:
    """The wheel of the project at ``source``, built into ``dist`` with the desktop's build and hatchling (None
    when either is missing)."""
    try:
        import build  # noqa: F401
        import hatchling  # noqa: F401
    except ImportError:
        return None
    before = set(dist.glob("*.whl"))
    done = subprocess.run([sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(dist),
                           str(source)], capture_output=True, text=True)
    if done.returncode != 0:
        raise BundleFolderError(f"building {what}'s wheel failed:\n{done.stderr[-3000:]}")
    return next(iter(set(dist.glob("*.whl")) - before))


def write_bundle(design: DesignPoint, out_dir: Path, *, build_dir: Path | None = None) -> BundleResult:
    """Write the bundle of ``design`` into ``out_dir`` (missing, empty, or an earlier bundle); see the module text."""
    out_dir = Path(out_dir)
    check_bundle_dir(out_dir)
    if build_dir is not None:
        _check_build(design, Path(build_dir))
    parent = out_dir.resolve().parent
    created = [folder for folder in (parent, *parent.parents) if not folder.exists()]  # deepest first
    parent.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.", dir=parent))
    try:
        built = _write_package(design, scratch, None if build_dir is None else Path(build_dir))
        _wheel(scratch, scratch / "dist", "the bundle")
        source = source_tree()
        if source is not None:  # the runtime too, as `make wheel` builds it: the board needs no index
            _wheel(source, scratch / "dist", "codesign")
        if out_dir.exists():
            old = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.old.", dir=out_dir.resolve().parent))
            os.replace(out_dir, old / "bundle")
            os.replace(scratch, out_dir)
            shutil.rmtree(old)
        else:
            os.replace(scratch, out_dir)
    finally:
        if scratch.exists():
            shutil.rmtree(scratch)
        if not out_dir.exists():  # failed: the parents made for the scratch folder go again
            for folder in created:
                try:
                    folder.rmdir()
                except OSError:
                    break
    runtime = sorted((out_dir / "dist").glob(f"codesign-{codesign.__version__}-*.whl"))
    wheels = sorted(set((out_dir / "dist").glob("*.whl")) - set(runtime))
    return BundleResult(out_dir=out_dir, name=bundle_name(design), package=package_name(design),
                        wheel=wheels[0] if wheels else None, built=built, runtime_wheel=runtime[0] if runtime else None)


def example_bundle(example: str, out_dir: Path | None = None, *, board_name: str | None = None) -> Path:
    """The bundle folder of the shipped example ``example`` (``"digits_abvs.toml"``), written into ``out_dir`` (a
    new temporary folder when None) for its board or ``board_name``: what a repository notebook opens on a desktop
    when no ``CODESIGN_BUNDLE`` names one (a board has no desktop to write it)."""
    from codesign.design import load_design
    from codesign.resources import data_dir

    design = load_design(data_dir("examples") / example, board_name=board_name)
    out_dir = Path(tempfile.mkdtemp(prefix="codesign_bundle_")) / bundle_name(design) if out_dir is None else out_dir
    return write_bundle(design, out_dir).out_dir
