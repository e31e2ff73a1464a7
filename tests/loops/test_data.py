"""Data sets as .npz files: a round trip keeps every array and dtype; a missing, corrupt or foreign file is refused by name."""

from __future__ import annotations

import numpy as np
import pytest

from codesign.loops.data import ArrayDataset, DataFileError, load_npz, save_npz


def _data(validation: bool = True) -> ArrayDataset:
    rng = np.random.default_rng(0)
    x = lambda n: rng.random((n, 1, 8, 8)).astype(np.float32)  # noqa: E731
    y = lambda n: rng.integers(0, 10, n).astype(np.int64)  # noqa: E731
    extra = {"validation_x": x(5), "validation_y": y(5)} if validation else {}
    return ArrayDataset(train_x=x(20), train_y=y(20), test_x=x(7), test_y=y(7), classes=10, **extra)


@pytest.mark.parametrize("validation", [True, False])
def test_round_trip_is_exact(tmp_path, validation):
    data = _data(validation)
    back = load_npz(save_npz(data, tmp_path / "d.npz"))
    assert back.has_validation == validation and back.classes == 10
    for name in ("train_x", "train_y", "test_x", "test_y", *(("validation_x", "validation_y") if validation else ())):
        mine, theirs = getattr(data, name), getattr(back, name)
        assert theirs.dtype == mine.dtype and np.array_equal(theirs, mine)
    assert [p.name for p in tmp_path.iterdir()] == ["d.npz"]


def test_bad_files_are_refused_by_name(tmp_path):
    with pytest.raises(DataFileError, match="missing.npz: no such data file"):
        load_npz(tmp_path / "missing.npz")
    corrupt = tmp_path / "corrupt.npz"
    corrupt.write_bytes(save_npz(_data(), tmp_path / "good.npz").read_bytes()[:100])
    with pytest.raises(DataFileError, match="corrupt.npz: not a readable .npz file"):
        load_npz(corrupt)
    foreign = tmp_path / "foreign.npz"
    np.savez(foreign, x=np.zeros(3))
    with pytest.raises(DataFileError, match="foreign.npz: not a codesign data set"):
        load_npz(foreign)
    wrong = tmp_path / "wrong.npz"
    np.savez(wrong, format=np.array(1), classes=np.array(3), train_x=np.zeros((4, 2)), train_y=np.arange(4),
             test_x=np.zeros((1, 2)), test_y=np.zeros(1, dtype=np.int64))
    with pytest.raises(DataFileError, match="wrong.npz: train: labels must lie in 0..2"):
        load_npz(wrong)
    pickled = tmp_path / "pickled.npz"
    np.savez(pickled, format=np.array(1), classes=np.array(10), train_x=np.array([object()]))
    with pytest.raises(DataFileError, match="pickled.npz"):
        load_npz(pickled)


def test_grey_level_images_are_stored_as_bytes_and_read_back_exactly(tmp_path):
    """A data set read from bytes (Fashion-MNIST's levels / 255) is stored at a quarter of the size and comes back
    as the same float32 values; other floats (the digits' sixteenths) are stored as they are."""
    from codesign.loops.data import from_levels

    rng = np.random.default_rng(1)
    levels = rng.integers(0, 256, (40, 1, 28, 28)).astype(np.uint8)
    x, y = from_levels(levels), rng.integers(0, 10, 40)
    data = ArrayDataset(train_x=x[:30], train_y=y[:30], test_x=x[30:], test_y=y[30:], classes=10)
    path = save_npz(data, tmp_path / "fashion.npz")
    with np.load(path) as stored:
        assert stored["train_x"].dtype == np.uint8
    back = load_npz(path)
    assert back.train_x.dtype == np.float32 and np.array_equal(back.train_x, x[:30])
    assert np.array_equal(back.test_x.view(np.uint32), x[30:].view(np.uint32))  # bit for bit
    sixteenths = _data(validation=False)
    sixteenths = ArrayDataset(train_x=(np.round(sixteenths.train_x * 16) / 16).astype(np.float32) + 1 / 32,
                              train_y=sixteenths.train_y, test_x=sixteenths.test_x, test_y=sixteenths.test_y,
                              classes=10)
    with np.load(save_npz(sixteenths, tmp_path / "digits.npz")) as stored:
        assert stored["train_x"].dtype == np.float32
