import numpy as np
import pytest

from codesign.hw.vectors import VectorFileError, read_vectors, write_vectors

COLUMNS = ("a", "b")


def test_round_trip_keeps_columns_and_meta(tmp_path):
    path = write_vectors(tmp_path / "v.txt", pe="demo", columns={"a": [1, 0xFFFFFFFF], "b": [2, 3]}, meta={"seed": 4})
    columns, meta = read_vectors(path, pe="demo", columns=COLUMNS)
    assert columns["a"].tolist() == [1, 0xFFFFFFFF] and columns["b"].tolist() == [2, 3] and meta == {"seed": "4"}


@pytest.mark.parametrize(
    "mutate, message",
    [
        (lambda text: text.replace("# codesign-vectors v1", "# something else"), "not a codesign vector file"),
        (lambda text: text.rsplit("\n", 2)[0] + "\n", "declares count=2 but holds 1 rows"),
        (lambda text: text.replace("columns=a,b", "columns=a,c"), "has columns"),
        (lambda text: text.replace("pe=demo", "pe=other"), "pe='other'"),
        (lambda text: text.replace("2\n", "zz\n", 1), "not hexadecimal"),
        (lambda text: text.replace(" 2\n", "\n", 1), "row 1 has 1 fields"),
    ],
)
def test_bad_files_fail_loudly(tmp_path, mutate, message):
    path = write_vectors(tmp_path / "v.txt", pe="demo", columns={"a": [1, 5], "b": [2, 3]}, meta={})
    path.write_text(mutate(path.read_text()))
    with pytest.raises(VectorFileError, match=message):
        read_vectors(path, pe="demo", columns=COLUMNS)


def test_missing_file_and_unequal_columns(tmp_path):
    with pytest.raises(VectorFileError, match="does not exist"):
        read_vectors(tmp_path / "absent.txt", pe="demo", columns=COLUMNS)
    with pytest.raises(VectorFileError, match="differ in length"):
        write_vectors(tmp_path / "v.txt", pe="demo", columns={"a": np.arange(3), "b": np.arange(2)}, meta={})
    assert not (tmp_path / "v.txt").exists()
