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


# --- transaction files (stream PEs) ---------------------------------------------------------------

from codesign.hw.vectors import read_transactions, write_transactions  # noqa: E402


def test_transactions_round_trip(tmp_path):
    path = write_transactions(tmp_path / "t.txt", pe="demo", meta={"k": 3},
                              transactions=[([1, 0xFFFFFFFF], [7]), ([5], [])])
    transactions, meta = read_transactions(path, pe="demo")
    assert meta == {"k": "3"}
    assert [(list(a), list(b)) for a, b in transactions] == [([1, 0xFFFFFFFF], [7]), ([5], [])]


@pytest.mark.parametrize(
    "mutate, message",
    [
        (lambda text: text.replace("3 1 a b c 7", "3 1 a b c"), "truncated or too long"),
        (lambda text: text.replace("3 1 a b c 7", "3 1 a b c 7 8"), "truncated or too long"),
        (lambda text: text.replace("count=2", "count=3"), "declares count=3 but holds 2"),
        (lambda text: text.replace("pe=demo", "pe=other"), "expected 'demo'"),
        (lambda text: text.replace("word_bits=32", "word_bits=16"), "word_bits"),
        (lambda text: text.replace("3 1 a b c 7", "3 1 a b 1ffffffff 7"), "wider than 32 bits"),
        (lambda text: text.replace("3 1 a b c 7", "3 1 a b zz 7"), "not hexadecimal"),
        (lambda text: text.replace("# codesign-transactions v1", "# codesign-vectors v1"), "not a codesign transaction"),
    ],
)
def test_transaction_reader_refuses_bad_files(tmp_path, mutate, message):
    path = write_transactions(tmp_path / "t.txt", pe="demo", meta={}, transactions=[([10, 11, 12], [7]), ([1], [2])])
    path.write_text(mutate(path.read_text()))
    with pytest.raises(VectorFileError, match=message):
        read_transactions(path, pe="demo")


def test_transaction_writer_refuses_wide_words_and_empty_input(tmp_path):
    with pytest.raises(VectorFileError, match="wider than 32"):
        write_transactions(tmp_path / "t.txt", pe="demo", meta={}, transactions=[([1 << 32], [])])
    with pytest.raises(VectorFileError, match="no input word"):
        write_transactions(tmp_path / "t.txt", pe="demo", meta={}, transactions=[([], [1])])
    assert not (tmp_path / "t.txt").exists()
