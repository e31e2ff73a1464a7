"""Every stream PE's library header on its own (no kernel, no Jinja), over the registry: the header checker
(tests/pe/stream_header_check.cpp, built per spec and stream width by tests/pe/conftest.py) replays the golden
stimulus of each verification-grid point and must match every word and read every input word exactly (a TT PE's
64- or 128-bit stream words are 2 or 4 consecutive 32-bit file words); on the first point the
checker is shown to catch a wrong word, a wrong word count, words not read exactly and a file for another
configuration. What is specific to a PE (hand-worked transactions, extra configurations) lives in
tests/pe/<pe>/test_<pe>_header_cases.py.

A registered PE is either checked by the generic tests or named in tests/pe/conftest.py's OWN_FILES with the files
that check it, so none is left out unseen: the pipeline FP-MAC has its own checker and bench.
"""

from __future__ import annotations

import importlib

import numpy as np

from codesign.hw.vectors import write_transactions
from codesign.pe import get_pe, pe_names


def test_every_registered_pe_is_checked_somewhere(stream_registry):
    """By the generic header and RTL tests, or by the files OWN_FILES names, which exist."""
    GENERIC, OWN_FILES, ROOT = stream_registry
    assert all(get_pe(name).handshake == "stream" for name in GENERIC)
    for kind, own in OWN_FILES.items():
        assert set(GENERIC) | set(own) == set(pe_names()), kind
        missing = [path for paths in own.values() for path in paths if not (ROOT / path).is_file()]
        assert not missing, missing


def test_pes_with_their_own_quick_rtl_test_have_it(stream_registry, own_quick_rtl):
    """A PE that leaves its quick RTL run to a test of its own is a generic PE, and that test exists, is not
    ``slow`` or ``long`` itself and has a case that is neither, so make test cannot silently lose the PE's RTL."""
    GENERIC, _, ROOT = stream_registry
    assert set(own_quick_rtl) <= set(GENERIC)
    for path, name in own_quick_rtl.values():
        assert (ROOT / path).is_file(), path
        module = importlib.import_module(path.removesuffix(".py").replace("/", "."))
        marks = getattr(getattr(module, name), "pytestmark", [])
        assert not {"slow", "long"} & {mark.name for mark in marks}, (path, name)
        cases = [value for mark in marks if mark.name == "parametrize" for value in mark.args[1]]
        assert any(not {"slow", "long"} & {mark.name for mark in getattr(case, "marks", ())} for case in cases)


def test_header_matches_golden_stimulus(header_checker, tmp_path, stream_grid_case, grid_stimulus):
    name, case = stream_grid_case
    transactions = grid_stimulus(name, case)
    vectors, mismatches, done = header_checker.run(name, case.spec, transactions, tmp_path)
    assert (vectors, mismatches) == (len(transactions), 0), done.stdout


def test_checker_reports_a_wrong_expected_word(header_checker, tmp_path, first_case):
    name, case, transactions = first_case
    at = max(range(len(transactions)), key=lambda t: len(transactions[t][1]))
    words_in, words_out = transactions[at]
    wrong = words_out.copy()
    wrong[-1] ^= np.uint64(1)
    vectors, mismatches, done = header_checker.run(name, case.spec, [transactions[0], (words_in, wrong)], tmp_path)
    assert (vectors, mismatches) == (2, 1)
    assert "mismatch transaction=1" in done.stdout


def test_checker_reports_a_wrong_word_count(header_checker, tmp_path, first_case):
    name, case, transactions = first_case
    words_in, words_out = transactions[0]
    cases = [(words_in, np.append(words_out, np.uint64(0))), (words_in, words_out[:-1])]
    vectors, mismatches, _ = header_checker.run(name, case.spec, cases, tmp_path)
    assert (vectors, mismatches) == (2, 2)


def test_checker_reports_words_not_read_exactly(header_checker, tmp_path, first_case, stream_parts):
    """A stream word too many stays in the stream; a stream word too few makes process() read an empty stream."""
    name, case, transactions = first_case
    parts = stream_parts(name, case.spec)
    at = max(range(len(transactions)), key=lambda t: len(transactions[t][0]))
    words_in, words_out = transactions[at]
    cases = [(np.append(words_in, np.full(parts, 5, dtype=np.uint64)), words_out), (words_in[:-parts], words_out)]
    vectors, mismatches, done = header_checker.run(name, case.spec, cases, tmp_path)
    assert (vectors, mismatches) == (2, 2)
    assert f"input_left={parts} " in done.stdout and "over_read=1" in done.stdout


def test_checker_refuses_a_file_for_another_configuration(header_checker, tmp_path, first_case):
    name, case, transactions = first_case
    meta = get_pe(name).vector_meta(case.spec)
    key = next(iter(meta))
    path = write_transactions(tmp_path / "other.txn", pe=name, transactions=transactions[:1],
                              meta={**meta, key: f"{meta[key]}0"})
    done = header_checker.run_file(name, case.spec, path)
    assert done.returncode == 2 and key in done.stderr


def test_checker_refuses_a_malformed_file(header_checker, tmp_path, first_case):
    name, case, _ = first_case
    path = tmp_path / "bad.txn"
    path.write_text(f"# codesign-transactions v1\n# pe={name} count=1 word_bits=32\n# \n3 1 10000 ff\n")
    done = header_checker.run_file(name, case.spec, path)
    assert done.returncode == 2
