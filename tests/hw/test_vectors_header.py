"""The shared C++ reader (hls_templates/include/codesign_vectors.h) reads what codesign.hw.vectors writes, and refuses the rest."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from codesign.hw.csim import compile_testbench
from codesign.hw.vectors import write_transactions, write_vectors
from codesign.resources import data_dir

HERE = Path(__file__).resolve().parent
pytestmark = pytest.mark.skipif(shutil.which(os.environ.get("CXX", "g++")) is None,
                                reason="no C++ compiler: g++ (or $CXX) is not on PATH")


@pytest.fixture(scope="module")
def reader(tmp_path_factory) -> Path:
    build = compile_testbench([HERE / "vectors_header_check.cpp"], include_dirs=[data_dir("hls_templates") / "include"],
                              build_dir=tmp_path_factory.mktemp("build"), name="vectors_header_check")
    return build.executable


def _run(reader: Path, kind: str, path: Path) -> subprocess.CompletedProcess:
    return subprocess.run([str(reader), kind, str(path)], capture_output=True, text=True, timeout=60)


def test_reads_columns_as_written(reader, tmp_path):
    rng = np.random.default_rng(3)
    columns = {name: rng.integers(0, 1 << 63, 50, dtype=np.uint64) for name in "abc"}
    path = write_vectors(tmp_path / "v.txt", pe="demo", columns=columns, meta={"width": 12})
    done = _run(reader, "columns", path)
    assert done.returncode == 0, done.stderr
    got = [[int(field, 16) for field in line.split()] for line in done.stdout.splitlines()]
    assert got == [[int(columns[n][i]) for n in "abc"] for i in range(50)]


def test_reads_transactions_as_written(reader, tmp_path):
    transactions = [([1, 0xFFFFFFFF, 3], [4, 5]), ([9], []), ([0], [0xDEADBEEF])]
    path = write_transactions(tmp_path / "t.txt", pe="demo", meta={}, transactions=transactions)
    done = _run(reader, "transactions", path)
    assert done.returncode == 0, done.stderr
    got = []
    for line in done.stdout.splitlines():
        words_in, words_out = line.split("|")
        got.append(([int(w, 16) for w in words_in.split()], [int(w, 16) for w in words_out.split()]))
    assert got == [(list(a), list(b)) for a, b in transactions]


@pytest.mark.parametrize(
    "kind, mutate, message",
    [
        ("columns", lambda t: t.rsplit("\n", 2)[0] + "\n", "declares count=2 but holds 1 rows"),
        ("columns", lambda t: t.replace("width=12", "width=13"), "vectors are for width=13"),
        ("columns", lambda t: t.replace("columns=a,b,c", "columns=a,b"), "has columns"),
        ("columns", lambda t: t.replace("pe=demo", "pe=fpmac"), "expected 'demo'"),
        ("columns", lambda t: t.replace("1 2 3", "1 2 x3"), "not hexadecimal"),
        ("columns", lambda t: t.replace("1 2 3", "1 2"), "expected 3 hexadecimal fields"),
        ("transactions", lambda t: t.replace("2 1 1 2 3", "2 1 1 2"), "truncated"),
        ("transactions", lambda t: t.replace("count=2", "count=5"), "declares count=5"),
        ("transactions", lambda t: t.replace("2 1 1 2 3", "2 1 1 2 100000000"), "wider than 32 bits"),
        ("transactions", lambda t: t.replace("# codesign-transactions v1", "# codesign-vectors v1"), "first line"),
    ],
)
def test_refuses_bad_files_with_exit_status_2(reader, tmp_path, kind, mutate, message):
    if kind == "columns":
        path = write_vectors(tmp_path / "v.txt", pe="demo", columns={"a": [1, 4], "b": [2, 5], "c": [3, 6]},
                             meta={"width": 12})
    else:
        path = write_transactions(tmp_path / "t.txt", pe="demo", meta={}, transactions=[([1, 2], [3]), ([4], [5])])
    path.write_text(mutate(path.read_text()))
    done = _run(reader, kind, path)
    assert done.returncode == 2 and message in done.stderr, (done.returncode, done.stderr)


def test_missing_file_is_refused(reader, tmp_path):
    done = _run(reader, "columns", tmp_path / "absent.txt")
    assert done.returncode == 2 and "cannot be opened" in done.stderr
