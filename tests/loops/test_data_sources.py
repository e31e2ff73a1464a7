"""The user's own data file: each layout read into the same splits, every bad file refused naming the file and the
field, before a run writes anything (through ``codesign train`` too); padding as paper 003 pads."""

from __future__ import annotations

import numpy as np
import pytest

from codesign.loops.data import DataFileError, save_npz
from codesign.loops.data_sources import file_arrays, pad_images
from codesign.train.config import DataConfig, TrainConfig, config_from_dict, load_config
from codesign.train.geometry import data_geometry

SPLIT = dict(test_fraction=0.25, split_seed=0, validation_fraction=0.0)


def _samples(n: int = 60, shape=(6, 6), classes: int = 3, seed: int = 0):
    rng = np.random.default_rng(seed)
    return rng.integers(0, 256, (n, *shape)).astype(np.uint8), np.arange(n) % classes


def test_x_and_y_are_split_stratified_and_grey_levels_scaled(tmp_path):
    x, y = _samples()
    np.savez(tmp_path / "d.npz", x=x, y=y)
    data = file_arrays(tmp_path / "d.npz", **SPLIT)
    assert data.classes == 3 and data.train_x.shape[1:] == (1, 6, 6) and data.train_x.dtype == np.float32
    assert np.bincount(data.test_y).tolist() == [5, 5, 5] and data.train_size == 45
    every = np.concatenate([data.train_x, data.test_x]).reshape(60, -1)
    assert sorted(map(tuple, every * 255)) == sorted(map(tuple, x.reshape(60, -1).astype(np.float32)))
    held = file_arrays(tmp_path / "d.npz", test_fraction=0.25, split_seed=0, validation_fraction=0.2)
    assert np.array_equal(held.test_y, data.test_y) and held.validation_y.size == 9  # test cut first


def test_a_split_array_and_the_bundle_layout_give_the_named_splits(tmp_path):
    x, _ = _samples()
    y = np.arange(60) // 3 % 3  # every class in every split
    split = np.array(["train", "validation", "test"] * 20)
    np.savez(tmp_path / "named.npz", x=x, y=y, split=split)
    np.savez(tmp_path / "coded.npz", x=x, y=y, split=np.array([0, 1, 2] * 20))
    for name in ("named", "coded"):
        data = file_arrays(tmp_path / f"{name}.npz", **SPLIT)
        assert np.array_equal(data.validation_x * 255, x[1::3, None].astype(np.float32))
        assert np.array_equal(data.test_y, y[2::3])
    first = file_arrays(tmp_path / "named.npz", **SPLIT)
    again = file_arrays(save_npz(first, tmp_path / "bundle.npz"), **SPLIT)
    for field in ("train_x", "train_y", "validation_x", "validation_y", "test_x", "test_y"):
        assert np.array_equal(getattr(first, field), getattr(again, field))


def test_a_csv_with_a_label_column_is_rows_of_features(tmp_path):
    rows = ["f0,label,f1"] + [f"{k / 10},{k % 2},{-k}" for k in range(20)]
    (tmp_path / "d.csv").write_text("\n".join(rows) + "\n")
    data = file_arrays(tmp_path / "d.csv", **SPLIT)
    assert data.classes == 2 and data.train_x.shape == (16, 2) and data.train_x.dtype == np.float32
    both = np.concatenate([data.train_x, data.test_x])
    assert sorted(both[:, 1].tolist()) == sorted(float(-k) for k in range(20))


def _npz(tmp_path, name="bad.npz", **arrays):
    path = tmp_path / name
    np.savez(path, **arrays)
    return path


BAD_FILES = {
    "float labels": (lambda t: _npz(t, x=np.zeros((8, 4)), y=np.arange(8.0) % 2), "y: labels must be integers"),
    "negative label": (lambda t: _npz(t, x=np.zeros((8, 4)), y=np.arange(8) - 1), "negative label"),
    "one label per sample": (lambda t: _npz(t, x=np.zeros((8, 4)), y=np.arange(7) % 2), "one label per sample"),
    "not finite": (lambda t: _npz(t, x=np.full((8, 4), np.nan), y=np.arange(8) % 2), "x: holds values that are not"),
    "int16 features": (lambda t: _npz(t, x=np.zeros((8, 4), np.int16), y=np.arange(8) % 2), "ambiguous"),
    "strings": (lambda t: _npz(t, x=np.array([["a"]] * 8), y=np.arange(8) % 2), "x: must be numbers"),
    "one class": (lambda t: _npz(t, x=np.zeros((8, 4)), y=np.zeros(8, np.int64)), "1 classes"),
    "no x": (lambda t: _npz(t, z=np.zeros(3)), "holds neither x and y"),
    "a class only in test": (lambda t: _npz(t, x=np.zeros((6, 2)), y=np.array([0, 1, 0, 1, 2, 2]),
                                            split=np.array([0, 0, 2, 2, 2, 2])),
                             "class(es) 2 of 0..2 have no training sample"),
    "classes below the labels": (lambda t: _npz(t, x=np.zeros((8, 2)), y=np.arange(8) % 4, classes=np.array(2)),
                                 "classes: must be one integer in [4"),
    "a bad split": (lambda t: _npz(t, x=np.zeros((3, 2)), y=np.arange(3), split=np.array(["train", "tst", "test"])),
                    "split: entry 1 is 'tst'"),
    "an empty test split": (lambda t: _npz(t, x=np.zeros((4, 2)), y=np.arange(4) % 2, split=np.zeros(4, int)),
                            "the test split is empty"),
    "splits of two shapes": (lambda t: _npz(t, train_x=np.zeros((4, 2)), train_y=np.arange(4) % 2,
                                            test_x=np.zeros((2, 3)), test_y=np.arange(2)), "differ in shape"),
    "a pickle": (lambda t: _npz(t, x=np.array([object()] * 4), y=np.arange(4) % 2), "not a readable .npz"),
    "not a zip": (lambda t: (t / "bad.npz").write_bytes(b"PK\x03\x04 truncated") and t / "bad.npz", "not a readable"),
    "a .npy": (lambda t: (np.save(t / "bad.npy", np.zeros(3)), t / "bad.npy")[1], "must name a .npz or .csv"),
    "a csv without label": (lambda t: (t / "bad.csv").write_text("a,b\n1,2\n") and t / "bad.csv", "'label' column"),
    "a csv with text": (lambda t: (t / "bad.csv").write_text("a,label\n1,0\nx,1\n") and t / "bad.csv", "bad.csv"),
    "a csv with a fractional label": (lambda t: (t / "bad.csv").write_text("a,label\n1,0.5\n2,1\n") and t / "bad.csv",
                                      "label: holds values that are not integers"),
    "a ragged csv": (lambda t: (t / "bad.csv").write_text("a,label\n1,0\n2\n") and t / "bad.csv", "bad.csv"),
    "a folder": (lambda t: (t / "bad.npz").mkdir() or t / "bad.npz", "not a regular file"),
    "missing": (lambda t: t / "missing.npz", "no such data file"),
}


@pytest.mark.parametrize("case", sorted(BAD_FILES))
def test_a_bad_file_is_refused_naming_the_file_and_the_field(tmp_path, case):
    make, message = BAD_FILES[case]
    path = make(tmp_path)
    with pytest.raises(DataFileError, match=None) as caught:
        file_arrays(path, **SPLIT)
    assert str(path) in str(caught.value) and message in str(caught.value), str(caught.value)


@pytest.mark.parametrize("case", ["float labels", "a class only in test", "a csv with text", "missing", "a folder"])
def test_codesign_train_refuses_a_bad_file_before_writing(tmp_path, capsys, case):
    from tests.test_bad_input import refused

    path = BAD_FILES[case][0](tmp_path)
    config = tmp_path / "run.toml"
    config.write_text(f'[data]\npath = "{path.name}"\n[model]\nname = "mlp"\nhidden = [4]\n[optim]\nepochs = 1\n')
    refused(capsys, ["train", str(config), "--out", str(tmp_path / "out")], (str(path),), tmp_path / "out",
            root=tmp_path)


def test_a_relative_path_is_the_config_files_and_geometry_follows_the_file(tmp_path):
    x, y = _samples(shape=(5, 7), classes=4)
    np.savez(tmp_path / "d.npz", x=x, y=y)
    (tmp_path / "run.toml").write_text('[data]\npath = "d.npz"\npad_to = 9\n[model]\nname = "mlp"\n')
    config = load_config(tmp_path / "run.toml")
    assert config.data.name == "file" and config.data.path == str(tmp_path / "d.npz")
    geometry = data_geometry(config.data)
    assert (geometry.sample_shape, geometry.classes, geometry.samples) == ((1, 9, 9), 4, 60)


@pytest.mark.parametrize("data, field", [
    ({"name": "digits", "path": "d.npz"}, "data.path"),
    ({"name": "file"}, "data.path"),
    ({"name": "fashion-mnist", "test_fraction": 0.2}, "data.test_fraction"),
    ({"name": "digits", "pad_to": 32}, "data.pad_to"),
    ({"name": "mnist", "pad_to": 2000}, "data.pad_to"),
])
def test_data_fields_that_contradict_each_other_are_refused_by_name(data, field):
    with pytest.raises(ValueError, match=field.replace(".", r"\.")):
        config_from_dict({"data": data, "model": {"name": "mlp"}})


def test_padding_centres_the_images_and_refuses_what_it_cannot_pad():
    x = np.arange(2 * 28 * 28, dtype=np.float32).reshape(2, 1, 28, 28)
    padded = pad_images(x, 32, "here")
    assert padded.shape == (2, 1, 32, 32) and np.array_equal(padded[:, :, 2:30, 2:30], x)
    assert padded.sum() == x.sum() and padded[:, :, :2].sum() == 0 and padded[:, :, :, 30:].sum() == 0
    assert pad_images(x, 0, "here") is x
    with pytest.raises(DataFileError, match="smaller than the 28 x 28"):
        pad_images(x, 27, "here")
    with pytest.raises(DataFileError, match="rows of"):
        pad_images(np.zeros((2, 5), np.float32), 8, "here")


def test_a_resnet_on_rows_of_features_is_refused_by_name(tmp_path):
    from codesign.train.models import build_model

    with pytest.raises(ValueError, match="model.name = 'resnet' takes images"):
        build_model("resnet", sample_shape=(12,))
    assert isinstance(TrainConfig(data=DataConfig(name="file", path="x.npz")), TrainConfig)
