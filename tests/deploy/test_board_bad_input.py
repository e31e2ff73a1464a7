"""Bad input on the board side: the self-check (and so every board trainer and the notebooks, which build their
set-ups and read their data the same way) refuses a bad design.json, a bad loop set-up or a bad data file in one
line that names the file or the field, with status 2, before any step runs; nothing is allocated from an unbounded
size."""

from __future__ import annotations

import copy
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from codesign.deploy.selfcheck import main as selfcheck
from codesign.design import load_design
from codesign.design.build import write_emulation_folder
from codesign.loops.data import save_npz
from codesign.train.trainer import load_dataset

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.fixture(scope="module")
def board(tmp_path_factory):
    """An FB-float, a CSB conv and a TT build folder (emulated) and the digits data, as a bundle holds them."""
    root = tmp_path_factory.mktemp("board")
    designs = {name: load_design(EXAMPLES / f"{name}.toml")
               for name in ("digits_abvs", "digits_compressed_conv", "digits_tt")}
    folders = {name: write_emulation_folder(design, root / name) for name, design in designs.items()}
    data = save_npz(load_dataset(designs["digits_abvs"].training), root / "digits.npz")
    return folders, data


def _variant(tmp_path: Path, folder: Path, mutate) -> Path:
    copy_dir = tmp_path / "build"
    shutil.copytree(folder, copy_dir)
    manifest = json.loads((folder / "design.json").read_text())
    mutate(manifest)
    (copy_dir / "design.json").write_text(json.dumps(manifest))
    return copy_dir


def _set(*path, value):
    def mutate(manifest):
        target = manifest
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value
    return mutate


def _buffers(manifest):
    for buffer in manifest["ips"][0]["buffers"].values():
        buffer["max_words"] = 2**38


MANIFEST_CASES = {
    "base_address 2^64": ("digits_abvs", _set("ips", 0, "base_address", value=2**64), "below 2^32"),
    "address_range past the PS": ("digits_tt", _set("ips", 0, "address_range", value=2**40), "must end below 2^32"),
    "ddr_mib 2^40": ("digits_abvs", _set("board_facts", "ddr_mib", value=2**40), "board_facts.ddr_mib"),
    "a 1 TiB buffer": ("digits_abvs", _buffers, "max_words in [0, 134217728]"),
    "batch_size 10^9": ("digits_abvs", _set("loop", "setup", "batch_size", value=10**9), "batch_size must be"),
    "epochs -1 (a change would replace it)": ("digits_abvs", _set("loop", "setup", "epochs", value=-1),
                                               "loop.setup: epochs must be"),
    "lr a string": ("digits_abvs", _set("loop", "setup", "lr", value="x"), "lr must be a finite number"),
    "lr NaN": ("digits_tt", _set("loop", "setup", "lr", value=float("nan")), "lr must be"),
    "a 10^8-wide layer": ("digits_abvs", _set("loop", "setup", "layers", value=[64, 10**8, 10]), "layers must be"),
    "seed -5": ("digits_tt", _set("loop", "setup", "seed", value=-5), "seed must be"),
    "momentum 5": ("digits_abvs", _set("loop", "setup", "momentum", value=5), "momentum must be"),
    "fb_min 99": ("digits_abvs", _set("loop", "setup", "fb_min", value=99), "FB range 99..9"),
    "an unknown set-up field": ("digits_tt", _set("loop", "setup", "learning_rate", value=1), "unknown field"),
    "a TT layer table of a string": ("digits_tt", _set("loop", "setup", "layers", value="abc"), "loop.setup"),
    "no loop": ("digits_abvs", lambda manifest: manifest.pop("loop"), "records no loop"),
    "a conv image of a string": ("digits_compressed_conv", _set("loop", "setup", "image", value="abc"),
                                 "image, convs and blocks lists of values"),
    "a 10^9-wide conv image": ("digits_compressed_conv", _set("loop", "setup", "image", value=[1, 10**9, 8]),
                               "image (1, 1000000000, 8) must be"),
    "a conv of stride 3": ("digits_compressed_conv", _set("loop", "setup", "convs", value=[[16, 3]]),
                           "stride 1 or 2"),
    "10^9 conv classes": ("digits_compressed_conv", _set("loop", "setup", "classes", value=10**9),
                          "classes 1000000000 must be"),
    "a loop spec that is not the IP's": ("digits_compressed_conv",
                                         _set("loop", "setup", "spec", "parallel", value=4),
                                         "loop.setup.spec differs from IP csb_0's spec in ['parallel']"),
    "a conv loop without its convs": ("digits_compressed_conv", lambda manifest: manifest["loop"]["setup"].pop("convs"),
                                      "lacks ['convs']"),
}


@pytest.mark.parametrize("case", sorted(MANIFEST_CASES))
def test_a_bad_design_json_is_refused_naming_the_field(board, tmp_path, capsys, case):
    folders, data = board
    design, mutate, message = MANIFEST_CASES[case]
    build = _variant(tmp_path, folders[design], mutate)
    assert selfcheck([str(build), str(data), "--emulate", "--steps", "1"]) == 2
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and message in err and "Traceback" not in err, err


def _data(tmp_path: Path, data: Path, **changes) -> Path:
    arrays = dict(np.load(data))
    arrays.update(changes)
    arrays = {key: value for key, value in arrays.items() if value is not None}
    path = tmp_path / "bad.npz"
    np.savez(path, **arrays)
    return path


DATA_CASES = {
    "samples of another width": (lambda t, d: _data(t, d, train_x=np.zeros((10, 1, 9, 9), np.float32),
                                                    train_y=np.zeros(10, np.int64)), "samples of 64 values"),
    "an empty training split": (lambda t, d: _data(t, d, train_x=np.zeros((0, 1, 8, 8), np.float32),
                                                   train_y=np.zeros(0, np.int64)), "the train split is empty"),
    "labels past the classes": (lambda t, d: _data(t, d, train_y=np.full(1078, 10)), "labels must lie in 0..9"),
    "float labels": (lambda t, d: _data(t, d, train_y=np.zeros(1078)), "one integer label per sample"),
    "10^9 classes": (lambda t, d: _data(t, d, classes=np.array(10**9)), "data.classes is 1000000000"),
    "integer samples": (lambda t, d: _data(t, d, train_x=np.zeros((1078, 1, 8, 8), np.int64)), "float samples"),
    "no validation split for ABVS": (lambda t, d: _data(t, d, validation_x=None, validation_y=None),
                                     "reads validation accuracy"),
    "a .npy": (lambda t, d: (np.save(t / "a.npy", np.zeros(3)), t / "a.npy")[1], "one (3,) array (.npy)"),
    "a folder": (lambda t, d: t, "a folder, not a .npz data file"),
}


@pytest.mark.parametrize("case", sorted(DATA_CASES))
def test_a_bad_data_file_is_refused_before_a_step(board, tmp_path, capsys, case):
    folders, data = board
    make, message = DATA_CASES[case]
    assert selfcheck([str(folders["digits_abvs"]), str(make(tmp_path, data)), "--emulate", "--steps", "1"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: ") and message in err and "Traceback" not in err, err


def test_the_unchanged_folder_and_data_pass(board, capsys):
    folders, data = board
    assert selfcheck([str(folders["digits_abvs"]), str(data), "--emulate", "--steps", "1"]) == 0
    report = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert report["differ"] == 0 and report["compared"] > 0
    pristine = copy.deepcopy(json.loads((folders["digits_abvs"] / "design.json").read_text()))
    assert pristine["loop"]["setup"]["batch_size"] == 64
