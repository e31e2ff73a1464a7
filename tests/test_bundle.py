"""codesign bundle: the package's contents and entry points, and the refusals that leave nothing behind."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pytest

import codesign

from codesign.bundle import MARKER, BundleFolderError, write_bundle
from codesign.cli import main
from codesign.deploy.bundle import Bundle, BundleError
from codesign.design import load_design
from codesign.design.build import write_emulation_folder
from codesign.loops.data import load_npz

pytestmark = pytest.mark.slow

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


@pytest.fixture(scope="module")
def bundle(tmp_path_factory):
    return write_bundle(load_design(EXAMPLES / "digits_abvs.toml"), tmp_path_factory.mktemp("b") / "abvs")


def test_the_wheel_holds_the_overlay_data_notebook_and_both_entry_points(bundle):
    assert bundle.name == "digits_abvs-zedboard" and not bundle.built
    names = zipfile.ZipFile(bundle.wheel).namelist()
    package = bundle.package
    for member in ("overlay/design.json", "data/digits.npz", "notebooks/train_on_board.ipynb", "bundle.json"):
        assert f"{package}/{member}" in names
    assert any(name.startswith(f"{package}/overlay/hls/fpmac_array_0/") for name in names)
    entry_points = zipfile.ZipFile(bundle.wheel).read(next(n for n in names if n.endswith("entry_points.txt")))
    text = entry_points.decode()
    assert "[pynq.notebooks]" in text and f"{bundle.name} = {package}.notebooks" in text
    assert "[codesign.bundles]" in text and f"{bundle.name} = {package}" in text
    metadata = zipfile.ZipFile(bundle.wheel).read(next(n for n in names if n.endswith("METADATA"))).decode()
    requires = [line for line in metadata.splitlines() if line.startswith("Requires-Dist:")]
    assert requires == ["Requires-Dist: codesign>=0.1.0"]  # the runtime only


def test_the_bundle_carries_the_runtime_wheel_whose_only_dependency_is_numpy(bundle):
    """The board installs both wheels from the bundle's dist/ with no index: codesign's own is there."""
    runtime = bundle.runtime_wheel
    assert runtime is not None and runtime.parent == bundle.out_dir / "dist"
    assert runtime.name == f"codesign-{codesign.__version__}-py3-none-any.whl"
    names = zipfile.ZipFile(runtime).namelist()
    assert "codesign/deploy/selfcheck.py" in names and "codesign/loops/npm_data.py" in names
    metadata = zipfile.ZipFile(runtime).read(next(n for n in names if n.endswith("METADATA"))).decode()
    core = [line for line in metadata.splitlines() if line.startswith("Requires-Dist:") and "extra ==" not in line]
    assert core == ["Requires-Dist: numpy>=1.21"]


def test_the_package_reads_back_as_a_bundle(bundle):
    found = Bundle(bundle.out_dir / bundle.package)
    assert found.manifest["loop"]["family"] == "fpmac_array"
    data = found.data()
    assert data.has_validation and data.train_size == load_npz(found.data_file).train_size
    found.check_board({"BOARD": "ZedBoard"})
    found.check_board({})
    with pytest.raises(BundleError, match=r"made for the zedboard.*BOARD=Ultra96V2"):
        found.check_board({"BOARD": "Ultra96V2"})


def test_a_second_bundle_replaces_the_first_whole_but_never_a_users_file(bundle, tmp_path):
    out = tmp_path / "again"
    first = write_bundle(load_design(EXAMPLES / "digits_abvs.toml"), out)
    second = write_bundle(load_design(EXAMPLES / "digits_abvs.toml"), out)
    assert second.wheel.name == first.wheel.name
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no scratch folder left
    (out / "stray.txt").write_text("left by hand")
    with pytest.raises(BundleFolderError, match="also stray.txt, which codesign bundle did not write"):
        write_bundle(load_design(EXAMPLES / "digits_abvs.toml"), out)
    assert (out / "stray.txt").read_text() == "left by hand"
    link = tmp_path / "link"
    link.symlink_to(out)
    with pytest.raises(BundleFolderError, match="is a symbolic link"):
        write_bundle(load_design(EXAMPLES / "digits_abvs.toml"), link)
    assert link.is_symlink()


def _build_copy(tmp_path: Path, name: str = "build") -> Path:
    return write_emulation_folder(load_design(EXAMPLES / "digits_abvs.toml"), tmp_path / name)


@pytest.mark.parametrize("break_it, message", [
    (lambda b: (b / "digits_abvs.bit").write_text("not a bit"), "has no digits_abvs.hwh beside it"),
    (lambda b: ((b / "digits_abvs.bit").write_text("8 bytes!"), (b / "digits_abvs.hwh").write_text("<EDKSYSTEM/>")),
     "not a Xilinx bitstream"),
    (lambda b: ((b / "digits_abvs.bit").write_bytes(bytes.fromhex("00090ff00ff00ff00ff0000001") + b"a"),
                (b / "digits_abvs.hwh").write_text("no xml")), "not a hardware hand-off file"),
    (lambda b: next((b / "hls" / "fpmac_array_0").rglob("*.cpp")).write_text("text"), "differs from what design"),
    (lambda b: next((b / "hls" / "fpmac_array_0").rglob("*.h")).unlink(), "missing"),
])
def test_a_build_folder_whose_artefacts_are_not_what_they_claim_is_refused(tmp_path, break_it, message):
    build = _build_copy(tmp_path)
    break_it(build)
    with pytest.raises(BundleFolderError, match=message):
        write_bundle(load_design(EXAMPLES / "digits_abvs.toml"), tmp_path / "b", build_dir=build)
    assert not (tmp_path / "b").exists()


def test_a_build_with_a_real_looking_bitstream_is_bundled_as_built(tmp_path):
    build = _build_copy(tmp_path)
    (build / "digits_abvs.bit").write_bytes(bytes.fromhex("00090ff00ff00ff00ff0000001") + b"a" + b"\0" * 64)
    (build / "digits_abvs.hwh").write_text('<?xml version="1.0"?>\n<EDKSYSTEM EDWVERSION="1.2"/>\n')
    assert write_bundle(load_design(EXAMPLES / "digits_abvs.toml"), tmp_path / "b", build_dir=build).built


def test_refusals_write_nothing(tmp_path, capsys):
    design = load_design(EXAMPLES / "digits_abvs.toml")
    users = tmp_path / "users"
    users.mkdir()
    (users / "notes.txt").write_text("mine")
    with pytest.raises(BundleFolderError, match="not empty and holds no codesign_bundle.json"):
        write_bundle(design, users)
    assert [p.name for p in users.iterdir()] == ["notes.txt"]
    other = write_emulation_folder(load_design(EXAMPLES / "digits_compressed_mlp.toml"), tmp_path / "other")
    with pytest.raises(BundleFolderError, match="digits_compressed_mlp"):
        write_bundle(design, tmp_path / "b", build_dir=other)
    assert not (tmp_path / "b").exists()
    assert main(["bundle", str(EXAMPLES / "digits_abvs.toml"), "--out", str(users)]) == 2
    assert "holds no" in capsys.readouterr().err and not (users / MARKER).exists()


def test_the_notebook_names_its_bundle_and_reads_nothing_from_the_working_directory(bundle):
    cells = json.loads((bundle.out_dir / bundle.package / "notebooks" / "train_on_board.ipynb").read_text())["cells"]
    code = "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "code")
    assert f"installed_bundle({bundle.name!r})" in code and "check_board()" in code
    assert "cwd" not in code and "Path(" not in code and "examples" not in code
