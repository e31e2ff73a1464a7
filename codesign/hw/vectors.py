"""Golden vector files: the hand-off between the golden model and every hardware harness.

Text, so that a C++ testbench can read it without a library::

    # codesign-vectors v1
    # pe=fpmac count=3 columns=a,b,c,fb,expected
    # exp_bits=8 max_fb=23 rounding=nearest_even
    3f800000 40000000 00000000 17 40000000
    ...

Every row holds one hexadecimal field per column. Readers check the magic
line, the column names and the row count, and fail on a short or malformed
file: a harness never falls back to default stimulus.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from codesign.contracts.constants import WORD_BITS
from codesign.io.reports import write_text_atomic

MAGIC = "# codesign-vectors v1"


class VectorFileError(ValueError):
    """A vector file is missing, short, or does not match what the harness expects."""


def write_vectors(path: Path, *, pe: str, columns: dict[str, np.ndarray], meta: dict[str, object]) -> Path:
    """Write columns (equal-length unsigned integer arrays) atomically to ``path``."""
    names = list(columns)
    if not names:
        raise VectorFileError("no columns to write")
    arrays = [np.asarray(columns[name], dtype=np.uint64).reshape(-1) for name in names]
    count = arrays[0].size
    if any(array.size != count for array in arrays):
        raise VectorFileError(f"columns differ in length: {[array.size for array in arrays]}")
    lines = [MAGIC, f"# pe={pe} count={count} columns={','.join(names)}"]
    lines.append("# " + " ".join(f"{key}={value}" for key, value in meta.items()))
    hex_columns = [np.char.mod("%x", array) for array in arrays]
    rows = [" ".join(fields) for fields in zip(*hex_columns)]
    text = "\n".join(lines + rows) + "\n"
    return write_text_atomic(path, text)


def read_vectors(path: Path, *, pe: str, columns: tuple[str, ...]) -> tuple[dict[str, np.ndarray], dict[str, str]]:
    """Read and check a vector file; return its columns and its metadata line as strings."""
    path = Path(path)
    if not path.is_file():
        raise VectorFileError(f"vector file {path} does not exist")
    lines = path.read_text().splitlines()
    if len(lines) < 3 or lines[0] != MAGIC:
        raise VectorFileError(f"{path} is not a codesign vector file (first line must be {MAGIC!r})")
    header = dict(field.split("=", 1) for field in lines[1][2:].split())
    if not lines[2].startswith("#"):
        raise VectorFileError(f"{path} line 3 must be the '# key=value ...' metadata line")
    meta = dict(field.split("=", 1) for field in lines[2][1:].split())
    if header.get("pe") != pe:
        raise VectorFileError(f"{path} holds vectors for pe={header.get('pe')!r}, expected {pe!r}")
    found = tuple(header.get("columns", "").split(","))
    if found != columns:
        raise VectorFileError(f"{path} has columns {found}, expected {columns}")
    count = int(header.get("count", "-1"))
    rows = [line.split() for line in lines[3:] if line.strip()]
    if count < 1 or len(rows) != count:
        raise VectorFileError(f"{path} declares count={count} but holds {len(rows)} rows")
    if any(len(row) != len(columns) for row in rows):
        bad = next(index for index, row in enumerate(rows) if len(row) != len(columns))
        raise VectorFileError(f"{path} row {bad + 1} has {len(rows[bad])} fields, expected {len(columns)}")
    try:
        table = np.array([[int(field, 16) for field in row] for row in rows], dtype=np.uint64)
    except ValueError as error:
        raise VectorFileError(f"{path} holds a field that is not hexadecimal: {error}") from None
    return {name: table[:, index] for index, name in enumerate(columns)}, meta


# ---------------------------------------------------------------------------- transaction files
#
# Stream PEs (valid/ready word streams) exchange *transactions*: the words one
# operation streams in and the words it must stream out. One line each:
#
#     # codesign-transactions v1
#     # pe=csb count=2 word_bits=32
#     # block_rows=16 block_cols=16 ...
#     3 2 10000 ff 7 0 2a
#     ...
#
# ``n_in n_out`` then ``n_in`` input words then ``n_out`` expected output
# words, all hexadecimal. Readers check magic, PE, count and every line's
# length, and refuse words wider than ``word_bits``.

TRANSACTION_MAGIC = "# codesign-transactions v1"


def write_transactions(path: Path, *, pe: str, transactions, meta: dict[str, object]) -> Path:
    """Write ``transactions`` (pairs of input and expected output word arrays) atomically to ``path``."""
    pairs = [(np.asarray(words_in, dtype=np.uint64).reshape(-1), np.asarray(words_out, dtype=np.uint64).reshape(-1))
             for words_in, words_out in transactions]
    if not pairs:
        raise VectorFileError("no transactions to write")
    limit = np.uint64((1 << WORD_BITS) - 1)
    for index, (words_in, words_out) in enumerate(pairs):
        if words_in.size == 0:
            raise VectorFileError(f"transaction {index} streams no input word")
        if np.any(words_in > limit) or np.any(words_out > limit):
            raise VectorFileError(f"transaction {index} holds a word wider than {WORD_BITS} bits")
    lines = [TRANSACTION_MAGIC, f"# pe={pe} count={len(pairs)} word_bits={WORD_BITS}"]
    lines.append("# " + " ".join(f"{key}={value}" for key, value in meta.items()))
    for words_in, words_out in pairs:
        fields = [f"{words_in.size:x}", f"{words_out.size:x}", *np.char.mod("%x", words_in),
                  *np.char.mod("%x", words_out)]
        lines.append(" ".join(fields))
    return write_text_atomic(path, "\n".join(lines) + "\n")


def read_transactions(path: Path, *, pe: str) -> tuple[list[tuple[np.ndarray, np.ndarray]], dict[str, str]]:
    """Read and check a transaction file; return ``[(words_in, words_out), ...]`` (uint64) and its metadata."""
    path = Path(path)
    if not path.is_file():
        raise VectorFileError(f"vector file {path} does not exist")
    lines = path.read_text().splitlines()
    if len(lines) < 3 or lines[0] != TRANSACTION_MAGIC:
        raise VectorFileError(f"{path} is not a codesign transaction file (first line must be {TRANSACTION_MAGIC!r})")
    header = dict(field.split("=", 1) for field in lines[1][2:].split() if "=" in field)
    if not lines[2].startswith("#"):
        raise VectorFileError(f"{path} line 3 must be the '# key=value ...' metadata line")
    meta = dict(field.split("=", 1) for field in lines[2][1:].split() if "=" in field)
    if header.get("pe") != pe:
        raise VectorFileError(f"{path} holds transactions for pe={header.get('pe')!r}, expected {pe!r}")
    if header.get("word_bits") != str(WORD_BITS):
        raise VectorFileError(f"{path} has word_bits={header.get('word_bits')!r}, expected {WORD_BITS}")
    count = int(header.get("count", "-1"))
    rows = [line.split() for line in lines[3:] if line.strip()]
    if count < 1 or len(rows) != count:
        raise VectorFileError(f"{path} declares count={count} but holds {len(rows)} transactions")
    transactions = []
    for number, row in enumerate(rows, start=1):
        try:
            values = [int(field, 16) for field in row]
        except ValueError as error:
            raise VectorFileError(f"{path} transaction {number}: a field is not hexadecimal: {error}") from None
        if len(values) < 2 or values[0] < 1 or len(values) != 2 + values[0] + values[1]:
            raise VectorFileError(f"{path} transaction {number} is truncated or too long: it declares "
                                  f"{values[:2]} words and holds {len(values) - 2}")
        if any(value >> WORD_BITS for value in values[2:]):
            raise VectorFileError(f"{path} transaction {number} holds a word wider than {WORD_BITS} bits")
        words = np.array(values[2:], dtype=np.uint64)
        transactions.append((words[:values[0]], words[values[0]:]))
    return transactions, meta
